"""Where a run ran: the device to train on, and a description of the machine for the result files."""

from __future__ import annotations

import os
import platform
from typing import Optional

import torch

from rff_field.core.errors import UsageError


def resolve_device(device: str, fallback: str = "cpu or auto") -> torch.device:
    """``auto`` -> CUDA when available, else CPU; a device this machine lacks, or no device, is an error that
    suggests ``fallback``."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except RuntimeError:
        raise UsageError(f"--device {device} is not a torch device; use e.g. cpu, cuda or cuda:1") from None
    missing = missing_accelerator(resolved)
    if missing == "CUDA":
        raise UsageError(f"--device {device} was asked for but CUDA is not available; use --device {fallback}")
    if missing == "MPS":
        raise UsageError("--device mps was asked for but MPS (Apple GPUs) is not available; use --device cpu")
    return resolved


def missing_accelerator(device: torch.device) -> Optional[str]:
    """``'CUDA'`` or ``'MPS'`` when ``device`` needs that accelerator and this machine lacks it, else None."""
    if device.type == "cuda" and not torch.cuda.is_available():
        return "CUDA"
    if device.type == "mps" and not torch.backends.mps.is_available():
        return "MPS"
    return None


def machine_description(device: torch.device) -> str:
    """A one-line description of the hardware a run used."""
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (CUDA), torch {torch.__version__}"
    return f"{cpu_name()}, {torch.get_num_threads()} torch thread(s), torch {torch.__version__}"


def cpu_name() -> str:
    """The CPU's model name (from /proc/cpuinfo where it exists)."""
    try:
        with open("/proc/cpuinfo") as handle:
            names = [line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")]
        if names:
            return names[0]
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info() -> dict:
    """The machine and software a timing was measured on."""
    info = {
        "cpu": cpu_name(),
        "cpus_visible": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def memory_bytes(device: torch.device) -> Optional[int]:
    """The memory of ``device``: the GPU's, or the machine's physical memory for the CPU (None where unknown)."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None
