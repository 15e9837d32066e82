"""One SDF fit from start to files: train, extract the mesh, measure it against the ground truth, render, write.

Shared by ``rff-sdf fit`` and ``rff-sdf bench`` (also on a GPU machine, from sample pools); it needs neither
tyro nor open3d (without open3d the metrics use a KD-tree and the rendering is skipped).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable, Iterator, Optional

import numpy as np
import torch

from rff_field.common.checkpoint import CHECKPOINT_FILE, holds_unfinished_fit
from rff_field.common.machine import machine_info
from rff_field.common.mesh import write_ply
from rff_field.common.outputs import (
    check_writable_folder,
    clear_outputs,
    write_json,
    write_text,
    write_torch,
    written_atomically,
)
from rff_field.common.stopping import FitInterrupted
from rff_field.common.trained import WEIGHTS_FILE, load_trained_network
from rff_field.core.errors import TrainingDiverged, UsageError, check_fields
from rff_field.sdf.checkpoint import sdf_settings
from rff_field.sdf.data import MeshSDF, Normalization, SamplePool, is_closed
from rff_field.sdf.fit import (
    Sampler,
    SDFNetworkConfig,
    SDFTrainConfig,
    build_sdf_network,
    extract_mesh,
    initial_lr,
    parameter_counts,
    train_sdf,
)
from rff_field.sdf.metrics import Surface, shape_metrics


def open3d_available() -> bool:
    try:
        import open3d  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass
class GroundTruth:
    """The target shape in normalised space, with the surface samples the metrics compare against."""

    name: str
    vertices: np.ndarray
    triangles: np.ndarray
    surface_points: np.ndarray
    surface_normals: np.ndarray
    normalization: Optional[Normalization] = None
    """The map from the mesh file's units into normalised space (None for a pool written without it)."""

    def __post_init__(self) -> None:
        self._surface: Optional[Surface] = None

    @classmethod
    def from_mesh_sdf(
        cls, shape: MeshSDF, name: str, samples: int = 100_000, normalization: Optional[Normalization] = None
    ) -> "GroundTruth":
        points, normals = shape.surface_samples(samples)
        return cls(name, shape.vertices, shape.triangles, points, normals, normalization)

    @classmethod
    def from_arrays(cls, arrays: dict, name: str) -> "GroundTruth":
        """From the arrays of a sample pool (see :func:`~rff_field.sdf.data.build_pool`)."""
        normalization = Normalization.from_array(arrays["normalization"]) if "normalization" in arrays else None
        return cls(name, arrays["vertices"], arrays["triangles"], arrays["surface_points"], arrays["surface_normals"],
                   normalization)  # fmt: skip

    @property
    def surface(self) -> Surface:
        if self._surface is None:
            self._surface = Surface(self.vertices, self.triangles)
        return self._surface


@dataclass
class OutputConfig:
    """What a fit writes and how its result is measured."""

    resolution: int = 256
    """Marching-cubes grid side over [-0.5, 0.5]^3 (BACON: 512)."""
    grid_batch: int = 1 << 16
    """Grid points evaluated at a time (bounds memory)."""
    eval_samples: int = 100_000
    """Surface samples on each mesh for Chamfer, normal consistency and F-score."""
    f_threshold: float = 0.005
    """F-score distance threshold, in normalised units (the shape spans 0.9)."""
    render: bool = True
    """Write render.png: the result beside the ground truth (needs open3d)."""
    view: tuple[float, float] = (35.0, 20.0)
    """Rendering azimuth and elevation in degrees."""
    save_model: bool = True
    """Write the trained weights to model.pt."""

    def check(self) -> None:
        """Raise :class:`UsageError` for settings that cannot give a mesh or metrics."""
        check_fields(self, positive_int=("grid_batch", "eval_samples"), positive=("f_threshold",))
        if not all(math.isfinite(angle) for angle in self.view):
            raise UsageError(f"--view must be two finite angles in degrees (azimuth, elevation), got {self.view}")
        if self.resolution < 8:
            raise UsageError(f"--resolution must be at least 8, got {self.resolution}")


MESHES = "mesh-*.ply"
"""The default names of ``rff-sdf mesh`` outputs in a fit's folder (stale once the fit is run again)."""
OUTPUT_FILES = ("mesh.ply", "metrics.json", "history.npz", "config.json", "render.png", WEIGHTS_FILE)
"""The files a fit writes."""


