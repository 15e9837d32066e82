"""Tests, mirroring the package. Slow tests read real data from the folder named by ``RFF_DATA``, else the
``shared/data`` folder beside the repository."""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("RFF_DATA", REPO.parent / "shared" / "data"))
