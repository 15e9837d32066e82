"""A torch function mode that records every read of a tensor's value on the host (each one a synchronisation with a
GPU), with the line of code that made it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import torch
from torch.overrides import TorchFunctionMode

READS = (torch.Tensor.item, torch.Tensor.tolist, torch.Tensor.__float__, torch.Tensor.__int__, torch.Tensor.__bool__,
         torch.Tensor.numpy)  # fmt: skip
TORCH = Path(torch.__file__).parent


class HostReads(TorchFunctionMode):
    """Records host reads of tensors.

    Args:
        allowed: Ids of tensors whose reads are not recorded.
        package: Record only reads made directly by code in this folder (e.g. the rff_field package): reads inside
            torch, such as Adam reading its step counters kept on the CPU, are then left out.
    """

    def __init__(self, allowed: frozenset[int] = frozenset(), package: Optional[Path] = None) -> None:
        super().__init__()
        self.allowed = allowed
        self.package = package
        self.reads: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in READS and id(args[0]) not in self.allowed:
            frame = sys._getframe(1)
            while frame is not None and Path(frame.f_code.co_filename).name in ("overrides.py", "_tensor.py"):
                frame = frame.f_back  # the Python wrappers of Tensor.__float__ and the like
            where = Path(frame.f_code.co_filename) if frame is not None else Path("?")
            in_package = self.package is None or self.package in where.parents
            if in_package:
                self.reads.append(f"{where.name}:{frame.f_lineno if frame else 0} {func.__name__}")
        return func(*args, **(kwargs or {}))
