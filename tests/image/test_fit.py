"""Fitting an image: every method learns, outputs and metrics are complete, runs are reproducible, the options of
the filter's learning rate behave as documented, and the command line reports bad input in one line."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest
import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

from rff_field.cli import image as cli
from rff_field.core.optim import LineSearchConfig
from rff_field.image.data import UsageError, pixel_coordinates
from rff_field.image.fit import IMAGE_METHODS, FitConfig, PixelPredictor, finish_fit, fit_image, prepare_image, run_fit
from rff_field.inr.config import NetworkConfig, build_network

METRIC_KEYS = {
    "method", "image", "height", "width", "iters", "psnr", "best_psnr", "ssim", "lpips", "seconds_per_iter",
    "num_params", "num_filter_params", "params_per_value", "psnr_history", "filter_lr_history", "config", "machine",
}  # fmt: skip


def smooth_image(size: int = 32, channels: int = 3) -> torch.Tensor:
    y, x = torch.meshgrid(torch.linspace(0, 1, size), torch.linspace(0, 1, size), indexing="ij")
    planes = [0.5 + 0.4 * torch.sin(2 * math.pi * (k + 1) * x) * torch.cos(2 * math.pi * y * (k + 2)) for k in range(3)]
    return torch.stack(planes[:channels], dim=-1)


OFF = LineSearchConfig(enabled=False)


def small(method: str, **kwargs) -> FitConfig:
    network = NetworkConfig(method=method, hidden_features=32, rff_frequencies=32, pe="loglinear", pe_frequencies=8,
                            pe_scale=8.0)  # fmt: skip
    defaults = dict(iters=30, device="cpu", lpips=False, log_every=10)
    defaults.update(kwargs)
    return FitConfig(network=network, **defaults)


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("method", IMAGE_METHODS)
def test_every_method_lowers_the_loss(method):
    result = fit_image(smooth_image(), small(method), progress=False)
    history = result.metrics["psnr_history"]
    assert len(history) == 30
    assert result.metrics["psnr"] > history[0] + 0.5
    assert result.metrics["best_psnr"] >= result.metrics["psnr"] - 1e-9
    assert result.reconstruction.shape == (32, 32, 3)


def test_wire_pe_and_grayscale():
    result = fit_image(smooth_image(32, 1), _wire_pe(), progress=False)
    assert result.reconstruction.shape == (32, 32, 1)
    assert result.metrics["embedding_dim"] == 2 * 2 * 3 + 2  # floor(log2(32 / 4)) = 3 bands, input included


def test_wire_bands_option():
    config = _wire_pe()
    config.network.wire_bands = 4
    result = fit_image(smooth_image(16), config, progress=False)
    assert result.metrics["embedding_dim"] == 2 * 2 * 4 + 2


def _wire_pe() -> FitConfig:
    config = small("filtered-pe")
    config.network.pe = "wire"
    return config


def test_run_fit_writes_every_output_and_key(tmp_path):
    iio.imwrite(tmp_path / "img.png", (smooth_image(24).numpy() * 255).astype(np.uint8))
    out = tmp_path / "out"
    metrics = run_fit(tmp_path / "img.png", out, small("filtered-rff", dump_embedding=3), progress=False)
    for name in ("metrics.json", "reconstruction.png", "error.png", "curves.png", "embedding.png"):
        assert (out / name).is_file(), name
    stored = json.loads((out / "metrics.json").read_text())
    assert METRIC_KEYS <= set(stored)
    assert stored["method"] == "filtered-rff" and stored["image"] == "img"
    assert (stored["height"], stored["width"], stored["iters"]) == (24, 24, 30)
    assert stored["lpips"] is None
    assert len(stored["filter_lr_history"]) == 30
    assert stored["num_params"] == metrics["num_params"] > stored["num_filter_params"] > 0
    assert stored["params_per_value"] == pytest.approx(stored["num_params"] / (24 * 24 * 3))
    assert iio.imread(out / "reconstruction.png").shape == (24, 24, 3)


def test_existing_outputs_are_not_overwritten_without_the_flag(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "metrics.json").write_text("{}")
    with pytest.raises(UsageError, match="overwrite"):
        run_fit(None, out, small("mlp-pe", iters=2), downsample_factor=32, progress=False)
    assert (out / "metrics.json").read_text() == "{}"
    run_fit(None, out, small("mlp-pe", iters=2), downsample_factor=32, overwrite=True, progress=False)
    assert json.loads((out / "metrics.json").read_text())["iters"] == 2


def test_seeded_runs_are_reproducible():
    a = fit_image(smooth_image(), small("filtered-pe", iters=15, seed=3), progress=False).metrics
    b = fit_image(smooth_image(), small("filtered-pe", iters=15, seed=3), progress=False).metrics
    c = fit_image(smooth_image(), small("filtered-pe", iters=15, seed=4), progress=False).metrics
    assert a["psnr_history"] == b["psnr_history"] and a["psnr"] == b["psnr"]
    assert a["filter_lr_history"] == b["filter_lr_history"]
    assert a["psnr_history"] != c["psnr_history"]


def test_the_best_psnr_is_the_best_iterations_or_the_final_models():
    image, fit = smooth_image(16), small("mlp-pe", iters=3)
    model = build_network(fit.network, 2, 3, 16)
    forward = PixelPredictor(model, pixel_coordinates(16, 16), True)

    def metrics(mse: list[float]) -> dict:
        history = torch.tensor(mse, dtype=torch.float64)
        return finish_fit(model, forward, image, fit, "smooth", history, 0.0, 1e-3, None, None, print).metrics

    peak = metrics([1e-1, 1e-12, 1e-1])  # 120 dB at iteration 1: no untrained network comes near
    assert (peak["best_iter"], peak["best_psnr"]) == (1, 120.0)
    final = metrics([1e3] * 3)  # -30 dB: the untrained network does better
    assert final["best_iter"] == 3 and final["best_psnr"] > -30.0


def test_filter_learning_rate_options():
    image = smooth_image()
    searched = fit_image(
        image, small("filtered-rff", iters=10, line_search=LineSearchConfig(lr_max=5e-3)), progress=False
    ).metrics
    assert searched["line_search"] and len(searched["line_search_history"]["d_filter"]) == 10
    mse = [10 ** (-psnr / 10) for psnr in searched["psnr_history"]]  # full batch: the loss the line search saw
    assert searched["line_search_history"]["loss"] == pytest.approx(mse, rel=1e-5)
    assert all(0.0 <= lr <= 5e-3 for lr in searched["filter_lr_history"])
    balanced = fit_image(
        image, small("filtered-rff", iters=10, line_search=LineSearchConfig(rule="balance")), progress=False
    ).metrics
    assert balanced["config"]["line_search"]["rule"] == "balance" and all(
        0.0 <= lr <= 1e-3 for lr in balanced["filter_lr_history"]
    )
    constant = fit_image(image, small("filtered-rff", iters=10, line_search=OFF, filter_lr=2e-3), progress=False)
    assert constant.metrics["filter_lr_history"] == [2e-3] * 10 and constant.metrics["line_search_history"] is None
    used = []  # the filter's rate as Adam reads it at each step
    hook = register_optimizer_step_pre_hook(
        lambda optimizer, args, kwargs: used.extend(g["lr"] for g in optimizer.param_groups if g["name"] == "filter")
    )
    try:
        scheduled = small("filtered-rff", iters=10, line_search=OFF, filter_lr=2e-3, filter_schedule=True)
        decayed = fit_image(image, scheduled, progress=False).metrics["filter_lr_history"]
    finally:
        hook.remove()
    assert decayed == used and decayed[0] == 2e-3 and decayed[-1] == pytest.approx(2e-3 * 0.1**0.9)
    assert all(a > b for a, b in zip(decayed, decayed[1:]))
    plain = fit_image(image, small("mlp-rff", iters=3), progress=False).metrics
    assert plain["filter_lr_history"] is None and plain["num_filter_params"] == 0


def test_minibatches_cover_the_image_and_scale_the_rate():
    result = fit_image(smooth_image(), small("mlp-rff", iters=20, batch_size=300), progress=False)
    assert result.metrics["inr_lr"] == pytest.approx(1e-3 * 300 / 1024)
    assert result.metrics["psnr"] > result.metrics["psnr_history"][0]
    # the filter's fixed rate stays what was asked, as the line search's bounds do: only the INR's is scaled
    fixed = small("filtered-rff", iters=2, batch_size=300, line_search=OFF, filter_lr=2e-3)
    metrics = fit_image(smooth_image(), fixed, progress=False).metrics
    assert metrics["inr_lr"] == pytest.approx(1e-3 * 300 / 1024) and set(metrics["filter_lr_history"]) == {2e-3}


@pytest.mark.parametrize("method", ["filtered-rff", "siren"])  # the cached embedding, and coordinates
def test_the_final_reconstruction_runs_in_batches_too(method):
    rows = []
    record = torch.nn.modules.module.register_module_forward_hook(
        lambda module, inputs, _: rows.append(inputs[0].shape[0]) if isinstance(module, torch.nn.Linear) else None
    )
    try:
        result = fit_image(smooth_image(), small(method, iters=2, batch_size=300), progress=False)
    finally:
        record.remove()
    assert max(rows) == 300  # not 1024: a photograph's pixels at once would hold gigabytes of activations
    assert result.reconstruction.shape == (32, 32, 3) and math.isfinite(result.metrics["psnr"])


def test_cached_embedding_gives_the_same_fit():
    a = fit_image(smooth_image(), small("filtered-rff", iters=5), progress=False).metrics["psnr_history"]
    b = fit_image(smooth_image(), small("filtered-rff", iters=5, cache_embedding=False), progress=False)
    assert np.allclose(a, b.metrics["psnr_history"], rtol=1e-5)


def test_an_embedding_over_a_quarter_of_the_memory_is_computed_per_batch(monkeypatch):
    import rff_field.image.fit as fit_module

    size = 32 * 32 * 64 * 4  # pixels x RFF channels (sin and cos of 32 frequencies) x bytes
    cached = fit_image(smooth_image(), small("filtered-rff", iters=5, batch_size=300), progress=False)
    notices = []
    monkeypatch.setattr(fit_module, "memory_bytes", lambda device: 4 * size)  # exactly a quarter: cached
    fit_image(smooth_image(), small("filtered-rff", iters=1), progress=False, notify=notices.append)
    assert notices == []
    monkeypatch.setattr(fit_module, "memory_bytes", lambda device: 4 * size - 4)
    uncached = fit_image(smooth_image(), small("filtered-rff", iters=5, batch_size=300), progress=False,
                         notify=notices.append)  # fmt: skip
    assert (
        len(notices) == 1
        and "1,024 pixels x 64 channels (0.2 MiB)" in notices[0]
        and "computed every step" in notices[0]
    )
    assert np.allclose(cached.metrics["psnr_history"], uncached.metrics["psnr_history"], rtol=1e-5)


def test_the_embedding_picture_is_computed_in_chunks(monkeypatch):
    import rff_field.image.fit as fit_module

    config = small("filtered-rff", iters=2, dump_embedding=3)
    whole = fit_image(smooth_image(), config, progress=False).embedding
    monkeypatch.setattr(fit_module, "EMBEDDING_DUMP_CHUNK", 100)  # 1024 pixels in 11 chunks
    chunked = fit_image(smooth_image(), config, progress=False).embedding
    assert set(whole) == set(chunked) == {"channels", "gamma", "filtered"} and whole["gamma"].shape == (3, 32, 32)
    for key in whole:
        assert np.allclose(whole[key], chunked[key], rtol=1e-6, atol=1e-7)


def test_filter_initialisations():
    from rff_field.inr.config import build_network

    def filter_weights(scheme: str) -> list[torch.Tensor]:
        torch.manual_seed(0)
        network = build_network(NetworkConfig(method="filtered-rff", rff_frequencies=8, filter_init=scheme,
                                              filter_init_gain=0.5), 2, 3)  # fmt: skip
        return [m.weight for m in network.encoding.filter if isinstance(m, torch.nn.Linear)]

    built = filter_weights("default")
    for scheme in ("scaled", "identity", "orthogonal"):
        weights = filter_weights(scheme)
        if scheme == "scaled":
            assert all(torch.equal(w, 0.5 * b) for w, b in zip(weights, built))
        if scheme == "identity":
            assert all(torch.equal(w, 0.5 * torch.eye(16)) for w in weights)
        if scheme == "orthogonal":
            assert all(torch.allclose(w @ w.T, 0.25 * torch.eye(16), atol=1e-5) for w in weights)
    with pytest.raises(ValueError):
        build_network(NetworkConfig(method="filtered-pe", pe="loglinear", filter_init="nope"), 2, 3)


def test_bundled_image_is_downsampled_for_the_cpu():
    assert prepare_image(None, None).pixels.shape == (128, 128, 3)


def test_bad_iterations_and_device():
    with pytest.raises(UsageError, match="iters"):
        fit_image(smooth_image(8), small("mlp-pe", iters=0), progress=False)
    if not torch.cuda.is_available():
        with pytest.raises(UsageError, match="CUDA"):
            fit_image(smooth_image(8), small("mlp-pe", device="cuda"), progress=False)


def run_cli(monkeypatch, *args: str) -> int:
    monkeypatch.setattr(sys, "argv", ["rff-image", *args])
    with pytest.raises(SystemExit) as info:
        cli.entrypoint()
        sys.exit(0)
    return int(info.value.code or 0)


def test_cli_missing_file_is_one_line_and_nonzero(monkeypatch, capsys, tmp_path):
    code = run_cli(monkeypatch, "fit", "--image", str(tmp_path / "missing.png"), "--out", str(tmp_path / "o"))
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "not found" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_cli_unreadable_file(monkeypatch, capsys, tmp_path):
    (tmp_path / "bad.jpg").write_bytes(b"\x00\x01garbage")
    code = run_cli(monkeypatch, "fit", "--image", str(tmp_path / "bad.jpg"), "--out", str(tmp_path / "o"))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "cannot read" in err


def test_cli_fit_runs_and_refuses_to_overwrite(monkeypatch, capsys, tmp_path):
    iio.imwrite(tmp_path / "rgba.png", np.dstack([(smooth_image(16).numpy() * 255).astype(np.uint8),
                                                  np.full((16, 16), 255, np.uint8)]))  # fmt: skip
    args = ["fit", "--image", str(tmp_path / "rgba.png"), "--out", str(tmp_path / "o"), "--method", "filtered-pe",
            "--pe", "loglinear", "--pe-frequencies", "4", "--hidden-features", "16", "--iters", "5", "--no-lpips",
            "--no-line-search", "--filter-bias", "--no-progress", "--device", "cpu"]  # fmt: skip
    assert run_cli(monkeypatch, *args) == 0
    captured = capsys.readouterr()
    assert "alpha" in captured.out and "PSNR" in captured.out
    stored = json.loads((tmp_path / "o" / "metrics.json").read_text())
    assert stored["config"]["network"]["filter_bias"] and not stored["line_search"] and stored["channels"] == 3
    assert stored["source"] == str(tmp_path / "rgba.png") and stored["seed"] == 0
    assert run_cli(monkeypatch, *args) == 2
    assert "--overwrite" in capsys.readouterr().err


def test_cli_invalid_network_setting_is_one_line(monkeypatch, capsys, tmp_path):
    iio.imwrite(tmp_path / "tiny.png", np.zeros((6, 6, 3), np.uint8))
    code = run_cli(monkeypatch, "fit", "--image", str(tmp_path / "tiny.png"), "--out", str(tmp_path / "o"),
                   "--method", "mlp-pe", "--pe", "wire", "--no-progress")  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "too small" in err


@pytest.mark.parametrize("batch_size", [65536, 300])
def test_fit_reads_nothing_on_the_host_per_iteration(batch_size):
    # Reads made by rff_field's code (torch's own, such as Adam's CPU step counters, are left out) must not grow
    # with the iterations: setup and the final metrics read, the training loop does not.
    import rff_field
    from tests.host_reads import HostReads

    counts = []
    for iters in (3, 9):
        config = small("filtered-pe", iters=iters, batch_size=batch_size, log_every=100)
        with HostReads(package=Path(rff_field.__file__).parent) as mode:
            fit_image(smooth_image(16), config, progress=False)
        counts.append(len(mode.reads))
    assert counts[0] == counts[1], mode.reads


def test_bf16_autocast_trains_and_stays_finite():
    result = fit_image(smooth_image(16), small("filtered-pe", iters=20, precision="bf16"), progress=False)
    metrics = result.metrics
    assert all(math.isfinite(p) for p in metrics["psnr_history"]) and math.isfinite(metrics["psnr"])
    assert metrics["psnr"] > metrics["psnr_history"][0] and metrics["config"]["precision"] == "bf16"
    assert result.reconstruction.dtype == torch.float32


PRECISION_CHECK = """
import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook
from rff_field.common.precision import precision_scope
matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn


