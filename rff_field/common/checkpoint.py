"""Checkpoints of a fit that stops before its last step: written atomically, read back only by a fit with the same
settings, and the optimizer and schedule put back where they stood.

Each application keeps its own checkpoint dataclass (what its fit needs to go on); this module saves, loads and
restores the parts they share.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Optional, TypeVar

import numpy as np
import torch
from torch import Tensor, nn
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

from rff_field.common.options import option_flag, option_value
from rff_field.common.outputs import write_torch
from rff_field.core.errors import UsageError

CHECKPOINT_FILE = "checkpoint.pt"
"""The checkpoint's name in a fit's folder."""
CHECKPOINT_EVERY_S = 300.0
"""Seconds between checkpoints of a running fit (besides the one written when it stops at its time budget)."""


@dataclass
class TrainingCheckpoint:
    """What every fit's checkpoint holds; each application's adds what its fit needs to go on.

    Args:
        iteration: Iterations (steps) done.
        seconds: Training seconds spent on them (over every run that resumed the fit).
        settings: What the fit that wrote it was run with (:func:`settings_key`).
        model: The model's ``state_dict`` (:func:`model_state`).
        adam: Adam's state of each parameter, by parameter name (:func:`adam_state`).
    """

    iteration: int
    seconds: float
    settings: str
    model: dict[str, Tensor]
    adam: dict[str, dict[str, Tensor]]


Checkpoint = TypeVar("Checkpoint", bound=TrainingCheckpoint)


def content_digest(*arrays: Any) -> str:
    """A short hash of the values of numpy arrays or tensors: a checkpoint resumes only on the same input data, not
    on another file of the same name and size."""
    digest = hashlib.sha256()
    for array in arrays:
        values = array.detach().cpu().numpy() if isinstance(array, Tensor) else np.asarray(array)
        digest.update(str((values.dtype, values.shape)).encode())
        digest.update(np.ascontiguousarray(values).tobytes())
    return digest.hexdigest()[:16]


def settings_key(*parts: Any) -> str:
    """What a checkpoint must have been written with to be resumed, as one string (``parts``: plain data)."""
    return json.dumps(list(parts), sort_keys=True, default=str)


REPORTING_OPTIONS = ("log_every", "lpips", "dump_embedding", "error_vmax")
"""Options that change what a fit reports, not the steps it takes: a checkpoint resumes under other values."""


def _steps_only(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _steps_only(item) for key, item in value.items() if key not in REPORTING_OPTIONS}
    if isinstance(value, list):
        return [_steps_only(item) for item in value]
    return value


def same_settings(first: str, second: str) -> bool:
    """Whether two :func:`settings_key` strings hold the same values (an option given as 32 equals one of 32.0),
    apart from :data:`REPORTING_OPTIONS`."""
    try:
        return first == second or _steps_only(json.loads(first)) == _steps_only(json.loads(second))
    except ValueError:
        return False


def save_checkpoint(path: Path, checkpoint: TrainingCheckpoint, notify: Callable[[str], None]) -> bool:
    """Write ``checkpoint`` to ``path`` atomically (a run killed while writing leaves the previous one); whether it
    was written. A file that cannot be written (a full disk) gets a notice, and the fit goes on."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_torch(path, asdict(checkpoint))
        return True
    except (OSError, RuntimeError) as error:  # torch.save reports a failed write as a RuntimeError
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        notify(f"could not save the checkpoint {path} ({reason}); the fit goes on without it")
        return False


def load_checkpoint(
    path: Optional[Path], kind: type[Checkpoint], settings: Optional[str], notify: Callable[[str], None]
) -> Optional[Checkpoint]:
    """The checkpoint (a ``kind``) at ``path`` if it was written with ``settings`` (None: any); None (with a notice
    when a file is there but cannot be resumed) otherwise."""
    if path is None or not path.is_file():
        return None
    try:
        checkpoint = kind(**torch.load(path, map_location="cpu", weights_only=True))
    except Exception as error:  # a file of another version or a damaged one: start over rather than fail
        notify(f"{path} cannot be read ({type(error).__name__}); this fit starts from the first step")
        return None
    if settings is not None and not same_settings(checkpoint.settings, settings):
        notify(f"{path} was written by a fit with other settings; this fit starts from the first step")
        return None
    return checkpoint


def holds_unfinished_fit(folder: Path) -> bool:
    """Whether ``folder`` holds the checkpoint of a fit that was stopped before it wrote ``metrics.json`` (its last
    output): the same command goes on from it, over whatever outputs it had begun to write."""
    return (folder / CHECKPOINT_FILE).is_file() and not (folder / "metrics.json").is_file()


