"""``rff-image bench``: one protocol, many methods, a folder of images; resumable jobs and summary tables.

Every (image, variant, iterations) is a job that writes its own folder with ``metrics.json``; a job whose
``metrics.json`` exists is skipped, so a grid can be interrupted, resumed, split across processes
(``shard``) or machines (``job``), and summarised at any time. Jobs come in three groups:

* ``main``: every variant on every image (``runs/<image>/<label>``);
* ``sweep``: the robustness study, ``mlp-rff``/``filtered-rff`` over RFF sigma and the log-linear PE with and
  without the filter over its scale (``sweep/<image>/<label>``);
* ``long``: some variants on some images with more iterations (``long/<image>/<label>``).

A *variant* is ``[LABEL:]METHOD[,key=value...]``: a method plus overrides of any ``FitConfig`` or
``NetworkConfig`` field (``filtered-pe,line_search=false``, ``sig5:mlp-rff,rff_sigma=5``), and the special key
``match_params=LABEL`` that widens the hidden layers until the network has as many parameters as that variant
(``match_by=depth``: adds hidden layers instead).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import shutil
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Annotated, Callable, Literal, Optional, Sequence

import numpy as np

from rff_field.bench.jobs import (
    Job,
    ResumableJobOptions,
    check_no_failures,
    checkpoint_status,
    claim_benchmark_folder,
    describe_conflicts,
    is_finished,
    job_table,
    print_jobs,
    read_benchmark,
    run_batches,
    run_jobs,
    selected,
)
from rff_field.bench.variants import Variant, note_unused_filter_keys, set_options
from rff_field.bench.variants import parse_variant as parse_variant_text
from rff_field.common.checkpoint import CHECKPOINT_FILE, checkpoint_iteration, differing_settings
from rff_field.common.datasets import DATA_ROOT
from rff_field.common.machine import resolve_device
from rff_field.common.options import Flat
from rff_field.common.outputs import BENCHMARK_FILE, check_writable_folder, write_text
from rff_field.common.progress import print_note
from rff_field.core.errors import TrainingDiverged, check_fields
from rff_field.core.optim import LineSearchConfig
from rff_field.image.batched import ImageJob, batch_key, fit_images
from rff_field.image.checkpoint import FitCheckpoint, fit_settings
from rff_field.image.data import UsageError, downsample, load_image
from rff_field.image.fit import IMAGE_METHODS, FitConfig, fit_image, prepare_image, run_fit, write_fit_outputs
from rff_field.image.plots import history_series
from rff_field.inr.config import METHODS, NetworkConfig, build_network, count_parameters

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp")

PRESETS: dict[str, str] = {
    "mlp-pe": "mlp-pe",
    "mlp-pe-matched": "mlp-pe,match_params=filtered-pe",
    "filtered-pe": "filtered-pe",
    "filtered-pe-fixed-lr": "filtered-pe,line_search.enabled=false",
    "filtered-pe-bias": "filtered-pe,filter_bias=true",
    "siren": "siren",
    "gauss": "gauss",
    "mlp-rff": "mlp-rff",
    "mlp-pe-loglinear": "mlp-pe,pe=loglinear",
    "wire": "wire",
    "filtered-rff": "filtered-rff",
    "filtered-rff-fixed-lr": "filtered-rff,line_search.enabled=false",
    "mlp-rff-matched": "mlp-rff,match_params=filtered-rff",
    "filtered-pe-loglinear": "filtered-pe,pe=loglinear",
    "sape": "sape,sape_embedding=rff",
    "sape-pe": "sape,sape_embedding=pe,pe=loglinear",
}
"""Named variants. ``-fixed-lr``: constant filter rate (no line search); ``-bias``: filter with biases;
``-matched``: no filter, hidden width raised to the filtered network's total parameters; ``-loglinear``: the
paper's log-linear PE (``pe_frequencies`` per axis up to ``pe_scale``: 256 channels by default) instead of WIRE's;
``sape``/``sape-pe``: SAPE on the RFF / the log-linear PE."""
RENAMED_PRESETS: dict[str, str] = {
    "mlp-pe-eqparams": "mlp-pe-matched",
    "mlp-rff-eqparams": "mlp-rff-matched",
    "filtered-pe-nols": "filtered-pe-fixed-lr",
    "filtered-rff-nols": "filtered-rff-fixed-lr",
    "mlp-pe-wide": "mlp-pe-loglinear",
    "filtered-pe-wide": "filtered-pe-loglinear",
}
"""Preset names of earlier versions: accepted with a notice, and their finished job folders still count."""
EARLIER_LABELS = {new: old for old, new in RENAMED_PRESETS.items()}

DEFAULT_VARIANTS: tuple[str, ...] = tuple(name for name in PRESETS if not name.startswith("sape"))
"""Default grid, roughly cheapest first on a CPU (the filter on a 256-channel embedding dominates the cost). The
SAPE presets are left out so that job numbers of grids started before SAPE existed stay valid; add them with
``--variants``."""


def parse_variant(text: str) -> Variant:
    """Parse ``[LABEL:]METHOD[,key=value...]`` or a preset name (see :data:`PRESETS`)."""
    if text.strip() in RENAMED_PRESETS:
        print_note(f"preset {text.strip()} is now {RENAMED_PRESETS[text.strip()]}")
        text = RENAMED_PRESETS[text.strip()]
    variant = parse_variant_text(text, PRESETS, methods=IMAGE_METHODS)
    note_unused_filter_keys(variant, print_note)
    return variant


def apply_overrides(base: FitConfig, overrides: dict[str, str]) -> FitConfig:
    """A copy of ``base`` with ``key=value`` overrides of its options (``match_*`` are resolved by the caller)."""
    config = copy.deepcopy(base)
    if "match_by" in overrides:
        match_field(overrides["match_by"])  # fails now, before any training, on an unknown value
    set_options([config], overrides, skip=("match_params", "match_by"), notify=print_note)
    return config


def parameter_count(config: NetworkConfig, channels: int, sidelength: int) -> int:
    """Trainable parameters of the network ``config`` builds for a 2D image."""
    return count_parameters(build_network(config, 2, channels, sidelength=sidelength))


MATCH_FIELDS = {"width": "hidden_features", "depth": "hidden_layers"}
"""What ``match_by`` raises to reach the matched parameter count: the hidden width or the number of hidden layers."""


def match_field(by: str) -> str:
    """The NetworkConfig field that ``match_by=by`` raises."""
    if by not in MATCH_FIELDS:
        raise UsageError(f"match_by={by}: choose one of {', '.join(MATCH_FIELDS)}")
    return MATCH_FIELDS[by]


def match_size(config: NetworkConfig, target: int, channels: int, sidelength: int, by: str = "width") -> int:
    """The hidden width (``by="width"``) or hidden-layer count (``"depth"``) whose network's parameter count is
    closest to ``target`` (bisection; the other dimensions stay as in ``config``)."""
    name = match_field(by)

    def count(size: int) -> int:
        return parameter_count(replace(config, **{name: size}), channels, sidelength)

    low, high = (1 if by == "width" else 0), max(2, getattr(config, name))
    while count(high) < target:
        high *= 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if count(mid) < target else (low, mid)
    return min((low, high), key=lambda size: abs(count(size) - target))


@dataclass
class BenchConfig:
    """A benchmark: variants x images with one protocol, the robustness sweep, and longer runs."""

    images: Path = DATA_ROOT / "kodak"
    """Folder of images (PNG/JPEG); the default lies under $RFF_DATA when that is set."""
    out: Path = Path("outputs/bench-image")
    """Output folder: one subfolder per job, plus results.json, results.md and figures."""
    names: tuple[str, ...] = ()
    """Image names (file stems) to use, in this order; empty: every image in the folder."""
    variants: tuple[str, ...] = DEFAULT_VARIANTS
    """Variants of the main grid: preset names or ``[LABEL:]METHOD[,key=value...]``, e.g.
    ``wide:filtered-pe,hidden_features=128,line_search.lr_max=1e-2``; keys are this command's options with
    underscores, ``match_params=LABEL`` sizes a plain network to another variant's parameter count."""
    fit: Annotated[FitConfig, Flat] = field(
        default_factory=lambda: FitConfig(iters=5000, network=NetworkConfig(hidden_features=64), log_every=250)
    )
    """The protocol shared by every job (a variant overrides some of it)."""
    downsample: int = 4
    """Area-downsampling factor of every image (4: Kodak at 192x128, where 3x64 networks have the paper's
    parameters per value)."""
    sweep_names: tuple[str, ...] = ("kodim05",)
    """Images of the robustness sweep (empty: no sweep)."""
    sweep_sigmas: tuple[float, ...] = (1.0, 5.0, 10.0, 20.0, 40.0)
    """RFF sigmas of the sweep (mlp-rff and filtered-rff)."""
    sweep_pe_scales: tuple[float, ...] = (8.0, 16.0, 32.0, 64.0, 128.0)
    """Log-linear PE scales of the sweep (mlp-pe and filtered-pe with ``pe=loglinear``)."""
    sweep_iters: Optional[int] = None
    """Iterations of the sweep runs (default: the protocol's)."""
    long_names: tuple[str, ...] = ("kodim05",)
    """Images that also get the long runs (empty: none)."""
    long_iters: int = 20000
    """Iterations of the long runs (the paper's 20k)."""
    long_variants: tuple[str, ...] = ()
    """Variants of the long runs (empty: those of the main grid)."""
    reference_variants: tuple[str, ...] = ()
    """Variants that ``match_params`` may name without running them (e.g. the filtered network whose parameter
    count a separate invocation's plain MLP matches)."""
    crops_image: Optional[str] = None
    """Image shown in the crops figure (default: the first image)."""
    summarize_only: bool = False
    """Run nothing; rebuild results.json, results.md and the figures from the finished jobs."""
    jobs: Annotated[ResumableJobOptions, Flat] = field(default_factory=ResumableJobOptions)
    """Which jobs to run, and how."""
    engine: Literal["batched", "sequential", "auto"] = "batched"
    """``batched``: fit jobs that share a network shape, image size and settings together, as one batched
    computation (``rff_field.image.batched``; same results as one by one; each batch's jobs are written when it
    finishes); ``sequential``: one job at a time, each written when it finishes; ``auto``: the same as
    ``batched`` (kept for older commands)."""
    batch_models: int = 8
    """With ``--engine batched``: the most jobs fitted together."""
    progress: bool = True
    """Show a progress bar per job (per batch with ``--engine batched``)."""


