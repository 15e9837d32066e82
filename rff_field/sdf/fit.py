"""SDF regression on the fit loop with the BACON repository's protocol (which the paper reuses; WIRE's occupancy
constants for WIRE and GAUSS): from a mesh file to the fitted network, its mesh and its distance to the truth."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Annotated, Optional

import torch
import trimesh
import tyro
from torch import Tensor, nn

from rff_field.common.machine import TRAINING_BYTES_PER_PARAMETER, bytes_per_sample, check_memory, machine_description
from rff_field.common.mesh import check_resolution, marching_cubes, sample_grid, write_mesh
from rff_field.common.options import Flat
from rff_field.common.outputs import claimed_folder, write_json, write_torch
from rff_field.common.torch_state import seeded
from rff_field.common.trained import WEIGHTS_FILE, config_from_dict, load_trained_network
from rff_field.core.embedding import EmbeddingConfig
from rff_field.core.errors import UsageError, check_fields
from rff_field.fit.bench import check_fit_folder
from rff_field.fit.checkpoint import CHECKPOINT_FILE, content_digest, settings_key
from rff_field.fit.loop import HISTORY_BYTES_PER_STEP, FitTask, TrainConfig, train
from rff_field.inr.bacon import Bacon
from rff_field.inr.config import NetworkConfig, build_network, count_parameters, network_label, parameter_metrics
from rff_field.sdf.data import Normalization, ShapeSampler, load_shape
from rff_field.sdf.metrics import shape_metrics
from rff_field.sdf.render import render_mesh, save_panels

logger = logging.getLogger(__name__)

DEFAULT_LR = {"siren": 1e-4, "bacon": 1e-2, "wire": 5e-3, "gauss": 5e-3}
"""The INR's initial rate by method (BACON's SDF configs; WIRE's occupancy script); every other method 1e-3."""
COARSE_SCALE, FINE_SCALE, COARSE_WEIGHT = 0.1, 1e-3, 1e-2
"""BACON's Laplace scales of the coarse and the fine samples, and the coarse samples' weight in the loss."""
OUTPUTS = (CHECKPOINT_FILE, WEIGHTS_FILE, "mesh.ply", "render.png", "metrics.json")
"""What a fit writes in its folder, ``metrics.json`` last."""
SAMPLE_BYTES_PER_POINT = 128
"""Host memory a training sample takes while it is drawn (surface point, noise, signed distance)."""


@dataclass
class SDFNetworkConfig(NetworkConfig):
    """The network of an SDF fit (defaults: BACON's SDF setup; WIRE's occupancy script for WIRE and GAUSS)."""

    embedding: EmbeddingConfig = field(default_factory=lambda: EmbeddingConfig(rff_sigma=8.0))
    """The Fourier feature embedding of ``mlp``: 32 log-linear bands per axis, or 128 RFF of sigma 8."""
    hidden_layers: Optional[int] = None  # type: ignore[assignment]
    """Hidden layers after the first; default 7 (BACON's 8-layer ReLU MLP), 8 for SIREN and BACON."""
    wire_omega0: float = 10.0
    """WIRE's wavelet frequency."""
    wire_sigma0: float = 40.0
    """WIRE's wavelet inverse width."""
    gauss_scale: float = 40.0
    """GAUSS's inverse width."""
    sape_res: tyro.conf.Suppress[int] = 128  # SAPE is an image method
    sape_epsilon: tyro.conf.Suppress[float] = 1e-3

    def resolved(self) -> NetworkConfig:
        """The network with the method's defaults filled in."""
        layers = self.hidden_layers if self.hidden_layers is not None else 8 if self.method in ("siren", "bacon") else 7
        embedding = self.embedding
        if embedding.num_frequencies is None and embedding.encoding == "pe":
            embedding = replace(embedding, num_frequencies=32)
        return NetworkConfig(**{**asdict(self), "hidden_layers": layers, "embedding": embedding})


