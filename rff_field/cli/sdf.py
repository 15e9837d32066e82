"""``rff-sdf``: fit signed distance functions of shapes with BACON's protocol, and benchmark the methods.

Subcommands:
    fit    one method on one shape: mesh.ply, metrics.json, render.png
    bench  all methods on several shapes: results.json, results.md, a figure
    pool   precompute exact-SDF samples into an .npz (to train where open3d is missing, e.g. a GPU machine)
    mesh   extract a finished fit's mesh again from its weights, e.g. on a finer grid
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Annotated, Literal, Optional, Union

import tyro

from rff_field.bench.jobs import ResumableJobOptions, print_jobs
from rff_field.cli.common import LINE_SEARCH_FLAGS, note_unused_filter_options, parse_command, run_command
from rff_field.common.options import Flat
from rff_field.common.outputs import BENCHMARK_FILE, check_fit_folder, check_output_path, check_writable_folder
from rff_field.common.stopping import FitInterrupted
from rff_field.core.errors import UsageError, check_fields
from rff_field.sdf.data import GENERATED_SHAPE, load_mesh
from rff_field.sdf.fit import SDF_METHODS, SDFMethod, SDFNetworkConfig, SDFTrainConfig
from rff_field.sdf.run import OutputConfig


@dataclass
class BenchNetworkConfig(SDFNetworkConfig):
    """Network options shared by every method of the benchmark (per-method overrides go in --methods)."""

    method: tyro.conf.Suppress[SDFMethod] = "filtered-pe"


@dataclass
class Fit:
    """Fit the SDF of one shape and write mesh.ply, metrics.json, render.png, history.npz, config.json, model.pt.

    Samples are drawn fresh every step with exact signed distances (open3d), unless --pool gives precomputed
    ones. Everything is measured in BACON's normalised space (the shape scaled into [-0.45, 0.45]^3).
    """

    mesh: Optional[Path] = None
    """Watertight mesh to fit (PLY, OBJ, OFF or STL); default: a generated bumpy sphere."""
    out: Path = Path("outputs/sdf")
    """Output directory; must be empty or absent unless --overwrite."""
    network: Annotated[SDFNetworkConfig, Flat] = field(default_factory=SDFNetworkConfig)
    train: Annotated[SDFTrainConfig, Flat] = field(default_factory=SDFTrainConfig)
    output: Annotated[OutputConfig, Flat] = field(default_factory=OutputConfig)
    pool: Optional[Path] = None
    """Train from a sample pool written by `rff-sdf pool` instead of fresh samples (then leave out --mesh)."""
    fill_holes: bool = False
    """Close the mesh's holes (open3d fill_holes, repeated) before the watertightness check."""
    sign_rays: int = 1
    """Rays per point voting on inside/outside (odd); raise it if signs look noisy."""
    overwrite: bool = False
    """Write into a non-empty --out, replacing an earlier fit's outputs, its mesh-*.ply re-extractions included."""
    progress: bool = True
    """Show a progress bar with the loss and the filter's rate."""

    def main(self) -> dict:
        """Run the command."""
        from rff_field.common.checkpoint import CHECKPOINT_FILE, check_resumable
        from rff_field.common.locks import exclusive_folder
        from rff_field.common.outputs import check_input_kept
        from rff_field.sdf.checkpoint import SDFCheckpoint, sdf_settings
        from rff_field.sdf.data import MeshSDF, SamplePool, load_shape
        from rff_field.sdf.run import OUTPUT_FILES, GroundTruth, check_out_dir, prepare_out_dir, run_sdf

        _check_common(self.train, self.output, self.network, self.sign_rays)
        if self.pool is not None and self.mesh is not None:
            raise UsageError("give either --mesh (fresh samples) or --pool (precomputed samples), not both")
        check_fit_folder(Path(self.out), "SDF fit", "mesh")  # first: --overwrite would not help there
        check_out_dir(Path(self.out), self.overwrite)
        for path, option in ((self.mesh, "--mesh"), (self.pool, "--pool")):
            check_input_kept(path, option, Path(self.out), (*OUTPUT_FILES, CHECKPOINT_FILE))
        note_unused_filter_options(self.network.method, self.network, self.train)
        if self.pool is not None:
            from rff_field.bench.sdf import load_pool_arrays

            arrays = load_pool_arrays(self.pool)
            sampler = SamplePool(arrays, device=self.train.device, seed=self.train.seed)
            name = str(sampler.meta.get("name", self.pool.stem))
            gt = GroundTruth.from_arrays(arrays, name)
        else:
            name, mesh, normalization = load_shape(self.mesh, self.fill_holes)
        with exclusive_folder(Path(self.out), "rff-sdf fit"):  # before sampling, so a second fit stops at once
            if self.pool is None:
                sampler = MeshSDF(mesh, self.train.coarse_scale, self.train.fine_scale, self.train.seed, self.sign_rays)
                gt = GroundTruth.from_mesh_sdf(sampler, name, self.output.eval_samples, normalization)
            settings = sdf_settings(self.network.resolved(), self.train, gt.name, sampler)
            check_resumable(Path(self.out) / CHECKPOINT_FILE, SDFCheckpoint, settings, self.overwrite, "step")
            out = prepare_out_dir(self.out, self.overwrite)
            given = self.mesh if self.mesh is not None else self.pool
            source = str(Path(given).absolute()) if given is not None else "generated bumpy sphere"
            record = run_sdf(out, gt, sampler, self.network, self.train, self.output, progress=self.progress,
                             extra={"source": source})  # fmt: skip
        cd = record["chamfer"]
        print(
            f"{name} {record['label']}: {record['iters']} steps, {record['seconds_per_iter']:.3g} s/step, "
            f"Chamfer {cd:.4g}, F-score {record['f_score']:.3f} -> {out}"
            if cd is not None
            else f"{name} {record['label']}: no surface at level 0 after {record['iters']} steps -> {out}"
        )
        return record


