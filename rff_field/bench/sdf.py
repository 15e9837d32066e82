"""``rff-sdf bench``: every method on every shape with one protocol, then results.json, results.md and a figure.

Each shape's samples are computed once into a pool (``pools/<shape>.npz``, exact SDFs) and every method draws the
same sequence from it, so the methods see identical data and the per-step timings measure the networks, not
open3d. A pool of ``iters * points_per_step`` samples (the default) gives every step fresh samples.

A method is a variant ``[LABEL:]METHOD[,key=value...]`` (:mod:`rff_field.bench.variants`) whose keys are network or
training options, e.g. ``fixed-lr:filtered-pe,line_search.enabled=false`` or ``mlp-pe,hidden_features=300``.
"""

from __future__ import annotations

import copy
import json
import math
import zipfile
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np

from rff_field.bench.jobs import (
    Job,
    JobOptions,
    check_no_failures,
    checkpoint_status,
    claim_benchmark_folder,
    is_finished,
    job_table,
    run_batches,
    selected,
)
from rff_field.bench.variants import Variant, note_unused_filter_keys, parse_variant, safe_label, set_options
from rff_field.common.checkpoint import CHECKPOINT_FILE
from rff_field.common.machine import machine_info
from rff_field.common.outputs import write_text, written_atomically
from rff_field.common.progress import print_note
from rff_field.core.errors import TrainingDiverged, UsageError
from rff_field.sdf.checkpoint import SDFCheckpoint
from rff_field.sdf.data import POOL_ARRAYS, SamplePool, check_pool_arrays
from rff_field.sdf.fit import SDF_METHODS, SDFNetworkConfig, SDFTrainConfig
from rff_field.sdf.metrics import Surface, shape_metrics
from rff_field.sdf.run import GroundTruth, OutputConfig, open3d_available, run_sdf

PAPER_CLAIM_BASELINES = ("mlp-pe", "siren", "bacon")


@dataclass(frozen=True)
class MethodSpec:
    """A method plus option overrides (a :class:`~rff_field.bench.variants.Variant`), e.g.
    ``fixed-lr:filtered-pe,line_search.enabled=false``."""

    variant: Variant

    @property
    def label(self) -> str:
        return self.variant.label

    @property
    def method(self) -> str:
        return self.variant.method

    @property
    def slug(self) -> str:
        return safe_label(self.label)

    def iters(self, default: Optional[int]) -> Optional[int]:
        """The steps of this method's runs: its own ``iters``, else ``default``."""
        return int(self.variant.overrides["iters"]) if "iters" in self.variant.overrides else default

    def configs(
        self, network: SDFNetworkConfig, train: SDFTrainConfig, notify: Callable[[str], None] = print_note
    ) -> tuple[SDFNetworkConfig, SDFTrainConfig]:
        network, train = copy.deepcopy(network), copy.deepcopy(train)
        set_options([network, train], self.variant.overrides, notify=notify)
        return network, train


def parse_method(spec: str) -> MethodSpec:
    """Parse ``[LABEL:]METHOD[,key=value...]``; keys are network or training options; checked now."""
    method = MethodSpec(parse_variant(spec, methods=SDF_METHODS))
    note_unused_filter_keys(method.variant, print_note)
    network, train = method.configs(SDFNetworkConfig(), SDFTrainConfig())
    network.check()
    train.check()
    return method


def check_pool(path: Path) -> None:
    """Raise :class:`UsageError` unless ``path`` is a sample pool (reads the archive's index only)."""
    if not Path(path).is_file():
        raise UsageError(f"sample pool {path} does not exist; write it with `rff-sdf pool`")
    try:
        with np.load(path, allow_pickle=False) as data:
            names = list(getattr(data, "files", ()))
    except (ValueError, OSError, zipfile.BadZipFile):
        names = []
    if not set(names) & set(POOL_ARRAYS):
        raise UsageError(f"{path} is not a sample pool (an .npz written by `rff-sdf pool`)")
    check_pool_arrays(path, names)


