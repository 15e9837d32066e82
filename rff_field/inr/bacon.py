"""BACON: band-limited coordinate networks (Lindell et al., CVPR 2022), as its repository builds them: a multiplicative
filter network whose layer ``i`` is band-limited to the sum of its filters' bounds so far: coarse to fine outputs."""

from __future__ import annotations

import math
from typing import Literal, Sequence

import torch
from jaxtyping import Float
from torch import Tensor, nn

# The BACON repository's SDF network (experiments/train_sdf.py): 9 filters, outputs after layers 2, 4, 6, 8.
SDF_INPUT_SCALES: tuple[float, ...] = (1 / 24, 1 / 24, 1 / 24, 1 / 16, 1 / 16, 1 / 8, 1 / 8, 1 / 4, 1 / 4)
SDF_OUTPUT_LAYERS: tuple[int, ...] = (2, 4, 6, 8)


BaconSchedule = Literal["prefix", "spread"]  # how a BACON of other than 8 hidden layers splits its bandwidth


def default_schedule(
    hidden_layers: int, multiscale: bool, schedule: BaconSchedule = "prefix"
) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """Bandwidth fractions per filter and output layers. At 8 layers both give the repository's SDF network; otherwise
    ``prefix`` takes its first layers, ``spread`` BACON's rule (outputs every second layer, bandwidth doubling)."""
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
    """``sin(omega x + phi)``: frozen frequencies, whole periods per unit (multiples of 2 pi) drawn uniformly in
    ``[-bound, bound]`` (radians per unit) per input dimension, and trainable phases."""

    def __init__(self, in_dim: int, out_features: int, bound: float) -> None:
        super().__init__()
        steps = int(round(bound / math.pi))
        self.register_buffer("omega", (torch.randint(0, steps + 1, (out_features, in_dim)) - steps / 2) * 2 * math.pi)
        self.phase = nn.Parameter(torch.rand(out_features) * 2 * math.pi - math.pi)

    def forward(self, x: Float[Tensor, "*bs in_dim"]) -> Float[Tensor, "*bs out_features"]:
        return torch.sin(x @ self.omega.T + self.phase)


class Bacon(nn.Module):
    """Multiscale BACON on [-0.5, 0.5] coordinates; ``forward`` returns the finest output, :meth:`forward_multiscale`
    all. ``max_frequency``: sample rate per unit (BACON's ``max_freq``); ``input_scales``: the bandwidth fraction each
    of the ``hidden_layers + 1`` filters adds (equal neighbours share one); ``output_layers``: those with a head."""

    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        hidden_features: int = 256,
        hidden_layers: int = 8,
        max_frequency: float = 384.0,
        input_scales: Sequence[float] = SDF_INPUT_SCALES,
        output_layers: Sequence[int] = SDF_OUTPUT_LAYERS,
    ) -> None:
        super().__init__()
        self.hidden_layers, self.output_layers, self.input_scales = hidden_layers, tuple(output_layers), input_scales
        self.filter_index: list[int] = []
        filters: list[FourierFilter] = []
        for i, scale in enumerate(input_scales):
            if i == 0 or not math.isclose(scale, input_scales[i - 1]):
                bound = round(max_frequency * scale / 2) * 2 * math.pi  # a whole number of periods per unit
                filters.append(FourierFilter(in_dim, hidden_features, bound))
            self.filter_index.append(len(filters) - 1)
        self.filters = nn.ModuleList(filters)
        self.linear = nn.ModuleList([nn.Linear(hidden_features, hidden_features) for _ in range(hidden_layers)])
        self.heads = nn.ModuleList([nn.Linear(hidden_features, out_dim) for _ in self.output_layers])
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
