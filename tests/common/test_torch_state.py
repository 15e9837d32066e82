"""Fits and measurements leave torch's global generator and thread count as the caller left them."""

from __future__ import annotations

import torch

from rff_field.common.torch_state import restores_torch_state, seeded
from rff_field.image.batched import ImageJob, fit_images
from rff_field.image.fit import FitConfig, fit_image
from rff_field.inr.config import NetworkConfig
from rff_field.sdf.fit import SDFNetworkConfig, build_sdf_network


def _draws_after(call) -> torch.Tensor:
    torch.manual_seed(1234)
    call()
    return torch.rand(4)


def test_seeded_blocks_give_the_seed_inside_and_the_callers_state_after(monkeypatch):
    torch.manual_seed(7)
    expected_after = torch.rand(3)
    torch.manual_seed(7)
    reseeded = []
    monkeypatch.setattr(torch.cuda, "manual_seed_all", reseeded.append)  # what torch.manual_seed calls for CUDA
    with seeded(0):
        inside = torch.rand(3)
    assert torch.equal(torch.rand(3), expected_after) and not reseeded  # a caller's CUDA generators untouched
    monkeypatch.undo()
    torch.manual_seed(0)
    assert torch.equal(inside, torch.rand(3))


def test_fits_and_measurements_keep_the_callers_randomness_and_threads():
    pixels = torch.rand(8, 8, 3)
    fit = FitConfig(network=NetworkConfig(method="filtered-pe", hidden_features=8, pe="loglinear", pe_frequencies=2),
                    iters=2, device="cpu", lpips=False, log_every=2)  # fmt: skip
    untouched = _draws_after(lambda: None)
    assert torch.equal(_draws_after(lambda: fit_image(pixels, fit, "img", progress=False)), untouched)
    jobs = [ImageJob(pixels, fit, "a"), ImageJob(pixels.flip(0), fit, "b")]
    assert torch.equal(_draws_after(lambda: fit_images(jobs)), untouched)
    assert torch.equal(_draws_after(lambda: build_sdf_network(SDFNetworkConfig(hidden_features=8), seed=3)), untouched)

    threads = torch.get_num_threads()

    @restores_torch_state
    def measurement() -> int:
        torch.set_num_threads(threads + 1)
        torch.manual_seed(0)
        return torch.get_num_threads()

    assert measurement() == threads + 1 and torch.get_num_threads() == threads
    assert torch.equal(_draws_after(measurement), untouched)