@dataclass
class Bench:
    """Run several methods on several shapes with one protocol; write results.json, results.md, a figure.

    Each shape is sampled once into OUT/pools/<shape>.npz (every method then sees the same samples); each run goes
    to OUT/runs/<shape>/<method>/ with the same files as `fit`.
    """

    out: Path = Path("outputs/sdf-bench")
    """Output directory; must be empty or absent unless --resume, --report-only or --overwrite."""
    meshes: tuple[Path, ...] = ()
    """Watertight meshes; default: the generated shape."""
    pools: tuple[Path, ...] = ()
    """Sample pools written by `rff-sdf pool`, used instead of --meshes (to train where open3d is missing, e.g. a
    GPU machine; the metrics then use a KD-tree, and --report-only on a machine with open3d makes them exact)."""
    methods: Annotated[tuple[str, ...], tyro.conf.arg(aliases=("--variants",))] = SDF_METHODS
    """Methods, each [LABEL:]METHOD[,key=value...] with network/training overrides, e.g.
    fixed-lr:filtered-pe,line_search.enabled=false or mlp-pe,hidden_features=300 (``--variants``, as in the other
    benchmarks, is the same option)."""
    network: Annotated[BenchNetworkConfig, Flat] = field(default_factory=BenchNetworkConfig)
    train: Annotated[SDFTrainConfig, Flat] = field(default_factory=SDFTrainConfig)
    output: Annotated[OutputConfig, Flat] = field(default_factory=OutputConfig)
    pool_size: Optional[int] = None
    """Samples per shape pool; default iters x points-per-step (fresh samples every step)."""
    fill_holes: bool = False
    """Close holes of the meshes before the watertightness check."""
    sign_rays: int = 1
    """Rays per point voting on inside/outside when sampling."""
    figure_mesh: Optional[str] = None
    """Shape (file stem) of the figure of all methods; default: the first."""
    resume: bool = False
    """Keep finished runs (those with metrics.json) and pools, and run the rest."""
    report_only: bool = False
    """Only rebuild the results from the runs in --out (recomputing inexact metrics, e.g. from a GPU run)."""
    reevaluate: bool = False
    """With --report-only: recompute every run's metrics with this --eval-samples and --f-threshold."""
    floor: bool = False
    """Also mesh each shape's exact SDF and measure it (row exact-sdf), at the grid, sample count and F-score
    threshold the runs in --out were measured with: the best score a network can reach with that marching-cubes
    grid."""
    jobs: Annotated[ResumableJobOptions, Flat] = field(default_factory=ResumableJobOptions)
    """Which runs to do, and how (--overwrite: write into a non-empty --out and rerun finished runs)."""
    progress: bool = True
    """Show progress bars while sampling the shapes and fitting each run (--no-progress: none, e.g. in a log
    file; each job still prints one line as it starts)."""

    def main(self) -> dict:
        """Run the command."""
        from rff_field.bench import sdf as sdf_bench
        from rff_field.sdf.data import pool_size_for

        start = time.monotonic()  # --budget-s counts sampling the pools too
        out = Path(self.out)
        specs = [sdf_bench.parse_method(m) for m in self.methods]
        if not specs:
            raise UsageError("--methods is empty; give at least one method")
        network = SDFNetworkConfig(**{f.name: getattr(self.network, f.name) for f in dataclasses.fields(self.network)})
        protocol = {
            "meshes": [str(m) for m in self.meshes or self.pools] or [GENERATED_SHAPE],
            "methods": list(self.methods),
            "network": dataclasses.asdict(network) | {"method": "per run"},
            "train": dataclasses.asdict(self.train),
            "output": dataclasses.asdict(self.output),
            "pool_size": self.pool_size or pool_size_for(self.train.iters, self.train.points_per_step),
        }
        if self.report_only:
            if not out.is_dir():
                raise UsageError(f"{out} does not exist; run the benchmark first")
            records = sdf_bench.reevaluate(out, self.output, force=self.reevaluate)
            if not records:
                raise UsageError(f"no runs under {out}/runs; run the benchmark first")
            old = out / "results.json"
            if old.is_file():
                import json

                try:
                    protocol = json.loads(old.read_text()).get("protocol", protocol)
                except (ValueError, AttributeError):  # damaged (a disk that filled while it was written): rewritten
                    pass
            shapes = [Path(m).stem for m in protocol.get("meshes", [])]
            labels = list(protocol.get("methods", []))

            def order(record: dict) -> tuple[int, int]:
                def index(items: list, item: str) -> int:
                    return items.index(item) if item in items else len(items)

                floor = record["label"] == sdf_bench.FLOOR_LABEL  # last, as the benchmark writes it
                return index(shapes, record["mesh"]), len(labels) + 1 if floor else index(labels, record["label"])

            records = sorted(records, key=order)
            paths = {Path(mesh).stem: mesh for mesh in protocol.get("meshes", [])}
            protocol["meshes"] = [paths.get(name, name) for name in dict.fromkeys(r["mesh"] for r in records)]
            if self.reevaluate:
                protocol.setdefault("output", {}).update(
                    eval_samples=self.output.eval_samples, f_threshold=self.output.f_threshold
                )
        else:
            _check_common(self.train, self.output, sign_rays=self.sign_rays)
            for spec in specs:  # each variant on this command's options, before any shape is sampled
                variant_network, variant_train = spec.configs(network, self.train, notify=lambda message: None)
                try:
                    variant_network.check()
                    variant_train.check()
                except UsageError as err:
                    raise UsageError(f"variant {spec.variant.label!r}: {err}") from None
            if self.pools and self.meshes:
                raise UsageError("give either --meshes (sampled now) or --pools (sampled before), not both")
            stems = [Path(path).stem for path in (*self.pools, *self.meshes)]
            repeated = sorted({stem for stem in stems if stems.count(stem) > 1})
            if repeated:
                raise UsageError(f"two shapes are named {', '.join(repeated)} (results are kept by file stem); "
                                 "rename or copy one of the files")  # fmt: skip
            names = stems or [GENERATED_SHAPE]
            if self.figure_mesh is not None and self.figure_mesh not in names:
                raise UsageError(f"--figure-mesh {self.figure_mesh} is not one of the shapes: {', '.join(names)}")
            check_fields(self, positive_int=("pool_size",))
            missing = [str(pool) for pool in self.pools if not Path(pool).is_file()]
            if missing:
                raise UsageError(f"no sample pool {', '.join(missing)}; write pools with `rff-sdf pool`")
            for pool in self.pools:
                sdf_bench.check_pool(pool)
            missing = [str(mesh) for mesh in self.meshes if not Path(mesh).is_file()]
            if missing:
                raise UsageError(f"no mesh file {', '.join(missing)}; give existing mesh files to --meshes")
            jobs = sdf_bench.sdf_jobs([(name, Path(name)) for name in names], specs, self.train.iters)
            self.jobs.check(jobs)
            if self.jobs.list_jobs:
                print_jobs(jobs, out, partial(sdf_bench.job_status, out))
                return {"records": [], "written": {}}
            for mesh in self.meshes:  # a bad mesh fails before any other is sampled into --out
                load_mesh(mesh, fill_holes=self.fill_holes, notify=lambda message: None)  # said when sampled
            check_writable_folder(out, "--out")
            # logs/: the scripts' own; hidden entries: the job locks (.running/) and cut writes
            if out.is_dir() and any(path.name != "logs" and path.name[:1] != "." for path in out.iterdir()):
                if not any((out / name).exists() for name in ("runs", "pools", BENCHMARK_FILE)):
                    raise UsageError(
                        f"{out} is not empty and holds no SDF benchmark (runs/, pools/); choose another --out"
                    )
                if not (self.resume or self.jobs.overwrite):
                    raise UsageError(f"{out} holds a benchmark; pass --resume to go on or --overwrite to rerun it")
            out.mkdir(parents=True, exist_ok=True)
            sdf_bench.check_protocol(out, protocol, jobs, self.jobs.overwrite)
            shapes = [(Path(pool).stem, Path(pool)) for pool in self.pools]
            for mesh in () if self.pools else self.meshes or (None,):
                name = Path(mesh).stem if mesh is not None else GENERATED_SHAPE
                pool_path = out / "pools" / f"{name}.npz"
                if not (self.resume and pool_path.is_file()):
                    sdf_bench.write_pool(
                        mesh,
                        pool_path,
                        protocol["pool_size"],
                        self.train.coarse_scale,
                        self.train.fine_scale,
                        seed=self.train.seed,
                        fill_holes=self.fill_holes,
                        surface_samples=self.output.eval_samples,
                        sign_rays=self.sign_rays,
                        progress=self.progress,
                    )
                shapes.append((name, pool_path))
            try:
                records = sdf_bench.run_sdf_jobs(out, shapes, specs, network, self.train, self.output, self.jobs,
                                                 progress=self.progress, start=start)  # fmt: skip
            except FitInterrupted as interrupted:
                if not self.resume:  # this folder now holds a benchmark: going on needs --resume
                    interrupted.resume_with = "the same command with --resume"
                raise
            if self.jobs.job is not None:
                return {"records": records, "written": {}}
            if not records:
                print(f"no run under {out / 'runs'} has finished yet, so there is no report to write")
                return {"records": [], "written": {}}
        if self.floor:
            # measured like the runs: at their grid, sample count and threshold (with --reevaluate, the new ones)
            stored = {k: v for k, v in protocol.get("output", {}).items() if k in sdf_bench.MEASURED_WITH}
            floor_output = dataclasses.replace(self.output, **stored)
            done = {r["mesh"] for r in records if r["label"] == sdf_bench.FLOOR_LABEL}
            pools = {r["mesh"]: r["pool"] for r in records if r.get("pool")}
            for name, pool in pools.items():
                if name not in done:
                    records.append(sdf_bench.exact_floor(out, name, Path(pool), floor_output))
        written = sdf_bench.write_report(out, records, protocol, self.figure_mesh, self.output.view)
        print("wrote " + ", ".join(str(p) for p in written.values()))
        return {"records": records, "written": written}