GROUP_FOLDERS = {"main": "runs", "sweep": "sweep", "long": "long"}
"""The folder of each group's jobs (``<folder>/<image>/<label>``)."""


def list_images(folder: Path, names: tuple[str, ...], option: str = "--names") -> list[Path]:
    """The images of ``folder`` (sorted; hidden files such as macOS's ``._*`` are not images), or those named (by
    ``option``), in the given order."""
    if not folder.is_dir():
        raise UsageError(f"--images {folder} is not a folder; give a folder of PNG/JPEG images")
    entries = [p for p in sorted(folder.iterdir()) if p.suffix.lower() in IMAGE_SUFFIXES and not p.name.startswith(".")]
    broken = [p for p in entries if p.is_symlink() and not p.exists()]
    if broken:
        raise UsageError(f"{broken[0]} in --images is a link to {os.readlink(broken[0])}, which does not exist; "
                         "fix or remove the link")  # fmt: skip
    paths = [p for p in entries if p.is_file()]
    if not paths:
        searched = " (subfolders are not searched)" if any(p.is_dir() for p in folder.iterdir()) else ""
        raise UsageError(f"no PNG/JPEG images in {folder}{searched}; give --images a folder of images")
    available = {p.stem: p for p in paths}
    if len(available) < len(paths):
        stem = next(stem for stem in available if sum(p.stem == stem for p in paths) > 1)
        files = " and ".join(p.name for p in paths if p.stem == stem)
        raise UsageError(f"{files} in {folder} share the name {stem!r} (jobs are named by file stem); rename one")
    if not names:
        return paths
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise UsageError(f"{option} names {', '.join(repeated)} more than once; name each image once")
    missing = [name for name in names if name not in available]
    if missing:
        raise UsageError(f"{option} names {', '.join(missing)}, which {folder} lacks; give file stems of its images")
    return [available[name] for name in names]


