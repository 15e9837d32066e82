"""SAPE (Hertz et al. 2021), the paper's closest prior method (2D): a ReLU MLP on ``[v, mask(v) * gamma(v)]`` whose
grid cells reveal frequency blocks, lowest first, while their error stays above ``epsilon``, as the authors'
``SpatialControllerStashed`` does (errors go to the nearest cell instead of being splatted bilinearly)."""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor, nn

from rff_field.core.encodings import FourierEncoding
from rff_field.core.errors import UsageError


class SapeMLP(nn.Module):
    """SAPE on a 2D Fourier embedding with a ReLU MLP; ``res``: cells per axis of the progression grid; ``epsilon``:
    the MSE under which a cell stops progressing."""

    def __init__(
        self,
        encoding: FourierEncoding,
        out_dim: int,
        hidden_features: int = 256,
        hidden_layers: int = 2,
        res: int = 128,
        epsilon: float = 1e-3,
    ) -> None:
        super().__init__()
        if encoding.in_dim != 2:
            raise UsageError(f"SAPE is implemented for 2D inputs (images), got in_dim={encoding.in_dim}")
        self.encoding = encoding
        self.res = max(int(res), 3)
        self.epsilon = epsilon
        self.kernel = 5 if self.res**2 > 100 else 3
        freqs = encoding.frequency_vectors().norm(dim=-1)
        values, blocks = torch.unique(freqs, sorted=True, return_inverse=True)
        # Block 0 is always visible: the raw input, and the included input channels (frequency 0).
        has_zero = bool(values[0] == 0)
        self.register_buffer("block_of", blocks + (0 if has_zero else 1))
        self.num_blocks = int(values.numel()) + (0 if has_zero else 1)
        self.identity = not encoding.include_input
        in_features = encoding.get_out_dim() + (encoding.in_dim if self.identity else 0)
        layers: list[nn.Module] = [nn.Linear(in_features, hidden_features), nn.ReLU()]
        for _ in range(hidden_layers):
            layers += [nn.Linear(hidden_features, hidden_features), nn.ReLU()]
        layers.append(nn.Linear(hidden_features, out_dim))
        self.mlp = nn.Sequential(*layers)
        self.register_buffer("level", torch.zeros(self.res, self.res))  # revealed blocks beyond block 0, per cell
        self.register_buffer("active", torch.ones(self.res, self.res, dtype=torch.bool))
        self.register_buffer("error_sum", torch.zeros(self.res * self.res))
        self.register_buffer("error_count", torch.zeros(self.res * self.res))
        self.register_buffer("updates", torch.zeros((), dtype=torch.long))  # progression steps taken
        self.block_iterations = 1
        self.out_dim = out_dim
        self._cache: Optional[tuple] = None

    def configure(self, total_iterations: int) -> None:
        """Spread the progression over the first half of training, as the authors' image task does."""
        self.block_iterations = max(1, total_iterations // (2 * max(1, self.num_blocks - 1)))

    def _cells(self, coords: Tensor) -> Tensor:
        index = ((coords.clamp(-1, 1) + 1) / 2 * (self.res - 1)).round().long()
        return index[..., 1] * self.res + index[..., 0]  # row (y) major

    def _box(self, grid: Tensor) -> Tensor:
        pad = self.kernel // 2
        padded = F.pad(grid, (pad, pad, pad, pad), mode="replicate")
        return F.avg_pool2d(padded, self.kernel, stride=1)

    def channel_mask(self, coords: Float[Tensor, "N 2"]) -> Float[Tensor, "N D"]:
        """The visibility of every embedding channel at ``coords``."""
        blocks = torch.arange(1, self.num_blocks, device=coords.device, dtype=self.level.dtype)
        grid = (self.level[None] >= blocks[:, None, None]).to(coords.dtype)[None]  # [1, B-1, res, res]
        grid = self._box(grid)
        sampled = F.grid_sample(grid, coords.view(1, -1, 1, 2), mode="bilinear", align_corners=True)
        ones = torch.ones(coords.shape[0], 1, device=coords.device, dtype=coords.dtype)
        per_block = torch.cat([ones, sampled[0, :, :, 0].T], dim=1)
        return per_block[:, self.block_of]

    def forward(self, coords: Float[Tensor, "*bs 2"]) -> Float[Tensor, "*bs out_dim"]:
        flat = coords.reshape(-1, 2)
        if coords.requires_grad and torch.is_grad_enabled():
            gamma, mask = self.encoding(flat), self.channel_mask(flat)
        else:
            gamma, mask = self._cached_embedding(coords, flat)
        features = gamma * mask
        if self.identity:
            features = torch.cat([flat, features], dim=-1)
        return self.mlp(features).reshape(*coords.shape[:-1], self.out_dim)

    def _cached_embedding(self, coords: Tensor, flat: Tensor) -> tuple[Tensor, Tensor]:
        """The embedding and mask of ``coords``, recomputed only when they or the buffers are replaced or changed."""
        inputs = (coords, self.level, self.block_of, *self.encoding.buffers())
        versions = [tensor._version for tensor in inputs]
        if self._cache is not None:
            cached_inputs, cached_versions, gamma, mask = self._cache
            same = len(cached_inputs) == len(inputs) and all(a is b for a, b in zip(cached_inputs, inputs))
            if same and cached_versions == versions:
                return gamma, mask
        with torch.no_grad():
            gamma, mask = self.encoding(flat), self.channel_mask(flat)
        self._cache = (inputs, versions, gamma, mask)  # the inputs themselves: an id could be reused once freed
        return gamma, mask

    @torch.no_grad()
    def observe_error(self, error: Float[Tensor, " N"], coords: Float[Tensor, "N 2"]) -> None:
        """Accumulate this step's per-point squared error into the grid cells."""
        cells = self._cells(coords.reshape(-1, 2))
        self.error_sum.index_add_(0, cells, error.reshape(-1).to(self.error_sum.dtype))
        self.error_count.index_add_(0, cells, torch.ones_like(cells, dtype=self.error_count.dtype))

    @torch.no_grad()
    def end_iteration(self, iteration: int) -> None:
        """After iteration ``iteration`` (0-based): every ``block_iterations``, advance the cells still in progress."""
        if (iteration + 1) % self.block_iterations != 0 or int(self.updates) >= self.num_blocks - 1:
            return
        shape = (1, 1, self.res, self.res)
        total = self._box(self.error_sum.view(shape))
        count = self._box(self.error_count.view(shape))
        mean = (total / count.clamp_min(1e-12))[0, 0]
        self.active &= (mean > self.epsilon) | (count[0, 0] == 0)
        self.level[self.active] += 1
        self.updates += 1
        self.error_sum.zero_()
        self.error_count.zero_()

    def summary(self) -> dict:
        """Progression state: mean fraction of frequency blocks revealed, fraction of cells still progressing."""
        return {
            "sape_revealed_fraction": float(self.level.mean()) / max(1, self.num_blocks - 1),
            "sape_active_fraction": float(self.active.float().mean()),
            "sape_blocks": self.num_blocks - 1,
        }
