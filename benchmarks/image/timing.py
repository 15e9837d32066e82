"""Seconds per step of image-fitting variants, measured side by side: every round fits each variant for a block of
iterations in turn (one warm-up round first), so that all see the same machine load; writes timing.json and
timing.md (medians, and each variant's ratio to the first).

    python benchmarks/image/timing.py --image kodim05.png --resolution-scale 0.25 --hidden-features 64 \
        --variants mlp-pe filtered-pe siren --dest benchmarks/image
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Annotated

import torch
import tyro

from rff_field.common.machine import machine_description
from rff_field.common.options import Flat, Values
from rff_field.common.outputs import write_json, write_text
from rff_field.common.torch_state import seeded
from rff_field.fit.bench import apply_variant, parse_variant
from rff_field.fit.loop import train
from rff_field.image.data import downsample, downsample_factor, load_image
from rff_field.image.fit import ImageFitConfig, PixelTask, method_lr
from rff_field.inr.config import PRESETS, build_network, count_parameters


@dataclass
class Timing:
    image: Path
    """Image to fit."""
    dest: Path
    """Folder for timing.json and timing.md."""
    variants: tuple[str, ...] = ("mlp-pe", "filtered-pe")
    """Variants as for rff-image bench; the first is the reference."""
    resolution_scale: float = 0.25
    """The image's resolution as fitted (1/k, area downsampling)."""
    block: int = 30
    """Passes per variant and round."""
    rounds: int = 5
    """Counted rounds (one more warms up first)."""
    threads: int = 1
    """torch threads."""
    config: Annotated[ImageFitConfig, Flat, Values] = field(default_factory=ImageFitConfig)


def main(timing: Timing) -> None:
    torch.set_num_threads(timing.threads)
    pixels, name = load_image(timing.image)
    pixels = downsample(pixels, downsample_factor(timing.resolution_scale))
    height, width, channels = pixels.shape
    variants = [parse_variant(text, PRESETS) for text in timing.variants]
    configs = {v.label: apply_variant(timing.config, v, PRESETS) for v in variants}
    seconds: dict[str, list[float]] = {label: [] for label in configs}
    params = {}
    for round_ in range(timing.rounds + 1):
        for label, config in configs.items():
            device = config.train.torch_device()
            with seeded(config.train.seed):
                model = build_network(config.network, 2, channels, sidelength=max(height, width)).to(device)
            params[label] = count_parameters(model)
            task = PixelTask(pixels, config.batch_size, config.train.seed, device)
            run = replace(config.train, log_every=timing.block).with_rates(method_lr(config.network))
            history = train(model, task, run, timing.block, progress=False, steps_per_iter=task.batches)
            if round_ > 0:
                seconds[label].append(history.seconds / history.steps)
    reference = statistics.median(seconds[variants[0].label])
    rows = [
        {
            "variant": label,
            "params": params[label],
            "median": statistics.median(s),
            "min": min(s),
            "max": max(s),
            "ratio": statistics.median(s) / reference,
        }
        for label, s in seconds.items()
    ]
    device = configs[variants[0].label].train.torch_device()
    machine = machine_description(device)
    timing.dest.mkdir(parents=True, exist_ok=True)
    write_json(
        timing.dest / "timing.json",
        {"machine": machine, "image": name, "size": [width, height], "settings": asdict(timing), "rows": rows},
    )
    lines = [
        f"# Seconds per step, side by side ({name}, {width}x{height})",
        "",
        f"Machine: {machine}. Each round fits every variant for {timing.block} iterations in turn; median of "
        f"{timing.rounds} rounds after a warm-up round; ratio to `{variants[0].label}`.",
        "",
        "| variant | params | s/step (median) | min | max | ratio |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['variant']} | {r['params']:,} | {r['median']:.4f} | {r['min']:.4f} | {r['max']:.4f} | "
        f"{r['ratio']:.2f}x |"
        for r in rows
    ]
    write_text(timing.dest / "timing.md", "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main(tyro.cli(Timing, description=__doc__))