def check_group_names(config: "BenchConfig") -> None:
    """One error for all of --sweep-names and --long-names that name images the folder lacks (their defaults name
    Kodak images, so a folder of one's own usually lacks them for both)."""
    available = {path.stem for path in list_images(config.images, ())}
    sweeps = config.sweep_sigmas or config.sweep_pe_scales
    named = {"--sweep-names": config.sweep_names if sweeps else (), "--long-names": config.long_names}
    missing = {option: [n for n in names if n not in available] for option, names in named.items()}
    missing = {option: lacking for option, lacking in missing.items() if lacking}
    if missing:
        what = "; ".join(f"{option} names {', '.join(lacking)}" for option, lacking in missing.items())
        raise UsageError(
            f"{what}, which {config.images} lacks; give file stems of its images, or pass {' '.join(missing)} "
            "with no names to skip those runs"
        )


def sweep_variants(config: BenchConfig) -> list[Variant]:
    """The robustness sweep's variants."""
    out = []
    for sigma in config.sweep_sigmas:
        for method in ("mlp-rff", "filtered-rff"):
            out.append(parse_variant(f"{method}-sigma{sigma:g}:{method},rff_sigma={sigma:g}"))
    for scale in config.sweep_pe_scales:
        for method in ("mlp-pe", "filtered-pe"):
            out.append(parse_variant(f"{method}-scale{scale:g}:{method},pe=loglinear,pe_scale={scale:g}"))
    return out


def build_jobs(config: BenchConfig) -> list[Job]:
    """Every job, in running order: main grid (variant-major), then the sweep, then the long runs."""
    images = list_images(config.images, config.names)
    check_group_names(config)
    variants = [parse_variant(v) for v in config.variants]
    labels = [v.label for v in variants]
    if len(set(labels)) != len(labels):
        raise UsageError(f"two variants share a label in {labels}; give them distinct LABEL: prefixes")
    jobs: list[Job] = []

    def add(group: str, paths: list[Path], group_variants: list[Variant], iters: int) -> None:
        for variant in group_variants:
            for path in paths:
                folder = Path(GROUP_FOLDERS[group]) / path.stem / variant.label
                earlier = folder.with_name(EARLIER_LABELS.get(variant.label, variant.label))
                if not (config.out / folder).exists() and (config.out / earlier / "metrics.json").is_file():
                    folder = earlier  # finished under the preset's earlier name
                jobs.append(Job(len(jobs), folder, variant, path.stem, group, iters, path))

    add("main", images, variants, config.fit.iters)
    if config.sweep_names and (config.sweep_sigmas or config.sweep_pe_scales):
        add("sweep", list_images(config.images, config.sweep_names, "--sweep-names"), sweep_variants(config),
            config.sweep_iters or config.fit.iters)  # fmt: skip
    if config.long_names:
        long_variants = [parse_variant(v) for v in config.long_variants] if config.long_variants else variants
        add("long", list_images(config.images, config.long_names, "--long-names"), long_variants, config.long_iters)
    for job in jobs:  # resolve every variant's overrides now, so that a bad one fails before any training
        try:
            fit = apply_overrides(config.fit, job.variant.overrides)
            fit.iters = job.iters
            fit.check()
        except UsageError as err:
            raise UsageError(f"variant {job.variant.label!r} ({job.variant.spec}): {err}") from None
    return jobs


def check_images(config: BenchConfig, jobs: list[Job], notify: Optional[Callable[[str], None]] = None) -> None:
    """Read every image of ``jobs`` once and build each job's network for it, so that a corrupt image, or one too
    small for a job's embedding, fails before anything is written or trained; pass on each image's notices (an
    alpha channel dropped, ...) once."""
    sizes = {}
    for path in dict.fromkeys(j.source for j in jobs):
        image = load_image(path)
        for notice in image.notices:
            (notify or print_note)(notice)
        sizes[path] = downsample(image.pixels, config.downsample).shape
    for job in jobs:
        height, width, channels = sizes[job.source]
        try:
            fit = job_config(config, job, channels, max(height, width))
        except UsageError as err:
            raise UsageError(f"variant {job.variant.label!r}: {err}") from None
        try:
            build_network(fit.network, 2, channels, sidelength=max(height, width))
        except UsageError as err:
            raise UsageError(
                f"{job.source.name} is {width}x{height} at --downsample {config.downsample}, and variant "
                f"{job.variant.label!r} cannot fit it: {err}"
            ) from None


