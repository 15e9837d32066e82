"""A finished fit's network, rebuilt from the ``metrics.json`` and the weights (``model.pt``) in its folder."""

from __future__ import annotations

import dataclasses
import json
import typing
from pathlib import Path
from typing import Any, Callable, TypeVar

import torch
from torch import nn

from rff_field.core.errors import UsageError

WEIGHTS_FILE = "model.pt"
"""The trained network's ``state_dict`` in a finished fit's folder."""
Config = TypeVar("Config")


def config_from_dict(kind: type[Config], data: dict) -> Config:
    """The dataclass ``kind`` from its ``dataclasses.asdict`` (nested dataclasses rebuilt, lists back to tuples)."""
    hints = typing.get_type_hints(kind)
    values: dict[str, Any] = {}
    for field in dataclasses.fields(kind):  # type: ignore[arg-type]
        if field.name not in data:
            continue
        value, hint = data[field.name], hints[field.name]
        if dataclasses.is_dataclass(hint) and isinstance(value, dict):
            value = config_from_dict(hint, value)
        elif isinstance(value, list):
            value = tuple(value)
        values[field.name] = value
    return kind(**values)


def load_trained_network(folder: Path, build: Callable[[dict], nn.Module], command: str) -> tuple[nn.Module, dict]:
    """The finished fit of ``command`` in the folder (its network in eval mode on the CPU) and its metrics."""
    folder = Path(folder)
    if not (folder / "metrics.json").is_file() or not (folder / WEIGHTS_FILE).is_file():
        raise UsageError(f"{folder} holds no finished fit (metrics.json and {WEIGHTS_FILE}); give the --output-dir "
                         f"folder of a `{command}`")  # fmt: skip
    try:
        metrics = json.loads((folder / "metrics.json").read_text())
        network = build(metrics)
        network.load_state_dict(torch.load(folder / WEIGHTS_FILE, map_location="cpu", weights_only=True))
    except (ValueError, KeyError, TypeError, RuntimeError, EOFError) as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UsageError(f"cannot rebuild the network in {folder} ({reason}); fit it again with --overwrite") from None
    if metrics.get("diverged"):
        raise UsageError(f"{folder} holds a fit that diverged (its network is of the last finite step, not trained); "
                         "fit it again with the hints in its metrics.json")  # fmt: skip
    if metrics.get("stopped"):
        raise UsageError(f"{folder} holds a fit stopped before its last step; run its `{command}` again to finish it")
    return network.eval(), metrics
