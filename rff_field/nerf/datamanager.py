"""nerfstudio's parallel data manager with seeded workers, so that ``rff-nerfacto``'s rays follow ``--machine.seed``.

nerfstudio's workers seed from the operating system's entropy. Here each seeds ``random``, NumPy and torch from its
parent's seed (``torch.initial_seed()``, set by ``--machine.seed``) plus its index, and each has its own queue, read
in turn, so that the order of the batches does not follow the workers' timing.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Dict, Tuple, Type

import numpy as np
import torch
from nerfstudio.cameras.rays import RayBundle
from nerfstudio.data.datamanagers.parallel_datamanager import (
    DataProcessor,
    ParallelDataManager,
    ParallelDataManagerConfig,
)
from pathos.helpers import mp


class SeededDataProcessor(DataProcessor):
    """nerfstudio's ray-sampling worker, which seeds its random generators before it samples."""

    def __init__(self, *args, seed: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.seed = seed

    def run(self) -> None:
        random.seed(self.seed)
        np.random.seed(self.seed % 2**32)
        torch.manual_seed(self.seed)
        super().run()


class SeededParallelDataManager(ParallelDataManager):
    """``ParallelDataManager`` whose workers are :class:`SeededDataProcessor`, each with its own queue."""

    def setup_train(self) -> None:
        assert self.train_dataset is not None
        self.train_pixel_sampler = self._get_pixel_sampler(self.train_dataset, self.config.train_num_rays_per_batch)
        self.data_queues = [mp.Queue(maxsize=self.config.queue_size) for _ in range(self.config.num_processes)]
        seed = torch.initial_seed()
        self.data_procs = [
            SeededDataProcessor(
                out_queue=queue,
                config=self.config,
                dataparser_outputs=self.train_dataparser_outputs,
                dataset=self.train_dataset,
                pixel_sampler=self.train_pixel_sampler,
                seed=(seed + 1 + index) % 2**63,  # not the main process's own stream
            )
            for index, queue in enumerate(self.data_queues)
        ]
        for proc in self.data_procs:
            proc.start()

    def next_train(self, step: int) -> Tuple[RayBundle, Dict]:
        bundle, batch = self.data_queues[self.train_count % len(self.data_queues)].get()
        self.train_count += 1
        return bundle.to(self.device), batch


@dataclass
class SeededParallelDataManagerConfig(ParallelDataManagerConfig):
    """``ParallelDataManagerConfig`` whose workers are seeded from the run's seed."""

    _target: Type = field(default_factory=lambda: SeededParallelDataManager)
