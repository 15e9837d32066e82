"""BACON: band-limited coordinate networks (Lindell et al., CVPR 2022), as its repository builds them.

A multiplicative filter network: ``z_0 = g_0(x)``, ``z_i = g_i(x) * (W_i z_{i-1} + b_i)``, outputs
``y_i = U_i z_i + c_i`` at chosen layers. Each filter ``g_i(x) = sin(omega_i x + phi_i)`` has fixed frequencies
``omega_i`` drawn uniformly from a quantised grid inside ``[-B_i, B_i]`` (only the phases ``phi_i`` train), so the
output of layer ``i`` is band-limited to ``sum_{j <= i} B_j``. The per-layer bandwidths are fractions
(``input_scales``) of the network's maximum frequency; with several output layers the network gives a coarse to
fine series of band-limited outputs of the same signal (the multiscale BACON).
"""

from __future__ import annotations

import math
from typing import Literal, Sequence

import torch
from jaxtyping import Float
from torch import Tensor, nn

# The BACON repository's SDF setup (experiments/train_sdf.py): 9 filters, 8 hidden layers, outputs after layers
# 2, 4, 6, 8 at 1/8, 1/4, 1/2 and all of the bandwidth.
SDF_INPUT_SCALES: tuple[float, ...] = (1 / 24, 1 / 24, 1 / 24, 1 / 16, 1 / 16, 1 / 8, 1 / 8, 1 / 4, 1 / 4)
SDF_OUTPUT_LAYERS: tuple[int, ...] = (2, 4, 6, 8)


BaconSchedule = Literal["prefix", "spread"]
"""How a BACON of other than 8 hidden layers splits its bandwidth (see :func:`default_schedule`)."""


def default_schedule(
    hidden_layers: int, multiscale: bool, schedule: BaconSchedule = "prefix"
) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """Bandwidth fractions per filter and output layers for a network of ``hidden_layers``.

    Both schedules give the repository's SDF schedule for 8 hidden layers: outputs after layers 2, 4, 6, 8 at 1/8,
    1/4, 1/2 and all of the bandwidth, filters at 1/24 x3, 1/16 x2, 1/8 x2, 1/4 x2. They differ for other depths:

    - ``prefix`` (default): a shallower network is the first layers of that 8-layer network, with the same filters
      and the outputs it reaches (plus one after its last layer); its finest output therefore holds less than
      the full bandwidth (4 layers: filters 1/24 x3, 1/16 x2, outputs at 1/8 and 1/4 of it). Deeper networks
      use ``spread``.
    - ``spread``: the whole bandwidth in any depth, by BACON's rule: outputs after every second layer (ending at
      the last), the bandwidth doubling from one output to the next, each increment split equally among the
      filters before that output. In a shallow network the filters become wide (4 layers: 1/6 x3, 1/4 x2, i.e.
      32 and 48 cycles per unit at the SDF setup's 384), and such a network does not fit an SDF: it has almost
      no low frequencies, and training settles on a zero output.

    Single-scale networks keep the same filters and output only after the last layer.
    """
    if schedule == "prefix" and hidden_layers <= SDF_OUTPUT_LAYERS[-1]:
        scales = SDF_INPUT_SCALES[: hidden_layers + 1]
        outputs = tuple(layer for layer in SDF_OUTPUT_LAYERS if layer < hidden_layers) + (hidden_layers,)
        return scales, (outputs if multiscale else (hidden_layers,))
    outputs = tuple(range(hidden_layers, 0, -2))[::-1]
    bands = [2.0 ** (k - len(outputs) + 1) for k in range(len(outputs))]
    spread: list[float] = []
    previous_layer, previous_band = -1, 0.0
    for layer, band in zip(outputs, bands):
        count = layer - previous_layer
        spread += [(band - previous_band) / count] * count
        previous_layer, previous_band = layer, band
    return tuple(spread), (outputs if multiscale else (hidden_layers,))