def job_config(config: BenchConfig, job: Job, channels: int, sidelength: int) -> FitConfig:
    """The FitConfig of a job, with ``match_params`` resolved for this image."""
    fit = apply_overrides(config.fit, job.variant.overrides)
    fit.iters = job.iters
    target_label = job.variant.overrides.get("match_params")
    if target_label:
        specs = (*config.variants, *config.long_variants, *config.reference_variants, *PRESETS)
        known = {v.label: v for v in map(parse_variant, specs)}
        if target_label not in known:
            raise UsageError(
                f"match_params={target_label}: no variant with that label; name one of --variants, or add it "
                "to --reference-variants"
            )
        target = apply_overrides(config.fit, known[target_label].overrides).network
        target_params = parameter_count(target, channels, sidelength)
        by = job.variant.overrides.get("match_by", "width")
        setattr(fit.network, match_field(by),
                match_size(fit.network, target_params, channels, sidelength, by))  # fmt: skip
    return fit


def protocol_of(config: BenchConfig) -> dict:
    """What must agree between runs written into one folder."""
    fit = asdict(config.fit)
    for key in ("device", "log_every", "lpips", "dump_embedding", "cache_embedding", "error_vmax"):
        fit.pop(key)
    return {"fit": fit, "downsample": config.downsample}


def image_fingerprints(jobs: list[Job]) -> dict[str, str]:
    """``{name: SHA-256 of the file}`` of the jobs' images: finished jobs are reused only for the same images."""
    sources = {job.subject: job.source for job in jobs}
    return {name: hashlib.sha256(source.read_bytes()).hexdigest() for name, source in sources.items()}


JOB_FOLDERS = ("runs/*/*", "sweep/*/*", "long/*/*", "partial")
"""The job folders of an image benchmark (and where stopped batches keep their checkpoints)."""


def benchmark_protocol(config: BenchConfig, jobs: list[Job]) -> dict:
    """What every job in the benchmark's folder shares, with the images (by content) and jobs it holds."""
    return {**protocol_of(config), "images": image_fingerprints(jobs), "jobs": job_table(jobs)}


def read_image_benchmark(folder: Path) -> Optional[dict]:
    """The protocol of the image benchmark in ``folder``, its line-search options nested as today's; None where it
    holds none."""
    found = read_benchmark(folder) if Path(folder).is_dir() else None
    return _with_nested_line_search(found[1]) if found is not None and found[0] == "image" else None


def _check_out(config: BenchConfig, jobs: list[Job]) -> None:
    claim_benchmark_folder(config.out, "image", benchmark_protocol(config, jobs), config.jobs.overwrite, JOB_FOLDERS,
                           growing=("images", "jobs"), compared=_with_nested_line_search)  # fmt: skip


def check_summarized_protocol(config: BenchConfig, jobs: list[Job]) -> None:
    """Raise :class:`UsageError` unless ``config.out`` holds an image benchmark run with this protocol (what
    ``--summarize-only`` would describe)."""
    stored = read_image_benchmark(config.out)
    if stored is None:
        raise UsageError(f"{config.out} holds no image benchmark ({BENCHMARK_FILE}); run it first")
    conflicts = differing_settings(stored, benchmark_protocol(config, jobs))
    if conflicts:
        reasons = describe_conflicts(conflicts)
        raise UsageError(f"--summarize-only: {config.out} was run with another protocol ({reasons}; see "
                         f"{config.out / BENCHMARK_FILE}); give the options it was run with")  # fmt: skip


def check_merge(sources: Sequence[Path], long_sources: Sequence[Path], into: Path) -> None:
    """Raise :class:`UsageError` unless every source holds an image benchmark of one protocol (the long sources: but
    for their iterations) and ``into`` is new, empty or holds one of that protocol too."""

    def shared(protocol: dict, long: bool) -> dict:
        fit = {key: value for key, value in protocol.get("fit", {}).items() if not (long and key == "iters")}
        return {**{key: protocol[key] for key in protocol if key not in ("images", "jobs")}, "fit": fit}

    if into.resolve() in {Path(source).resolve() for source in (*sources, *long_sources)}:
        raise UsageError(f"--into {into} is one of the sources; merge into another folder")
    first = None
    for source, long in [(s, False) for s in sources] + [(s, True) for s in long_sources]:
        stored = read_image_benchmark(source)
        if stored is None:
            raise UsageError(f"{source} holds no image benchmark ({BENCHMARK_FILE}); give folders of `rff-bench image`")
        protocol = shared(stored, long)
        if first is None:
            first = (source, protocol)
        conflicts = differing_settings(first[1], protocol)
        if conflicts:
            reasons = describe_conflicts(conflicts, f"in {first[0]}", f"in {source}")
            raise UsageError(f"{source} holds a benchmark of another protocol than {first[0]} ({reasons}); merge runs "
                             "of one protocol")  # fmt: skip
    check_writable_folder(into, "--into")
    if into.is_dir() and any(not p.name.startswith(".") for p in into.iterdir()):
        stored = read_image_benchmark(into)
        if stored is None:
            raise UsageError(f"{into} is not empty and holds no image benchmark; choose another --into")
        conflicts = differing_settings(first[1], shared(stored, False))
        if conflicts:
            reasons = describe_conflicts(conflicts, f"in {first[0]}", f"in {into}")
            raise UsageError(f"{into} holds a benchmark of another protocol ({reasons}); choose another --into")


