"""The NeRF benchmark: nerfstudio methods and their variants trained on one scene, evaluated on its test views.

A variant is ``[LABEL:]METHOD[,key=value...]`` (:mod:`rff_field.bench.variants`): a nerfstudio method (this
package's ``rff-nerf``, ``rff-nerfacto`` and their ``-lite`` sizes, or any method nerfstudio knows, e.g. ``nerfacto``)
and overrides of its trainer config, found by name (``use_filter=false``, ``base_mlp_layer_width=140``) or by dotted
path (``pipeline.model.line_search.enabled``). The data parser follows the scene's layout (``blender-data`` for
``transforms_train.json``, ``nerfstudio-data`` for ``transforms.json``) whatever the method's default. Each variant
is a job (``runs/<label>/metrics.json``, renders): trained in this process with the same seed and data for
``steps`` steps or ``seconds`` of wall time, whichever ends first, then evaluated on every test view (PSNR, SSIM,
LPIPS when its weights load, and rays per second of the test renderings).
``timing`` measures seconds per step with the variants' trainers alternating in one process (equal conditions);
``report`` writes results.json, results.md and a figure of test views.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Annotated, Literal, Optional

import torch

from rff_field.bench.jobs import (
    Job,
    JobOptions,
    check_no_failures,
    claim_benchmark_folder,
    is_finished,
    job_table,
    print_jobs,
    run_jobs,
    selected,
    write_result,
)
from rff_field.bench.variants import Variant, parse_variant, set_options
from rff_field.common.datasets import DATA_ROOT
from rff_field.common.machine import machine_description, missing_accelerator
from rff_field.common.options import Flat, Hidden
from rff_field.common.outputs import (
    check_output_files,
    check_plain_name,
    check_writable_folder,
    new_figure,
    save_figure,
    write_json,
    write_text,
)
from rff_field.common.stopping import FitInterrupted
from rff_field.common.torch_state import restores_torch_state
from rff_field.core.errors import UsageError, check_fields

NERF_OWN_FILES = ("runs", "nerfstudio", "timing-*.json", "eval-timing.json", "results.*", "*.png")
"""What the NeRF benchmark's commands write in its folder (a folder of before ``bench.json`` holds these)."""

DEFAULT_VARIANTS = ("baseline:rff-nerf-lite,use_filter=false", "filter:rff-nerf-lite")
"""The filter switched off (the MLP+PE baseline) and on, everything else equal."""


