"""Fuzzing the public API of the method (encodings, the filter, the line search, the embedding's config): any value
gives a correct result or a UsageError in one line, never another exception."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from rff_field.core.embedding import EmbeddingConfig
from rff_field.core.encodings import PositionalEncoding, RandomFourierEncoding
from rff_field.core.errors import UsageError
from rff_field.core.filter import BiasFreeFilter, FilteredEncoding
from rff_field.core.line_search import FilterLineSearch, LineSearchConfig, filter_step_size
from tests.core.test_line_search import plain_rule
from tests.fuzz import RUNS, fuzz

FLOATS = st.one_of(st.sampled_from([0.0, -1.0, 1e-30, 1e30, math.inf, -math.inf, math.nan, 1.0]), st.floats(width=64))
SIZES = st.integers(-2, 6)
DTYPES = st.sampled_from([torch.float32, torch.float64, torch.float16, torch.int64, torch.bool])


def tensors(shape, elements=FLOATS):
    return hnp.arrays(np.float64, shape, elements=elements).map(torch.from_numpy)


def refused(call):
    """``call()``'s result, or None when it raised a one-line UsageError (any other exception fails the test)."""
    try:
        return call()
    except UsageError as error:
        assert "\n" not in str(error)
        return None


@pytest.mark.parametrize("factor", RUNS)
def test_positional_encoding_computes_its_formula_or_refuses(factor):
    @fuzz(80, factor)
    @given(
        in_dim=SIZES,
        frequencies=hnp.array_shapes(min_dims=1, max_dims=2, min_side=0, max_side=4).flatmap(tensors),
        include_input=st.booleans(),
        points=st.integers(0, 3),
        width=SIZES,
        dtype=DTYPES,
        seed=st.integers(0, 9),
    )
    @example(
        in_dim=2,
        frequencies=torch.tensor([1e-30, -3.4028e38], dtype=torch.float64),
        include_input=False,
        points=3,
        width=2,
        dtype=torch.float16,
        seed=2,
    )  # a phase beyond float32 once gave NaN, not a refusal
    def check(in_dim, frequencies, include_input, points, width, dtype, seed):
        encoding = refused(lambda: PositionalEncoding(in_dim, frequencies, include_input))
        if encoding is None:
            return
        assert in_dim >= 1 and frequencies.numel() >= 1 and torch.isfinite(frequencies).all()
        x = torch.rand(points, max(width, 0), generator=torch.Generator().manual_seed(seed)).to(dtype)
        gamma = refused(lambda: encoding(x))
        if gamma is None:
            return
        assert width == in_dim and gamma.shape == (points, encoding.get_out_dim())
        bands = frequencies.flatten().to(torch.float32).double()
        phase = 2 * math.pi * x.double()[:, :, None] * bands  # [n, in_dim, bands]: dimension-major
        phase = phase.reshape(points, in_dim * len(bands))
        expected = torch.cat([x.double()] * include_input + [phase.sin(), phase.cos()], dim=-1)
        precision = torch.finfo(gamma.dtype).eps * (1 + phase.abs().max().item() if phase.numel() else 1) * 8
        assert gamma.dtype.is_floating_point and torch.allclose(gamma.double(), expected, atol=precision, rtol=0)

    check()


@pytest.mark.parametrize("factor", RUNS)
def test_random_fourier_features_are_seeded_gaussians_or_refused(factor):
    @fuzz(60, factor)
    @given(in_dim=SIZES, count=st.integers(-2, 64), sigma=FLOATS, seed=st.integers(-3, 2**70))
    def check(in_dim, count, sigma, seed):
        encoding = refused(lambda: RandomFourierEncoding(in_dim, count, sigma, seed=seed))
        if encoding is None:
            return
        assert in_dim >= 1 and count >= 1 and math.isfinite(sigma)
        again = RandomFourierEncoding(in_dim, count, sigma, seed=seed)
        assert encoding.B.shape == (count, in_dim) and torch.equal(encoding.B, again.B)
        assert torch.isfinite(encoding(torch.zeros(2, in_dim))).all()

    check()


@pytest.mark.parametrize("factor", RUNS)
def test_the_filter_is_positively_homogeneous_or_refuses(factor):
    @fuzz(60, factor)
    @given(
        dim=SIZES,
        layers=st.integers(-1, 4),
        bias=st.booleans(),
        width=SIZES,
        dtype=DTYPES,
        scale=st.floats(0, 100),
        seed=st.integers(0, 99),
    )
    def check(dim, layers, bias, width, dtype, scale, seed):
        torch.manual_seed(seed)
        module = refused(lambda: BiasFreeFilter(dim, layers, bias))
        if module is None:
            return
        assert dim >= 1 and layers >= 1
        x = torch.randn(5, max(width, 0)).to(dtype)
        out = refused(lambda: module(x))
        if out is None:
            return
        assert width == dim and out.shape == x.shape and out.dtype == x.dtype
        expected = x.double()
        for i, layer in enumerate(module.layers):
            expected = torch.nn.functional.linear(expected.relu() if i else expected, layer.weight.double(),
                                                  None if layer.bias is None else layer.bias.double())  # fmt: skip
        tolerance = 1e-2 if dtype == torch.float16 else 1e-5
        assert torch.allclose(out.double(), expected, atol=tolerance * (1 + expected.abs().max().item()))
        if not bias and dtype != torch.float16:  # f(a x) = a f(x) for a >= 0
            scaled = module(x * scale)
            assert torch.allclose(scaled, module(x) * scale, atol=1e-4 * (1 + scale) * (1 + out.abs().max().item()))

    check()


