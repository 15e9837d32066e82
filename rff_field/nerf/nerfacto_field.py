"""The main field of ``rff-nerfacto``: nerfstudio's ``NerfactoField`` whose hash grid is replaced by a (filtered)
Fourier feature embedding of the contracted position.

Everything else is nerfacto's: scene contraction, the spherical-harmonics direction encoding, the per-image
appearance embedding, the colour and predicted-normal heads, and ``implementation`` (tinycudann MLPs when it is
installed, torch otherwise, with nerfstudio's notice). The embedding and the filter are always torch: tinycudann's
frequency encoding has only NeRF's ``2**k`` bands, and the filter must see the embedding.
"""

from __future__ import annotations

from typing import Literal

from jaxtyping import Float
from nerfstudio.field_components.encodings import Encoding
from nerfstudio.field_components.mlp import MLP
from nerfstudio.fields.nerfacto_field import NerfactoField
from torch import Tensor, nn

from rff_field.core.embedding import EmbeddingConfig

Implementation = Literal["tcnn", "torch"]


class FourierDensityMLP(nn.Module):
    """``[density logit, geometry features]`` from a (filtered) Fourier embedding of the position.

    Its input is nerfacto's normalised position ``p`` in ``[0, 1]^3``; the embedding sees ``4 p - 2``: the
    contracted position (world units inside the unit ball, ``[-2, 2]^3`` in all), or with scene contraction off
    the scene box mapped onto ``[-2, 2]^3``.

    Args:
        encoding: The position embedding (a :class:`~rff_field.core.filter.FilteredEncoding` when filtered).
        num_layers: Layers of the MLP.
        layer_width: Width of its hidden layers.
        out_dim: 1 + the geometry features' width.
        implementation: ``tcnn`` (tinycudann's fused MLP; torch when it is missing) or ``torch``.
    """

    def __init__(
        self, encoding: Encoding, num_layers: int, layer_width: int, out_dim: int, implementation: Implementation
    ) -> None:
        super().__init__()
        self.encoding = encoding
        self.mlp = MLP(
            in_dim=encoding.get_out_dim(),
            num_layers=num_layers,
            layer_width=layer_width,
            out_dim=out_dim,
            activation=nn.ReLU(),
            out_activation=None,
            implementation=implementation,
        )

    def forward(self, positions: Float[Tensor, "*bs 3"]) -> Float[Tensor, "*bs out_dim"]:
        return self.mlp(self.encoding(4.0 * positions - 2.0))


class FourierNerfactoField(NerfactoField):
    """``NerfactoField`` with :class:`FourierDensityMLP` as its ``mlp_base`` (in place of the hash grid and its MLP).

    Args:
        aabb: The scene box.
        num_images: Training images (one appearance embedding each).
        position: The position embedding, filtered or not.
        num_layers: Layers of the density MLP.
        hidden_dim: Width of the density MLP.
        implementation: ``tcnn`` or ``torch`` for nerfacto's MLPs and encodings.
        **nerfacto_args: Further arguments of ``NerfactoField`` (heads, appearance, normals, contraction); its
            hash-grid arguments do not apply.
    """

    def __init__(
        self,
        aabb: Tensor,
        num_images: int,
        position: EmbeddingConfig,
        num_layers: int = 4,
        hidden_dim: int = 64,
        implementation: Implementation = "tcnn",
        **nerfacto_args,
    ) -> None:
        # The smallest hash grid nerfstudio builds; it is replaced below.
        super().__init__(aabb, num_images, num_layers=1, hidden_dim=hidden_dim, num_levels=1, max_res=16,
                         log2_hashmap_size=4, implementation=implementation, **nerfacto_args)  # fmt: skip
        for name in ("max_res", "num_levels", "log2_hashmap_size"):  # hash-grid settings, kept as buffers
            delattr(self, name)
        self.mlp_base = FourierDensityMLP(
            position.build(3), num_layers, hidden_dim, 1 + self.geo_feat_dim, implementation=implementation
        )
