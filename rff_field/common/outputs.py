"""Writing result files atomically (readers see the old file or the whole new one; a killed run leaves no half
file), JSON that standard parsers read (no NaN), PNGs, figures made without pyplot."""

from __future__ import annotations

import contextlib
import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Optional

if TYPE_CHECKING:
    from torch import Tensor


def finite(value: Any) -> Any:
    """``value`` with non-finite floats replaced by None and paths by strings, recursively (valid JSON)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(item) for item in value]
    return str(value) if isinstance(value, Path) else value


@contextlib.contextmanager
def written_atomically(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path`` (same suffix) that replaces ``path`` when the block ends without error."""
    path = Path(path)
    temporary = path.with_name(f".{path.stem}.{os.getpid()}.partial{path.suffix}")
    try:
        yield temporary
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically."""
    with written_atomically(path) as temporary:
        temporary.write_text(text)


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` as JSON (non-finite floats as null) to ``path`` atomically."""
    write_text(path, json.dumps(finite(data), indent=1) + "\n")


def save_image(pixels: Tensor, path: Path) -> None:
    """Write a tensor ``[H, W, C]`` of values in [0, 1] as an 8-bit PNG (one channel as grayscale), atomically."""
    import numpy as np
    from PIL import Image

    array = np.rint(pixels.detach().cpu().clamp(0, 1).numpy() * 255).astype(np.uint8)
    with written_atomically(path) as temporary:
        Image.fromarray(array[..., 0] if array.shape[2] == 1 else array).save(temporary, format="PNG")


def write_torch(path: Path, data: Any) -> None:
    """``torch.save`` ``data`` to ``path`` atomically."""
    import torch

    with written_atomically(path) as temporary, open(temporary, "wb") as file:
        torch.save(data, file)


def new_figure(nrows: int = 1, ncols: int = 1, figsize: Optional[tuple[float, float]] = None, **kwargs: Any) -> Any:
    """A matplotlib figure and its axes (``Figure.subplots``), laid out tightly, made without pyplot (no backend is
    switched, a caller's own plots stay as they were)."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=figsize, layout="tight")
    return figure, figure.subplots(nrows, ncols, **kwargs)


def save_figure(fig: Any, path: Path, **kwargs: Any) -> None:
    """``fig.savefig(path, **kwargs)`` atomically."""
    with written_atomically(path) as temporary:
        fig.savefig(temporary, **kwargs)