@dataclass
class SDFTrainConfig(TrainConfig):
    """The fit loop with BACON's SDF optimisation."""

    lr_final: Optional[float] = 1e-4
    """The INR's rate at the last step, reached log-linearly from --lr."""
    grad_clip: float = 1.0
    """Clip the gradients' norm to this; 0: no clipping."""
    amsgrad: bool = True
    """Adam with AMSGrad."""
    filter_schedule: bool = True
    """Without the line search: decay the filter's rate with the INR's instead of keeping it constant."""


@dataclass
class SDFFitConfig:
    """How to fit a shape's SDF and mesh it."""

    network: Annotated[SDFNetworkConfig, Flat] = field(default_factory=SDFNetworkConfig)
    """The coordinate network."""
    train: Annotated[SDFTrainConfig, Flat] = field(default_factory=SDFTrainConfig)
    """The optimisation."""
    steps: int = 2000
    """Optimizer steps."""
    points_per_step: int = 10_000
    """Samples a step: half coarse (Laplace scale 0.1 around the surface), half fine (1e-3)."""
    resolution: int = 128
    """Side of the marching-cubes grid over BACON's unit box (BACON: 512; the time grows as its cube)."""

    def check(self) -> None:
        """Raise :class:`UsageError` for options that cannot work, before any long work."""
        if self.network.method == "sape":
            raise UsageError("--method sape is an image method; choose mlp, siren, gauss, wire or bacon")
        self.network.resolved().check()
        self.train.check()
        check_fields(self, positive_int=("steps", "points_per_step"))
        if self.points_per_step < 2:
            raise UsageError(f"--points-per-step must be at least 2, got {self.points_per_step}")
        check_resolution(self.resolution)


