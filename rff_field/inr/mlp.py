"""A ReLU MLP on a Fourier feature embedding: MLP+PE and MLP+RFF, filtered when the embedding is."""

from __future__ import annotations

from jaxtyping import Float
from torch import Tensor, nn

from rff_field.core.encodings import Encoding


class FourierFeatureMLP(nn.Module):
    """ReLU MLP on an embedding; ``hidden_layers`` counts those after the first (WIRE's convention: 2 is "3 x 256")."""

    def __init__(self, encoding: Encoding, out_dim: int, hidden_features: int = 256, hidden_layers: int = 2) -> None:
        super().__init__()
        self.encoding = encoding
        layers: list[nn.Module] = [nn.Linear(encoding.get_out_dim(), hidden_features), nn.ReLU()]
        for _ in range(hidden_layers):
            layers += [nn.Linear(hidden_features, hidden_features), nn.ReLU()]
        layers.append(nn.Linear(hidden_features, out_dim))
        self.mlp = nn.Sequential(*layers)

    def forward(self, coords: Float[Tensor, "*bs in_dim"]) -> Float[Tensor, "*bs out_dim"]:
        return self.mlp(self.encoding(coords))
