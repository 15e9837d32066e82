"""``rff-image``: fit a coordinate network to an image (``fit``) or benchmark methods over a folder (``bench``)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Optional, Union

import tyro

from rff_field.image import FitConfig, run_fit
from rff_field.image_bench import BenchConfig, run_bench


@dataclass
class Fit:
    """Fit one image and write reconstruction.png, error.png, curves.png and metrics.json into --out.

    Defaults follow the WIRE repository's image fitting (3 x 256, Adam with 0.1**(t/T) decay, full batch up to
    65,536 pixels, 2000 iterations). With no --image it fits scikit-image's astronaut, downsampled x4.
    """

    image: Optional[Path] = None
    """Image file (PNG/JPEG; grayscale is fitted as one channel, alpha is dropped); default: scikit-image's
    astronaut."""
    out: Optional[Path] = None
    """Output folder (default: outputs/rff-image/<image>-<method>)."""
    downsample: Optional[int] = None
    """Area-downsampling factor (default: 1 for --image, 4 for the bundled astronaut)."""
    overwrite: bool = False
    """Replace the outputs of an earlier run in --out."""
    progress: bool = True
    """Show a progress bar with the current PSNR."""
    config: Annotated[FitConfig, tyro.conf.OmitArgPrefixes] = field(default_factory=FitConfig)
    """Network and optimisation."""


@dataclass
class Bench:
    """Run methods over a folder of images with one protocol; write results.json, results.md and figures.

    Every (image, variant) is a resumable job with its own metrics.json under --out; rerunning the same command
    skips finished jobs, --shard I/N splits the grid across processes, --job K runs one job (see --list-jobs).
    """

    config: Annotated[BenchConfig, tyro.conf.OmitArgPrefixes]
    """Benchmark."""


def _error(message: str) -> None:
    print(f"rff-image: error: {message}", file=sys.stderr)
    sys.exit(2)


def main(command: Union[Fit, Bench]) -> None:
    """Run a parsed command; bad input ends with one line on stderr and exit status 2."""
    try:
        if isinstance(command, Fit):
            name = command.image.stem if command.image is not None else "astronaut"
            out = command.out or Path("outputs/rff-image") / f"{name}-{command.config.network.method}"
            metrics = run_fit(command.image, out, command.config, command.downsample, command.overwrite,
                              progress=command.progress)  # fmt: skip
            print(
                f"{metrics['method']} on {metrics['image']} ({metrics['width']}x{metrics['height']}): "
                f"PSNR {metrics['psnr']:.2f} dB (best {metrics['best_psnr']:.2f}), SSIM {metrics['ssim']:.4f}, "
                f"{metrics['seconds_per_iter']:.4f} s/iter, {metrics['num_params']:,} parameters -> {out}"
            )
        else:
            summary = run_bench(command.config)
            if summary is not None:
                out = command.config.out / "results.md"
                print(f"{summary['jobs_done']} of {summary['jobs_total']} jobs done -> {out}")
    except ValueError as error:  # ImageError, and invalid network settings (e.g. an image too small for its PE)
        _error(str(error).splitlines()[0] if str(error) else type(error).__name__)
    except KeyboardInterrupt:
        print("rff-image: interrupted", file=sys.stderr)
        sys.exit(130)


def entrypoint() -> None:
    """Console script ``rff-image``."""
    command = tyro.extras.subcommand_cli_from_dict(
        {
            "fit": Fit,
            "bench": Bench,
        },
        description=__doc__,
    )
    main(command)


if __name__ == "__main__":
    entrypoint()
