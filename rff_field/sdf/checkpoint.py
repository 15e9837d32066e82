"""The checkpoint of an SDF fit that stops before its last step, to resume it there.

Resumed with the same settings on the same shape, the fit goes on with the steps it would have taken had it not
stopped: the network, Adam's state, the schedule and the sampler's position are put back.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from torch import Tensor

from rff_field.common.checkpoint import settings_key
from rff_field.sdf.data import SamplePool

if TYPE_CHECKING:
    from rff_field.sdf.fit import Sampler, SDFNetworkConfig, SDFTrainConfig


@dataclass
class SDFCheckpoint:
    """An SDF fit at the end of step ``iteration``.

    Args:
        iteration: Steps done.
        seconds: Training seconds spent on them (over every run that resumed it); ``cpu_seconds`` and
            ``sampling_seconds`` as in :class:`~rff_field.sdf.fit.TrainResult`.
        settings: :func:`sdf_settings` of the fit that wrote it.
        model: The network's ``state_dict``.
        adam: Adam's state of each parameter, by name.
        sampler: The sampler's ``state()``.
        loss: The loss of every step so far.
        filter_lrs: The filter's rate of every step so far (empty without a filter).
        resumed: Steps at which earlier runs resumed the fit.
    """

    iteration: int
    seconds: float
    cpu_seconds: float
    sampling_seconds: float
    settings: str
    model: dict[str, Tensor]
    adam: dict[str, dict[str, Tensor]]
    sampler: dict
    loss: list[float]
    filter_lrs: list[float]
    resumed: list[int] = field(default_factory=list)


def sdf_settings(network: "SDFNetworkConfig", train: "SDFTrainConfig", shape: str, sampler: "Sampler") -> str:
    """What a checkpoint must have been written with to be resumed: the network, the training, the shape's name and
    where its samples come from (fresh, or a pool of a given size)."""
    source = f"pool of {len(sampler)}" if isinstance(sampler, SamplePool) else "fresh"
    return settings_key(asdict(network), asdict(train), shape, source)
