"""Fixtures shared by the tests."""

import os

import pytest
import torch


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


@pytest.fixture
def one_thread():
    """Run the test with one torch thread (fits whose timings or thread-dependent sums should not vary)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
