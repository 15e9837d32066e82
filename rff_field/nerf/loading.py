"""Load a trained run of this package's methods (its ``config.yml`` and latest checkpoint), with clear errors for
wrong input."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Tuple

import torch
import yaml
from nerfstudio.engine.trainer import TrainerConfig
from nerfstudio.models.base_model import Model
from nerfstudio.pipelines.base_pipeline import Pipeline

from rff_field.core.errors import UsageError
from rff_field.nerf.checks import check_run_dataset_path, dataset_path
from rff_field.nerf.model import RFFNeRFModelConfig
from rff_field.nerf.nerfacto_model import RFFNerfactoModelConfig
from rff_field.nerf.pipeline import check_finite_checkpoint

OUR_MODELS = (RFFNeRFModelConfig, RFFNerfactoModelConfig)
"""Model configs of the methods this package registers."""


def read_run_config(config_path: Path, any_method: bool = False) -> TrainerConfig:
    """Read a run's ``config.yml`` and check that it is a run of this package's methods with a checkpoint.

    The checkpoint folder is taken next to ``config.yml``, so a run can be loaded from any working directory.

    Args:
        config_path: The run's ``config.yml``.
        any_method: Accept runs of any nerfstudio method (the benchmark evaluates nerfstudio's own methods too).

    Raises:
        UsageError: The file is missing, is not a nerfstudio config, is another method's, has no checkpoint, or
            its dataset path does not exist from the current folder.
    """
    config_path = Path(config_path)
    hint = "pass the config.yml that ns-train printed at the end of training"
    if not config_path.is_file():
        raise UsageError(f"{config_path} does not exist; {hint}")
    try:
        config = yaml.load(config_path.read_text(), Loader=yaml.Loader)
    except Exception as err:  # yaml errors, or classes of a plugin that is not installed
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UsageError(f"{config_path} is not a readable nerfstudio config ({reason}); {hint}") from None
    if not isinstance(config, TrainerConfig):
        raise UsageError(f"{config_path} is not a nerfstudio config.yml; {hint}")
    if not any_method and not isinstance(config.pipeline.model, OUR_MODELS):
        raise UsageError(
            f"{config_path} is a '{config.method_name}' run, not an rff-nerf one; this command reads runs of "
            "rff-nerf, rff-nerf-lite, rff-nerfacto and rff-nerfacto-lite (use ns-export for other methods)"
        )
    checkpoint_dir = config_path.resolve().parent / config.relative_model_dir  # beside the file a link points to
    if not checkpoint_dir.is_dir() or not any(checkpoint_dir.glob("step-*.ckpt")):
        raise UsageError(f"no checkpoint (step-*.ckpt) in {checkpoint_dir}; train the model first")
    check_run_dataset_path(dataset_path(config.pipeline), config_path)
    # Absolute, so that the checkpoint is found whatever the current directory.
    config.relative_model_dir = checkpoint_dir
    return config


def load_rff_pipeline(
    config_path: Path, test_mode: Literal["test", "val", "inference"] = "inference", any_method: bool = False
) -> Tuple[TrainerConfig, Pipeline, Model, int]:
    """Load a trained run for inference (on CUDA when available), like nerfstudio's ``eval_setup``.

    Unlike ``eval_setup`` it does not look the method up in nerfstudio's registry, so it also works where the
    package is importable but not installed (e.g. a bare GPU machine running the benchmark from the repository).

    Args:
        config_path: The run's ``config.yml``.
        test_mode: Which splits to load ('test', 'val' or 'inference').
        any_method: Accept runs of any nerfstudio method. Their checkpoints are read with ``weights_only=False``
            (nerfstudio's own schedulers store numpy scalars): only for runs you trained yourself.

    Returns:
        The run's config, its pipeline, the model, and the step of the loaded checkpoint.

    Raises:
        UsageError: see :func:`read_run_config`.
    """
    config = read_run_config(config_path, any_method)
    config.load_dir = config.get_checkpoint_dir()
    checkpoint = max(config.load_dir.glob("step-*.ckpt"), key=lambda p: int(p.stem.split("-")[1]))
    ours = isinstance(config.pipeline.model, OUR_MODELS)
    state = torch.load(checkpoint, map_location="cpu", weights_only=ours)
    check_finite_checkpoint(state["pipeline"], state["step"])  # before the dataset and the model are built
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    pipeline = config.pipeline.setup(device=device, test_mode=test_mode)
    assert isinstance(pipeline, Pipeline)
    pipeline.eval()
    pipeline.load_pipeline(state["pipeline"], state["step"])
    model = pipeline.model
    assert isinstance(model, Model)
    return config, pipeline, model, int(state["step"])
