"""Where a run runs: the device to train on, and a description of the machine for the result files."""

from __future__ import annotations

import platform

import torch

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
