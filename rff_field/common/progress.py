"""A rich progress bar for training loops, showing the current loss and the filter's learning rate."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator, Optional

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


@contextmanager
def training_progress(total: int, description: str) -> Iterator[Callable[[int, float, Optional[float]], None]]:
    """Yields ``on_step(step, loss, filter_lr)``, which advances the bar and shows the values."""
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]}"),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, transient=False) as progress:
        task = progress.add_task(description, total=total, loss="-", rate="")

        def on_step(step: int, loss: float, filter_lr: Optional[float]) -> None:
            rate = f"filter lr {filter_lr:.2e}" if filter_lr is not None else ""
            progress.update(task, completed=step + 1, loss=f"{loss:.4g}", rate=rate)

        yield on_step
