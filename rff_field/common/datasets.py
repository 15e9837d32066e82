"""Where the benchmarks find their datasets (Kodak, the NeRF synthetic scenes, meshes) by default: the folder named
by the environment variable ``RFF_DATA``, else ``../shared/data`` from the current folder (beside the checkout when
run from its root). Every benchmark also takes the folder as an option."""

from __future__ import annotations

import os
from pathlib import Path

DATA_ROOT = Path(os.environ.get("RFF_DATA", "../shared/data"))
"""Root of the datasets: ``kodak/``, ``nerf_synthetic/<scene>/``, ``meshes/``."""
