"""nerfstudio's vanilla pipeline, with the model options and the dataset folder checked before anything is built."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Literal, Optional, Type

from nerfstudio.pipelines.base_pipeline import VanillaPipeline, VanillaPipelineConfig
from nerfstudio.utils.rich_utils import CONSOLE
from torch.amp import GradScaler

from rff_field.core.errors import USAGE_EXIT_STATUS, UsageError
from rff_field.nerf.checks import check_dataset, check_model_config
from rff_field.nerf.model import RFFNeRFModelConfig


@dataclass
class RFFPipelineConfig(VanillaPipelineConfig):
    """The vanilla pipeline with input checks (what ``rff-nerf`` and ``rff-nerf-lite`` use)."""

    _target: Type = field(default_factory=lambda: RFFPipeline)
    """target class to instantiate"""


class RFFPipeline(VanillaPipeline):
    """A ``VanillaPipeline`` that stops with one clear line for a bad dataset folder or option.

    Args:
        config: The pipeline's configuration.
        device: Where the model and the data go.
        test_mode: Which splits to load ('val', 'test' or 'inference').
        world_size: Number of processes.
        local_rank: Rank of this process.
        grad_scaler: The trainer's gradient scaler.
    """

    def __init__(
        self,
        config: RFFPipelineConfig,
        device: str,
        test_mode: Literal["test", "val", "inference"] = "val",
        world_size: int = 1,
        local_rank: int = 0,
        grad_scaler: Optional[GradScaler] = None,
    ) -> None:
        try:
            if isinstance(config.model, RFFNeRFModelConfig):
                check_model_config(config.model)
            check_dataset(config.datamanager.dataparser, test_mode, getattr(config.datamanager, "data", None))
        except UsageError as err:
            CONSOLE.print(f"[bold red]Error:[/bold red] {err}", soft_wrap=True)
            sys.exit(USAGE_EXIT_STATUS)
        super().__init__(config, device, test_mode, world_size, local_rank, grad_scaler)
