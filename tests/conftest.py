"""Fixtures shared by the tests."""

import pytest
import torch


@pytest.fixture
def one_thread():
    """Run the test with one torch thread (fits whose timings or thread-dependent sums should not vary)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
