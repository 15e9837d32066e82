import pytest
import torch

from rff_field.core.encodings import PositionalEncoding, RandomFourierEncoding
from rff_field.core.filter import BiasFreeFilter, FilteredEncoding, split_filter_parameters
from rff_field.inr.config import NetworkConfig, build_network


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.mark.parametrize("dim", [32, 21])  # 21: computed at the padded width 24
@pytest.mark.parametrize("num_layers", [1, 3, 5])
def test_filter_is_positively_homogeneous(num_layers, dim):
    f = BiasFreeFilter(dim, num_layers=num_layers)
    x = torch.randn(64, dim)
    for a in (0.0, 0.5, 3.0, 17.0):
        torch.testing.assert_close(f(a * x), a * f(x), rtol=1e-5, atol=1e-5)


def test_filter_maps_zero_to_zero_and_has_no_bias():
    f = BiasFreeFilter(16)
    assert torch.count_nonzero(f(torch.zeros(4, 16))) == 0
    assert all(layer.bias is None for layer in f if isinstance(layer, torch.nn.Linear))
    assert not any("bias" in name for name, _ in f.named_parameters())
    assert sum(isinstance(m, torch.nn.ReLU) for m in f) == 2
    assert not isinstance(f[-1], torch.nn.ReLU)  # no activation after the last layer


@pytest.mark.parametrize("dim", [8, 13])
def test_filter_is_locally_linear_without_offset(dim):
    # f(x) = A_x x: the Jacobian at x reproduces f(x) exactly.
    f = BiasFreeFilter(dim)
    x = torch.randn(dim)
    jac = torch.autograd.functional.jacobian(f, x)
    torch.testing.assert_close(jac @ x, f(x), rtol=1e-5, atol=1e-6)


def test_bias_variant_breaks_scale_invariance():
    f = BiasFreeFilter(16, bias=True)
    with torch.no_grad():
        for layer in f:
            if isinstance(layer, torch.nn.Linear):
                layer.bias.uniform_(0.1, 0.5)
    x = torch.randn(8, 16)
    assert not torch.allclose(f(2 * x), 2 * f(x), atol=1e-3)
    assert torch.count_nonzero(f(torch.zeros(1, 16))) > 0


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("dim", [63, 22, 27])
def test_padded_filter_computes_the_unpadded_filter(dim, bias):
    # Widths that are not multiples of 8 are computed zero-padded; outputs and gradients must be unchanged.
    f = BiasFreeFilter(dim, bias=bias)
    if bias:
        with torch.no_grad():
            for layer in f:
                if isinstance(layer, torch.nn.Linear):
                    layer.bias.uniform_(-0.5, 0.5)
    x = torch.randn(5, 7, dim)
    upstream = torch.randn(5, 7, dim)
    out = f(x)
    assert out.shape == x.shape
    (out * upstream).sum().backward()
    padded_grads = [p.grad.clone() for p in f.parameters()]
    f.zero_grad()
    reference = torch.nn.Sequential.forward(f, x)  # layer by layer at width dim
    torch.testing.assert_close(out, reference, rtol=1e-5, atol=1e-5)
    (reference * upstream).sum().backward()
    for padded, unpadded in zip(padded_grads, (p.grad for p in f.parameters())):
        assert padded.shape == unpadded.shape
        torch.testing.assert_close(padded, unpadded, rtol=1e-4, atol=1e-4)
    assert sum(p.numel() for p in f.parameters()) == 3 * (dim * dim + (dim if bias else 0))


def test_filtered_encoding_output_width_and_value():
    enc = RandomFourierEncoding(2, 24, sigma=3.0)
    filtered = FilteredEncoding(enc, num_layers=3)
    assert filtered.get_out_dim() == enc.get_out_dim() == 48
    x = torch.rand(10, 2)
    gamma = enc(x)
    torch.testing.assert_close(filtered(x), filtered.filter(gamma) * gamma)
    assert filtered.filter.dim == 48


def test_residual_filter_adds_the_embedding_and_is_off_by_default():
    x = torch.rand(50, 2) * 2 - 1
    paper = NetworkConfig(method="filtered-pe", pe="loglinear", pe_frequencies=4, hidden_features=16)
    residual = NetworkConfig(**{**vars(paper), "filter_residual": True})
    torch.manual_seed(1)
    a = build_network(paper, 2, 3).encoding
    torch.manual_seed(1)
    b = build_network(residual, 2, 3).encoding
    gamma = a.encoding(x)
    assert not a.residual and b.residual
    torch.testing.assert_close(a(x), a.filter(gamma) * gamma)
    torch.testing.assert_close(b(x), a.filter(gamma) * gamma + gamma)  # same weights: the same seed
    with torch.no_grad():  # a filter that outputs 0 leaves the residual embedding at gamma, the paper's at 0
        for layer in b.filter.modules():
            if isinstance(layer, torch.nn.Linear):
                layer.weight.zero_()
    torch.testing.assert_close(b(x), gamma)


def test_filter_parameters_split_from_the_inr():
    net = build_network(NetworkConfig(method="filtered-pe", pe="loglinear", pe_frequencies=4, hidden_features=16), 2, 3)
    filt, rest = split_filter_parameters(net)
    assert len(filt) == 3 and all(p.shape == (16, 16) for p in filt)
    assert {id(p) for p in filt}.isdisjoint({id(p) for p in rest})
    assert len(filt) + len(rest) == len(list(net.parameters()))
    plain = build_network(NetworkConfig(method="mlp-pe", pe="loglinear", pe_frequencies=4, hidden_features=16), 2, 3)
    assert split_filter_parameters(plain)[0] == []


def test_filtered_encoding_plugs_into_nerfstudio_field():
    from nerfstudio.fields.vanilla_nerf_field import NeRFField

    pos = FilteredEncoding(PositionalEncoding.pow2(3, 4))
    field = NeRFField(position_encoding=pos, direction_encoding=PositionalEncoding.pow2(3, 2), base_mlp_num_layers=2)
    assert field.mlp_base.in_dim == pos.get_out_dim()


def test_filtered_encoding_wraps_an_encoding_that_takes_no_covariances():
    from nerfstudio.field_components.encodings import SHEncoding

    sh = SHEncoding(levels=2, implementation="torch")
    filtered = FilteredEncoding(sh)
    directions = torch.nn.functional.normalize(torch.randn(5, 3), dim=-1)
    assert torch.equal(filtered(directions), filtered.apply_filter(sh(directions)))


def test_frozen_parameters_are_in_neither_group():
    net = build_network(NetworkConfig(method="filtered-pe", pe="loglinear", pe_frequencies=4, hidden_features=8), 2, 3)
    frozen = [net.encoding.filter[0].weight, next(p for p in net.parameters() if p.dim() == 1)]
    for p in frozen:
        p.requires_grad_(False)
    filter_params, inr_params = split_filter_parameters(net)
    assert not {id(p) for p in frozen} & {id(p) for p in filter_params + inr_params}
    assert len(filter_params) == 2 and len(filter_params) + len(inr_params) == sum(1 for _ in net.parameters()) - 2
