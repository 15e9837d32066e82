"""nerfstudio methods ``rff-nerf`` and ``rff-nerf-lite`` (registered through the ``nerfstudio.method_configs`` entry
point of this package).

``rff-nerf`` follows nerf-pytorch's Blender setup (the paper's NeRF experiments); ``rff-nerf-lite`` is the same
model sized to train on a CPU in minutes. ``--pipeline.model.use-filter False`` gives the "MLP+PE" baseline of
either, changing nothing else.
"""

from __future__ import annotations

from nerfstudio.configs.base_config import ViewerConfig
from nerfstudio.data.datamanagers.base_datamanager import VanillaDataManagerConfig
from nerfstudio.data.dataparsers.blender_dataparser import BlenderDataParserConfig
from nerfstudio.engine.optimizers import AdamOptimizerConfig
from nerfstudio.plugins.types import MethodSpecification

from rff_field.core.optim import FILTER_GROUP
from rff_field.nerf.model import FIELDS_GROUP, RFFNeRFModelConfig
from rff_field.nerf.pipeline import RFFPipelineConfig, RFFTrainerConfig
from rff_field.nerf.schedulers import FloatExponentialDecaySchedulerConfig


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
