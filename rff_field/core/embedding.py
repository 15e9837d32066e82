"""One description of a (filtered) Fourier feature embedding, the one function that builds it, and the warning for
frequencies that the sampled signal cannot hold. Frequencies are in cycles per unit of the input coordinates."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Literal, Optional, Sequence, Union, get_args

import torch

from rff_field.core.encodings import Encoding, FourierEncoding, PositionalEncoding, RandomFourierEncoding
from rff_field.core.errors import UsageError, check_fields
from rff_field.core.filter import FilteredEncoding, FilterInit, initialize_filter

PEBands = Literal["loglinear", "wire", "pow2", "nerf-pytorch"]
DEFAULT_NUM_FREQUENCIES = {"rff": 128, "loglinear": 64, "pow2": 10, "nerf-pytorch": 10}
"""``num_frequencies`` when it is None, by encoding (``rff``) or PE band family (``wire``: from the signal's side)."""


@dataclass
class EmbeddingConfig:
    """A Fourier feature embedding, filtered or not."""

    encoding: Literal["pe", "rff"] = "pe"
    """``pe``: bands on each axis; ``rff``: random Gaussian frequency vectors."""
    pe_bands: PEBands = "loglinear"
    """PE bands, k = 0..N-1: the paper's ``loglinear`` ``s^((k+1)/N)``; WIRE's Nyquist-limited ``wire`` ``2^(k-1)``
    (N = floor(log2(side / 4)), coordinates in [-1, 1]); ``pow2`` ``2^k``; ``nerf-pytorch`` ``2^k / (2 pi)``."""
    num_frequencies: Optional[int] = None
    """PE: bands per input dimension; RFF: frequency vectors. None: 64 loglinear, 10 pow2 and nerf-pytorch, 128 RFF,
    wire from the signal's side."""
    pe_scale: float = 32.0
    """Highest frequency ``s`` of the ``loglinear`` bands, in cycles per unit of the input coordinates."""
    rff_sigma: float = 10.0
    """Standard deviation of the random frequencies, in cycles per unit."""
    rff_seed: int = 0
    """Seed of the random frequencies."""
    include_input: bool = False
    """Prepend the raw coordinates to the features (``wire`` always does)."""
    filtered: bool = True
    """Feed the INR ``f(gamma) * gamma`` with ``f`` the bias-free adaptive filter (the paper's method)."""
    filter_layers: int = 3
    """Linear layers of the filter."""
    filter_bias: bool = False
    """Give the filter biases (ablation only: it breaks the filter's linearity)."""
    filter_init: FilterInit = "default"
    """The filter's weights: PyTorch's default (the paper), the default times the gain (``scaled``), or identity or
    orthogonal matrices times the gain."""
    filter_init_gain: float = 1.0
    """Gain of the ``scaled``, ``identity`` and ``orthogonal`` initialisations."""
    filter_residual: bool = False
    """Feed ``(1 + f(gamma)) * gamma`` instead of the paper's ``f(gamma) * gamma`` (a named deviation)."""
    filter_fused: bool = True
    """Compute the filter and its product in fewer passes (the same results to rounding, first derivatives only);
    off: torch's modules."""

    def check(self, prefix: str = "--embedding.") -> None:
        """Raise :class:`UsageError` for values no embedding can be built with (options named ``prefix`` + field)."""
        for name, allowed in (("encoding", ("pe", "rff")), ("pe_bands", get_args(PEBands)),
                              ("filter_init", get_args(FilterInit))):  # fmt: skip
            if getattr(self, name) not in allowed:
                option = prefix + name.replace("_", "-")
                raise UsageError(f"{option} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}")
        check_fields(self, positive_int=("num_frequencies", "filter_layers"), non_negative_int=("rff_seed",),
                     positive=("pe_scale", "rff_sigma", "filter_init_gain"), prefix=prefix)  # fmt: skip
        if self.filter_init != "default" and self.filter_layers * math.log10(self.filter_init_gain) > 30:
            raise UsageError(f"{prefix}filter-init-gain {self.filter_init_gain:g} over {self.filter_layers} layers "
                             "would scale the embedding beyond 1e30 (float32 overflows); lower it")  # fmt: skip

    def build(self, in_dim: int, sidelength: Optional[int] = None) -> Encoding:
        """A new encoding of ``in_dim`` coordinates, with a new filter when ``filtered``; ``sidelength``: samples
        along the signal's longest axis (``wire`` bands need it or ``num_frequencies``)."""
        encoding = self.unfiltered(in_dim, sidelength)
        if not self.filtered:
            return encoding
        args = (self.filter_layers, self.filter_bias, self.filter_residual, self.filter_fused)
        filtered = FilteredEncoding(encoding, *args)
        initialize_filter(filtered.filter, self.filter_init, self.filter_init_gain)
        return filtered

    def unfiltered(self, in_dim: int, sidelength: Optional[int] = None) -> FourierEncoding:
        """The embedding ``gamma`` alone (see :meth:`build`)."""
        count = self.num_frequencies
        if self.encoding == "rff":
            count = count or DEFAULT_NUM_FREQUENCIES["rff"]
            return RandomFourierEncoding(in_dim, count, self.rff_sigma, self.include_input, self.rff_seed)
        if self.pe_bands == "wire":
            if count is None:
                count = int(math.log2(sidelength / 4)) if sidelength is not None and sidelength >= 8 else 0
            if count < 1:
                raise UsageError(f"the wire PE bands need a signal side of at least 8 samples (got {sidelength}) or "
                                 "--embedding.num-frequencies")  # fmt: skip
            return PositionalEncoding(in_dim, 2.0 ** (torch.arange(count, dtype=torch.float64) - 1), True)
        count = count or DEFAULT_NUM_FREQUENCIES[self.pe_bands]
        k = torch.arange(count, dtype=torch.float64)
        if self.pe_bands == "loglinear":
            frequencies = torch.tensor(self.pe_scale, dtype=torch.float64) ** ((k + 1) / count)
        else:
            frequencies = 2.0**k / (2 * math.pi if self.pe_bands == "nerf-pytorch" else 1.0)
        return PositionalEncoding(in_dim, frequencies, self.include_input)


def warn_if_aliased(
    config: EmbeddingConfig,
    samples: Sequence[int],
    extent: Union[float, Sequence[float]] = 2.0,
    prefix: str = "--embedding.",
) -> bool:
    """Warn in one line, and return True, when most channels lie above the grid's Nyquist limit
    ``samples / (2 extent)`` on some axis (``samples`` per axis in the coordinates' order, ``extent`` their span)."""
    extents = [float(extent)] * len(samples) if isinstance(extent, (int, float)) else list(extent)
    limits = torch.tensor([n / (2 * e) for n, e in zip(samples, extents)], dtype=torch.float64)
    encoding = config.unfiltered(len(samples), max(samples))
    vectors = encoding.frequency_vectors().double()[encoding.in_dim if encoding.include_input else 0 :]
    above = int((vectors.abs() > limits).any(dim=-1).sum())
    if 2 * above <= len(vectors):
        return False
    pe_option = "pe-scale" if config.pe_bands == "loglinear" else "num-frequencies"
    option = prefix + ("rff-sigma" if config.encoding == "rff" else pe_option)
    logging.getLogger(__name__).warning(
        f"{above} of the embedding's {len(vectors)} Fourier channels exceed the Nyquist limit of the "
        f"{'x'.join(map(str, samples))} sample "
        f"grid ({', '.join(f'{limit:g}' for limit in limits.tolist())} cycles per unit): the fit will be noise; "
        f"lower {option}"
    )
    return True
