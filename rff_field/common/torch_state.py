"""Seeding and floating-point settings that leave the caller's state as it was."""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """torch's CPU generator (networks are built on the CPU) seeded with ``seed`` inside the block, restored after."""
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(seed)  # torch.manual_seed would reseed the CUDA generators too
        yield


@contextlib.contextmanager
def denormals_flushed(flush: bool = True) -> Iterator[None]:
    """Subnormal floats flushed to zero (``flush``) or not on this thread's CPU inside the block, restored after."""
    smallest = torch.tensor(torch.finfo(torch.float32).tiny)
    before = bool(smallest / 2 == 0)  # a subnormal result is zero when flushing
    torch.set_flush_denormal(flush)
    try:
        yield
    finally:
        torch.set_flush_denormal(before)
