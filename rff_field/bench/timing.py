"""Speed measured side by side: settings take turns in one process, so they all see the same machine load.

``ImageTiming``: seconds per iteration of image-fitting variants. ``FilterTiming``: the bias-free filter alone at
its own width and zero-padded to a multiple of 8. ``BatchTiming``: K fits one after another against the batched
fitter. Each writes JSON and a Markdown table.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch

from rff_field.bench.image import BenchConfig, build_jobs, job_config
from rff_field.common.machine import machine_description, resolve_device
from rff_field.common.outputs import check_output_files, write_text
from rff_field.common.torch_state import restores_torch_state
from rff_field.core import filter as filter_module
from rff_field.core.errors import UsageError, check_fields
from rff_field.core.filter import BiasFreeFilter
from rff_field.image.data import downsample, load_image
from rff_field.image.fit import FitConfig, run_fit
from rff_field.inr.config import NetworkConfig


@dataclass
class ImageTiming:
    """Seconds per iteration of image-fitting variants: every round fits each variant for a short block of
    iterations, in turn; the median over rounds is reported, with each variant's ratio to the first."""

    image: Path
    """Image to fit."""
    dest: Path
    """Folder for timing.json and timing.md."""
    variants: tuple[str, ...]
    """Variants ``[LABEL:]METHOD[,key=value...]`` (as for rff-image bench); the first is the reference."""
    downsample: int = 4
    """Area-downsampling factor of the image."""
    hidden_features: int = 64
    """Width of the networks (a variant may override it)."""
    block: int = 30
    """Iterations per variant and round."""
    rounds: int = 5
    """Counted rounds (one more warms up first)."""
    device: Literal["auto", "cpu", "cuda"] = "cpu"
    """Where to fit."""
    threads: int = 1
    """Torch threads (CPU)."""
    overwrite: bool = False
    """Replace timing.json and timing.md of an earlier run in --dest."""

    @restores_torch_state
    def main(self) -> dict:
        """Measure and write the table; returns the result."""
        if not self.image.is_file():
            raise UsageError(f"--image {self.image} {'is a folder' if self.image.is_dir() else 'does not exist'}; "
                             "give an image file")  # fmt: skip
        check_fields(self, positive_int=("block", "rounds", "threads"))
        if not self.variants:
            raise UsageError("--variants is empty; give at least one variant to time")
        check_output_files(self.dest, ("timing.json", "timing.md"), self.overwrite, "--dest")
        torch.set_num_threads(self.threads)
        fit = FitConfig(iters=self.block, network=NetworkConfig(hidden_features=self.hidden_features), lpips=False,
                        device=self.device, log_every=self.block)  # fmt: skip
        bench = BenchConfig(images=self.image.parent, names=(self.image.stem,), variants=self.variants, fit=fit,
                            downsample=self.downsample, sweep_names=(), long_names=(), progress=False)  # fmt: skip
        jobs = build_jobs(bench)
        pixels = downsample(load_image(self.image).pixels, self.downsample)
        height, width, channels = pixels.shape
        configs = {job.variant.label: job_config(bench, job, channels, max(height, width)) for job in jobs}
        times: dict[str, list[float]] = {label: [] for label in configs}
        params: dict[str, int] = {}
        with tempfile.TemporaryDirectory() as tmp:
            for round_index in range(self.rounds + 1):  # round 0 warms up and is not counted
                for label, config in configs.items():
                    metrics = run_fit(self.image, Path(tmp) / label, dataclasses.replace(config), self.downsample,
                                      overwrite=True, progress=False)  # fmt: skip
                    params[label] = metrics["num_params"]
                    if round_index > 0:
                        times[label].append(metrics["seconds_per_iter"])
                print(f"round {round_index} done", flush=True)
        first = next(iter(configs))
        specs = {job.variant.label: job.variant.spec for job in jobs}
        reference = statistics.median(times[first])
        rows = []
        for label, values in times.items():
            median = statistics.median(values)
            rows.append({"label": label, "variant": specs[label], "params": params[label], "seconds_per_iter": median,
                         "min": min(values), "max": max(values), "ratio": median / reference})  # fmt: skip
        machine = machine_description(resolve_device(self.device))
        result = {"image": self.image.stem, "downsample": self.downsample, "height": height, "width": width,
                  "block": self.block, "rounds": self.rounds, "machine": machine, "rows": rows}  # fmt: skip
        self.dest.mkdir(parents=True, exist_ok=True)
        write_text(self.dest / "timing.json", json.dumps(result, indent=1) + "\n")
        lines = [f"# Seconds per iteration, side by side ({self.image.stem} x{self.downsample}, {width}x{height})",
                 "", f"Machine: {machine}. Each round fits every variant for {self.block} iterations in turn; median "
                 f"of {self.rounds} rounds (after one warm-up round); ratio to `{first}`.", "",
                 "| variant | spec | params | s/it (median) | min | max | ratio |",
                 "|---|---|---:|---:|---:|---:|---:|"]  # fmt: skip
        for r in rows:
            lines.append(f"| {r['label']} | `{r['variant']}` | {r['params']:,} | {r['seconds_per_iter']:.4f} | "
                         f"{r['min']:.4f} | {r['max']:.4f} | {r['ratio']:.2f}x |")  # fmt: skip
        write_text(self.dest / "timing.md", "\n".join(lines) + "\n")
        print("\n".join(lines))
        return result


