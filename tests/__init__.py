"""Tests, mirroring the package. Slow tests read real data from the ``shared/data`` folder beside the repository."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
