"""An SDF fit with BACON's protocol: the task of the shared fit loop, and a shape's fit from its mesh file to the
fitted network, its mesh (in the file's coordinates) and its metrics.

Defaults follow the BACON repository's SDF experiments, which the paper reuses: 10,000 samples a step, the loss
``sum fine^2 + 1e-2 sum coarse^2`` (averaged over BACON's outputs), Adam with AMSGrad, the gradient norm clipped to
1, the rate decaying log-linearly to 1e-4; ReLU MLPs of 8 layers of 256, SIREN and BACON of 8 hidden layers.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import torch
import trimesh
from torch import Tensor, nn

from rff_field.common.mesh import marching_cubes, sample_grid, write_mesh
from rff_field.common.outputs import write_json, write_torch
from rff_field.core.embedding import EmbeddingConfig
from rff_field.core.errors import TrainingDiverged, UsageError, check_fields
from rff_field.core.filter import split_filter_parameters
from rff_field.fit.checkpoint import CHECKPOINT_FILE, content_digest, settings_key
from rff_field.fit.loop import FitTask, TrainConfig, train
from rff_field.inr.bacon import Bacon
from rff_field.inr.config import NetworkConfig, build_network, count_parameters, network_label
from rff_field.sdf.data import Normalization, ShapeSampler, load_shape
from rff_field.sdf.metrics import shape_metrics
from rff_field.sdf.render import render_mesh, save_panels

logger = logging.getLogger(__name__)

DEFAULT_LR = {"siren": 1e-4, "bacon": 1e-2, "wire": 5e-3, "gauss": 5e-3}
"""The INR's initial rate by method, else 1e-3: BACON's SDF configs, and WIRE's occupancy script for WIRE and GAUSS."""
COARSE_SCALE, FINE_SCALE, COARSE_WEIGHT = 0.1, 1e-3, 1e-2
"""BACON's Laplace scales of the coarse and fine samples, and the coarse samples' weight in the loss."""
OUTPUT_FILES = ("mesh.ply", "metrics.json", "render.png", "model.pt", CHECKPOINT_FILE)
"""What a fit writes in its folder (``metrics.json`` last, once the rest is there)."""


@dataclass
class SDFNetworkConfig(NetworkConfig):
    """The network of an SDF fit; the defaults are BACON's SDF setup (and WIRE's occupancy script for WIRE and
    GAUSS)."""

    embedding: EmbeddingConfig = field(default_factory=lambda: EmbeddingConfig(rff_sigma=8.0))
    """The Fourier feature embedding of ``mlp`` (default here: 32 log-linear bands per axis, or 128 RFF of sigma 8)."""
    hidden_layers: Optional[int] = None  # type: ignore[assignment]
    """Hidden layers after the first; default 7 (BACON's 8-layer ReLU MLP), 8 for SIREN and BACON."""
    wire_omega0: float = 10.0
    """WIRE's wavelet frequency."""
    wire_sigma0: float = 40.0
    """WIRE's wavelet inverse width."""
    gauss_scale: float = 40.0
    """GAUSS's inverse width."""

    def resolved(self) -> NetworkConfig:
        """The network config with the method's defaults filled in."""
        layers = self.hidden_layers if self.hidden_layers is not None else 8 if self.method in ("siren", "bacon") else 7
        embedding = self.embedding
        if embedding.num_frequencies is None and embedding.encoding == "pe":
            embedding = dataclasses.replace(embedding, num_frequencies=32)
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(NetworkConfig)}
        return NetworkConfig(**{**fields, "hidden_layers": layers, "embedding": embedding})


def sdf_train_config() -> TrainConfig:
    """The shared loop's settings with BACON's SDF optimisation."""
    return TrainConfig(lr_final=1e-4, grad_clip=1.0, amsgrad=True)


@dataclass
class SDFFitConfig:
    """Everything that decides an SDF fit's result."""

    network: SDFNetworkConfig = field(default_factory=SDFNetworkConfig)
    train: TrainConfig = field(default_factory=sdf_train_config)
    points_per_step: int = 10_000
    """Samples a step: half coarse (Laplace scale 0.1 around the surface), half fine (1e-3)."""
    resolution: int = 128
    """Side of the marching-cubes grid over [-0.5, 0.5]^3 (BACON: 512, about an hour on two CPU cores)."""

    def check(self) -> None:
        """Raise :class:`UsageError` for options that cannot work, before any long work."""
        self.network.resolved().check()
        self.train.check()
        check_fields(self, positive_int=("points_per_step", "resolution"))
        if self.points_per_step < 2 or self.resolution < 8:
            raise UsageError("--points-per-step must be at least 2 and --resolution at least 8")

    def lr(self) -> float:
        return self.train.lr if self.train.lr is not None else DEFAULT_LR.get(self.network.method, 1e-3)


