"""Fourier feature embeddings: on-axis positional encoding (PE) and random Fourier features (RFF).

Both compute ``gamma(v) = [sin(2 pi b_i . v), cos(2 pi b_i . v)]`` and subclass nerfstudio's ``Encoding``,
so they plug into nerfstudio fields unchanged. Without nerfstudio installed (e.g. on a bare GPU machine) they
subclass a minimal stand-in with the same interface, so the core needs only torch.
"""

from __future__ import annotations

import contextlib
import math
from typing import Optional

import torch
from jaxtyping import Float
from torch import Tensor, nn

from rff_field.core.errors import UsageError, check_positive

try:
    from nerfstudio.field_components.encodings import Encoding
except ImportError:

    class Encoding(nn.Module):  # type: ignore[no-redef]
        """The part of nerfstudio's ``Encoding`` interface that this package uses."""

        def __init__(self, in_dim: int) -> None:
            if in_dim <= 0:
                raise ValueError("Input dimension should be greater than zero")
            super().__init__()
            self.in_dim = in_dim
            self.out_dim: Optional[int] = None

        def get_out_dim(self) -> int:
            raise NotImplementedError


class PositionalEncoding(Encoding):
    """On-axis positional encoding with log-linearly spaced frequencies ``b_i = scale**(i / N)``, i = 1..N.

    Every input dimension is encoded with every frequency. Features are ordered
    ``[input?, sin(all dims x all freqs), cos(all dims x all freqs)]``.

    Args:
        in_dim: Number of input coordinates.
        num_frequencies: Frequencies per input dimension (N).
        scale: Highest frequency (s); the frequencies are ``s**(i/N)``.
        include_input: Prepend the raw coordinates to the features.
        frequencies: Explicit frequencies, overriding ``num_frequencies``/``scale`` (used by the presets).
    """

    def __init__(
        self,
        in_dim: int,
        num_frequencies: int,
        scale: float,
        include_input: bool = False,
        frequencies: Optional[Tensor] = None,
    ) -> None:
        check_positive("in_dim", in_dim, integer=True)
        super().__init__(in_dim)
        if frequencies is None:
            check_positive("num_frequencies", num_frequencies, integer=True)
            check_positive("scale", scale)
            exponents = torch.arange(1, num_frequencies + 1, dtype=torch.float64) / num_frequencies
            frequencies = torch.as_tensor(scale, dtype=torch.float64) ** exponents
        frequencies = torch.as_tensor(frequencies, dtype=torch.float32).flatten()
        if frequencies.numel() == 0 or not torch.isfinite(frequencies).all():
            raise UsageError(f"the frequencies must be finite and at least one, got {frequencies.tolist()}")
        self.register_buffer("frequencies", frequencies)
        self.num_frequencies = int(self.frequencies.numel())
        self.scale = float(scale)
        self.include_input = include_input

    @classmethod
    def pow2(cls, in_dim: int, num_frequencies: int, include_input: bool = True) -> "PositionalEncoding":
        """Bands ``b = 2**k``, k = 0..L-1 (features ``sin(2 pi 2**k x)``, as nerfstudio's NeRFEncoding)."""
        check_positive("num_frequencies", num_frequencies, integer=True)
        freqs = 2.0 ** torch.arange(num_frequencies, dtype=torch.float64)
        return cls(in_dim, num_frequencies, float(freqs[-1]), include_input, frequencies=freqs)

    @classmethod
    def wire(cls, in_dim: int, sidelength: int) -> "PositionalEncoding":
        """The WIRE repository's Nyquist-limited encoding for coordinates in [-1, 1].

        ``L = floor(log2(sidelength / 4))`` bands with features ``sin(2**k pi x)`` (frequencies ``2**(k-1)``),
        k = 0..L-1, input included, with ``sidelength`` the signal's longest side as the repository takes it: 22
        features for a 192x128 image.
        """
        check_positive("sidelength", sidelength, integer=True)
        num_frequencies = int(math.floor(math.log2(sidelength / 4)))
        if num_frequencies < 1:
            raise UsageError(
                f"the signal's side of {sidelength} samples is too small for WIRE's Nyquist-limited PE (it needs at "
                "least 8): use a larger signal (for an image, a larger one or a smaller --downsample), or another --pe"
            )
        freqs = 2.0 ** (torch.arange(num_frequencies, dtype=torch.float64) - 1)
        return cls(in_dim, num_frequencies, float(freqs[-1]), include_input=True, frequencies=freqs)

    def get_out_dim(self) -> int:
        assert self.in_dim is not None
        return self.in_dim * 2 * self.num_frequencies + (self.in_dim if self.include_input else 0)

    def forward(
        self, in_tensor: Float[Tensor, "*bs input_dim"], covs: Optional[Float[Tensor, "*bs input_dim input_dim"]] = None
    ) -> Float[Tensor, "*bs output_dim"]:
        del covs  # integrated encodings are not part of the method
        check_input_width(self, in_tensor)
        phase = 2 * math.pi * in_tensor[..., None] * self.frequencies  # [*bs, in_dim, N]
        phase = phase.flatten(-2)
        features = [torch.sin(phase), torch.cos(phase)]
        if self.include_input:
            features.insert(0, in_tensor)
        return torch.cat(features, dim=-1)