def load_pool_arrays(path: Path) -> dict:
    check_pool(path)
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def write_pool(
    mesh_path: Optional[Path],
    out: Path,
    size: int,
    coarse_scale: float = 0.1,
    fine_scale: float = 1e-3,
    seed: int = 0,
    fill_holes: bool = False,
    surface_samples: int = 100_000,
    sign_rays: int = 1,
    progress: bool = True,
) -> Path:
    """Sample a mesh (``None``: the generated shape) into a pool file of ``size`` exact-SDF samples."""
    from rff_field.sdf.data import MeshSDF, build_pool, load_shape

    if size < 2:
        raise UsageError(f"a pool needs at least 2 samples, got {size}")
    name, mesh, normalization = load_shape(mesh_path, fill_holes)
    shape = MeshSDF(mesh, coarse_scale, fine_scale, seed=seed, sign_rays=sign_rays)
    if progress:
        from rff_field.common.progress import LoggedProgress

        with LoggedProgress() as bar:
            task = bar.add_task(f"sampling {name}", total=size)
            arrays = build_pool(shape, size, name, surface_samples, progress=lambda n: bar.advance(task, n),
                                normalization=normalization)  # fmt: skip
    else:
        arrays = build_pool(shape, size, name, surface_samples, normalization=normalization)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with written_atomically(out) as temporary:
        np.savez(temporary, **arrays)
    return out


MEASURED_WITH = ("resolution", "eval_samples", "f_threshold")
"""The output options that change a run's metrics (the others change only what is drawn or saved)."""


def runs_protocol(protocol: dict) -> dict:
    """What every run of one benchmark folder must share: the network, the training, how a run is measured, and
    each job's method (its shapes and methods may grow)."""
    protocol = json.loads(json.dumps(protocol))  # tuples as JSON keeps them
    train = {k: v for k, v in protocol.get("train", {}).items() if k not in ("device", "log_every")}
    output = {k: v for k, v in protocol.get("output", {}).items() if k in MEASURED_WITH}
    return {"network": protocol.get("network", {}), "train": train, "output": output,
            "pool_size": protocol.get("pool_size"), "jobs": protocol.get("jobs", {})}  # fmt: skip


def check_protocol(out: Path, protocol: dict, jobs: Sequence[Job], overwrite: bool) -> None:
    """Refuse to add runs of another protocol to the benchmark in ``out`` (with ``overwrite`` the runs of the earlier
    one are removed first), and record ``protocol`` and ``jobs`` there."""
    protocol = {**protocol, "jobs": job_table(jobs)}
    claim_benchmark_folder(out, "sdf", protocol, overwrite, ("runs/*/*",), own_files=("runs", "pools", "results.*"),
                           compared=runs_protocol)  # fmt: skip


def sdf_jobs(
    shapes: Sequence[tuple[str, Path]], methods: Sequence[MethodSpec], iters: Optional[int] = None
) -> list[Job]:
    """One job per (shape, method), shape-major, in ``runs/<shape>/<label>``, of ``iters`` steps unless the method
    sets its own."""
    pairs = [(name, pool, spec) for name, pool in shapes for spec in methods]
    return [
        Job(index, Path("runs") / name / spec.slug, spec.variant, name, iters=spec.iters(iters), source=Path(pool))
        for index, (name, pool, spec) in enumerate(pairs)
    ]


def run_sdf_jobs(
    out: Path,
    shapes: Sequence[tuple[str, Path]],
    methods: Sequence[MethodSpec],
    network: SDFNetworkConfig,
    train: SDFTrainConfig,
    output: OutputConfig,
    options: JobOptions = JobOptions(),
    progress: bool = True,
    start: Optional[float] = None,
) -> list[dict]:
    """Run every method on every (name, pool path) shape into ``out/runs/<shape>/<label>/``.

    Finished runs (with a ``metrics.json``) are kept unless ``options.overwrite``; ``options`` also selects a
    shard or one job, worker processes and a time budget, at which running fits stop with a checkpoint that the
    next run resumes; the budget counts from ``start`` (a ``time.monotonic()`` value; default: now). Returns the
    records of every finished run, in order.
    """
    jobs = sdf_jobs(shapes, methods, train.iters)
    options.check(jobs)
    run_one = partial(run_sdf_job, Path(out), network, train, output, progress, options.overwrite)
    key = lambda job: job.index  # noqa: E731  (one fit per batch)
    report = run_batches(selected(jobs, options), Path(out), run_one, key, 1, options, len(jobs), start)
    if report.budget_reached:
        print(f"time budget of {options.budget_s:g} s reached; rerun with --resume to go on")
    check_no_failures(report)
    return [json.loads((Path(out) / job.folder / "metrics.json").read_text()) for job in jobs if is_finished(out, job)]