@dataclass
class NerfBenchConfig:
    """Variants of nerfstudio methods trained on one scene with one protocol, each a resumable job."""

    data: Path = DATA_ROOT / "nerf_synthetic" / "chair"
    """The scene (a Blender-format folder, or whatever the methods' data parsers read); the default lies under
    $RFF_DATA when that is set."""
    out: Path = Path("outputs/bench-nerf")
    """Output folder: ``runs/<label>/`` per variant, ``timing-<first method>.json`` (nerf-timing), and the
    nerfstudio runs."""
    variants: tuple[str, ...] = DEFAULT_VARIANTS
    """Variants ``[LABEL:]METHOD[,key=value...]``; the first is the reference of the report's differences."""
    steps: int = 2000
    """Training steps of every variant."""
    seconds: Optional[float] = None
    """Time budget of every training (stops at the step that exceeds it): compare at equal time."""
    clock: Literal["wall", "cpu"] = "wall"
    """What ``seconds`` counts: wall time, or the CPU time of the training process and its children (data-loading
    workers). On a core shared with other jobs their load stretches wall time, not CPU time."""
    scale: float = 0.125
    """``camera-res-scale-factor`` (0.125: 100x100 for the 800x800 synthetic scenes)."""
    seed: int = 42
    """Training seed, the same for every variant."""
    device: Literal["cpu", "cuda"] = "cpu"
    """Where to train."""
    eval_views: Optional[int] = None
    """Evaluate this many test views, evenly spaced (None: all of them)."""
    jobs: Annotated[JobOptions, Flat] = field(default_factory=JobOptions)
    """Which variants to run, and how."""

    def check(self) -> list[Variant]:
        """The parsed variants; raise :class:`UsageError` for options that cannot work."""
        if not self.data.is_dir():
            what = "is not a folder" if self.data.exists() else "does not exist"
            raise UsageError(f"--data {self.data} {what}; pass a scene folder")
        check_fields(self, positive=("scale",))
        from rff_field.nerf.checks import check_seed

        check_seed(self.seed, "--seed")  # nerfstudio's own methods (baselines) are not checked below
        if self.steps < 1:
            raise UsageError(f"--steps must be at least 1, got {self.steps}")
        if self.seconds is not None and not self.seconds > 0:
            raise UsageError(f"--seconds must be positive, got {self.seconds}")
        if self.eval_views is not None and self.eval_views < 1:
            raise UsageError(f"--eval-views must be at least 1, got {self.eval_views}")
        if missing_accelerator(torch.device(self.device)) is not None:
            raise UsageError("--device cuda was asked for but CUDA is not available; use --device cpu")
        variants = [parse_variant(text) for text in self.variants]
        if not variants:
            raise UsageError("--variants is empty; give at least one variant, e.g. rff-nerf-lite")
        labels = [variant.label for variant in variants]
        if len(set(labels)) != len(labels):
            raise UsageError(f"two variants share a label in {labels}; give them distinct LABEL: prefixes")
        from nerfstudio.data.dataparsers.blender_dataparser import BlenderDataParserConfig

        from rff_field.nerf.checks import check_dataset, check_scaled_image_size
        from rff_field.nerf.pipeline import RFFTrainerConfig

        if any((self.data / name).exists() for name in ("transforms_train.json", "transforms.json")):
            image = check_dataset(dataparser_for(self.data, BlenderDataParserConfig()), "test", self.data)
            if image is not None:  # every variant's parser follows the layout, and is scaled by --scale
                check_scaled_image_size(image, self.scale, "--scale")

        for variant in variants:  # unknown methods and options fail now, before any training or run folder
            try:
                config = trainer_config(self, variant, self.out)
                if isinstance(config, RFFTrainerConfig):
                    config.check()
            except UsageError as err:
                raise UsageError(f"variant {variant.label!r}: {err}") from None
        return variants

    def main(self) -> None:
        """Run the pending variants."""
        variants = self.check()
        check_writable_folder(self.out, "--out")
        jobs = [Job(i, Path("runs") / v.label, v, self.data.name, iters=self.steps) for i, v in enumerate(variants)]
        self.jobs.check(jobs)
        if self.jobs.list_jobs:
            print_jobs(jobs, self.out)
            return
        own = {"seconds": self.seconds, "clock": self.clock, "seed": self.seed, "eval_views": self.eval_views}
        table = {folder: {**job, **own} for folder, job in job_table(jobs).items()}  # variants may differ in these
        protocol = {"data": str(self.data.resolve()), "scale": self.scale, "jobs": table}
        claim_benchmark_folder(self.out, "nerf", protocol, self.jobs.overwrite, ("runs/*",), own_files=NERF_OWN_FILES)
        report = run_jobs(selected(jobs, self.jobs), self.out, partial(run_nerf_job, self), self.jobs)
        if report.budget_reached:
            print(f"time budget of {self.jobs.budget_s:g} s reached; rerun the same command to go on")
        done = sum(is_finished(self.out, job) for job in jobs)
        print(f"{done} of {len(jobs)} variants done in {self.out / 'runs'}")
        check_no_failures(report)


def base_config(method: str):
    """The ``TrainerConfig`` of a nerfstudio method (this package's methods without nerfstudio's registry)."""
    from rff_field.nerf import method_configs

    specs = (method_configs.rff_nerf, method_configs.rff_nerf_lite, method_configs.rff_nerfacto,
             method_configs.rff_nerfacto_lite)  # fmt: skip
    ours = {spec.config.method_name: spec.config for spec in specs}
    if method in ours:
        return ours[method]
    from nerfstudio.configs.method_configs import all_methods

    if method not in all_methods:
        raise UsageError(f"unknown nerfstudio method {method!r}; choose one of {', '.join(sorted(all_methods))}")
    return all_methods[method]


def trainer_config(bench: NerfBenchConfig, variant: Variant, out: Path):
    """The trainer config of one variant: its method for ``bench.data``, seeded, no viewer, overrides applied."""
    from rff_field.nerf.training import lite_config

    config = lite_config(bench.data, out / "nerfstudio", bench.steps, experiment_name=variant.label,
                         device_type=bench.device, base=base_config(variant.method))  # fmt: skip
    config.machine.seed = bench.seed
    config.pipeline.datamanager.dataparser = dataparser_for(bench.data, config.pipeline.datamanager.dataparser)
    config.pipeline.datamanager.camera_res_scale_factor = bench.scale
    config.steps_per_eval_image = config.steps_per_eval_all_images = 10**9
    config.steps_per_eval_batch = 500
    set_options([config], {k: v for k, v in variant.overrides.items() if k != "method"})
    return config


def cpu_seconds() -> float:
    """CPU time (user and system) of this process and of its live children (e.g. nerfstudio's data workers)."""
    import psutil

    process = psutil.Process()
    total = sum(process.cpu_times()[:2])
    for child in process.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.NoSuchProcess:  # ended meanwhile
            pass
    return total


