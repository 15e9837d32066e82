"""``rff-nerfacto``: nerfstudio's nerfacto whose main field embeds the contracted position with a (filtered) Fourier
feature embedding instead of a hash grid.

Proposal networks, proposal sampling, scene contraction, appearance embedding, camera optimisation, losses and
predicted normals are nerfacto's. The filter's parameters form the optimizer group ``filter``, whose rate the line
search sets every step (as in ``rff-nerf``); ``use_filter=False`` is the unfiltered baseline.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Literal, Optional, Tuple, Type

import numpy as np
import torch
from nerfstudio.engine.callbacks import TrainingCallback, TrainingCallbackAttributes, TrainingCallbackLocation
from nerfstudio.field_components.spatial_distortions import SceneContraction
from nerfstudio.fields.density_fields import HashMLPDensityField
from nerfstudio.model_components.losses import MSELoss
from nerfstudio.model_components.ray_samplers import ProposalNetworkSampler, UniformSampler
from nerfstudio.model_components.renderers import AccumulationRenderer, DepthRenderer, NormalsRenderer, RGBRenderer
from nerfstudio.model_components.scene_colliders import NearFarCollider
from nerfstudio.model_components.shaders import NormalsShader
from nerfstudio.models.base_model import Model
from nerfstudio.models.nerfacto import NerfactoModel, NerfactoModelConfig
from torch import Tensor
from torch.nn import Parameter
from torchmetrics.functional import structural_similarity_index_measure
from torchmetrics.image import PeakSignalNoiseRatio

from rff_field.core.embedding import PEBands
from rff_field.nerf.filtered_model import FIELDS_GROUP, FilteredModelConfig, FilteredModelMixin
from rff_field.nerf.hash_grid import use_faster_torch_hash_grid
from rff_field.nerf.nerfacto_field import FourierNerfactoField

LITE_PROPOSAL_SAMPLES = (32, 16)
"""rff-nerfacto-lite's proposal samples per ray, the counts with which the Fourier field trained on an object in a void
(with nerfacto's 256 + 96 it grew no surface there; docs/nerf.md)."""
LITE_FIELD_SAMPLES = 16
"""rff-nerfacto-lite's field samples per ray."""
COARSE_SAMPLING_STEPS = 200
"""rff-nerfacto's training steps with -lite's counts before its own on an object in a void."""


@dataclass
class RFFNerfactoModelConfig(FilteredModelConfig, NerfactoModelConfig):
    """rff-nerfacto: nerfacto with a filtered Fourier feature field in place of its hash grid (Ma et al., ICML 2025).

    nerfacto's hash-grid options (num_levels, base_res, max_res, log2_hashmap_size, features_per_level) do not
    apply to the main field (ns-train refuses them); the proposal networks keep theirs (proposal_net_args_list). The
    filter is the residual form by default (filter_residual), and nerfacto's distortion loss is off
    (distortion_loss_mult).
    """

    _target: Type = field(default_factory=lambda: RFFNerfactoModel)
    base_num_layers: int = 4
    """Layers of the density MLP on the embedding (its width is hidden_dim)."""
    hidden_dim: int = 128
    """Width of the density MLP."""
    num_frequencies: int = 12
    """PE bands per coordinate."""
    pe_bands: PEBands = "loglinear"
    """PE bands: 'loglinear' = sin(2 pi s^(i/L) x), i=1..L (the paper); 'pow2' = sin(2 pi 2^k x);
    'nerf-pytorch' = sin(2^k x), k=0..L-1."""
    rff_num_frequencies: int = 64
    """Number of random frequency vectors of the 'rff' embedding (it has twice as many features)."""
    filter_residual: bool = True
    """Feed (1 + f(gamma)) * gamma (a deviation from the paper, the default here) or, with False, the paper's
    f(gamma) * gamma, which on a capture with surroundings often ends in a blurred average (docs/nerf.md)."""
    distortion_loss_mult: float = 0.0
    """nerfacto's distortion loss (0.002 there) is off: on a capture with surroundings it drove this Fourier field
    into a blurred average of the photos (docs/nerf.md)."""
    predict_normals: bool = True
    """Predict normals (the 'normals' output that ns-export pointcloud and poisson read)."""
    coarse_sampling_steps: Optional[int] = None
    """Train the first this many steps with the coarse counts below, then with num_proposal_samples_per_ray and
    num_nerf_samples_per_ray (0: those from the start). None, the default, chooses by the data: 200 on a
    Blender-format scene (an object in a void), where the Fourier field grew no surface when it started with
    nerfacto's counts, and 0 on any other data (a capture with surroundings), where 0 did better (docs/nerf.md)."""
    coarse_proposal_samples_per_ray: Tuple[int, ...] = LITE_PROPOSAL_SAMPLES
    """Proposal samples per ray (per proposal iteration) for the first coarse_sampling_steps steps."""
    coarse_nerf_samples_per_ray: int = LITE_FIELD_SAMPLES
    """Field samples per ray for the first coarse_sampling_steps steps."""
    implementation: Literal["tcnn", "torch"] = "tcnn"
    """MLPs and direction encoding: 'tcnn' (tinycudann; torch with nerfstudio's notice when it is missing) or
    'torch'. The embedding and the filter are always torch."""

    def sample_counts(self, step: int) -> Tuple[Tuple[int, ...], int]:
        """The proposal samples per ray (per proposal iteration) and the field samples per ray at training ``step``
        (``coarse_sampling_steps`` chosen: :func:`rff_field.nerf.pipeline.choose_coarse_sampling`)."""
        if self.coarse_sampling_steps is None:
            raise ValueError("coarse_sampling_steps is None: choose it by the data first (choose_coarse_sampling)")
        if step < self.coarse_sampling_steps:
            return tuple(self.coarse_proposal_samples_per_ray), self.coarse_nerf_samples_per_ray
        return tuple(self.num_proposal_samples_per_ray), self.num_nerf_samples_per_ray

    def __setstate__(self, state: dict) -> None:
        # nerfstudio reads a run's config.yml without __init__: one written before an option existed trained without
        # it (the paper's filter form, the configured counts from the first step), whatever today's default is.
        self.__dict__.update({"filter_residual": False, "coarse_sampling_steps": 0, **state})


class RFFNerfactoModel(FilteredModelMixin, NerfactoModel):
    """nerfacto with :class:`~rff_field.nerf.nerfacto_field.FourierNerfactoField` and the filter's line search.

    Args:
        config: The model's configuration.
    """

    config: RFFNerfactoModelConfig
    field: FourierNerfactoField

    def populate_modules(self) -> None:
        """nerfacto's modules, with the Fourier field, and LPIPS loaded only when evaluating (offline it is skipped).

        Written out rather than calling ``NerfactoModel.populate_modules``, which builds a hash-grid field and
        downloads LPIPS weights.
        """
        Model.populate_modules(self)
        config = self.config
        contraction = None if config.disable_scene_contraction else SceneContraction(order=float("inf"))
        self.field = FourierNerfactoField(
            self.scene_box.aabb,
            num_images=self.num_train_data,
            position=config.position_spec(),
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

        # nerfacto's proposal networks and sampler
        self.proposal_networks = torch.nn.ModuleList()
        num_networks = 1 if config.use_same_proposal_network else config.num_proposal_iterations
        for i in range(num_networks):
            args = config.proposal_net_args_list[min(i, len(config.proposal_net_args_list) - 1)]
            network = HashMLPDensityField(self.scene_box.aabb, spatial_distortion=contraction, **args,
                                          average_init_density=config.average_init_density,
                                          implementation=config.implementation)  # fmt: skip
            use_faster_torch_hash_grid(network)
            self.proposal_networks.append(network)
        self.density_fns = [self.proposal_networks[min(i, num_networks - 1)].density_fn
                            for i in range(config.num_proposal_iterations)]  # fmt: skip

        def update_schedule(step):
            return np.clip(np.interp(step, [0, config.proposal_warmup], [0, config.proposal_update_every]), 1,
                           config.proposal_update_every)  # fmt: skip

        self.proposal_sampler = ProposalNetworkSampler(
            num_nerf_samples_per_ray=config.num_nerf_samples_per_ray,
            num_proposal_samples_per_ray=config.num_proposal_samples_per_ray,
            num_proposal_network_iterations=config.num_proposal_iterations,
            single_jitter=config.use_single_jitter,
            update_sched=update_schedule,
            initial_sampler=(
                UniformSampler(single_jitter=config.use_single_jitter)
                if config.proposal_initial_sampler == "uniform"
                else None
            ),
        )
        self.collider = NearFarCollider(near_plane=config.near_plane, far_plane=config.far_plane)

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
        return self.config.use_filter

    def lpips(self, image: Tensor, reference: Tensor) -> Tensor:
        """What nerfacto's evaluation calls: LPIPS, or NaN (then dropped from the metrics) without its weights."""
        metric = self.lpips_metric()
        return metric(image, reference) if metric is not None else torch.tensor(float("nan"))

    def get_param_groups(self) -> Dict[str, List[Parameter]]:
        """nerfacto's groups (``proposal_networks``, ``fields``, ``camera_opt``), the filter moved to ``filter``."""
        return self.split_filter_group(super().get_param_groups(), FIELDS_GROUP)

    def get_loss_dict(self, outputs, batch, metrics_dict=None) -> Dict[str, Tensor]:
        """nerfacto's losses; in training, their sum is kept for the line search."""
        loss_dict = super().get_loss_dict(outputs, batch, metrics_dict)
        self.record_training_loss(loss_dict)
        return loss_dict

    def get_training_callbacks(
        self, training_callback_attributes: TrainingCallbackAttributes
    ) -> List[TrainingCallback]:
        """nerfacto's proposal annealing, the coarse sampling of the first steps, then the divergence stop, the line
        search and the filter-rate log."""
        callbacks = super().get_training_callbacks(training_callback_attributes)
        if self.config.coarse_sampling_steps != 0:  # None (not chosen) fails in sample_counts, at once
            before_step = [TrainingCallbackLocation.BEFORE_TRAIN_ITERATION]
            callbacks.append(TrainingCallback(where_to_run=before_step, func=self.set_sample_counts))
        return callbacks + self.filter_callbacks(training_callback_attributes)

    def set_sample_counts(self, step: int) -> None:
        """Sample with the coarse counts before step ``coarse_sampling_steps``, with the configured ones from it (so
        that evaluation, the viewer and a resumed run past it use the configured counts)."""
        sampler = self.proposal_sampler
        sampler.num_proposal_samples_per_ray, sampler.num_nerf_samples_per_ray = self.config.sample_counts(step)

    def get_image_metrics_and_images(
        self, outputs: Dict[str, Tensor], batch: Dict[str, Tensor]
    ) -> Tuple[Dict[str, float], Dict[str, Tensor]]:
        """nerfacto's PSNR, SSIM and images; LPIPS when its weights load."""
        metrics, images = super().get_image_metrics_and_images(outputs, batch)
        lpips: Optional[float] = metrics.pop("lpips", None)
        if lpips is not None and np.isfinite(lpips):
            metrics["lpips"] = lpips
        return metrics, images
