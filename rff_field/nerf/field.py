"""The NeRF field of ``rff-nerf``: nerfstudio's ``NeRFField`` fed a (filtered) Fourier feature embedding.

The field is not subclassed: the filter lives in the encoding (:class:`~rff_field.core.filter.FilteredEncoding`), so
the only difference between ``rff-nerf`` and its "MLP+PE" baseline is the encoding object given to the field.
"""

from __future__ import annotations

from typing import Literal, Tuple

from nerfstudio.fields.vanilla_nerf_field import NeRFField

from rff_field.core.embedding import EmbeddingConfig

EncodingKind = Literal["pe", "rff"]


def make_nerf_field(
    position: EmbeddingConfig,
    direction: EmbeddingConfig,
    base_mlp_num_layers: int = 8,
    base_mlp_layer_width: int = 256,
    head_mlp_num_layers: int = 2,
    head_mlp_layer_width: int = 128,
    skip_connections: Tuple[int, ...] = (4,),
) -> NeRFField:
    """A nerfstudio ``NeRFField`` with its own position and direction encodings (and so its own filters).

    Args:
        position: Embedding of the sample positions.
        direction: Embedding of the viewing directions.
        base_mlp_num_layers: Layers of the density MLP.
        base_mlp_layer_width: Width of the density MLP.
        head_mlp_num_layers: Layers of the colour head.
        head_mlp_layer_width: Width of the colour head.
        skip_connections: Layers of the density MLP that also receive the embedding.
    """
    return NeRFField(
        position_encoding=position.build(3),
        direction_encoding=direction.build(3),
        base_mlp_num_layers=base_mlp_num_layers,
        base_mlp_layer_width=base_mlp_layer_width,
        head_mlp_num_layers=head_mlp_num_layers,
        head_mlp_layer_width=head_mlp_layer_width,
        skip_connections=tuple(skip_connections),  # type: ignore[arg-type]
    )
