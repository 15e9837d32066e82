"""``rff-nerfacto``: nerfacto whose main field is a (filtered) Fourier embedding of the contracted position and an
MLP in place of a hash grid; options left to the data (None) are chosen by ``pipeline.choose_by_data``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Literal, Optional, Tuple, Type

import numpy as np
import torch
from nerfstudio.cameras.camera_optimizers import CameraOptimizerConfig
from nerfstudio.engine.callbacks import TrainingCallback, TrainingCallbackAttributes, TrainingCallbackLocation
from nerfstudio.field_components.spatial_distortions import SceneContraction
from nerfstudio.model_components.losses import MSELoss
from nerfstudio.model_components.ray_samplers import ProposalNetworkSampler, UniformSampler
from nerfstudio.model_components.renderers import AccumulationRenderer, DepthRenderer, NormalsRenderer, RGBRenderer
from nerfstudio.model_components.scene_colliders import AABBBoxCollider, NearFarCollider
from nerfstudio.model_components.shaders import NormalsShader
from nerfstudio.models.base_model import Model
from nerfstudio.models.nerfacto import NerfactoModel, NerfactoModelConfig
from torch import Tensor
from torch.nn import Parameter
from torchmetrics.functional import structural_similarity_index_measure
from torchmetrics.image import PeakSignalNoiseRatio

from rff_field.core.embedding import EmbeddingConfig, PEBands
from rff_field.core.errors import UsageError, check_fields
from rff_field.nerf.filtered_model import MODEL_OPTION, FilteredModelConfig, FilteredModelMixin
from rff_field.nerf.hash_grid import ProposalDensityField
from rff_field.nerf.nerfacto_field import FourierNerfactoField

HASH_GRID_OPTIONS = ("num_levels", "base_res", "max_res", "log2_hashmap_size", "features_per_level")
"""nerfacto's options of its main field's hash grid, which the Fourier field does not have."""


@dataclass
class DataCameraOptimizerConfig(CameraOptimizerConfig):
    """nerfacto's camera optimizer, whose mode the data chooses unless given."""

    mode: Optional[Literal["off", "SO3xR3", "SE3"]] = None
    """Pose optimization; None: off on a Blender scene (exact poses), SO3xR3 (nerfacto's) on other data."""


@dataclass
class DataEmbeddingConfig(EmbeddingConfig):
    """The field's Fourier embedding, whose PE bands the data chooses unless given."""

    pe_bands: Optional[PEBands] = None
    """PE bands; None: nerf-pytorch's octaves 2^k / (2 pi) on a Blender scene, whose object fills the box (the
    embedding's whole domain), the paper's loglinear elsewhere, where the objects are small near the centre."""


