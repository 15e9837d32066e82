"""``rff-nerf``: vanilla NeRF (coarse + fine fields) whose Fourier embeddings pass through the bias-free filter.

The filter's parameters form the optimizer group ``filter``; every training step, after backward and before the
optimizers step, :class:`~rff_field.core.line_search.FilterLineSearch` sets that group's learning rate. With the filter
switched off the model is the "MLP+PE" baseline: the same fields, samplers and losses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Literal, Optional, Tuple, Type

import torch
from jaxtyping import Float
from nerfstudio.cameras.rays import RayBundle
from nerfstudio.engine.callbacks import TrainingCallback, TrainingCallbackAttributes, TrainingCallbackLocation
from nerfstudio.field_components.field_heads import FieldHeadNames
from nerfstudio.fields.vanilla_nerf_field import NeRFField
from nerfstudio.model_components.losses import MSELoss
from nerfstudio.model_components.ray_samplers import PDFSampler, UniformSampler
from nerfstudio.model_components.renderers import AccumulationRenderer, DepthRenderer, RGBRenderer
from nerfstudio.models.base_model import Model, ModelConfig
from nerfstudio.utils import colormaps, misc, writer
from nerfstudio.viewer.viewer_elements import ViewerNumber
from torch import Tensor, nn
from torch.nn import Parameter
from torchmetrics.functional import structural_similarity_index_measure
from torchmetrics.image import PeakSignalNoiseRatio

from rff_field.core.embedding import EmbeddingConfig, resolve_bands
from rff_field.core.filter import FilterInit, split_filter_parameters
from rff_field.core.line_search import FilterLineSearch
from rff_field.core.optim import FILTER_GROUP, LineSearchConfig, attach_line_search
from rff_field.nerf.divergence import divergence_callback
from rff_field.nerf.field import EncodingKind, make_nerf_field
from rff_field.nerf.lpips import load_lpips

FIELDS_GROUP = "fields"
"""Name of the optimizer group holding the rest of the fields (the INR)."""
FILTER_LR_TAG = "learning_rate/filter"
"""Scalar under which the filter's learning rate is logged every step."""
_FLAT_LINE_SEARCH = ("rule", "direction", "lr_min", "lr_max", "eps", "c1")
"""The line-search options that configs before ``line_search: LineSearchConfig`` held as ``line_search_<name>``."""


@dataclass
class RFFNeRFModelConfig(ModelConfig):
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
    encoding: EncodingKind = "pe"
    """Position embedding: 'pe' (on-axis bands) or 'rff' (random Fourier features)."""
    num_frequencies: int = 10
    """PE bands per coordinate for positions."""
    pe_bands: Literal["nerf-pytorch", "loglinear", "pow2", "nerf", "log-linear"] = "nerf-pytorch"
    """PE bands: 'nerf-pytorch' = sin(2^k x), k=0..L-1; 'loglinear' = sin(2 pi s^(i/L) x), i=1..L (the paper);
    'pow2' = sin(2 pi 2^k x). 'nerf' and 'log-linear' are the earlier names of 'nerf-pytorch' and 'loglinear'."""
    pe_scale: float = 64.0
    """Highest frequency s (cycles per unit) of the 'loglinear' bands."""
    rff_num_frequencies: int = 128
    """Number of random frequency vectors of the 'rff' embedding (it has twice as many features)."""
    rff_sigma: float = 8.0
    """Standard deviation (cycles per unit) of the 'rff' frequencies."""
    rff_seed: int = 0
    """Seed of the 'rff' frequencies (stored in checkpoints)."""
    direction_num_frequencies: int = 4
    """PE bands per coordinate for viewing directions (nerf-pytorch bands)."""
    use_filter: bool = True
    """Filter the position embedding (False gives the 'MLP+PE' baseline)."""
    filter_direction: bool = False
    """Also filter the direction embedding."""
    filter_num_layers: int = 3
    """Linear layers of the filter (width = embedding width, ReLU between, none after the last)."""
    filter_bias: bool = False
    """Give the filter biases (ablation only: it is no longer a linear filter)."""
    filter_init: FilterInit = "default"
    """Filter weights at start: PyTorch's default (the paper), or scaled/identity/orthogonal times the gain."""
    filter_init_gain: float = 1.0
    """Gain of the scaled/identity/orthogonal filter initialisations."""
    line_search: LineSearchConfig = field(default_factory=LineSearchConfig)
    """The filter's learning rate, set every step by the paper's line search; with ``enabled`` off the 'filter'
    optimizer's constant rate."""
    compute_lpips: bool = True
    """Compute LPIPS in evaluation when its weights can be loaded (skipped with one notice otherwise)."""

    def __setstate__(self, state: dict) -> None:
        """Read a ``config.yml`` written before the line-search options moved into ``line_search``."""
        if not isinstance(state.get("line_search", LineSearchConfig()), LineSearchConfig):
            old = {
                name: state.pop(f"line_search_{name}") for name in _FLAT_LINE_SEARCH if f"line_search_{name}" in state
            }
            state["line_search"] = LineSearchConfig(enabled=bool(state["line_search"]), **old)
        self.__dict__.update(state)

    def position_spec(self) -> EmbeddingConfig:
        """The position embedding this config describes."""
        rff = self.encoding == "rff"
        return EmbeddingConfig(
            kind=self.encoding,
            num_frequencies=self.rff_num_frequencies if rff else self.num_frequencies,
            pe_bands=resolve_bands(self.pe_bands, nerf_means="nerf-pytorch"),
            pe_scale=self.pe_scale,
            rff_sigma=self.rff_sigma,
            rff_seed=self.rff_seed,
            include_input=True,
            filtered=self.use_filter,
            filter_layers=self.filter_num_layers,
            filter_bias=self.filter_bias,
            filter_init=self.filter_init,
            filter_init_gain=self.filter_init_gain,
        )

    def direction_spec(self) -> EmbeddingConfig:
        """The direction embedding this config describes (always nerf-pytorch PE bands)."""
        return EmbeddingConfig(
            kind="pe",
            num_frequencies=self.direction_num_frequencies,
            pe_bands="nerf-pytorch",
            include_input=True,
            filtered=self.filter_direction,
            filter_layers=self.filter_num_layers,
            filter_bias=self.filter_bias,
            filter_init=self.filter_init,
            filter_init_gain=self.filter_init_gain,
        )