def run_sdf_job(
    out: Path,
    network: SDFNetworkConfig,
    train: SDFTrainConfig,
    output: OutputConfig,
    progress: bool,
    overwrite: bool,
    batch: list[Job],
    stop_at: Optional[float],
) -> bool:
    """Train, extract, measure and write one job of the benchmark (``batch`` holds it); False when ``stop_at``
    stopped it first (it stays pending, with a checkpoint in its folder)."""
    (job,) = batch
    arrays = load_pool_arrays(job.source)
    net_cfg, train_cfg = MethodSpec(job.variant).configs(network, train)
    pool = SamplePool(arrays, device=train_cfg.device, seed=train_cfg.seed)
    run_dir = out / job.folder
    run_dir.mkdir(parents=True, exist_ok=True)
    if overwrite:
        (run_dir / CHECKPOINT_FILE).unlink(missing_ok=True)
    gt = GroundTruth.from_arrays(arrays, job.subject)
    extra = {"pool": str(job.source), "pool_size": len(pool)}
    notify = lambda message: print(f"note: {job.folder}: {message}", flush=True)  # noqa: E731
    try:
        record = run_sdf(run_dir, gt, pool, net_cfg, train_cfg, output, job.variant.label, progress, extra,
                         stop_at=stop_at, notify=notify)  # fmt: skip
    except TrainingDiverged as err:  # its outputs are written and marked: the benchmark goes on
        notify(str(err))
        return True
    if "stopped" in record:
        notify(f"{record['stopped']}; it stays pending, with a checkpoint that --resume goes on from")
        return False
    return True


def job_status(out: Path, job: Job) -> str:
    """``pending``, or where the checkpoint of a job that was stopped (or is running) stands."""
    return checkpoint_status(Path(out) / job.folder / CHECKPOINT_FILE, SDFCheckpoint)


def reevaluate(out: Path, output: OutputConfig, force: bool = False) -> list[dict]:
    """Read every run under ``out/runs``; recompute metrics that were not exact (e.g. from a machine without
    open3d), or all of them with ``force`` (e.g. for another F-score threshold), and render missing images, when
    open3d is available here. Forced recomputations use ``output``'s sample count and threshold, the others the
    run's own."""
    records = []
    have_o3d = open3d_available()
    truths: dict[str, GroundTruth] = {}
    for metrics_path in sorted(Path(out).glob("runs/*/*/metrics.json")):
        record = json.loads(metrics_path.read_text())
        run_dir = metrics_path.parent
        inexact = force or record.get("distance") != "exact"
        stale = inexact or not (run_dir / "render.png").is_file()
        if have_o3d and stale and record.get("pool") and Path(record["pool"]).is_file():
            name = record["mesh"]
            if name not in truths:
                truths[name] = GroundTruth.from_arrays(load_pool_arrays(Path(record["pool"])), name)
            gt = truths[name]
            vertices, triangles = read_mesh_arrays(run_dir / "mesh.ply")
            if inexact:
                metrics = shape_metrics(
                    Surface(vertices, triangles),
                    gt.surface,
                    num_samples=output.eval_samples if force else record.get("num_samples", output.eval_samples),
                    f_threshold=output.f_threshold if force else record.get("f_threshold", output.f_threshold),
                    gt_samples=(gt.surface_points, gt.surface_normals),
                )
                record.update(metrics)
                write_text(metrics_path, json.dumps(record, indent=2) + "\n")
            if not (run_dir / "render.png").is_file():
                from rff_field.sdf.run import render_comparison

                render_comparison(run_dir, vertices, triangles, gt, output.view, f"{name} · {record['label']}")
        records.append(record)
    return records


FLOOR_LABEL = "exact-sdf"


