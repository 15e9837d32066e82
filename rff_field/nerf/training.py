"""Train a method's config in this process, as ``ns-train`` would (config settled and saved, seeded, checkpoints
written): for the demo, the benchmark and the tests, which need the trainer object."""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import torch
from nerfstudio.engine.trainer import Trainer, TrainerConfig
from nerfstudio.utils import profiler, writer
from nerfstudio.utils.rich_utils import CONSOLE

from rff_field.nerf.trainer import RFFTrainer, RFFTrainerConfig


def run_config(base: RFFTrainerConfig, data: Path, output_dir: Path, steps: int, experiment_name: Optional[str] = None):
    """A copy of a method's config ``base`` training ``steps`` steps on ``data``, written under ``output_dir``
    (``experiment_name/method/timestamp``), without viewer (tensorboard logs; nerfstudio's step table with the time
    left on the terminal), saving a checkpoint at the end only."""
    config = copy.deepcopy(base)
    config.data = config.pipeline.datamanager.data = Path(data)
    config.output_dir = Path(output_dir)
    config.experiment_name = experiment_name
    config.max_num_iterations = config.steps_per_save = steps
    config.vis = "tensorboard"
    return config


def set_up_trainer(config: TrainerConfig) -> Trainer:
    """The set-up trainer of ``config`` (its timestamp set), its ``config.yml`` saved and the generators seeded, as
    ``ns-train`` does; any nerfstudio trainer config."""
    for log in (writer.EVENT_WRITERS, writer.EVENT_STORAGE, writer.GLOBAL_BUFFER, profiler.PROFILER):
        log.clear()  # nerfstudio keeps an earlier run's writers in module globals and offers no reset
    config.save_config()
    random.seed(config.machine.seed)
    np.random.seed(config.machine.seed)
    torch.manual_seed(config.machine.seed)
    trainer = config.setup(local_rank=0, world_size=1)
    trainer.setup()
    return trainer


def train_in_process(config: RFFTrainerConfig, on_setup: Optional[Callable[[RFFTrainer], None]] = None) -> Path:
    """Train ``config`` in this process and return the run's ``config.yml``; ``on_setup(trainer)`` runs before the
    first step. Raises ``UsageError``, ``TrainingDiverged`` or ``KeyboardInterrupt`` where ``ns-train`` exits."""
    config.set_timestamp()
    for notice in config.prepare():
        CONSOLE.print(f"[yellow]Notice: {notice}[/yellow]", soft_wrap=True, highlight=False)
    trainer = set_up_trainer(config)
    if on_setup is not None:
        on_setup(trainer)
    try:
        trainer.train_checked()
    finally:
        trainer.shutdown()
        for event_writer in writer.EVENT_WRITERS:
            if getattr(event_writer, "tb_writer", None) is not None:
                event_writer.tb_writer.close()
    if trainer.interrupted:
        raise KeyboardInterrupt(f"interrupted at step {trainer.step}; its checkpoint is in {trainer.checkpoint_dir}")
    return config.get_base_dir() / "config.yml"
