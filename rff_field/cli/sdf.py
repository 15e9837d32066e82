"""``rff-sdf``: fit the signed distance function of a shape with BACON's protocol, mesh a fit, compare networks."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Literal, Optional, Sequence, Union

import tyro

from rff_field.cli.common import run_command
from rff_field.common.options import Flat, Values
from rff_field.core.errors import TrainingDiverged, UsageError
from rff_field.sdf.fit import SDFFitConfig


@dataclass
class Fit:
    """Fit the SDF of one watertight mesh (defaults: BACON's, 200,000 steps); write mesh.ply, render.png, model.pt and
    metrics.json (Chamfer, normal consistency, F-score). After Ctrl-C or --time-budget, rerun to go on."""

    mesh: Optional[Path] = None
    """The shape: a watertight PLY, OBJ, OFF or STL mesh; default: a generated bumpy sphere."""
    output_dir: Path = Path("outputs/sdf")
    """Output folder."""
    fill_holes: bool = False
    """Close the mesh's holes (open3d's fill_holes) before checking that it is watertight."""
    overwrite: bool = False
    """Replace the fit already in --output-dir."""
    progress: bool = True
    """Show progress bars."""
    config: Annotated[SDFFitConfig, Flat, Values] = field(default_factory=SDFFitConfig)

    def main(self) -> dict:
        """Fit, mesh, measure, write and print a one-line summary; returns the metrics."""
        from rff_field.sdf.fit import fit_shape

        self.config.check()
        metrics = fit_shape(self.config, self.mesh, self.output_dir, self.fill_holes, self.overwrite, self.progress)
        if metrics.get("diverged"):
            raise TrainingDiverged(f"{metrics['diverged']}; {self.output_dir / 'metrics.json'} is marked diverged")
        if metrics.get("stopped"):
            print(f"{metrics['stopped']}; the same command goes on")
        elif metrics["chamfer"] is None:
            print(f"{metrics['method']}: {metrics['steps']} steps, no surface at level 0 -> {self.output_dir}")
        else:
            print(f"{metrics['method']}: {metrics['steps']} steps, Chamfer {metrics['chamfer']:.3g}, F-score "
                  f"{metrics['f_score']:.3f} -> {self.output_dir}")  # fmt: skip
        return metrics


@dataclass
class Mesh:
    """Mesh a finished `rff-sdf fit` again (e.g. on a finer grid), in the fitted mesh's own coordinates."""

    fit: Path
    """Folder of the finished fit (holds metrics.json and model.pt)."""
    resolution: int = 128
    """Side of the marching-cubes grid over BACON's unit box (BACON: 512; the time grows as its cube)."""
    output_path: Optional[Path] = None
    """The mesh to write (PLY, OBJ, OFF or STL); default: mesh-<resolution>.ply in the fit's folder."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Where to evaluate the network."""
    overwrite: bool = False
    """Replace an existing --output-path."""
    progress: bool = True
    """Show a progress bar over the grid."""

    def main(self) -> Path:
        """Mesh, write and print where; returns the mesh's path."""
        import trimesh

        from rff_field.common.machine import resolve_device
        from rff_field.common.mesh import check_resolution, write_mesh
        from rff_field.common.outputs import check_output_file
        from rff_field.sdf.data import MESH_SUFFIXES
        from rff_field.sdf.fit import load_fit, mesh_network

        check_resolution(self.resolution)
        device = resolve_device(self.device)
        out = self.output_path or self.fit / f"mesh-{self.resolution}.ply"
        if out.suffix.lower() not in MESH_SUFFIXES:
            raise UsageError(f"--output-path {out} must end in one of {', '.join(MESH_SUFFIXES)}")
        check_output_file(out, "--output-path", self.overwrite)
        network, normalization = load_fit(self.fit)
        mesh = mesh_network(network.to(device), self.resolution, self.progress)
        if mesh.is_empty:
            raise UsageError(f"the network in {self.fit} has no zero level set in its unit box: nothing to mesh")
        write_mesh(trimesh.Trimesh(normalization.from_unit(mesh.vertices), mesh.faces), out, self.overwrite)
        print(f"wrote {out} ({len(mesh.faces):,} triangles, {self.resolution}^3 grid)")
        return out


@dataclass
class Bench:
    """Fit every variant ([LABEL:]PRESET[,key=value...]; presets mlp-pe, mlp-rff, filtered-pe, filtered-rff, siren,
    gauss, wire, bacon) to every shape into runs/<shape>/<variant>/ and results.json/md; a rerun goes on."""

    meshes: tuple[Path, ...] = ()
    """Watertight meshes (named by their file names); default: the generated bumpy sphere."""
    output_dir: Path = Path("outputs/sdf-bench")
    """Output folder."""
    variants: tuple[str, ...] = ("mlp-pe", "mlp-rff", "filtered-pe", "filtered-rff", "siren", "gauss", "wire", "bacon")
    """The rows of the table."""
    fill_holes: bool = False
    """Close the meshes' holes before checking that they are watertight."""
    shard: str = "1/1"
    """I/N: run jobs I, I+N, I+2N, ... of the grid (1-based)."""
    progress: bool = True
    """Show each fit's progress bars."""
    config: Annotated[SDFFitConfig, Flat, Values] = field(default_factory=SDFFitConfig)

    def main(self) -> list[dict]:
        """Run this shard's unfinished jobs; returns the finished jobs' rows."""
        from rff_field.fit.bench import Job, apply_variant, parse_variant, run_bench
        from rff_field.inr.config import PRESETS
        from rff_field.sdf.data import load_mesh
        from rff_field.sdf.fit import fit_shape

        self.config.check()
        presets = {name: options for name, options in PRESETS.items() if name != "sape"}  # SAPE is for images
        variants = [parse_variant(text, presets) for text in self.variants]
        configs = {variant.label: apply_variant(self.config, variant, presets) for variant in variants}  # checked
        for path in self.meshes:
            load_mesh(path, self.fill_holes)
        meshes = {path.stem: path for path in self.meshes} or {"generated": None}
        if len(meshes) < len(self.meshes):
            raise UsageError("--meshes: two meshes have the same file name (their jobs are named by it)")

        def run_job(job: Job) -> None:
            config = configs[job.variant.label]
            fit_shape(config, meshes[job.input], job.folder, self.fill_holes, progress=self.progress)

        protocol = {"config": asdict(self.config), "meshes": [str(path) for path in self.meshes],
                    "fill_holes": self.fill_holes}  # fmt: skip
        columns = [("Chamfer", "chamfer", ".3g"), ("F-score", "f_score", ".3f"), ("parameters", "parameters", ".0f"),
                   ("s/step", "seconds_per_step", ".4f")]  # fmt: skip
        rows = run_bench(self.output_dir, list(meshes), variants, run_job, protocol, columns, self.shard)
        print(f"{len(rows)} of {len(meshes) * len(variants)} jobs finished -> {self.output_dir / 'results.md'}")
        return rows


Command = Union[
    Annotated[Fit, tyro.conf.subcommand("fit")],
    Annotated[Mesh, tyro.conf.subcommand("mesh")],
    Annotated[Bench, tyro.conf.subcommand("bench")],
]


def entrypoint(args: Optional[Sequence[str]] = None) -> None:
    """Console script ``rff-sdf``."""
    run_command("rff-sdf", Command, __doc__, args)


if __name__ == "__main__":
    entrypoint()
