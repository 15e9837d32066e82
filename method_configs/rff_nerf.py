"""``rff-nerf`` and ``rff-nerf-lite``: vanilla NeRF with a filtered Fourier embedding and a line-searched filter lr."""

from nerfstudio.plugins.types import MethodSpecification

from rff_field.nerf.methods import rff_nerf_config

rff_nerf = MethodSpecification(
    config=rff_nerf_config(),
    description="NeRF with a bias-free adaptive filter on its Fourier embedding and a line-searched filter rate "
    "(Ma et al., ICML 2025); nerf-pytorch's Blender setup, 8x256 fields, 64+128 samples",
)
rff_nerf_lite = MethodSpecification(
    config=rff_nerf_config(lite=True),
    description="rff-nerf sized for a CPU (4x128 fields, 32+32 samples, 256 rays); trains on the CPU without CUDA",
)
