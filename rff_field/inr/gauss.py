"""GAUSS (Ramasinghe & Lucey 2022): Gaussian activations, as the WIRE repository defines them."""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor, nn


class GaussLayer(nn.Module):
    """``exp(-(scale (W x + b))^2)`` (Ramasinghe & Lucey 2022, as in the WIRE repository)."""

    def __init__(self, in_features: int, out_features: int, scale: float) -> None:
        super().__init__()
        self.scale = scale
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: Tensor) -> Tensor:
        return torch.exp(-((self.scale * self.linear(x)) ** 2))


class Gauss(nn.Module):
    """MLP with Gaussian activations and a linear output layer; ``scale``: the Gaussians' inverse width (``sigma0``)."""

    def __init__(
        self, in_dim: int, out_dim: int, hidden_features: int = 256, hidden_layers: int = 2, scale: float = 30.0
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = [GaussLayer(in_dim, hidden_features, scale)]
        for _ in range(hidden_layers):
            layers.append(GaussLayer(hidden_features, hidden_features, scale))
        layers.append(nn.Linear(hidden_features, out_dim))
        self.net = nn.Sequential(*layers)

    def forward(self, coords: Float[Tensor, "*bs in_dim"]) -> Float[Tensor, "*bs out_dim"]:
        return self.net(coords)