def state():
    views = {"newer": lambda: (torch.backends.fp32_precision, matmul.fp32_precision, cudnn.conv.fp32_precision),
             "flags": lambda: (matmul.allow_tf32, cudnn.allow_tf32)}
    try:
        return {name: view() for name, view in views.items()}
    except RuntimeError:  # torch refuses to read the flags when the two sets disagree
        return "mixed"


exec(SETUP)
before = state()
for precision in ("fp32", "tf32", "bf16") if SCOPES else ():
    with precision_scope(precision):
        inside = state()
    print(precision, inside != "mixed" or before == "mixed", state() == before)
torch.backends.fp32_precision = "ieee"  # a later choice of the caller reaches the matmuls as it would without fits
print("later", matmul.fp32_precision)
"""


@pytest.mark.parametrize(
    "setup",
    ["", "matmul.allow_tf32 = True", "torch.set_float32_matmul_precision('high')", "matmul.fp32_precision = 'tf32'",
     "torch.backends.fp32_precision = 'tf32'"],
)  # fmt: skip
def test_precision_scopes_restore_both_sets_of_tf32_switches_and_keep_them_readable(setup):
    import subprocess

    if not hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        pytest.skip("this torch has only the allow_tf32 flags")
    outputs = []
    for scopes in (True, False):
        code = PRECISION_CHECK.replace("exec(SETUP)", setup or "pass").replace("SCOPES", str(scopes))
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr[-2000:]
        outputs.append(result.stdout.split())
    with_scopes, without = outputs
    assert with_scopes[:-1] == ["fp32", "True", "True", "tf32", "True", "True", "bf16", "True", "True", "later"]
    assert with_scopes[-1] == without[-1]


def test_tf32_restores_the_switches_and_bad_precision_is_refused():
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    fit_image(smooth_image(8), small("mlp-pe", iters=2, precision="tf32"), progress=False)
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == before
    with pytest.raises(UsageError, match="precision"):
        fit_image(smooth_image(8), small("mlp-pe", iters=2, precision="fp16"), progress=False)
    with pytest.raises(UsageError, match="--seed must be zero or positive, got -1"):  # as rff-sdf's
        fit_image(smooth_image(8), small("mlp-pe", iters=2, seed=-1), progress=False)


@pytest.mark.parametrize(
    "case",
    [dict(method="filtered-pe"), dict(method="filtered-pe", line_search=OFF, filter_schedule=True),
     dict(method="mlp-rff"), dict(method="filtered-rff", batch_size=256)],
    ids=["line-search", "scheduled-filter", "plain", "mini-batches"],
)  # fmt: skip
def test_cuda_graph_step_is_the_eager_step(case):
    # On a CPU the step that a GPU captures runs eagerly: tensor learning rates, a static batch index, the rates
    # and records read from the same places. It must give exactly the eager fit.
    method = case.pop("method")
    eager = fit_image(smooth_image(), small(method, iters=12, **case), progress=False).metrics
    graphed = fit_image(smooth_image(), small(method, iters=12, cuda_graph=True, **case), progress=False).metrics
    for key in ("psnr_history", "filter_lr_history", "line_search_history", "psnr"):
        assert graphed[key] == eager[key], key


def test_cuda_graph_needs_batches_of_one_size():
    notes = []
    fit_image(smooth_image(), small("mlp-pe", iters=2, batch_size=300, cuda_graph=True), progress=False,
              notify=notes.append)  # fmt: skip
    assert any("--cuda-graph needs mini-batches of one size" in note for note in notes)


def test_a_stop_time_ends_the_fit_with_the_iterations_done():
    result = fit_image(smooth_image(), small("filtered-pe", iters=50, log_every=5), progress=False, stop_at=0.0)
    metrics = result.metrics
    assert len(metrics["psnr_history"]) == len(metrics["filter_lr_history"]) == metrics["iters"] == 5
    assert metrics["iters_requested"] == 50 and "after 5 of 50" in metrics["stopped"]


def test_pixels_that_are_not_an_image_of_unit_values_are_refused_before_training():
    good = smooth_image(8)
    for pixels, message in [
        ((good * 255).to(torch.uint8), r"float tensor \(H, W, C\).*got a torch.uint8 tensor"),
        (good[..., 0], r"got a torch.float32 tensor of shape \(8, 8\)"),
        (good.numpy(), "got a <class 'numpy.ndarray'>"),
        (good * 255, "span .* to .*, not \\[0, 1\\]; divide 8-bit values by 255"),
        (good[:2], "too small"),
    ]:
        with pytest.raises(UsageError, match=message):
            fit_image(pixels, small("mlp-pe", iters=1), progress=False)


@pytest.mark.parametrize("value, reason", [(math.inf, "the fit is exact"), (math.nan, "the fit diverged at once")])
def test_curves_of_a_fit_without_a_finite_psnr_say_why(tmp_path, monkeypatch, value, reason):
    from rff_field.image import fit

    texts = []
    monkeypatch.setattr(fit, "save_figure", lambda figure, path, **kwargs: texts.extend(
        text.get_text() for ax in figure.axes for text in ax.texts))  # fmt: skip
    metrics = {"method": "mlp-pe", "image": "black", "best_psnr": value, "psnr_history": [value] * 3}
    fit.plot_curves(metrics, tmp_path / "curves.png")
    assert len(texts) == 1 and reason in texts[0]


def test_writing_figures_keeps_the_callers_matplotlib_backend_and_warning_filters(tmp_path):
    import warnings

    import matplotlib

    from rff_field.image.fit import plot_curves

    earlier = matplotlib.get_backend()
    matplotlib.use("svg")  # as a notebook's inline backend: a caller's choice
    try:
        run_fit(None, tmp_path / "fit", small("filtered-pe", iters=2), progress=False, notify=lambda message: None)
        assert matplotlib.get_backend() == "svg"
        assert not any(pattern is not None and "Glyph" in pattern.pattern for _, pattern, *_ in warnings.filters)
        with warnings.catch_warnings(record=True) as caught:  # a name in a script the font lacks: boxes, no warnings
            warnings.simplefilter("always")
            plot_curves({"method": "mlp-pe", "image": "\u56fe\u50cf", "best_psnr": 20.0, "psnr_history": [20.0]},
                        tmp_path / "curves.png")  # fmt: skip
        assert not [w for w in caught if "Glyph" in str(w.message)] and (tmp_path / "curves.png").is_file()
        assert (tmp_path / "fit" / "curves.png").read_bytes()[:4] == b"\x89PNG"
    finally:
        matplotlib.use(earlier)
