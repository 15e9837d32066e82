"""Benchmark driver for rff-nerf: filter on vs off (the MLP+PE baseline), same steps and seed.

Subcommands:
  train   train one variant in this process, evaluate it on the test views, write <out>/<variant>/result.json
  timing  seconds per step of both variants measured interleaved in one process (equal conditions)
  report  collect the results into results.json, results.md and a PNG of test views side by side

The CPU protocol (benchmarks/nerf/): scripts/bench_nerf_cpu.sh. On a GPU: scripts/bench_nerf_gpu.sh.
"""

from __future__ import annotations

import json
import platform
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Literal, Optional, Union

import torch
import tyro
from typing_extensions import Annotated

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runs from a checkout without installing it

Variant = Literal["filter", "baseline"]
LABELS = {"filter": "rff-nerf (filter + line search)", "baseline": "MLP+PE (filter off)"}


def _config(
    method: str,
    variant: Variant,
    data: Path,
    out: Path,
    steps: int,
    scale: float,
    seed: int,
    device: str,
    name: Optional[str] = None,
    width: Optional[int] = None,
):
    from rff_field.nerf.method_configs import rff_nerf, rff_nerf_lite
    from rff_field.nerf.training import lite_config

    base = {"rff-nerf": rff_nerf, "rff-nerf-lite": rff_nerf_lite}[method].config
    config = lite_config(data, out, steps, experiment_name=name or variant, device_type=device, base=base)
    config.machine.seed = seed
    if width is not None:
        config.pipeline.model.base_mlp_layer_width = width
    config.pipeline.datamanager.camera_res_scale_factor = scale
    config.pipeline.model.use_filter = variant == "filter"
    config.steps_per_eval_image = config.steps_per_eval_all_images = 10**9
    config.steps_per_eval_batch = 500
    return config


def _machine(device: str) -> str:
    if device == "cuda" and torch.cuda.is_available():
        return torch.cuda.get_device_name()
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, torch threads {torch.get_num_threads()}"


