"""nerfstudio's data manager without torch's warning that its image loaders ask for more workers than CPUs:
``CacheDataloader`` loads images on threads and never starts those workers."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Type

from nerfstudio.data.datamanagers.base_datamanager import VanillaDataManager, VanillaDataManagerConfig

WORKER_WARNING = ".*This DataLoader will create"


class QuietDataManager(VanillaDataManager):
    """nerfstudio's ``VanillaDataManager``."""

    def setup_train(self) -> None:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=WORKER_WARNING)
            super().setup_train()

    def setup_eval(self) -> None:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=WORKER_WARNING)
            super().setup_eval()


@dataclass
class QuietDataManagerConfig(VanillaDataManagerConfig):
    _target: Type = field(default_factory=lambda: QuietDataManager)
