"""nerfstudio methods ``rff-nerf``, ``rff-nerf-lite``, ``rff-nerfacto`` and ``rff-nerfacto-lite`` (registered through
the ``nerfstudio.method_configs`` entry points of this package).

``rff-nerf`` follows nerf-pytorch's Blender setup (the paper's NeRF experiments); ``rff-nerfacto`` is nerfstudio's
nerfacto (its data parser, proposal networks, scene contraction, appearance embedding, mixed precision, tinycudann
MLPs when installed) with a filtered Fourier feature field in place of the hash grid, for captures users bring
(nerfstudio-data, COLMAP, unbounded). The ``-lite`` versions are sized to train on a CPU in minutes.
``--pipeline.model.use-filter False`` gives the unfiltered baseline of each, changing nothing else.
"""

from __future__ import annotations

from typing import Optional

from nerfstudio.cameras.camera_optimizers import CameraOptimizerConfig
from nerfstudio.configs.base_config import ViewerConfig
from nerfstudio.data.datamanagers.base_datamanager import VanillaDataManagerConfig
from nerfstudio.data.dataparsers.blender_dataparser import BlenderDataParserConfig
from nerfstudio.data.dataparsers.nerfstudio_dataparser import NerfstudioDataParserConfig
from nerfstudio.engine.optimizers import AdamOptimizerConfig
from nerfstudio.plugins.types import MethodSpecification

from rff_field.core.optim import FILTER_GROUP
from rff_field.nerf.datamanager import SeededParallelDataManagerConfig
from rff_field.nerf.filtered_model import FIELDS_GROUP
from rff_field.nerf.model import RFFNeRFModelConfig
from rff_field.nerf.nerfacto_model import LITE_FIELD_SAMPLES, LITE_PROPOSAL_SAMPLES, RFFNerfactoModelConfig
from rff_field.nerf.pipeline import RFFPipelineConfig, RFFTrainerConfig
from rff_field.nerf.schedulers import FloatExponentialDecaySchedulerConfig
from rff_field.nerf.startup import join_help_lines_in_ns_commands, speed_up_external_method_listing

speed_up_external_method_listing()  # nerfstudio loads this module just before it lists its external methods
join_help_lines_in_ns_commands()


def _optimizers(decay_steps: int) -> dict:
    """Adam 5e-4 decayed by 0.1 every ``decay_steps`` (nerf-pytorch) for the fields; the filter's own group.

    The schedule is nerfstudio's exponential decay with float rates, so that checkpoints load with torch's
    ``weights_only`` default. The filter group has no scheduler: with the line search on, the model sets its
    rate every step; with it off, the rate stays at this optimizer's ``lr``.
    """
    return {
        FIELDS_GROUP: {
            "optimizer": AdamOptimizerConfig(lr=5e-4, eps=1e-8),
            "scheduler": FloatExponentialDecaySchedulerConfig(lr_final=5e-5, max_steps=decay_steps),
        },
        FILTER_GROUP: {"optimizer": AdamOptimizerConfig(lr=1e-3, eps=1e-8), "scheduler": None},
    }


rff_nerf = MethodSpecification(
    config=RFFTrainerConfig(
        method_name="rff-nerf",
        steps_per_eval_batch=500,
        steps_per_eval_image=2500,
        steps_per_eval_all_images=50000,
        steps_per_save=5000,
        max_num_iterations=200000,
        mixed_precision=False,
        pipeline=RFFPipelineConfig(
            datamanager=VanillaDataManagerConfig(
                dataparser=BlenderDataParserConfig(), train_num_rays_per_batch=1024, eval_num_rays_per_batch=1024
            ),
            model=RFFNeRFModelConfig(eval_num_rays_per_chunk=4096),
        ),
        optimizers=_optimizers(decay_steps=500000),
        viewer=ViewerConfig(num_rays_per_chunk=4096),
        vis="viewer",
    ),
    description="NeRF with a bias-free adaptive filter on its Fourier embedding and a line-searched filter rate "
    "(Ma et al., ICML 2025); nerf-pytorch's Blender setup, 8x256 fields, 64+128 samples",
)