class RandomFourierEncoding(Encoding):
    """Random Fourier features (Tancik et al. 2020): ``B ~ N(0, sigma^2)``, fixed after construction.

    ``B`` is a buffer, so a checkpoint reproduces the embedding exactly.

    Args:
        in_dim: Number of input coordinates.
        num_frequencies: Number of random frequency vectors (output has twice as many features).
        sigma: Standard deviation of the frequencies.
        include_input: Prepend the raw coordinates to the features.
        seed: Seed of the generator that draws ``B`` (independent of the global RNG).
    """

    def __init__(
        self, in_dim: int, num_frequencies: int, sigma: float, include_input: bool = False, seed: int = 0
    ) -> None:
        check_positive("in_dim", in_dim, integer=True)
        super().__init__(in_dim)
        check_positive("num_frequencies", num_frequencies, integer=True)
        check_positive("sigma", sigma)
        generator = torch.Generator().manual_seed(seed)
        self.register_buffer("B", torch.randn(num_frequencies, in_dim, generator=generator) * sigma)
        self.num_frequencies = num_frequencies
        self.sigma = float(sigma)
        self.include_input = include_input
        self.seed = seed

    def get_out_dim(self) -> int:
        assert self.in_dim is not None
        return 2 * self.num_frequencies + (self.in_dim if self.include_input else 0)

    def forward(
        self, in_tensor: Float[Tensor, "*bs input_dim"], covs: Optional[Float[Tensor, "*bs input_dim input_dim"]] = None
    ) -> Float[Tensor, "*bs output_dim"]:
        del covs
        check_input_width(self, in_tensor)
        dtype = torch.promote_types(in_tensor.dtype, self.B.dtype)
        device = in_tensor.device.type
        autocast = torch.amp.is_autocast_available(device) and torch.is_autocast_enabled(device)
        # autocast would take the product in 16 bits, which resolves a phase of ~100 rad only to ~1 rad
        with torch.autocast(device, enabled=False) if autocast else contextlib.nullcontext():
            phase = 2 * math.pi * in_tensor.to(dtype) @ self.B.T.to(dtype)
        features = [torch.sin(phase), torch.cos(phase)]
        if self.include_input:
            features.insert(0, in_tensor)
        return torch.cat(features, dim=-1)


def check_input_width(encoding: Encoding, in_tensor: Tensor) -> None:
    """Raise :class:`UsageError` when the inputs' last dimension is not the encoding's ``in_dim``."""
    if in_tensor.shape[-1] != encoding.in_dim:
        raise UsageError(
            f"{type(encoding).__name__} encodes {encoding.in_dim}-dimensional coordinates, got inputs of shape "
            f"{tuple(in_tensor.shape)}"
        )
