"""``rff-sdf``: fit the signed distance function of a shape with BACON's protocol, mesh it, compare networks.

Subcommands:
    fit    one network on one shape: mesh.ply (in the shape's own coordinates), render.png, model.pt, metrics.json
    mesh   a finished fit's mesh again, e.g. on a finer grid
    bench  several networks on several shapes, one protocol: results.json, results.md
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal, Optional, Union

import tyro

from rff_field.cli.common import run_command
from rff_field.core.errors import TrainingDiverged, UsageError
from rff_field.sdf.fit import SDFFitConfig

Flat = tyro.conf.arg(name="")


def check_out_folder(out: Path, overwrite: bool) -> None:
    """Refuse an ``--out`` that holds anything but a resumable fit (its checkpoint and outputs) unless
    ``overwrite``, which removes the earlier fit's files."""
    from rff_field.sdf.fit import OUTPUT_FILES

    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file; give a folder")
    present = {path.name for path in out.iterdir()} if out.is_dir() else set()
    resumable = "checkpoint.pt" in present and present <= set(OUTPUT_FILES)
    if present and not resumable and not overwrite:
        raise UsageError(f"--out {out} is not empty; choose another folder or pass --overwrite")
    for name in OUTPUT_FILES if overwrite else ():
        (out / name).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)


@dataclass
class Fit:
    """Fit the SDF of one watertight mesh and write into --out: mesh.ply (marching cubes, in the mesh's own
    coordinates), render.png (the fit beside the mesh), model.pt and metrics.json (measured in BACON's unit space)."""

    mesh: Optional[Path] = None
    """The shape: a watertight PLY, OBJ, OFF or STL mesh; default: a generated bumpy sphere."""
    out: Path = Path("outputs/sdf")
    """Output folder: empty, absent, or holding an interrupted fit with these settings (which resumes)."""
    fit: Annotated[SDFFitConfig, Flat] = field(default_factory=SDFFitConfig)
    fill_holes: bool = False
    """Close the mesh's holes (open3d's fill_holes) before checking that it is watertight."""
    overwrite: bool = False
    """Replace the fit in a non-empty --out."""
    progress: bool = True
    """Show progress bars."""

    def main(self) -> dict:
        from rff_field.sdf.data import load_mesh
        from rff_field.sdf.fit import fit_shape

        self.fit.check()
        if self.mesh is not None:
            load_mesh(self.mesh, self.fill_holes)  # a bad mesh fails before --out is touched
        check_out_folder(self.out, self.overwrite)
        record = fit_shape(self.fit, self.mesh, self.out, self.fill_holes, self.progress)
        if "stopped" in record:
            print(f"{record['stopped']}; the same command goes on")
        else:
            print(f"{record['label']}: {record['steps']} steps, Chamfer {record['chamfer']}, F-score "
                  f"{record['f_score']:.3f} -> {self.out}")  # fmt: skip
        return record


@dataclass
class Mesh:
    """Mesh a finished `rff-sdf fit` again from its model.pt, e.g. on a finer grid: marching cubes of the network's
    zero level set over BACON's unit box, written in the fitted mesh's own coordinates."""

    fit: Path
    """The folder of a finished `rff-sdf fit`."""
    resolution: int = 128
    """Side of the marching-cubes grid; the time grows as its cube (BACON's 512: about an hour on two CPU cores)."""
    output_path: Optional[Path] = None
    """The mesh to write (PLY, OBJ, OFF or STL); default: mesh-<resolution>.ply in the fit's folder."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Where to evaluate the network."""
    overwrite: bool = False
    """Replace an existing --output-path."""
    progress: bool = True
    """Show a progress bar over the grid."""

    def main(self) -> Path:
        import json

        import torch
        import trimesh

        from rff_field.common.mesh import write_mesh
        from rff_field.sdf.fit import check_resolution, load_network, mesh_network

        check_resolution(self.resolution)
        try:
            metrics = json.loads((self.fit / "metrics.json").read_text())
        except (OSError, ValueError):
            raise UsageError(f"--fit {self.fit} is not a finished `rff-sdf fit` (no metrics.json)") from None
        if metrics.get("diverged") or metrics.get("stopped"):
            what = "diverged" if metrics.get("diverged") else "was stopped before its last step"
            raise TrainingDiverged(f"the fit in {self.fit} {what}, so it has no network to mesh; fit it again")
        path = self.output_path or self.fit / f"mesh-{self.resolution}.ply"
        if path.exists() and not self.overwrite:
            raise UsageError(f"--output-path {path} exists; choose another or pass --overwrite")
        network, normalization = load_network(self.fit / "model.pt")
        device = torch.device("cuda" if self.device == "cuda" or (self.device == "auto" and torch.cuda.is_available()) else "cpu")
        mesh = mesh_network(network, self.resolution, device, self.progress)
        if mesh.is_empty:
            raise UsageError(f"the network of {self.fit} has no zero level set in its unit box; nothing to mesh")
        write_mesh(trimesh.Trimesh(normalization.from_unit(mesh.vertices), mesh.faces), path, self.overwrite)
        print(f"wrote {path} ({len(mesh.faces):,} triangles, {self.resolution}^3 grid)")
        return path


