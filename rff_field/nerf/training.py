"""Train an ``rff-nerf`` config in this process, as ``ns-train`` would (seeded, config saved, checkpoints written).

``ns-train`` is the command for users; this is for the demo and for tests, which need the trainer object.
"""

from __future__ import annotations

import copy
import random
import signal
import threading
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import torch
from nerfstudio.engine.trainer import Trainer, TrainerConfig
from nerfstudio.utils import profiler, writer

from rff_field.common.stopping import FitInterrupted
from rff_field.nerf.quiet import quiet_known_warnings
from rff_field.nerf.stopping import PRESSED

__all__ = ["lite_config", "quiet_known_warnings", "reset_nerfstudio_logging", "train_in_process"]


def reset_nerfstudio_logging() -> None:
    """Forget the writers of an earlier run in this process (nerfstudio keeps them in module globals)."""
    for event_writer in writer.EVENT_WRITERS:
        tb = getattr(event_writer, "tb_writer", None)
        if tb is not None:
            tb.close()
    writer.EVENT_WRITERS.clear()
    writer.EVENT_STORAGE.clear()
    writer.GLOBAL_BUFFER.clear()
    profiler.PROFILER.clear()


def lite_config(
    data: Path,
    output_dir: Path,
    max_num_iterations: int,
    experiment_name: Optional[str] = None,
    device_type: str = "cpu",
    base: Optional[TrainerConfig] = None,
) -> TrainerConfig:
    """A copy of ``rff-nerf-lite`` (or ``base``) for ``data``, without viewer, logging to tensorboard only.

    Args:
        data: Blender-format scene.
        output_dir: Where the run folder goes (``output_dir/experiment/method/timestamp``).
        max_num_iterations: Training steps.
        experiment_name: Run name (default: the data folder's name).
        device_type: 'cpu', 'cuda' or 'mps'.
        base: Config to copy instead of ``rff-nerf-lite``'s.
    """
    if base is None:
        from rff_field.nerf.method_configs import rff_nerf_lite

        base = rff_nerf_lite.config
    config = copy.deepcopy(base)
    config.data = Path(data)
    config.pipeline.datamanager.data = Path(data)
    config.output_dir = Path(output_dir)
    config.experiment_name = experiment_name
    config.machine.device_type = device_type  # type: ignore[assignment]
    config.max_num_iterations = max_num_iterations
    config.vis = "tensorboard"
    config.viewer.quit_on_train_completion = True
    config.logging.local_writer.enable = False
    config.steps_per_save = max_num_iterations
    return config


def train_in_process(config: TrainerConfig, on_setup: Optional[Callable[[Trainer], None]] = None) -> Path:
    """Train ``config`` here (one process, ``config.machine.device_type``); returns the run's ``config.yml``.

    Args:
        config: The trainer config; its timestamp is set now.
        on_setup: Called with the trainer after its setup and before the first step (e.g. to watch it).

    Raises:
        FitInterrupted: When Ctrl-C stopped training (after its step, with a checkpoint).
    """
    reset_nerfstudio_logging()
    config.set_timestamp()
    config.save_config()
    seed = config.machine.seed
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    trainer = config.setup(local_rank=0, world_size=1)
    trainer.setup()
    if on_setup is not None:
        on_setup(trainer)
    ctrl_c = signal.getsignal(signal.SIGINT)
    try:
        trainer.train()
        if getattr(trainer, PRESSED, False):  # its checkpoint is saved, but the caller's work stops here
            raise FitInterrupted(f"interrupted after step {trainer.step} of {config.max_num_iterations}")
    finally:
        trainer.shutdown()
        reset_nerfstudio_logging()
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, ctrl_c)  # the trainer's Ctrl-C handler goes with it
    return config.get_base_dir() / "config.yml"
