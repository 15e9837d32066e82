"""The SDF benchmark trains from sample pools where open3d, pymcubes and nerfstudio are all missing (a GPU box)."""

import json
import subprocess
import sys

import numpy as np

from rff_field.sdf.data import MeshSDF, build_pool, load_shape
from tests import import_blocker

BLOCKER = (
    import_blocker("open3d", "mcubes", "nerfstudio")
    + """
import runpy
sys.argv = ["rff-sdf", *sys.argv[1:]]
runpy.run_module("rff_field.cli.sdf", run_name="__main__", alter_sys=True)
"""
)


def test_bench_from_pools_without_open3d_pymcubes_or_nerfstudio(tmp_path):
    _, mesh, _ = load_shape(None)
    pool = tmp_path / "generated.npz"
    np.savez(pool, **build_pool(MeshSDF(mesh, seed=0), 6000, "generated", surface_samples=3000))
    out = tmp_path / "gpu"
    # fmt: off
    cmd = [
        sys.executable, "-c", BLOCKER, "bench",
        "--pools", str(pool), "--out", str(out), "--methods", "filtered-pe", "bacon", "--iters", "20",
        "--points-per-step", "300", "--resolution", "24", "--eval-samples", "2000", "--device", "cpu",
        "--hidden-features", "32", "--hidden-layers", "2", "--pe-frequencies", "6", "--bacon-max-frequency", "32",
        "--no-render", "--no-save-model", "--budget-s", "600",
    ]
    # fmt: on
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    for method in ("filtered-pe", "bacon"):
        metrics = json.loads((out / "runs" / "generated" / method / "metrics.json").read_text())
        assert metrics["iters"] == 20 and metrics["distance"] == "kdtree" and metrics["hidden_features"] == 32
    assert (out / "results.md").is_file()
