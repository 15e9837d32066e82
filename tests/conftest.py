"""Fixtures shared by the tests."""

import os
import signal

import pytest


@pytest.fixture(scope="session", autouse=True)
def ctrl_c_as_in_a_terminal():
    """Ctrl-C (SIGINT) raises KeyboardInterrupt, as in a terminal, also when pytest was started in the background
    by a shell that ignores SIGINT there (the tests that press Ctrl-C need it; workers inherit it)."""
    saved = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, saved)


@pytest.fixture(scope="session", autouse=True)
def own_compile_cache(tmp_path_factory):
    """A torch.compile cache of this test session's own (subprocesses inherit it). The machine's shared cache may
    hold code compiled for another CPU capability (ATEN_CPU_CAPABILITY), which torch reuses and then fails to build,
    so the fused line search would fall back to its unfused form depending on what ran before."""
    saved = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(tmp_path_factory.mktemp("inductor"))
    yield
    if saved is None:
        del os.environ["TORCHINDUCTOR_CACHE_DIR"]
    else:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = saved


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread():
    """One intra-op thread: no test's premise depends on the thread count, and on a 2-core machine that other work
    shares, two threads wait on each other (the suite took 12 minutes so, under 2 with one thread)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def subnormals_kept():
    """Every test starts with subnormal floats kept: a model that trained in this process flushes them on its thread
    (its ``flush_denormals``), and hypothesis draws them."""
    import torch

    torch.set_flush_denormal(False)
