"""The scene suite: ``rff-nerfacto-lite`` with its defaults, the same without the filter, ``rff-nerf-lite`` (Blender
scenes) and nerfstudio's ``nerfacto`` (torch, the lite's rays and samples) on scenes of different kinds, at equal steps
and at equal CPU time; and a step of ``rff-nerfacto-lite`` on a real capture against one on a Blender scene, taking
turns in one process. Writes ``scenes.json``, the tables of ``scenes.md`` (below its marker; the text above it is
kept) and one picture per scene next to this file.

    python benchmarks/nerf/scenes.py --work outputs/scenes                  # every run (hours of one CPU core)
    python benchmarks/nerf/scenes.py --work outputs/scenes --shard 2/2      # every other scene, in a second process
    python benchmarks/nerf/scenes.py --work outputs/scenes --timing         # the side-by-side step time
    python benchmarks/nerf/scenes.py --work outputs/scenes --report         # tables and pictures of what finished

Runs are resumable: a finished run (its ``result.json``) is skipped. The chair and fruit come from ``RFF_DATA``
(else ``../shared/data``); ``--fox`` adds instant-ngp's fox capture (``data/nerf/fox`` of NVlabs/instant-ngp), never
committed. One torch thread; CPU seconds are this process's (``time.process_time``), so other jobs on the machine
slow the clock but not the count.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import torch

from rff_field.nerf import quiet_known_warnings

quiet_known_warnings()

from nerfstudio.configs.method_configs import method_configs  # noqa: E402
from nerfstudio.data.datamanagers.base_datamanager import VanillaDataManagerConfig  # noqa: E402
from nerfstudio.data.dataparsers.blender_dataparser import BlenderDataParserConfig  # noqa: E402
from nerfstudio.data.dataparsers.nerfstudio_dataparser import NerfstudioDataParserConfig  # noqa: E402
from nerfstudio.engine.callbacks import TrainingCallbackLocation  # noqa: E402
from nerfstudio.models.nerfacto import NerfactoModel, NerfactoModelConfig  # noqa: E402

from rff_field.common.machine import machine_description  # noqa: E402
from rff_field.common.outputs import write_json, write_text  # noqa: E402
from rff_field.fit.bench import set_option  # noqa: E402
from rff_field.nerf.evaluate import evaluate_views  # noqa: E402
from rff_field.nerf.methods import rff_nerf_config, rff_nerfacto_config  # noqa: E402
from rff_field.nerf.synthetic_scene import (  # noqa: E402
    CaptureSpec,
    SceneSpec,
    write_blender_scene,
    write_nerfstudio_capture,
)
from rff_field.nerf.training import run_config, set_up_trainer, train_in_process  # noqa: E402

HERE = Path(__file__).resolve().parent
DATA = Path(os.environ.get("RFF_DATA", HERE.parents[2] / "shared" / "data"))
STEPS = 300
"""Equal steps: the issue's command (``--max-num-iterations 300``)."""
TIME_STEPS = 1000
"""Equal CPU time: what rff-nerfacto-lite takes for this many steps (from its STEPS run), for every variant."""
SEED = 42
MARKER = "<!-- The tables below are written by scenes.py --report. -->"


@dataclass
class Scene:
    name: str
    blender: bool
    scale: float
    kind: str
    """What the scene is, for the table."""
    tuned: bool
    """Whether the defaults were chosen looking at it (the others are held out)."""
    source: Optional[Path] = None
    make: Optional[Callable[[Path], Path]] = None


def generated(kind: str) -> Callable[[Path], Path]:
    spec = SceneSpec(kind=kind, image_size=800, num_train_views=100, supersample=1)
    return lambda out: write_blender_scene(out, spec)


