"""nerfstudio's proposal density field with a faster torch hash grid: each axis's hash term computed once and an
``index_select`` gather, the same table and outputs, twice as fast on a CPU as nerfstudio's torch fallback
(``benchmarks/nerf/hash_grid.md``); tinycudann, when used, is left alone."""

from __future__ import annotations

from typing import Optional

from jaxtyping import Float
from nerfstudio.field_components.encodings import HashEncoding
from nerfstudio.fields.density_fields import HashMLPDensityField
from torch import Tensor

HASH_PRIMES = (1, 2654435761, 805459861)
"""Instant-NGP's (and nerfstudio's) multipliers of the x, y and z grid coordinates."""


class TorchHashEncoding(HashEncoding):
    """``HashEncoding`` with a faster torch path (``pytorch_fwd``)."""

    def pytorch_fwd(self, in_tensor: Float[Tensor, "*bs 3"]) -> Float[Tensor, "*bs output_dim"]:
        batch_shape = in_tensor.shape[:-1]
        points = in_tensor.reshape(-1, 3).T  # [3, N]
        scaled = self.scalings.to(points.device).view(-1, 1, 1) * points  # [levels, 3, N]
        low = scaled.floor()
        offset = scaled - low
        corners = (scaled.ceil().long(), low.long())  # the ceil corner's weight is offset (nerfstudio's convention)
        weights = (offset, 1.0 - offset)
        mask = self.hash_table_size - 1  # x % 2**k for int64 x, negatives included, as torch's remainder
        level_start = self.hash_offset.to(points.device).view(-1, 1)
        hashes = [[corner[:, axis] * prime for corner in corners] for axis, prime in enumerate(HASH_PRIMES)]
        encoded = 0.0
        for i in range(2):
            for j in range(2):
                hash_xy, weight_xy = hashes[0][i] ^ hashes[1][j], weights[i][:, 0] * weights[j][:, 1]
                for k in range(2):
                    index = ((hash_xy ^ hashes[2][k]) & mask) + level_start  # [levels, N]
                    features = self.hash_table.index_select(0, index.flatten()).view(*index.shape, -1)
                    encoded = encoded + (weight_xy * weights[k][:, 2])[..., None] * features
        return encoded.permute(1, 0, 2).reshape(*batch_shape, -1)  # [*bs, levels * features]


class ProposalDensityField(HashMLPDensityField):
    """``HashMLPDensityField`` with a :class:`TorchHashEncoding` on torch, not differentiated by position: the
    proposal loss trains the proposal networks only, not the camera poses (nerfacto's does)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.encoding.tcnn_encoding is None:
            grid = self.encoding
            max_res = round(grid.min_res * grid.growth_factor ** (grid.num_levels - 1))
            faster = TorchHashEncoding(num_levels=grid.num_levels, min_res=grid.min_res, max_res=max_res,
                                       log2_hashmap_size=grid.log2_hashmap_size,
                                       features_per_level=grid.features_per_level, implementation="torch")  # fmt: skip
            faster.load_state_dict(grid.state_dict())
            self.encoding = faster
            if not self.use_linear:
                self.mlp_base[0] = faster

    def density_fn(self, positions: Float[Tensor, "*bs 3"], times: Optional[Tensor] = None) -> Float[Tensor, "*bs 1"]:
        return super().density_fn(positions.detach(), times)