def exact_floor(out: Path, name: str, pool_path: Path, output: OutputConfig) -> dict:
    """Marching cubes of the *exact* SDF at the benchmark's resolution, measured like a run: the best score a
    network can reach at that resolution (written to ``out/runs/<shape>/exact-sdf/``). Needs open3d."""
    import open3d as o3d
    import torch

    from rff_field.common.mesh import marching_cubes, orient_outward, sample_grid, write_ply
    from rff_field.sdf.data import MeshSDF, is_closed
    from rff_field.sdf.run import render_comparison

    arrays = load_pool_arrays(pool_path)
    gt = GroundTruth.from_arrays(arrays, name)
    mesh = o3d.geometry.TriangleMesh(
        o3d.utility.Vector3dVector(np.asarray(arrays["vertices"], np.float64)),
        o3d.utility.Vector3iVector(np.asarray(arrays["triangles"], np.int32)),
    )
    shape = MeshSDF(mesh)
    values = sample_grid(
        lambda p: torch.from_numpy(shape.signed_distance(p.cpu().numpy())),
        [-0.5] * 3,
        [0.5] * 3,
        output.resolution,
        output.grid_batch,
    )
    vertices, triangles = marching_cubes(values, [-0.5] * 3, [0.5] * 3, level=0.0)
    triangles = orient_outward(vertices, triangles)
    metrics = shape_metrics(
        Surface(vertices, triangles),
        gt.surface,
        num_samples=output.eval_samples,
        f_threshold=output.f_threshold,
        gt_samples=(gt.surface_points, gt.surface_normals),
    )
    run_dir = Path(out) / "runs" / name / FLOOR_LABEL
    run_dir.mkdir(parents=True, exist_ok=True)
    if len(triangles):
        write_ply(vertices, triangles, run_dir / "mesh.ply", overwrite=True)
    else:  # no surface at this resolution (a sheet thinner than a voxel): no mesh, as a fit writes none
        (run_dir / "mesh.ply").unlink(missing_ok=True)
    record = {
        "method": "exact",
        "label": FLOOR_LABEL,
        "mesh": name,
        "iters": 0,
        "seconds_per_iter": None,
        **metrics,
        "parameters": 0,
        "filter_parameters": 0,
        "resolution": output.resolution,
        "mesh_triangles": int(len(triangles)),
        "mesh_closed": bool(is_closed(triangles)),
        "pool": str(pool_path),
    }
    write_text(run_dir / "metrics.json", json.dumps(record, indent=2) + "\n")
    if output.render:
        render_comparison(run_dir, vertices, triangles, gt, output.view, f"{name} · exact SDF, marching cubes")
    return record


