"""Load a trained run (its ``config.yml`` and latest checkpoint), with one-line errors for wrong input."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Tuple

import torch
import yaml
from nerfstudio.engine.trainer import TrainerConfig
from nerfstudio.pipelines.base_pipeline import Pipeline

from rff_field.core.errors import UsageError
from rff_field.nerf.filtered_model import FilteredModelConfig

HINT = "pass the config.yml that ns-train printed at the end of training"


def read_run_config(config_path: Path, any_method: bool = False) -> TrainerConfig:
    """A run's config, with its checkpoint folder made absolute (beside ``config.yml``).

    Raises:
        UsageError: The file is missing or not a nerfstudio config, another method's run (unless ``any_method``),
            or without a checkpoint.
    """
    config_path = Path(config_path)
    if not config_path.is_file():
        raise UsageError(f"--load-config {config_path} is not a file; {HINT}")
    try:
        config = yaml.load(config_path.read_text(), Loader=yaml.Loader)
    except Exception as err:  # yaml errors, or classes of a plugin that is not installed
        raise UsageError(f"--load-config {config_path} is not a readable nerfstudio config ({type(err).__name__}); "
                         f"{HINT}") from None  # fmt: skip
    if not isinstance(config, TrainerConfig):
        raise UsageError(f"--load-config {config_path} is not a nerfstudio config.yml; {HINT}")
    if not any_method and not isinstance(config.pipeline.model, FilteredModelConfig):
        raise UsageError(f"--load-config {config_path} is a '{config.method_name}' run; this command reads runs of "
                         "rff-nerf(-lite) and rff-nerfacto(-lite)")  # fmt: skip
    config.relative_model_dir = config_path.resolve().parent / config.relative_model_dir
    if not any(config.relative_model_dir.glob("step-*.ckpt")):
        raise UsageError(f"no checkpoint (step-*.ckpt) in {config.relative_model_dir}; train the model first")
    return config


def load_pipeline(
    config_path: Path, test_mode: Literal["test", "val", "inference"] = "inference", any_method: bool = False
) -> Tuple[TrainerConfig, Pipeline, int]:
    """Load a trained run for inference (on CUDA when there is one), as nerfstudio's ``eval_setup`` does but without
    its method registry; returns the config, the pipeline in eval mode and the checkpoint's step.

    ``any_method`` reads other methods' checkpoints with ``weights_only=False`` (nerfstudio's schedulers store numpy
    scalars): only for runs you trained yourself.
    """
    config = read_run_config(config_path, any_method)
    checkpoint = max(config.relative_model_dir.glob("step-*.ckpt"), key=lambda p: int(p.stem.split("-")[1]))
    ours = isinstance(config.pipeline.model, FilteredModelConfig)
    state = torch.load(checkpoint, map_location="cpu", weights_only=ours)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    pipeline = config.pipeline.setup(device=device, test_mode=test_mode)
    pipeline.eval()
    pipeline.load_pipeline(state["pipeline"], state["step"])
    return config, pipeline, int(state["step"])