@dataclass
class Train:
    """Train one variant (in this process), then evaluate it on every test view."""

    variant: Variant
    """'filter': rff-nerf-lite as is; 'baseline': the same with --pipeline.model.use-filter False."""
    out: Path = Path("outputs/bench-nerf-cpu")
    """Folder for runs and results."""
    data: Path = Path("../shared/data/nerf_synthetic/chair")
    """Blender-format scene."""
    method: Literal["rff-nerf-lite", "rff-nerf"] = "rff-nerf-lite"
    """Method to train."""
    steps: int = 2000
    """Training steps."""
    scale: float = 0.125
    """camera-res-scale-factor (0.125: 100x100 for the 800x800 synthetic scenes)."""
    seed: int = 42
    """Training seed (same for both variants)."""
    device: Literal["cpu", "cuda"] = "cpu"
    """Where to train."""
    name: Optional[str] = None
    """Name of the result folder and row (default: the variant), for extra comparisons such as a wider baseline."""
    width: Optional[int] = None
    """Override the density MLP's width (e.g. a baseline with as many parameters as the filtered model)."""
    label: Optional[str] = None
    """Row label in the report (default: from the variant and the name)."""

    def main(self) -> None:
        from rff_field.nerf.evaluate import evaluate_views
        from rff_field.nerf.loading import load_rff_pipeline
        from rff_field.nerf.training import quiet_known_warnings, train_in_process

        quiet_known_warnings()
        name = self.name or self.variant
        config = _config(
            self.method,
            self.variant,
            self.data,
            self.out / "runs",
            self.steps,
            self.scale,
            self.seed,
            self.device,
            name=name,
            width=self.width,
        )
        step_times: List[float] = []
        info = {}

        def watch(trainer) -> None:
            from nerfstudio.engine.callbacks import TrainingCallback, TrainingCallbackLocation

            clock = {}

            def before(step: int) -> None:
                clock["t"] = time.perf_counter()

            def after(step: int) -> None:
                step_times.append(time.perf_counter() - clock["t"])
                if step % 100 == 0:
                    print(f"[{name}] step {step}/{self.steps}: {step_times[-1]:.3f} s", flush=True)

            trainer.callbacks.insert(0, TrainingCallback([TrainingCallbackLocation.BEFORE_TRAIN_ITERATION], before))
            trainer.callbacks.append(TrainingCallback([TrainingCallbackLocation.AFTER_TRAIN_ITERATION], after))
            info["model"] = trainer.pipeline.model

        start = time.perf_counter()
        config_path = train_in_process(config, on_setup=watch)
        train_seconds = time.perf_counter() - start
        model = info["model"]
        groups = model.get_param_groups()
        history = list(model.line_search.history) if model.line_search is not None else []
        lr_max = model.config.line_search_lr_max

        _, pipeline, _, _ = load_rff_pipeline(config_path, test_mode="test")
        out_dir = self.out / name
        metrics = evaluate_views(pipeline, out_dir, progress=False)
        steady = step_times[10:] or step_times
        label = self.label or (LABELS[self.variant] if name == self.variant else f"{LABELS[self.variant]}, {name}")
        result = {
            "variant": self.variant,
            "name": name,
            "label": label,
            "method": self.method,
            "data": str(self.data),
            "scale": self.scale,
            "steps": self.steps,
            "seed": self.seed,
            "device": self.device,
            "machine": _machine(self.device),
            "params_inr": sum(p.numel() for p in groups["fields"]),
            "params_filter": sum(p.numel() for p in groups.get("filter", [])),
            "train_seconds": train_seconds,
            "seconds_per_step_mean": statistics.fmean(steady),
            "seconds_per_step_median": statistics.median(steady),
            "test": metrics["mean"],
            "test_views": metrics["views"],
            "filter_lr": {
                "steps": len(history),
                "at_upper_bound": sum(1 for lr in history if lr >= lr_max) / max(len(history), 1),
                "at_lower_bound": sum(1 for lr in history if lr <= model.config.line_search_lr_min)
                / max(len(history), 1),
                "median": statistics.median(history) if history else None,
                "last": history[-1] if history else None,
            },
            "config": str(config_path),
        }
        (out_dir / "result.json").write_text(json.dumps(result, indent=2))
        print(json.dumps({k: result[k] for k in ("variant", "test", "seconds_per_step_median")}, indent=2))


def _timing_file(method: str) -> str:
    """Where `timing` writes its result: timing.json for the benchmark's method, timing-METHOD.json otherwise."""
    return "timing.json" if method == "rff-nerf-lite" else f"timing-{method}.json"