@dataclass
class RFFNerfactoModelConfig(FilteredModelConfig, NerfactoModelConfig):
    """rff-nerfacto: nerfacto with a filtered Fourier feature field in place of its hash grid (Ma et al., ICML 2025);
    nerfacto's hash-grid options apply to the proposal networks only (proposal_net_args_list)."""

    _target: Type = field(default_factory=lambda: RFFNerfactoModel)
    embedding: DataEmbeddingConfig = field(default_factory=lambda: DataEmbeddingConfig(
        encoding="pe", num_frequencies=12, pe_scale=64.0, include_input=True, filter_residual=True,
        filter_fused=False))  # fmt: skip
    """The embedding of the contracted position and its filter; residual, (1 + f(gamma)) * gamma, by default: with
    the paper's f(gamma) * gamma a capture with surroundings often ended in a blurred average (docs/nerf.md)."""
    base_num_layers: int = 4
    """Layers of the density MLP on the embedding (its width is hidden_dim)."""
    hidden_dim: int = 128
    """Width of the density MLP."""
    distortion_loss_mult: float = 0.0
    """nerfacto's distortion loss (0.002 there), off: with it the Fourier field often ended in a blurred average."""
    predict_normals: bool = True
    """Predict normals (the 'normals' output that ns-export pointcloud and poisson read)."""
    background_color: Optional[Literal["random", "last_sample", "black", "white"]] = None
    """Background composited behind the scene; None: white on a Blender scene, last_sample (nerfacto's) on other
    data."""
    camera_optimizer: DataCameraOptimizerConfig = field(default_factory=DataCameraOptimizerConfig)
    """Camera pose optimisation."""
    disable_scene_contraction: Optional[bool] = None
    """Leave the scene uncontracted: the field is the scene box, and rays are sampled where they cross it; None: on a
    Blender scene (an object in the box, cameras outside it), contracted (nerfacto's) on other data."""
    proposal_initial_sampler: Optional[Literal["piecewise", "uniform"]] = None
    """The proposal networks' first samples: uniform along the ray, or piecewise (uniform near the camera, then in
    disparity); None: uniform where the scene is the box (its rays are short), piecewise (nerfacto's) elsewhere."""
    average_init_density: Optional[float] = None
    """The fields' density at the start; None: 0.2 where the scene is the box (a ray across the Blender box, 3 units,
    starts about half opaque), 0.01 (nerfacto's) elsewhere, where rays reach far."""
    use_appearance_embedding: Optional[bool] = None
    """A learned appearance code per image; None: none on a Blender scene (renders share their lighting), else on."""
    coarse_sampling_steps: Optional[int] = None
    """Train the first this many steps with the coarse counts below; None: 200 on a Blender scene, where the Fourier
    field grew no surface when it started with nerfacto's counts, 0 on other data."""
    coarse_proposal_samples_per_ray: Tuple[int, ...] = (32, 16)
    """Proposal samples per ray (per proposal iteration) of the first coarse_sampling_steps steps."""
    coarse_nerf_samples_per_ray: int = 16
    """Field samples per ray of the first coarse_sampling_steps steps."""
    implementation: Literal["tcnn", "torch"] = "tcnn"
    """nerfacto's MLPs and direction encoding with tinycudann (torch, with nerfstudio's notice, when it is missing)
    or torch. The embedding and the filter are always torch."""

    def check(self) -> None:
        """Raise :class:`UsageError` for options of this config (not nerfacto's) the model cannot be built with."""
        self.embedding.check(prefix=MODEL_OPTION + "embedding.")
        self.line_search.check(prefix=MODEL_OPTION + "line-search.")
        defaults = NerfactoModelConfig()
        for name in HASH_GRID_OPTIONS:
            if getattr(self, name) != getattr(defaults, name):
                option = MODEL_OPTION + name.replace("_", "-")
                raise UsageError(f"{option} does not apply to rff-nerfacto's Fourier field (it has no hash grid); see "
                                 f"{MODEL_OPTION}embedding.num-frequencies")  # fmt: skip
        check_fields(self, positive_int=("hidden_dim", "base_num_layers", "coarse_nerf_samples_per_ray"),
                     non_negative_int=("coarse_sampling_steps",), prefix=MODEL_OPTION)  # fmt: skip
        counts = self.coarse_proposal_samples_per_ray
        if len(counts) < self.num_proposal_iterations or min(counts) < 1:
            option = f"{MODEL_OPTION}coarse-proposal-samples-per-ray {' '.join(map(str, counts))}"
            raise UsageError(f"{option} needs a positive count for each of the {self.num_proposal_iterations} "
                             "proposal iterations")  # fmt: skip

    def sample_counts(self, step: int) -> Tuple[Tuple[int, ...], int]:
        """Proposal samples per ray (per iteration) and field samples per ray at training ``step``."""
        if step < (self.coarse_sampling_steps or 0):
            return tuple(self.coarse_proposal_samples_per_ray), self.coarse_nerf_samples_per_ray
        return tuple(self.num_proposal_samples_per_ray), self.num_nerf_samples_per_ray


