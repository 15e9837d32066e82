"""Fourier feature embeddings ``[sin(2 pi B v), cos(2 pi B v)]``: on-axis PE and random Fourier features (RFF), in
cycles per unit; they subclass nerfstudio's ``Encoding`` (a stand-in without nerfstudio: the core needs only torch)."""

from __future__ import annotations

import contextlib
import math
from typing import Optional

import torch
from jaxtyping import Float
from torch import Tensor, nn

from rff_field.core.errors import UsageError

try:
    from nerfstudio.field_components.encodings import Encoding
except ImportError:

    class Encoding(nn.Module):  # type: ignore[no-redef]
        """The part of nerfstudio's ``Encoding`` interface that this package uses."""

        def __init__(self, in_dim: int) -> None:
            super().__init__()
            self.in_dim = in_dim

        def get_out_dim(self) -> int:
            raise NotImplementedError


def check_count(name: str, value: int) -> None:
    """Raise :class:`UsageError` unless ``value`` is a positive integer."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{name} must be a positive integer, got {value!r}")


class FourierEncoding(Encoding):
    """``[v?, sin(2 pi B v), cos(2 pi B v)]`` of fixed frequency rows ``B`` (a buffer); ``v`` with ``include_input``."""

    def __init__(self, frequencies: Float[Tensor, "num_frequencies in_dim"], include_input: bool = False) -> None:
        if frequencies.ndim != 2 or 0 in frequencies.shape or not torch.isfinite(frequencies).all():
            raise UsageError(f"an embedding needs a [num_frequencies, in_dim] tensor of finite frequencies, got one of "
                             f"shape {tuple(frequencies.shape)}")  # fmt: skip
        reach = 2 * math.pi * frequencies.float().abs().sum(dim=-1)  # a row's largest phase at coordinates in [-1, 1]
        if not torch.isfinite(reach).all():
            raise UsageError(f"an embedding's frequencies must keep their phase finite in float32 (at most about "
                             f"{torch.finfo(torch.float32).max / (2 * math.pi):.1e} cycles per unit), got "
                             f"{frequencies.abs().max().item():.3g}")  # fmt: skip
        super().__init__(frequencies.shape[-1])
        self.register_buffer("B", frequencies.float())
        self.include_input = include_input

    def get_out_dim(self) -> int:
        return 2 * self.B.shape[0] + (self.in_dim if self.include_input else 0)

    def frequency_vectors(self) -> Float[Tensor, "out_dim in_dim"]:
        """The frequency vector of every output channel (zero for the included coordinates)."""
        vectors = [self.B.new_zeros(self.in_dim, self.in_dim)] if self.include_input else []
        return torch.cat([*vectors, self.B, self.B])

    def forward(
        self, in_tensor: Float[Tensor, "*bs input_dim"], covs: Optional[Float[Tensor, "*bs input_dim input_dim"]] = None
    ) -> Float[Tensor, "*bs output_dim"]:
        del covs  # integrated encodings are not part of the method
        if in_tensor.shape[-1] != self.in_dim:
            raise UsageError(f"{type(self).__name__} encodes {self.in_dim}-dimensional coordinates, got inputs of "
                             f"shape {tuple(in_tensor.shape)}")  # fmt: skip
        dtype = torch.promote_types(in_tensor.dtype, torch.float32)
        device = in_tensor.device.type
        autocast = torch.amp.is_autocast_available(device) and torch.is_autocast_enabled(device)
        # autocast would take the product in 16 bits, which resolves a phase of ~100 rad only to ~1 rad
        with torch.autocast(device, enabled=False) if autocast else contextlib.nullcontext():
            v, frequencies = in_tensor.to(dtype), self.B.to(dtype)
            # a sum of products per axis, not a matmul: TF32 would round phases of ~1000 rad by ~1 rad
            phase = sum(2 * math.pi * v[..., d, None] * frequencies[:, d] for d in range(self.in_dim))
        features = [torch.sin(phase), torch.cos(phase)]
        return torch.cat([in_tensor.to(dtype), *features] if self.include_input else features, dim=-1)


class PositionalEncoding(FourierEncoding):
    """On-axis PE: every input dimension with each of ``frequencies`` (cycles per unit), dimension-major."""

    def __init__(self, in_dim: int, frequencies: Float[Tensor, " N"], include_input: bool = False) -> None:
        check_count("in_dim", in_dim)
        frequencies = torch.as_tensor(frequencies, dtype=torch.float32).flatten()
        super().__init__(torch.block_diag(*[frequencies[:, None]] * in_dim), include_input)


class RandomFourierEncoding(FourierEncoding):
    """Random Fourier features (Tancik et al. 2020): ``B ~ N(0, sigma^2 I)`` drawn from ``seed``, then fixed."""

    def __init__(
        self, in_dim: int, num_frequencies: int, sigma: float, include_input: bool = False, seed: int = 0
    ) -> None:
        check_count("in_dim", in_dim)
        check_count("num_frequencies", num_frequencies)
        if not 0 <= seed < 2**64:
            raise UsageError(f"the random frequencies' seed must lie in [0, 2**64), got {seed}")
        generator = torch.Generator().manual_seed(seed)
        super().__init__(torch.randn(num_frequencies, in_dim, generator=generator) * sigma, include_input)