class RFFNeRFModel(Model):
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
        self._lpips: Optional[nn.Module] = None
        self._lpips_tried = False

        self.line_search: Optional[FilterLineSearch] = None
        self._train_loss: Optional[Tensor] = None
        self.viewer_filter_lr: Optional[ViewerNumber] = None
        if self.has_filter:
            self.viewer_filter_lr = ViewerNumber(
                name="Filter LR", default_value=0.0, disabled=True, hint="The filter's learning rate at the last step"
            )

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
        filter_params, field_params = split_filter_parameters(nn.ModuleList(self.fields))
        groups = {FIELDS_GROUP: field_params}
        if filter_params:
            groups[FILTER_GROUP] = filter_params
        return groups

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
        if self.training:
            self._train_loss = sum(loss_dict.values())  # type: ignore[assignment]
        return loss_dict

    def training_loss(self) -> Optional[Tensor]:
        """The total loss of the last training forward pass (what the trainer backpropagates)."""
        return self._train_loss

    def get_training_callbacks(
        self, training_callback_attributes: TrainingCallbackAttributes
    ) -> List[TrainingCallback]:
        """Stop on divergence; attach the line search to the trainer's optimizers and log the filter's rate every
        ``--logging.steps-per-log`` steps."""
        stop_on_divergence = divergence_callback(self, training_callback_attributes)
        if not self.has_filter:
            return [stop_on_divergence]
        optimizers = training_callback_attributes.optimizers
        assert optimizers is not None
        if FILTER_GROUP not in optimizers.optimizers:
            raise RuntimeError(f"the trainer has no optimizer for the '{FILTER_GROUP}' parameter group")
        filter_optimizer = optimizers.optimizers[FILTER_GROUP]
        if optimizers.schedulers.get(FILTER_GROUP) is not None:
            raise RuntimeError(f"the '{FILTER_GROUP}' group must have no scheduler: its rate is set by the model")
        if self.line_search is not None:
            self.line_search.remove()
            self.line_search = None
        groups = self.get_param_groups()
        self.line_search = attach_line_search(
            self.config.line_search,
            list(optimizers.optimizers.values()),
            self.training_loss,
            filter_params=groups[FILTER_GROUP],
            inr_params=[p for name, ps in groups.items() if name != FILTER_GROUP for p in ps],
            grad_scaler=training_callback_attributes.grad_scaler,
        )

        def log_filter_lr(step: int) -> None:
            # one copy from the device per logged step; the line search itself never waits for the host
            last = self.line_search.last if self.line_search is not None else {}
            lr = last["lr"] if last else float(filter_optimizer.param_groups[0]["lr"])
            writer.put_scalar(name=FILTER_LR_TAG, scalar=lr, step=step)
            if last:
                writer.put_scalar(name="filter_line_search/d_filter", scalar=last["d_filter"], step=step)
                writer.put_scalar(name="filter_line_search/lr_d_inr", scalar=last["lr_d_inr"], step=step)
            if self.viewer_filter_lr is not None:
                self.viewer_filter_lr.value = lr

        trainer = training_callback_attributes.trainer
        every = trainer.config.logging.steps_per_log if trainer is not None else 1
        if every <= 0:  # nerfstudio logs nothing then either
            return [stop_on_divergence]
        # at the steps where nerfstudio logs its own scalars (the training loss)
        after_step = [TrainingCallbackLocation.AFTER_TRAIN_ITERATION]
        log = TrainingCallback(where_to_run=after_step, func=log_filter_lr, update_every_num_iters=every)
        return [stop_on_divergence, log]

    def _lpips_metric(self) -> Optional[nn.Module]:
        if not self.config.compute_lpips:
            return None
        if not self._lpips_tried:
            self._lpips_tried = True
            metric = load_lpips()
            # Kept out of the module tree, so that checkpoints do not depend on whether LPIPS could be loaded.
            object.__setattr__(self, "_lpips", metric)
        if self._lpips is not None:
            self._lpips.to(self.device)
        return self._lpips

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
        lpips = self._lpips_metric()
        if lpips is not None:
            metrics["lpips"] = float(lpips(gt.clamp(0, 1), fine.clamp(0, 1)))
        return metrics, images


def _to_nchw(image: Float[Tensor, "H W 3"]) -> Float[Tensor, "1 3 H W"]:
    return torch.moveaxis(image, -1, 0)[None, ...]