def read_mesh_arrays(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Vertices and triangles of a mesh file (empty when it does not exist: an empty reconstruction)."""
    if not Path(path).is_file():
        return np.zeros((0, 3)), np.zeros((0, 3), dtype=np.int64)
    import open3d as o3d

    mesh = o3d.io.read_triangle_mesh(str(path))
    return np.asarray(mesh.vertices), np.asarray(mesh.triangles)


# --------------------------------------------------------------------------------------------------- report


def _fmt(value, scale: float = 1.0, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    return f"{value * scale:.{digits}g}"


def _params(record: dict) -> str:
    total = record.get("parameters", 0)
    if not total:
        return "–"
    filt = record.get("filter_parameters", 0)
    return f"{total / 1e3:.1f}k" + (f" ({filt / 1e3:.1f}k filter)" if filt else "")


def results_table(records: Sequence[dict]) -> str:
    """A Markdown table per shape."""
    lines = []
    for shape in dict.fromkeys(r["mesh"] for r in records):
        rows = [r for r in records if r["mesh"] == shape]
        lines += [
            f"### {shape}",
            "",
            "| method | params | s/step | Chamfer (1e-6) | pred→GT | GT→pred | Chamfer-L1 (1e-3) | normal cons. "
            f"| F-score@{rows[0].get('f_threshold', 0)} | final loss (mean, last 5%) | filter lr final (at max) |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        trained = [r["chamfer"] for r in rows if r.get("chamfer") is not None and r["label"] != FLOOR_LABEL]
        best = min(trained, default=None)  # of the networks: the exact SDF's row is a reference
        for r in rows:
            cd = _fmt(r.get("chamfer"), 1e6)
            if best is not None and r.get("chamfer") == best and r["label"] != FLOOR_LABEL:
                cd = f"**{cd}**"
            rate = "–"
            if r.get("filter_lr_final") is not None:
                at_max = r.get("filter_lr_at_max_fraction")
                rate = _fmt(r["filter_lr_final"]) + (f" ({at_max:.0%})" if at_max is not None else " (no LS)")
            diverged = f" (diverged at {r['diverged_at']})" if r.get("diverged_at") is not None else ""
            lines.append(
                f"| {r['label']}{diverged} | {_params(r)} | {_fmt(r.get('seconds_per_iter'))} | {cd} "
                f"| {_fmt(r.get('chamfer_pred_to_gt'), 1e6)} | {_fmt(r.get('chamfer_gt_to_pred'), 1e6)} "
                f"| {_fmt(r.get('chamfer_l1'), 1e3)} | {_fmt(r.get('normal_consistency'), 1, 4)} "
                f"| {_fmt(r.get('f_score'), 1, 4)} | {_fmt(r.get('final_loss_mean_last5pct'))} | {rate} |"
            )
        lines.append("")
    return "\n".join(lines)


def claim_check(records: Sequence[dict], method: str = "filtered-pe") -> list[str]:
    """Lines saying whether ``method`` has a lower Chamfer than mlp-pe, SIREN and BACON on each shape."""
    lines = []
    for shape in dict.fromkeys(r["mesh"] for r in records):
        by_label: dict[str, dict] = {}
        for r in records:  # the run without overrides stands for its method; else the first of its variants
            if r["mesh"] == shape and (r["method"] not in by_label or r["label"] == r["method"]):
                by_label[r["method"]] = r
        ours = by_label.get(method)
        if ours is None or ours.get("chamfer") is None:
            continue
        verdicts = []
        for base in PAPER_CLAIM_BASELINES:
            other = by_label.get(base)
            if other is None:
                continue
            if other.get("chamfer") is None:
                verdicts.append(f"{base}: no surface")
                continue
            ratio = ours["chamfer"] / other["chamfer"]
            verdicts.append(f"{'lower' if ratio < 1 else 'HIGHER'} than {other['label']} (x{ratio:.2f})")
        lines.append(f"- {shape}: {ours['label']} Chamfer {ours['chamfer']:.3g} is " + "; ".join(verdicts))
    return lines


def write_report(
    out: Path, records: Sequence[dict], protocol: dict, figure_mesh: Optional[str] = None, view=(35.0, 20.0)
) -> dict[str, Path]:
    """Write ``results.json``, ``results.md`` and ``figure_<shape>.png`` (with open3d) into ``out``."""
    out = Path(out)
    machine = machine_info()
    write_text(
        out / "results.json",
        json.dumps({"protocol": protocol, "machine": machine, "runs": list(records)}, indent=2) + "\n",
    )
    md = [
        "# SDF regression benchmark",
        "",
        "Generated by `rff-sdf bench`. Chamfer is the mean squared distance from samples of each surface to the "
        "other surface, summed over both directions, in BACON's normalised space (shape in [-0.45, 0.45]); "
        "Chamfer-L1 the mean of the two mean distances; normal consistency the mean |cos| between normals at "
        "closest points; F-score at the stated distance. Best Chamfer of the networks per shape in bold. The last "
        "column is the filter's learning rate at the last step and the share of steps at which the line search "
        "chose its upper bound.",
        "",
        "## Protocol",
        "",
        "```json",
        json.dumps(protocol, indent=2),
        "```",
        "",
        f"Machine: {machine['cpu']}, torch {machine['torch']}, {machine['torch_threads']} thread(s)"
        + (f", GPU {machine['gpu']}" if "gpu" in machine else "")
        + ".",
        "",
        "## Results",
        "",
        results_table(records),
        "## filtered-pe against the paper's baselines (same steps)",
        "",
        *claim_check(records),
        "",
    ]
    write_text(out / "results.md", "\n".join(md))
    written = {"results.json": out / "results.json", "results.md": out / "results.md"}
    shapes = list(dict.fromkeys(r["mesh"] for r in records))
    figure_mesh = figure_mesh or (shapes[0] if shapes else None)
    if figure_mesh is not None and open3d_available():
        path = write_figure(out, [r for r in records if r["mesh"] == figure_mesh], figure_mesh, view)
        if path is not None:
            written["figure"] = path
    return written


def write_figure(out: Path, records: Sequence[dict], shape: str, view=(35.0, 20.0)) -> Optional[Path]:
    """All methods' meshes of one shape beside its ground truth."""
    from rff_field.sdf.render import render_mesh, save_panels

    if not records:
        return None
    pool = records[0].get("pool")
    panels = []
    if pool and Path(pool).is_file():
        with np.load(pool, allow_pickle=False) as data:
            panels.append(("ground truth", render_mesh(data["vertices"], data["triangles"], view=view)))
    for r in records:
        slug = safe_label(r["label"])
        vertices, triangles = read_mesh_arrays(Path(out) / "runs" / shape / slug / "mesh.ply")
        caption = f"{r['label']}\nChamfer {_fmt(r.get('chamfer'))}"
        panels.append((caption, render_mesh(vertices, triangles, view=view)))
    columns = min(len(panels), 5)
    return save_panels(panels, Path(out) / f"figure_{shape}.png", columns=columns, title=f"{shape}: all methods")