def differing_settings(stored: dict, current: dict, prefix: str = "") -> dict[str, tuple[Any, Any]]:
    """Keys present in both settings (of two runs, or two benchmark protocols) with different values, dotted through
    nested dicts, each with its stored and its current value, sorted by key; options added later are not
    differences."""
    out = {}
    for key in stored.keys() & current.keys():
        if isinstance(stored[key], dict) and isinstance(current[key], dict):
            out.update(differing_settings(stored[key], current[key], f"{prefix}{key}."))
        elif stored[key] != current[key]:
            out[prefix + key] = (stored[key], current[key])
    return dict(sorted(out.items()))


def settings_differences(stored: str, current: str) -> list[str]:
    """``"key: A there, B now"`` for each option (and input) that differs between two :func:`settings_key` strings,
    apart from :data:`REPORTING_OPTIONS`."""

    def by_key(text: str) -> dict[str, Any]:
        parts = _steps_only(json.loads(text))
        return {key: value for index, part in enumerate(parts)
                for key, value in (part.items() if isinstance(part, dict) else [(f"input {index}", part)])}  # fmt: skip

    differences = differing_settings(by_key(stored), by_key(current))
    return sorted(f"{key} differs" if key.endswith(" content") else
                  f"{option_flag(key)}: {option_value(there)} there, {option_value(now)} now"
                  for key, (there, now) in differences.items())  # fmt: skip


def check_resumable(
    path: Path, kind: type[TrainingCheckpoint], settings: str, overwrite: bool, unit: str = "iteration"
) -> None:
    """Refuse to start a fit over the checkpoint at ``path`` of a fit with other settings unless ``overwrite``: it
    would be replaced, and the work it holds lost. Say what differs."""
    if overwrite or not path.is_file():
        return
    saved = load_checkpoint(path, kind, None, notify=lambda message: None)
    if saved is None or same_settings(saved.settings, settings):
        return
    differences = settings_differences(saved.settings, settings)
    shown = "; ".join(differences[:4]) + ("; ..." if len(differences) > 4 else "") or "an option one of them lacks"
    raise UsageError(
        f"{path} holds the checkpoint of a fit with other settings ({shown}); rerun with those to go on from "
        f"{unit} {saved.iteration}, or pass --overwrite to start this fit over and replace it"
    )


def checkpoint_iteration(path: Path, kind: type[TrainingCheckpoint], settings: Optional[str] = None) -> int:
    """The iteration of the checkpoint at ``path`` (written with ``settings``, when given): where a fit resumes, 0
    without one."""
    checkpoint = load_checkpoint(path, kind, settings, notify=lambda message: None)
    return checkpoint.iteration if checkpoint is not None else 0


def adam_state(model: nn.Module, optimizer: Optimizer) -> dict[str, dict[str, Tensor]]:
    """Adam's state of ``model``'s parameters (``optimizer`` may train other models too), by name, on the CPU."""
    state = {}
    for name, parameter in model.named_parameters():
        if optimizer.state.get(parameter):
            state[name] = {key: value.detach().cpu().clone() for key, value in optimizer.state[parameter].items()}
    return state


def model_state(model: nn.Module) -> dict[str, Tensor]:
    """``model``'s ``state_dict``, copied to the CPU."""
    return {key: value.detach().cpu().clone() for key, value in model.state_dict().items()}


@torch.no_grad()
def restore_model(model: nn.Module, optimizer: Optimizer, weights: dict[str, Tensor], adam: dict) -> None:
    """Put ``model`` and its Adam state (from :func:`adam_state`) back; Adam keeps its step count on the CPU unless
    the group is capturable or fused."""
    model.load_state_dict(weights)
    on_device = {
        id(p): bool(g.get("capturable") or g.get("fused")) for g in optimizer.param_groups for p in g["params"]
    }
    for name, parameter in model.named_parameters():
        if name not in adam:
            continue
        state = {key: value.to(parameter.device) for key, value in adam[name].items()}
        if "step" in state and not on_device[id(parameter)]:
            state["step"] = state["step"].cpu()
        optimizer.state[parameter] = state


def set_schedule(scheduler: LambdaLR, iteration: int) -> None:
    """Move ``scheduler`` (and its optimizer's rates) to where it stands after ``iteration`` iterations."""
    scheduler.last_epoch = iteration
    for group, base, factor in zip(scheduler.optimizer.param_groups, scheduler.base_lrs, scheduler.lr_lambdas):
        rate = base * factor(iteration)
        if isinstance(group["lr"], Tensor):
            group["lr"].fill_(rate)
        else:
            group["lr"] = rate
