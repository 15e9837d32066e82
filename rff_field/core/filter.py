"""The adaptive linear filter: a bias-free ReLU MLP applied to a Fourier feature embedding.

Without biases the MLP is positively homogeneous, ``f(a x) = a f(x)`` for ``a >= 0``, and piecewise linear
with no offset, ``f(x) = A_x x`` (Mohan et al. 2019). The INR is then fed ``f(gamma(v)) * gamma(v)``.
"""

from __future__ import annotations

import math
from typing import Iterator, Literal, Optional

import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor, nn

from rff_field.core.encodings import Encoding
from rff_field.core.errors import UsageError, check_positive

# Matrix kernels run slowly on widths that are not multiples of 8 (measured: benchmarks/filter/padding.md).
PAD_MULTIPLE = 8

FilterInit = Literal["default", "scaled", "identity", "orthogonal"]


class BiasFreeFilter(nn.Sequential):
    """``num_layers`` linear maps ``dim -> dim`` with ReLU between them and none after the last.

    Args:
        dim: Width of the embedding being filtered (D).
        num_layers: Number of linear layers.
        bias: Give the linear layers biases. Only for the ablation: it breaks the filter's linearity.
    """

    def __init__(self, dim: int, num_layers: int = 3, bias: bool = False) -> None:
        check_positive("the filter's width (dim)", dim, integer=True)
        check_positive("the filter's number of layers (num_layers)", num_layers, integer=True)
        layers: list[nn.Module] = []
        for i in range(num_layers):
            if i > 0:
                layers.append(nn.ReLU())
            layers.append(nn.Linear(dim, dim, bias=bias))
        super().__init__(*layers)
        self.dim = dim
        self.num_layers = num_layers
        self.bias = bias

    def forward(self, x: Float[Tensor, "*bs dim"]) -> Float[Tensor, "*bs dim"]:
        """The filter at width ``dim``, computed at the next multiple of :data:`PAD_MULTIPLE` when ``dim`` is not one.

        Inputs, weights and biases are padded with zeros: the padded hidden units are ``relu(0) = 0`` and receive
        no gradient, so outputs and gradients are those of the unpadded filter.
        """
        if x.shape[-1] != self.dim:
            raise UsageError(
                f"BiasFreeFilter({self.dim}) filters {self.dim} channels, got inputs of shape {tuple(x.shape)}"
            )
        pad = -self.dim % PAD_MULTIPLE
        if pad == 0:
            return super().forward(x)
        h = F.pad(x, (0, pad))
        for layer in self:
            if isinstance(layer, nn.Linear):
                bias = None if layer.bias is None else F.pad(layer.bias, (0, pad))
                h = F.linear(h, F.pad(layer.weight, (0, pad, 0, pad)), bias)
            else:
                h = layer(h)
        return h[..., : self.dim]


class FilteredEncoding(Encoding):
    """Wraps an encoding ``gamma`` and returns ``f(gamma(x)) * gamma(x)`` with ``f`` a :class:`BiasFreeFilter`.

    The filter is exposed as ``.filter`` so that its parameters can form their own optimizer group.

    Args:
        encoding: The Fourier feature embedding to filter.
        num_layers: Linear layers in the filter.
        bias: Filter with biases (ablation only).
        residual: Return ``(1 + f(gamma)) * gamma`` instead, so that the filtered embedding starts near ``gamma``
            (a named deviation from the paper, studied in ``benchmarks/reproduction/scale.md``; off by default).
    """

    def __init__(self, encoding: Encoding, num_layers: int = 3, bias: bool = False, residual: bool = False) -> None:
        if not isinstance(encoding, Encoding):
            raise UsageError(
                f"FilteredEncoding wraps an Encoding (e.g. PositionalEncoding, RandomFourierEncoding), got "
                f"{type(encoding).__name__}"
            )
        super().__init__(encoding.in_dim)
        self.encoding = encoding
        self.filter = BiasFreeFilter(encoding.get_out_dim(), num_layers=num_layers, bias=bias)
        self.residual = residual

    def apply_filter(self, gamma: Float[Tensor, "*bs dim"]) -> Float[Tensor, "*bs dim"]:
        """The filtered embedding of an already computed embedding ``gamma``."""
        filtered = self.filter(gamma) * gamma
        return filtered + gamma if self.residual else filtered

    def get_out_dim(self) -> int:
        return self.encoding.get_out_dim()

    def forward(
        self, in_tensor: Float[Tensor, "*bs input_dim"], covs: Optional[Float[Tensor, "*bs input_dim input_dim"]] = None
    ) -> Float[Tensor, "*bs output_dim"]:
        # covs only when given: not every nerfstudio encoding takes them (SHEncoding, HashEncoding)
        gamma = self.encoding(in_tensor) if covs is None else self.encoding(in_tensor, covs=covs)
        return self.apply_filter(gamma)


def filter_parameters(module: nn.Module) -> Iterator[nn.Parameter]:
    """Parameters of every :class:`BiasFreeFilter` inside ``module``."""
    for submodule in module.modules():
        if isinstance(submodule, BiasFreeFilter):
            yield from submodule.parameters()


def split_filter_parameters(module: nn.Module) -> tuple[list[nn.Parameter], list[nn.Parameter]]:
    """Split ``module``'s trainable parameters into (filter parameters, all others)."""
    filter_ids = {id(p) for p in filter_parameters(module)}
    params = [p for p in module.parameters() if p.requires_grad]
    return [p for p in params if id(p) in filter_ids], [p for p in params if id(p) not in filter_ids]


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
        raise UsageError(f"unknown filter initialisation {scheme!r}; choose default, scaled, identity or orthogonal")
    if not (isinstance(gain, (int, float)) and math.isfinite(gain) and gain > 0):
        raise UsageError(f"the filter initialisation's gain must be a finite number > 0, got {gain!r}")
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