class FourierFilter(nn.Module):
    """``sin(omega x + phi)`` with fixed quantised frequencies and trainable phases.

    Frequencies are multiples of ``quantization_interval`` in ``[-max_frequency, max_frequency]`` (radians per
    unit), drawn uniformly per input dimension; ``2 pi`` gives whole periods over a domain of length 1.

    Args:
        in_dim: Input coordinates.
        out_features: Number of sinusoids.
        max_frequency: Largest angular frequency per dimension.
        quantization_interval: Spacing of the frequency grid.
    """

    def __init__(
        self,
        in_dim: int,
        out_features: int,
        max_frequency: Sequence[float],
        quantization_interval: float = 2 * math.pi,
    ) -> None:
        super().__init__()
        omega = torch.empty(out_features, in_dim)
        for d, bound in enumerate(max_frequency):
            steps = int(round(2 * bound / quantization_interval))
            omega[:, d] = torch.randint(0, steps + 1, (out_features,)) * quantization_interval
            omega[:, d] -= steps * quantization_interval / 2
        self.register_buffer("omega", omega)
        self.phase = nn.Parameter(torch.rand(out_features) * 2 * math.pi - math.pi)

    def forward(self, x: Float[Tensor, "*bs in_dim"]) -> Float[Tensor, "*bs out_features"]:
        return torch.sin(x @ self.omega.T + self.phase)


class Bacon(nn.Module):
    """Multiscale (or single-scale) BACON.

    ``forward`` returns the finest output; :meth:`forward_multiscale` returns every output, coarse to fine.

    Args:
        in_dim: Input coordinates (data in [-0.5, 0.5]).
        out_dim: Output channels.
        hidden_features: Width.
        hidden_layers: Multiplicative layers after the first filter (BACON's ``hidden_layers``).
        max_frequency: The network-equivalent sample rate per unit length (BACON's ``max_freq``); the finest
            output holds frequencies up to half of it (times the sum of ``input_scales``, which is below 1 for a
            ``prefix`` network shallower than 8 layers).
        input_scales: Fraction of the bandwidth each of the ``hidden_layers + 1`` filters adds.
        output_layers: Layers (increasing within 1..hidden_layers, ending at it) with an output head.
        reuse_filters: Layers with equal bandwidth share one filter (as the repository's SDF models do).
        quantization_interval: Spacing of the filters' frequency grid.
    """

    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        hidden_features: int = 256,
        hidden_layers: int = 8,
        max_frequency: float = 384.0,
        input_scales: Sequence[float] = SDF_INPUT_SCALES,
        output_layers: Sequence[int] = SDF_OUTPUT_LAYERS,
        reuse_filters: bool = True,
        quantization_interval: float = 2 * math.pi,
    ) -> None:
        super().__init__()
        scales, outputs = tuple(input_scales), tuple(output_layers)
        self.hidden_layers = hidden_layers
        self.output_layers = outputs
        self.input_scales = scales

        # One filter per group of consecutive layers with equal bandwidth (if reusing), else one per layer.
        self.filter_index: list[int] = []
        filters: list[FourierFilter] = []
        for i, scale in enumerate(scales):
            if reuse_filters and i > 0 and math.isclose(scale, scales[i - 1]):
                self.filter_index.append(self.filter_index[-1])
                continue
            bound = round(math.pi * max_frequency * scale / quantization_interval) * quantization_interval
            filters.append(FourierFilter(in_dim, hidden_features, [bound] * in_dim, quantization_interval))
            self.filter_index.append(len(filters) - 1)
        self.filters = nn.ModuleList(filters)

        self.linear = nn.ModuleList([nn.Linear(hidden_features, hidden_features) for _ in range(hidden_layers)])
        self.heads = nn.ModuleList([nn.Linear(hidden_features, out_dim) for _ in outputs])
        bound = math.sqrt(6 / hidden_features)  # the repository's mfn_weights_init
        with torch.no_grad():
            for layer in [*self.linear, *self.heads]:
                layer.weight.uniform_(-bound, bound)

    def forward_multiscale(self, coords: Float[Tensor, "*bs in_dim"]) -> list[Float[Tensor, "*bs out_dim"]]:
        """Every output, coarse to fine."""
        cache: dict[int, Tensor] = {}

        def filtered(i: int) -> Tensor:
            k = self.filter_index[i]
            if k not in cache:
                cache[k] = self.filters[k](coords)
            return cache[k]

        out = filtered(0)
        results = []
        head = 0
        for i in range(1, self.hidden_layers + 1):
            out = filtered(i) * self.linear[i - 1](out)
            if i == self.output_layers[head]:
                results.append(self.heads[head](out))
                head += 1
        return results

    def forward(self, coords: Float[Tensor, "*bs in_dim"]) -> Float[Tensor, "*bs out_dim"]:
        return self.forward_multiscale(coords)[-1]

    def bandwidths(self) -> list[float]:
        """Highest frequency per axis (cycles per unit) that each output can hold."""
        per_layer = [float(self.filters[k].omega.abs().max()) / (2 * math.pi) for k in self.filter_index]
        return [sum(per_layer[: layer + 1]) for layer in self.output_layers]
