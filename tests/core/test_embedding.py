"""Embeddings and the filter: the band families, the filter's properties, dtypes, options and the aliasing warning."""

import logging
import math

import pytest
import torch
import torch.nn.functional as F

from rff_field.core.embedding import EmbeddingConfig, warn_if_aliased
from rff_field.core.encodings import PositionalEncoding, RandomFourierEncoding
from rff_field.core.errors import UsageError
from rff_field.core.filter import (
    CPU_CHUNK_ELEMENTS,
    BiasFreeFilter,
    FilteredEncoding,
    named_param_groups,
    split_filter_parameters,
)
from rff_field.inr.mlp import FourierFeatureMLP


def frequencies(**options):
    return EmbeddingConfig(filtered=False, **options).unfiltered(1, sidelength=192).B[:, 0].double()


def test_the_band_families():
    torch.testing.assert_close(frequencies(num_frequencies=4, pe_scale=16.0), torch.tensor([2.0, 4, 8, 16]).double())
    assert frequencies(pe_bands="pow2", num_frequencies=3).tolist() == [1, 2, 4]
    torch.testing.assert_close(
        frequencies(pe_bands="nerf-pytorch", num_frequencies=2), torch.tensor([0.5, 1]).double() / math.pi
    )
    assert frequencies(pe_bands="wire").tolist() == [0.5, 1, 2, 4, 8]  # floor(log2(192 / 4)) = 5 bands
    assert EmbeddingConfig(pe_bands="wire").build(2, sidelength=192).get_out_dim() == 22  # the input included
    assert frequencies(pe_bands="wire", num_frequencies=2).tolist() == [0.5, 1]
    assert len(frequencies()) == 64 and len(EmbeddingConfig(encoding="rff").unfiltered(2).B) == 128


def test_pe_features_are_sin_and_cos_of_every_axis_and_band():
    encoding = PositionalEncoding(2, torch.tensor([1.0, 3.0]), include_input=True)
    v = torch.tensor([[0.1, -0.2]])
    phase = 2 * math.pi * torch.tensor([0.1, 0.3, -0.2, -0.6])  # dimension-major
    expected = torch.cat([v[0], phase.sin(), phase.cos()])
    torch.testing.assert_close(encoding(v)[0], expected)
    assert encoding(torch.rand(4, 5, 2), covs=None).shape == (4, 5, encoding.get_out_dim())


def test_rff_comes_from_its_seed_alone_and_keeps_float32_phases_under_autocast():
    torch.manual_seed(1)
    a = RandomFourierEncoding(2, 64, sigma=10.0, seed=3)
    torch.manual_seed(2)
    assert torch.equal(a.B, RandomFourierEncoding(2, 64, sigma=10.0, seed=3).B)
    assert not torch.equal(a.B, RandomFourierEncoding(2, 64, sigma=10.0, seed=4).B)
    v = torch.rand(8, 2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        torch.testing.assert_close(a(v), a(v.double()).float(), rtol=0, atol=1e-4)
    assert a(v.double()).dtype == torch.float64 and a(v.half()).dtype == torch.float32


@pytest.mark.parametrize("dim", [32, 21])  # 21 runs padded to 24
def test_the_filter_is_positively_homogeneous_and_linear_without_offset(dim):
    torch.manual_seed(0)
    f = BiasFreeFilter(dim, num_layers=3).double()
    x = torch.randn(5, dim, dtype=torch.float64)
    torch.testing.assert_close(f(2.5 * x), 2.5 * f(x))
    assert torch.equal(f(torch.zeros(1, dim)), torch.zeros(1, dim))
    assert all("bias" not in name for name, _ in f.named_parameters())
    jacobian = torch.autograd.functional.jacobian(f, x[0])  # f(x) = A_x x, A_x the local Jacobian
    torch.testing.assert_close(jacobian @ x[0], f(x[0]))


def test_the_padded_filter_computes_the_unpadded_one():
    torch.manual_seed(0)
    f = BiasFreeFilter(21, num_layers=3, bias=True)
    x = torch.randn(7, 21, requires_grad=True)
    h = x
    for i, layer in enumerate(f.layers):
        h = F.linear(torch.relu(h) if i else h, layer.weight, layer.bias)
    torch.testing.assert_close(f(x), h)
    grads = torch.autograd.grad(f(x).square().sum(), [x, *f.parameters()])
    torch.testing.assert_close(grads, torch.autograd.grad(h.square().sum(), [x, *f.parameters()]))


@pytest.mark.parametrize("dim,residual,input_grad", [(21, True, True), (32, False, True), (21, False, False)])
def test_the_fused_filter_computes_what_the_modules_do(dim, residual, input_grad):
    torch.manual_seed(0)
    encoding = PositionalEncoding(1, torch.ones(dim // 2), include_input=dim % 2 == 1)  # dim channels
    eager = FilteredEncoding(encoding, residual=residual, fused=False).double()
    fused = FilteredEncoding(encoding, residual=residual).double()
    fused.load_state_dict(eager.state_dict())
    rows = 2 * CPU_CHUNK_ELEMENTS // dim + 3  # more than one chunk of rows on a CPU
    gamma, weight = torch.randn(rows, dim, dtype=torch.float64, requires_grad=input_grad), torch.randn(rows, dim)
    outs, grads = [], []
    for encoding in (eager, fused):
        out = encoding.apply_filter(gamma)
        outs.append(out)
        grads.append(torch.autograd.grad((out * weight).sum(), [gamma] * input_grad + [*encoding.parameters()]))
    torch.testing.assert_close(outs[1], outs[0])
    torch.testing.assert_close(grads[1], grads[0])
    with torch.no_grad():
        torch.testing.assert_close(fused.apply_filter(gamma), outs[0])


@pytest.mark.numerics
@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16])
def test_the_filtered_encoding_computes_in_the_inputs_dtype(dtype):
    torch.manual_seed(0)
    encoding = FilteredEncoding(PositionalEncoding(2, torch.tensor([1.0, 2.0])))
    gamma = torch.rand(6, 8)
    out = encoding.apply_filter(gamma.to(dtype))
    assert out.dtype == dtype
    torch.testing.assert_close(out.float(), encoding.apply_filter(gamma), rtol=0.02, atol=0.02)
    out.float().sum().backward()  # the gradient reaches the float32 weights
    assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in encoding.filter.parameters())
    with pytest.raises(UsageError, match="filter"):
        encoding.filter(torch.ones(2, 8, dtype=torch.long))


