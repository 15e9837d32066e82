"""Where a run runs: its device, the memory it has (sizes that cannot fit are refused), the machine's description."""

from __future__ import annotations

import contextlib
import math
import os
import platform
import re
from pathlib import Path
from typing import Callable

import torch
from torch import nn

from rff_field.core.errors import UsageError


def resolve_device(device: str, option: str = "--device") -> torch.device:
    """``auto`` -> CUDA when available, else the CPU; a device this machine lacks is a :class:`UsageError`."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except RuntimeError:
        raise UsageError(f"{option} {device} is not a torch device; use cpu, cuda or auto") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"{option} {device}: CUDA is not available on this machine; use cpu or auto")
    return resolved


def available_memory(device: torch.device | str = "cpu") -> int:
    """Bytes still free on ``device``: CUDA's free memory, else the host's ``MemAvailable`` within its cgroup limit."""
    device = torch.device(device)
    available = 1 << 62  # unknown: nothing is refused
    if device.type == "cuda":
        with contextlib.suppress(RuntimeError, AssertionError):  # no driver: the device check says so
            available = int(torch.cuda.mem_get_info(device)[0])
        return available
    with contextlib.suppress(OSError, ValueError):
        available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    with contextlib.suppress(OSError, TypeError):
        available = int(re.search(r"MemAvailable:\s*(\d+) kB", Path("/proc/meminfo").read_text())[1]) * 1024
    with contextlib.suppress(OSError, ValueError):
        cgroup = Path("/sys/fs/cgroup")
        used = int((cgroup / "memory.current").read_text())
        available = min(available, int((cgroup / "memory.max").read_text()) - used)
    return available


def check_memory(
    option: str, value: float, bytes_needed: Callable[[float], float], device: torch.device | str = "cpu"
) -> None:
    """Raise :class:`UsageError` naming ``option`` and the largest value that fits when ``bytes_needed(value)`` (rising
    with the value) exceeds the memory available on ``device``."""
    available = available_memory(device)
    need = bytes_needed(value)
    if need <= available:
        return
    integer = isinstance(value, int)
    low, high = 0, value  # fits, does not fit
    for _ in range(200):
        middle = (low + high) // 2 if integer else (low + high) / 2
        if middle in (low, high):
            break
        low, high = (middle, high) if bytes_needed(middle) <= available else (low, middle)
    if not integer and low > 0:  # three significant digits, rounded down
        low = math.floor(low / 10 ** (math.floor(math.log10(low)) - 2)) * 10 ** (math.floor(math.log10(low)) - 2)
    where = "the GPU" if torch.device(device).type == "cuda" else "this machine"
    largest = f"the largest that fits is {low:g}" if low > 0 else "nothing of this size fits"
    shown = value if integer else format(value, "g")
    need = f"about {need / 2**30:.3g} GiB" if need < 1e300 else "over 1e300 bytes"
    raise UsageError(f"{option} {shown} needs {need} of memory and {where} has {available / 2**30:.3g} GiB "
                     f"available; {largest}")  # fmt: skip


TRAINING_BYTES_PER_PARAMETER = 12
"""Memory a parameter takes in training besides itself: its gradient and Adam's two moments."""


def bytes_per_sample(network: nn.Module, training: bool = True) -> int:
    """A low estimate of activation bytes per sample: 4 per linear-layer output, three times that in training."""
    outputs = sum(m.out_features * (2 if m.weight.is_complex() else 1) for m in network.modules()
                  if isinstance(m, nn.Linear))  # fmt: skip
    return 4 * max(outputs, 1) * (3 if training else 1)


def machine_description(device: torch.device) -> str:
    """A one-line description of the hardware a run used."""
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (CUDA), torch {torch.__version__}"
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as handle:
            cpu = next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), cpu)
    except OSError:
        pass
    return f"{cpu}, {torch.get_num_threads()} torch thread(s), torch {torch.__version__}"