def merge_runs(sources: list[tuple[Path, Optional[str]]], out: Path, aliases: dict[str, str]) -> int:
    """Symlink every finished job folder (``{runs,sweep,long}/<image>/<label>``) of the source folders into
    ``out`` (a source's ``runs`` jobs go to the group given with it, if any)."""
    out.mkdir(parents=True, exist_ok=True)
    first = sources[0][0] / BENCHMARK_FILE
    if not (out / BENCHMARK_FILE).exists() and first.exists():
        shutil.copy(first, out / BENCHMARK_FILE)
    linked = {}
    for source, main_group in sources:
        for metrics in sorted(source.glob("*/*/*/metrics.json")):
            group, image, label = metrics.parent.relative_to(source).parts
            group = main_group if group == "runs" and main_group else group
            if group in ("runs", "sweep", "long"):
                linked[(group, image, aliases.get(label, label))] = metrics.parent.resolve()
    count = 0
    for (group, image, label), folder in linked.items():
        target = out / group / image / label
        if target.is_symlink():
            target.unlink()
        elif target.exists():
            continue  # a job run in this folder itself
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(folder, target_is_directory=True)
        count += 1
    return count


def run_job(config: BenchConfig, job: Job, notify: Optional[Callable[[str], None]] = None) -> dict:
    """Fit one job and write its folder; returns its metrics."""
    image = load_image(job.source)
    pixels = downsample(image.pixels, config.downsample)
    height, width, channels = pixels.shape
    fit = job_config(config, job, channels, max(height, width))
    extra = {"label": job.variant.label, "variant": job.variant.spec, "group": job.group}

    def notify_new(message: str) -> None:  # check_images passed on the image's own notices
        if message not in image.notices:
            (notify or print_note)(message)

    try:
        return run_fit(job.source, config.out / job.folder, fit, config.downsample, overwrite=True,
                       progress=config.progress, notify=notify_new, extra_metrics=extra)  # fmt: skip
    except TrainingDiverged as err:  # its outputs are written and marked: the benchmark goes on
        (notify or print)(f"{job.folder}: {err}")
        return json.loads((config.out / job.folder / "metrics.json").read_text())


PARTIAL_FOLDER = "partial"
"""Where a batch stopped by the time budget writes what it reached and its checkpoints (its jobs stay pending)."""


def checkpoint_path(config: BenchConfig, job: Job) -> Path:
    """Where ``job`` keeps its checkpoint until it finishes (with ``--overwrite`` it is removed, not resumed)."""
    return config.out / PARTIAL_FOLDER / job.folder / CHECKPOINT_FILE


def remove_checkpoint(config: BenchConfig, job: Job) -> None:
    """Remove the checkpoint of a finished ``job`` from ``partial/``, and the folders it leaves empty there."""
    path = checkpoint_path(config, job)
    path.unlink(missing_ok=True)
    partial_root = config.out / PARTIAL_FOLDER
    folder = path.parent
    while folder != partial_root.parent and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent


def place_checkpoint(config: BenchConfig, job: Job) -> None:
    """Put the checkpoint that either engine left for ``job`` where this run's engine looks (the batched one under
    ``partial/``, the sequential one in the job's folder), keeping the further of two; with ``--overwrite`` remove
    both."""
    batched, sequential = checkpoint_path(config, job), config.out / job.folder / CHECKPOINT_FILE
    here, there = (sequential, batched) if config.engine == "sequential" else (batched, sequential)
    if config.jobs.overwrite:
        here.unlink(missing_ok=True)
        there.unlink(missing_ok=True)
    elif there.is_file():
        if checkpoint_iteration(there, FitCheckpoint) > checkpoint_iteration(here, FitCheckpoint):
            here.parent.mkdir(parents=True, exist_ok=True)
            os.replace(there, here)
        else:
            there.unlink()
    if config.engine == "sequential":
        remove_checkpoint(config, job)  # moved or removed: the folders it leaves empty under partial/ go too


def pending_status(config: BenchConfig, job: Job) -> str:
    """``pending``, or where the checkpoint of a job that was stopped (or is running) stands: ``checkpoint at 5000``
    (the batched engine keeps it under ``partial/``, the sequential one in the job's folder)."""
    status = checkpoint_status(checkpoint_path(config, job), FitCheckpoint)
    if status == "pending":
        status = checkpoint_status(config.out / job.folder / CHECKPOINT_FILE, FitCheckpoint)
    return status


def job_batch_key(config: BenchConfig, job: Job) -> str:
    """Jobs with equal keys can be fitted together (:func:`rff_field.image.batched.batch_key`, and the iteration
    their checkpoints resume them at); a job whose method cannot be batched gets a key of its own."""
    image = prepare_image(job.source, config.downsample)
    fit = job_config(config, job, image.pixels.shape[-1], max(image.pixels.shape[:2]))
    if fit.network.method not in METHODS:
        return f"job {job.index}"
    resume = 0
    if not config.jobs.overwrite:
        resume = checkpoint_iteration(
            checkpoint_path(config, job), FitCheckpoint, fit_settings(fit, image.name, image.pixels)
        )
    return f"{batch_key(fit, image.pixels.shape)} from {resume}"


