"""nerfstudio's vanilla pipeline, with the model options and the dataset folder checked before anything is built."""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Literal, Optional, Type

import torch
from nerfstudio.data.dataparsers.blender_dataparser import BlenderDataParserConfig
from nerfstudio.data.dataparsers.nerfstudio_dataparser import NerfstudioDataParserConfig
from nerfstudio.engine.trainer import TrainerConfig
from nerfstudio.pipelines.base_pipeline import VanillaPipeline, VanillaPipelineConfig
from nerfstudio.utils.rich_utils import CONSOLE
from torch.amp import GradScaler

from rff_field.common.machine import missing_accelerator
from rff_field.core.errors import USAGE_EXIT_STATUS, UsageError, check_fields
from rff_field.nerf.checks import (
    TestMode,
    check_datamanager,
    check_dataset,
    check_model_config,
    check_nerfacto_config,
    check_optimizers,
    check_run_dataset_path,
    check_scaled_image_size,
    check_seed,
    dataset_path,
)
from rff_field.nerf.divergence import report_divergence_in_one_line
from rff_field.nerf.filtered_model import MODEL_OPTION_PREFIX
from rff_field.nerf.model import RFFNeRFModelConfig
from rff_field.nerf.nerfacto_model import (
    COARSE_SAMPLING_STEPS,
    LITE_FIELD_SAMPLES,
    LITE_PROPOSAL_SAMPLES,
    RFFNerfactoModelConfig,
)


def check_pipeline_config(
    config: VanillaPipelineConfig, test_mode: TestMode = "val", method: Optional[str] = None
) -> None:
    """Raise :class:`UsageError` for model options or a dataset folder that cannot work (``method``: the method
    being trained, named in the hints)."""
    if isinstance(config.model, RFFNeRFModelConfig):
        check_model_config(config.model)
    elif isinstance(config.model, RFFNerfactoModelConfig):
        check_nerfacto_config(config.model)
    check_datamanager(config.datamanager)
    image = check_dataset(config.datamanager.dataparser, test_mode, dataset_path(config), method)
    if image is not None:
        scale = config.datamanager.camera_res_scale_factor
        check_scaled_image_size(image, scale, "--pipeline.datamanager.camera-res-scale-factor")


def coarse_sampling_steps(config: VanillaPipelineConfig, model: RFFNerfactoModelConfig) -> int:
    """``model.coarse_sampling_steps``, or where it is None (its default) the choice by the data: a coarse start on
    a Blender scene (an object in a void, where the Fourier field grew no surface without one), none on other data
    (captures with surroundings, where the configured counts train from the first step)."""
    if model.coarse_sampling_steps is not None:
        return model.coarse_sampling_steps
    return COARSE_SAMPLING_STEPS if isinstance(config.datamanager.dataparser, BlenderDataParserConfig) else 0


def choose_coarse_sampling(config: VanillaPipelineConfig) -> None:
    """Set ``rff-nerfacto``'s ``coarse_sampling_steps`` to :func:`coarse_sampling_steps` (the choice by the data
    where it is None)."""
    if isinstance(config.model, RFFNerfactoModelConfig):
        config.model.coarse_sampling_steps = coarse_sampling_steps(config, config.model)


def object_in_void_sampling_notice(config: VanillaPipelineConfig) -> Optional[str]:
    """A notice for ``rff-nerfacto`` on a Blender scene (an object in a void) that starts with other proposal counts
    than ``-lite``'s: started with nerfacto's, and with 64 + 32 and 128 + 48, its Fourier field grew no surface
    there."""
    model = config.model
    if not isinstance(model, RFFNerfactoModelConfig) or not isinstance(
        config.datamanager.dataparser, BlenderDataParserConfig
    ):
        return None
    coarse_start = coarse_sampling_steps(config, model) > 0
    samples = tuple(model.coarse_proposal_samples_per_ray if coarse_start else model.num_proposal_samples_per_ray)
    if samples == LITE_PROPOSAL_SAMPLES:
        return None
    option = MODEL_OPTION_PREFIX + ("coarse-" if coarse_start else "num-")
    return (
        f"rff-nerfacto starts with {' + '.join(map(str, samples))} proposal samples per ray; on Blender scenes (an "
        "object in a void) its field grew no surface (a white render) when it started with nerfacto's 256 + 96, "
        "128 + 48 or 64 + 32, and trained when it started with rff-nerfacto-lite's (docs/nerf.md): "
        f"{option}proposal-samples-per-ray {' '.join(map(str, LITE_PROPOSAL_SAMPLES))} "
        f"{option}nerf-samples-per-ray {LITE_FIELD_SAMPLES}"
        + (
            ""
            if coarse_start
            else f", or {MODEL_OPTION_PREFIX}coarse-sampling-steps {COARSE_SAMPLING_STEPS} to start with those counts"
        )
    )


def transparent_images_notice(config: VanillaPipelineConfig) -> Optional[str]:
    """A notice for a nerfstudio-data capture whose images have an alpha channel, trained with the background of
    the last sample: nerfstudio composites the images on black for the loss, so the field learns black where they
    are transparent."""
    from PIL import Image

    if getattr(config.model, "background_color", None) != "last_sample":
        return None
    if not isinstance(config.datamanager.dataparser, NerfstudioDataParserConfig):
        return None
    data = dataset_path(config)
    try:
        transforms = Path(data) if Path(data).suffix == ".json" else Path(data) / "transforms.json"
        first = transforms.parent / json.loads(transforms.read_text())["frames"][0]["file_path"]
        with Image.open(first) as image:
            alpha = image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info
            if not alpha or image.convert("RGBA").getchannel("A").getextrema()[0] == 255:
                return None  # no alpha channel, or one that is opaque everywhere
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None  # the checks before training name what is wrong with the capture
    return (
        f"the capture's images have an alpha channel (e.g. {first.name}), which nerfstudio composites on black for the "
        "loss, so the field learns black where they are transparent; to learn empty space there, pass "
        f"{MODEL_OPTION_PREFIX}background-color random"
    )