def load_fitted_network(folder: Path, device: str = "cpu") -> torch.nn.Module:
    """The trained network of a finished fit's folder (``config.json`` and ``model.pt``), in eval mode: it maps
    points of BACON's normalised space, ``[N, 3]`` in [-0.5, 0.5]^3, to signed distances ``[N, 1]``.

    Raises:
        UsageError: If the folder is not a finished fit with its weights (``--no-save-model`` writes none).
    """
    network, _ = load_trained_network(
        folder,
        "config.json",
        lambda settings: build_sdf_network(SDFNetworkConfig(**settings["network"])),
        "rff-sdf fit",
        "it was fit with --no-save-model; fit it again without that option (and with --overwrite)",
    )
    return network.to(device)


def check_out_dir(path: Path, overwrite: bool) -> None:
    """Refuse a folder that cannot be written, or a non-empty one unless ``overwrite`` (a folder that holds the
    checkpoint of a fit that was killed, and what it wrote before it finished, is fine: the fit resumes from it)."""
    check_writable_folder(path, "--out")
    ours = {CHECKPOINT_FILE, *(OUTPUT_FILES if holds_unfinished_fit(path) else ())}
    # Hidden files are not a user's work here: the temporary files of a write that a kill cut short, .DS_Store.
    others = [e for e in path.iterdir() if e.name not in ours and not e.name.startswith(".")] if path.is_dir() else []
    if others and not overwrite:
        raise UsageError(f"{path} is not empty; choose another --out or pass --overwrite")


def prepare_out_dir(path: Path, overwrite: bool) -> Path:
    """Create ``path`` (checked as :func:`check_out_dir`) without an earlier fit's outputs."""
    path = Path(path)
    check_out_dir(path, overwrite)
    path.mkdir(parents=True, exist_ok=True)
    clear_outputs(path, (*OUTPUT_FILES, MESHES))  # and meshes of an earlier fit's weights
    return path


def render_comparison(out: Path, vertices, triangles, gt: GroundTruth, view, title: str) -> Optional[Path]:
    """``render.png``: the fit beside the ground truth (skipped without open3d)."""
    if not open3d_available():
        return None
    from rff_field.sdf.render import render_mesh, save_panels

    panels = [
        ("fit", render_mesh(vertices, triangles, view=view)),
        ("ground truth", render_mesh(gt.vertices, gt.triangles, view=view)),
    ]
    return save_panels(panels, out / "render.png", title=title)


@contextlib.contextmanager
def _resumable_outputs(checkpoint: Path, steps: int) -> Iterator[None]:
    """Ctrl-C while meshing, measuring or writing: the checkpoint of the last step lets the same command go on."""
    try:
        yield
    except KeyboardInterrupt:
        saved = [checkpoint] if checkpoint.is_file() else []
        raise FitInterrupted(
            f"interrupted after training ({steps} steps), while meshing, measuring or writing", saved
        ) from None


