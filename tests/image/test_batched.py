"""The batched fitter gives what K sequential fits give.

The comparison runs in float64 (``torch.set_default_dtype``): both engines then compute the same sequence of float64
operations except for the order of the sums inside batched matrix products, an effect of order n·2^-53 ~ 1e-14
relative per product (n <= 64 terms). To move a PSNR by 1e-5 dB, the MSE must change by 2.3e-6 relative: eight
orders of magnitude more than these rounding differences, so any difference this test can see is a difference in
the algorithm (initialisation, batch order, Adam, the per-model rates), not in arithmetic.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from rff_field.core.errors import UsageError
from rff_field.core.optim import LineSearchConfig
from rff_field.image import batched
from rff_field.image.batched import ImageJob, batch_key, fit_images
from rff_field.image.fit import FitConfig, fit_image
from rff_field.inr.config import NetworkConfig


def image(seed: int, size: int = 12) -> torch.Tensor:
    y, x = torch.meshgrid(torch.linspace(0, 1, size), torch.linspace(0, 1, size), indexing="ij")
    phase = torch.rand(3, generator=torch.Generator().manual_seed(seed)) * 6
    return torch.stack([0.5 + 0.4 * torch.sin(7 * x * (k + 1) + 5 * y + phase[k]) for k in range(3)], -1).float()


@pytest.fixture
def float64():
    dtype, threads = torch.get_default_dtype(), torch.get_num_threads()
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)
    yield
    torch.set_default_dtype(dtype)
    torch.set_num_threads(threads)


def config(method: str, **kwargs) -> FitConfig:
    network = NetworkConfig(method=method, hidden_features=16, hidden_layers=1, pe="loglinear", pe_frequencies=4,
                            pe_scale=8.0, rff_frequencies=8, omega0=10.0)  # fmt: skip
    return FitConfig(**{"network": network, "iters": 12, "device": "cpu", "lpips": False, "log_every": 5, **kwargs})


CASES = {
    "mlp-pe": config("mlp-pe"),
    "filtered-pe": config("filtered-pe", line_search=LineSearchConfig(lr_max=1.0)),  # rates inside the bounds
    "filtered-pe-minibatch": config("filtered-pe", batch_size=50),  # 3 steps per iteration, shuffled
    "filtered-pe-fixed-lr": config("filtered-pe", line_search=LineSearchConfig(enabled=False), filter_schedule=True),
    "filtered-pe-balance": config("filtered-pe", line_search=LineSearchConfig(rule="balance", lr_max=1.0)),
    "mlp-rff": config("mlp-rff"),
    "filtered-rff": config("filtered-rff", line_search=LineSearchConfig(lr_max=1.0)),
    "siren": config("siren"),
    "gauss": config("gauss"),
    "mlp-pe-uncached": config("mlp-pe", cache_embedding=False, batch_size=50),
}


def equal_parameter_baselines() -> dict[str, FitConfig]:
    wider = config("mlp-pe")
    wider.network.hidden_features = 23  # as match_params=filtered-pe raises it
    deeper = config("mlp-pe")
    deeper.network.hidden_layers = 3  # as match_by=depth
    return {"mlp-pe-wider": wider, "mlp-pe-deeper": deeper}


CASES.update(equal_parameter_baselines())


@pytest.mark.parametrize("vectorize", [True, False], ids=["vmap", "per-model"])
@pytest.mark.parametrize("case", list(CASES))
def test_batched_fits_equal_sequential_fits(case, vectorize, float64):
    base = CASES[case]
    jobs = [ImageJob(image(k), replace(base, seed=k, network=replace(base.network, rff_seed=k)), f"img{k}")
            for k in range(3)]  # fmt: skip
    batched = fit_images(jobs, vectorize=vectorize)
    for job, result in zip(jobs, batched):
        alone = fit_image(job.pixels, job.config, name=job.name, progress=False).metrics
        together = result.metrics
        torch.testing.assert_close(torch.tensor(together["psnr_history"]), torch.tensor(alone["psnr_history"]),
                                   rtol=0, atol=1e-5)  # fmt: skip
        assert abs(together["best_psnr"] - alone["best_psnr"]) < 1e-5 and abs(together["psnr"] - alone["psnr"]) < 1e-5
        assert together["best_iter"] == alone["best_iter"] and together["num_params"] == alone["num_params"]
        if alone["filter_lr_history"] is not None:
            torch.testing.assert_close(torch.tensor(together["filter_lr_history"]),
                                       torch.tensor(alone["filter_lr_history"]), rtol=1e-9, atol=0)  # fmt: skip
        assert (together["line_search_history"] is None) == (alone["line_search_history"] is None)
        assert set(together) - set(alone) == {"engine", "batch_models", "batch_vectorized", "batch_seconds_per_iter"}
        assert together["batch_vectorized"] is vectorize
        assert together["seconds_per_iter"] == pytest.approx(together["batch_seconds_per_iter"] / 3)
    histories = [r.metrics["psnr_history"] for r in batched]
    assert histories[0] != histories[1]  # different images and seeds: the models are independent


def test_a_batch_whose_embeddings_overfill_the_memory_computes_them_per_batch(float64, monkeypatch):
    import rff_field.image.fit as fit_module

    base = config("filtered-pe", batch_size=50)
    jobs = [ImageJob(image(k), replace(base, seed=k), f"img{k}") for k in range(2)]
    cached = fit_images(jobs)
    one_job = 12 * 12 * 16 * 8  # pixels x PE channels (4 frequencies x 2 axes x sin, cos) x float64 bytes
    monkeypatch.setattr(fit_module, "memory_bytes", lambda device: 4 * one_job)  # one job's fits, two do not
    notices = []
    uncached = fit_images(jobs, notify=notices.append)
    memory = [notice for notice in notices if "memory" in notice]
    assert len(memory) == 1 and "144 pixels x 16 channels x 2 jobs" in memory[0]
    for a, b in zip(cached, uncached):
        torch.testing.assert_close(torch.tensor(a.metrics["psnr_history"]), torch.tensor(b.metrics["psnr_history"]),
                                   rtol=0, atol=1e-5)  # fmt: skip


def test_each_model_gets_its_own_filter_rate(float64):
    base = config("filtered-pe", line_search=LineSearchConfig(lr_max=1.0))
    results = fit_images([ImageJob(image(k), replace(base, seed=k), f"img{k}") for k in range(2)])
    a, b = (r.metrics["filter_lr_history"] for r in results)
    assert len(a) == len(b) == 12 and a != b and any(0 < rate < 1 for rate in a)


def test_jobs_that_cannot_share_a_batch_are_refused():
    base = config("mlp-pe")
    assert batch_key(base, (12, 12, 3)) == batch_key(replace(base, seed=5), (12, 12, 3))
    with pytest.raises(UsageError, match="batch"):
        fit_images([ImageJob(image(0), base, "a"), ImageJob(image(1, size=10), base, "b")])
    wider = replace(base, network=replace(base.network, hidden_features=17))
    with pytest.raises(UsageError, match="batch"):
        fit_images([ImageJob(image(0), base, "a"), ImageJob(image(1), wider, "b")])
    with pytest.raises(UsageError, match="cannot be batched"):
        fit_images([ImageJob(image(0), config("sape"), "a")])


def test_a_stop_time_ends_the_fit_with_the_iterations_done():
    jobs = [ImageJob(image(k), config("mlp-pe", iters=50, log_every=5), f"img{k}") for k in range(2)]
    results = fit_images(jobs, stop_at=0.0)  # past at the first progress check
    for result in results:
        assert len(result.metrics["psnr_history"]) == result.metrics["iters"] == 5
        assert result.metrics["iters_requested"] == 50 and "after 5 of 50" in result.metrics["stopped"]
    assert all("stopped" not in result.metrics for result in fit_images(jobs, stop_at=float("inf")))


def test_bf16_batched_fit_stays_finite():
    results = fit_images([ImageJob(image(k), config("filtered-pe", precision="bf16"), f"img{k}") for k in range(2)])
    assert all(math.isfinite(p) for r in results for p in r.metrics["psnr_history"])


def test_a_batch_of_one_is_a_plain_fit():
    job = ImageJob(image(0), config("filtered-pe"), "img0")
    together = fit_images([job])[0].metrics
    alone = fit_image(job.pixels, job.config, name=job.name, progress=False).metrics
    assert together["psnr_history"] == alone["psnr_history"] and together["batch_models"] == 1


def test_options_a_batch_of_several_cannot_use_are_named():
    fit = config("filtered-pe", cuda_graph=True, line_search=LineSearchConfig(fused=True))
    notices: list[str] = []
    results = fit_images([ImageJob(image(k), fit, f"img{k}") for k in range(2)], notify=notices.append)
    assert any("without --cuda-graph" in n for n in notices) and any("unfused" in n for n in notices)
    for result in results:  # the settings recorded are those the batch ran with
        ran = result.metrics["config"]
        assert ran["cuda_graph"] is False and ran["line_search"]["fused"] is False


def poison_target(monkeypatch, model: int, iteration: int) -> None:
    """Make one model's target NaN at one iteration of a full-batch fit (the others' targets stay as they are)."""
    original, calls = batched._gather, []

    def gather(values, shared, index):
        gathered = original(values, shared, index)
        if not shared and values.shape[-1] == 3:  # the targets [K, N, 3], once an iteration
            calls.append(1)
            if len(calls) == iteration + 1:
                gathered = gathered.clone()
                gathered[model] = math.nan
        return gathered

    monkeypatch.setattr(batched, "_gather", gather)


def test_a_model_that_diverges_in_a_batch_stops_alone(float64, monkeypatch, tmp_path):
    jobs = [ImageJob(image(k), config("filtered-pe", seed=k), f"img{k}") for k in range(2)]
    sound = fit_images(jobs)
    poison_target(monkeypatch, model=1, iteration=3)  # before the first check, at step 5
    kept, lost = fit_images(jobs)
    assert kept.metrics["psnr_history"] == sound[0].metrics["psnr_history"] and "diverged" not in kept.metrics
    assert lost.metrics["diverged"].startswith("training diverged at step 3: the loss is nan")
    assert lost.metrics["iters"] == 0 and lost.metrics["psnr_history"] == [] and "stopped" not in lost.metrics

    poison_target(monkeypatch, model=1, iteration=3)
    paths = [tmp_path / f"{k}.pt" for k in range(2)]
    fit_images(jobs, stop_at=0.0, checkpoints=paths)  # stops at step 5, after the divergence
    assert paths[0].is_file() and not paths[1].exists()  # a diverged fit ends at its last sound state, unsaved