BLENDER_KINDS = {
    "thin": "bars under a pixel wide",
    "texture": "a fine checker, stripes",
    "large": "off-centre, near the box's faces",
    "cup": "concave, occluding",
    "objects": "the demo's",
}
SCENES = [
    Scene("chair", True, 0.0625, "NeRF synthetic chair, 800 px", True, source=DATA / "nerf_synthetic" / "chair"),
    *[Scene(kind, True, 0.0625, f"rff-scene blender --kind {kind}, 800 px ({what})", kind in ("thin", "texture",
            "large"), make=generated(kind)) for kind, what in BLENDER_KINDS.items()],
    Scene("capture", False, 1.0, "rff-scene capture, 128 px, 60 views (objects outdoors)", True,
          make=lambda out: write_nerfstudio_capture(out, CaptureSpec(image_size=128, num_views=60))),
    Scene("fruit", False, 0.5, "phone capture, 81 photos 605x806, COLMAP poses with distortion", True,
          source=DATA / "captures" / "fruit"),
]  # fmt: skip
FOX = Scene("fox", False, 0.25, "instant-ngp's fox, 50 phone photos 1080x1920", False)


class OfflineNerfactoModel(NerfactoModel):
    """nerfstudio's nerfacto, built without LPIPS when its AlexNet weights cannot be downloaded (LPIPS is the last
    module nerfacto builds; its score is then NaN and dropped)."""

    def populate_modules(self) -> None:
        try:
            super().populate_modules()
        except OSError:  # the download failed: every module but LPIPS is built
            self.lpips = lambda image, reference: torch.tensor(float("nan"))
            self.step = 0

    def get_image_metrics_and_images(self, outputs, batch):
        metrics, images = super().get_image_metrics_and_images(outputs, batch)
        return {key: value for key, value in metrics.items() if np.isfinite(value)}, images


@dataclass
class OfflineNerfactoModelConfig(NerfactoModelConfig):
    _target: type = OfflineNerfactoModel


def nerfacto_config(scene: Scene, data: Path, output_dir: Path, steps: int):
    """nerfstudio's nerfacto with the lite's rays and samples, torch, on the CPU; on a Blender scene with the flags
    nerfstudio's documentation gives for one."""
    config = copy.deepcopy(method_configs["nerfacto"])
    base = config.pipeline.model
    model = OfflineNerfactoModelConfig(**{name: getattr(base, name) for name in base.__dataclass_fields__
                                          if name != "_target"})  # fmt: skip
    model.implementation, model.num_proposal_samples_per_ray, model.num_nerf_samples_per_ray = "torch", (32, 16), 16
    if scene.blender:
        model.background_color, model.proposal_initial_sampler = "white", "uniform"
        model.near_plane, model.far_plane, model.camera_optimizer.mode = 2.0, 6.0, "off"
        model.use_average_appearance_embedding, model.distortion_loss_mult = False, 0.0
        model.disable_scene_contraction = True
    config.pipeline.model = model
    config.pipeline.datamanager = VanillaDataManagerConfig(
        dataparser=BlenderDataParserConfig() if scene.blender else NerfstudioDataParserConfig(),
        train_num_rays_per_batch=512, eval_num_rays_per_batch=512, camera_res_scale_factor=scene.scale)  # fmt: skip
    config.data = config.pipeline.datamanager.data = data
    config.output_dir, config.experiment_name = output_dir, "nerfacto"
    config.max_num_iterations = config.steps_per_save = steps
    config.machine.device_type, config.machine.seed, config.mixed_precision = "cpu", SEED, False
    config.vis, config.logging.local_writer.enable = "tensorboard", False
    config.steps_per_eval_image = config.steps_per_eval_all_images = config.steps_per_eval_batch = 10**9
    return config


def rff_config(method: str, scene: Scene, data: Path, output_dir: Path, steps: int, options: dict):
    build = rff_nerfacto_config if method.startswith("rff-nerfacto") else rff_nerf_config
    config = run_config(build(lite=True), data, output_dir, steps, experiment_name=method)
    datamanager = config.pipeline.datamanager
    datamanager.dataparser = BlenderDataParserConfig() if scene.blender else NerfstudioDataParserConfig()
    datamanager.camera_res_scale_factor = scene.scale
    config.machine.device_type, config.machine.seed = "cpu", SEED
    config.steps_per_eval_image = config.steps_per_eval_all_images = config.steps_per_eval_batch = 10**9
    for key, value in options.items():
        set_option(config, key, value)
    return config


