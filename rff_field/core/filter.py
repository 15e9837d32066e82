"""The adaptive linear filter, a bias-free ReLU MLP ``f`` (positively homogeneous and ``f(x) = A_x x``, Mohan et al.
2019): the INR is fed ``f(gamma(v)) * gamma(v)``. The filter's parameters form their own optimizer group."""

from __future__ import annotations

import contextlib
from typing import Iterator, Literal, Optional, Sequence

import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from rff_field.core.encodings import Encoding, check_count
from rff_field.core.errors import UsageError

# Matrix kernels of some CPUs run slowly on widths that are not multiples of 8 (benchmarks/filter/padding.md).
PAD_MULTIPLE = 8
# On a CPU the fused filter runs this many activations at a time, so that its passes stay in cache
CPU_CHUNK_ELEMENTS = 1 << 17
FILTER_GROUP, INR_GROUP = "filter", "inr"
"""Names of the optimizer groups of the filter's parameters and of all others."""

FilterInit = Literal["default", "scaled", "identity", "orthogonal"]


class BiasFreeFilter(nn.Module):
    """``num_layers`` linear maps ``dim -> dim``, ReLU between them, in its input's dtype; hidden units padded to a
    multiple of :data:`PAD_MULTIPLE` with zeros (no output, no gradient). ``bias``: the ablation only."""

    def __init__(self, dim: int, num_layers: int = 3, bias: bool = False) -> None:
        check_count("the filter's dim", dim)
        check_count("the filter's num_layers", num_layers)
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(dim, dim, bias=bias) for _ in range(num_layers))
        self.dim = dim

    def check_input(self, x: Tensor) -> None:
        """Raise :class:`UsageError` unless ``x`` holds floating-point embeddings of ``dim`` channels."""
        if x.shape[-1] != self.dim or not x.is_floating_point():
            raise UsageError(f"the filter takes floating-point embeddings of {self.dim} channels, got {x.dtype} "
                             f"inputs of shape {tuple(x.shape)}")  # fmt: skip

    def forward(self, x: Float[Tensor, "*bs dim"]) -> Float[Tensor, "*bs dim"]:
        self.check_input(x)
        h, last = x, len(self.layers) - 1
        for i, (layer, weight) in enumerate(zip(self.layers, self.padded_weights(x.dtype))):
            bias = layer.bias
            if bias is not None and i < last:
                bias = F.pad(bias, (0, weight.shape[0] - self.dim))
            h = F.linear(h, weight, None if bias is None else bias.to(h.dtype))
            h = h.relu_() if i < last else h  # in place: the product's backward reads its inputs, not its output
        return h

    def padded_weights(self, dtype: torch.dtype) -> list[Tensor]:
        """The weights in ``dtype``, hidden units zero-padded (the input and output keep ``dim``); made on every call
        (microseconds), as no public signal tells that an optimizer changed the weights in place."""
        pad, last = -self.dim % PAD_MULTIPLE, len(self.layers) - 1
        return [F.pad(layer.weight.to(dtype), (0, pad if i else 0, 0, pad if i < last else 0))
                for i, layer in enumerate(self.layers)]  # fmt: skip


class FilteredEncoding(Encoding):
    """``f(gamma(x)) * gamma(x)`` for an encoding ``gamma`` and a :class:`BiasFreeFilter` ``f`` (``.filter``);
    ``residual``: ``(1 + f(gamma)) * gamma`` instead, which starts near ``gamma`` (a named deviation); ``fused``:
    by :class:`FusedFilterProduct` (bias-free filters)."""

    def __init__(self, encoding: Encoding, num_layers: int = 3, bias: bool = False, residual: bool = False,
                 fused: bool = True) -> None:  # fmt: skip
        super().__init__(encoding.in_dim)
        self.encoding = encoding
        self.filter = BiasFreeFilter(encoding.get_out_dim(), num_layers=num_layers, bias=bias)
        self.residual, self.fused = residual, fused and not bias

    def apply_filter(self, gamma: Float[Tensor, "*bs dim"]) -> Float[Tensor, "*bs dim"]:
        """The filtered embedding of an already computed embedding ``gamma``."""
        if not self.fused:
            f = self.filter(gamma)
            return torch.addcmul(gamma, f, gamma) if self.residual else f * gamma
        self.filter.check_input(gamma)
        device = gamma.device.type
        autocast = torch.amp.is_autocast_available(device) and torch.is_autocast_enabled(device)
        dtype = torch.get_autocast_dtype(device) if autocast else gamma.dtype
        weights = [layer.weight for layer in self.filter.layers]
        x = gamma.reshape(-1, gamma.shape[-1])
        with torch.no_grad():
            padded = self.filter.padded_weights(dtype)
        with torch.autocast(device, enabled=False) if autocast else contextlib.nullcontext():
            if torch.is_grad_enabled() and (x.requires_grad or any(w.requires_grad for w in weights)):
                out = FusedFilterProduct.apply(x, self.residual, padded, *weights)
            else:
                out = filter_product(x, self.residual, padded)[0]
        return out.reshape(gamma.shape)

    def get_out_dim(self) -> int:
        return self.encoding.get_out_dim()

    def forward(
        self, in_tensor: Float[Tensor, "*bs input_dim"], covs: Optional[Float[Tensor, "*bs input_dim input_dim"]] = None
    ) -> Float[Tensor, "*bs output_dim"]:
        # covs only when given: not every nerfstudio encoding takes them (SHEncoding, HashEncoding)
        gamma = self.encoding(in_tensor) if covs is None else self.encoding(in_tensor, covs=covs)
        return self.apply_filter(gamma)