def dataparser_for(data: Path, parser):
    """``parser``, or the parser that reads ``data``'s layout when ``parser`` would not (Blender-format scenes and
    nerfstudio datasets; other layouts keep ``parser``)."""
    from nerfstudio.data.dataparsers.blender_dataparser import BlenderDataParserConfig
    from nerfstudio.data.dataparsers.nerfstudio_dataparser import NerfstudioDataParserConfig

    if (data / "transforms_train.json").exists() and not isinstance(parser, BlenderDataParserConfig):
        return BlenderDataParserConfig()
    if (data / "transforms.json").exists() and not isinstance(parser, NerfstudioDataParserConfig):
        return NerfstudioDataParserConfig()
    return parser


def _filter_parameter_counts(model: torch.nn.Module) -> tuple[int, int]:
    from rff_field.core.filter import split_filter_parameters

    filter_params, others = split_filter_parameters(model)
    return sum(p.numel() for p in others), sum(p.numel() for p in filter_params)


def run_nerf_job(bench: NerfBenchConfig, job: Job) -> dict:
    """Train one variant (timing every step, stopping at the step or time budget), evaluate it, write its folder."""
    from nerfstudio.engine.callbacks import TrainingCallback, TrainingCallbackLocation

    from rff_field.nerf.evaluate import evaluate_views
    from rff_field.nerf.loading import load_rff_pipeline
    from rff_field.nerf.lpips import lpips_or_nan
    from rff_field.nerf.training import quiet_known_warnings, train_in_process

    quiet_known_warnings()
    config = trainer_config(bench, job.variant, bench.out)
    step_times: list[float] = []
    watched: dict = {}

    clock = cpu_seconds if bench.clock == "cpu" else time.perf_counter

    def watch(trainer) -> None:
        watched["start"] = clock()

        def before(step: int) -> None:
            watched["t"] = time.perf_counter()

        def after(step: int) -> None:
            step_times.append(time.perf_counter() - watched["t"])
            if bench.seconds is not None and clock() - watched["start"] > bench.seconds:
                trainer.stop_training = True
            if step % 100 == 0:
                print(f"[{job.variant.label}] step {step}/{bench.steps}: {step_times[-1]:.3f} s", flush=True)

        trainer.callbacks.insert(0, TrainingCallback([TrainingCallbackLocation.BEFORE_TRAIN_ITERATION], before))
        trainer.callbacks.append(TrainingCallback([TrainingCallbackLocation.AFTER_TRAIN_ITERATION], after))
        watched["model"] = trainer.pipeline.model

    start, start_cpu = time.perf_counter(), cpu_seconds()
    with lpips_or_nan():  # nerfstudio's own models build LPIPS at once, which needs a download
        try:
            config_path = train_in_process(config, on_setup=watch)
        except FitInterrupted as err:
            where = f"{err.where} of variant {job.variant.label}"
            left = f"its partial nerfstudio run stays in {config.get_base_dir()}"
            raise FitInterrupted(f"{where}; the same command starts that variant over ({left})") from None
    train_seconds, train_cpu_seconds = time.perf_counter() - start, cpu_seconds() - start_cpu
    model = watched["model"]
    inr_params, filter_params = _filter_parameter_counts(model)
    search = getattr(model, "line_search", None)
    history = list(search.history) if search is not None else []
    bounds = getattr(model.config, "line_search", None)

    folder = bench.out / job.folder
    with lpips_or_nan():
        _, pipeline, _, _ = load_rff_pipeline(config_path, test_mode="test", any_method=True)
        metrics = evaluate_views(pipeline, folder, progress=False, max_views=bench.eval_views)
    for scores in (metrics["mean"], *metrics["views"]):  # nerfstudio's vanilla-nerf: fine_ssim, fine_lpips
        for name in ("ssim", "lpips"):
            if name not in scores and f"fine_{name}" in scores:
                scores[name] = scores[f"fine_{name}"]
    steady = step_times[10:] or step_times
    result = {
        "label": job.variant.label,
        "variant": job.variant.spec,
        "method": job.variant.method,
        "data": str(bench.data),
        "scale": bench.scale,
        "steps": len(step_times),
        "seconds_budget": bench.seconds,
        "seed": bench.seed,
        "device": bench.device,
        "machine": machine_description(torch.device(bench.device)),
        "params_inr": inr_params,
        "params_filter": filter_params,
        "train_seconds": train_seconds,
        "train_cpu_seconds": train_cpu_seconds,
        "clock": bench.clock,
        "seconds_per_step_mean": statistics.fmean(steady),
        "seconds_per_step_median": statistics.median(steady),
        "test": metrics["mean"],
        "test_views": metrics["views"],
        "eval_rays_per_second": sum(v["rays"] for v in metrics["views"])
        / sum(v["render_seconds"] for v in metrics["views"]),
        "filter_lr": {
            "steps": len(history),
            "at_upper_bound": sum(lr >= bounds.lr_max for lr in history) / len(history) if history else None,
            "at_lower_bound": sum(lr <= bounds.lr_min for lr in history) / len(history) if history else None,
            "median": statistics.median(history) if history else None,
            "last": history[-1] if history else None,
        },
        "config": str(config_path),
    }
    write_result(folder, result)
    print(json.dumps({k: result[k] for k in ("label", "steps", "test", "seconds_per_step_median")}, indent=1))
    return result


