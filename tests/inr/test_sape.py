"""SAPE: frequency blocks, the spatial mask, and progression only where the error stays high."""

from __future__ import annotations

import pytest
import torch
from torch.func import functional_call

from rff_field.core.encodings import PositionalEncoding, RandomFourierEncoding
from rff_field.core.errors import UsageError
from rff_field.image.data import pixel_coordinates
from rff_field.inr.config import NetworkConfig, build_network
from rff_field.inr.sape import SapeMLP, channel_frequencies


def test_channel_frequencies():
    rff = RandomFourierEncoding(2, 5, 3.0)
    freqs = channel_frequencies(rff)
    assert freqs.shape == (10,) and torch.allclose(freqs[:5], rff.B.norm(dim=-1)) and torch.equal(freqs[:5], freqs[5:])
    pe = PositionalEncoding.wire(2, 32)  # 3 bands, input included
    freqs = channel_frequencies(pe)
    assert freqs.shape == (pe.get_out_dim(),) and freqs[:2].tolist() == [0.0, 0.0]
    assert sorted(set(freqs[2:].tolist())) == [0.5, 1.0, 2.0]


def test_blocks_start_hidden_and_the_input_is_always_visible():
    model = SapeMLP(RandomFourierEncoding(2, 4, 5.0), 3, 16, 1, res=8)
    assert model.num_blocks == 5 and model.identity
    coords = pixel_coordinates(6, 6)
    mask = model.channel_mask(coords)
    assert mask.shape == (36, 8) and float(mask.abs().sum()) == 0.0
    model.level.fill_(2)
    mask = model.channel_mask(coords)
    lowest_two = model.block_of <= 2
    assert torch.allclose(mask[:, lowest_two], torch.ones(1)) and float(mask[:, ~lowest_two].sum()) == 0.0
    with pytest.raises(ValueError, match="2D"):
        SapeMLP(RandomFourierEncoding(3, 4, 5.0), 1)


def test_progression_follows_the_local_error():
    model = SapeMLP(RandomFourierEncoding(2, 6, 5.0), 3, 8, 1, res=8, epsilon=1e-2)
    model.configure(24)  # 6 blocks over the first half: one every 2 iterations
    assert model.block_iterations == 2
    coords = pixel_coordinates(8, 8)
    error = torch.where(coords[:, 0] < 0, torch.tensor(1.0), torch.tensor(0.0))  # left half never converges
    for iteration in range(24):
        model.observe_error(error, coords)
        model.end_iteration(iteration)
    assert model.updates == 6
    left, right = model.level[:, 0], model.level[:, -1]
    assert torch.all(left == 6) and torch.all(right == 0)
    summary = model.summary()
    assert 0 < summary["sape_revealed_fraction"] < 1 and summary["sape_blocks"] == 6


def test_build_network_sape_variants():
    rff = build_network(NetworkConfig(method="sape", rff_frequencies=8, hidden_features=16), 2, 3)
    pe = build_network(NetworkConfig(method="sape", sape_embedding="pe", pe="loglinear", pe_frequencies=4), 2, 3)
    assert isinstance(rff, SapeMLP) and isinstance(pe, SapeMLP)
    assert isinstance(pe.encoding, PositionalEncoding) and pe.num_blocks == 5
    out = rff(pixel_coordinates(4, 4))
    assert out.shape == (16, 3)


def test_the_embedding_cache_follows_the_coordinates_and_float64_works():
    model = SapeMLP(RandomFourierEncoding(2, 4, 5.0), 3, 16, 1, res=8)
    model.level.fill_(4)
    coords = pixel_coordinates(6, 6)
    model(coords)  # cached for these coordinates
    coords.mul_(0.5)  # changed in place: the cache must not answer for them
    assert torch.equal(model(coords), model(coords.clone()))
    double = model.double()
    assert double(coords.double()).dtype == torch.float64


def test_the_cache_follows_the_buffers_and_gradients_reach_the_coordinates():
    model = SapeMLP(RandomFourierEncoding(2, 4, 5.0), 1, 16, 1, res=8)
    model.level.fill_(4)
    coords = pixel_coordinates(6, 6)
    cached = model(coords)
    for scale in range(2, 6):  # buffers made for one call and freed after it, as functional_call's often are
        with_b = functional_call(model, {"encoding.B": scale * model.encoding.B}, (coords,))
        assert torch.equal(with_b, functional_call(model, {"encoding.B": scale * model.encoding.B}, (coords.clone(),)))
        assert not torch.equal(with_b, cached)
    model.level.zero_()  # changed in place, as a loaded checkpoint does
    assert torch.equal(model(coords), model(coords.clone()))

    model.level.zero_()
    model.level[:, :4] = 4  # the left half revealed: the mask changes along x
    model = model.double()
    point = torch.tensor([[0.05, -0.2]], dtype=torch.float64)  # inside a cell of the 8x8 grid, where the mask bends
    leaf = point.clone().requires_grad_()
    (gradient,) = torch.autograd.grad(model(leaf).sum(), leaf)
    step = 1e-6
    for axis in range(2):
        offset = torch.zeros_like(point)
        offset[0, axis] = step
        with torch.no_grad():
            difference = (model(point + offset) - model(point - offset)).item() / (2 * step)
        assert gradient[0, axis].item() == pytest.approx(difference, rel=1e-4, abs=1e-6)


def test_inputs_of_the_wrong_width_or_none_at_all():
    model = SapeMLP(RandomFourierEncoding(2, 4, 5.0), 3, 16, 1, res=8)
    with pytest.raises(UsageError, match="2-dimensional coordinates"):
        model(torch.rand(6, 4))
    assert model(torch.rand(0, 2)).shape == (0, 3)