def run_batch(
    config: BenchConfig, jobs: list[Job], stop_at: Optional[float], notify: Optional[Callable[[str], None]] = None
) -> bool:
    """Fit ``jobs`` together and write their folders; False when ``stop_at`` passed first: the jobs stay pending and
    what the batch fitted by then is written under ``partial/`` (curves to that iteration, marked ``stopped``), with
    a checkpoint from which the next run goes on (unless it is given ``--overwrite``)."""
    fitted, loaded = [], []
    for job in jobs:
        image = prepare_image(job.source, config.downsample)
        fit = job_config(config, job, image.pixels.shape[-1], max(image.pixels.shape[:2]))
        fitted.append(ImageJob(image.pixels, fit, image.name))
        loaded.append(image)
    checkpoints = [checkpoint_path(config, job) for job in jobs]
    if config.jobs.overwrite:
        for path in checkpoints:
            path.unlink(missing_ok=True)
    if fitted[0].config.network.method in METHODS:
        results = fit_images(fitted, progress=config.progress, notify=notify, stop_at=stop_at, checkpoints=checkpoints)
    else:  # SAPE cannot be batched: a batch of its own (job_batch_key)
        pixels, fit, name = fitted[0]
        results = [fit_image(pixels, fit, name, config.progress, notify, stop_at=stop_at, checkpoint=checkpoints[0])]
    stopped = any("stopped" in result.metrics for result in results)
    for job, image, result in zip(jobs, loaded, results):
        result.metrics.update(source=image.source, downsample=config.downsample, label=job.variant.label,
                              variant=job.variant.spec, group=job.group)  # fmt: skip
        folder = config.out / PARTIAL_FOLDER / job.folder if stopped else config.out / job.folder
        write_fit_outputs(result, folder, error_vmax=result.metrics["config"]["error_vmax"], overwrite=True)
        if "diverged" in result.metrics:
            (notify or print)(f"{job.folder}: {result.metrics['diverged']}; its outputs are marked diverged")
        if not stopped:
            remove_checkpoint(config, job)
    if stopped:
        (notify or print)(f"{results[0].metrics['stopped']}: this batch's jobs stay pending; what they reached is in "
                          f"{config.out / PARTIAL_FOLDER}, and the same command goes on from there")  # fmt: skip
    return not stopped


def checked_jobs(config: BenchConfig) -> list[Job]:
    """The benchmark's jobs, its options checked (nothing read or written yet)."""
    check_fields(config, positive_int=("downsample", "batch_models", "sweep_iters", "long_iters"))
    jobs = build_jobs(config)
    if not jobs:
        raise UsageError("nothing to run: --variants is empty and there are no sweep or long runs; give a variant")
    subjects = list(dict.fromkeys(job.subject for job in jobs if job.group == "main"))
    if config.crops_image is not None and config.crops_image not in subjects:
        raise UsageError(f"--crops-image {config.crops_image} is not one of the images: {', '.join(subjects)}")
    config.jobs.check(jobs)
    return jobs


def check_before_work(config: BenchConfig, jobs: list[Job], notify: Optional[Callable[[str], None]] = None) -> None:
    """What :func:`run_bench` checks before any fit, beyond the options: every image of this shard's jobs, and that
    ``--out`` holds no other benchmark (it becomes this one's)."""
    check_images(config, selected(jobs, config.jobs), notify)
    _check_out(config, jobs)


def run_bench(config: BenchConfig, notify: Optional[Callable[[str], None]] = None) -> Optional[dict]:
    """Run the pending jobs of this shard (or one job) and summarise; returns the summary (None for --job)."""
    jobs = checked_jobs(config)
    if config.jobs.list_jobs:
        print_jobs(jobs, config.out, partial(pending_status, config))
        return None
    resolve_device(config.fit.device)
    if config.summarize_only:
        if not any(is_finished(config.out, job) for job in jobs):
            raise UsageError(f"no finished jobs of this benchmark under {config.out}; run it first")
        check_summarized_protocol(config, jobs)
        return summarize(config, jobs)
    check_before_work(config, jobs, notify)
    todo = selected(jobs, config.jobs)
    for job in todo:
        place_checkpoint(config, job)
    if config.engine != "sequential":
        run, key = partial(run_batch, config, notify=notify), partial(job_batch_key, config)
        report = run_batches(todo, config.out, run, key, config.batch_models, config.jobs, total=len(jobs))
    else:
        report = run_jobs(todo, config.out, partial(run_job, config, notify=notify), config.jobs, total=len(jobs))
    if report.budget_reached:
        print(f"time budget of {config.jobs.budget_s:g} s reached; rerun the same command to go on")
    if config.jobs.job is not None:
        check_no_failures(report)
        return None
    summary = summarize(config, jobs)
    check_no_failures(report)
    return summary


# ----------------------------------------------------------------------------------------------------------------
# Summaries

MARKED_MEAN_KEYS = ("psnr", "best_psnr", "ssim", "lpips")
"""Quality means that results.md marks when some of a row's images had no finite value."""

SUMMARY_KEYS = (*MARKED_MEAN_KEYS, "seconds_per_iter", "num_params", "num_filter_params",
                "params_per_value", "embedding_dim")  # fmt: skip


LEGACY_LINE_SEARCH_KEYS = {"enabled": "line_search", "rule": "rule", "direction": "direction", "lr_min": "lr_min",
                           "lr_max": "lr_max", "eps": "ls_eps", "c1": "c1"}  # fmt: skip
"""Nested line-search option -> its top-level FitConfig key in runs written before ``line_search`` was nested."""


def stored_line_search_config(fit: dict) -> dict:
    """The line-search options of a stored FitConfig (runs written before ``line_search`` was nested kept them
    at the top level, with ``line_search`` the on/off switch)."""
    if isinstance(fit.get("line_search"), dict):
        return fit["line_search"]
    defaults = asdict(LineSearchConfig())
    return {name: fit.get(old, defaults[name]) for name, old in LEGACY_LINE_SEARCH_KEYS.items()}


