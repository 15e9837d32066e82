"""torch's process-wide settings that a fit or a measurement changes for its own duration only, so that a caller's
later randomness and threads are as it left them."""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator, TypeVar

import torch

T = TypeVar("T")


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """torch's CPU generator seeded with ``seed`` inside the block (networks are built on the CPU), and back in its
    earlier state after it."""
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(seed)  # torch.manual_seed would reseed the CUDA generators too
        yield


def restores_torch_state(function: Callable[..., T]) -> Callable[..., T]:
    """``function`` with torch's intra-op thread count and CPU generator put back as they were when it returns (a
    measurement sets both for itself)."""

    @functools.wraps(function)
    def wrapped(*args: Any, **kwargs: Any) -> T:
        threads = torch.get_num_threads()
        try:
            with torch.random.fork_rng(devices=[]):
                return function(*args, **kwargs)
        finally:
            torch.set_num_threads(threads)

    return wrapped
