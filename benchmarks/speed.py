"""Seconds per training step with the filter and without it, side by side in one process: every round runs each
variant of a setting (no filter, the fused filter, the filter on torch's modules) for a block of steps in turn, so
that all see the same machine load; medians over the rounds. Also the multiply-add ratio of a step (matrix products
of forward and backward, the filter at its own width) and the share of a step spent in the line search. Writes
speed.json and speed.md (on a GPU, speed_gpu.json and speed.md's GPU table).

    python benchmarks/speed.py [--data DIR] [--settings image-wire image-loglinear sdf nerfacto-lite nerf-lite] \
        [--rounds 9] [--dest benchmarks]
    python benchmarks/speed.py --device cuda --settings image-paper nerfacto [--scene SCENE]

DIR holds kodak/ and nerf_synthetic/chair (default: $RFF_DATA, as the slow tests read it). On a GPU the clock is the
wall clock with the device synchronised after each block, and the line search's share is the GPU time between
events recorded around its hooks.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional
from unittest import mock

import torch
import tyro
from torch.utils.flop_counter import FlopCounterMode

from rff_field.common.machine import machine_description
from rff_field.common.outputs import write_json, write_text
from rff_field.common.torch_state import seeded
from rff_field.core import filter as filter_module
from rff_field.core.line_search import FilterLineSearch
from rff_field.fit.bench import apply_variant, parse_variant
from rff_field.fit.loop import FitRun
from rff_field.inr.config import PRESETS, build_network

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = {"plain": "embedding.filtered=false", "filtered": "", "eager": "embedding.filter_fused=false",
            "compiled": "line_search.fused=true"}  # fmt: skip
"""The options each variant adds to a setting's: no filter, the fused filter (the default), torch's modules, the
default with the line search compiled."""
MARKERS = {
    "cpu": ("<!-- benchmarks/speed.py writes from here -->", "<!-- to here -->"),
    "cuda": ("<!-- benchmarks/speed.py writes the GPU table from here -->", "<!-- to here (GPU) -->"),
}
"""speed.md's parts that the script writes, per device; the rest is the report's text."""


@dataclass(frozen=True)
class Setting:
    kind: str  # image, sdf or nerf
    spec: str  # the preset and options every variant starts from
    about: str  # what the table says it is
    downsample: int = 4  # image: the Kodak image's reduction


SETTINGS = {
    "image-wire": Setting("image", "filtered-pe,hidden_features=64", "image, WIRE's PE (22), 3x64, kodim05 x4"),
    "image-loglinear": Setting("image", "filtered-pe,embedding.pe_bands=loglinear,hidden_features=128",
                               "image, log-linear PE (256 channels), 3x128, kodim05 x2", downsample=2),
    "image-paper": Setting("image", "filtered-pe", "image, the paper's protocol: WIRE's PE (30), 3x256, kodim05 "
                           "768x512, batches of 65,536", downsample=1),
    "sdf": Setting("sdf", "filtered-pe", "SDF, rff-sdf's default (log-linear PE, 192 channels, 8x256)"),
    "nerfacto-lite": Setting("nerf", "rff-nerfacto-lite", "rff-nerfacto-lite, chair at 1/8 (as configured)"),
    "nerf-lite": Setting("nerf", "rff-nerf-lite", "rff-nerf-lite, chair at 1/8"),
    "nerfacto": Setting("nerf", "rff-nerfacto", "rff-nerfacto, the scene at 1/8"),
}  # fmt: skip


@dataclass
class Speed:
    data: Path = field(default_factory=lambda: Path(os.environ.get("RFF_DATA", ROOT.parent / "shared" / "data")))
    """Folder with kodak/ and nerf_synthetic/chair."""
    dest: Path = ROOT / "benchmarks"
    """Folder for speed.json and speed.md."""
    settings: tuple[str, ...] = tuple(SETTINGS)
    """Settings to measure (rows)."""
    rounds: int = 9
    """Counted rounds (after one that warms up)."""
    block_seconds: float = 1.0
    """About how long a variant runs per round (whole steps, at least one)."""
    threads: int = 1
    """torch threads."""
    device: str = "cpu"
    """cpu or cuda."""
    scene: Optional[Path] = None
    """Blender-format scene of the NeRF settings (default: the data folder's nerf_synthetic/chair)."""


class Runner:
    """One variant of a setting: ``step()`` trains one step; ``search`` is its line search (None without)."""

    def __init__(self, step: Callable[[], None], model: torch.nn.Module, search: Optional[FilterLineSearch],
                 count: Callable[[], None]) -> None:  # fmt: skip
        self.step, self.model, self.search, self.count = step, model, search, count
        self.cuda = next(model.parameters()).device.type == "cuda"
        self.search_seconds, self.events = 0.0, []
        if search is not None:  # time the hooks' work (attributes of this object, looked up before its class's)
            for name in ("_set_rate", "_lr_d_inr"):  # the rule, and the slopes of optimizers that step before it
                setattr(search, name, self.timed(getattr(search, name)))

    def timed(self, function: Callable) -> Callable:
        def timed_function(*args, **kwargs):
            if self.cuda:  # the GPU time of the kernels it launches
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                result = function(*args, **kwargs)
                end.record()
                self.events.append((start, end))
                return result
            start = time.thread_time()
            result = function(*args, **kwargs)
            self.search_seconds += time.thread_time() - start
            return result

        return timed_function

    def search_time(self) -> float:
        """Seconds in the line search since the last call (after the device has finished)."""
        seconds = self.search_seconds + sum(start.elapsed_time(end) for start, end in self.events) / 1000
        self.search_seconds, self.events = 0.0, []
        return seconds


def fit_runner(run: FitRun) -> Runner:
    run.resume()
    steps = iter(range(run.steps))

    def count() -> None:
        run.task.loss(run.model, 0).backward()
        run.optimizer.zero_grad(set_to_none=True)

    return Runner(lambda: run.step(next(steps)), run.model, run.search, count)


def image_runner(setting: Setting, variant: str, data: Path, device: torch.device) -> Runner:
    from rff_field.image.data import downsample, load_image
    from rff_field.image.fit import ImageFitConfig, PixelTask, method_lr

    pixels = downsample(load_image(data / "kodak" / "kodim05.png")[0], setting.downsample)
    config = apply_variant(ImageFitConfig(), parse_variant(variant, PRESETS), PRESETS)
    height, width, channels = pixels.shape
    with seeded(0):
        model = build_network(config.network, 2, channels, sidelength=max(height, width)).to(device)
    task = PixelTask(pixels, config.batch_size, 0, device)
    train = config.train.with_rates(method_lr(config.network))
    return fit_runner(FitRun(model, task, train, None, "", 10000, task.batches))


def sdf_runner(setting: Setting, variant: str, data: Path, device: torch.device) -> Runner:
    from rff_field.sdf.data import ShapeSampler, load_shape
    from rff_field.sdf.fit import COARSE_SCALE, DEFAULT_LR, FINE_SCALE, SDFFitConfig, SDFTask

    config = apply_variant(SDFFitConfig(), parse_variant(variant, PRESETS), PRESETS)
    network = config.network.resolved()
    with seeded(0):
        model = build_network(network, 3, 1).to(device)
    task = SDFTask(ShapeSampler(load_shape(None)[0], COARSE_SCALE, FINE_SCALE, 0), config.points_per_step, device)
    train = config.train.with_rates(DEFAULT_LR.get(network.method, 1e-3))
    return fit_runner(FitRun(model, task, train, None, "", 10000, 1))


def nerf_runner(setting: Setting, variant: str, scene: Path, device: torch.device, out: Path) -> Runner:
    from rff_field.nerf import quiet_known_warnings

    quiet_known_warnings()
    from nerfstudio.engine.callbacks import TrainingCallbackLocation

    from rff_field.cli.nerf_bench import METHODS, NerfBench
    from rff_field.nerf.training import set_up_trainer

    parsed = parse_variant(variant, {method: {} for method in METHODS})
    config = NerfBench(data=scene, device=device.type).trainer_config(parsed, out / parsed.label)
    config.set_timestamp()
    config.prepare()
    trainer = set_up_trainer(config)
    steps = iter(range(10**9))

    def step() -> None:  # nerfstudio's Trainer.train, one iteration
        index = next(steps)
        trainer.pipeline.train()
        for callback in trainer.callbacks:
            callback.run_callback_at_location(index, location=TrainingCallbackLocation.BEFORE_TRAIN_ITERATION)
        trainer.train_iteration(index)
        for callback in trainer.callbacks:
            callback.run_callback_at_location(index, location=TrainingCallbackLocation.AFTER_TRAIN_ITERATION)

    model = trainer.pipeline.model
    return Runner(step, model, model.line_search, step)


def multiply_adds(runner: Runner) -> float:
    """Multiply-adds of the matrix products of one step's forward and backward, the filter at its own width."""
    with mock.patch.object(filter_module, "PAD_MULTIPLE", 1), FlopCounterMode(display=False) as counter:
        runner.count()
    return counter.get_total_flops() / 2


def measure(name: str, setting: Setting, speed: Speed, out: Path) -> dict:
    synchronize = torch.cuda.synchronize if speed.device == "cuda" else (lambda: None)
    build = {"image": image_runner, "sdf": sdf_runner}.get(setting.kind)
    device, scene = torch.device(speed.device), speed.scene or speed.data / "nerf_synthetic" / "chair"
    runners = {}
    for label, options in VARIANTS.items():
        variant = f"{label}:{setting.spec}" + (f",{options}" if options else "")
        runners[label] = (nerf_runner(setting, variant, scene, device, out) if build is None
                          else build(setting, variant, speed.data, device))  # fmt: skip
    # the same arithmetic fused or not; counted on torch's modules (the counter skips in-place products)
    macs = {"plain": multiply_adds(runners["plain"]), "filtered": multiply_adds(runners["eager"])}
    timed: dict[str, list[float]] = {label: [] for label in runners}  # by the clock of the device (see "clock")
    wall: dict[str, list[float]] = {label: [] for label in runners}
    share: dict[str, list[float]] = {"filtered": [], "compiled": []}
    block = 1
    for index in range(speed.rounds + 1):
        for label in list(runners)[:: 1 if index % 2 else -1]:  # alternating order
            runner = runners[label]
            synchronize()
            runner.search_time()
            start, start_cpu = time.perf_counter(), time.process_time()
            for _ in range(block):
                runner.step()
            synchronize()
            seconds = time.perf_counter() - start
            used = seconds if device.type == "cuda" else time.process_time() - start_cpu  # the GPU's, or the CPU's
            if index == 0 and label == "plain":
                block = max(1, round(speed.block_seconds / used))
            elif index > 0:
                timed[label].append(used / block)
                wall[label].append(seconds / block)
                if label in share:
                    share[label].append(runner.search_time() / used)
    median = {label: statistics.median(values) for label, values in timed.items()}
    wall_median = {label: statistics.median(values) for label, values in wall.items()}
    filter_params = sum(p.numel() for p in filter_module.filter_parameters(runners["filtered"].model))
    return {
        "setting": name,
        "about": setting.about,
        "spec": setting.spec,
        "block": block,
        "clock": "wall, device synchronised" if device.type == "cuda" else "process CPU time",
        "s_per_step": median,
        "wall_s_per_step": wall_median,
        "ratio": median["filtered"] / median["plain"],
        "ratio_eager": median["eager"] / median["plain"],
        "ratio_compiled": median["compiled"] / median["plain"],
        "wall_ratio": wall_median["filtered"] / wall_median["plain"],
        "multiply_adds": macs,
        "multiply_add_ratio": macs["filtered"] / macs["plain"],
        "line_search_share": statistics.median(share["filtered"]),
        "line_search_share_compiled": statistics.median(share["compiled"]),
        "filter_params": filter_params,
        "s_per_step_rounds": timed,
    }


def main(speed: Speed) -> None:
    torch.set_num_threads(speed.threads)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as out:
        rows = [measure(name, SETTINGS[name], speed, Path(out)) for name in speed.settings]
    load = [round(value, 2) for value in (*load_before, *os.getloadavg())]
    speed.dest.mkdir(parents=True, exist_ok=True)
    gpu = speed.device == "cuda"
    machine = machine_description(torch.device("cpu"))
    if gpu:
        machine = f"{torch.cuda.get_device_name()}, torch {torch.__version__}, float32 matmul precision " \
            f"{torch.get_float32_matmul_precision()}"  # fmt: skip
    write_json(speed.dest / ("speed_gpu.json" if gpu else "speed.json"),
               {"machine": machine, "cpus": os.cpu_count(), "load_before_after": load, "rounds": speed.rounds,
                "rows": rows})  # fmt: skip
    lines = [
        "| setting | plain s/step | filtered s/step | ratio | floor (multiply-adds) | ratio / floor | "
        "line search | torch's modules: ratio | line search compiled: ratio, line search | wall-clock ratio |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        step = r["s_per_step"]
        lines.append(
            f"| {r['about']} | {step['plain']:.4f} | {step['filtered']:.4f} | **{r['ratio']:.2f}x** | "
            f"{r['multiply_add_ratio']:.2f}x | {r['ratio'] / r['multiply_add_ratio']:.2f} | "
            f"{r['line_search_share']:.1%} | {r['ratio_eager']:.2f}x | {r['ratio_compiled']:.2f}x, "
            f"{r['line_search_share_compiled']:.1%} | {r['wall_ratio']:.2f}x |"
        )
    clock = (
        "medians of seconds per step (the wall clock with the GPU synchronised after each block; the line search's "
        "share is the GPU time between events around its hooks)"
        if gpu
        else "medians of CPU seconds per step (the process's CPU time: less disturbed by the load than the wall "
        "clock, whose ratio is the last column)"
    )
    start, end = MARKERS[speed.device]
    section = "\n".join([
        start,
        f"Machine: {machine}; {os.cpu_count()} CPUs, load average (1, 5, 15 min) {', '.join(map(str, load[:3]))} "
        f"before and {', '.join(map(str, load[3:]))} after; {speed.rounds} rounds, {clock}.",
        "",
        *lines,
        end,
    ])  # fmt: skip
    path = speed.dest / "speed.md"
    text = path.read_text() if path.is_file() else "# Speed of the filter\n"
    if start not in text:
        text = f"{text.rstrip()}\n\n{start}\n{end}\n"
    before, rest = text.split(start, 1)
    write_text(path, before + section + rest.split(end, 1)[1])
    print(section)


if __name__ == "__main__":
    main(tyro.cli(Speed, description=__doc__))