rff_nerf_lite = MethodSpecification(
    config=RFFTrainerConfig(
        method_name="rff-nerf-lite",
        steps_per_eval_batch=250,
        steps_per_eval_image=1000,
        steps_per_eval_all_images=100000,
        steps_per_save=1000,
        max_num_iterations=3000,
        mixed_precision=False,
        pipeline=RFFPipelineConfig(
            datamanager=VanillaDataManagerConfig(
                dataparser=BlenderDataParserConfig(), train_num_rays_per_batch=256, eval_num_rays_per_batch=256
            ),
            model=RFFNeRFModelConfig(
                num_coarse_samples=32,
                num_importance_samples=32,
                base_mlp_num_layers=4,
                base_mlp_layer_width=128,
                skip_connections=(2,),
                head_mlp_num_layers=1,
                head_mlp_layer_width=64,
                eval_num_rays_per_chunk=4096,
            ),
        ),
        optimizers=_optimizers(decay_steps=30000),
        viewer=ViewerConfig(num_rays_per_chunk=4096),
        vis="viewer",
    ),
    description="rff-nerf (filtered embedding, line-searched filter rate) sized for a CPU: 4x128 fields, 32+32 "
    "samples, 256 rays; trains in minutes",
)


def _nerfacto_optimizers(decay_steps: int) -> dict:
    """nerfacto's groups, rates and schedules (with float rates), and the filter's own group without a scheduler."""

    def group(lr: float, eps: float, lr_final: Optional[float], max_steps: int = decay_steps) -> dict:
        scheduler = (
            None if lr_final is None else FloatExponentialDecaySchedulerConfig(lr_final=lr_final, max_steps=max_steps)
        )
        return {"optimizer": AdamOptimizerConfig(lr=lr, eps=eps), "scheduler": scheduler}

    return {
        "proposal_networks": group(1e-2, 1e-15, 1e-4),
        FIELDS_GROUP: group(1e-2, 1e-15, 1e-4),
        "camera_opt": group(1e-3, 1e-15, 1e-4, max_steps=5000),
        FILTER_GROUP: group(1e-3, 1e-8, None),
    }


rff_nerfacto = MethodSpecification(
    config=RFFTrainerConfig(
        method_name="rff-nerfacto",
        steps_per_eval_batch=500,
        steps_per_save=2000,
        max_num_iterations=30000,
        mixed_precision=True,
        pipeline=RFFPipelineConfig(
            datamanager=SeededParallelDataManagerConfig(
                dataparser=NerfstudioDataParserConfig(), train_num_rays_per_batch=4096, eval_num_rays_per_batch=4096
            ),
            model=RFFNerfactoModelConfig(
                eval_num_rays_per_chunk=1 << 15,
                average_init_density=0.01,
                camera_optimizer=CameraOptimizerConfig(mode="SO3xR3"),
            ),
        ),
        optimizers=_nerfacto_optimizers(decay_steps=200000),
        viewer=ViewerConfig(num_rays_per_chunk=1 << 15),
        vis="viewer",
    ),
    description="nerfacto (proposal networks, scene contraction, appearance embedding; nerfstudio-data, COLMAP) "
    "with a filtered Fourier feature field in place of its hash grid and a line-searched filter rate",
)

LITE_STEPS = 10000
"""rff-nerfacto-lite's default run; its fields' and proposal networks' rates reach their final value at its end."""

rff_nerfacto_lite = MethodSpecification(
    config=RFFTrainerConfig(
        method_name="rff-nerfacto-lite",
        steps_per_eval_batch=250,
        steps_per_eval_image=1000,
        steps_per_eval_all_images=100000,
        steps_per_save=1000,
        max_num_iterations=LITE_STEPS,
        mixed_precision=False,
        pipeline=RFFPipelineConfig(
            datamanager=VanillaDataManagerConfig(
                dataparser=NerfstudioDataParserConfig(), train_num_rays_per_batch=512, eval_num_rays_per_batch=512
            ),
            model=RFFNerfactoModelConfig(
                hidden_dim=64,
                base_num_layers=3,
                hidden_dim_color=64,
                num_frequencies=8,
                pe_scale=32.0,
                appearance_embed_dim=16,
                num_proposal_samples_per_ray=LITE_PROPOSAL_SAMPLES,
                num_nerf_samples_per_ray=LITE_FIELD_SAMPLES,
                coarse_sampling_steps=0,  # its counts are the coarse ones
                proposal_net_args_list=[
                    {"hidden_dim": 16, "log2_hashmap_size": 15, "num_levels": 5, "max_res": 64, "use_linear": False},
                    {"hidden_dim": 16, "log2_hashmap_size": 15, "num_levels": 5, "max_res": 128, "use_linear": False},
                ],
                implementation="torch",
                eval_num_rays_per_chunk=4096,
                average_init_density=0.01,
                camera_optimizer=CameraOptimizerConfig(mode="SO3xR3"),
            ),
        ),
        optimizers=_nerfacto_optimizers(decay_steps=LITE_STEPS),
        viewer=ViewerConfig(num_rays_per_chunk=4096),
        vis="viewer",
    ),
    description="rff-nerfacto sized for a CPU: 3x64 density MLP on a 51-channel filtered PE, 32+16 proposal and 16 "
    "field samples, 512 rays; trains in minutes",
)
