"""Coordinate networks: a ReLU MLP on a (optionally filtered) Fourier embedding, and the baselines SIREN, GAUSS
and WIRE as the WIRE repository defines them.

Layer counts follow the WIRE repository: ``hidden_layers`` counts the hidden layers after the first one, so a
network has ``hidden_layers + 1`` nonlinear layers and one linear output layer (the default 2 gives the
paper's "3 x 256").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Optional

import torch
from jaxtyping import Float
from nerfstudio.field_components.encodings import Encoding
from torch import Tensor, nn

from rff_field.encodings import PositionalEncoding, RandomFourierEncoding
from rff_field.filter import FilteredEncoding

Method = Literal["mlp-pe", "mlp-rff", "siren", "gauss", "wire", "filtered-pe", "filtered-rff", "sape"]
METHODS: tuple[str, ...] = ("mlp-pe", "mlp-rff", "siren", "gauss", "wire", "filtered-pe", "filtered-rff")
FilterInit = Literal["default", "scaled", "identity", "orthogonal"]


class FourierFeatureMLP(nn.Module):
    """ReLU MLP on a Fourier feature embedding (``MLP+PE``/``MLP+RFF``; filtered when the encoding is).

    Args:
        encoding: The embedding, possibly a :class:`~rff_field.filter.FilteredEncoding`.
        out_dim: Output channels.
        hidden_features: Width of the hidden layers.
        hidden_layers: Hidden layers after the first (WIRE convention).
    """

    def __init__(self, encoding: Encoding, out_dim: int, hidden_features: int = 256, hidden_layers: int = 2) -> None:
        super().__init__()
        self.encoding = encoding
        layers: list[nn.Module] = [nn.Linear(encoding.get_out_dim(), hidden_features), nn.ReLU()]
        for _ in range(hidden_layers):
            layers += [nn.Linear(hidden_features, hidden_features), nn.ReLU()]
        layers.append(nn.Linear(hidden_features, out_dim))
        self.mlp = nn.Sequential(*layers)

    def forward(self, coords: Float[Tensor, "*bs in_dim"]) -> Float[Tensor, "*bs out_dim"]:
        return self.mlp(self.encoding(coords))


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
    """SIREN: sine activations with its initialisation; a linear output layer initialised like a hidden one.

    Args:
        in_dim: Input coordinates.
        out_dim: Output channels.
        hidden_features: Width.
        hidden_layers: Hidden layers after the first.
        first_omega_0: Frequency factor of the first layer.
        hidden_omega_0: Frequency factor of the other layers.
    """

    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        hidden_features: int = 256,
        hidden_layers: int = 2,
        first_omega_0: float = 30.0,
        hidden_omega_0: float = 30.0,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = [SineLayer(in_dim, hidden_features, first_omega_0, is_first=True)]
        for _ in range(hidden_layers):
            layers.append(SineLayer(hidden_features, hidden_features, hidden_omega_0, is_first=False))
        final = nn.Linear(hidden_features, out_dim)
        bound = math.sqrt(6 / hidden_features) / hidden_omega_0
        with torch.no_grad():
            final.weight.uniform_(-bound, bound)
        layers.append(final)
        self.net = nn.Sequential(*layers)

    def forward(self, coords: Float[Tensor, "*bs in_dim"]) -> Float[Tensor, "*bs out_dim"]:
        return self.net(coords)


class GaussLayer(nn.Module):
    """``exp(-(scale (W x + b))^2)`` (Ramasinghe & Lucey 2022, as in the WIRE repository)."""

    def __init__(self, in_features: int, out_features: int, scale: float) -> None:
        super().__init__()
        self.scale = scale
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: Tensor) -> Tensor:
        return torch.exp(-((self.scale * self.linear(x)) ** 2))


class Gauss(nn.Module):
    """MLP with Gaussian activations and a linear output layer.

    Args:
        in_dim: Input coordinates.
        out_dim: Output channels.
        hidden_features: Width.
        hidden_layers: Hidden layers after the first.
        scale: Inverse width of the Gaussian (the WIRE repository's ``sigma0``).
    """

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


class ComplexGaborLayer(nn.Module):
    """WIRE's complex Gabor wavelet ``exp(i omega0 z - |sigma0 z|^2)`` of ``z = W x + b``.

    The first layer takes real input; later layers are complex.
    """

    def __init__(self, in_features: int, out_features: int, omega0: float, sigma0: float, is_first: bool) -> None:
        super().__init__()
        self.omega0 = omega0
        self.sigma0 = sigma0
        self.linear = nn.Linear(in_features, out_features, dtype=torch.float if is_first else torch.cfloat)

    def forward(self, x: Tensor) -> Tensor:
        z = self.linear(x)
        return torch.exp(1j * self.omega0 * z - (self.sigma0 * z).abs().square())


class Wire(nn.Module):
    """WIRE (Saragadam et al. 2023): complex Gabor layers; the real part of a complex linear output.

    As in the WIRE repository, the complex width is ``int(hidden_features / sqrt(2))`` (181 for 256) so that the
    parameter count matches a real network of ``hidden_features``.

    Args:
        in_dim: Input coordinates.
        out_dim: Output channels.
        hidden_features: Real-equivalent width.
        hidden_layers: Hidden layers after the first.
        omega0: Frequency of the wavelet.
        sigma0: Inverse width of the wavelet.
    """

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


@dataclass
class NetworkConfig:
    """Which coordinate network to build, with its hyperparameters (defaults: DESIGN.md / WIRE repository)."""

    method: Method = "filtered-pe"
    """Network: ReLU MLP on PE or RFF (``mlp-*``), the same with the bias-free filter (``filtered-*``), or a
    baseline (``siren``, ``gauss``, ``wire``)."""
    hidden_features: int = 256
    """Width of the hidden layers (WIRE uses int(width / sqrt(2)) complex features)."""
    hidden_layers: int = 2
    """Hidden layers after the first (WIRE repository convention: 2 gives 3 nonlinear layers)."""
    pe: Literal["wire", "loglinear", "nerf"] = "wire"
    """PE variant: the WIRE repository's Nyquist-limited bands, the paper's log-linear ``scale**(i/N)``, or
    NeRF's ``2**k``."""
    pe_frequencies: int = 64
    """Frequencies per input dimension for the log-linear and NeRF PE (WIRE's follows from the signal size)."""
    pe_bands: Optional[int] = None
    """Bands of the WIRE PE (default: ``floor(log2(side / 4))`` for the signal's side length)."""
    pe_scale: float = 32.0
    """Highest frequency of the log-linear PE, in cycles per unit of the input coordinates."""
    rff_frequencies: int = 128
    """Number of random frequencies (the embedding has twice as many channels)."""
    rff_sigma: float = 10.0
    """Standard deviation of the random frequencies."""
    rff_seed: int = 0
    """Seed of the random frequencies."""
    filter_layers: int = 3
    """Linear layers of the adaptive filter."""
    filter_bias: bool = False
    """Give the filter biases (ablation: breaks its linearity)."""
    omega0: float = 30.0
    """SIREN's frequency factor (first and hidden layers)."""
    wire_omega0: float = 20.0
    """WIRE's wavelet frequency."""
    wire_sigma0: float = 30.0
    """WIRE's wavelet inverse width."""
    gauss_scale: float = 30.0
    """GAUSS's inverse width."""
    filter_init: FilterInit = "default"
    """Initialisation of the filter's weights: PyTorch's default; the default times ``filter_init_gain``
    (``scaled``); identity matrices times the gain (``f(gamma) * gamma`` then starts as ``relu(gamma) * gamma``
    for 2+ layers); or orthogonal matrices times the gain."""
    filter_init_gain: float = 1.0
    """Gain of the ``scaled``, ``identity`` and ``orthogonal`` filter initialisations."""
    sape_embedding: Literal["rff", "pe"] = "rff"
    """SAPE (2D only): progressively revealed embedding, RFF (``rff_*`` options) or PE (``pe*`` options)."""
    sape_res: int = 128
    """SAPE: cells per axis of the spatial progression grid."""
    sape_epsilon: float = 1e-3
    """SAPE: a cell stops revealing frequencies once its (blurred) MSE is below this."""


def build_encoding(config: NetworkConfig, in_dim: int, sidelength: Optional[int] = None) -> Encoding:
    """The (unfiltered) embedding of an ``mlp-*``/``filtered-*`` network.

    Args:
        config: Network configuration.
        in_dim: Input coordinates.
        sidelength: Samples along the shortest axis of the signal; needed by the WIRE PE.
    """
    if config.method.endswith("-rff"):
        return RandomFourierEncoding(in_dim, config.rff_frequencies, config.rff_sigma, seed=config.rff_seed)
    if config.pe == "wire":
        if sidelength is None and not config.pe_bands:
            raise ValueError("the WIRE PE needs the signal's side length; pass sidelength or choose another --pe")
        return PositionalEncoding.wire(in_dim, 4 * 2**config.pe_bands if config.pe_bands else sidelength)
    if config.pe == "nerf":
        return PositionalEncoding.nerf(in_dim, config.pe_frequencies)
    return PositionalEncoding(in_dim, config.pe_frequencies, config.pe_scale)


def build_network(config: NetworkConfig, in_dim: int, out_dim: int, sidelength: Optional[int] = None) -> nn.Module:
    """Build the coordinate network that ``config`` describes.

    Args:
        config: Network configuration.
        in_dim: Input coordinates (2 for images, 3 for shapes).
        out_dim: Output channels.
        sidelength: Samples along the shortest axis of the signal (for the WIRE PE).
    """
    width, depth = config.hidden_features, config.hidden_layers
    if config.method == "siren":
        return Siren(in_dim, out_dim, width, depth, config.omega0, config.omega0)
    if config.method == "gauss":
        return Gauss(in_dim, out_dim, width, depth, config.gauss_scale)
    if config.method == "wire":
        return Wire(in_dim, out_dim, width, depth, config.wire_omega0, config.wire_sigma0)
    if config.method == "sape":  # 2D images only; METHODS lists the methods every task supports
        from rff_field.sape import SapeMLP

        embedding = NetworkConfig(**{**config.__dict__, "method": f"mlp-{config.sape_embedding}"})
        encoding = build_encoding(embedding, in_dim, sidelength)
        return SapeMLP(encoding, out_dim, width, depth, res=config.sape_res, epsilon=config.sape_epsilon)
    if config.method not in METHODS:
        raise ValueError(f"unknown method {config.method!r}; choose one of {', '.join(METHODS)}")
    encoding = build_encoding(config, in_dim, sidelength)
    if config.method.startswith("filtered-"):
        encoding = FilteredEncoding(encoding, num_layers=config.filter_layers, bias=config.filter_bias)
        initialize_filter(encoding.filter, config.filter_init, config.filter_init_gain)
    return FourierFeatureMLP(encoding, out_dim, width, depth)


@torch.no_grad()
def initialize_filter(filter_module: nn.Module, scheme: FilterInit = "default", gain: float = 1.0) -> None:
    """Re-initialise the weights of a filter's linear layers (biases, if any, keep PyTorch's default).

    Args:
        filter_module: The filter (e.g. ``FilteredEncoding.filter``).
        scheme: ``default`` (leave as built), ``scaled``, ``identity`` or ``orthogonal`` (see ``NetworkConfig``).
        gain: Factor applied to the weights by the non-default schemes.
    """
    if scheme == "default":
        return
    if scheme not in ("scaled", "identity", "orthogonal"):
        raise ValueError(f"unknown filter initialisation {scheme!r}; choose default, scaled, identity or orthogonal")
    for layer in filter_module.modules():
        if not isinstance(layer, nn.Linear):
            continue
        if scheme == "identity":
            nn.init.eye_(layer.weight)
            layer.weight.mul_(gain)
        elif scheme == "orthogonal":
            nn.init.orthogonal_(layer.weight, gain=gain)
        else:
            layer.weight.mul_(gain)


def count_parameters(module: nn.Module) -> int:
    """Trainable real parameters (a complex parameter counts twice)."""
    return sum(p.numel() * (2 if p.is_complex() else 1) for p in module.parameters() if p.requires_grad)