def filter_pass_seconds(layer: BiasFreeFilter, x: torch.Tensor, upstream: torch.Tensor, repeats: int) -> float:
    """Median seconds of ``repeats`` forward and backward passes of ``f(x) * x``, as in the filtered embedding."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        ((layer(x) * x) * upstream).sum().backward()
        if x.device.type == "cuda":
            torch.cuda.synchronize(x.device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


@dataclass
class FilterTiming:
    """Forward plus backward time of the bias-free filter alone, computed at its own width D and zero-padded to
    the next multiple of 8 (what ``BiasFreeFilter`` does); the two settings alternate in rounds."""

    dest: Path
    """Folder for padding.json and padding.md."""
    widths: tuple[int, ...] = (22, 27, 44, 63, 100)
    """Embedding widths D."""
    samples: int = 16384
    """Rows (pixels or ray samples) per pass."""
    rounds: int = 7
    """Counted rounds (one more warms up first)."""
    repeats: int = 5
    """Passes per round and setting."""
    threads: int = 1
    """Torch threads."""
    device: Literal["cpu", "cuda"] = "cpu"
    """Where to time the filter (on a GPU, each pass ends with a synchronisation)."""
    overwrite: bool = False
    """Replace padding.json and padding.md of an earlier run in --dest."""

    @restores_torch_state
    def main(self) -> dict:
        """Measure and write the table; returns the result."""
        check_fields(self, positive_int=("samples", "rounds", "repeats", "threads"))
        if not self.widths:
            raise UsageError("--widths is empty; give at least one filter width")
        check_output_files(self.dest, ("padding.json", "padding.md"), self.overwrite, "--dest")
        device = resolve_device(self.device, fallback="cpu")
        torch.set_num_threads(self.threads)
        torch.default_generator.manual_seed(0)  # the CPU's generator alone: the decorator restores it
        padded_multiple = filter_module.PAD_MULTIPLE
        rows = []
        try:
            for dim in self.widths:
                layer = BiasFreeFilter(dim).to(device)
                x, upstream = (torch.randn(self.samples, dim).to(device) for _ in range(2))
                times: dict[int, list[float]] = {1: [], padded_multiple: []}
                for _ in range(self.rounds + 1):  # the first round warms up
                    for multiple in times:
                        filter_module.PAD_MULTIPLE = multiple  # 1: no padding
                        times[multiple].append(filter_pass_seconds(layer, x, upstream, self.repeats))
                own, padded = (statistics.median(t[1:]) for t in times.values())
                padded_dim = -(-dim // padded_multiple) * padded_multiple
                rows.append({"dim": dim, "padded_dim": padded_dim, "own_width_ms": 1e3 * own,
                             "padded_ms": 1e3 * padded, "speedup": own / padded})  # fmt: skip
        finally:
            filter_module.PAD_MULTIPLE = padded_multiple
        machine = machine_description(device)
        result = {"machine": machine, "samples": self.samples, "rounds": self.rounds, "repeats": self.repeats,
                  "rows": rows}  # fmt: skip
        self.dest.mkdir(parents=True, exist_ok=True)
        write_text(self.dest / "padding.json", json.dumps(result, indent=2) + "\n")
        lines = [
            "# The filter at its own width and zero-padded to a multiple of 8",
            "",
            f"Forward and backward of `f(x) * x` for {self.samples:,} rows, 3 layers, no biases; machine: {machine}. "
            f"Median of {self.rounds} rounds (each the median of {self.repeats} passes), the two settings alternating.",
            "",
            "| D | padded to | at D (ms) | padded (ms) | speed-up |",
            "|---:|---:|---:|---:|---:|",
        ]
        for r in rows:
            lines.append(f"| {r['dim']} | {r['padded_dim']} | {r['own_width_ms']:.2f} | {r['padded_ms']:.2f} | "
                         f"{r['speedup']:.2f}x |")  # fmt: skip
        write_text(self.dest / "padding.md", "\n".join(lines) + "\n")
        print("\n".join(lines))
        return result


@dataclass
class BatchTiming:
    """Throughput of K fits run one after another (``fit_image``) and together (the batched fitter), side by side:
    every round times both engines on the same K jobs; the median over rounds is reported."""

    images: Path
    """Folder of images."""
    dest: Path
    """Folder for batched.json and batched.md."""
    names: tuple[str, ...] = ("kodim01", "kodim02", "kodim03", "kodim05", "kodim06", "kodim07", "kodim08", "kodim11")
    """The K images (file stems), one job each; images of different sizes are fitted in separate batches."""
    variants: tuple[str, ...] = ("mlp-pe", "filtered-pe")
    """Variants ``[LABEL:]METHOD[,key=value...]``; each is timed on the K images."""
    downsample: int = 4
    """Area-downsampling factor of the images."""
    hidden_features: int = 64
    """Width of the networks."""
    block: int = 30
    """Iterations per job and round."""
    rounds: int = 3
    """Counted rounds (one more warms up first)."""
    device: Literal["auto", "cpu", "cuda"] = "cpu"
    """Where to fit."""
    threads: int = 1
    """Torch threads (CPU)."""
    overwrite: bool = False
    """Replace batched.json and batched.md of an earlier run in --dest."""

    @restores_torch_state
    def main(self) -> dict:
        """Measure and write the table; returns the result."""
        from rff_field.image.batched import ImageJob, batch_key, fit_images
        from rff_field.image.fit import fit_image

        check_fields(self, positive_int=("block", "rounds", "threads"))
        if not self.variants:
            raise UsageError("--variants is empty; give at least one variant to time")
        check_output_files(self.dest, ("batched.json", "batched.md"), self.overwrite, "--dest")

        torch.set_num_threads(self.threads)
        fit = FitConfig(iters=self.block, network=NetworkConfig(hidden_features=self.hidden_features), lpips=False,
                        device=self.device, log_every=self.block)  # fmt: skip
        bench = BenchConfig(images=self.images, names=self.names, variants=self.variants, fit=fit,
                            downsample=self.downsample, sweep_names=(), long_names=(), progress=False)  # fmt: skip
        batches: dict[str, list[ImageJob]] = {}
        for job in build_jobs(bench):
            pixels = downsample(load_image(job.source).pixels, self.downsample)
            config = job_config(bench, job, pixels.shape[-1], max(pixels.shape[:2]))
            batches.setdefault(job.variant.label, []).append(ImageJob(pixels, config, job.subject))
        engines = ("sequential", "per-model", "vmapped")
        times = {label: {engine: [] for engine in engines} for label in batches}
        for round_index in range(self.rounds + 1):  # round 0 warms up and is not counted
            for label, jobs in batches.items():
                together: dict[str, list[ImageJob]] = {}
                for job in jobs:
                    together.setdefault(batch_key(job.config, job.pixels.shape), []).append(job)
                seconds = {
                    "sequential": sum(fit_image(*job, progress=False).metrics["seconds_per_iter"] for job in jobs),
                    **{engine: sum(fit_images(group, vectorize=engine == "vmapped")[0].metrics["batch_seconds_per_iter"]
                                   for group in together.values()) for engine in engines[1:]},
                }  # fmt: skip
                if round_index > 0:
                    for engine in engines:
                        times[label][engine].append(seconds[engine])
            print(f"round {round_index} done", flush=True)
        count = len(self.names)
        rows = []
        for label, measured in times.items():
            row = {"label": label, "jobs": count}
            for engine in engines:
                row[f"{engine}_s_per_iter"] = statistics.median(measured[engine])
                row[f"{engine}_model_iters_per_s"] = count / row[f"{engine}_s_per_iter"]
            for engine in engines[1:]:
                row[f"{engine}_speedup"] = row["sequential_s_per_iter"] / row[f"{engine}_s_per_iter"]
            rows.append(row)
        height, width = batches[next(iter(batches))][0].pixels.shape[:2]
        machine = machine_description(resolve_device(self.device))
        result = {"images": list(self.names), "downsample": self.downsample, "height": height, "width": width,
                  "hidden_features": self.hidden_features, "block": self.block, "rounds": self.rounds,
                  "machine": machine, "rows": rows}  # fmt: skip
        self.dest.mkdir(parents=True, exist_ok=True)
        write_text(self.dest / "batched.json", json.dumps(result, indent=1) + "\n")
        lines = [f"# {count} fits one after another and batched ({width}x{height}, width {self.hidden_features})", "",
                 f"Machine: {machine}. Each round fits the {count} images ({', '.join(self.names)}) for {self.block} "
                 f"iterations with `fit_image`, one after another, then together with the batched fitter, its "
                 "forward passes one model after another in each step (per-model, the default) and as one "
                 f"vmapped pass (`vectorize`); median of {self.rounds} rounds (after one warm-up round). "
                 f"Model-it/s: model iterations per second; ratio: batched / sequential throughput.", "",
                 "| variant | sequential model-it/s | per-model model-it/s | vmapped model-it/s | per-model ratio | "
                 "vmapped ratio |", "|---|---:|---:|---:|---:|---:|"]  # fmt: skip
        for r in rows:
            lines.append(f"| {r['label']} | {r['sequential_model_iters_per_s']:.1f} | "
                         f"{r['per-model_model_iters_per_s']:.1f} | {r['vmapped_model_iters_per_s']:.1f} | "
                         f"{r['per-model_speedup']:.2f}x | {r['vmapped_speedup']:.2f}x |")  # fmt: skip
        write_text(self.dest / "batched.md", "\n".join(lines) + "\n")
        print("\n".join(lines))
        return result