@dataclass
class Pool:
    """Precompute BACON samples of a shape with exact signed distances into an .npz, plus the ground truth needed
    for the metrics, so that training can run where open3d is not installed (e.g. a GPU machine)."""

    out: Path
    """The .npz to write."""
    mesh: Optional[Path] = None
    """Watertight mesh (PLY, OBJ, OFF or STL); default: the generated shape."""
    size: int = 10_000_000
    """Number of samples (half coarse, half fine); iters x points-per-step gives fresh samples every step."""
    coarse_scale: float = 0.1
    """Laplace scale of the coarse samples."""
    fine_scale: float = 1e-3
    """Laplace scale of the fine samples."""
    seed: int = 0
    """Seed of the sampling."""
    eval_samples: int = 100_000
    """Ground-truth surface samples stored for the metrics."""
    fill_holes: bool = False
    """Close holes of the mesh before the watertightness check."""
    sign_rays: int = 1
    """Rays per point voting on inside/outside."""
    overwrite: bool = False
    """Replace an existing file."""

    def main(self) -> Path:
        """Run the command."""
        from rff_field.bench.sdf import write_pool

        out = Path(self.out)
        if out.suffix != ".npz":
            raise UsageError(f"--out {out} should end in .npz")
        if out.is_dir():
            raise UsageError(f"--out {out} is a folder; give the path of the .npz to write")
        if out.exists() and not self.overwrite:
            raise UsageError(f"{out} already exists; choose another --out or pass --overwrite")
        _check_sign_rays(self.sign_rays)
        check_fields(self, positive_int=("size", "eval_samples"), non_negative_int=("seed",),
                     positive=("coarse_scale", "fine_scale"))  # fmt: skip
        check_writable_folder(out.parent, "--out's folder")
        write_pool(
            self.mesh,
            out,
            self.size,
            self.coarse_scale,
            self.fine_scale,
            self.seed,
            self.fill_holes,
            self.eval_samples,
            self.sign_rays,
        )
        print(f"wrote {out}")
        return out


