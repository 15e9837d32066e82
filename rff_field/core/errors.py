"""The errors a command reports to its user in one line (no traceback).

``UsageError``: the input cannot work (a bad option, file or folder); commands exit with status 2.
``TrainingDiverged``: training produced a non-finite loss or parameter; commands exit with status 3.
"""

from __future__ import annotations

USAGE_EXIT_STATUS = 2
DIVERGED_EXIT_STATUS = 3


class UsageError(ValueError):
    """Input that a command cannot use; the message says what is wrong and what to do."""


class TrainingDiverged(RuntimeError):
    """Training produced a non-finite loss or parameter; the message says at which step, what, and what to try."""