def taking_turns(labels: list[str], round_index: int) -> list[str]:
    """The order in which timed variants run in a round: as given in even rounds, reversed in odd ones, so that none
    always runs first (right after the warm-up, or after the same neighbour)."""
    return labels if round_index % 2 == 0 else labels[::-1]


@dataclass
class NerfTimingConfig(NerfBenchConfig):
    """The scene and variants of a timing; the training budget and the job options do not apply."""

    steps: Annotated[int, Hidden] = 2000
    seconds: Annotated[Optional[float], Hidden] = None
    clock: Annotated[Literal["wall", "cpu"], Hidden] = "wall"
    eval_views: Annotated[Optional[int], Hidden] = None
    jobs: Annotated[JobOptions, Hidden] = field(default_factory=JobOptions)


@dataclass
class NerfTiming:
    """Seconds per training step of the variants, measured with their trainers alternating in one process: blocks
    of steps take turns, so every variant sees the same load (the fair per-step cost ratio)."""

    bench: Annotated[NerfTimingConfig, Flat] = field(default_factory=NerfTimingConfig)
    """The variants and the scene."""
    rounds: int = 10
    """Alternations (each variant runs one block per round)."""
    block: int = 10
    """Steps per block."""
    warmup: int = 5
    """Untimed steps per variant first."""
    overwrite: bool = False
    """Replace the ``timing-<first method>.json`` of an earlier measurement in --out."""

    def main(self) -> dict:
        """Measure and write ``timing-<first method>.json``; returns the result."""
        from rff_field.nerf.training import quiet_known_warnings, reset_nerfstudio_logging

        variants = self.bench.check()
        check_fields(self, positive_int=("rounds", "block"), non_negative_int=("warmup",))
        name = f"timing-{variants[0].method}.json"
        check_output_files(self.bench.out, (name,), self.overwrite, "--out")
        quiet_known_warnings()
        trainers = {}
        for variant in variants:
            reset_nerfstudio_logging()
            config = trainer_config(self.bench, variant, self.bench.out / "timing-runs")
            config.max_num_iterations = 10**6
            config.set_timestamp()
            trainer = config.setup(local_rank=0, world_size=1)
            trainer.setup()
            trainers[variant.label] = trainer
        steps = dict.fromkeys(trainers, 0)
        times: dict[str, list[float]] = {label: [] for label in trainers}

        def run(label: str, count: int, record: bool) -> None:
            trainer = trainers[label]
            trainer.pipeline.train()
            for _ in range(count):
                if self.bench.device == "cuda":
                    torch.cuda.synchronize()
                start = time.perf_counter()
                trainer.train_iteration(steps[label])
                if self.bench.device == "cuda":
                    torch.cuda.synchronize()
                if record:
                    times[label].append(time.perf_counter() - start)
                steps[label] += 1

        for label in trainers:
            run(label, self.warmup, record=False)
        labels = list(trainers)
        for index in range(self.rounds):
            for label in taking_turns(labels, index):
                run(label, self.block, record=True)
        reference = labels[0]
        result = {
            "method": variants[0].method,
            "variants": {v.label: v.spec for v in variants},
            "scale": self.bench.scale,
            "machine": machine_description(torch.device(self.bench.device)),
            "steps_per_variant": self.rounds * self.block,
            "seconds_per_step_median": {label: statistics.median(t) for label, t in times.items()},
            "seconds_per_step_mean": {label: statistics.fmean(t) for label, t in times.items()},
        }
        result["ratio_median"] = {
            label: result["seconds_per_step_median"][label] / result["seconds_per_step_median"][reference]
            for label in labels
        }
        self.bench.out.mkdir(parents=True, exist_ok=True)
        write_text(self.bench.out / name, json.dumps(result, indent=1) + "\n")
        print(json.dumps(result, indent=1))
        return result


