"""Every network builds and learns, the presets are the paper's rows, options are checked, and the baselines are
built as their repositories build them."""

import math

import pytest
import torch

from rff_field.core.embedding import EmbeddingConfig
from rff_field.core.errors import UsageError
from rff_field.core.filter import split_filter_parameters
from rff_field.core.line_search import FilterLineSearch
from rff_field.fit.bench import apply_variant, parse_variant
from rff_field.inr.bacon import SDF_INPUT_SCALES, SDF_OUTPUT_LAYERS, Bacon, default_schedule
from rff_field.inr.config import PRESETS, NetworkConfig, build_network, count_parameters, network_label
from rff_field.inr.sape import SapeMLP
from rff_field.inr.wire import Wire

SMALL = EmbeddingConfig(num_frequencies=16, pe_scale=8.0, rff_sigma=3.0)


def grid(side):
    ys, xs = torch.meshgrid(torch.linspace(-1, 1, side), torch.linspace(-1, 1, side), indexing="ij")
    return torch.stack([xs, ys], dim=-1).reshape(-1, 2)


def preset(config: NetworkConfig, name: str) -> NetworkConfig:
    """``config`` as the table row ``name``, the way rff-image bench applies a variant."""
    return apply_variant(config, parse_variant(name, PRESETS), PRESETS)


@pytest.mark.numerics
@pytest.mark.parametrize("name", list(PRESETS))
def test_every_row_builds_and_learns_a_small_image(name):
    torch.manual_seed(0)
    coords = grid(16)
    target = 0.5 + 0.4 * torch.stack([torch.sin(3 * coords[:, 0]), (coords.sum(-1) > 0.2).float() - 0.5], dim=-1)
    net = build_network(preset(NetworkConfig(hidden_features=32, embedding=SMALL), name), 2, 2, sidelength=16)
    filt, inr = split_filter_parameters(net)
    opt = torch.optim.Adam([{"params": inr, "lr": 5e-3 if name == "wire" else 1e-3}, {"params": filt}])
    step = {}
    hook = FilterLineSearch(filt, inr, opt, lambda: step["loss"]) if filt else None
    losses = []
    for _ in range(150):
        opt.zero_grad()
        step["loss"] = ((net(coords) - target) ** 2).mean()
        step["loss"].backward()
        opt.step()
        losses.append(step["loss"].item())
    assert losses[-1] < 0.3 * losses[0], f"{name}: {losses[0]:.3g} -> {losses[-1]:.3g}"
    assert (hook is not None) == name.startswith("filtered") and (hook is None or len(hook.records) == 150)


def test_the_presets_are_the_rows_and_the_labels_name_them():
    for name in PRESETS:
        assert network_label(preset(NetworkConfig(), name)) == name
    config = preset(NetworkConfig(hidden_features=8, embedding=EmbeddingConfig(filter_layers=2)), "mlp-rff")
    assert config.hidden_features == 8 and config.embedding.filter_layers == 2 and not config.embedding.filtered
    with pytest.raises(UsageError):
        preset(NetworkConfig(), "filtered-wire")


@pytest.mark.parametrize(
    "options,option",
    [
        ({"method": "filtered-pe"}, "--method"),
        ({"hidden_features": 0}, "--hidden-features"),
        ({"hidden_layers": -1}, "--hidden-layers"),
        ({"siren_omega0": 0.0}, "--siren-omega0"),
        ({"method": "sape", "sape_res": 0}, "--sape-res"),
        ({"embedding": EmbeddingConfig(pe_scale=-1.0)}, "--embedding.pe-scale"),
        ({"method": "bacon", "bacon_input_scales": (0.5, 0.5)}, "--bacon-input-scales"),
        ({"method": "bacon", "bacon_output_layers": (1,)}, "--bacon-output-layers"),
        ({"method": "bacon", "hidden_layers": 0}, "--hidden-layers"),
    ],
)
def test_bad_options_name_the_option(options, option):
    with pytest.raises(UsageError, match=option):
        NetworkConfig(**options).check()