class SDFTask(FitTask):
    """BACON's SDF regression: fresh samples every step, ``sum fine^2 + 1e-2 sum coarse^2``."""

    def __init__(self, sampler: ShapeSampler, points_per_step: int, device: torch.device) -> None:
        self.sampler, self.points_per_step, self.device = sampler, points_per_step, device

    def loss(self, model: nn.Module, step: int) -> Tensor:
        points, sdf = (t.to(self.device) for t in self.sampler.sample(self.points_per_step))
        outputs = model.forward_multiscale(points) if isinstance(model, Bacon) else [model(points)]
        squared = torch.stack([(output.squeeze(-1) - sdf) ** 2 for output in outputs]).mean(0)
        coarse = self.points_per_step // 2
        return squared[coarse:].sum() + COARSE_WEIGHT * squared[:coarse].sum()

    def state_dict(self) -> dict:
        return {"rng": self.sampler.rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        self.sampler.rng.bit_generator.state = state["rng"]


@torch.no_grad()
def mesh_network(network: nn.Module, resolution: int, device: torch.device, progress: bool = True) -> trimesh.Trimesh:
    """Marching cubes of the network's zero level set on a ``resolution**3`` grid over [-0.5, 0.5]^3 (unit space)."""
    if progress:
        logger.info(f"meshing the zero level set on a {resolution}^3 grid ({resolution**3:,} points)")
    network.to(device).eval()
    description = f"mesh {resolution}^3" if progress else None
    values = sample_grid(network, [-0.5] * 3, [0.5] * 3, resolution, device=device, description=description)
    return marching_cubes(values, [-0.5] * 3, [0.5] * 3, inside="below")


def save_network(path: Path, network: nn.Module, config: NetworkConfig, normalization: Normalization) -> None:
    """``model.pt``: the weights, the network's config and BACON's map from the mesh file's units."""
    write_torch(path, {"network": dataclasses.asdict(config), "normalization": dataclasses.asdict(normalization),
                       "state_dict": network.state_dict()})  # fmt: skip


def load_network(path: Path) -> tuple[nn.Module, Normalization]:
    """The network and the map from the mesh file's units that :func:`save_network` wrote, in eval mode."""
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
        config = NetworkConfig(**{**saved["network"], "embedding": EmbeddingConfig(**saved["network"]["embedding"])})
        network = build_network(config, 3, 1)
        network.load_state_dict(saved["state_dict"])
        normalization = Normalization(**saved["normalization"])
    except (OSError, RuntimeError, KeyError, TypeError) as err:
        raise UsageError(f"cannot read the fitted network in {path} ({type(err).__name__}); fit it again") from None
    return network.eval(), normalization


def fit_shape(
    config: SDFFitConfig, mesh: Optional[Path], out: Path, fill_holes: bool = False, progress: bool = True
) -> dict:
    """Fit the SDF of the mesh file ``mesh`` (None: the generated shape) and write into ``out``: ``model.pt``,
    ``mesh.ply`` (in the mesh file's coordinates), ``render.png`` and ``metrics.json`` (last). A fit killed before
    the end resumes from its checkpoint in ``out``; a diverged one writes its ``metrics.json`` marked so and raises
    :class:`TrainingDiverged`; one stopped by the time budget writes it marked ``stopped``.

    Returns:
        The metrics (in BACON's unit space, where the shape spans [-0.45, 0.45]).
    """
    config.check()
    truth, normalization = load_shape(mesh, fill_holes)
    network_config = config.network.resolved()
    device = config.train.torch_device()
    torch.manual_seed(config.train.seed)
    network = build_network(network_config, 3, 1).to(device)
    task = SDFTask(ShapeSampler(truth, COARSE_SCALE, FINE_SCALE, config.train.seed), config.points_per_step, device)
    settings = settings_key(dataclasses.asdict(config), content_digest(truth.vertices, truth.faces))
    label = network_label(network_config)
    name = "generated" if mesh is None else Path(mesh).stem
    history = train(network, task, config.train, config.lr(), out / CHECKPOINT_FILE, settings, f"{name} {label}",
                    progress)  # fmt: skip
    filter_parameters = sum(p.numel() for p in split_filter_parameters(network)[0])
    record = {"label": label, "mesh": str(mesh) if mesh is not None else "generated", "lr": config.lr(),
              "parameters": count_parameters(network), "filter_parameters": filter_parameters,
              "resolution": config.resolution, "config": json.loads(json.dumps(dataclasses.asdict(config), default=str))}  # fmt: skip
    if history.diverged is not None or history.stopped is not None:
        write_json(out / "metrics.json", {**record, **history.metrics()})
        if history.diverged is not None:
            raise TrainingDiverged(f"{history.diverged}; {out / 'metrics.json'} records it")
        return {**record, **history.metrics()}
    save_network(out / "model.pt", network, network_config, normalization)
    fitted = mesh_network(network, config.resolution, device, progress)
    metrics = shape_metrics(fitted, truth)
    if fitted.is_empty:
        logger.warning(f"the fitted SDF has no zero level set in the unit box: no {out / 'mesh.ply'}")
    else:
        write_mesh(trimesh.Trimesh(normalization.from_unit(fitted.vertices), fitted.faces), out / "mesh.ply", True)
    views = [(35.0, 20.0), (215.0, 20.0)]
    panels = [(f"{what}, azimuth {view[0]:g}", render_mesh(shape, view)) for what, shape in (("fit", fitted),
              ("ground truth", truth)) for view in views]  # fmt: skip
    chamfer = f"Chamfer {metrics['chamfer']:.3g}" if metrics["chamfer"] is not None else "no surface"
    save_panels(panels, out / "render.png", f"{name} · {label} · {history.steps} steps · {chamfer}")
    record = {**record, **metrics, "mesh_triangles": len(fitted.faces), **history.metrics()}
    write_json(out / "metrics.json", record)
    (out / CHECKPOINT_FILE).unlink(missing_ok=True)
    return record
