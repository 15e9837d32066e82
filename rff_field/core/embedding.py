"""One description of a (filtered) Fourier feature embedding, and the one function that builds it.

Band families of the positional encoding, named the same everywhere:

* ``loglinear``: the paper's ``sin(2 pi s^(i/N) x)``, i = 1..N (scale ``s``);
* ``wire``: the WIRE repository's Nyquist-limited ``sin(2^k pi x)``, k = 0..L-1, for coordinates in [-1, 1];
* ``pow2``: ``sin(2 pi 2^k x)``, k = 0..L-1 (nerfstudio's ``NeRFEncoding``);
* ``nerf-pytorch``: ``sin(2^k x)``, k = 0..L-1 (nerf-pytorch's embedding, used by ``rff-nerf``).

``nerf`` was the name of ``pow2`` in the image and SDF tools and of ``nerf-pytorch`` in the NeRF methods; each
config still reads its own old meaning (:func:`resolve_bands`), with a notice.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Literal, Optional

import torch

from rff_field.core.encodings import Encoding, PositionalEncoding, RandomFourierEncoding
from rff_field.core.errors import UsageError
from rff_field.core.filter import FilteredEncoding, FilterInit, initialize_filter

PEBands = Literal["loglinear", "wire", "pow2", "nerf-pytorch"]
LEGACY_BANDS = {"log-linear": "loglinear"}
"""Spellings of earlier versions with one meaning everywhere."""


def resolve_bands(name: str, nerf_means: PEBands) -> PEBands:
    """The band family ``name`` stands for; ``nerf`` means ``nerf_means`` (its old meaning in the caller's config)."""
    resolved = nerf_means if name == "nerf" else LEGACY_BANDS.get(name, name)
    if resolved != name:
        warnings.warn(f"PE bands {name!r} are now called {resolved!r}", FutureWarning, stacklevel=3)
    return resolved  # type: ignore[return-value]


@dataclass
class EmbeddingConfig:
    """A Fourier feature embedding, filtered or not.

    Args:
        kind: ``pe`` (bands on each axis) or ``rff`` (random Gaussian frequency vectors).
        pe_bands: The band family of ``pe`` (see the module).
        num_frequencies: ``pe``: bands per input dimension (for ``wire``: None takes them from the signal's side);
            ``rff``: number of frequency vectors.
        pe_scale: Highest frequency ``s`` (cycles per unit) of the ``loglinear`` bands.
        rff_sigma: Standard deviation of the random frequencies (cycles per unit).
        rff_seed: Seed of the random frequencies.
        include_input: Prepend the raw coordinates (``wire`` always does).
        filtered: Pass the embedding through the bias-free adaptive filter.
        filter_layers: Linear layers of the filter.
        filter_bias: Give the filter biases (ablation only).
        filter_init: Initialisation of the filter's weights (:func:`~rff_field.core.filter.initialize_filter`).
        filter_init_gain: Gain of the non-default initialisations.
        filter_residual: Feed ``(1 + f(gamma)) * gamma`` instead of the paper's ``f(gamma) * gamma``.
    """

    kind: Literal["pe", "rff"] = "pe"
    pe_bands: PEBands = "loglinear"
    num_frequencies: Optional[int] = 10
    pe_scale: float = 64.0
    rff_sigma: float = 8.0
    rff_seed: int = 0
    include_input: bool = True
    filtered: bool = True
    filter_layers: int = 3
    filter_bias: bool = False
    filter_init: FilterInit = "default"
    filter_init_gain: float = 1.0
    filter_residual: bool = False

    def build(self, in_dim: int, sidelength: Optional[int] = None) -> Encoding:
        """A new encoding (with a new filter, when filtered) for ``in_dim`` input coordinates.

        Args:
            in_dim: Input coordinates.
            sidelength: Samples along the signal's longest axis (the ``wire`` bands need it or
                ``num_frequencies``).
        """
        encoding = self._unfiltered(in_dim, sidelength)
        if not self.filtered:
            return encoding
        filtered = FilteredEncoding(
            encoding, num_layers=self.filter_layers, bias=self.filter_bias, residual=self.filter_residual
        )
        initialize_filter(filtered.filter, self.filter_init, self.filter_init_gain)
        return filtered

    def _unfiltered(self, in_dim: int, sidelength: Optional[int]) -> Encoding:
        if self.kind == "rff":
            if self.num_frequencies is None:
                raise UsageError("random Fourier features need a number of frequencies")
            return RandomFourierEncoding(
                in_dim, self.num_frequencies, self.rff_sigma, self.include_input, seed=self.rff_seed
            )
        if self.pe_bands == "wire":
            if self.num_frequencies is None and sidelength is None:
                raise UsageError("the WIRE PE needs the signal's side length or a number of bands")
            side = sidelength if self.num_frequencies is None else 4 * 2**self.num_frequencies
            return PositionalEncoding.wire(in_dim, side)
        if self.num_frequencies is None:
            raise UsageError(f"the {self.pe_bands} PE needs a number of frequencies")
        if self.pe_bands == "loglinear":
            return PositionalEncoding(in_dim, self.num_frequencies, self.pe_scale, self.include_input)
        frequencies = 2.0 ** torch.arange(self.num_frequencies, dtype=torch.float64)
        if self.pe_bands == "nerf-pytorch":
            frequencies = frequencies / (2 * math.pi)  # sin(2 pi f x) = sin(2^k x)
        elif self.pe_bands != "pow2":
            raise UsageError(f"unknown PE bands {self.pe_bands!r}; choose loglinear, wire, pow2 or nerf-pytorch")
        return PositionalEncoding(
            in_dim, self.num_frequencies, float(frequencies[-1]), self.include_input, frequencies=frequencies
        )
