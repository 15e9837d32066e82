"""Every coordinate network fits a small 2D signal in a few hundred CPU steps."""

import math

import pytest
import torch

from rff_field.core.filter import split_filter_parameters
from rff_field.core.line_search import FilterLineSearch
from rff_field.inr.config import METHODS, NetworkConfig, build_network, count_parameters
from rff_field.inr.wire import Wire

SIZE = 32


def signal() -> tuple[torch.Tensor, torch.Tensor]:
    ys, xs = torch.meshgrid(torch.linspace(-1, 1, SIZE), torch.linspace(-1, 1, SIZE), indexing="ij")
    coords = torch.stack([xs, ys], dim=-1).reshape(-1, 2)
    r = torch.sin(3 * math.pi * xs) * torch.cos(2 * math.pi * ys)
    g = (xs + ys > 0.2).float()  # a sharp edge
    b = torch.exp(-4 * (xs**2 + ys**2))
    return coords, 0.5 + 0.4 * torch.stack([r, g - 0.5, b - 0.5], dim=-1).reshape(-1, 3)


# PSNR (dB) each network must reach after 300 full-batch Adam steps on the 32x32 signal.
TARGETS = {
    "mlp-pe": 28.0,
    "mlp-rff": 33.0,
    "siren": 45.0,
    "gauss": 33.0,
    "wire": 20.0,
    "filtered-pe": 31.0,
    "filtered-rff": 42.0,
}


@pytest.mark.parametrize("method", METHODS)
def test_network_fits_small_signal(method):
    torch.manual_seed(0)
    coords, target = signal()
    config = NetworkConfig(method=method, hidden_features=64, rff_frequencies=64, rff_sigma=5.0)
    net = build_network(config, in_dim=2, out_dim=3, sidelength=SIZE)
    filt, inr = split_filter_parameters(net)
    lr = 5e-3 if method == "wire" else 1e-3
    groups = [{"params": inr, "lr": lr}] + ([{"params": filt, "lr": 1e-3}] if filt else [])
    opt = torch.optim.Adam(groups)
    step = {}
    hook = FilterLineSearch(filt, inr, opt, lambda: step["loss"]) if filt else None
    for _ in range(300):
        opt.zero_grad()
        loss = ((net(coords) - target) ** 2).mean()
        loss.backward()
        step["loss"] = loss
        opt.step()
    with torch.no_grad():
        psnr = -10 * math.log10(((net(coords) - target) ** 2).mean().item())
    assert psnr > TARGETS[method], f"{method}: {psnr:.2f} dB"
    if hook is not None:
        assert len(hook.history) == 300


def test_wire_width_and_parameter_count_follow_the_wire_repository():
    net = Wire(2, 3, hidden_features=256, hidden_layers=2)
    assert net.complex_features == 181
    # real first layer (2 -> 181), two complex 181 x 181 layers and a complex output layer
    expected = (2 * 181 + 181) + 2 * 2 * (181 * 181 + 181) + 2 * (181 * 3 + 3)
    assert count_parameters(net) == expected


def test_mlp_layer_count_follows_wire_convention():
    net = build_network(NetworkConfig(method="mlp-pe", pe="loglinear", pe_frequencies=4, hidden_layers=2), 2, 3)
    linears = [m for m in net.modules() if isinstance(m, torch.nn.Linear)]
    assert len(linears) == 4  # 3 nonlinear layers + the linear output
    filtered = build_network(NetworkConfig(method="filtered-pe", pe="loglinear", pe_frequencies=4), 2, 3)
    assert count_parameters(filtered) - count_parameters(net) == 3 * 16 * 16


def test_siren_first_layer_initialisation():
    net = build_network(NetworkConfig(method="siren", hidden_features=128), 2, 1)
    first, second = net.net[0].linear.weight, net.net[1].linear.weight
    assert first.abs().max() <= 1 / 2
    assert second.abs().max() <= math.sqrt(6 / 128) / 30 + 1e-7


def test_unknown_method_and_missing_sidelength_are_clear_errors():
    with pytest.raises(ValueError, match="unknown method"):
        build_network(NetworkConfig(method="mlp-xyz"), 2, 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="side length"):
        build_network(NetworkConfig(method="mlp-pe", pe="wire"), 2, 3)


def test_build_network_refuses_a_configuration_no_network_can_have():
    from rff_field.core.errors import UsageError

    with pytest.raises(UsageError, match="hidden-features must be positive"):
        build_network(NetworkConfig(method="mlp-pe", hidden_features=0), 2, 3)