@pytest.mark.parametrize("factor", RUNS)
def test_the_embedding_config_builds_what_it_describes_or_refuses(factor):
    @fuzz(60, factor)
    @given(
        config=st.builds(
            EmbeddingConfig,
            encoding=st.sampled_from(["pe", "rff", "x"]),
            pe_bands=st.sampled_from(["loglinear", "wire", "pow2", "nerf-pytorch", "y"]),
            num_frequencies=st.one_of(st.none(), st.integers(-2, 16)),
            pe_scale=FLOATS,
            rff_sigma=FLOATS,
            rff_seed=st.integers(-2, 2**70),
            include_input=st.booleans(),
            filtered=st.booleans(),
            filter_layers=st.integers(-1, 3),
            filter_init=st.sampled_from(["default", "scaled", "identity", "orthogonal", "z"]),
            filter_init_gain=FLOATS,
            filter_residual=st.booleans(),
        ),
        in_dim=SIZES,
        sidelength=st.one_of(st.none(), st.integers(-4, 4096)),
    )
    def check(config, in_dim, sidelength):
        encoding = refused(lambda: (config.check(), config.build(in_dim, sidelength))[1])  # a checked config
        if encoding is None:
            return
        assert isinstance(encoding, FilteredEncoding) == config.filtered and in_dim >= 1
        out = encoding(torch.rand(3, in_dim) * 2 - 1)
        assert out.shape == (3, encoding.get_out_dim()) and torch.isfinite(out).all()

    check()


@pytest.mark.parametrize("factor", RUNS)
def test_the_step_size_rule_stays_in_its_bounds_and_is_the_plain_rule(factor):
    @fuzz(200, factor)
    @given(loss=FLOATS, d_filter=FLOATS, lr_d_inr=FLOATS, lr_min=FLOATS, lr_max=FLOATS, eps=FLOATS)
    def check(loss, d_filter, lr_d_inr, lr_min, lr_max, eps):
        config = LineSearchConfig(lr_min=lr_min, lr_max=lr_max, eps=eps)
        if refused(config.check) is None and not (0 <= lr_min <= lr_max < math.inf and 0 <= eps < math.inf):
            return  # refused, rightly
        assert 0 <= lr_min <= lr_max < math.inf and 0 <= eps < math.inf
        values = [torch.tensor(value, dtype=torch.float64) for value in (loss, d_filter, lr_d_inr)]
        rate = float(filter_step_size(*values, lr_min, lr_max, eps))
        assert lr_min <= rate <= lr_max
        expected = plain_rule(loss, d_filter, lr_d_inr, lr_min, lr_max, eps)
        assert rate == pytest.approx(expected, rel=1e-9, abs=1e-300)

    check()


@pytest.mark.parametrize("factor", RUNS)
def test_the_line_search_sets_a_rate_in_bounds_whatever_the_losses(factor):
    @fuzz(20, factor)
    @given(losses=st.lists(FLOATS, min_size=1, max_size=4), lr_max=st.floats(1e-6, 10), direction=st.booleans())
    def check(losses, lr_max, direction):
        torch.manual_seed(0)
        encoding = FilteredEncoding(PositionalEncoding(2, torch.tensor([1.0, 2.0])))
        head = torch.nn.Linear(encoding.get_out_dim(), 1)
        optimizer = torch.optim.Adam([{"params": head.parameters()}, {"params": encoding.filter.parameters()}])
        current = {}
        config = LineSearchConfig(lr_max=lr_max, direction="adam" if direction else "gradient")
        search = FilterLineSearch(list(encoding.filter.parameters()), None, optimizer, lambda: current["loss"], config)
        x = torch.rand(8, 2)
        for value in losses:
            prediction = head(encoding(x)).pow(2).mean()
            loss = prediction * 0 + value if math.isfinite(value) else prediction * value
            optimizer.zero_grad()
            loss.backward()
            current["loss"] = loss.detach()
            try:
                optimizer.step()
            except UsageError:  # a negative first loss is refused: the rule models a loss >= 0
                assert value < 0 and len(search.records) == 0
                return
        rates = search.records[:, 3]
        assert len(rates) == len(losses) and ((rates >= 0) & (rates <= lr_max)).all()

    check()