def test_the_residual_filter_and_the_optimizer_groups():
    torch.manual_seed(0)
    encoding = EmbeddingConfig(num_frequencies=4, filter_residual=True, filter_init="identity").build(1)
    v = torch.rand(3, 1)
    gamma = encoding.encoding(v)
    torch.testing.assert_close(encoding(v), (1 + encoding.filter(gamma)) * gamma)
    torch.testing.assert_close(encoding.filter.layers[0].weight, torch.eye(8))
    net = FourierFeatureMLP(encoding, 1, hidden_features=8, hidden_layers=0)
    filt, inr = split_filter_parameters(net)
    assert {id(p) for p in filt} == {id(p) for p in encoding.filter.parameters()} and len(inr) == 4
    assert [g["name"] for g in named_param_groups(net, 1e-2, 1e-3)] == ["inr", "filter"]
    assert len(named_param_groups(FourierFeatureMLP(encoding.encoding, 1), 1e-2, 1e-3)) == 1


@pytest.mark.parametrize(
    "field,value",
    [("encoding", "fourier"), ("pe_bands", "nerf"), ("num_frequencies", 0), ("pe_scale", math.inf),
     ("rff_sigma", -1.0), ("filter_layers", 0), ("filter_init", "xavier"), ("filter_init_gain", 0.0)],
)  # fmt: skip
def test_bad_options_name_the_option(field, value):
    with pytest.raises(UsageError, match="--pipeline.model.embedding." + field.replace("_", "-")):
        EmbeddingConfig(**{field: value}).check("--pipeline.model.embedding.")


def test_the_wire_bands_need_a_side_of_eight_samples():
    for sidelength in (None, 7):
        with pytest.raises(UsageError, match="--embedding"):
            EmbeddingConfig(pe_bands="wire").build(2, sidelength)


@pytest.mark.parametrize(
    "options,warns",
    [
        ({"pe_scale": 512.0, "num_frequencies": 128}, False),  # the paper's PE: its top 16% of bands on x alias
        ({"pe_scale": 1e30}, True),
        ({"encoding": "rff", "rff_sigma": 1e30}, True),
        ({"encoding": "rff", "rff_sigma": 10.0}, False),
        ({"pe_bands": "pow2", "num_frequencies": 18}, True),  # 20 of 36 bands above
    ],
)
def test_frequencies_the_sample_grid_cannot_hold_are_warned_about(options, warns, caplog):
    with caplog.at_level(logging.WARNING):
        assert warn_if_aliased(EmbeddingConfig(**options), (768, 512)) == warns
    assert len(caplog.records) == warns
    if warns:
        option = {"rff": "rff-sigma"}.get(options.get("encoding"), "pe-scale" if "pe_scale" in options else "num-freq")
        assert "--embedding." + option in caplog.text and "192" in caplog.text  # the option and the limit
