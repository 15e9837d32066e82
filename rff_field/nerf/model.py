"""``rff-nerf``: vanilla NeRF on nerfstudio's ``NeRFField`` whose encodings hold the bias-free filter, so with
``embedding.filtered`` off it is the "MLP+PE" baseline with the same fields, samplers and losses."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Dict, List, Literal, Tuple, Type

import torch
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
from rff_field.core.errors import UsageError, check_fields
from rff_field.nerf.filtered_model import FIELDS_GROUP, MODEL_OPTION, FilteredModelConfig, FilteredModelMixin


@dataclass
class RFFNeRFModelConfig(FilteredModelConfig, ModelConfig):
    """rff-nerf: NeRF with a bias-free adaptive filter on its Fourier feature embedding (Ma et al., ICML 2025)."""

    _target: Type = field(default_factory=lambda: RFFNeRFModel)
    embedding: EmbeddingConfig = field(
        default_factory=lambda: EmbeddingConfig(
            encoding="pe", pe_bands="nerf-pytorch", num_frequencies=10, include_input=True
        )
    )
    """The position embedding and its filter (whose options a filtered direction embedding shares)."""
    direction_num_frequencies: int = 4
    """PE bands per coordinate of the viewing direction (nerf-pytorch bands)."""
    filter_direction: bool = False
    """Also filter the direction embedding."""
    num_coarse_samples: int = 64
    """Samples per ray of the coarse field (stratified)."""
    num_importance_samples: int = 128
    """Extra samples per ray of the fine field (drawn from the coarse weights)."""
    background_color: Literal["random", "last_sample", "black", "white"] = "white"
    """Background composited behind the scene."""
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

    def direction_embedding(self) -> EmbeddingConfig:
        """nerf-pytorch PE bands, filtered (with the position's filter options) when ``filter_direction``."""
        return replace(self.embedding, encoding="pe", pe_bands="nerf-pytorch", include_input=True,
                       num_frequencies=self.direction_num_frequencies, filtered=self.filter_direction)  # fmt: skip

    def check(self) -> None:
        """Raise :class:`UsageError` for options the model cannot be built with."""
        self.embedding.check(prefix=MODEL_OPTION + "embedding.")
        self.line_search.check(prefix=MODEL_OPTION + "line-search.")
        check_fields(self, positive_int=("num_coarse_samples", "num_importance_samples", "base_mlp_num_layers",
                                         "base_mlp_layer_width", "head_mlp_num_layers", "head_mlp_layer_width",
                                         "direction_num_frequencies", "eval_num_rays_per_chunk"),
                     prefix=MODEL_OPTION)  # fmt: skip
        if not all(0 < skip < self.base_mlp_num_layers - 1 for skip in self.skip_connections):
            raise UsageError(
                f"{MODEL_OPTION}skip-connections {self.skip_connections} must lie in 1.."
                f"{self.base_mlp_num_layers - 2} (the density MLP has {self.base_mlp_num_layers} layers)"
            )
        near, far = (self.collider_params or {}).get("near_plane"), (self.collider_params or {}).get("far_plane")
        if self.enable_collider and not (near is not None and far is not None and 0 <= near < far):
            raise UsageError(
                f"{MODEL_OPTION}collider-params needs 0 <= near_plane < far_plane, got {self.collider_params}"
            )


class RFFNeRFModel(FilteredModelMixin, Model):
    """Coarse-to-fine NeRF with filtered Fourier embeddings and a line-searched filter learning rate."""

    config: RFFNeRFModelConfig

    def populate_modules(self) -> None:
        """Build the fields, samplers, renderers, loss and metrics."""
        super().populate_modules()
        config = self.config
        self.field_coarse, self.field_fine = (
            NeRFField(
                position_encoding=config.embedding.build(3),
                direction_encoding=config.direction_embedding().build(3),
                base_mlp_num_layers=config.base_mlp_num_layers,
                base_mlp_layer_width=config.base_mlp_layer_width,
                head_mlp_num_layers=config.head_mlp_num_layers,
                head_mlp_layer_width=config.head_mlp_layer_width,
                skip_connections=tuple(config.skip_connections),
            )
            for _ in range(2)
        )
        self.sampler_uniform = UniformSampler(num_samples=config.num_coarse_samples)
        self.sampler_pdf = PDFSampler(num_samples=config.num_importance_samples)
        self.renderer_rgb = RGBRenderer(background_color=config.background_color)
        self.renderer_accumulation = AccumulationRenderer()
        self.renderer_depth = DepthRenderer()
        self.rgb_loss = MSELoss()
        self.psnr = PeakSignalNoiseRatio(data_range=1.0)
        self.ssim = structural_similarity_index_measure
        self.setup_filter()

    @property
    def has_filter(self) -> bool:
        """Whether an embedding is filtered (then the ``filter`` optimizer group exists)."""
        return self.config.embedding.filtered or self.config.filter_direction

    def get_param_groups(self) -> Dict[str, List[Parameter]]:
        """``fields`` (the INR) and, when filtered, ``filter``."""
        fields = nn.ModuleList([self.field_coarse, self.field_fine])
        return self.split_filter_group({FIELDS_GROUP: [p for p in fields.parameters() if p.requires_grad]})

    def get_outputs(self, ray_bundle: RayBundle) -> Dict[str, Tensor]:
        """Render the coarse and the fine field; ``rgb``, ``depth`` and ``accumulation`` are the fine ones."""
        outputs, samples, weights = {}, self.sampler_uniform(ray_bundle), None
        for level, field_ in (("coarse", self.field_coarse), ("fine", self.field_fine)):
            if weights is not None:
                samples = self.sampler_pdf(ray_bundle, samples, weights)
            field_outputs = field_.forward(samples)
            weights = samples.get_weights(field_outputs[FieldHeadNames.DENSITY])
            outputs[f"rgb_{level}"] = self.renderer_rgb(rgb=field_outputs[FieldHeadNames.RGB], weights=weights)
            outputs[f"accumulation_{level}"] = self.renderer_accumulation(weights)
            outputs[f"depth_{level}"] = self.renderer_depth(weights, samples)
        return {"rgb": outputs["rgb_fine"], "depth": outputs["depth_fine"],
                "accumulation": outputs["accumulation_fine"], **outputs}  # fmt: skip

    def get_metrics_dict(self, outputs: Dict[str, Tensor], batch: Dict[str, Tensor]) -> Dict[str, Tensor]:
        """Training PSNR of the fine rendering."""
        image = self.renderer_rgb.blend_background(batch["image"].to(self.device))
        return {"psnr": self.psnr(outputs["rgb_fine"].detach(), image)}

    def get_loss_dict(self, outputs, batch, metrics_dict=None) -> Dict[str, Tensor]:
        """MSE of the coarse and the fine rendering."""
        image = batch["image"].to(self.device)
        losses = {}
        for level in ("coarse", "fine"):
            pred, gt = self.renderer_rgb.blend_background_for_loss_computation(
                pred_image=outputs[f"rgb_{level}"], pred_accumulation=outputs[f"accumulation_{level}"], gt_image=image
            )
            losses[f"rgb_loss_{level}"] = self.rgb_loss(gt, pred)
        loss_dict = misc.scale_dict(losses, self.config.loss_coefficients)
        self.record_training(loss_dict, outputs)
        return loss_dict

    def get_training_callbacks(self, attributes: TrainingCallbackAttributes) -> List[TrainingCallback]:
        """The line search and the filter-rate log."""
        return self.filter_callbacks(attributes)

    def get_image_metrics_and_images(
        self, outputs: Dict[str, Tensor], batch: Dict[str, Tensor]
    ) -> Tuple[Dict[str, float], Dict[str, Tensor]]:
        """PSNR and SSIM of the fine rendering (LPIPS when available), coarse PSNR, and comparison images."""
        image = self.renderer_rgb.blend_background(batch["image"].to(outputs["rgb"].device))
        depth = colormaps.apply_depth_colormap(outputs["depth"], accumulation=outputs["accumulation"])
        images = {"img": torch.cat([image, outputs["rgb_coarse"], outputs["rgb_fine"]], dim=1), "depth": depth,
                  "accumulation": colormaps.apply_colormap(outputs["accumulation"])}  # fmt: skip
        gt, coarse, fine = (torch.moveaxis(x, -1, 0)[None] for x in (image, outputs["rgb_coarse"], outputs["rgb_fine"]))
        metrics = {"psnr": float(self.psnr(gt, fine)), "ssim": float(self.ssim(gt, fine)),  # type: ignore[arg-type]
                   "coarse_psnr": float(self.psnr(gt, coarse))}  # fmt: skip
        lpips = self.lpips_metric()
        if lpips is not None:
            metrics["lpips"] = float(lpips(gt.clamp(0, 1), fine.clamp(0, 1)))
        return metrics, images
