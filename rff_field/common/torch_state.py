"""Seeding that leaves the caller's randomness as it was."""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """torch's CPU generator seeded with ``seed`` inside the block (networks are built on the CPU), and back in its
    earlier state after it."""
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(seed)  # torch.manual_seed would reseed the CUDA generators too
        yield