@dataclass
class NerfEvalTiming:
    """Rays per second of finished variants rendering test views, side by side: the trained models take turns
    rendering the same views in one process, so that they all see the same machine load (the fair speed ratio)."""

    out: Path = Path("outputs/bench-nerf")
    """The benchmark's output folder (its finished variants are loaded)."""
    labels: tuple[str, ...] = ()
    """Variants to time (default: every finished one); the first is the reference of the ratios."""
    views: int = 2
    """Test views rendered per round, evenly spaced."""
    rounds: int = 3
    """Rounds (each model renders the views once per round, in alternating order)."""
    overwrite: bool = False
    """Replace the eval-timing.json of an earlier run in --out."""

    def main(self) -> dict:
        """Measure and write ``eval-timing.json``; returns the result."""
        from rff_field.nerf.evaluate import evenly_spaced, synchronize
        from rff_field.nerf.loading import load_rff_pipeline
        from rff_field.nerf.lpips import lpips_or_nan
        from rff_field.nerf.training import quiet_known_warnings

        check_fields(self, positive_int=("views", "rounds"))
        check_output_files(self.out, ("eval-timing.json",), self.overwrite, "--out")

        finished = {p.parent.name: json.loads(p.read_text()) for p in (self.out / "runs").glob("*/metrics.json")}
        labels = list(self.labels) or sorted(finished)
        missing = [label for label in labels if label not in finished]
        if missing or not labels:
            which = f" {', '.join(missing)}" if missing else "s"
            raise UsageError(f"no finished variant{which} under {self.out / 'runs'}; run `rff-bench nerf` first")
        if self.views < 1 or self.rounds < 1:
            raise UsageError(f"--views and --rounds must be at least 1, got {self.views} and {self.rounds}")
        quiet_known_warnings()
        models, cameras = {}, {}
        with lpips_or_nan():
            for label in labels:
                _, pipeline, model, _ = load_rff_pipeline(Path(finished[label]["config"]), "test", any_method=True)
                all_cameras = pipeline.datamanager.eval_dataset.cameras
                picks = evenly_spaced(len(all_cameras), self.views)
                models[label], cameras[label] = model, [all_cameras[i : i + 1] for i in picks]
        seconds: dict[str, list[float]] = {label: [] for label in labels}
        rays = {label: sum(int(c.width * c.height) for c in cameras[label]) for label in labels}
        with torch.no_grad():
            for index in range(self.rounds):
                for label in taking_turns(labels, index):
                    model = models[label]
                    synchronize(model.device)
                    start = time.perf_counter()
                    for camera in cameras[label]:
                        model.get_outputs_for_camera(camera)
                    synchronize(model.device)
                    seconds[label].append(time.perf_counter() - start)
        speed = {label: rays[label] / statistics.median(seconds[label]) for label in labels}
        result = {
            "machine": machine_description(next(iter(models.values())).device),
            "views": len(picks),
            "rounds": self.rounds,
            "rays_per_second_median": speed,
            "ratio_to_first": {label: speed[label] / speed[labels[0]] for label in labels},
        }
        write_json(self.out / "eval-timing.json", result)
        print(json.dumps(result, indent=1))
        return result


