"""The main field of ``rff-nerfacto``: nerfstudio's ``NerfactoField`` whose hash grid and its MLP are replaced by a
(filtered) Fourier feature embedding of the contracted position and an MLP.

Everything else is nerfacto's: scene contraction, the direction encoding, the appearance embedding, the heads, and
``implementation`` (tinycudann MLPs when installed). The embedding and the filter are always torch: tinycudann's
frequency encoding has only NeRF's ``2**k`` bands, and the filter must see the embedding.
"""

from __future__ import annotations

from typing import Literal

from jaxtyping import Float
from nerfstudio.field_components.mlp import MLP
from nerfstudio.fields.nerfacto_field import NerfactoField
from torch import Tensor, nn

from rff_field.core.embedding import EmbeddingConfig


class FourierDensityMLP(nn.Module):
    """``[density logit, geometry features]`` of nerfacto's normalised position ``p`` in ``[0, 1]^3``; the embedding
    sees ``4 p - 2``, the contracted position (world units inside the unit ball, ``[-2, 2]^3`` in all).

    Args:
        position: The position embedding, filtered or not.
        num_layers: Layers of the MLP.
        layer_width: Width of its hidden layers.
        out_dim: 1 + the geometry features' width.
        implementation: ``tcnn`` (tinycudann's fused MLP; torch when it is missing) or ``torch``.
    """

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
    """``NerfactoField`` with :class:`FourierDensityMLP` as its ``mlp_base``.

    Args:
        aabb: The scene box.
        num_images: Training images (one appearance embedding each).
        position: The position embedding, filtered or not.
        num_layers: Layers of the density MLP.
        hidden_dim: Width of the density MLP.
        implementation: ``tcnn`` or ``torch`` for nerfacto's MLPs and encodings.
        **nerfacto_args: Further arguments of ``NerfactoField`` (heads, appearance, normals, contraction).
    """

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
        # the smallest hash grid nerfstudio builds, replaced below
        super().__init__(aabb, num_images, num_layers=1, hidden_dim=hidden_dim, num_levels=1, max_res=16,
                         log2_hashmap_size=4, implementation=implementation, **nerfacto_args)  # fmt: skip
        for name in ("max_res", "num_levels", "log2_hashmap_size"):  # the hash grid's settings, kept as buffers
            delattr(self, name)
        self.mlp_base = FourierDensityMLP(position, num_layers, hidden_dim, 1 + self.geo_feat_dim, implementation)
