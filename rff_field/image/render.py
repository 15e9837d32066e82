"""A finished image fit's network, rebuilt from its folder, rendered on a pixel grid of any size."""

from __future__ import annotations

from pathlib import Path

import torch
from jaxtyping import Float
from torch import Tensor, nn

from rff_field.common.trained import load_trained_network
from rff_field.image.data import pixel_coordinates
from rff_field.image.fit import PixelPredictor
from rff_field.inr.config import NetworkConfig, build_network


def load_fitted_network(folder: Path, device: str = "cpu") -> tuple[nn.Module, dict]:
    """The trained network of a finished fit's folder (``metrics.json`` and ``model.pt``), in eval mode, and its
    metrics. The network maps pixel coordinates ``(x, y)`` in [-1, 1] (``[N, 2]``) to values ``[N, C]``.

    Raises:
        UsageError: If the folder is not a finished fit with its weights (fits made before ``model.pt`` keep none).
    """

    def build(metrics: dict) -> nn.Module:
        side = max(metrics["height"], metrics["width"])  # the WIRE PE's bands follow the fitted image's size
        return build_network(NetworkConfig(**metrics["config"]["network"]), 2, metrics["channels"], side)

    no_weights = ("fits made before rff-field kept their weights have none; run the same fit again with --overwrite "
                  "(a benchmark's job: delete its metrics.json and run the same bench again)")  # fmt: skip
    network, metrics = load_trained_network(folder, "metrics.json", build, "rff-image fit", no_weights)
    return network.to(device), metrics


@torch.no_grad()
def render_image(network: nn.Module, height: int, width: int, batch: int = 65536) -> Float[Tensor, "H W C"]:
    """The network's values on a ``height`` x ``width`` grid spanning the same [-1, 1] square as the fitted image
    (so a larger grid samples between the fitted pixels), ``batch`` pixels at a time."""
    device = next(network.parameters()).device
    values = PixelPredictor(network, pixel_coordinates(height, width).to(device), cache=False).predict_all(batch)
    return values.reshape(height, width, -1).cpu()
