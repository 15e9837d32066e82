"""``rff-bench``: every benchmark of the project behind one command.

Subcommands:
    image                the image benchmark (the same as ``rff-image bench``); ``--protocol FILE:NAME`` starts
                         from a protocol table, e.g. benchmarks/image/protocols.toml:cpu
    image-merge          link finished jobs of other image benchmark folders into one (e.g. GPU and CPU runs)
    image-timing         seconds per iteration of image variants, side by side
    filter-timing        the filter alone at its own width and zero-padded, side by side
    batch-timing         K image fits one after another and batched, side by side
    reproduction-report  the reproduction study's tables and figures
    scale-report         the scale study's tables and figure
    sdf                  the SDF benchmark (the same as ``rff-sdf bench``)
    nerf                 NeRF variants trained and evaluated on one scene
    nerf-timing          seconds per NeRF training step of the variants, alternating in one process
    nerf-eval-timing     rays per second of finished NeRF variants rendering test views, taking turns in one process
    nerf-report          the NeRF benchmark's tables and figure
    hash-grid-timing     the proposal networks' torch hash grid, nerfstudio's and this package's, side by side
    startup-timing       the start of every ns-* command with the plugin's check of external methods and nerfstudio's
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Optional, Sequence, Union

import tyro

from rff_field.bench.image import check_merge, merge_runs
from rff_field.bench.nerf import (
    HashGridTiming,
    NerfBenchConfig,
    NerfEvalTiming,
    NerfReport,
    NerfTiming,
    StartupTiming,
)
from rff_field.bench.reproduction import ReproductionReport
from rff_field.bench.scale import ScaleReport
from rff_field.bench.timing import BatchTiming, FilterTiming, ImageTiming
from rff_field.cli import image as image_cli
from rff_field.cli import sdf as sdf_cli
from rff_field.cli.common import run_command
from rff_field.common.options import Flat
from rff_field.core.errors import UsageError


@dataclass
class ImageMerge:
    """Symlink every finished job of other image benchmark folders of the same protocol into one folder, so that
    one summary covers them (``rff-bench image --summarize-only --out INTO``)."""

    into: Path
    """The folder to fill (created; its own finished jobs win over linked ones)."""
    sources: tuple[Path, ...] = ()
    """Benchmark folders whose jobs are linked, later ones winning for the same job."""
    long_sources: tuple[Path, ...] = ()
    """Folders whose main jobs are this protocol's long runs (e.g. a benchmark run with --iters 20000)."""
    alias: tuple[str, ...] = ()
    """``FROM=TO``: a job label in the sources and the label it fills here."""

    def main(self) -> int:
        if not self.sources and not self.long_sources:
            raise UsageError("give at least one of --sources and --long-sources")
        if any("=" not in a for a in self.alias):
            raise UsageError(f"--alias takes FROM=TO, got {' '.join(self.alias)}")
        check_merge(self.sources, self.long_sources, self.into)
        pairs = [(s, None) for s in self.sources] + [(s, "long") for s in self.long_sources]
        linked = merge_runs(pairs, self.into, dict(a.split("=", 1) for a in self.alias))
        print(f"linked {linked} finished jobs into {self.into}")
        return linked


@dataclass
class Nerf:
    """Train and evaluate NeRF variants on one scene; each variant is a resumable job in OUT/runs/LABEL."""

    config: Annotated[NerfBenchConfig, Flat] = field(default_factory=NerfBenchConfig)

    def main(self) -> None:
        self.config.main()


Command = Union[
    Annotated[image_cli.Bench, tyro.conf.subcommand("image")],
    Annotated[ImageMerge, tyro.conf.subcommand("image-merge")],
    Annotated[ImageTiming, tyro.conf.subcommand("image-timing")],
    Annotated[FilterTiming, tyro.conf.subcommand("filter-timing")],
    Annotated[BatchTiming, tyro.conf.subcommand("batch-timing")],
    Annotated[ReproductionReport, tyro.conf.subcommand("reproduction-report")],
    Annotated[ScaleReport, tyro.conf.subcommand("scale-report")],
    Annotated[sdf_cli.Bench, tyro.conf.subcommand("sdf")],
    Annotated[Nerf, tyro.conf.subcommand("nerf")],
    Annotated[NerfTiming, tyro.conf.subcommand("nerf-timing")],
    Annotated[NerfEvalTiming, tyro.conf.subcommand("nerf-eval-timing")],
    Annotated[NerfReport, tyro.conf.subcommand("nerf-report")],
    Annotated[HashGridTiming, tyro.conf.subcommand("hash-grid-timing")],
    Annotated[StartupTiming, tyro.conf.subcommand("startup-timing")],
]


def entrypoint(args: Optional[Sequence[str]] = None) -> None:
    """Console script ``rff-bench``."""
    import sys

    from rff_field.nerf.quiet import quiet_known_warnings

    quiet_known_warnings()  # the NeRF benchmarks import nerfstudio, some of whose modules warn on import
    argv = list(sys.argv[1:] if args is None else args)
    if argv[:1] == ["image"] and image_cli.split_protocol(argv)[0] is not None:
        image_cli.run_bench_with_protocol("rff-bench image", argv[1:])
    else:
        legacy = sdf_cli.LEGACY_FLAGS if argv[:1] == ["sdf"] else image_cli.LEGACY_FLAGS  # each tool's earlier names
        run_command("rff-bench", Command, __doc__, legacy, argv)


if __name__ == "__main__":
    entrypoint()