def filter_product(x: Float[Tensor, "rows dim"], residual: bool, padded: Sequence[Tensor], keep_last: bool = False,
                   keep_hidden: bool = False) -> tuple[Tensor, Optional[Tensor], list[Tensor]]:  # fmt: skip
    """``f(x) * x`` (``residual``: ``+ x``) in the dtype of ``padded`` (:meth:`BiasFreeFilter.padded_weights`),
    with the last layer's output (``keep_last``) and the hidden activations (``keep_hidden``) for backward."""
    dtype, rows = padded[0].dtype, len(x)
    x_in = x.to(dtype)
    out = torch.empty(x.shape, dtype=torch.promote_types(dtype, x.dtype), device=x.device)
    hidden = [x.new_empty(rows, w.shape[0], dtype=dtype) for w in padded[:-1]] if keep_hidden else []
    last = torch.empty(rows, x.shape[1], dtype=dtype, device=x.device) if keep_last else None
    in_place = last is None and out.dtype == dtype
    for chunk in _chunks(rows, padded[0].shape[0], x.device):
        h = x_in[chunk]
        for i, w in enumerate(padded[:-1]):
            h = torch.mm(h, w.t(), out=hidden[i][chunk] if keep_hidden else None).relu_()
        f = torch.mm(h, padded[-1].t(), out=out[chunk] if in_place else None if last is None else last[chunk])
        product = f.mul_(x[chunk]) if in_place else torch.mul(f, x[chunk], out=out[chunk])
        if residual:
            product.add_(x[chunk])
    return out, last, hidden


class FusedFilterProduct(torch.autograd.Function):
    """:func:`filter_product` as one autograd node (gradients of ``x`` and the unpadded ``weights``): fewer passes
    than the modules' autograd, and on a CPU a chunk of rows at a time through every layer, in cache."""

    @staticmethod
    def forward(ctx, x: Tensor, residual: bool, padded: Sequence[Tensor], *weights: Tensor) -> Tensor:
        out, last, hidden = filter_product(x, residual, padded, keep_last=ctx.needs_input_grad[0], keep_hidden=True)
        ctx.residual, ctx.padded, ctx.weight_dtypes = residual, padded, [w.dtype for w in weights]
        ctx.save_for_backward(x, last, *hidden)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor) -> tuple[Optional[Tensor], ...]:
        x, last, *hidden = ctx.saved_tensors
        padded, dtype = ctx.padded, ctx.padded[0].dtype
        grad, x_in = grad.contiguous(), x.to(dtype)
        sums = [torch.zeros(w.shape, dtype=torch.promote_types(dtype, torch.float32), device=w.device) for w in padded]
        grad_x = torch.empty_like(x) if last is not None else None
        for chunk in _chunks(len(x), padded[0].shape[0], x.device):
            g = (grad[chunk] * x[chunk]).to(dtype)  # the gradient of f's output
            for i in range(len(padded) - 1, -1, -1):
                inputs = hidden[i - 1][chunk] if i else x_in[chunk]
                sums[i].addmm_(g.t(), inputs) if sums[i].dtype == dtype else sums[i].add_(torch.mm(g.t(), inputs))
                if i or grad_x is not None:
                    g_in = torch.mm(g, padded[i])
                    if i:
                        torch.ops.aten.threshold_backward.grad_input(g_in, hidden[i - 1][chunk], 0, grad_input=g_in)
                    g = g_in
            if grad_x is not None:
                g_x = grad[chunk] * last[chunk] + g
                grad_x[chunk] = g_x + grad[chunk] if ctx.residual else g_x
        dim, last_layer = x.shape[1], len(padded) - 1
        grads = [s[: dim if i < last_layer else None, : dim if i else None] for i, s in enumerate(sums)]
        return (grad_x, None, None, *[g.to(w_dtype) for g, w_dtype in zip(grads, ctx.weight_dtypes)])


def _chunks(rows: int, width: int, device: torch.device) -> list[slice]:
    """Row slices: the whole batch, on a CPU :data:`CPU_CHUNK_ELEMENTS` activations of ``width`` at a time."""
    step = max(1, CPU_CHUNK_ELEMENTS // width) if device.type == "cpu" else max(rows, 1)
    return [slice(start, start + step) for start in range(0, rows, step)]


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
