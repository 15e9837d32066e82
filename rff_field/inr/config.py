"""Which coordinate network to build: one config for the ReLU MLP on a (filtered) Fourier embedding and the
baselines SIREN, GAUSS, WIRE and SAPE, and the function that builds it.

Layer counts follow the WIRE repository: ``hidden_layers`` counts the hidden layers after the first one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

from torch import nn

from rff_field.core.embedding import EmbeddingConfig, resolve_bands
from rff_field.core.errors import UsageError, check_fields
from rff_field.core.filter import FilterInit
from rff_field.inr.gauss import Gauss
from rff_field.inr.mlp import FourierFeatureMLP
from rff_field.inr.siren import Siren
from rff_field.inr.wire import Wire

Method = Literal["mlp-pe", "mlp-rff", "siren", "gauss", "wire", "filtered-pe", "filtered-rff", "sape"]
METHODS: tuple[str, ...] = ("mlp-pe", "mlp-rff", "siren", "gauss", "wire", "filtered-pe", "filtered-rff")

FILTER_ONLY_OPTIONS = ("filter_layers", "filter_bias", "filter_residual", "filter_init", "filter_init_gain",
                       "line_search", "filter_lr", "filter_schedule")  # fmt: skip
"""Options of a network or training config that only a filtered method (``filtered-*``) reads."""


@dataclass
class NetworkConfig:
    """Which coordinate network to build, with its hyperparameters (defaults: the WIRE repository's)."""

    method: Method = "filtered-pe"
    """Network: ReLU MLP on PE or RFF (``mlp-*``), the same with the bias-free filter (``filtered-*``), or a
    baseline (``siren``, ``gauss``, ``wire``; ``sape``, an MLP whose embedding reveals higher frequencies region
    by region as the fit goes on, for images)."""
    hidden_features: int = 256
    """Width of the hidden layers (WIRE uses int(width / sqrt(2)) complex features)."""
    hidden_layers: int = 2
    """Hidden layers after the first (WIRE repository convention: 2 gives 3 nonlinear layers)."""
    pe: Literal["wire", "loglinear", "pow2", "nerf"] = "wire"
    """PE bands: the WIRE repository's Nyquist-limited ``2**(k-1)``, the paper's log-linear ``scale**(i/N)``, or
    ``2**k`` cycles (``pow2``, nerfstudio's NeRFEncoding; ``nerf`` is its earlier name)."""
    pe_frequencies: int = 64
    """Frequencies per input dimension for the log-linear and pow2 PE (WIRE's follows from the signal size)."""
    wire_bands: Optional[int] = None
    """Bands of the WIRE PE (default: ``floor(log2(side / 4))`` for the signal's side length)."""
    pe_scale: float = 32.0
    """Highest frequency of the log-linear PE, in cycles per unit of the input coordinates."""
    rff_frequencies: int = 128
    """Number of random frequencies (the embedding has twice as many channels)."""
    rff_sigma: float = 10.0
    """Standard deviation of the random frequencies, in cycles per unit of the input coordinates."""
    rff_seed: int = 0
    """Seed of the random frequencies."""
    filter_layers: int = 3
    """Linear layers of the adaptive filter."""
    filter_bias: bool = False
    """Give the filter biases (ablation: breaks its linearity)."""
    filter_residual: bool = False
    """Feed ``(1 + f(gamma)) * gamma`` instead of the paper's ``f(gamma) * gamma`` (a named deviation: the filtered
    embedding then starts near ``gamma``)."""
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

    def check(self) -> None:
        """Raise :class:`UsageError` for options no network can be built with."""
        check_fields(
            self,
            positive_int=("hidden_features", "pe_frequencies", "wire_bands", "rff_frequencies", "filter_layers",
                          "sape_res"),
            non_negative_int=("hidden_layers",),
            positive=("pe_scale", "rff_sigma", "omega0", "wire_omega0", "wire_sigma0", "gauss_scale",
                      "filter_init_gain"),
            non_negative=("sape_epsilon",),
        )  # fmt: skip


def embedding_config(config: NetworkConfig) -> EmbeddingConfig:
    """The embedding of an ``mlp-*``/``filtered-*`` (or SAPE) network, filtered for ``filtered-*``."""
    rff = config.method.endswith("-rff") or (config.method == "sape" and config.sape_embedding == "rff")
    bands = resolve_bands(config.pe, nerf_means="pow2")
    if rff:
        frequencies = config.rff_frequencies
    else:
        frequencies = config.wire_bands if bands == "wire" else config.pe_frequencies
    return EmbeddingConfig(
        kind="rff" if rff else "pe",
        pe_bands=bands,
        num_frequencies=frequencies,
        pe_scale=config.pe_scale,
        rff_sigma=config.rff_sigma,
        rff_seed=config.rff_seed,
        include_input=not rff and bands != "loglinear",
        filtered=config.method.startswith("filtered-"),
        filter_layers=config.filter_layers,
        filter_bias=config.filter_bias,
        filter_init=config.filter_init,
        filter_init_gain=config.filter_init_gain,
        filter_residual=config.filter_residual,
    )


def build_network(config: NetworkConfig, in_dim: int, out_dim: int, sidelength: Optional[int] = None) -> nn.Module:
    """Build the coordinate network that ``config`` describes.

    Args:
        config: Network configuration.
        in_dim: Input coordinates (2 for images, 3 for shapes).
        out_dim: Output channels.
        sidelength: Samples along the longest axis of the signal (for the WIRE PE; the WIRE repository's reading).
    """
    config.check()
    width, depth = config.hidden_features, config.hidden_layers
    if config.method == "siren":
        return Siren(in_dim, out_dim, width, depth, config.omega0, config.omega0)
    if config.method == "gauss":
        return Gauss(in_dim, out_dim, width, depth, config.gauss_scale)
    if config.method == "wire":
        return Wire(in_dim, out_dim, width, depth, config.wire_omega0, config.wire_sigma0)
    if config.method == "sape":  # 2D images only; METHODS lists the methods every task supports
        from rff_field.inr.sape import SapeMLP

        encoding = embedding_config(config).build(in_dim, sidelength)
        return SapeMLP(encoding, out_dim, width, depth, res=config.sape_res, epsilon=config.sape_epsilon)
    if config.method not in METHODS:
        raise UsageError(f"unknown method {config.method!r}; choose one of {', '.join(METHODS)}")
    return FourierFeatureMLP(embedding_config(config).build(in_dim, sidelength), out_dim, width, depth)


def count_parameters(module: nn.Module) -> int:
    """Trainable real parameters (a complex parameter counts twice)."""
    return sum(p.numel() * (2 if p.is_complex() else 1) for p in module.parameters() if p.requires_grad)
