"""Slow: a short fit of the decimated Stanford bunny gives a closed mesh close to the scan."""

import json

import pytest

from rff_field.cli import sdf as cli
from tests import SHARED_DATA

BUNNY = SHARED_DATA / "meshes" / "bunny-decimated-5k.obj"


@pytest.mark.slow
@pytest.mark.skipif(not BUNNY.is_file(), reason=f"needs {BUNNY}")
def test_short_fit_of_the_decimated_bunny_is_closed_and_close(tmp_path):
    out = tmp_path / "bunny"
    # fmt: off
    cli.main([
        "fit", "--mesh", str(BUNNY), "--out", str(out), "--method", "filtered-pe",
        "--hidden-features", "96", "--hidden-layers", "3", "--pe-frequencies", "12",
        "--iters", "1500", "--points-per-step", "4000", "--resolution", "128", "--eval-samples", "50000",
        "--no-save-model",
    ])
    # fmt: on
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["mesh_closed"], "marching cubes of the fit should give a closed surface"
    assert metrics["chamfer"] < 3e-5  # mean squared distance, both directions, normalised units
    assert metrics["f_score"] > 0.6 and metrics["normal_consistency"] > 0.9
