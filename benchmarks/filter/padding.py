"""The bias-free filter at its own width D and as the package runs it, zero-padded to a multiple of 8: forward and
backward of ``f(x) * x``, the two taking turns; writes padding.json and padding.md.

    python benchmarks/filter/padding.py --widths 22 27 44 63 100 --dest benchmarks/filter
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import tyro
from torch import nn

from rff_field.common.machine import machine_description
from rff_field.common.outputs import write_json, write_text
from rff_field.core.filter import PAD_MULTIPLE, BiasFreeFilter


@dataclass
class Padding:
    dest: Path
    """Folder for padding.json and padding.md."""
    widths: tuple[int, ...] = (22, 27, 44, 63, 100)
    rows: int = 16384
    layers: int = 3
    rounds: int = 7
    passes: int = 5
    device: str = "cpu"
    threads: int = 1


def seconds(module: nn.Module, x: torch.Tensor, passes: int) -> float:
    """Median seconds of a forward and backward pass of ``module(x) * x``."""
    times = []
    for _ in range(passes):
        start = time.perf_counter()
        (module(x) * x).sum().backward()
        if x.is_cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(settings: Padding) -> None:
    torch.set_num_threads(settings.threads)
    device = torch.device(settings.device)
    rows = []
    for width in settings.widths:
        padded = BiasFreeFilter(width, settings.layers).to(device)
        plain = nn.Sequential(
            *[
                m
                for i in range(settings.layers)
                for m in ([nn.ReLU()] if i else []) + [nn.Linear(width, width, bias=False)]
            ]
        ).to(device)
        x = torch.randn(settings.rows, width, device=device, requires_grad=True)
        own, pad = [], []
        for _ in range(settings.rounds):
            own.append(seconds(plain, x, settings.passes))
            pad.append(seconds(padded, x, settings.passes))
        at_d, at_pad = statistics.median(own) * 1e3, statistics.median(pad) * 1e3
        rows.append(
            {
                "width": width,
                "padded_to": -(-width // PAD_MULTIPLE) * PAD_MULTIPLE,
                "at_width_ms": at_d,
                "padded_ms": at_pad,
                "speed_up": at_d / at_pad,
            }
        )
    machine = machine_description(device)
    settings.dest.mkdir(parents=True, exist_ok=True)
    write_json(settings.dest / "padding.json", {"machine": machine, "settings": asdict(settings), "rows": rows})
    lines = [
        "# The filter at its own width and zero-padded to a multiple of 8",
        "",
        f"Forward and backward of `f(x) * x` for {settings.rows:,} rows, {settings.layers} layers, no biases; "
        f"machine: {machine}. Median of {settings.rounds} rounds (each the median of {settings.passes} passes), "
        "the two settings alternating.",
        "",
        "| D | padded to | at D (ms) | padded (ms) | speed-up |",
        "|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['width']} | {r['padded_to']} | {r['at_width_ms']:.2f} | {r['padded_ms']:.2f} | {r['speed_up']:.2f}x |"
        for r in rows
    ]
    write_text(settings.dest / "padding.md", "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main(tyro.cli(Padding, description=__doc__))
