"""rff-image end to end, in-process: fit -> comparison PNG -> render; a diverged fit; the frequency warning."""

import json
import logging

import numpy as np
import pytest
from PIL import Image

from rff_field.cli.image import entrypoint
from tests import exit_status


def rff_image(*args):
    """Run ``rff-image args``; its exit status."""
    return exit_status(entrypoint, args)


@pytest.fixture(scope="module")
def picture(tmp_path_factory):
    path = tmp_path_factory.mktemp("images") / "stripes.png"
    y, x = np.mgrid[0:24, 0:32]
    Image.fromarray((np.stack([x * 8, y * 10, (x + y) * 4], -1) % 256).astype(np.uint8)).save(path)
    return path


SMALL = ["--no-progress", "--lpips", "False", "--hidden-features", "16", "--log-every", "5"]


def test_fit_writes_the_comparison_and_render_samples_a_finer_grid(picture, tmp_path):
    out = tmp_path / "fit"
    assert rff_image("fit", "--image", picture, "--output-dir", out, "--passes", "20", *SMALL) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["method"] == "filtered-pe" and len(metrics["psnr_history"]) == 20 and metrics["filter_lr_history"]
    assert not (out / "checkpoint.pt").exists()
    width, height = Image.open(out / "comparison.png").size
    assert width > 2.5 * height  # ground truth, fit and error side by side
    assert rff_image("render", "--fit", out, "--resolution-scale", "2") == 0
    assert Image.open(out / "render-x2.png").size == (64, 48)
    assert rff_image("render", "--fit", out, "--resolution-scale", "2") == 2  # not overwritten without --overwrite


def test_a_diverged_fit_exits_3_and_cannot_be_rendered(picture, tmp_path, capsys):
    out = tmp_path / "diverged"
    assert rff_image("fit", "--image", picture, "--output-dir", out, "--passes", "10", "--lr", "1e30", *SMALL) == 3
    assert "training diverged" in capsys.readouterr().err
    assert json.loads((out / "metrics.json").read_text())["diverged"]
    assert rff_image("render", "--fit", out) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "diverged" in error[0]


def test_frequencies_beyond_the_grid_warn_in_one_line(picture, tmp_path, caplog):
    args = ["fit", "--image", picture, "--passes", "1", *SMALL, "--embedding.pe-bands", "loglinear"]
    with caplog.at_level(logging.WARNING, logger="rff_field"):
        assert rff_image(*args, "--output-dir", tmp_path / "a", "--embedding.pe-scale", "1e30") == 0
    warnings = [record.getMessage() for record in caplog.records if "--embedding.pe-scale" in record.getMessage()]
    assert len(warnings) == 1 and "\n" not in warnings[0]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="rff_field"):
        assert rff_image(*args, "--output-dir", tmp_path / "b", "--embedding.pe-scale", "4") == 0
    assert not [record for record in caplog.records if record.levelno >= logging.WARNING]


def test_sape_fits_in_mini_batches(picture, tmp_path):
    out = tmp_path / "sape"
    args = [
        "fit",
        "--image",
        picture,
        "--output-dir",
        out,
        "--passes",
        "4",
        "--method",
        "sape",
        "--batch-size",
        "300",
        *SMALL,
    ]
    assert rff_image(*args) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["method"] == "sape" and len(metrics["psnr_history"]) == 4 and len(metrics["loss_history"]) == 12
    assert "sape_revealed_fraction" in metrics