@dataclass
class HashGridTiming:
    """The proposal networks' hash grid on torch: nerfstudio's ``HashEncoding`` and this package's
    ``TorchHashEncoding`` (the same table and outputs) taking turns on the same points, forward alone (rendering)
    and forward plus backward (training)."""

    dest: Path = Path("benchmarks/nerf")
    """Folder for hash_grid.json and hash_grid.md."""
    points: int = 131072
    """Positions per pass (4096 rays of 32 proposal samples: rff-nerfacto-lite's first proposal network)."""
    levels: int = 5
    """Grid levels (rff-nerfacto-lite's proposal networks: 5, 2**15 entries each, 2 features)."""
    log2_hashmap_size: int = 15
    """Entries per level, as a power of two."""
    rounds: int = 7
    """Counted rounds (one more warms up first); each times both encodings."""
    overwrite: bool = False
    """Replace hash_grid.json and hash_grid.md of an earlier run in --dest."""

    @restores_torch_state
    def main(self) -> dict:
        """Measure and write the table; returns the result."""
        from nerfstudio.field_components.encodings import HashEncoding

        from rff_field.nerf.hash_grid import TorchHashEncoding

        check_fields(self, positive_int=("points", "levels", "log2_hashmap_size", "rounds"))
        if self.log2_hashmap_size > 30:
            raise UsageError(
                f"--log2-hashmap-size {self.log2_hashmap_size} asks for over 2^30 entries per level; use 30 or less"
            )
        check_output_files(self.dest, ("hash_grid.json", "hash_grid.md"), self.overwrite, "--dest")
        torch.default_generator.manual_seed(0)  # restored after main: a caller's randomness is kept
        args = dict(num_levels=self.levels, min_res=16, max_res=64,
                    log2_hashmap_size=self.log2_hashmap_size, implementation="torch")  # fmt: skip
        encodings = {"nerfstudio": HashEncoding(**args), "rff_field": TorchHashEncoding(**args)}
        encodings["rff_field"].load_state_dict(encodings["nerfstudio"].state_dict())
        x = torch.rand(self.points, 3)

        def forward(encoding) -> None:
            with torch.no_grad():
                encoding(x)

        def forward_backward(encoding) -> None:
            encoding.hash_table.grad = None
            encoding(x).sum().backward()

        seconds: dict = {(pass_, name): [] for pass_ in ("forward", "forward+backward") for name in encodings}
        for index in range(self.rounds + 1):  # the first round warms up
            for pass_, run in (("forward", forward), ("forward+backward", forward_backward)):
                for name in taking_turns(list(encodings), index):
                    start = time.perf_counter()
                    run(encodings[name])
                    if index:
                        seconds[pass_, name].append(time.perf_counter() - start)
        machine = machine_description(torch.device("cpu"))
        rows = []
        for pass_ in ("forward", "forward+backward"):
            ours, theirs = (1e3 * statistics.median(seconds[pass_, name]) for name in ("rff_field", "nerfstudio"))
            rows.append({"pass": pass_, "nerfstudio_ms": theirs, "rff_field_ms": ours, "speedup": theirs / ours})
        result = {"machine": machine, "points": self.points, "levels": self.levels,
                  "log2_hashmap_size": self.log2_hashmap_size, "rounds": self.rounds, "rows": rows}  # fmt: skip
        self.dest.mkdir(parents=True, exist_ok=True)
        write_json(self.dest / "hash_grid.json", result)
        lines = [
            "# The proposal networks' hash grid on torch: nerfstudio's and rff_field's",
            "",
            f"{self.points:,} positions, {self.levels} levels of 2^{self.log2_hashmap_size} entries, 2 features; "
            f"machine: {machine}. Median of {self.rounds} rounds, the two taking turns. Written by "
            "`rff-bench hash-grid-timing`.",
            "",
            "| pass | nerfstudio (ms) | rff_field (ms) | speed-up |",
            "|---|---:|---:|---:|",
        ]
        lines += [f"| {r['pass']} | {r['nerfstudio_ms']:.1f} | {r['rff_field_ms']:.1f} | {r['speedup']:.2f}x |"
                  for r in rows]  # fmt: skip
        write_text(self.dest / "hash_grid.md", "\n".join(lines) + "\n")
        print("\n".join(lines))
        return result


_REGISTRY_IMPORT = """
import sys, time
start = time.perf_counter()
import nerfstudio.plugins.registry as registry
discover = registry.discover_methods
def discover_with_nerfstudios_check():
    found = discover()  # loads this plugin, which speeds up the listing; undone here
    from nerfstudio.configs.external_methods import ExternalMethodDummyTrainerConfig as Dummy
    Dummy.__post_init__ = getattr(Dummy.__post_init__, "__wrapped__", Dummy.__post_init__)
    return found
if sys.argv[1] == "nerfstudio":
    registry.discover_methods = discover_with_nerfstudios_check
import nerfstudio.configs.method_configs
print(time.perf_counter() - start)
"""