@dataclass
class Mesh:
    """Extract the mesh of a finished `rff-sdf fit` (or a benchmark's run) again from its weights, e.g. on a finer
    grid than the fit used: marching cubes of the network's zero level set over [-0.5, 0.5]^3, in BACON's
    normalised space, as the fit's mesh.ply."""

    fit: Path
    """Folder of the finished fit (holds config.json and model.pt), e.g. outputs/sdf."""
    output_path: Optional[Path] = None
    """The PLY to write; default: mesh-<resolution>.ply in the fit's folder."""
    resolution: int = 512
    """Marching-cubes grid side (memory and time grow as its cube)."""
    grid_batch: int = 65536
    """Grid points evaluated at a time (bounds memory)."""
    device: Literal["cpu", "cuda"] = "cpu"
    """Where to evaluate the network."""
    overwrite: bool = False
    """Replace an existing --output-path."""
    progress: bool = True
    """Show a progress bar over the grid."""

    def main(self) -> Path:
        """Run the command."""
        from rff_field.common.machine import resolve_device
        from rff_field.common.mesh import write_ply
        from rff_field.sdf.fit import extract_mesh
        from rff_field.sdf.run import MESHES, load_fitted_network

        check_fields(self, positive_int=("grid_batch",))
        if self.resolution < 8:
            raise UsageError(f"--resolution must be at least 8, got {self.resolution}")
        device = resolve_device(self.device, fallback="cpu")
        network = load_fitted_network(self.fit, device)  # first: a --fit that is no fit says so
        out = self.output_path or Path(self.fit) / MESHES.replace("*", str(self.resolution))
        check_output_path(out, (".ply",), self.overwrite)
        vertices, triangles = extract_mesh(network, self.resolution, device, self.grid_batch, progress=self.progress)
        if not len(triangles):
            raise UsageError(f"the SDF of {self.fit} does not cross level 0 in [-0.5, 0.5]^3: no surface to mesh; "
                             "try a finer --resolution, or fit again")  # fmt: skip
        write_ply(vertices, triangles, out, overwrite=True)
        print(f"wrote {out} ({len(triangles):,} triangles, {self.resolution}^3 grid)")
        return out


