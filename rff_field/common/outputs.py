"""Writing result files: JSON that standard parsers read (no NaN), written atomically."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any


def finite(value: Any) -> Any:
    """``value`` with non-finite floats replaced by None and paths by strings, recursively (valid JSON)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(item) for item in value]
    if isinstance(value, Path):
        return str(value)
    return value


def write_json(path: Path, data: Any, indent: int = 1) -> None:
    """Write ``data`` as JSON to ``path`` atomically: readers see the old file or the whole new one."""
    path = Path(path)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(json.dumps(finite(data), indent=indent) + "\n")
    os.replace(partial, path)
