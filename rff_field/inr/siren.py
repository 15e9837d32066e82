"""SIREN (Sitzmann et al. 2020): sine activations with its initialisation."""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor, nn


class SineLayer(nn.Module):
    """``sin(omega_0 (W x + b))`` with SIREN's initialisation (Sitzmann et al. 2020)."""

    def __init__(self, in_features: int, out_features: int, omega_0: float, is_first: bool) -> None:
        super().__init__()
        self.omega_0 = omega_0
        self.linear = nn.Linear(in_features, out_features)
        bound = 1 / in_features if is_first else math.sqrt(6 / in_features) / omega_0
        with torch.no_grad():
            self.linear.weight.uniform_(-bound, bound)

    def forward(self, x: Tensor) -> Tensor:
        return torch.sin(self.omega_0 * self.linear(x))


class Siren(nn.Module):
    """SIREN: sine layers and a linear output layer initialised like a hidden one."""

    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        hidden_features: int = 256,
        hidden_layers: int = 2,
        omega_0: float = 30.0,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = [SineLayer(in_dim, hidden_features, omega_0, is_first=True)]
        for _ in range(hidden_layers):
            layers.append(SineLayer(hidden_features, hidden_features, omega_0, is_first=False))
        final = nn.Linear(hidden_features, out_dim)
        bound = math.sqrt(6 / hidden_features) / omega_0
        with torch.no_grad():
            final.weight.uniform_(-bound, bound)
        layers.append(final)
        self.net = nn.Sequential(*layers)

    def forward(self, coords: Float[Tensor, "*bs in_dim"]) -> Float[Tensor, "*bs out_dim"]:
        return self.net(coords)