@dataclass
class Bench:
    """Fit every network of --variants on every mesh of --meshes with one protocol (the options below, as in `fit`),
    one folder per job (runs/<mesh>/<variant>/, the files of `fit`), and write results.json and results.md."""

    meshes: tuple[Path, ...] = ()
    """Watertight meshes; default: the generated bumpy sphere."""
    variants: tuple[str, ...] = ("mlp-pe", "filtered-pe", "mlp-rff", "filtered-rff", "siren", "gauss", "wire", "bacon")
    """Rows, each [LABEL:]PRESET[,key=value...] with the options of this command by their config path, e.g.
    fixed-lr:filtered-pe,line_search.enabled=false or mlp-pe,hidden_features=157."""
    out: Path = Path("outputs/sdf-bench")
    """The bench's folder; rerun the same command to go on with its unfinished jobs."""
    fit: Annotated[SDFFitConfig, Flat] = field(default_factory=SDFFitConfig)
    fill_holes: bool = False
    """Close the meshes' holes before checking that they are watertight."""
    shard: str = "1/1"
    """I/N: run only jobs I, I+N, ... (for N processes side by side)."""
    progress: bool = True
    """Show progress bars."""

    def main(self) -> list[dict]:
        from rff_field.fit.bench import apply_variant, parse_variant, run_bench
        from rff_field.inr.config import PRESETS
        from rff_field.sdf.data import load_mesh
        from rff_field.sdf.fit import fit_shape

        self.fit.check()
        presets = {name: options for name, options in PRESETS.items() if name != "sape"}  # SAPE is for images
        variants = [parse_variant(text, presets) for text in self.variants]
        for variant in variants:
            apply_variant(self.fit, variant, presets).check()
        names = [path.stem for path in self.meshes] or ["generated"]
        if len(set(names)) < len(names):
            raise UsageError("--meshes: two meshes have the same file name (jobs are named by it)")
        for path in self.meshes:
            load_mesh(path, self.fill_holes)
        paths = dict(zip(names, self.meshes or [None]))

        def run_job(job) -> None:
            job.folder.mkdir(parents=True, exist_ok=True)  # the runner's: it resumes or replaces what is there
            try:
                fit_shape(apply_variant(self.fit, job.variant, presets), paths[job.input], job.folder, self.fill_holes,
                          self.progress)  # fmt: skip
            except TrainingDiverged as err:  # recorded in its metrics.json: the other jobs go on
                print(f"{job.variant.label} on {job.input}: {err}")

        protocol = {"fit": dataclasses.asdict(self.fit), "meshes": [str(path) for path in self.meshes], "fill_holes": self.fill_holes}
        columns = [("Chamfer", "chamfer", ".3g"), ("F-score", "f_score", ".3f"), ("s/step", "seconds_per_step", ".3g")]
        return run_bench(self.out, names, variants, run_job, protocol, columns, self.shard)


Command = Union[
    Annotated[Fit, tyro.conf.subcommand("fit")],
    Annotated[Mesh, tyro.conf.subcommand("mesh")],
    Annotated[Bench, tyro.conf.subcommand("bench")],
]


def entrypoint(args: Optional[list[str]] = None) -> None:
    """Console script ``rff-sdf``."""
    run_command("rff-sdf", Command, __doc__, args)


if __name__ == "__main__":
    entrypoint()
