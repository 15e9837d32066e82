"""``rff-nerf``: vanilla NeRF (coarse + fine fields) whose Fourier embeddings pass through the bias-free filter.

The filter's parameters form the optimizer group ``filter``; every training step, after backward and before the
optimizers step, :class:`~rff_field.core.line_search.FilterLineSearch` sets that group's learning rate. With the filter
switched off the model is the "MLP+PE" baseline: the same fields, samplers and losses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Literal, Tuple, Type

import torch
from jaxtyping import Float
from nerfstudio.cameras.rays import RayBundle
from nerfstudio.engine.callbacks import TrainingCallback, TrainingCallbackAttributes
from nerfstudio.field_components.field_heads import FieldHeadNames
from nerfstudio.fields.vanilla_nerf_field import NeRFField
from nerfstudio.model_components.losses import MSELoss
from nerfstudio.model_components.ray_samplers import PDFSampler, UniformSampler
from nerfstudio.model_components.renderers import AccumulationRenderer, DepthRenderer, RGBRenderer
from nerfstudio.models.base_model import Model, ModelConfig
from nerfstudio.utils import colormaps, misc
from torch import Tensor, nn
from torch.nn import Parameter
from torchmetrics.functional import structural_similarity_index_measure
from torchmetrics.image import PeakSignalNoiseRatio

from rff_field.core.embedding import EmbeddingConfig
from rff_field.core.optim import LineSearchConfig
from rff_field.nerf.field import make_nerf_field
from rff_field.nerf.filtered_model import FIELDS_GROUP, FilteredModelConfig, FilteredModelMixin

_FLAT_LINE_SEARCH = ("rule", "direction", "lr_min", "lr_max", "eps", "c1")
"""The line-search options that configs before ``line_search: LineSearchConfig`` held as ``line_search_<name>``."""


@dataclass
class RFFNeRFModelConfig(FilteredModelConfig, ModelConfig):
    """rff-nerf: NeRF with a bias-free adaptive filter on its Fourier feature embedding (Ma et al., ICML 2025)."""

    _target: Type = field(default_factory=lambda: RFFNeRFModel)
    num_coarse_samples: int = 64
    """Samples per ray for the coarse field (stratified)."""
    num_importance_samples: int = 128
    """Extra samples per ray for the fine field (drawn from the coarse weights)."""
    background_color: Literal["random", "last_sample", "black", "white"] = "white"
    """Background colour composited behind the scene."""
    base_mlp_num_layers: int = 8
    """Layers of each field's density MLP."""
    base_mlp_layer_width: int = 256
    """Width of each field's density MLP."""
    skip_connections: Tuple[int, ...] = (4,)
    """Layers of the density MLP that also receive the embedding."""
    head_mlp_num_layers: int = 2
    """Layers of the colour head."""
    head_mlp_layer_width: int = 128
    """Width of the colour head."""
    num_frequencies: int = 10
    """PE bands per coordinate for positions."""
    pe_bands: Literal["nerf-pytorch", "loglinear", "pow2", "nerf", "log-linear"] = "nerf-pytorch"
    """PE bands: 'nerf-pytorch' = sin(2^k x), k=0..L-1; 'loglinear' = sin(2 pi s^(i/L) x), i=1..L (the paper);
    'pow2' = sin(2 pi 2^k x). 'nerf' and 'log-linear' are the earlier names of 'nerf-pytorch' and 'loglinear'."""
    rff_num_frequencies: int = 128
    """Number of random frequency vectors of the 'rff' embedding (it has twice as many features)."""
    direction_num_frequencies: int = 4
    """PE bands per coordinate for viewing directions (nerf-pytorch bands)."""
    filter_direction: bool = False
    """Also filter the direction embedding."""

    def __setstate__(self, state: dict) -> None:
        """Read a ``config.yml`` written before the line-search options moved into ``line_search``."""
        if not isinstance(state.get("line_search", LineSearchConfig()), LineSearchConfig):
            old = {
                name: state.pop(f"line_search_{name}") for name in _FLAT_LINE_SEARCH if f"line_search_{name}" in state
            }
            state["line_search"] = LineSearchConfig(enabled=bool(state["line_search"]), **old)
        self.__dict__.update(state)

    def direction_spec(self) -> EmbeddingConfig:
        """The direction embedding this config describes (always nerf-pytorch PE bands)."""
        return EmbeddingConfig(
            kind="pe",
            num_frequencies=self.direction_num_frequencies,
            pe_bands="nerf-pytorch",
            include_input=True,
            filtered=self.filter_direction,
            **self.filter_options(),
        )


