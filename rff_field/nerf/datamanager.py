"""nerfstudio's data managers with image loaders sized to the machine, and the parallel one with seeded workers, so
that ``rff-nerfacto``'s rays follow ``--machine.seed``.

nerfstudio's image loaders ask for 4 workers per device, and torch warns on a machine with fewer CPUs: here they ask
for at most as many as the process may use. nerfstudio's parallel workers seed from the operating system's entropy.
Here each seeds ``random``, NumPy and torch from its parent's seed (``torch.initial_seed()``, set by
``--machine.seed``) plus its index, and each has its own queue, read in turn, so that the order of the batches does
not follow the workers' timing.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from typing import Dict, Tuple, Type

import numpy as np
import torch
from nerfstudio.cameras.rays import RayBundle
from nerfstudio.data.datamanagers.base_datamanager import VanillaDataManager, VanillaDataManagerConfig
from nerfstudio.data.datamanagers.parallel_datamanager import (
    DataProcessor,
    ParallelDataManager,
    ParallelDataManagerConfig,
)
from nerfstudio.data.utils.dataloaders import CacheDataloader, FixedIndicesEvalDataloader, RandIndicesEvalDataloader
from nerfstudio.model_components.ray_generators import RayGenerator
from nerfstudio.utils.rich_utils import CONSOLE
from pathos.helpers import mp


class SizedLoaders:
    """The image loaders of nerfstudio's ``setup_train`` and ``setup_eval``, asking for at most as many workers as
    the process may use CPUs (list it before the data manager class)."""

    def image_loader(self, dataset, num_images: int, num_repeats: int) -> CacheDataloader:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        return CacheDataloader(dataset, num_images_to_sample_from=num_images, num_times_to_repeat_images=num_repeats,
                               device=self.device, num_workers=min(4 * self.world_size, cpus), pin_memory=True,
                               collate_fn=self.config.collate_fn,
                               exclude_batch_keys_from_device=self.exclude_batch_keys_from_device)  # fmt: skip

    def setup_train(self) -> None:
        CONSOLE.print("Setting up training dataset...")
        config = self.config
        self.train_image_dataloader = self.image_loader(
            self.train_dataset, config.train_num_images_to_sample_from, config.train_num_times_to_repeat_images
        )
        self.iter_train_image_dataloader = iter(self.train_image_dataloader)
        self.train_pixel_sampler = self._get_pixel_sampler(self.train_dataset, config.train_num_rays_per_batch)
        self.train_ray_generator = RayGenerator(self.train_dataset.cameras.to(self.device))

    def setup_eval(self) -> None:
        CONSOLE.print("Setting up evaluation dataset...")
        config = self.config
        self.eval_image_dataloader = self.image_loader(
            self.eval_dataset, config.eval_num_images_to_sample_from, config.eval_num_times_to_repeat_images
        )
        self.iter_eval_image_dataloader = iter(self.eval_image_dataloader)
        self.eval_pixel_sampler = self._get_pixel_sampler(self.eval_dataset, config.eval_num_rays_per_batch)
        self.eval_ray_generator = RayGenerator(self.eval_dataset.cameras.to(self.device))
        self.fixed_indices_eval_dataloader = FixedIndicesEvalDataloader(self.eval_dataset, device=self.device)
        self.eval_dataloader = RandIndicesEvalDataloader(self.eval_dataset, device=self.device)


class SizedDataManager(SizedLoaders, VanillaDataManager):
    """nerfstudio's ``VanillaDataManager`` with image loaders sized to the machine."""


@dataclass
class SizedDataManagerConfig(VanillaDataManagerConfig):
    """``VanillaDataManagerConfig`` whose image loaders are sized to the machine."""

    _target: Type = field(default_factory=lambda: SizedDataManager)


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


class SeededParallelDataManager(SizedLoaders, ParallelDataManager):
    """``ParallelDataManager`` whose workers are :class:`SeededDataProcessor`, each with its own queue, and whose
    evaluation images load with sized loaders."""

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