def test_layer_counts_and_widths_follow_the_repositories():
    mlp = build_network(NetworkConfig(embedding=EmbeddingConfig(num_frequencies=4, filtered=False)), 2, 3)
    assert sum(isinstance(m, torch.nn.Linear) for m in mlp.modules()) == 4  # 3 nonlinear layers + the output
    filtered = build_network(NetworkConfig(embedding=EmbeddingConfig(num_frequencies=4)), 2, 3)
    assert count_parameters(filtered) - count_parameters(mlp) == 3 * 16 * 16
    wire = Wire(2, 3, hidden_features=256, hidden_layers=2)  # complex width 181, complex parameters count twice
    assert wire.complex_features == 181
    assert count_parameters(wire) == (2 * 181 + 181) + 2 * 2 * (181 * 181 + 181) + 2 * (181 * 3 + 3)
    siren = build_network(NetworkConfig(method="siren", hidden_features=128), 2, 1)
    assert siren.net[0].linear.weight.abs().max() <= 1 / 2
    assert siren.net[1].linear.weight.abs().max() <= math.sqrt(6 / 128) / 30 + 1e-7


@pytest.mark.numerics
def test_bacon_is_the_repositorys_sdf_network_and_band_limited():
    net = build_network(NetworkConfig(method="bacon", hidden_layers=8), 3, 1)
    assert net.output_layers == SDF_OUTPUT_LAYERS and len(net.filters) == 4  # equal bandwidths share a filter
    assert net.bandwidths() == pytest.approx([24, 48, 96, 192], abs=1e-3)  # 1/8 .. 1 of 384 / 2
    assert not any("omega" in name for name, _ in net.named_parameters())  # frozen frequencies, trained phases
    scales, outputs = default_schedule(8, True, "spread")  # BACON's rule gives its SDF network
    assert scales == pytest.approx(SDF_INPUT_SCALES) and outputs == SDF_OUTPUT_LAYERS
    assert default_schedule(4, True) == (SDF_INPUT_SCALES[:5], (2, 4))  # prefix: the first layers of the 8
    single = NetworkConfig(method="bacon", hidden_layers=3, bacon_multiscale=False)
    assert single.bacon_layout() == (SDF_INPUT_SCALES[:4], (3,))
    torch.manual_seed(1)
    line = Bacon(1, 1, hidden_features=32, hidden_layers=4, max_frequency=40, output_layers=(2, 4))
    x = (torch.arange(512) / 512 - 0.5)[:, None]  # one period of [-0.5, 0.5)
    with torch.no_grad():
        outputs = line.forward_multiscale(x)
    for out, limit in zip(outputs, line.bandwidths()):
        spectrum = torch.fft.rfft(out[:, 0].double()).abs()
        assert spectrum[int(limit) + 1 :].max() < 1e-6 * spectrum.max()


def test_sape_reveals_frequencies_only_where_the_error_stays_high():
    net = build_network(NetworkConfig(method="sape", hidden_features=8, sape_res=8, sape_epsilon=1e-2,
                                      embedding=EmbeddingConfig(encoding="rff", num_frequencies=6)), 2, 3)  # fmt: skip
    assert isinstance(net, SapeMLP) and not split_filter_parameters(net)[0]  # its embedding is not filtered
    coords = grid(8)
    assert float(net.channel_mask(coords).sum()) == 0.0  # every frequency block starts hidden
    net.configure(24)  # 6 blocks over the first half: one every 2 iterations
    error = (coords[:, 0] < 0).float()  # the left half never converges
    for iteration in range(24):
        net.observe_error(error, coords)
        net.end_iteration(iteration)
    assert torch.all(net.level[:, 0] == 6) and torch.all(net.level[:, -1] == 0)
    assert net(coords).shape == (64, 3)
    with pytest.raises(UsageError):
        build_network(NetworkConfig(method="sape"), 3, 1)
