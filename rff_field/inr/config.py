"""Which coordinate network to build: one config for the (filtered) Fourier feature MLP and the baselines SIREN,
GAUSS, WIRE, SAPE and BACON, its builder, and the paper's table rows as presets."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal, Optional, get_args

from torch import nn

from rff_field.common.machine import check_memory
from rff_field.core.embedding import DEFAULT_NUM_FREQUENCIES, EmbeddingConfig
from rff_field.core.errors import UsageError, check_fields
from rff_field.core.filter import split_filter_parameters
from rff_field.inr.bacon import Bacon, BaconSchedule, default_schedule
from rff_field.inr.gauss import Gauss
from rff_field.inr.mlp import FourierFeatureMLP
from rff_field.inr.sape import SapeMLP
from rff_field.inr.siren import Siren
from rff_field.inr.wire import Wire

Method = Literal["mlp", "siren", "gauss", "wire", "sape", "bacon"]
METHODS: tuple[str, ...] = get_args(Method)

PRESETS: dict[str, dict[str, Any]] = {
    "mlp-pe": {"method": "mlp", "embedding.encoding": "pe", "embedding.filtered": False},
    "mlp-rff": {"method": "mlp", "embedding.encoding": "rff", "embedding.filtered": False},
    "filtered-pe": {"method": "mlp", "embedding.encoding": "pe", "embedding.filtered": True},
    "filtered-rff": {"method": "mlp", "embedding.encoding": "rff", "embedding.filtered": True},
    "siren": {"method": "siren"},
    "gauss": {"method": "gauss"},
    "wire": {"method": "wire"},
    "sape": {"method": "sape", "embedding.encoding": "rff"},
    "bacon": {"method": "bacon"},
}
"""The paper's table rows: each the options (field names, ``embedding.`` for the embedding's) it sets on a config."""


@dataclass
class NetworkConfig:
    """Which coordinate network to build, with its hyperparameters (defaults: the WIRE repository's)."""

    method: Method = "mlp"
    """``mlp``: ReLU MLP on the embedding (filtered by ``--embedding.filtered``); others: baselines (sape: 2D only)."""
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    """The Fourier feature embedding of ``mlp`` and ``sape``."""
    hidden_features: int = 256
    """Width of the hidden layers (WIRE uses int(width / sqrt(2)) complex features)."""
    hidden_layers: int = 2
    """Hidden layers after the first (2 gives the paper's 3 nonlinear layers)."""
    siren_omega0: float = 30.0
    """SIREN's frequency factor (first and hidden layers)."""
    wire_omega0: float = 20.0
    """WIRE's wavelet frequency."""
    wire_sigma0: float = 30.0
    """WIRE's wavelet inverse width."""
    gauss_scale: float = 30.0
    """GAUSS's inverse width."""
    sape_res: int = 128
    """SAPE: cells per axis of the spatial progression grid."""
    sape_epsilon: float = 1e-3
    """SAPE: a cell stops revealing frequencies once its (blurred) MSE is below this."""
    bacon_max_frequency: float = 384.0
    """BACON's network sample rate per unit; its finest output holds up to half of it."""
    bacon_schedule: BaconSchedule = "prefix"
    """BACON of other than 8 hidden layers: the first layers of its 8-layer network, or the whole bandwidth spread."""
    bacon_multiscale: bool = True
    """BACON with several outputs, coarse to fine; off: one output after the last layer."""
    bacon_input_scales: Optional[tuple[float, ...]] = None
    """Bandwidth fraction of each BACON filter, one per layer and one more (default: from the schedule)."""
    bacon_output_layers: Optional[tuple[int, ...]] = None
    """Layers with a BACON output head (default: from the schedule)."""

    def check(self, prefix: str = "--") -> None:
        """Raise :class:`UsageError` for options no network can be built with (options named ``prefix`` + field)."""
        if self.method not in METHODS:
            raise UsageError(f"{prefix}method must be one of {', '.join(METHODS)}, got {self.method!r}")
        check_fields(self, positive_int=("hidden_features", "sape_res"), non_negative_int=("hidden_layers",),
                     positive=("siren_omega0", "wire_omega0", "wire_sigma0", "gauss_scale", "bacon_max_frequency"),
                     non_negative=("sape_epsilon",), prefix=prefix)  # fmt: skip
        if self.method in ("mlp", "sape"):
            self.embedding.check(prefix + "embedding.")
        if self.method != "bacon":
            return
        layers, (scales, outputs) = self.hidden_layers, self.bacon_layout()
        if layers < 1 or self.bacon_schedule not in get_args(BaconSchedule):
            raise UsageError(f"BACON needs {prefix}hidden-layers >= 1 and {prefix}bacon-schedule prefix or spread")
        if len(scales) != layers + 1:
            raise UsageError(f"{prefix}bacon-input-scales needs {layers + 1} values (one per filter of {layers} "
                             f"hidden layers), got {len(scales)}")  # fmt: skip
        if sorted(set(outputs)) != list(outputs) or outputs[0] < 1 or outputs[-1] != layers:
            raise UsageError(f"{prefix}bacon-output-layers must increase within 1..{layers} and end at {layers}, "
                             f"got {' '.join(map(str, outputs))}")  # fmt: skip

    def parameter_estimate(self, in_dim: int, out_dim: int, sidelength: Optional[int] = None, **change: int) -> int:
        """About how many parameters the network has (linear layers and filter), with ``change``'s options set."""
        width, depth = (
            change.get("hidden_features", self.hidden_features),
            change.get("hidden_layers", self.hidden_layers),
        )
        inputs, filtered = in_dim, 0
        if self.method in ("mlp", "sape"):
            embedding = self.embedding
            bands = max(1, int(math.log2(sidelength / 4))) if sidelength and sidelength >= 8 else 1
            default = DEFAULT_NUM_FREQUENCIES.get("rff" if embedding.encoding == "rff" else embedding.pe_bands, bands)
            count = change.get("num_frequencies", embedding.num_frequencies or default)
            inputs = 2 * count * (1 if embedding.encoding == "rff" else in_dim) + in_dim
            if self.method == "mlp" and embedding.filtered:
                filtered = change.get("filter_layers", embedding.filter_layers) * inputs**2
        return (inputs * width + depth * width**2 + width * out_dim + filtered) * (2 if self.method == "wire" else 1)

    def check_memory(self, in_dim: int, out_dim: int, sidelength: Optional[int] = None, prefix: str = "--") -> None:
        """Raise :class:`UsageError` naming the dominant option and its largest value that fits in memory."""
        options = {"hidden_features": self.hidden_features, "hidden_layers": self.hidden_layers}
        if self.method in ("mlp", "sape") and self.embedding.num_frequencies is not None:
            options["num_frequencies"] = self.embedding.num_frequencies
        if self.method == "mlp" and self.embedding.filtered:
            options["filter_layers"] = self.embedding.filter_layers

        def needed(name: str, value: int) -> int:
            layers = {
                "hidden_layers": self.hidden_layers,
                "filter_layers": options.get("filter_layers", 0),
                name: value,
            }
            parameters = self.parameter_estimate(in_dim, out_dim, sidelength, **{name: value})
            return 4 * parameters + 2048 * (layers["hidden_layers"] + layers["filter_layers"])

        for name in sorted(options, key=lambda name: needed(name, 1)):  # the one whose reduction saves the most first
            option = prefix + ("embedding." if name in ("num_frequencies", "filter_layers") else "") + name
            check_memory(option.replace("_", "-"), options[name], lambda value, name=name: needed(name, value))

    def bacon_layout(self) -> tuple[tuple[float, ...], tuple[int, ...]]:
        """BACON's bandwidth fraction per filter and its output layers, as set or from the schedule."""
        scales, outputs = default_schedule(max(self.hidden_layers, 1), self.bacon_multiscale, self.bacon_schedule)
        return tuple(self.bacon_input_scales or scales), tuple(self.bacon_output_layers or outputs)


def build_network(config: NetworkConfig, in_dim: int, out_dim: int, sidelength: Optional[int] = None) -> nn.Module:
    """The network ``config`` describes; ``sidelength``: samples along the signal's longest axis (``wire`` bands)."""
    config.check_memory(in_dim, out_dim, sidelength)
    width, depth = config.hidden_features, config.hidden_layers
    if config.method == "siren":
        return Siren(in_dim, out_dim, width, depth, config.siren_omega0)
    if config.method == "gauss":
        return Gauss(in_dim, out_dim, width, depth, config.gauss_scale)
    if config.method == "wire":
        return Wire(in_dim, out_dim, width, depth, config.wire_omega0, config.wire_sigma0)
    if config.method == "bacon":
        scales, outputs = config.bacon_layout()
        return Bacon(in_dim, out_dim, width, depth, config.bacon_max_frequency, scales, outputs)
    if config.method == "sape":
        encoding = config.embedding.unfiltered(in_dim, sidelength)
        return SapeMLP(encoding, out_dim, width, depth, res=config.sape_res, epsilon=config.sape_epsilon)
    return FourierFeatureMLP(config.embedding.build(in_dim, sidelength), out_dim, width, depth)


def network_label(config: NetworkConfig) -> str:
    """The table row (a key of :data:`PRESETS`) that ``config`` is, e.g. ``filtered-pe``."""
    if config.method != "mlp":
        return config.method
    return ("filtered-" if config.embedding.filtered else "mlp-") + config.embedding.encoding


def count_parameters(module: nn.Module) -> int:
    """Trainable real parameters (a complex parameter counts twice)."""
    return sum(p.numel() * (2 if p.is_complex() else 1) for p in module.parameters() if p.requires_grad)


def parameter_metrics(module: nn.Module) -> dict[str, int]:
    """The result files' ``parameters`` (all trainable) and ``filter_parameters`` (the filters' share)."""
    return {"parameters": count_parameters(module),
            "filter_parameters": sum(p.numel() for p in split_filter_parameters(module)[0])}  # fmt: skip
