"""The errors a command reports to its user in one line (no traceback).

``UsageError``: the input cannot work (a bad option, file or folder); commands exit with status 2.
``TrainingDiverged``: training produced a non-finite loss or parameter, or its loss blew up; commands exit with
status 3.
``JobsFailed``: jobs of a benchmark raised in its worker processes while the others ran; commands exit with status 1.
"""

from __future__ import annotations

import math
from typing import Iterable

USAGE_EXIT_STATUS = 2
DIVERGED_EXIT_STATUS = 3


class UsageError(ValueError):
    """Input that a command cannot use; the message says what is wrong and what to do."""


class TrainingDiverged(RuntimeError):
    """Training produced a non-finite loss or parameter, or its loss blew up; the message says at which step, what,
    and what to try."""


class JobsFailed(RuntimeError):
    """Jobs of a benchmark that raised while the others ran on; the message names them and what to do."""


def check_positive(name: str, value: float, integer: bool = False) -> None:
    """Raise :class:`UsageError` unless ``value`` is a finite number > 0 (an integer when ``integer``)."""
    if integer and (isinstance(value, bool) or not isinstance(value, int)):
        raise UsageError(f"{name} must be a positive integer, got {value!r}")
    if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise UsageError(f"{name} must be a positive {'integer' if integer else 'finite number'}, got {value!r}")


def check_fields(
    config: object,
    positive_int: Iterable[str] = (),
    non_negative_int: Iterable[str] = (),
    positive: Iterable[str] = (),
    non_negative: Iterable[str] = (),
    prefix: str = "--",
) -> None:
    """Raise :class:`UsageError` for the first named field of ``config`` out of its range (None is skipped); the
    message names the command-line option, ``prefix`` + the field name with dashes."""

    def option(name: str) -> str:
        return prefix + name.replace("_", "-")

    for kind, names in (("positive_int", positive_int), ("non_negative_int", non_negative_int),
                        ("positive", positive), ("non_negative", non_negative)):  # fmt: skip
        for name in names:
            value = getattr(config, name)
            if value is None:
                continue
            integer = kind.endswith("_int")
            if integer and (isinstance(value, bool) or not isinstance(value, int)):
                raise UsageError(f"{option(name)} must be an integer, got {value!r}")
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                raise UsageError(f"{option(name)} must be a finite number, got {value!r}")
            if kind.startswith("positive") and value <= 0:
                raise UsageError(f"{option(name)} must be positive, got {value!r}")
            if kind.startswith("non_negative") and value < 0:
                raise UsageError(f"{option(name)} must be zero or positive, got {value!r}")
