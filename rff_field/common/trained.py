"""A finished fit's network, rebuilt from the settings file and the weights (``model.pt``) in its folder."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Callable

import torch
from torch import nn

from rff_field.core.errors import UsageError

WEIGHTS_FILE = "model.pt"
"""The trained network's ``state_dict`` in a finished fit's folder."""


def load_trained_network(
    folder: Path, settings_file: str, build: Callable[[dict], nn.Module], command: str, no_weights: str
) -> tuple[nn.Module, dict]:
    """The network that ``build`` makes from the folder's settings (a JSON file), with the folder's weights, in eval
    mode on the CPU, and the settings. ``no_weights`` says why a fit may have no weights and what to do.

    Raises:
        UsageError: If the folder is not a finished fit of ``command`` with its weights, the network cannot be
            rebuilt from them, or its weights are not finite (a diverged fit).
    """
    folder = Path(folder)
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise UsageError(f"{folder} {what}; give the --out folder of a finished `{command}`")
    missing = [name for name in (settings_file, WEIGHTS_FILE) if not (folder / name).is_file()]
    if missing == [WEIGHTS_FILE]:
        raise UsageError(f"{folder} holds a fit without its weights ({WEIGHTS_FILE}): {no_weights}")
    if missing:
        raise UsageError(f"{folder} has no {' or '.join(missing)}: not a finished fit with its weights; give the "
                         f"--out folder of a finished `{command}` (or a benchmark's run folder)")  # fmt: skip
    try:
        settings = json.loads((folder / settings_file).read_text())
        network = build(settings)
        network.load_state_dict(torch.load(folder / WEIGHTS_FILE, map_location="cpu", weights_only=True))
    except (ValueError, KeyError, TypeError, RuntimeError, EOFError, pickle.UnpicklingError) as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise UsageError(f"cannot rebuild the network of {folder} from its {settings_file} and {WEIGHTS_FILE} "
                         f"({reason}); fit it again with this version (--overwrite)") from None  # fmt: skip
    if not all(torch.isfinite(parameter).all() for parameter in network.parameters()):
        raise UsageError(f"the weights in {folder} hold non-finite values: its training diverged; fit it again")
    return network.eval(), settings
