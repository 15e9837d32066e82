"""The trainer configs of ``rff-nerf``, ``rff-nerfacto`` and their ``-lite`` sizes (``method_configs/`` registers
them with nerfstudio).

``rff-nerf`` follows nerf-pytorch's Blender setup (the paper's NeRF experiments); ``rff-nerfacto`` is nerfacto with a
filtered Fourier feature field in place of its hash grid, for captures users bring. The ``-lite`` sizes train on a
CPU in minutes, and on the CPU when there is no CUDA device.
"""

from __future__ import annotations

from typing import Optional

from nerfstudio.configs.base_config import ViewerConfig
from nerfstudio.data.dataparsers.blender_dataparser import BlenderDataParserConfig
from nerfstudio.data.dataparsers.nerfstudio_dataparser import NerfstudioDataParserConfig
from nerfstudio.engine.optimizers import AdamOptimizerConfig

from rff_field.core.filter import FILTER_GROUP
from rff_field.nerf.datamanager import QuietDataManagerConfig
from rff_field.nerf.filtered_model import FIELDS_GROUP
from rff_field.nerf.model import RFFNeRFModelConfig
from rff_field.nerf.nerfacto_model import DataEmbeddingConfig, RFFNerfactoModelConfig
from rff_field.nerf.pipeline import RFFPipelineConfig
from rff_field.nerf.schedulers import FloatExponentialDecaySchedulerConfig
from rff_field.nerf.trainer import RFFMachineConfig, RFFTrainerConfig

LITE_STEPS = 10000
"""rff-nerfacto-lite's default run; its fields' and proposal networks' rates reach their final value at its end."""


def _group(lr: float, eps: float, lr_final: Optional[float], max_steps: int) -> dict:
    """An Adam group decayed exponentially to ``lr_final`` (float rates, so that checkpoints load with torch's
    ``weights_only``); None: no scheduler (the filter's, whose rate the line search sets)."""
    scheduler = (
        None if lr_final is None else FloatExponentialDecaySchedulerConfig(lr_final=lr_final, max_steps=max_steps)
    )
    return {"optimizer": AdamOptimizerConfig(lr=lr, eps=eps), "scheduler": scheduler}


def _trainer(
    method_name: str, lite: bool, pipeline: RFFPipelineConfig, optimizers: dict, **options
) -> RFFTrainerConfig:
    if lite:
        options.update(steps_per_eval_batch=250, steps_per_eval_image=1000, steps_per_eval_all_images=100000,
                       steps_per_save=1000, mixed_precision=False)  # fmt: skip
    return RFFTrainerConfig(
        method_name=method_name + ("-lite" if lite else ""),
        pipeline=pipeline,
        optimizers=optimizers,
        machine=RFFMachineConfig(device_type="auto" if lite else "cuda"),
        viewer=ViewerConfig(num_rays_per_chunk=pipeline.model.eval_num_rays_per_chunk),
        vis="viewer",
        **options,
    )


def rff_nerf_config(lite: bool = False) -> RFFTrainerConfig:
    """``rff-nerf``: 8x256 fields, 64 + 128 samples, 1024 rays, Adam 5e-4 decayed by 0.1 over 500k steps; ``-lite``:
    4x128 fields, 32 + 32 samples, 256 rays, the decay over 30k steps, 3000 steps."""
    rays = 256 if lite else 1024
    model = RFFNeRFModelConfig(eval_num_rays_per_chunk=4096)
    if lite:
        model = RFFNeRFModelConfig(num_coarse_samples=32, num_importance_samples=32, base_mlp_num_layers=4,
                                   base_mlp_layer_width=128, skip_connections=(2,), head_mlp_num_layers=1,
                                   head_mlp_layer_width=64, eval_num_rays_per_chunk=4096)  # fmt: skip
    decay = 30000 if lite else 500000
    return _trainer(
        "rff-nerf",
        lite,
        RFFPipelineConfig(
            datamanager=QuietDataManagerConfig(
                dataparser=BlenderDataParserConfig(), train_num_rays_per_batch=rays, eval_num_rays_per_batch=rays
            ),
            model=model,
        ),  # fmt: skip
        {FIELDS_GROUP: _group(5e-4, 1e-8, 5e-5, decay), FILTER_GROUP: _group(1e-3, 1e-8, None, 0)},
        max_num_iterations=3000 if lite else 200000,
        steps_per_eval_batch=500,
        steps_per_eval_image=2500,
        steps_per_eval_all_images=50000,
        steps_per_save=5000,
        mixed_precision=False,
    )


def rff_nerfacto_config(lite: bool = False) -> RFFTrainerConfig:
    """``rff-nerfacto``: nerfacto's sampling, 4x128 density MLP on 12 log-linear PE bands, 4096 rays, mixed
    precision; ``-lite``: 3x64 on 8 bands, 32 + 16 proposal and 16 field samples, 512 rays, 10k steps."""
    decay = LITE_STEPS if lite else 200000
    if lite:
        model = RFFNerfactoModelConfig(
            embedding=DataEmbeddingConfig(encoding="pe", num_frequencies=8, pe_scale=32.0, include_input=True,
                                          filter_residual=True, filter_fused=False),
            hidden_dim=64, base_num_layers=3, hidden_dim_color=64, appearance_embed_dim=16,
            num_proposal_samples_per_ray=(32, 16), num_nerf_samples_per_ray=16,
            proposal_net_args_list=[
                {"hidden_dim": 16, "log2_hashmap_size": 15, "num_levels": 5, "max_res": 64, "use_linear": False},
                {"hidden_dim": 16, "log2_hashmap_size": 15, "num_levels": 5, "max_res": 128, "use_linear": False},
            ],
            implementation="torch", eval_num_rays_per_chunk=4096,
        )  # fmt: skip
        datamanager = QuietDataManagerConfig(dataparser=NerfstudioDataParserConfig(), train_num_rays_per_batch=512,
                                            eval_num_rays_per_batch=512)  # fmt: skip
    else:
        model = RFFNerfactoModelConfig(eval_num_rays_per_chunk=1 << 15)
        datamanager = QuietDataManagerConfig(
            dataparser=NerfstudioDataParserConfig(), train_num_rays_per_batch=4096, eval_num_rays_per_batch=4096
        )
    optimizers = {
        "proposal_networks": _group(1e-2, 1e-15, 1e-4, decay),
        FIELDS_GROUP: _group(1e-2, 1e-15, 1e-4, decay),
        "camera_opt": _group(1e-3, 1e-15, 1e-4, 5000),
        FILTER_GROUP: _group(1e-3, 1e-8, None, 0),
    }
    return _trainer(
        "rff-nerfacto",
        lite,
        RFFPipelineConfig(datamanager=datamanager, model=model),
        optimizers,
        max_num_iterations=LITE_STEPS if lite else 30000,
        steps_per_eval_batch=500,
        steps_per_save=2000,
        mixed_precision=True,
    )
