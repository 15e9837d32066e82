"""``rff-nerf-bench``: variants ``[LABEL:]METHOD[,key=value...]`` of the NeRF methods trained on one scene and
evaluated on its test views, in one table (results.json, results.md); a rerun skips finished variants."""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional, Sequence

from rff_field.cli.common import run_command
from rff_field.core.errors import TrainingDiverged, UsageError, check_fields
from rff_field.fit.bench import Job, Variant, parse_shard, parse_variant, run_bench, set_option

METHODS = ("rff-nerf", "rff-nerf-lite", "rff-nerfacto", "rff-nerfacto-lite")
MIN_EVAL_SIDE = 32
"""The smallest side (pixels) of the test renders the bench compares: a smaller render scores blur, not the field."""
COLUMNS = [("test PSNR", "psnr", ".2f"), ("test SSIM", "ssim", ".4f"), ("s/step", "seconds_per_step", ".3f"),
           ("filter at lr-max", "filter_lr_at_max", ".0%")]  # fmt: skip


@dataclass
class NerfBench:
    """Train variants of rff-nerf and rff-nerfacto on one scene with one protocol and tabulate their test scores."""

    data: Path
    """The scene: a Blender-format folder (transforms_train.json) or a nerfstudio-data capture (transforms.json)."""
    output_dir: Path = Path("outputs/nerf-bench")
    """Folder of the bench: runs/<scene>/<label>/ per variant, results.json, results.md."""
    variants: tuple[str, ...] = ("baseline:rff-nerf-lite,embedding.filtered=false", "filter:rff-nerf-lite")
    """Variants [LABEL:]METHOD[,key=value...]; the default: the filter off (the MLP+PE baseline) and on."""
    steps: int = 2000
    """Training steps of every variant."""
    resolution_scale: float = 0.125
    """Training and test resolution, a multiple of the scene's (camera-res-scale-factor; test views >= 32 pixels)."""
    seed: int = 42
    """Training seed of every variant."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Where to train (auto: CUDA when there is one)."""
    eval_views: Optional[int] = None
    """Evaluate this many test views, evenly spaced (None: all)."""
    shard: str = "1/1"
    """Run jobs I, I+N, ... of the N in the grid (for separate processes)."""

    def main(self) -> list[dict]:
        """Run this shard's unfinished variants; returns the finished rows."""
        check_fields(self, positive_int=("steps",), positive=("resolution_scale",))
        parse_shard(self.shard)
        if not self.data.is_dir():
            raise UsageError(f"--data {self.data} is not a folder; pass a scene folder")
        from rff_field.nerf import quiet_known_warnings

        quiet_known_warnings()  # before nerfstudio is imported
        variants = [parse_variant(text, {method: {} for method in METHODS}) for text in self.variants]
        sizes = set()
        for variant in variants:  # unknown options and bad values stop here, before any training
            try:
                config = self.trainer_config(variant, self.output_dir)
                sizes.add(self.test_view_size(config))
                config.prepare()
            except UsageError as err:
                raise UsageError(f"variant {variant.label!r}: {err}") from None
        protocol = {"data": str(self.data.resolve()), "steps": self.steps, "resolution_scale": self.resolution_scale,
                    "seed": self.seed, "eval_views": self.eval_views}  # fmt: skip
        note = (
            f"Test views rendered at {', '.join(sorted(sizes))} pixels (--resolution-scale {self.resolution_scale:g})"
        )
        return run_bench(self.output_dir, [self.data.name], variants, self.run_job, protocol, COLUMNS, self.shard,
                         note=note + ".")  # fmt: skip

    def test_view_size(self, config) -> str:
        """``WIDTHxHEIGHT`` of the config's test renders; a :class:`UsageError` below :data:`MIN_EVAL_SIDE` a side."""
        from rff_field.nerf.checks import check_dataset

        dataparser = copy.deepcopy(config.pipeline.datamanager.dataparser)
        check_dataset(dataparser, self.data, "test", config.method_name)  # one line for data it cannot read
        dataparser.data = self.data
        cameras = dataparser.setup().get_dataparser_outputs(split="test").cameras[:1]
        width, height = int(cameras.width), int(cameras.height)
        scale = config.pipeline.datamanager.camera_res_scale_factor
        cameras.rescale_output_resolution(scale)
        scaled_width, scaled_height = int(cameras.width), int(cameras.height)
        if min(scaled_width, scaled_height) < MIN_EVAL_SIDE:
            needed = math.ceil(MIN_EVAL_SIDE / min(width, height) * 1000) / 1000
            raise UsageError(f"--resolution-scale {scale:g} renders the {width}x{height} test views of {self.data} "
                             f"at {scaled_width}x{scaled_height}, below {MIN_EVAL_SIDE} pixels a side; give "
                             f"--resolution-scale {needed:g} or more")  # fmt: skip
        return f"{scaled_width}x{scaled_height}"

    def trainer_config(self, variant: Variant, folder: Path):
        """The variant's trainer config for the scene, without viewer, with the bench's protocol and options."""
        from nerfstudio.data.dataparsers.blender_dataparser import BlenderDataParserConfig
        from nerfstudio.data.dataparsers.nerfstudio_dataparser import NerfstudioDataParserConfig

        from rff_field.nerf.methods import rff_nerf_config, rff_nerfacto_config
        from rff_field.nerf.training import run_config

        build = rff_nerfacto_config if variant.preset.startswith("rff-nerfacto") else rff_nerf_config
        config = run_config(build(lite=variant.preset.endswith("-lite")), self.data, folder / "nerfstudio",
                            self.steps, experiment_name=variant.label)  # fmt: skip
        blender = (self.data / "transforms_train.json").exists()
        config.pipeline.datamanager.dataparser = BlenderDataParserConfig() if blender else NerfstudioDataParserConfig()
        config.pipeline.datamanager.camera_res_scale_factor = self.resolution_scale
        config.machine.seed, config.machine.device_type = self.seed, self.device
        config.steps_per_eval_image = config.steps_per_eval_all_images = 10**9
        for key, value in variant.options:
            set_option(config, key, value)
        return config

    def run_job(self, job: Job) -> None:
        """Train the variant from the start, evaluate it on its test views and write metrics.json (holds its folder)."""
        from rff_field.common.outputs import claimed_folder, clear_folder

        with claimed_folder(job.folder, "--output-dir"):
            clear_folder(job.folder)  # the bench's own files of an unfinished job
            self.train_and_evaluate(job)

    def train_and_evaluate(self, job: Job) -> None:
        import torch

        from rff_field.common.outputs import write_json
        from rff_field.inr.config import parameter_metrics
        from rff_field.nerf.evaluate import evaluate_views
        from rff_field.nerf.filtered_model import FIELDS_GROUP
        from rff_field.nerf.loading import load_pipeline
        from rff_field.nerf.training import train_in_process

        config = self.trainer_config(job.variant, job.folder)
        trained = {}
        try:
            config_path = train_in_process(
                config, lambda trainer: trained.update(model=trainer.pipeline.model, start=time.perf_counter())
            )
        except TrainingDiverged as err:
            write_json(job.folder / "metrics.json", {"diverged": str(err)})
            return
        seconds = time.perf_counter() - trained["start"]  # the steps (and the last checkpoint), not the setup
        model = trained["model"]
        rates = model.line_search.records[:, 3] if model.line_search is not None else torch.zeros(0)
        _, pipeline, _ = load_pipeline(config_path, test_mode="test")
        metrics = evaluate_views(pipeline, job.folder, max_views=self.eval_views)
        cameras = pipeline.datamanager.eval_dataset.cameras
        result = {**metrics["mean"], "method": job.variant.preset, "options": dict(job.variant.options),
                  "test_view_size": f"{int(cameras.width[0])}x{int(cameras.height[0])}",
                  "steps": config.max_num_iterations, "seconds_per_step": seconds / config.max_num_iterations,
                  **parameter_metrics(model), "inr_lr": config.optimizers[FIELDS_GROUP]["optimizer"].lr,
                  "filter_lr_at_max": float((rates >= model.config.line_search.lr_max).float().mean())
                  if len(rates) else None, "config": str(config_path)}  # fmt: skip
        write_json(job.folder / "metrics.json", result)


def entrypoint(args: Optional[Sequence[str]] = None) -> None:
    """Console script ``rff-nerf-bench``."""
    run_command("rff-nerf-bench", NerfBench, __doc__, args)


if __name__ == "__main__":
    entrypoint()
