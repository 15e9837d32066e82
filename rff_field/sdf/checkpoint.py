"""The checkpoint of an SDF fit that stops before its last step, to resume it there.

Resumed with the same settings on the same shape, the fit goes on with the steps it would have taken had it not
stopped: the network, Adam's state, the schedule and the sampler's position are put back.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from rff_field.common.checkpoint import TrainingCheckpoint, content_digest, settings_key
from rff_field.sdf.data import SamplePool

if TYPE_CHECKING:
    from rff_field.sdf.fit import Sampler, SDFNetworkConfig, SDFTrainConfig


@dataclass
class SDFCheckpoint(TrainingCheckpoint):
    """An SDF fit at the end of step ``iteration`` (``settings``: :func:`sdf_settings`).

    Args:
        cpu_seconds: CPU seconds of the steps done, as in :class:`~rff_field.sdf.fit.TrainResult`.
        sampling_seconds: The part of ``seconds`` spent sampling.
        sampler: The sampler's ``state()``.
        loss: The loss of every step so far.
        filter_lrs: The filter's rate of every step so far (empty without a filter).
        resumed: Steps at which earlier runs resumed the fit.
    """

    cpu_seconds: float
    sampling_seconds: float
    sampler: dict
    loss: list[float]
    filter_lrs: list[float]
    resumed: list[int] = field(default_factory=list)


def sdf_settings(network: "SDFNetworkConfig", train: "SDFTrainConfig", shape: str, sampler: "Sampler") -> str:
    """What a checkpoint must have been written with to be resumed: the network, the training, the shape's name,
    where its samples come from (fresh, or a pool of a given size) and the mesh's or the pool's content."""
    if isinstance(sampler, SamplePool):
        source, content = f"pool of {len(sampler)}", content_digest(sampler.surface_points, *sampler.coarse)
    else:
        source, content = "fresh", content_digest(sampler.vertices, sampler.triangles)
    return settings_key(asdict(network), asdict(train), shape, source, {"shape content": content})
