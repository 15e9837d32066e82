"""``rff-image``: fit coordinate networks to images, render them, and benchmark the methods.

Subcommands:
    fit     one method on one image: reconstruction.png, error.png, curves.png, metrics.json, model.pt
    bench   methods x images with one protocol (``--protocol FILE:NAME``): results.json, results.md, figures
    render  a finished fit on a finer (or coarser) pixel grid: a PNG
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal, Optional, Sequence, Union

import tyro

from rff_field.bench.image import BenchConfig
from rff_field.bench.image import run_bench as run_image_bench
from rff_field.bench.protocols import build_config, read_protocol
from rff_field.cli.common import LINE_SEARCH_FLAGS, note_unused_filter_options, run_command
from rff_field.common.options import Flat
from rff_field.common.outputs import check_fit_folder
from rff_field.core.errors import USAGE_EXIT_STATUS, UsageError, check_fields
from rff_field.image.fit import FitConfig, run_fit

LEGACY_FLAGS = {
    **LINE_SEARCH_FLAGS,
    "--lr-max": "--line-search.lr-max",
    "--lr-min": "--line-search.lr-min",
    "--rule": "--line-search.rule",
    "--direction": "--line-search.direction",
    "--c1": "--line-search.c1",
    "--ls-eps": "--line-search.eps",
    "--pe-bands": "--wire-bands",
}
"""Options of earlier versions (before the line-search options moved under ``--line-search.``)."""


@dataclass
class Fit:
    """Fit one image and write reconstruction.png, error.png, curves.png, model.pt and metrics.json into --out.

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
    config: Annotated[FitConfig, Flat] = field(default_factory=FitConfig)
    """Network and optimisation."""

    def main(self) -> dict:
        """Fit, write the outputs and print a one-line summary; returns the metrics."""
        check_fields(self, positive_int=("downsample",))
        name = self.image.stem if self.image is not None else "astronaut"
        out = self.out or Path("outputs/rff-image") / f"{name}-{self.config.network.method}"
        check_fit_folder(out, "image fit", "image")
        note_unused_filter_options(self.config.network.method, self.config.network, self.config)
        metrics = run_fit(self.image, out, self.config, self.downsample, self.overwrite, progress=self.progress)
        print(
            f"{metrics['method']} on {metrics['image']} ({metrics['width']}x{metrics['height']}): "
            f"PSNR {metrics['psnr']:.2f} dB (best {metrics['best_psnr']:.2f}), SSIM {metrics['ssim']:.4f}, "
            f"{metrics['seconds_per_iter']:.4f} s/iter, {metrics['num_params']:,} parameters -> {out}"
        )
        return metrics


@dataclass
class Bench:
    """Run methods over a folder of images with one protocol; write results.json, results.md and figures.

    Every (image, variant) is a resumable job with its own metrics.json under --out; rerunning the same command
    skips finished jobs, --shard I/N splits the grid across processes, --job K runs one job (see --list-jobs).
    """

    config: Annotated[BenchConfig, Flat]
    """Benchmark."""
    protocol: Annotated[Optional[str], tyro.conf.arg(metavar="FILE:NAME")] = None
    """FILE:NAME: start from the table NAME of a protocol file (e.g. benchmarks/image/protocols.toml:cpu); the
    other options given override it."""

    def main(self) -> Optional[dict]:
        """Run the pending jobs and summarise; returns the summary."""
        summary = run_image_bench(self.config)
        if summary is not None:
            print(f"{summary['jobs_done']} of {summary['jobs_total']} jobs done -> {self.config.out / 'results.md'}")
        return summary


@dataclass
class Render:
    """Render a finished fit's network (its model.pt) on a pixel grid of another size, e.g. twice as fine: the same
    [-1, 1] square as the fitted image, sampled between its pixels; writes a PNG."""

    fit: Path
    """Folder of the finished fit (holds metrics.json and model.pt), e.g. outputs/rff-image/photo-filtered-pe."""
    scale: float = 2.0
    """Size of the grid as a multiple of the fitted image's (1: the fitted grid again)."""
    output_path: Optional[Path] = None
    """The PNG to write; default: render-x<scale>.png in the fit's folder."""
    batch_size: int = 65536
    """Pixels evaluated at a time (bounds memory)."""
    device: Literal["cpu", "cuda"] = "cpu"
    """Where to evaluate the network."""
    overwrite: bool = False
    """Replace an existing --output-path."""

    def main(self) -> Path:
        """Render, write the PNG and print where; returns its path."""
        from rff_field.common.machine import resolve_device
        from rff_field.common.outputs import check_output_path
        from rff_field.image.data import save_image
        from rff_field.image.fit import RENDERS
        from rff_field.image.render import load_fitted_network, render_image

        check_fields(self, positive=("scale",), positive_int=("batch_size",))
        network, metrics = load_fitted_network(self.fit, resolve_device(self.device, fallback="cpu"))
        out = self.output_path or Path(self.fit) / RENDERS.replace("*", f"{self.scale:g}")
        check_output_path(out, (".png",), self.overwrite)
        height, width = (max(1, round(side * self.scale)) for side in (metrics["height"], metrics["width"]))
        if height * width > 2**28:
            raise UsageError(f"a {width}x{height} render is over 268 million pixels; choose a smaller --scale")
        out.parent.mkdir(parents=True, exist_ok=True)
        save_image(render_image(network, height, width, self.batch_size), out)
        print(f"wrote {out} ({width}x{height}, {metrics['method']} fitted at {metrics['width']}x{metrics['height']})")
        return out


Command = Union[
    Annotated[Fit, tyro.conf.subcommand("fit")],
    Annotated[Bench, tyro.conf.subcommand("bench")],
    Annotated[Render, tyro.conf.subcommand("render")],
]


def split_protocol(args: Sequence[str]) -> tuple[Optional[str], list[str]]:
    """The value of ``--protocol`` (None when absent) and the other arguments."""
    args = list(args)
    for index, arg in enumerate(args):
        if arg == "--protocol" and index + 1 < len(args):
            return args[index + 1], args[:index] + args[index + 2 :]
        if arg.startswith("--protocol="):
            return arg.split("=", 1)[1], args[:index] + args[index + 1 :]
    return None, args


def run_bench_with_protocol(prog: str, args: Sequence[str]) -> Optional[dict]:
    """Run :class:`Bench` on ``args``; a ``--protocol`` table gives the defaults the other options override.

    Args:
        prog: How the command is called (``rff-image bench``, ``rff-bench image``), for its help and messages.
        args: The arguments after the subcommand's name.
    """
    spec, rest = split_protocol(args)
    default = None
    if spec is not None:
        try:
            values, name = read_protocol(spec)
            default = Bench(build_config(BenchConfig, values, where=f"{name}."), protocol=spec)
        except UsageError as err:
            print(f"{prog}: error: {err}", file=sys.stderr)
            sys.exit(USAGE_EXIT_STATUS)
    return run_command(prog, Bench, Bench.__doc__ or "", LEGACY_FLAGS, rest, default=default)


def entrypoint(args: Optional[Sequence[str]] = None) -> None:
    """Console script ``rff-image``."""
    argv = list(sys.argv[1:] if args is None else args)
    if argv[:1] == ["bench"] and split_protocol(argv)[0] is not None:
        run_bench_with_protocol("rff-image bench", argv[1:])
    else:
        run_command("rff-image", Command, __doc__, LEGACY_FLAGS, argv)


if __name__ == "__main__":
    entrypoint()
