#!/usr/bin/env python
"""Seconds per iteration of image-fitting variants, measured side by side: every round fits each variant for a
short block of iterations, in turn, so that all of them see the same machine load; the median over rounds is
reported, with each variant's ratio to the first. Writes timing.json and timing.md into --dest.

usage: python scripts/time_image_methods.py --image ../shared/data/kodak/kodim05.png --dest benchmarks/image \\
           --variants mlp-pe filtered-pe "filt-pe64:filtered-pe,pe=loglinear,pe_frequencies=16" ...
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from rff_field.bench.image import BenchConfig, build_jobs, job_config  # noqa: E402
from rff_field.image.data import downsample, load_image  # noqa: E402
from rff_field.image.fit import FitConfig, machine_description, resolve_device, run_fit  # noqa: E402
from rff_field.inr.config import NetworkConfig  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--image", type=Path, required=True, help="image to fit")
    parser.add_argument("--dest", type=Path, required=True, help="folder for timing.json and timing.md")
    parser.add_argument("--variants", nargs="+", required=True, help="bench variants ([LABEL:]METHOD[,k=v...])")
    parser.add_argument("--downsample", type=int, default=4)
    parser.add_argument("--hidden-features", type=int, default=64)
    parser.add_argument("--block", type=int, default=30, help="iterations per variant and round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (CPU)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    fit = FitConfig(iters=args.block, network=NetworkConfig(hidden_features=args.hidden_features), lpips=False,
                    device=args.device, log_every=args.block)  # fmt: skip
    bench = BenchConfig(images=args.image.parent, names=(args.image.stem,), variants=tuple(args.variants), fit=fit,
                        downsample=args.downsample, sweep_names=(), long_names=(), progress=False)  # fmt: skip
    jobs = build_jobs(bench)
    pixels = downsample(load_image(args.image).pixels, args.downsample)
    height, width, channels = pixels.shape
    configs = {job.variant.label: job_config(bench, job, channels, max(height, width)) for job in jobs}
    times: dict[str, list[float]] = {label: [] for label in configs}
    params: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for round_index in range(args.rounds + 1):  # round 0 warms up and is not counted
            for label, config in configs.items():
                metrics = run_fit(args.image, Path(tmp) / label, dataclasses.replace(config), args.downsample,
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
    device = resolve_device(args.device)
    machine = f"{machine_description(device)}, {platform.machine()}"  # the description names the threads
    args.dest.mkdir(parents=True, exist_ok=True)
    out = {"image": args.image.stem, "downsample": args.downsample, "height": height, "width": width,
           "block": args.block, "rounds": args.rounds, "machine": machine, "rows": rows}  # fmt: skip
    (args.dest / "timing.json").write_text(json.dumps(out, indent=1))
    lines = [f"# Seconds per iteration, side by side ({args.image.stem} x{args.downsample}, {width}x{height})", "",
             f"Machine: {machine}. Each round fits every variant for {args.block} iterations in turn; median of "
             f"{args.rounds} rounds (after one warm-up round); ratio to `{first}`.", "",
             "| variant | spec | params | s/it (median) | min | max | ratio |",
             "|---|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in rows:
        lines.append(f"| {r['label']} | `{r['variant']}` | {r['params']:,} | {r['seconds_per_iter']:.4f} | "
                     f"{r['min']:.4f} | {r['max']:.4f} | {r['ratio']:.2f}x |")  # fmt: skip
    (args.dest / "timing.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
