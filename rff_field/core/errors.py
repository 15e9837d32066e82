"""Errors a command reports in one line: ``UsageError`` (exit status 2), ``TrainingDiverged`` (3); Ctrl-C exits 130."""

from __future__ import annotations

import math
from typing import Iterable

USAGE_EXIT_STATUS = 2
DIVERGED_EXIT_STATUS = 3
INTERRUPTED_EXIT_STATUS = 130


class UsageError(ValueError):
    """Input that a command cannot use (an option, file or folder); the message says what is wrong and what to do."""


class TrainingDiverged(RuntimeError):
    """A non-finite loss or parameter, or a blown-up loss; the message says at which step, what, and what to try."""


def check_fields(
    config: object,
    positive_int: Iterable[str] = (),
    non_negative_int: Iterable[str] = (),
    positive: Iterable[str] = (),
    non_negative: Iterable[str] = (),
    prefix: str = "--",
) -> None:
    """Raise :class:`UsageError` naming the option (``prefix`` + field) of the first named field out of its range."""
    for kind, names in (("positive_int", positive_int), ("non_negative_int", non_negative_int),
                        ("positive", positive), ("non_negative", non_negative)):  # fmt: skip
        for name in names:
            value, option = getattr(config, name), prefix + name.replace("_", "-")
            if value is None:
                continue
            if kind.endswith("_int") and (isinstance(value, bool) or not isinstance(value, int)):
                raise UsageError(f"{option} must be an integer, got {value!r}")
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                raise UsageError(f"{option} must be a finite number, got {value!r}")
            if value < 0 or (value == 0 and kind.startswith("positive")):
                raise UsageError(f"{option} must be {'positive' if kind.startswith('positive') else '>= 0'}, "
                                 f"got {value!r}")  # fmt: skip