@dataclass
class StartupTiming:
    """Seconds every ``ns-*`` command spends importing nerfstudio's method registry (the plugins and the list of
    external methods) before it does anything else, with this plugin's check of the external methods
    (:mod:`rff_field.nerf.startup`) and with nerfstudio's own ``inspect.stack`` walk; fresh processes taking
    turns."""

    dest: Path = Path("benchmarks/nerf")
    """Folder for startup.json and startup.md."""
    rounds: int = 5
    """Counted rounds (one more warms the file cache up first); each starts one process of each kind."""
    overwrite: bool = False
    """Replace startup.json and startup.md of an earlier run in --dest."""

    def main(self) -> dict:
        """Measure and write the table; returns the result."""
        import subprocess
        import sys

        from rff_field.common.progress import LoggedProgress

        check_fields(self, positive_int=("rounds",))
        check_output_files(self.dest, ("startup.json", "startup.md"), self.overwrite, "--dest")
        kinds = ["nerfstudio", "rff_field"]
        seconds: dict[str, list[float]] = {kind: [] for kind in kinds}
        with LoggedProgress() as bar:
            task = bar.add_task("fresh processes", total=2 * (self.rounds + 1))
            for index in range(self.rounds + 1):
                for kind in taking_turns(kinds, index):
                    done = subprocess.run([sys.executable, "-c", _REGISTRY_IMPORT, kind], capture_output=True,
                                          text=True, check=True)  # fmt: skip
                    if index:
                        seconds[kind].append(float(done.stdout.split()[-1]))
                    bar.advance(task)
        machine = machine_description(torch.device("cpu"))
        medians = {kind: statistics.median(seconds[kind]) for kind in kinds}
        result = {"machine": machine, "rounds": self.rounds, "seconds": seconds, "median_s": medians,
                  "saved_s": medians["nerfstudio"] - medians["rff_field"]}  # fmt: skip
        self.dest.mkdir(parents=True, exist_ok=True)
        write_json(self.dest / "startup.json", result)
        lines = [
            "# Start of every ns-* command: nerfstudio's method registry",
            "",
            "Seconds to import `nerfstudio.configs.method_configs` (nerfstudio's methods, the plugins, the list of "
            "external methods it offers to install) in a fresh process, which `ns-train`, `ns-eval`, `ns-render`, "
            "`ns-viewer` and `ns-export` do before anything else; with nerfstudio's own check of each external "
            "method (`inspect.stack()`) and with the plugin's (`sys._getframe`, `rff_field/nerf/startup.py`). "
            f"Machine: {machine}. Median of {self.rounds} rounds, the two taking turns. Written by "
            "`rff-bench startup-timing`.",
            "",
            "| check of the external methods | seconds |",
            "|---|---:|",
            f"| nerfstudio's `inspect.stack()` | {medians['nerfstudio']:.1f} |",
            f"| rff_field's `sys._getframe(2)` | {medians['rff_field']:.1f} |",
            f"| saved per command | {result['saved_s']:.1f} |",
        ]
        write_text(self.dest / "startup.md", "\n".join(lines) + "\n")
        print("\n".join(lines))
        return result