def run_sdf(
    out: Path,
    gt: GroundTruth,
    sampler: Sampler,
    network_config: SDFNetworkConfig,
    train_config: SDFTrainConfig,
    output: OutputConfig,
    label: Optional[str] = None,
    progress: bool = True,
    extra: Optional[dict] = None,
    stop_at: Optional[float] = None,
    notify: Optional[Callable[[str], None]] = None,
) -> dict:
    """Train, extract, measure and write one fit into ``out`` (which must exist); returns the metrics.

    When training diverges, the outputs of the last finite state are written and :class:`TrainingDiverged` is raised.
    The fit keeps a checkpoint in ``out`` while it trains (from which a killed run with the same settings resumes),
    removed once the outputs are written. Past ``stop_at`` (a ``time.monotonic()`` value) training stops with its
    checkpoint, nothing else is written, and the record returned holds only ``stopped``, ``iters`` and ``label``.

    Writes ``mesh.ply``, ``metrics.json``, ``history.npz`` (loss and filter rate per step), ``config.json``,
    ``render.png`` (with open3d) and ``model.pt`` (if ``output.save_model``).
    """
    network_config = network_config.resolved()
    method = network_config.method
    label = label or method
    network = build_sdf_network(network_config, seed=train_config.seed)
    counts = parameter_counts(network)

    checkpoint = out / CHECKPOINT_FILE
    settings = sdf_settings(network_config, train_config, gt.name, sampler)
    train = partial(train_sdf, network, sampler, method, train_config, checkpoint=checkpoint, settings=settings,
                    stop_at=stop_at, notify=notify)  # fmt: skip
    if progress:
        from rff_field.common.progress import training_progress

        with training_progress(train_config.iters, f"{gt.name} {label}") as on_step:
            result = train(on_step=on_step)
    else:
        result = train()
    if result.stopped is not None:
        return {"stopped": result.stopped, "iters": result.iters, "label": label}

    with _resumable_outputs(checkpoint, result.iters):
        t0 = time.perf_counter()
        vertices, triangles = extract_mesh(
            network, output.resolution, train_config.device, output.grid_batch, progress=progress
        )
        mesh_seconds = time.perf_counter() - t0
        if progress and len(triangles):
            held, wanted = len(gt.surface_points), output.eval_samples
            samples = f"{wanted} points each"
            if held < wanted:
                samples = f"{wanted} points on the mesh, {held} (all the pool holds) on the ground truth"
            print(f"measuring the mesh against the ground truth ({samples})", flush=True)
        t0 = time.perf_counter()
        metrics = shape_metrics(
            Surface(vertices, triangles, exact=gt.surface.exact),
            gt.surface,
            num_samples=output.eval_samples,
            f_threshold=output.f_threshold,
            gt_samples=(gt.surface_points, gt.surface_normals),
        )
        eval_seconds = time.perf_counter() - t0
        if len(triangles):
            write_ply(vertices, triangles, out / "mesh.ply", overwrite=True)
        losses = np.asarray(result.loss, dtype=np.float64)
        tail = losses[-max(1, len(losses) // 20) :] if len(losses) else losses
        record = {
            "method": method,
            "label": label,
            "mesh": gt.name,
            "iters": result.iters,
            "iters_requested": train_config.iters,
            "seconds_per_iter": result.seconds_per_iter,
            "cpu_seconds_per_iter": result.cpu_seconds / max(result.steps_run, 1),
            "sampling_seconds_per_iter": result.sampling_seconds / max(result.steps_run, 1),
            **metrics,
            **counts,
            "hidden_features": network_config.hidden_features,
            "hidden_layers": network_config.hidden_layers,
            "resolution": output.resolution,
            "points_per_step": train_config.points_per_step,
            "lr": initial_lr(method, train_config),
            "lr_final": train_config.lr_final,
            "line_search": bool(counts["filter_parameters"]) and train_config.line_search.enabled,
            "final_loss": float(losses[-1]) if len(losses) else None,
            "final_loss_mean_last5pct": float(tail.mean()) if len(tail) else None,
            "filter_lr_final": result.filter_lr[-1] if result.filter_lr else None,
            "filter_lr_mean": float(np.mean(result.filter_lr)) if result.filter_lr else None,
            "filter_lr_at_max_fraction": (
                float(np.mean(np.asarray(result.filter_lr) >= train_config.line_search.lr_max * (1 - 1e-9)))
                if result.filter_lr and train_config.line_search.enabled
                else None
            ),
            "diverged_at": result.diverged_at,
            "diverged": result.diverged,
            "resumed_at": result.resumed_at or None,
            "mesh_vertices": int(len(vertices)),
            "mesh_triangles": int(len(triangles)),
            "mesh_closed": bool(is_closed(triangles)),
            "marching_cubes_seconds": mesh_seconds,
            "eval_seconds": eval_seconds,
            "train_seconds": result.seconds,
            "device": str(train_config.device),
            "sampling": "pool" if isinstance(sampler, SamplePool) else "fresh",
            "seed": train_config.seed,
            "machine": machine_info(),
            "normalization": gt.normalization.as_dict() if gt.normalization is not None else None,
            **(extra or {}),
        }
        settings = {"network": dataclasses.asdict(network_config), "train": dataclasses.asdict(train_config)}
        write_text(out / "config.json", json.dumps(settings, indent=2, default=str) + "\n")
        with written_atomically(out / "history.npz") as temporary:
            np.savez(temporary, loss=losses.astype(np.float32), filter_lr=np.asarray(result.filter_lr, np.float32))
        if output.save_model:
            write_torch(out / WEIGHTS_FILE, network.state_dict())
        if output.render:
            cd = metrics.get("chamfer")
            quality = f"Chamfer {cd:.3g}" if cd is not None else "no surface"
            state = f"diverged at step {result.diverged_at}" if result.diverged else f"{result.iters} steps"
            render_comparison(out, vertices, triangles, gt, output.view, f"{gt.name} · {label} · {state} · {quality}")
        write_json(out / "metrics.json", record, indent=2)  # last: its presence marks the run as finished
    checkpoint.unlink(missing_ok=True)
    if result.diverged is not None:
        raise TrainingDiverged(f"{result.diverged}; its outputs are in {out}, marked diverged in metrics.json")
    return record
