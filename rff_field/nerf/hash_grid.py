"""nerfstudio's hash-grid encoding with a faster torch path, for the proposal networks of ``rff-nerfacto``.

nerfstudio's torch fallback of ``HashEncoding`` hashes each of a cell's 8 corners from scratch, on tensors whose last
dimension has 3 entries, and gathers with advanced indexing. This one computes each axis's hash term once, keeps the
points in the last (contiguous) dimension and gathers with ``index_select`` (whose gradient is a fast ``index_add``).
Same table, same hash (Instant-NGP's, modulo the power-of-two table size), same trilinear weights: the outputs and
gradients equal nerfstudio's up to the order of the sum; checkpoints are interchangeable. tinycudann, when it is
used, is left alone.
"""

from __future__ import annotations

from jaxtyping import Float
from nerfstudio.field_components.encodings import HashEncoding
from nerfstudio.fields.density_fields import HashMLPDensityField
from torch import Tensor

HASH_PRIMES = (1, 2654435761, 805459861)
"""Instant-NGP's (and nerfstudio's) multipliers of the x, y and z grid coordinates."""


class TorchHashEncoding(HashEncoding):
    """``HashEncoding`` with a faster torch path (``pytorch_fwd``; ``rff-bench hash-grid-timing`` measures it); with
    tinycudann it is nerfstudio's."""

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


def use_faster_torch_hash_grid(network: HashMLPDensityField) -> None:
    """Make a proposal network's hash grid a :class:`TorchHashEncoding` when it runs on torch.

    The class of the built encoding is switched in place: its table, buffers and the two places the network holds it
    (``encoding`` and ``mlp_base[0]``) stay as they are, and so do the random numbers drawn at initialisation.
    """
    if type(network.encoding) is HashEncoding and network.encoding.tcnn_encoding is None:
        network.encoding.__class__ = TorchHashEncoding