@dataclass
class NerfReport:
    """Collect the finished variants (and timings) of a NeRF benchmark into results.json, results.md and a PNG."""

    out: Path = Path("outputs/bench-nerf")
    """The benchmark's output folder."""
    dest: Path = Path("benchmarks/nerf")
    """Where to write NAME.json, NAME.md and NAME_views.png."""
    name: str = "results"
    """Stem of the report's files (``results``: results.json, results.md, test_views.png as before)."""
    title: str = "NeRF benchmark"
    """Heading of results.md."""
    how: str = ""
    """How the numbers were measured (a paragraph for results.md)."""
    views: tuple[str, ...] = ("r_0", "r_64", "r_128")
    """Test views shown in the PNG (those that exist)."""

    overwrite: bool = False
    """Replace the report's files already in --dest."""

    def main(self) -> None:
        """Write the report."""
        check_plain_name(self.name, "--name")
        written = (f"{self.name}.json", f"{self.name}.md", self.figure_name)
        check_output_files(self.dest, written, self.overwrite, "--dest")
        if not self.out.is_dir():
            raise UsageError(f"--out {self.out} does not exist; give the folder of an `rff-bench nerf` run")
        paths = sorted((self.out / "runs").glob("*/metrics.json"), key=lambda p: p.stat().st_mtime)
        if not paths:
            raise UsageError(f"no finished variants under {self.out / 'runs'}; run `rff-bench nerf` first")
        runs = [json.loads(path.read_text()) for path in paths]
        timings = [json.loads(p.read_text()) for p in sorted(self.out.glob("timing-*.json"))]
        eval_timing_path = self.out / "eval-timing.json"
        eval_timing = json.loads(eval_timing_path.read_text()) if eval_timing_path.exists() else None
        self.dest.mkdir(parents=True, exist_ok=True)
        summary = {
            "machine": runs[0]["machine"],
            "variants": {r["label"]: {k: v for k, v in r.items() if k not in ("test_views", "config")} for r in runs},
            "per_view": {r["label"]: r["test_views"] for r in runs},
            "timing_interleaved": timings,
            "eval_timing_interleaved": eval_timing,
            "how_measured": self.how,
        }
        write_text(self.dest / f"{self.name}.json", json.dumps(summary, indent=1) + "\n")
        write_text(self.dest / f"{self.name}.md", self.markdown(runs, timings, eval_timing))
        self.figure(runs)
        print("wrote " + ", ".join(str(self.dest / name) for name in written))

    @property
    def figure_name(self) -> str:
        """The figure's file name."""
        return "test_views.png" if self.name == "results" else f"{self.name}_views.png"

    def markdown(self, runs: list[dict], timings: list[dict], eval_timing: Optional[dict] = None) -> str:
        """results.md: one row per variant, differences to the first, timings, filter rates."""
        first = runs[0]
        lines = [
            f"# {self.title}",
            "",
            f"Data `{Path(first['data']).name}`, camera-res-scale-factor {first['scale']}, seed {first['seed']}, "
            f"device {first['device']}; machine: {first['machine']}. Test views: {len(first['test_views'])}.",
            "",
            "| variant | spec | steps | train s | test PSNR (dB) | test SSIM | test views | INR params | filter params "
            "| s/step (own run) | test rays/s (own run) |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in runs:
            rays = r.get("eval_rays_per_second")
            lines.append(
                f"| {r['label']} | `{r['variant']}` | {r['steps']} | {r['train_seconds']:.0f} | "
                f"{r['test']['psnr']:.2f} | {r['test']['ssim']:.4f} | {len(r['test_views'])} | {r['params_inr']:,} | "
                f"{r['params_filter']:,} | {r['seconds_per_step_median']:.3f} | "
                f"{'' if rays is None else f'{rays:,.0f}'} |"
            )
        first_views = {v["view"]: v for v in first["test_views"]}
        for r in runs[1:]:
            # a variant evaluated on fewer views (--eval-views) is compared on the views both rendered
            pairs = [(v, first_views[v["view"]]) for v in r["test_views"] if v["view"] in first_views]
            wins = sum(a["psnr"] > b["psnr"] for a, b in pairs)
            psnr, ssim = (statistics.fmean(a[k] - b[k] for a, b in pairs) for k in ("psnr", "ssim"))
            lines.append(
                f"\n{r['label']} − {first['label']}: {psnr:+.2f} dB PSNR, {ssim:+.4f} SSIM; better on {wins} of "
                f"{len(pairs)} test views" + ("." if len(pairs) == len(first_views) else " (the views both rendered).")
            )
        for t in timings:
            medians = ", ".join(f"{label} {s:.3f}" for label, s in t["seconds_per_step_median"].items())
            ratios = ", ".join(f"{label} {x:.3f}x" for label, x in t["ratio_median"].items())
            lines += ["", f"Seconds per step, alternating in one process ({t['steps_per_variant']} steps each, "
                      f"medians): {medians}; ratio to the first: {ratios}."]  # fmt: skip
        if eval_timing is not None:
            speeds = ", ".join(
                f"{label} {rays:,.0f} rays/s ({eval_timing['ratio_to_first'][label]:.2f}x)"
                for label, rays in eval_timing["rays_per_second_median"].items()
            )
            how = f"{eval_timing['views']} views, {eval_timing['rounds']} rounds, medians; {eval_timing['machine']}"
            lines += ["", f"Test renderings, the trained models taking turns in one process ({how}): {speeds}."]
        for r in runs:
            lr = r["filter_lr"]
            if lr["steps"]:
                lines += ["", f"{r['label']}: the line-searched filter rate sat at its upper bound on "
                          f"{100 * lr['at_upper_bound']:.1f}% of steps, at its lower bound on "
                          f"{100 * lr['at_lower_bound']:.1f}%, median {lr['median']:.2e}."]  # fmt: skip
        if self.how:
            lines += ["", "How measured: " + self.how]
        lines += ["", f"![test views]({self.figure_name})", ""]
        return "\n".join(lines)

    def figure(self, runs: list[dict]) -> None:
        """Ground truth and every variant's rendering of a few test views, with PSNR."""
        from PIL import Image

        renders = {r["label"]: self.out / "runs" / r["label"] / "renders" for r in runs}
        first = runs[0]["label"]
        # views every variant rendered (some are evaluated on a subset: --eval-views)
        common = [d["view"] for d in runs[0]["test_views"]]
        for run in runs[1:]:
            rendered = {d["view"] for d in run["test_views"]}
            common = [v for v in common if v in rendered]
        views = [v for v in self.views if v in common] or common[:3]
        if not views:
            raise UsageError("the variants have no test view in common to show; evaluate them on the same views")
        psnr = {r["label"]: {d["view"]: d["psnr"] for d in r["test_views"]} for r in runs}
        fig, axes = new_figure(len(views), len(runs) + 1, figsize=(2.5 * (len(runs) + 1), 2.6 * len(views)),
                                 squeeze=False)  # fmt: skip
        for row, view in enumerate(views):
            panels = [("ground truth", renders[first] / f"{view}_gt.png")]
            panels += [(f"{label} {psnr[label][view]:.2f} dB", renders[label] / f"{view}_rgb.png") for label in renders]
            for col, (title, path) in enumerate(panels):
                ax = axes[row][col]
                ax.imshow(Image.open(path), interpolation="nearest")
                ax.set_title(f"{view}: {title}" if col == 0 else title, fontsize=8)
                ax.axis("off")
        save_figure(fig, self.dest / self.figure_name, dpi=110)