def _with_nested_line_search(protocol: dict) -> dict:
    """A stored protocol with its line-search options nested as today's (a folder written before they were)."""
    fit = protocol.get("fit")
    if not isinstance(fit, dict) or "line_search" not in fit or isinstance(fit["line_search"], dict):
        return protocol
    rest = {key: value for key, value in fit.items() if key not in LEGACY_LINE_SEARCH_KEYS.values()}
    return {**protocol, "fit": {**rest, "line_search": stored_line_search_config(fit)}}


def run_summary(metrics: dict) -> dict:
    """The per-run row of results.json (no histories)."""
    row = {key: metrics.get(key) for key in ("label", "variant", "group", "method", "image", "iters", *SUMMARY_KEYS)}
    network = metrics["config"]["network"]
    for key in ("hidden_features", "pe", "pe_scale", "pe_frequencies", "rff_sigma", "rff_frequencies"):
        row[key] = network[key]
    _, lrs = history_series(metrics.get("filter_lr_history"))
    if len(lrs):
        lr_max = stored_line_search_config(metrics["config"])["lr_max"]
        row["filter_lr_final"] = lrs[-1]
        row["filter_lr_median"] = float(np.median(lrs))
        row["filter_lr_at_max"] = float(np.mean(np.isclose(lrs, lr_max))) if metrics.get("line_search") else None
    row["machine"] = metrics.get("machine")
    row["diverged"] = metrics.get("diverged")
    return row


def _finite_values(values: list) -> list:
    return [v for v in values if v is not None and math.isfinite(v)]


def _mean(values: list) -> Optional[float]:
    values = _finite_values(values)
    return float(np.mean(values)) if values else None


def summarize(config: BenchConfig, jobs: list[Job]) -> dict:
    """Collect finished jobs into results.json / results.md and draw the figures."""
    runs: list[dict] = []
    histories: dict[tuple[str, str, str], dict] = {}
    for job in jobs:
        path = config.out / job.folder / "metrics.json"
        if path.exists():
            metrics = json.loads(path.read_text())
            # the job's own label and group: a run linked in from another folder may have been stored under
            # another name (e.g. a study label, or the main group of a longer bench)
            runs.append(run_summary(metrics) | {"label": job.variant.label, "group": job.group,
                                                "variant": job.variant.spec})  # fmt: skip
            histories[(job.group, job.subject, job.variant.label)] = metrics
    groups: dict[str, dict] = {}
    for group in ("main", "sweep", "long"):
        rows = [r for r in runs if r["group"] == group]
        labels = list(dict.fromkeys(r["label"] for r in rows))
        means = {}
        for label in labels:
            mine = [r for r in rows if r["label"] == label]
            means[label] = {key: _mean([r[key] for r in mine]) for key in SUMMARY_KEYS}
            means[label]["images"] = len(mine)
            # an exact fit's infinite PSNR, a diverged fit's NaN or a missing LPIPS leaves a mean over fewer images
            counts = {key: len(_finite_values([r[key] for r in mine])) for key in MARKED_MEAN_KEYS}
            means[label]["values_counted"] = {key: n for key, n in counts.items() if 0 < n < len(mine)}
            means[label]["variant"] = mine[0]["variant"]
            widths = sorted({r["hidden_features"] for r in mine})  # a matched variant's width depends on the image
            means[label]["hidden_features"] = widths[0] if len(widths) == 1 else widths
            means[label]["diverged"] = sum(bool(r.get("diverged")) for r in mine)
        groups[group] = {"means": means, "runs": rows}
    total = len(jobs)
    summary = {
        "protocol": protocol_of(config),
        "images_folder": str(config.images),
        "machines": sorted({r["machine"] for r in runs if r.get("machine")}),
        "jobs_done": len(runs),
        "jobs_total": total,
        "groups": groups,
    }
    config.out.mkdir(parents=True, exist_ok=True)
    write_text(config.out / "results.json", json.dumps(summary, indent=1) + "\n")
    write_text(config.out / "results.md", results_markdown(summary))
    from rff_field.image.plots import plot_bench_curves, plot_crops, plot_sweep

    for stale in [*config.out.glob("crops_*.png"), *config.out.glob("curves_*.png"), config.out / "sweep.png"]:
        stale.unlink(missing_ok=True)  # an earlier summary's figures: they would not match this results.md
    crops_image = config.crops_image or (jobs[0].subject if jobs else None)
    if crops_image:
        main_jobs = [j for j in jobs if j.group == "main" and j.subject == crops_image]
        done = [(j.variant.label, config.out / j.folder, histories.get(("main", j.subject, j.variant.label)))
                for j in main_jobs if ("main", j.subject, j.variant.label) in histories]  # fmt: skip
        if done:
            target = downsample(load_image(main_jobs[0].source).pixels, config.downsample)
            plot_crops(target, done, config.out / f"crops_{crops_image}.png", title=crops_image)
            plot_crops(target, done, config.out / f"crops_flat_{crops_image}.png", title=crops_image, flat=True)
            plot_bench_curves(done, config.out / f"curves_{crops_image}.png", title=crops_image)
    if groups["sweep"]["runs"]:
        plot_sweep(groups["sweep"]["runs"], config.out / "sweep.png")
    return summary


def _fmt(value: Optional[float], digits: int = 2) -> str:
    if value is None:
        return "–"
    return f"{value:.{digits}f}"


def _mean_cell(means: dict, key: str, digits: int = 2) -> str:
    """A mean of the means table, with "(n of m)" when only n of the row's m images had a finite value."""
    counted = means.get("values_counted", {}).get(key)
    if counted is None:
        return _fmt(means[key], digits)
    return f"{_fmt(means[key], digits)} ({counted} of {means['images']})"


