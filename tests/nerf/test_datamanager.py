"""rff-nerfacto's parallel data manager: its worker processes sample the same rays, in the same order, for the same
seed.

nerfstudio's own worker starts its generators from the operating system's entropy, so two runs with one seed
trained on different rays."""

from __future__ import annotations

import pytest
import torch
from nerfstudio.data.dataparsers.nerfstudio_dataparser import NerfstudioDataParserConfig

from rff_field.nerf.datamanager import SeededParallelDataManagerConfig
from rff_field.nerf.method_configs import rff_nerfacto


def first_batches(capture, seed: int, workers: int = 1, count: int = 4) -> list[torch.Tensor]:
    """The pixel indices of the first ``count`` training batches of a data manager started under ``seed``."""
    torch.manual_seed(seed)
    config = SeededParallelDataManagerConfig(
        dataparser=NerfstudioDataParserConfig(data=capture), train_num_rays_per_batch=64, num_processes=workers
    )
    manager = config.setup(device="cpu")
    try:
        return [manager.next_train(step)[1]["indices"].clone() for step in range(count)]
    finally:
        for process in manager.data_procs:
            process.terminate()
            process.join()


@pytest.fixture(scope="module")
def one_worker_seed_7(capture):
    return first_batches(capture, 7)


def test_rff_nerfacto_samples_its_rays_in_seeded_workers():
    assert isinstance(rff_nerfacto.config.pipeline.datamanager, SeededParallelDataManagerConfig)


def test_the_same_seed_gives_the_same_rays_and_another_seed_other_rays(capture, one_worker_seed_7):
    first, again, other = one_worker_seed_7, first_batches(capture, 7), first_batches(capture, 8)
    for batch, repeated in zip(first, again):
        assert torch.equal(batch, repeated)
    assert not torch.equal(first[0], first[1])  # the worker's stream moves on from batch to batch
    assert not torch.equal(first[0], other[0])


def test_two_workers_take_turns_whatever_their_timing(capture, one_worker_seed_7):
    first, again = first_batches(capture, 7, workers=2), first_batches(capture, 7, workers=2)
    for batch, repeated in zip(first, again):
        assert torch.equal(batch, repeated)
    assert torch.equal(first[0], one_worker_seed_7[0])  # worker 0 is the single worker's stream
    assert not torch.equal(first[0], first[1])  # the workers' streams differ