class SDFTask(FitTask):
    """BACON's SDF regression: fresh samples every step, loss ``sum fine^2 + 1e-2 sum coarse^2``."""

    def __init__(self, sampler: ShapeSampler, points_per_step: int, device: torch.device) -> None:
        self.sampler, self.points_per_step, self.device = sampler, points_per_step, device

    def loss(self, model: nn.Module, step: int) -> Tensor:
        points, sdf = (values.to(self.device) for values in self.sampler.sample(self.points_per_step))
        outputs = model.forward_multiscale(points) if isinstance(model, Bacon) else [model(points)]
        squared = torch.stack([(output.squeeze(-1) - sdf) ** 2 for output in outputs]).mean(0)
        coarse = self.points_per_step // 2
        return squared[coarse:].sum() + COARSE_WEIGHT * squared[:coarse].sum()

    def state_dict(self) -> dict:
        return {"rng": self.sampler.rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        self.sampler.rng.bit_generator.state = state["rng"]


@torch.no_grad()
def mesh_network(network: nn.Module, resolution: int, progress: bool = True) -> trimesh.Trimesh:
    """The network's zero level set on a ``resolution**3`` grid over BACON's unit box, in its coordinates."""
    if progress:
        logger.info(f"meshing the zero level set on a {resolution}^3 grid ({resolution**3:,} points)")
    device = next(network.parameters()).device
    values = sample_grid(network.eval(), [-0.5] * 3, [0.5] * 3, resolution, device=device,
                         description=f"mesh {resolution}^3" if progress else None)  # fmt: skip
    return marching_cubes(values, [-0.5] * 3, [0.5] * 3, inside="below")


def fit_shape(
    config: SDFFitConfig,
    mesh: Optional[Path],
    out: Path,
    fill_holes: bool = False,
    overwrite: bool = False,
    progress: bool = True,
) -> dict:
    """Fit the SDF of the mesh file ``mesh`` (None: the generated shape) and write :data:`OUTPUTS` into ``out``;
    returns the metrics. A stopped fit keeps its checkpoint; a diverged one writes its last finite state, marked
    ``diverged`` and not meshed, for the caller to raise."""
    truth, normalization = load_shape(mesh, fill_holes)
    network_config = config.network.resolved()
    device = config.train.torch_device()
    with seeded(config.train.seed):
        network = build_network(network_config, 3, 1).to(device)
    per_point = SAMPLE_BYTES_PER_POINT + bytes_per_sample(network)
    state = TRAINING_BYTES_PER_PARAMETER * count_parameters(network)
    check_memory("--points-per-step", config.points_per_step, lambda points: state + per_point * points, device)
    check_memory("--steps", config.steps, lambda steps: HISTORY_BYTES_PER_STEP * steps, device)
    with claimed_folder(out, "--output-dir"):
        check_fit_folder(out, overwrite, (*OUTPUTS, "mesh-*.ply"))
        return _fit(config, network, network_config, truth, normalization, mesh, Path(out), progress)


def _fit(config: SDFFitConfig, network: nn.Module, network_config: NetworkConfig, truth: trimesh.Trimesh,
         normalization: Normalization, mesh: Optional[Path], out: Path, progress: bool) -> dict:  # fmt: skip
    name = "generated" if mesh is None else Path(mesh).stem
    device = next(network.parameters()).device
    task = SDFTask(ShapeSampler(truth, COARSE_SCALE, FINE_SCALE, config.train.seed), config.points_per_step, device)
    label = network_label(network_config)
    train_config = config.train.with_rates(DEFAULT_LR.get(network_config.method, 1e-3))
    history = train(network, task, train_config, config.steps, checkpoint=out / CHECKPOINT_FILE,
                    settings=settings_key(asdict(config), content_digest(truth.vertices, truth.faces)),
                    description=f"{name} {label}", progress=progress)  # fmt: skip
    metrics = {
        "method": label, "mesh": str(mesh or "generated"), "inr_lr": train_config.lr, "resolution": config.resolution,
        **parameter_metrics(network),
        "device": str(device), "machine": machine_description(device), "config": asdict(config),
        "network": asdict(network_config), "normalization": asdict(normalization), **history.metrics(),
    }  # fmt: skip
    if history.stopped:
        write_json(out / "metrics.json", metrics)
        return metrics
    write_torch(out / WEIGHTS_FILE, network.state_dict())
    if history.diverged:  # its last finite state is kept, not meshed
        write_json(out / "metrics.json", metrics)
        return metrics
    fitted = mesh_network(network, config.resolution, progress)
    metrics.update(shape_metrics(fitted, truth), mesh_triangles=len(fitted.faces))
    if fitted.is_empty:
        logger.warning(f"the network has no zero level set in the unit box: no {out / 'mesh.ply'}")
    else:
        write_mesh(trimesh.Trimesh(normalization.from_unit(fitted.vertices), fitted.faces), out / "mesh.ply", True)
    panels = [(f"{what}, azimuth {azimuth}", render_mesh(shape, (azimuth, 20.0)))
              for what, shape in (("fit", fitted), ("ground truth", truth)) for azimuth in (35, 215)]  # fmt: skip
    chamfer = f"Chamfer {metrics['chamfer']:.3g}" if metrics["chamfer"] is not None else "no surface"
    save_panels(panels, out / "render.png", f"{name}: {label}, {history.steps} steps, {chamfer}")
    write_json(out / "metrics.json", metrics)
    (out / CHECKPOINT_FILE).unlink(missing_ok=True)
    return metrics


def load_fit(folder: Path) -> tuple[nn.Module, Normalization]:
    """The network of the finished SDF fit in ``folder`` (BACON's unit box to signed distances, eval mode) and the map
    from the fitted mesh file's units into that box."""
    network, metrics = load_trained_network(
        folder, lambda metrics: build_network(config_from_dict(NetworkConfig, metrics["network"]), 3, 1), "rff-sdf fit"
    )
    return network, config_from_dict(Normalization, metrics["normalization"])