VARIANTS = {
    "rff-nerfacto-lite": ("rff-nerfacto-lite", {}),
    "unfiltered": ("rff-nerfacto-lite", {"embedding.filtered": False}),
    "rff-nerf-lite": ("rff-nerf-lite", {}),
    "nerfacto": ("nerfacto", {}),
}


def variants_of(scene: Scene) -> list[str]:
    return [name for name in VARIANTS if scene.blender or name != "rff-nerf-lite"]


def train(config, ours: bool):
    """Train ``config`` in this process; returns the trained pipeline and the CPU seconds of its steps."""
    watched = {}

    def on_setup(trainer) -> None:
        watched.update(pipeline=trainer.pipeline, start=time.process_time())

    if ours:
        train_in_process(config, on_setup)
    else:
        config.set_timestamp()
        trainer = set_up_trainer(config)
        on_setup(trainer)
        trainer.train()
    return watched["pipeline"], time.process_time() - watched["start"]


def scene_data(scene: Scene, work: Path) -> Path:
    if scene.source is not None:
        return scene.source
    folder = work / "scenes" / scene.name
    if not (folder / ("transforms_test.json" if scene.blender else "transforms.json")).exists():
        scene.make(folder)
    return folder


def run(scene: Scene, variant: str, budget: str, work: Path) -> Optional[dict]:
    """Train and evaluate one run (skipped when finished); None when its equal-time budget is not known yet."""
    folder = work / "runs" / scene.name / budget / variant
    if (folder / "result.json").exists():
        return json.loads((folder / "result.json").read_text())
    steps = STEPS
    if budget == "time":
        reference, own = (work / "runs" / scene.name / "steps" / name / "result.json" for name in
                          ("rff-nerfacto-lite", variant))  # fmt: skip
        if not (reference.exists() and own.exists()):
            return None
        seconds = json.loads(reference.read_text())["cpu_seconds_per_step"] * TIME_STEPS
        steps = max(1, round(seconds / json.loads(own.read_text())["cpu_seconds_per_step"]))
    data = scene_data(scene, work)
    method, options = VARIANTS[variant]
    ours = method != "nerfacto"
    config = (rff_config(method, scene, data, folder / "nerfstudio", steps, options) if ours
              else nerfacto_config(scene, data, folder / "nerfstudio", steps))  # fmt: skip
    trained, cpu_seconds = train(config, ours)
    pipeline = config.pipeline.setup(device="cpu", test_mode="test")
    pipeline.model.load_state_dict(trained.model.state_dict())
    metrics = evaluate_views(pipeline, folder)
    result = {"scene": scene.name, "variant": variant, "budget": budget, "steps": steps, "cpu_seconds": cpu_seconds,
              "cpu_seconds_per_step": cpu_seconds / steps, "psnr": metrics["mean"]["psnr"],
              "ssim": metrics["mean"]["ssim"], "views": metrics["views"], "options": options}  # fmt: skip
    write_json(folder / "result.json", result)
    return result