@dataclass
class Timing:
    """Seconds per training step of both variants, measured interleaved in one process: blocks of steps alternate
    between the two trainers, so both see the same load (the fair per-step cost ratio)."""

    out: Path = Path("outputs/bench-nerf-cpu")
    """Folder for results (timing.json)."""
    data: Path = Path("../shared/data/nerf_synthetic/chair")
    """Blender-format scene."""
    method: Literal["rff-nerf-lite", "rff-nerf"] = "rff-nerf-lite"
    """Method to time."""
    scale: float = 0.125
    """camera-res-scale-factor."""
    rounds: int = 10
    """Alternations (each variant runs one block per round)."""
    block: int = 10
    """Steps per block."""
    warmup: int = 5
    """Untimed steps per variant first."""
    device: Literal["cpu", "cuda"] = "cpu"
    """Where to run."""

    def main(self) -> None:
        from rff_field.nerf.training import quiet_known_warnings, reset_nerfstudio_logging

        quiet_known_warnings()
        trainers = {}
        for variant in ("filter", "baseline"):
            reset_nerfstudio_logging()
            config = _config(
                self.method, variant, self.data, self.out / "timing-runs", 10**6, self.scale, 42, self.device
            )
            config.set_timestamp()
            trainer = config.setup(local_rank=0, world_size=1)
            trainer.setup()
            trainers[variant] = trainer
        steps = {v: 0 for v in trainers}
        times = {v: [] for v in trainers}

        def run(variant: str, n: int, record: bool) -> None:
            trainer = trainers[variant]
            trainer.pipeline.train()
            for _ in range(n):
                if self.device == "cuda":
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                trainer.train_iteration(steps[variant])
                if self.device == "cuda":
                    torch.cuda.synchronize()
                if record:
                    times[variant].append(time.perf_counter() - t0)
                steps[variant] += 1

        for variant in trainers:
            run(variant, self.warmup, record=False)
        for r in range(self.rounds):
            order = ("filter", "baseline") if r % 2 == 0 else ("baseline", "filter")
            for variant in order:
                run(variant, self.block, record=True)
        result = {
            "method": self.method,
            "scale": self.scale,
            "machine": _machine(self.device),
            "steps_per_variant": self.rounds * self.block,
            **{f"{v}_seconds_per_step_median": statistics.median(t) for v, t in times.items()},
            **{f"{v}_seconds_per_step_mean": statistics.fmean(t) for v, t in times.items()},
        }
        result["ratio_median"] = result["filter_seconds_per_step_median"] / result["baseline_seconds_per_step_median"]
        result["ratio_mean"] = result["filter_seconds_per_step_mean"] / result["baseline_seconds_per_step_mean"]
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / _timing_file(self.method)).write_text(json.dumps(result, indent=2))
        print(json.dumps(result, indent=2))


