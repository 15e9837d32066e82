"""WIRE (Saragadam et al. 2023): complex Gabor wavelet activations, as the WIRE repository defines them."""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor, nn


class ComplexGaborLayer(nn.Module):
    """WIRE's complex Gabor wavelet ``exp(i omega0 z - |sigma0 z|^2)`` of ``z = W x + b`` (real input when first)."""

    def __init__(self, in_features: int, out_features: int, omega0: float, sigma0: float, is_first: bool) -> None:
        super().__init__()
        self.omega0 = omega0
        self.sigma0 = sigma0
        self.linear = nn.Linear(in_features, out_features, dtype=torch.float if is_first else torch.cfloat)

    def forward(self, x: Tensor) -> Tensor:
        z = self.linear(x)
        return torch.exp(1j * self.omega0 * z - (self.sigma0 * z).abs().square())


class Wire(nn.Module):
    """Complex Gabor layers and the real part of a complex linear output; the complex width is
    ``int(hidden_features / sqrt(2))``, as in the WIRE repository, to match a real network's parameter count."""

    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        hidden_features: int = 256,
        hidden_layers: int = 2,
        omega0: float = 20.0,
        sigma0: float = 30.0,
    ) -> None:
        super().__init__()
        width = int(hidden_features / math.sqrt(2))
        self.complex_features = width
        layers: list[nn.Module] = [ComplexGaborLayer(in_dim, width, omega0, sigma0, is_first=True)]
        for _ in range(hidden_layers):
            layers.append(ComplexGaborLayer(width, width, omega0, sigma0, is_first=False))
        layers.append(nn.Linear(width, out_dim, dtype=torch.cfloat))
        self.net = nn.Sequential(*layers)

    def forward(self, coords: Float[Tensor, "*bs in_dim"]) -> Float[Tensor, "*bs out_dim"]:
        return self.net(coords).real
