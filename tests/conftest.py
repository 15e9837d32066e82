"""Fixtures shared by the tests."""

import os
import signal

import pytest
import torch


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


@pytest.fixture
def one_thread():
    """Run the test with one torch thread (fits whose timings or thread-dependent sums should not vary)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def lpips_offline(monkeypatch):
    """Building torchmetrics' LPIPS fails as it does offline, after torch.hub's "Downloading" line and progress.

    Returns the list of attempts (one entry each)."""
    import sys

    import torchmetrics.image.lpip as lpip

    from rff_field.common import lpips
    from rff_field.image import metrics

    attempts = []

    def fail(*args, **kwargs):
        attempts.append(1)
        sys.stdout.write('Downloading: "https://download.pytorch.org/models/alexnet-owt-7be5be79.pth"\n')
        sys.stderr.write("Downloading 0.0%\n")
        raise OSError("<urlopen error [Errno -2] Name or service not known>")

    monkeypatch.setattr(lpip, "LearnedPerceptualImagePatchSimilarity", fail)
    monkeypatch.setattr(lpips, "_failure", None)
    monkeypatch.setattr(metrics, "_lpips_model", None)
    return attempts
