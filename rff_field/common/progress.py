"""A rich progress bar for training loops, showing the current loss and the filter's learning rate."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional

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


def psnr_progress(enabled: bool, total: int, description: str, label: str = "PSNR") -> tuple[Optional[Progress], Any]:
    """A bar over a fit's iterations that shows its PSNR (the task's ``psnr`` field, shown as ``label``); the bar
    and its task, or (None, None) when not ``enabled``."""
    if not enabled:
        return None, None
    bar = Progress(TextColumn(description), BarColumn(), MofNCompleteColumn(),
                   TextColumn(f"{label} {{task.fields[psnr]:6.2f}} dB"), TimeRemainingColumn())  # fmt: skip
    return bar, bar.add_task("fit", total=total, psnr=float("nan"))