def step_timing(work: Path, rounds: int, block: int, warmup: int) -> dict:
    """rff-nerfacto-lite on fruit (full size) and on the chair (1/16), taking turns in blocks of ``block`` steps:
    CPU seconds per step (medians), with each scene's own choices (twice, first and last: the drift), with the
    camera optimiser alike on both, and fruit against fruit whose proposal grids are differentiated by position as
    nerfacto's are (the pose gradient through them)."""
    from nerfstudio.fields.density_fields import HashMLPDensityField

    fruit, chair = (next(scene for scene in SCENES if scene.name == name) for name in ("fruit", "chair"))
    off, on = {"camera_optimizer.mode": "off"}, {"camera_optimizer.mode": "SO3xR3"}
    pairs = {"each scene's defaults": ((fruit, {}), (chair, {})), "camera optimiser off on both": ((fruit, off),
             (chair, off)), "camera optimiser SO3xR3 on both": ((fruit, on), (chair, on)),
             "fruit: proposal grids differentiated by position, against not": ((fruit, {"graded": True}), (fruit, {})),
             "each scene's defaults, again": ((fruit, {}), (chair, {}))}  # fmt: skip
    result = {}
    for label, pair in pairs.items():
        trainers = []
        for scene, options in pair:
            options = dict(options)
            graded = options.pop("graded", False)
            config = rff_config("rff-nerfacto-lite", scene, scene.source, work / "timing", 10**6, options)
            config.pipeline.datamanager.camera_res_scale_factor = 1.0 if scene is fruit else scene.scale
            config.set_timestamp()
            config.prepare()
            trainer = config.setup(local_rank=0, world_size=1)
            trainer.setup()
            model = trainer.pipeline.model
            if graded:  # nerfstudio's density_fn, which keeps the positions' gradient
                model.density_fns = [lambda x, net=net: HashMLPDensityField.density_fn(net, x)
                                     for net in model.proposal_networks]  # fmt: skip
            trainers.append(trainer)
        seconds, steps = [[], []], [0, 0]
        for index in range(warmup // block + rounds):
            for which in (0, 1)[:: 1 if index % 2 else -1]:
                trainer = trainers[which]
                for _ in range(block):
                    step = steps[which]
                    start = time.process_time()
                    for callback in trainer.callbacks:
                        callback.run_callback_at_location(step, TrainingCallbackLocation.BEFORE_TRAIN_ITERATION)
                    trainer.train_iteration(step)
                    for callback in trainer.callbacks:
                        callback.run_callback_at_location(step, TrainingCallbackLocation.AFTER_TRAIN_ITERATION)
                    if index >= warmup // block:
                        seconds[which].append(time.process_time() - start)
                    steps[which] += 1
        first, second = (statistics.median(values) for values in seconds)
        result[label] = {"first": [pair[0][0].name, pair[0][1]], "second": [pair[1][0].name, pair[1][1]],
                         "first_seconds_per_step": first, "second_seconds_per_step": second, "ratio": first / second,
                         "steps_each": len(seconds[0])}  # fmt: skip
        print(label, result[label], flush=True)
    return result


def report(work: Path, scenes: list[Scene]) -> None:
    """scenes.json, scenes.md and the pictures, from the finished runs."""
    rows = []
    for scene in scenes:
        for budget in ("steps", "time"):
            for variant in variants_of(scene):
                path = work / "runs" / scene.name / budget / variant / "result.json"
                if path.exists():
                    rows.append({key: value for key, value in json.loads(path.read_text()).items() if key != "views"})
    timing = work / "timing.json"
    summary = {"machine": machine_description(torch.device("cpu")), "steps": STEPS, "time_steps": TIME_STEPS,
               "seed": SEED, "scenes": {scene.name: {"kind": scene.kind, "blender": scene.blender,
                                                     "scale": scene.scale, "tuned": scene.tuned} for scene in scenes},
               "runs": rows, "timing": json.loads(timing.read_text()) if timing.exists() else None}  # fmt: skip
    write_json(HERE / "scenes.json", summary)
    lines = ["| scene | held out | " + " | ".join(f"{v} PSNR / SSIM / s/step" for v in VARIANTS) + " |",
             "|---|---|" + "---|" * len(VARIANTS)]  # fmt: skip
    tables = []
    for budget, title in (("steps", f"Equal steps ({STEPS})"), ("time", "Equal CPU time")):
        table = [f"### {title}", "", *lines]
        for scene in scenes:
            cells = []
            for variant in VARIANTS:
                row = next((r for r in rows if (r["scene"], r["budget"], r["variant"]) ==
                            (scene.name, budget, variant)), None)  # fmt: skip
                steps = f" ({row['steps']} steps)" if row is not None and budget == "time" else ""
                cell = (
                    "–" if row is None else f"{row['psnr']:.2f} / {row['ssim']:.3f} / {row['cpu_seconds_per_step']:.3f}"
                )
                cells.append(cell + steps)
            table.append(f"| {scene.name} | {'' if scene.tuned else 'yes'} | " + " | ".join(cells) + " |")
        tables.append("\n".join(table))
    if summary["timing"] is not None:
        timing_rows = [
            f"| {label} | {t['first'][0]} {t['first_seconds_per_step']:.3f} | {t['second'][0]} "
            f"{t['second_seconds_per_step']:.3f} | {t['ratio']:.2f} |"
            for label, t in summary["timing"].items()
        ]
        tables.append("\n".join(["### A step of rff-nerfacto-lite, side by side (CPU s/step, medians)", "",
                                  "| what | first | second | ratio |", "|---|---|---|---|", *timing_rows]))  # fmt: skip
    report_path = HERE / "scenes.md"
    prose = report_path.read_text().split(MARKER)[0] if report_path.exists() else "# The scene suite\n\n"
    write_text(report_path, prose + MARKER + "\n\n" + "\n\n".join(tables) + "\n")
    print("\n\n".join(tables))
    for scene in scenes:
        picture(work, scene)


def picture(work: Path, scene: Scene) -> None:
    """Ground truth | rff-nerfacto-lite | nerfacto on the scene's first held-out view, at equal CPU time."""
    from PIL import Image

    runs = work / "runs" / scene.name / "time"
    folders = [runs / variant / "renders" for variant in ("rff-nerfacto-lite", "nerfacto")]
    if not all(folder.is_dir() for folder in folders):
        return
    view = sorted(path.name[: -len("_gt.png")] for path in folders[0].glob("*_gt.png"))[0]
    images = [Image.open(folders[0] / f"{view}_gt.png")] + [Image.open(f / f"{view}_rgb.png") for f in folders]
    width, height = images[0].size
    size = (round(width * 200 / height), 200)  # small renders enlarged pixel by pixel, photos shrunk
    canvas = Image.new("RGB", (3 * size[0], size[1]))
    for index, image in enumerate(images):
        image = image.convert("RGB").resize(size, Image.NEAREST if height < 200 else Image.LANCZOS)
        canvas.paste(image, (index * size[0], 0))
    canvas.save(HERE / f"scenes_{scene.name}.png", optimize=True)


def main() -> None:
    global STEPS, TIME_STEPS
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("outputs/scenes"))
    parser.add_argument("--scenes", nargs="*", default=None, help="names of the scenes to run (default: all)")
    parser.add_argument("--fox", type=Path, default=None, help="instant-ngp's data/nerf/fox folder, held out")
    parser.add_argument("--shard", default="1/1", help="I/N: scenes I, I+N, ...")
    parser.add_argument("--timing", action="store_true", help="only the side-by-side step time (timing.json)")
    parser.add_argument("--report", action="store_true", help="only the tables and pictures of finished runs")
    parser.add_argument("--steps", type=int, default=STEPS, help="equal steps (a quick check: a few)")
    parser.add_argument("--time-steps", type=int, default=TIME_STEPS, help="equal CPU time: rff-nerfacto-lite's steps")
    args = parser.parse_args()
    STEPS, TIME_STEPS = args.steps, args.time_steps
    torch.set_num_threads(1)
    scenes = SCENES + ([Scene(**{**FOX.__dict__, "source": args.fox})] if args.fox else [])
    if args.scenes:
        scenes = [scene for scene in scenes if scene.name in args.scenes]
    if args.timing:
        write_json(args.work / "timing.json", step_timing(args.work, rounds=20, block=10, warmup=50))
        return
    if not args.report:
        index, count = (int(part) for part in args.shard.split("/"))
        for scene in scenes[index - 1 :: count]:
            for budget in ("steps", "time"):
                for variant in variants_of(scene):
                    result = run(scene, variant, budget, args.work)
                    if result is not None:
                        print(f"{scene.name} {budget} {variant}: {result['psnr']:.2f} dB, {result['steps']} steps, "
                              f"{result['cpu_seconds_per_step']:.3f} s/step", flush=True)  # fmt: skip
    report(args.work, scenes)


if __name__ == "__main__":
    main()
