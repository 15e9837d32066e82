"""``rff-nerfacto`` and ``rff-nerfacto-lite``: nerfacto with a filtered Fourier feature field for its hash grid."""

from nerfstudio.plugins.types import MethodSpecification

from rff_field.nerf.methods import rff_nerfacto_config

rff_nerfacto = MethodSpecification(
    config=rff_nerfacto_config(),
    description="nerfacto (proposal networks, scene contraction, appearance embedding; nerfstudio-data, COLMAP) with a "
    "filtered Fourier feature field in place of its hash grid and a line-searched filter rate",
)
rff_nerfacto_lite = MethodSpecification(
    config=rff_nerfacto_config(lite=True),
    description="rff-nerfacto sized for a CPU (3x64 density MLP, 32+16 proposal and 16 field samples, 512 rays); "
    "trains on the CPU without CUDA",
)