@dataclass
class Report:
    """Collect train/timing results into results.json, results.md and a PNG of test views."""

    out: Path = Path("outputs/bench-nerf-cpu")
    """Folder the train and timing subcommands wrote."""
    dest: Path = Path("benchmarks/nerf")
    """Where to write results.json, results.md and test_views.png."""
    title: str = "rff-nerf-lite on the NeRF synthetic chair at 1/8 resolution (100x100), CPU"
    """Heading of results.md."""
    how: str = ""
    """How the numbers were measured (a paragraph for results.md)."""
    views: List[str] = field(default_factory=lambda: ["r_0", "r_64", "r_128"])
    """Test views shown in the PNG."""

    def main(self) -> None:
        results = {v: json.loads((self.out / v / "result.json").read_text()) for v in ("baseline", "filter")}
        extras = {
            p.parent.name: json.loads(p.read_text())
            for p in sorted(self.out.glob("*/result.json"))
            if p.parent.name not in results
        }
        timing_path = self.out / "timing.json"
        timing = json.loads(timing_path.read_text()) if timing_path.exists() else None
        other_timings = [json.loads(p.read_text()) for p in sorted(self.out.glob("timing-*.json"))]
        self.dest.mkdir(parents=True, exist_ok=True)
        everything = {**results, **extras}
        summary = {
            "protocol": {k: results["filter"][k] for k in ("method", "data", "scale", "steps", "seed", "device")},
            "machine": results["filter"]["machine"],
            "variants": {v: {k: r[k] for k in r if k not in ("test_views", "config")} for v, r in everything.items()},
            "per_view": {v: r["test_views"] for v, r in everything.items()},
            "timing_interleaved": timing,
            "timing_interleaved_other_methods": other_timings,
            "how_measured": self.how,
        }
        (self.dest / "results.json").write_text(json.dumps(summary, indent=2))
        (self.dest / "results.md").write_text(self._markdown(results, extras, timing, other_timings))
        self._figure(results)
        print(f"wrote {self.dest / 'results.json'}, {self.dest / 'results.md'}, {self.dest / 'test_views.png'}")

    def _markdown(self, results: dict, extras: dict, timing: Optional[dict], other_timings: List[dict]) -> str:
        f, b = results["filter"], results["baseline"]
        lines = [
            f"# {self.title}",
            "",
            f"Main comparison: {f['steps']} steps each, seed {f['seed']}, camera-res-scale-factor {f['scale']}, "
            f"device {f['device']}; "
            f"machine: {f['machine']}. Test views: {len(f['test_views'])} (all of the test split).",
            "",
            "| variant | steps | test PSNR (dB) | test SSIM | INR params | filter params | s/step (own run) |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in (b, f, *extras.values()):
            lines.append(
                f"| {r['label']} | {r['steps']} | {r['test']['psnr']:.2f} | {r['test']['ssim']:.4f} | "
                f"{r['params_inr']:,} | {r['params_filter']:,} | {r['seconds_per_step_median']:.3f} |"
            )
        lines += ["", f"PSNR difference (filter - baseline): {f['test']['psnr'] - b['test']['psnr']:+.2f} dB; "
                  f"SSIM difference {f['test']['ssim'] - b['test']['ssim']:+.4f}."]  # fmt: skip
        wins = sum(1 for a, c in zip(f["test_views"], b["test_views"]) if a["psnr"] > c["psnr"])
        lines.append(f"The filter is better on {wins} of {len(f['test_views'])} test views (PSNR).")
        if timing is not None:
            lines += [
                "",
                "Seconds per step measured interleaved in one process (equal conditions, "
                f"{timing['steps_per_variant']} steps each): filter {timing['filter_seconds_per_step_median']:.3f}, "
                f"baseline {timing['baseline_seconds_per_step_median']:.3f} (medians), "
                f"ratio {timing['ratio_median']:.3f}x (means: {timing['ratio_mean']:.3f}x).",
            ]
        for t in other_timings:
            lines += [
                "",
                f"The same for `{t['method']}` ({t['steps_per_variant']} steps each): filter "
                f"{t['filter_seconds_per_step_median']:.2f}, baseline {t['baseline_seconds_per_step_median']:.2f} "
                f"(medians), ratio {t['ratio_median']:.3f}x (means: {t['ratio_mean']:.3f}x).",
            ]
        lr = f["filter_lr"]
        if lr["steps"]:
            lines += [
                "",
                f"Filter learning rate (line search): at its upper bound on {100 * lr['at_upper_bound']:.1f}% of "
                f"steps, at its lower bound on {100 * lr['at_lower_bound']:.1f}%, median {lr['median']:.2e}.",
            ]
        if self.how:
            lines += ["", "How measured: " + self.how]
        lines += ["", "![test views](test_views.png)", ""]
        return "\n".join(lines)

    def _figure(self, results: dict) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from PIL import Image

        views = [v for v in self.views if (self.out / "filter" / "renders" / f"{v}_rgb.png").exists()]
        if not views:
            views = [d["view"] for d in results["filter"]["test_views"][:3]]
        psnr = {var: {d["view"]: d["psnr"] for d in r["test_views"]} for var, r in results.items()}
        fig, axes = plt.subplots(len(views), 3, figsize=(7.5, 2.6 * len(views)), squeeze=False)
        for row, view in enumerate(views):
            panels = [
                ("ground truth", self.out / "filter" / "renders" / f"{view}_gt.png"),
                (f"MLP+PE {psnr['baseline'][view]:.2f} dB", self.out / "baseline" / "renders" / f"{view}_rgb.png"),
                (f"rff-nerf {psnr['filter'][view]:.2f} dB", self.out / "filter" / "renders" / f"{view}_rgb.png"),
            ]
            for col, (label, path) in enumerate(panels):
                ax = axes[row][col]
                ax.imshow(Image.open(path), interpolation="nearest")
                ax.set_title(f"{view}: {label}" if col == 0 else label, fontsize=9)
                ax.axis("off")
        fig.tight_layout()
        fig.savefig(self.dest / "test_views.png", dpi=110)
        plt.close(fig)


Commands = Union[
    Annotated[Train, tyro.conf.subcommand("train")],
    Annotated[Timing, tyro.conf.subcommand("timing")],
    Annotated[Report, tyro.conf.subcommand("report")],
]


if __name__ == "__main__":
    tyro.cli(Commands).main()
