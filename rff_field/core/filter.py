"""The adaptive linear filter, a bias-free ReLU MLP ``f`` (positively homogeneous and ``f(x) = A_x x``, Mohan et al.
2019): the INR is fed ``f(gamma(v)) * gamma(v)``. The filter's parameters form their own optimizer group."""

from __future__ import annotations

from typing import Iterator, Literal, Optional

import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor, nn

from rff_field.core.encodings import Encoding, check_count
from rff_field.core.errors import UsageError

# Matrix kernels run slowly on widths that are not multiples of 8 (measured: benchmarks/filter/padding.md).
PAD_MULTIPLE = 8
FILTER_GROUP, INR_GROUP = "filter", "inr"
"""Names of the optimizer groups of the filter's parameters and of all others."""

FilterInit = Literal["default", "scaled", "identity", "orthogonal"]


class BiasFreeFilter(nn.Module):
    """``num_layers`` linear maps ``dim -> dim`` with ReLU between them and none after the last.

    Computes in its input's dtype (the weights are cast), at the next multiple of :data:`PAD_MULTIPLE` channels:
    the zero-padded units are ``relu(0) = 0`` and get no gradient, so outputs and gradients are those of width
    ``dim``. ``bias``: the ablation only (it breaks the filter's linearity).
    """

    def __init__(self, dim: int, num_layers: int = 3, bias: bool = False) -> None:
        check_count("the filter's dim", dim)
        check_count("the filter's num_layers", num_layers)
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(dim, dim, bias=bias) for _ in range(num_layers))
        self.dim = dim

    def forward(self, x: Float[Tensor, "*bs dim"]) -> Float[Tensor, "*bs dim"]:
        if x.shape[-1] != self.dim or not x.is_floating_point():
            raise UsageError(f"the filter takes floating-point embeddings of {self.dim} channels, got {x.dtype} "
                             f"inputs of shape {tuple(x.shape)}")  # fmt: skip
        pad = -self.dim % PAD_MULTIPLE
        h = F.pad(x, (0, pad)) if pad else x
        for i, layer in enumerate(self.layers):
            weight, bias = layer.weight, layer.bias
            if pad:
                weight, bias = F.pad(weight, (0, pad, 0, pad)), None if bias is None else F.pad(bias, (0, pad))
            h = F.linear(torch.relu(h) if i else h, weight.to(h.dtype), None if bias is None else bias.to(h.dtype))
        return h[..., : self.dim] if pad else h


class FilteredEncoding(Encoding):
    """``f(gamma(x)) * gamma(x)`` for an encoding ``gamma`` and a :class:`BiasFreeFilter` ``f`` (``.filter``);
    ``residual``: ``(1 + f(gamma)) * gamma`` instead, which starts near ``gamma`` (a named deviation)."""

    def __init__(self, encoding: Encoding, num_layers: int = 3, bias: bool = False, residual: bool = False) -> None:
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


@torch.no_grad()
def initialize_filter(filter_module: BiasFreeFilter, scheme: FilterInit = "default", gain: float = 1.0) -> None:
    """Re-initialise a filter's weights (biases keep PyTorch's default): ``default`` leaves PyTorch's, ``scaled``
    multiplies it by ``gain``, ``identity`` and ``orthogonal`` set those matrices times ``gain``."""
    for layer in filter_module.layers if scheme != "default" else []:
        if scheme == "identity":
            nn.init.eye_(layer.weight)
        elif scheme == "orthogonal":
            nn.init.orthogonal_(layer.weight)
        layer.weight.mul_(gain)


def filter_parameters(module: nn.Module) -> Iterator[nn.Parameter]:
    """Parameters of every :class:`BiasFreeFilter` inside ``module``."""
    for submodule in module.modules():
        if isinstance(submodule, BiasFreeFilter):
            yield from submodule.parameters()


def split_filter_parameters(module: nn.Module) -> tuple[list[nn.Parameter], list[nn.Parameter]]:
    """``module``'s trainable parameters: (those of its filters, all others)."""
    filter_ids = {id(p) for p in filter_parameters(module)}
    params = [p for p in module.parameters() if p.requires_grad]
    return [p for p in params if id(p) in filter_ids], [p for p in params if id(p) not in filter_ids]


def named_param_groups(model: nn.Module, inr_lr: float, filter_lr: float, inr_group: str = INR_GROUP) -> list[dict]:
    """Optimizer groups ``[{name: inr_group, ...}, {name: "filter", ...}]``; no filter group without a filter."""
    filter_params, inr_params = split_filter_parameters(model)
    groups = [{"name": inr_group, "params": inr_params, "lr": inr_lr}]
    return groups + ([{"name": FILTER_GROUP, "params": filter_params, "lr": filter_lr}] if filter_params else [])
