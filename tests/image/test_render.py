"""A finished fit's weights: the network rebuilt from its folder gives the fitted reconstruction again, and renders
on finer grids; ``rff-image render`` refuses what is not a finished fit and keeps existing files."""

import math
import sys
from dataclasses import replace

import pytest
import torch

from rff_field.cli import image as cli
from rff_field.image.fit import IMAGE_METHODS, fit_image, write_fit_outputs
from rff_field.image.render import load_fitted_network, render_image
from tests.image.test_fit import small, smooth_image

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("method", IMAGE_METHODS)
def test_the_rebuilt_network_gives_the_fitted_reconstruction(method, tmp_path):
    image = smooth_image(24)[:, :20]  # not square: the WIRE PE's bands follow the longer side
    config = small(method, iters=3)
    config.network = replace(config.network, pe="wire")
    result = fit_image(image, config, progress=False)
    write_fit_outputs(result, tmp_path)
    network, metrics = load_fitted_network(tmp_path)
    assert metrics["method"] == method
    again = render_image(network, 24, 20, batch=100)
    assert torch.allclose(again, result.reconstruction, atol=1e-5)
    finer = render_image(network, 48, 40)
    assert finer.shape == (48, 40, 3) and torch.isfinite(finer).all()


def run_cli(monkeypatch, capsys, *args):
    monkeypatch.setattr(sys, "argv", ["rff-image", *map(str, args)])
    try:
        cli.entrypoint()
        code = 0
    except SystemExit as exit_:
        code = exit_.code
    return code, capsys.readouterr().err


def test_render_writes_a_finer_png_and_refuses_what_is_not_a_finished_fit(tmp_path, monkeypatch, capsys):
    write_fit_outputs(fit_image(smooth_image(16), small("filtered-pe", iters=2), progress=False), tmp_path / "fit")
    assert run_cli(monkeypatch, capsys, "render", "--fit", tmp_path / "fit", "--scale", "2.5") == (0, "")
    import imageio.v3 as iio

    assert iio.imread(tmp_path / "fit" / "render-x2.5.png").shape == (40, 40, 3)
    code, err = run_cli(monkeypatch, capsys, "render", "--fit", tmp_path / "fit", "--scale", "2.5")
    assert code == 2 and "already exists" in err
    code, err = run_cli(monkeypatch, capsys, "render", "--fit", tmp_path, "--scale", "0")
    assert code == 2 and "--scale must be positive" in err
    code, err = run_cli(monkeypatch, capsys, "render", "--fit", tmp_path)
    assert code == 2 and "has no metrics.json or model.pt: not a finished fit" in err and err.count("\n") == 1
    (tmp_path / "fit" / "model.pt").rename(tmp_path / "model.pt")  # as an earlier version's fit
    code, err = run_cli(monkeypatch, capsys, "render", "--fit", tmp_path / "fit", "--scale", "3")
    assert code == 2 and "fits made before rff-field kept their weights have none; run the same fit again" in err
    (tmp_path / "model.pt").rename(tmp_path / "fit" / "model.pt")
    code, err = run_cli(monkeypatch, capsys, "render", "--fit", tmp_path / "fit" / "metrics.json")
    assert code == 2 and "metrics.json is not a folder; give the --out folder of a finished `rff-image fit`" in err
    new_folder = tmp_path / "renders" / "x1" / "r.png"
    assert run_cli(
        monkeypatch, capsys, "render", "--fit", tmp_path / "fit", "--scale", "1", "--output-path", new_folder
    ) == (0, "")
    assert iio.imread(new_folder).shape == (16, 16, 3)
    weights = torch.load(tmp_path / "fit" / "model.pt", weights_only=True)
    torch.save(
        {name: torch.full_like(value, math.nan) for name, value in weights.items()}, tmp_path / "fit" / "model.pt"
    )
    code, err = run_cli(monkeypatch, capsys, "render", "--fit", tmp_path / "fit", "--output-path", tmp_path / "x.png")
    assert code == 2 and "non-finite values: its training diverged" in err and not (tmp_path / "x.png").exists()


def test_a_fit_run_again_removes_the_renders_of_its_earlier_weights(tmp_path):
    fit = tmp_path / "fit"
    write_fit_outputs(fit_image(smooth_image(16), small("mlp-pe", iters=2), progress=False), fit)
    network, _ = load_fitted_network(fit)
    from rff_field.image.data import save_image

    save_image(render_image(network, 32, 32), fit / "render-x2.png")
    (fit / "notes.txt").write_text("mine")
    write_fit_outputs(fit_image(smooth_image(16), small("siren", iters=2), progress=False), fit, overwrite=True)
    assert not (fit / "render-x2.png").exists() and (fit / "notes.txt").read_text() == "mine"
