"""Tests, mirroring the package. Slow tests read real data from the folder named by ``RFF_DATA``, else the
``shared/data`` folder beside the repository."""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("RFF_DATA", REPO.parent / "shared" / "data"))


def import_blocker(*names: str) -> str:
    """Python source that makes importing the top-level packages ``names`` fail (as on a machine without them), to
    run first in a subprocess (``-c`` or a ``sitecustomize.py``)."""
    return f"""
import importlib.abc, sys
BLOCKED = {names!r}
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{{name}} is blocked for this test")
        return None
sys.meta_path.insert(0, Block())
"""


def exit_status(entrypoint, args) -> int:
    """The exit status of a console script's ``entrypoint(args)`` run in-process (0 when it returns)."""
    try:
        entrypoint([str(arg) for arg in args])
    except SystemExit as end:
        return end.code
    return 0