def _check_sign_rays(sign_rays: int) -> None:
    if sign_rays < 1 or sign_rays % 2 == 0:
        raise UsageError(f"--sign-rays must be an odd number >= 1 (the rays vote inside/outside), got {sign_rays}")


def _check_common(
    train: SDFTrainConfig, output: OutputConfig, network: Optional[SDFNetworkConfig] = None, sign_rays: int = 1
) -> None:
    if network is not None:
        network.check()
    train.check()
    _check_sign_rays(sign_rays)
    output.check()
    if train.device == "auto":  # the SDF tools take the device as written
        raise UsageError("--device auto is not read here; use --device cpu or cuda")
    from rff_field.common.machine import resolve_device  # imports torch: not needed for --help

    resolve_device(train.device, fallback="cpu")


Command = Union[
    Annotated[Fit, tyro.conf.subcommand("fit")],
    Annotated[Bench, tyro.conf.subcommand("bench")],
    Annotated[Pool, tyro.conf.subcommand("pool")],
    Annotated[Mesh, tyro.conf.subcommand("mesh")],
]


LEGACY_FLAGS = {
    **LINE_SEARCH_FLAGS,
    "--line-search-direction": "--line-search.direction",
    "--filter-lr-max": "--line-search.lr-max",
    "--filter-lr-min": "--line-search.lr-min",
}
"""Options of earlier versions (before the line-search options moved under ``--line-search.``)."""


def main(args: Optional[list[str]] = None) -> object:
    """Parse ``args`` and run the subcommand; user errors raise (see :func:`entrypoint`)."""
    return parse_command(Command, __doc__, args, prog="rff-sdf").main()


def entrypoint(args: Optional[list[str]] = None) -> None:
    """Console script ``rff-sdf``: user errors print one line and exit with status 2."""
    run_command("rff-sdf", Command, __doc__, LEGACY_FLAGS, args)


if __name__ == "__main__":
    entrypoint()
