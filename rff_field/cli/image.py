"""``rff-image``: fit coordinate networks to images, render a fit on another pixel grid, and compare networks."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Optional, Sequence, Union

import tyro

from rff_field.cli.common import run_command
from rff_field.common.machine import bytes_per_sample, check_memory
from rff_field.common.options import Flat, Values
from rff_field.common.outputs import check_output_file, save_image
from rff_field.core.errors import TrainingDiverged, UsageError, check_fields
from rff_field.fit.bench import Job, apply_variant, parse_variant, run_bench
from rff_field.image.data import downsample, downsample_factor, load_image
from rff_field.image.fit import RENDER_BYTES_PER_PIXEL, ImageFitConfig, fit_image, load_fit, render
from rff_field.image.plots import plot_bench
from rff_field.inr.config import PRESETS, network_label

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp")
RENDER_CHUNK = 65536
"""Pixels per forward pass of ``render``."""


@dataclass
class Fit:
    """Fit one image (defaults: the WIRE repository's image fitting, filtered); write comparison.png,
    reconstruction.png, curves.png, model.pt and metrics.json. After Ctrl-C or --time-budget, rerun to go on."""

    image: Optional[Path] = None
    """Image file (PNG/JPEG; grayscale is fitted as one channel); default: scikit-image's astronaut."""
    output_dir: Optional[Path] = None
    """Output folder (default: outputs/rff-image/<image>-<network>)."""
    resolution_scale: Optional[float] = None
    """Fitted resolution, 1/k of the file's (area downsampling); default: 1 for --image, 0.25 for the astronaut."""
    overwrite: bool = False
    """Replace the fit already in --output-dir."""
    progress: bool = True
    """Show a progress bar."""
    config: Annotated[ImageFitConfig, Flat, Values] = field(default_factory=ImageFitConfig)

    def main(self) -> dict:
        """Fit, write the outputs and print a one-line summary; returns the metrics."""
        scale = self.resolution_scale if self.resolution_scale is not None else 1.0 if self.image else 0.25
        factor = downsample_factor(scale)
        self.config.check()
        pixels, name = load_image(self.image)
        pixels = downsample(pixels, factor)
        out = self.output_dir or Path("outputs/rff-image") / f"{name}-{network_label(self.config.network)}"
        metrics = fit_image(pixels, name, self.config, out, self.progress, self.overwrite)
        if metrics.get("diverged"):
            raise TrainingDiverged(f"{metrics['diverged']}; the outputs in {out} are marked diverged")
        ended = "stopped by --time-budget; the same command goes on" if metrics.get("stopped") else "done"
        print(f"{metrics['method']} on {name} ({metrics['width']}x{metrics['height']}): PSNR {metrics['psnr']:.2f} dB "
              f"(best {metrics['best_psnr']:.2f}), {metrics['parameters']:,} parameters, {ended} -> {out}")  # fmt: skip
        return metrics


@dataclass
class Render:
    """Render a finished fit's network on a pixel grid of another size over the fitted image's square, as a PNG."""

    fit: Path
    """Folder of the finished fit (holds metrics.json and model.pt)."""
    resolution_scale: float = 2.0
    """The grid's resolution as a multiple of the fitted image's."""
    output_path: Optional[Path] = None
    """The PNG to write; default: render-x<resolution-scale>.png in the fit's folder."""
    overwrite: bool = False
    """Replace an existing --output-path."""

    def main(self) -> Path:
        """Render, write the PNG and print where; returns its path."""
        check_fields(self, positive=("resolution_scale",))
        network, metrics = load_fit(self.fit)
        out = self.output_path or self.fit / f"render-x{self.resolution_scale:g}.png"
        if out.suffix.lower() != ".png":
            raise UsageError(f"--output-path {out} must end in .png")
        check_output_file(out, "--output-path", self.overwrite)

        def grid(scale: float) -> tuple[int, int]:
            return tuple(max(1, round(min(side * scale, 1e18))) for side in (metrics["height"], metrics["width"]))

        chunk = RENDER_CHUNK * bytes_per_sample(network, training=False)
        check_memory("--resolution-scale", self.resolution_scale,
                     lambda scale: chunk + RENDER_BYTES_PER_PIXEL * math.prod(grid(scale)))  # fmt: skip
        height, width = grid(self.resolution_scale)
        save_image(render(network, height, width, RENDER_CHUNK), out, self.overwrite)
        print(f"wrote {out} ({width}x{height}, {metrics['method']} fitted at {metrics['width']}x{metrics['height']})")
        return out


@dataclass
class Bench:
    """Fit every variant ([LABEL:]PRESET[,key=value...]; presets mlp-pe, mlp-rff, filtered-pe, filtered-rff, siren,
    gauss, wire, sape) to every image into runs/<image>/<variant>/ and results.json/md/png; a rerun goes on."""

    images: Path
    """Folder of images (or one image file)."""
    output_dir: Path = Path("outputs/rff-image-bench")
    """Output folder."""
    variants: tuple[str, ...] = ("mlp-pe", "mlp-rff", "filtered-pe", "filtered-rff", "siren", "gauss", "wire", "sape")
    """The rows of the table."""
    names: tuple[str, ...] = ()
    """Images to use (file stems), in this order; default: every image in --images."""
    resolution_scale: float = 1.0
    """Every image's resolution as fitted, 1/k of the file's (area downsampling)."""
    shard: str = "1/1"
    """I/N: run jobs I, I+N, I+2N, ... of the grid (1-based)."""
    progress: bool = True
    """Show each fit's progress bar."""
    config: Annotated[ImageFitConfig, Flat, Values] = field(default_factory=ImageFitConfig)

    def main(self) -> list[dict]:
        """Run this shard's unfinished jobs; returns the finished jobs' rows."""
        factor = downsample_factor(self.resolution_scale)
        self.config.check()
        variants = [parse_variant(text, PRESETS) for text in self.variants]
        configs = {variant.label: apply_variant(self.config, variant, PRESETS) for variant in variants}  # checked
        files = self.image_files()

        def run_job(job: Job) -> None:
            pixels, _ = load_image(files[job.input], "--images")
            fit_image(downsample(pixels, factor), job.input, configs[job.variant.label], job.folder,
                      self.progress)  # fmt: skip

        protocol = {"config": asdict(self.config), "resolution_scale": self.resolution_scale}
        columns = [("PSNR", "psnr", ".2f"), ("SSIM", "ssim", ".4f"), ("parameters", "parameters", ".0f"),
                   ("s/step", "seconds_per_step", ".4f")]  # fmt: skip
        rows = run_bench(self.output_dir, list(files), variants, run_job, protocol, columns, self.shard, plot_bench)
        print(f"{len(rows)} of {len(files) * len(variants)} jobs finished -> {self.output_dir / 'results.md'}")
        return rows

    def image_files(self) -> dict[str, Path]:
        """The images by name, in the order of --names (default: sorted)."""
        if self.images.is_file():
            files = {self.images.stem: self.images}
        elif self.images.is_dir():
            files = {p.stem: p for p in sorted(self.images.iterdir()) if p.suffix.lower() in IMAGE_SUFFIXES}
        else:
            raise UsageError(f"--images {self.images}: no such folder or file")
        missing = [name for name in self.names if name not in files]
        if missing or not files:
            raise UsageError(f"--images {self.images} holds no image {' '.join(missing) or '(PNG, JPEG, ...)'}")
        return {name: files[name] for name in self.names} if self.names else files


Command = Union[
    Annotated[Fit, tyro.conf.subcommand("fit")],
    Annotated[Render, tyro.conf.subcommand("render")],
    Annotated[Bench, tyro.conf.subcommand("bench")],
]


def entrypoint(args: Optional[Sequence[str]] = None) -> None:
    """Console script ``rff-image``."""
    run_command("rff-image", Command, __doc__, args)


if __name__ == "__main__":
    entrypoint()
