"""The NeRF field of ``rff-nerf``: nerfstudio's ``NeRFField`` fed a (filtered) Fourier feature embedding.

The field is not subclassed: the filter lives in the encoding (:class:`~rff_field.core.filter.FilteredEncoding`), so
the only difference between ``rff-nerf`` and its "MLP+PE" baseline is the encoding object given to the field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Tuple

import torch
from nerfstudio.field_components.encodings import Encoding
from nerfstudio.fields.vanilla_nerf_field import NeRFField

from rff_field.core.encodings import PositionalEncoding, RandomFourierEncoding
from rff_field.core.filter import FilteredEncoding, FilterInit, initialize_filter

EncodingKind = Literal["pe", "rff"]
PEBands = Literal["nerf", "log-linear"]


def nerf_positional_encoding(in_dim: int, num_frequencies: int, include_input: bool = True) -> PositionalEncoding:
    """nerf-pytorch's embedding ``[x, sin(2**k x), cos(2**k x)]``, k = 0..L-1 (angular frequencies, no 2 pi).

    :class:`PositionalEncoding` computes ``sin(2 pi f x)``, so the frequencies are ``2**k / (2 pi)``.

    Args:
        in_dim: Number of input coordinates.
        num_frequencies: Number of bands (L).
        include_input: Prepend the raw coordinates.
    """
    freqs = 2.0 ** torch.arange(num_frequencies, dtype=torch.float64) / (2 * math.pi)
    return PositionalEncoding(in_dim, num_frequencies, float(freqs[-1]), include_input, frequencies=freqs)


@dataclass
class FourierEncodingSpec:
    """How to build one Fourier feature embedding (position or direction).

    Args:
        kind: ``pe`` (on-axis bands) or ``rff`` (random Gaussian frequencies).
        num_frequencies: PE: bands per input dimension; RFF: number of random frequency vectors.
        pe_bands: ``nerf``: nerf-pytorch's ``2**k`` bands; ``log-linear``: the paper's ``scale**(i/N)`` cycles.
        pe_scale: Highest frequency (cycles per unit) of the ``log-linear`` bands.
        rff_sigma: Standard deviation of the random frequencies (cycles per unit).
        rff_seed: Seed of the random frequencies.
        include_input: Prepend the raw coordinates to the features.
        filtered: Pass the embedding through the bias-free adaptive filter.
        filter_num_layers: Linear layers of the filter.
        filter_bias: Give the filter biases (ablation only).
        filter_init: Initialisation of the filter's weights (see :func:`rff_field.inr.config.initialize_filter`).
        filter_init_gain: Gain of the non-default initialisations.
    """

    kind: EncodingKind = "pe"
    num_frequencies: int = 10
    pe_bands: PEBands = "nerf"
    pe_scale: float = 64.0
    rff_sigma: float = 8.0
    rff_seed: int = 0
    include_input: bool = True
    filtered: bool = True
    filter_num_layers: int = 3
    filter_bias: bool = False
    filter_init: FilterInit = "default"
    filter_init_gain: float = 1.0

    def build(self, in_dim: int) -> Encoding:
        """A new encoding (with a new filter, when filtered) for ``in_dim`` input coordinates."""
        if self.kind == "rff":
            encoding: Encoding = RandomFourierEncoding(
                in_dim, self.num_frequencies, self.rff_sigma, self.include_input, seed=self.rff_seed
            )
        elif self.pe_bands == "nerf":
            encoding = nerf_positional_encoding(in_dim, self.num_frequencies, self.include_input)
        else:
            encoding = PositionalEncoding(in_dim, self.num_frequencies, self.pe_scale, self.include_input)
        if self.filtered:
            encoding = FilteredEncoding(encoding, num_layers=self.filter_num_layers, bias=self.filter_bias)
            initialize_filter(encoding.filter, self.filter_init, self.filter_init_gain)
        return encoding


def make_nerf_field(
    position: FourierEncodingSpec,
    direction: FourierEncodingSpec,
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
