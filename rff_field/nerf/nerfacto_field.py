"""``rff-nerfacto``'s main field: nerfacto's, with a (filtered) Fourier embedding and an MLP in place of its hash
grid. The embedding and filter are torch: tinycudann's frequency encoding has only ``2**k`` bands."""

from __future__ import annotations

from typing import Literal

from jaxtyping import Float
from nerfstudio.field_components.mlp import MLP
from nerfstudio.fields.nerfacto_field import NerfactoField
from torch import Tensor, nn

from rff_field.core.embedding import EmbeddingConfig


class FourierDensityMLP(nn.Module):
    """``[density logit, geometry features]`` of nerfacto's normalised position ``p`` in ``[0, 1]^3``; the embedding
    sees ``4 p - 2``, the contracted position (world units inside the unit ball, ``[-2, 2]^3`` in all)."""

    def __init__(
        self, position: EmbeddingConfig, num_layers: int, layer_width: int, out_dim: int, implementation: str
    ) -> None:
        super().__init__()
        self.encoding = position.build(3)
        self.mlp = MLP(in_dim=self.encoding.get_out_dim(), num_layers=num_layers, layer_width=layer_width,
                       out_dim=out_dim, activation=nn.ReLU(), implementation=implementation)  # fmt: skip

    def forward(self, positions: Float[Tensor, "*bs 3"]) -> Float[Tensor, "*bs out_dim"]:
        return self.mlp(self.encoding(4.0 * positions - 2.0))


class FourierNerfactoField(NerfactoField):
    """``NerfactoField`` with :class:`FourierDensityMLP` as its ``mlp_base`` (``num_layers`` x ``hidden_dim``);
    ``nerfacto_args`` go to ``NerfactoField``."""

    def __init__(
        self,
        aabb: Tensor,
        num_images: int,
        position: EmbeddingConfig,
        num_layers: int = 4,
        hidden_dim: int = 64,
        implementation: Literal["tcnn", "torch"] = "tcnn",
        **nerfacto_args,
    ) -> None:
        # NerfactoField takes no position network and reads self.mlp_base in get_density: build its smallest hash
        # grid and replace it (the grid's settings stay as its buffers)
        super().__init__(aabb, num_images, num_layers=1, hidden_dim=hidden_dim, num_levels=1, max_res=16,
                         log2_hashmap_size=4, implementation=implementation, **nerfacto_args)  # fmt: skip
        self.mlp_base = FourierDensityMLP(position, num_layers, hidden_dim, 1 + self.geo_feat_dim, implementation)