def exit_on_usage_error(check: Callable[[], None]) -> None:
    """Run ``check``; on a :class:`UsageError` print one line on stderr (``ns-train: error: ...``, as the
    plugin's own commands) and exit with status 2 (nerfstudio's commands)."""
    try:
        check()
    except UsageError as err:
        print(f"{Path(sys.argv[0]).name}: error: {err}", file=sys.stderr)
        sys.exit(USAGE_EXIT_STATUS)


@dataclass
class RFFTrainerConfig(TrainerConfig):
    """nerfstudio's trainer config, whose options and dataset ``ns-train`` checks before it prints and saves it
    (so that a mistake stops at once, with one line, and leaves no run folder behind)."""

    def check(self) -> None:
        """Raise :class:`UsageError` for options or a dataset that cannot work."""
        check_pipeline_config(self.pipeline, "val", self.method_name)  # type: ignore[arg-type]
        check_optimizers(self.optimizers)
        check_fields(self, positive_int=("max_num_iterations",))
        check_seed(self.machine.seed, "--machine.seed")
        self.check_device()

    def check_device(self) -> None:
        """Raise :class:`UsageError` for a ``--machine.device-type`` this machine does not have (CUDA is the
        default)."""
        missing = missing_accelerator(torch.device(self.machine.device_type))
        if missing is not None:
            raise UsageError(f"{missing} is not available on this machine; pass --machine.device-type cpu")

    def check_run_folder(self) -> None:
        """Raise :class:`UsageError` where training would write over the checkpoints of an earlier run (the same
        ``--timestamp``, or ``--load-config`` of a finished run) without continuing it."""
        checkpoints = self.get_checkpoint_dir()
        resuming = self.load_dir is not None or self.load_checkpoint is not None
        if not resuming and any(checkpoints.glob("step-*.ckpt")):
            raise UsageError(
                f"{self.get_base_dir()} holds the checkpoints of an earlier run; pass --load-dir {checkpoints} to "
                "continue it, or another --timestamp or --experiment-name to start a new run beside it (with "
                "--load-config, which ignores both: a copy of the config.yml with another timestamp)"
            )

    def print_to_terminal(self) -> None:
        # before config.yml is saved, so that it holds the choice the run makes
        choose_coarse_sampling(self.pipeline)  # type: ignore[arg-type]
        exit_on_usage_error(self.check)
        exit_on_usage_error(self.check_run_folder)
        report_divergence_in_one_line()
        super().print_to_terminal()
        pipeline: VanillaPipelineConfig = self.pipeline  # type: ignore[assignment]
        for notice in (object_in_void_sampling_notice(pipeline), transparent_images_notice(pipeline)):
            if notice is not None:
                CONSOLE.print(f"[yellow]Notice: {notice}.[/yellow]", soft_wrap=True)


@dataclass
class RFFPipelineConfig(VanillaPipelineConfig):
    """The vanilla pipeline with input checks (what the methods of this package use)."""

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
        # ns-train checked the dataset before it saved config.yml: a dataset missing now is the one a trained run's
        # config.yml holds (ns-eval, ns-render, rff-export-mesh...), which --data cannot fix
        exit_on_usage_error(lambda: check_run_dataset_path(dataset_path(config)))
        choose_coarse_sampling(config)
        exit_on_usage_error(lambda: check_pipeline_config(config, test_mode))
        super().__init__(config, device, test_mode, world_size, local_rank, grad_scaler)

    def load_pipeline(self, loaded_state: Dict[str, Any], step: int) -> None:
        """Load a checkpoint, refusing one with non-finite values (a diverged training's)."""
        exit_on_usage_error(lambda: check_finite_checkpoint(loaded_state, step))
        super().load_pipeline(loaded_state, step)

    def get_average_image_metrics(self, *args: Any, **kwargs: Any) -> Dict[str, float]:
        """nerfstudio's averages over the evaluation views, without the standard deviations that one view leaves
        undefined (NaN, which ``ns-eval`` would write into its JSON)."""
        return without_undefined_std(super().get_average_image_metrics(*args, **kwargs))


def without_undefined_std(metrics: Dict[str, float]) -> Dict[str, float]:
    """``metrics`` less its ``*_std`` entries that are NaN (the spread of a single view)."""
    return {key: value for key, value in metrics.items() if not (key.endswith("_std") and math.isnan(value))}


def check_finite_checkpoint(state: Dict[str, Any], step: int) -> None:
    """Raise :class:`UsageError` when a checkpoint's pipeline state holds non-finite values."""
    bad = [key for key, value in state.items() if torch.is_tensor(value) and value.is_floating_point()
           and not bool(torch.isfinite(value).all())]  # fmt: skip
    if bad:
        raise UsageError(
            f"the checkpoint of step {step} holds non-finite values ({len(bad)} tensors, e.g. {bad[0]}): its training "
            "diverged; train again with a lower learning rate (e.g. --optimizers.fields.optimizer.lr)"
        )
