"""BACON: quantised frozen frequencies, band limits, multiscale outputs."""

import math

import pytest
import torch

from rff_field.inr.bacon import SDF_INPUT_SCALES, SDF_OUTPUT_LAYERS, Bacon, default_schedule
from rff_field.sdf.fit import SDFNetworkConfig, build_sdf_network


def test_sdf_setup_matches_the_bacon_repository():
    net = Bacon(3, 1)  # 256 wide, 8 hidden layers, max frequency 384, outputs after 2 4 6 8
    assert net.output_layers == SDF_OUTPUT_LAYERS
    assert net.bandwidths() == pytest.approx([24, 48, 96, 192], abs=1e-3)  # 1/8 .. 1 of 384 / 2
    assert len(net.filters) == 4  # filters of equal bandwidth are shared, as in the repository
    outs = net.forward_multiscale(torch.rand(7, 3) - 0.5)
    assert len(outs) == 4 and all(o.shape == (7, 1) for o in outs)


def test_filter_frequencies_are_quantised_and_frozen():
    net = Bacon(3, 1, hidden_features=64, hidden_layers=4, max_frequency=64)
    names = {n for n, _ in net.named_parameters()}
    assert not any("omega" in n for n in names)  # frequencies are buffers, only phases train
    for f in net.filters:
        cycles = f.omega / (2 * math.pi)
        torch.testing.assert_close(cycles, cycles.round())  # whole periods over a unit domain


def test_outputs_are_band_limited():
    # 1D network on one period of [-0.5, 0.5): the spectrum of each output stops at its bandwidth.
    net = Bacon(1, 1, hidden_features=32, hidden_layers=4, max_frequency=40, output_layers=(2, 4), seed=1)
    n = 512
    x = (torch.arange(n) / n - 0.5)[:, None]
    with torch.no_grad():
        outs = net.forward_multiscale(x)
    for out, limit in zip(outs, net.bandwidths()):
        spectrum = torch.fft.rfft(out[:, 0].double()).abs()
        above = spectrum[int(limit) + 1 :].max() / spectrum.max()
        assert above < 1e-6
        assert spectrum[int(limit) // 2 :].max() / spectrum.max() > 1e-4  # it does use its band


def test_spread_schedule_doubles_the_bandwidth_per_output():
    scales, outputs = default_schedule(8, multiscale=True, schedule="spread")
    assert outputs == SDF_OUTPUT_LAYERS and scales == pytest.approx(SDF_INPUT_SCALES)  # BACON's, from the rule
    net = Bacon(3, 1, hidden_features=16, hidden_layers=6, max_frequency=480, schedule="spread")
    assert net.output_layers == (2, 4, 6)
    assert net.bandwidths() == pytest.approx([60, 120, 240], abs=3)  # 1/4, 1/2, 1 of 480 / 2


def test_shallow_bacon_is_the_first_layers_of_the_sdf_network():
    # Regression: the former default (spread) gave a 4-layer BACON filters of 32 and 48 cycles per unit; it has
    # almost no low frequencies and stayed at the zero function in the CPU benchmark (loss 0.33 vs 0.0008 mlp-pe).
    assert default_schedule(8, multiscale=True) == (SDF_INPUT_SCALES, SDF_OUTPUT_LAYERS)
    assert default_schedule(4, multiscale=True) == (SDF_INPUT_SCALES[:5], (2, 4))
    assert default_schedule(3, multiscale=True) == (SDF_INPUT_SCALES[:4], (2, 3))
    net = build_sdf_network(SDFNetworkConfig(method="bacon", hidden_features=16, hidden_layers=4))
    assert net.output_layers == (2, 4)
    assert net.bandwidths() == pytest.approx([24, 48], abs=1e-3)  # outputs 1 and 2 of the 8-layer network
    spread = build_sdf_network(
        SDFNetworkConfig(method="bacon", hidden_features=16, hidden_layers=4, bacon_schedule="spread")
    )
    assert spread.bandwidths() == pytest.approx([96, 192], abs=1e-3)
    deep = default_schedule(10, multiscale=True)
    assert deep == default_schedule(10, multiscale=True, schedule="spread")  # beyond 8 layers: spread
    with pytest.raises(ValueError, match="schedule"):
        default_schedule(4, multiscale=True, schedule="wide")


def test_single_scale_and_custom_schedules():
    scales, outputs = default_schedule(3, multiscale=False, schedule="spread")
    assert len(scales) == 4 and outputs == (3,)
    assert sum(scales) == pytest.approx(1.0)
    assert default_schedule(3, multiscale=False) == (SDF_INPUT_SCALES[:4], (3,))  # prefix: BACON's first filters
    net = Bacon(3, 2, hidden_features=16, hidden_layers=3, input_scales=scales, output_layers=outputs)
    assert len(net.forward_multiscale(torch.zeros(2, 3))) == 1
    assert net(torch.zeros(5, 3)).shape == (5, 2)
    with pytest.raises(ValueError, match="input scales"):
        Bacon(3, 1, hidden_layers=3, input_scales=(0.5, 0.5))
    with pytest.raises(ValueError, match="end at"):
        Bacon(3, 1, hidden_layers=3, output_layers=(1, 2))