def format_count(value: Optional[float]) -> str:
    """A parameter count with thousands separators ("–" when missing)."""
    return "–" if value is None else f"{int(round(value)):,}"


def results_markdown(summary: dict) -> str:
    """results.md: mean table per group, per-image best PSNR tables, and the sweep."""
    protocol = summary["protocol"]
    fit = protocol["fit"]
    search = stored_line_search_config(fit)
    lines = [
        "# Image regression benchmark",
        "",
        f"Images: `{summary['images_folder']}` downsampled x{protocol['downsample']}; "
        f"{fit['network']['hidden_layers'] + 1} hidden layers of {fit['network']['hidden_features']} (WIRE: "
        f"int(width/sqrt 2) complex), Adam, lr decay {fit['lr_decay']}^(t/T), batch {fit['batch_size']}, "
        f"seed {fit['seed']}, line search rule `{search['rule']}`, direction `{search['direction']}`, "
        f"lr_max {search['lr_max']:g}; a variant's spec overrides these (its width is in the tables).",
        f"Machine(s): {'; '.join(summary['machines']) or 'n/a'}. Jobs finished: {summary['jobs_done']} of "
        f"{summary['jobs_total']}.",
        "",
        "PSNR: final (after the last step) and best (over iterations, the paper's measure), in dB; SSIM "
        "(scikit-image's, 7x7 uniform windows) and LPIPS on the final reconstruction (LPIPS – when its weights "
        "were unavailable); s/it: seconds per iteration; "
        "params/value: trainable parameters per fitted pixel value. Means are over the images a row has finished "
        "(column `images`): compare rows with the same count. A mean marked (n of m) is over the n images with a "
        "finite value: an exact fit's PSNR is infinite, a diverged fit's NaN.",
    ]
    if len(summary["machines"]) > 1:
        lines += ["", "The runs come from several machines: each s/it is that run's own wall time on its machine, so "
                  "s/it is not comparable between rows (quality is: same protocol and seed). Compare speed only "
                  "with a side-by-side measurement (rff-bench image-timing)."]  # fmt: skip
    titles = {"main": "Main grid", "sweep": "Robustness sweep", "long": "Long runs"}
    for group in ("main", "long", "sweep"):
        data = summary["groups"][group]
        if not data["runs"]:
            continue
        iters = sorted({r.get("iters_requested", r["iters"]) for r in data["runs"]})  # a diverged run's kept few
        lines += ["", f"## {titles[group]} ({', '.join(map(str, iters))} iterations)", ""]
        if group != "sweep":
            lines += [
                "| variant | spec | images | PSNR | best PSNR | SSIM | LPIPS | s/it | params | filter params | "
                "params/value |",
                "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            ]
            for label, m in data["means"].items():
                mark = f" (diverged: {m['diverged']} of {m['images']})" if m.get("diverged") else ""
                widths = m["hidden_features"]
                width = (
                    f"widths {min(widths)}–{max(widths)} by image" if isinstance(widths, list) else f"width {widths}"
                )
                lines.append(
                    f"| {label}{mark} | `{m['variant']}` ({width}) | {m['images']} | "
                    f"{_mean_cell(m, 'psnr')} | {_mean_cell(m, 'best_psnr')} | {_mean_cell(m, 'ssim', 4)} | "
                    f"{_mean_cell(m, 'lpips', 4)} | "
                    f"{_fmt(m['seconds_per_iter'], 4)} | {format_count(m['num_params'])} | "
                    f"{format_count(m['num_filter_params'])} | {_fmt(m['params_per_value'], 3)} |"
                )
        lines += _per_image_table(data["runs"])
        diverged = [r for r in data["runs"] if r.get("diverged")]
        if diverged:
            lines += ["", "Diverged runs (their metrics are those of the last finite state, trained fewer iterations):",
                      ""] + [f"- {r['label']} on {r['image']}: {r['diverged']}" for r in diverged]  # fmt: skip
        filtered = [r for r in data["runs"] if r.get("filter_lr_median") is not None]
        if filtered and group != "sweep":
            lines += [
                "",
                "Filter learning rate (line search: fraction of iterations at lr_max, each iteration's last step):",
                "",
            ]
            lines += ["| variant | image | final | median | at lr_max |", "|---|---|---:|---:|---:|"]
            for r in filtered:
                lines.append(
                    f"| {r['label']} | {r['image']} | {r['filter_lr_final']:.3g} | {r['filter_lr_median']:.3g} | "
                    f"{_fmt(r['filter_lr_at_max'], 3)} |"
                )
    return "\n".join(lines) + "\n"


def _per_image_table(rows: list[dict]) -> list[str]:
    images = list(dict.fromkeys(r["image"] for r in rows))
    labels = list(dict.fromkeys(r["label"] for r in rows))
    by = {(r["label"], r["image"]): r for r in rows}
    out = ["", "Per image, best PSNR / final PSNR / SSIM / s/it:", ""]
    out.append("| variant | " + " | ".join(images) + " |")
    out.append("|---|" + "---:|" * len(images))
    for label in labels:
        cells = []
        for image in images:
            r = by.get((label, image))
            cells.append(
                "–"
                if r is None
                else f"{_fmt(r['best_psnr'])} / {_fmt(r['psnr'])} / {_fmt(r['ssim'], 3)} / "
                f"{_fmt(r['seconds_per_iter'], 3)}" + (" (diverged)" if r.get("diverged") else "")
            )
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    return out