class RFFNerfactoModel(FilteredModelMixin, NerfactoModel):
    """nerfacto with :class:`~rff_field.nerf.nerfacto_field.FourierNerfactoField` and the filter's line search."""

    config: RFFNerfactoModelConfig
    field: FourierNerfactoField

    def populate_modules(self) -> None:
        """nerfacto's modules with the Fourier field (written out: ``NerfactoModel.populate_modules`` builds a
        hash-grid field and downloads LPIPS weights)."""
        Model.populate_modules(self)
        config = self.config
        contraction = None if config.disable_scene_contraction else SceneContraction(order=float("inf"))
        self.field = FourierNerfactoField(
            self.scene_box.aabb,
            num_images=self.num_train_data,
            position=config.embedding,
            num_layers=config.base_num_layers,
            hidden_dim=config.hidden_dim,
            hidden_dim_color=config.hidden_dim_color,
            hidden_dim_transient=config.hidden_dim_transient,
            spatial_distortion=contraction,
            use_pred_normals=config.predict_normals,
            use_average_appearance_embedding=config.use_average_appearance_embedding,
            appearance_embedding_dim=config.appearance_embed_dim if config.use_appearance_embedding else 0,
            average_init_density=config.average_init_density,
            implementation=config.implementation,
        )
        self.camera_optimizer = config.camera_optimizer.setup(num_cameras=self.num_train_data, device="cpu")
        num_networks = 1 if config.use_same_proposal_network else config.num_proposal_iterations
        self.proposal_networks = torch.nn.ModuleList(
            ProposalDensityField(self.scene_box.aabb, spatial_distortion=contraction,
                                 **config.proposal_net_args_list[min(i, len(config.proposal_net_args_list) - 1)],
                                 average_init_density=config.average_init_density,
                                 implementation=config.implementation)
            for i in range(num_networks)
        )  # fmt: skip
        self.density_fns = [self.proposal_networks[min(i, num_networks - 1)].density_fn
                            for i in range(config.num_proposal_iterations)]  # fmt: skip

        def update_schedule(step):
            return np.clip(np.interp(step, [0, config.proposal_warmup], [0, config.proposal_update_every]), 1,
                           config.proposal_update_every)  # fmt: skip

        uniform = config.proposal_initial_sampler == "uniform"
        self.proposal_sampler = ProposalNetworkSampler(
            num_nerf_samples_per_ray=config.num_nerf_samples_per_ray,
            num_proposal_samples_per_ray=config.num_proposal_samples_per_ray,
            num_proposal_network_iterations=config.num_proposal_iterations,
            single_jitter=config.use_single_jitter,
            update_sched=update_schedule,
            initial_sampler=UniformSampler(single_jitter=config.use_single_jitter) if uniform else None,
        )
        near, far = config.near_plane, config.far_plane
        self.collider = (AABBBoxCollider(self.scene_box, near_plane=near) if config.disable_scene_contraction
                         else NearFarCollider(near_plane=near, far_plane=far))  # fmt: skip
        self.renderer_rgb = RGBRenderer(background_color=config.background_color)
        self.renderer_accumulation = AccumulationRenderer()
        self.renderer_depth = DepthRenderer(method="median")
        self.renderer_expected_depth = DepthRenderer(method="expected")
        self.renderer_normals = NormalsRenderer()
        self.normals_shader = NormalsShader()
        self.rgb_loss = MSELoss()
        self.psnr = PeakSignalNoiseRatio(data_range=1.0)
        self.ssim = structural_similarity_index_measure
        self.step = 0
        self.setup_filter()

    @property
    def has_filter(self) -> bool:
        """Whether the position embedding is filtered (then the ``filter`` optimizer group exists)."""
        return self.config.embedding.filtered

    def lpips(self, image: Tensor, reference: Tensor) -> Tensor:
        """What nerfacto's evaluation calls: LPIPS, or NaN (then dropped) without its weights."""
        metric = self.lpips_metric()
        return metric(image, reference) if metric is not None else torch.tensor(float("nan"))

    def get_param_groups(self) -> Dict[str, List[Parameter]]:
        """nerfacto's groups (``proposal_networks``, ``fields``, ``camera_opt``), the filter moved to ``filter``."""
        return self.split_filter_group(super().get_param_groups())

    def get_loss_dict(self, outputs, batch, metrics_dict=None) -> Dict[str, Tensor]:
        """nerfacto's losses."""
        loss_dict = super().get_loss_dict(outputs, batch, metrics_dict)
        self.record_training(loss_dict, outputs)
        return loss_dict

    def get_training_callbacks(self, attributes: TrainingCallbackAttributes) -> List[TrainingCallback]:
        """nerfacto's proposal annealing, the coarse start's sample counts, the line search and the filter-rate log."""
        before_step = [TrainingCallbackLocation.BEFORE_TRAIN_ITERATION]
        counts = TrainingCallback(where_to_run=before_step, func=self.set_sample_counts)
        return [*super().get_training_callbacks(attributes), counts, *self.filter_callbacks(attributes)]

    def set_sample_counts(self, step: int) -> None:
        """The coarse counts before step ``coarse_sampling_steps``, the configured ones from it (evaluation, the
        viewer and a resumed run past it use the configured ones)."""
        sampler = self.proposal_sampler
        sampler.num_proposal_samples_per_ray, sampler.num_nerf_samples_per_ray = self.config.sample_counts(step)

    def get_image_metrics_and_images(self, outputs, batch) -> Tuple[Dict[str, float], Dict[str, Tensor]]:
        """nerfacto's PSNR, SSIM and images; LPIPS when its weights load."""
        metrics, images = super().get_image_metrics_and_images(outputs, batch)
        if not np.isfinite(metrics.get("lpips", 0.0)):
            del metrics["lpips"]
        return metrics, images
