"""Arithmetic precision of a fit: float32, TensorFloat-32 matrix products (GPU), or bfloat16 autocast.

The parameters, the optimizer and the loss stay float32 in every setting: ``bf16`` runs the network's forward pass
under ``torch.autocast`` (its backward follows it), ``tf32`` lets CUDA's float32 matrix products and convolutions
use TensorFloat-32 for the duration of the fit only.
"""

from __future__ import annotations

import contextlib
from typing import Iterator, Literal

import torch

Precision = Literal["fp32", "tf32", "bf16"]
PRECISIONS: tuple[str, ...] = ("fp32", "tf32", "bf16")


@contextlib.contextmanager
def precision_scope(precision: Precision) -> Iterator[None]:
    """Set CUDA's TensorFloat-32 switches for ``tf32`` (off for the others) and restore them afterwards.

    torch has two sets of switches, the ``allow_tf32`` flags and the newer ``fp32_precision`` settings, and refuses to
    read the flags once the two disagree (as torch.compile does). So the flags are used, as nerfstudio and the
    compiler read them, unless the caller has set the newer ones; afterwards both are as the caller left them.
    """
    tf32 = precision == "tf32"
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    newer = None
    if hasattr(matmul, "fp32_precision") and hasattr(getattr(cudnn, "conv", None), "fp32_precision"):
        inherited = torch.backends.fp32_precision  # what a setting of "none" follows
        newer = tuple("none" if value == inherited else value for value in (matmul.fp32_precision,
                                                                            cudnn.conv.fp32_precision))  # fmt: skip
    try:
        flags = matmul.allow_tf32, cudnn.allow_tf32
    except RuntimeError:  # the caller set the newer settings
        flags = None
    if flags is not None:
        matmul.allow_tf32, cudnn.allow_tf32 = tf32, tf32 or flags[1]
    else:
        matmul.fp32_precision = "tf32" if tf32 else "ieee"
        if tf32:
            cudnn.conv.fp32_precision = "tf32"
    try:
        yield
    finally:
        if flags is not None:
            matmul.allow_tf32, cudnn.allow_tf32 = flags
        if newer is not None:
            matmul.fp32_precision, cudnn.conv.fp32_precision = newer


def autocast(precision: Precision, device: torch.device, cache: bool = True) -> contextlib.AbstractContextManager:
    """The context of a forward pass: bfloat16 autocast for ``bf16``, nothing otherwise. ``cache=False`` for a pass
    captured in a CUDA graph (autocast's cache of cast weights must not outlive the capture)."""
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16, cache_enabled=cache)
    return contextlib.nullcontext()


def at_least_float32(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` in float32 when its precision is lower (a bfloat16 output), else unchanged (float64 stays)."""
    return tensor.to(torch.promote_types(tensor.dtype, torch.float32))
