"""A fit's checkpoint file: written atomically, resumed only by a fit with the same settings on the same input."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch
from torch import Tensor

from rff_field.common.outputs import write_torch
from rff_field.core.errors import UsageError

CHECKPOINT_FILE = "checkpoint.pt"
"""The checkpoint's name in a fit's folder."""

REPORTING_OPTIONS = frozenset({"log_every", "time_budget", "device", "progress", "lpips", "error_vmax"})
"""Options that change what a fit reports or where it runs, not its steps: a checkpoint resumes under others."""


def content_digest(*arrays: Any) -> str:
    """A short hash of arrays' values (a fit resumes on the same data, not another file of the same name)."""
    digest = hashlib.sha256()
    for array in arrays:
        values = array.detach().cpu().numpy() if isinstance(array, Tensor) else np.asarray(array)
        digest.update(str((values.dtype, values.shape)).encode())
        digest.update(np.ascontiguousarray(values).tobytes())
    return digest.hexdigest()[:16]


def _steps_only(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _steps_only(item) for key, item in value.items() if key not in REPORTING_OPTIONS}
    if isinstance(value, (list, tuple)):
        return [_steps_only(item) for item in value]
    return value


def settings_key(*parts: Any) -> str:
    """What a checkpoint must have been written with to resume (plain data, less :data:`REPORTING_OPTIONS`), as text."""
    return json.dumps(_steps_only(json.loads(json.dumps(list(parts), default=str))), sort_keys=True)


def save_checkpoint(path: Path, state: dict) -> None:
    """Write ``state`` (tensors and plain data) to ``path`` atomically: a run killed meanwhile leaves the last one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_torch(path, state)


def load_checkpoint(path: Optional[Path], settings: str) -> Optional[dict]:
    """The checkpoint at ``path`` (None if none); a :class:`UsageError` if it is unreadable or of other settings."""
    if path is None or not path.is_file():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # damaged or from another version
        raise UsageError(f"{path} cannot be read ({type(error).__name__}); delete it or pass --overwrite") from None
    if state.get("settings") != settings:
        raise UsageError(
            f"{path} holds the checkpoint of a fit with other settings (at step {state.get('step')}); rerun with "
            "those to go on, or pass --overwrite to start over"
        )
    return state