class RFFNeRFModel(FilteredModelMixin, Model):
    """Coarse-to-fine NeRF with filtered Fourier embeddings and a line-searched filter learning rate.

    Args:
        config: The model's configuration.
    """

    config: RFFNeRFModelConfig
    field_coarse: NeRFField
    field_fine: NeRFField

    def populate_modules(self) -> None:
        """Build the fields, samplers, renderers, loss and metrics."""
        super().populate_modules()
        self.field_coarse = self._make_field()
        self.field_fine = self._make_field()

        self.sampler_uniform = UniformSampler(num_samples=self.config.num_coarse_samples)
        self.sampler_pdf = PDFSampler(num_samples=self.config.num_importance_samples)

        self.renderer_rgb = RGBRenderer(background_color=self.config.background_color)
        self.renderer_accumulation = AccumulationRenderer()
        self.renderer_depth = DepthRenderer()

        self.rgb_loss = MSELoss()
        self.psnr = PeakSignalNoiseRatio(data_range=1.0)
        self.ssim = structural_similarity_index_measure
        self.setup_filter()

    def _make_field(self) -> NeRFField:
        return make_nerf_field(
            self.config.position_spec(),
            self.config.direction_spec(),
            base_mlp_num_layers=self.config.base_mlp_num_layers,
            base_mlp_layer_width=self.config.base_mlp_layer_width,
            head_mlp_num_layers=self.config.head_mlp_num_layers,
            head_mlp_layer_width=self.config.head_mlp_layer_width,
            skip_connections=self.config.skip_connections,
        )

    @property
    def has_filter(self) -> bool:
        """Whether any embedding is filtered (then the ``filter`` optimizer group exists)."""
        return self.config.use_filter or self.config.filter_direction

    @property
    def fields(self) -> Tuple[NeRFField, NeRFField]:
        """The coarse and fine fields."""
        return self.field_coarse, self.field_fine

    def get_param_groups(self) -> Dict[str, List[Parameter]]:
        """``fields`` (the INR) and, when filtered, ``filter`` (the filters' parameters)."""
        groups = {FIELDS_GROUP: [p for p in nn.ModuleList(self.fields).parameters() if p.requires_grad]}
        return self.split_filter_group(groups, FIELDS_GROUP)

    def get_outputs(self, ray_bundle: RayBundle) -> Dict[str, Tensor]:
        """Render the coarse and the fine field; ``rgb``/``depth``/``accumulation`` are the fine ones."""
        ray_samples_uniform = self.sampler_uniform(ray_bundle)
        outputs_coarse = self.field_coarse.forward(ray_samples_uniform)
        weights_coarse = ray_samples_uniform.get_weights(outputs_coarse[FieldHeadNames.DENSITY])
        rgb_coarse = self.renderer_rgb(rgb=outputs_coarse[FieldHeadNames.RGB], weights=weights_coarse)
        accumulation_coarse = self.renderer_accumulation(weights_coarse)
        depth_coarse = self.renderer_depth(weights_coarse, ray_samples_uniform)

        ray_samples_pdf = self.sampler_pdf(ray_bundle, ray_samples_uniform, weights_coarse)
        outputs_fine = self.field_fine.forward(ray_samples_pdf)
        weights_fine = ray_samples_pdf.get_weights(outputs_fine[FieldHeadNames.DENSITY])
        rgb_fine = self.renderer_rgb(rgb=outputs_fine[FieldHeadNames.RGB], weights=weights_fine)
        accumulation_fine = self.renderer_accumulation(weights_fine)
        depth_fine = self.renderer_depth(weights_fine, ray_samples_pdf)

        return {
            "rgb": rgb_fine,
            "depth": depth_fine,
            "accumulation": accumulation_fine,
            "rgb_coarse": rgb_coarse,
            "rgb_fine": rgb_fine,
            "accumulation_coarse": accumulation_coarse,
            "accumulation_fine": accumulation_fine,
            "depth_coarse": depth_coarse,
            "depth_fine": depth_fine,
        }

    def get_metrics_dict(self, outputs: Dict[str, Tensor], batch: Dict[str, Tensor]) -> Dict[str, Tensor]:
        """Training PSNR of the fine rendering."""
        image = batch["image"].to(self.device)
        image = self.renderer_rgb.blend_background(image)
        return {"psnr": self.psnr(outputs["rgb_fine"].detach(), image)}

    def get_loss_dict(self, outputs, batch, metrics_dict=None) -> Dict[str, Tensor]:
        """MSE of the coarse and fine renderings; in training, their sum is kept for the line search."""
        image = batch["image"].to(self.device)
        losses = {}
        for level in ("coarse", "fine"):
            pred, gt = self.renderer_rgb.blend_background_for_loss_computation(
                pred_image=outputs[f"rgb_{level}"], pred_accumulation=outputs[f"accumulation_{level}"], gt_image=image
            )
            losses[f"rgb_loss_{level}"] = self.rgb_loss(gt, pred)
        loss_dict = misc.scale_dict(losses, self.config.loss_coefficients)
        self.record_training_loss(loss_dict)
        return loss_dict

    def get_training_callbacks(
        self, training_callback_attributes: TrainingCallbackAttributes
    ) -> List[TrainingCallback]:
        """Stop on divergence; attach the line search to the trainer's optimizers and log the filter's rate."""
        return self.filter_callbacks(training_callback_attributes)

    def get_image_metrics_and_images(
        self, outputs: Dict[str, Tensor], batch: Dict[str, Tensor]
    ) -> Tuple[Dict[str, float], Dict[str, Tensor]]:
        """PSNR and SSIM of the fine rendering (LPIPS too when available), and comparison images."""
        image = self.renderer_rgb.blend_background(batch["image"].to(outputs["rgb"].device))
        rgb_coarse, rgb_fine = outputs["rgb_coarse"], outputs["rgb_fine"]
        near_far = self.config.collider_params or {}
        images: Dict[str, Tensor] = {"img": torch.cat([image, rgb_coarse, rgb_fine], dim=1)}
        images["accumulation"] = torch.cat(
            [colormaps.apply_colormap(outputs[f"accumulation_{lv}"]) for lv in ("coarse", "fine")], dim=1
        )
        images["depth"] = torch.cat(
            [
                colormaps.apply_depth_colormap(
                    outputs[f"depth_{lv}"],
                    accumulation=outputs[f"accumulation_{lv}"],
                    near_plane=near_far.get("near_plane"),
                    far_plane=near_far.get("far_plane"),
                )
                for lv in ("coarse", "fine")
            ],
            dim=1,
        )

        gt, coarse, fine = (_to_nchw(x) for x in (image, rgb_coarse, rgb_fine))
        metrics = {
            "psnr": float(self.psnr(gt, fine)),
            "ssim": float(self.ssim(gt, fine)),  # type: ignore[arg-type]
            "coarse_psnr": float(self.psnr(gt, coarse)),
        }
        lpips = self.lpips_metric()
        if lpips is not None:
            metrics["lpips"] = float(lpips(gt.clamp(0, 1), fine.clamp(0, 1)))
        return metrics, images


def _to_nchw(image: Float[Tensor, "H W 3"]) -> Float[Tensor, "1 3 H W"]:
    return torch.moveaxis(image, -1, 0)[None, ...]
