"""nerfstudio's vanilla pipeline, with the options left to the data chosen and the data checked before anything is
built, and checkpoints of a diverged run refused."""

from __future__ import annotations

import contextlib
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, Literal, Optional, Type

import torch
from nerfstudio.data.dataparsers.blender_dataparser import BlenderDataParserConfig
from nerfstudio.pipelines.base_pipeline import VanillaPipeline, VanillaPipelineConfig
from torch.amp import GradScaler

from rff_field.core.errors import USAGE_EXIT_STATUS, UsageError, check_fields
from rff_field.nerf.checks import TestMode, check_dataset, check_scaled_size, dataset_path
from rff_field.nerf.nerfacto_model import RFFNerfactoModelConfig

SCALE_OPTION = "--pipeline.datamanager.camera-res-scale-factor"
VOID_INIT_DENSITY = 0.2
"""rff-nerfacto's starting density on an object in a void: a ray across the Blender scene box (3 units) starts about
half opaque (docs/nerf.md)."""
COARSE_SAMPLING_STEPS = 200
"""rff-nerfacto's first steps with -lite's sample counts on an object in a void (docs/nerf.md)."""


def choose_by_data(config: VanillaPipelineConfig) -> str:
    """Fill in ``rff-nerfacto``'s options left to the data (None): an object in a void's on a Blender scene,
    nerfacto's elsewhere; returns what it chose on a Blender scene, for a notice."""
    model = config.model
    if not isinstance(model, RFFNerfactoModelConfig):
        return ""
    void = isinstance(config.datamanager.dataparser, BlenderDataParserConfig)
    choices = {
        "coarse_sampling_steps": (model, COARSE_SAMPLING_STEPS if void else 0),
        "background_color": (model, "white" if void else "last_sample"),
        "camera_optimizer.mode": (model.camera_optimizer, "off" if void else "SO3xR3"),
        "disable_scene_contraction": (model, void),
        "proposal_initial_sampler": (model, "uniform" if void else "piecewise"),
        "use_appearance_embedding": (model, not void),
        "average_init_density": (model, VOID_INIT_DENSITY if void else 0.01),
        "embedding.pe_bands": (model.embedding, "nerf-pytorch" if void else "loglinear"),
    }
    chosen = []
    for name, (owner, value) in choices.items():
        attribute = name.split(".")[-1]
        if getattr(owner, attribute) is None:
            setattr(owner, attribute, value)
            chosen.append(f"--pipeline.model.{name.replace('_', '-')} {value}")
    return ", ".join(chosen) + " (give an option to choose otherwise)" if void and chosen else ""


def check_pipeline(config: VanillaPipelineConfig, test_mode: TestMode, method: Optional[str] = None) -> None:
    """Raise :class:`UsageError` for model or data-manager options, or a dataset, that cannot work."""
    config.model.check()
    datamanager = config.datamanager
    check_fields(datamanager, positive_int=("train_num_rays_per_batch", "eval_num_rays_per_batch"),
                 positive=("camera_res_scale_factor",), prefix="--pipeline.datamanager.")  # fmt: skip
    image = check_dataset(datamanager.dataparser, dataset_path(config), test_mode, method)
    if image is not None:
        check_scaled_size(image, datamanager.camera_res_scale_factor, SCALE_OPTION)


@dataclass
class RFFPipelineConfig(VanillaPipelineConfig):
    """The vanilla pipeline with the choices by data and the checks of this module."""

    _target: Type = field(default_factory=lambda: RFFPipeline)


class RFFPipeline(VanillaPipeline):
    """A ``VanillaPipeline`` that chooses the options left to the data, stops with one line for a dataset it cannot
    read (``ns-eval`` and the like read a run's dataset again) and refuses a checkpoint with non-finite values.
    Its arguments are ``VanillaPipeline``'s."""

    def __init__(
        self,
        config: RFFPipelineConfig,
        device: str,
        test_mode: Literal["test", "val", "inference"] = "val",
        world_size: int = 1,
        local_rank: int = 0,
        grad_scaler: Optional[GradScaler] = None,
    ) -> None:
        choose_by_data(config)
        with usage_errors_exit():
            check_pipeline(config, test_mode)
        super().__init__(config, device, test_mode, world_size, local_rank, grad_scaler)

    def load_pipeline(self, loaded_state: Dict[str, Any], step: int) -> None:
        """Load a checkpoint, refusing one with non-finite values (a diverged training's)."""
        bad = [key for key, value in loaded_state.items() if torch.is_tensor(value) and value.is_floating_point()
               and not bool(torch.isfinite(value).all())]  # fmt: skip
        with usage_errors_exit():
            if bad:
                raise UsageError(f"the checkpoint of step {step} holds non-finite values (e.g. {bad[0]}): its training "
                                 "diverged; train again with lower learning rates")  # fmt: skip
        super().load_pipeline(loaded_state, step)

    def get_average_image_metrics(self, *args: Any, **kwargs: Any) -> Dict[str, float]:
        """nerfstudio's averages, without the standard deviations that a single view leaves NaN."""
        metrics = super().get_average_image_metrics(*args, **kwargs)
        return {key: value for key, value in metrics.items() if not (key.endswith("_std") and math.isnan(value))}


@contextlib.contextmanager
def usage_errors_exit() -> Iterator[None]:
    """A :class:`UsageError` in the block prints one line and exits with status 2, as the package's own commands do
    (nerfstudio's commands, whose main we do not own, would print a traceback)."""
    try:
        yield
    except UsageError as err:
        print(f"{Path(sys.argv[0]).name}: error: {err}", file=sys.stderr)
        sys.exit(USAGE_EXIT_STATUS)
