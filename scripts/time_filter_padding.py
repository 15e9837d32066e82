#!/usr/bin/env python
"""Forward plus backward time of the bias-free filter alone, computed at its own width D and zero-padded to the
next multiple of 8 (what ``BiasFreeFilter`` does), side by side in one process: the two alternate in rounds, and
the median over rounds is reported. Writes padding.json and padding.md into --dest.

usage: python scripts/time_filter_padding.py --dest benchmarks/filter
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

import rff_field.core.filter as filter_module
from rff_field.core.filter import BiasFreeFilter
from rff_field.image.fit import machine_description

PADDED = filter_module.PAD_MULTIPLE


def step_seconds(layer: BiasFreeFilter, x: torch.Tensor, upstream: torch.Tensor, repeats: int) -> float:
    """Median seconds of ``repeats`` forward and backward passes of ``f(x) * x``, as in the filtered embedding."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        ((layer(x) * x) * upstream).sum().backward()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dest", type=Path, required=True, help="folder for padding.json and padding.md")
    parser.add_argument("--widths", type=int, nargs="+", default=[22, 27, 44, 63, 100], help="embedding widths D")
    parser.add_argument("--samples", type=int, default=16384, help="rows (pixels or ray samples) per pass")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=5, help="passes per round and setting")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rows = []
    for dim in args.widths:
        layer = BiasFreeFilter(dim)
        x, upstream = torch.randn(args.samples, dim), torch.randn(args.samples, dim)
        times: dict[int, list[float]] = {1: [], PADDED: []}
        for _ in range(args.rounds + 1):  # the first round warms up
            for multiple in times:
                filter_module.PAD_MULTIPLE = multiple  # 1: no padding
                times[multiple].append(step_seconds(layer, x, upstream, args.repeats))
        filter_module.PAD_MULTIPLE = PADDED
        own, padded = (statistics.median(t[1:]) for t in times.values())
        rows.append({"dim": dim, "padded_dim": -(-dim // PADDED) * PADDED, "own_width_ms": 1e3 * own,
                     "padded_ms": 1e3 * padded, "speedup": own / padded})  # fmt: skip
    machine = machine_description(torch.device("cpu"))
    result = {"machine": machine, "samples": args.samples, "rounds": args.rounds, "repeats": args.repeats, "rows": rows}
    args.dest.mkdir(parents=True, exist_ok=True)
    (args.dest / "padding.json").write_text(json.dumps(result, indent=2))
    lines = [
        "# The filter at its own width and zero-padded to a multiple of 8",
        "",
        f"Forward and backward of `f(x) * x` for {args.samples:,} rows, 3 layers, no biases; machine: {machine}. "
        f"Median of {args.rounds} rounds (each the median of {args.repeats} passes), the two settings alternating.",
        "",
        "| D | padded to | at D (ms) | padded (ms) | speed-up |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['dim']} | {r['padded_dim']} | {r['own_width_ms']:.2f} | {r['padded_ms']:.2f} | "
                     f"{r['speedup']:.2f}x |")  # fmt: skip
    (args.dest / "padding.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
