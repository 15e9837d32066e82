"""Progress in a log file: rich draws its bar only when it stops there, LoggedProgress prints it as work goes on."""

import io
import re

from rich.console import Console
from rich.control import Control

from rff_field.common.mesh import sample_grid
from rff_field.common.progress import LoggedProgress, training_progress


def _log_lines(log_interval_s: float, steps: int = 3) -> list[str]:
    log = io.StringIO()
    with LoggedProgress(console=Console(file=log, width=80), log_interval_s=log_interval_s) as bar:
        task = bar.add_task("fit", total=steps)
        for _ in range(steps):
            bar.advance(task)
    return [line for line in log.getvalue().splitlines() if "fit" in line]


def test_a_log_gets_a_line_per_interval_and_the_last_state_once():
    lines = _log_lines(log_interval_s=0.0)
    assert len(lines) == 3 and "33%" in lines[0] and "67%" in lines[1] and "100%" in lines[2]


def test_within_the_interval_only_the_last_state():
    lines = _log_lines(log_interval_s=3600.0)
    assert len(lines) == 1 and "100%" in lines[0]


def test_a_terminal_gets_only_rich_bar():
    console = Console(file=io.StringIO(), width=80, force_terminal=True)
    printed = []  # what is printed besides rich's own cursor controls
    console.print = lambda *args, **kwargs: printed.extend(a for a in args if not isinstance(a, Control))  # type: ignore[method-assign]
    with LoggedProgress(console=console, log_interval_s=0.0, auto_refresh=False) as bar:
        task = bar.add_task("fit", total=2)
        bar.advance(task)
        bar.advance(task)
    assert printed == []


def test_a_log_line_of_a_training_bar_keeps_its_counts_and_times(monkeypatch, capsys):
    monkeypatch.delenv("COLUMNS", raising=False)
    with training_progress(2000, "a-long-shape-name filtered-pe") as on_step:
        for step in range(2000):
            on_step(step, 0.5, 1e-3)
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert "2000/2000" in line and "filter lr 1.00e-03" in line and re.search(r"\d:\d\d:\d\d +\d:\d\d:\d\d$", line)


def test_a_grid_sampled_with_progress_shows_its_slabs(capsys):
    values = sample_grid(lambda p: p.sum(-1), [0, 0, 0], [1, 1, 1], resolution=8, batch_size=64, progress="grid 8^3")
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert values.shape == (8, 8, 8) and line.startswith("grid 8^3") and "8/8" in line
    sample_grid(lambda p: p.sum(-1), [0, 0, 0], [1, 1, 1], resolution=8, batch_size=64)
    assert capsys.readouterr().out == ""
