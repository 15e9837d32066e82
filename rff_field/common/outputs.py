"""Writing result files: folders checked before any work, JSON that standard parsers read (no NaN), written
atomically, and a run's own earlier outputs cleared (never anything else)."""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import re
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional

from rff_field.core.errors import UsageError


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


MIN_FREE_BYTES = 4 << 20
"""Free space below which a disk counts as full: an output folder there is refused before any work."""


@contextlib.contextmanager
def written_atomically(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path`` (same suffix, so writers pick the same format) that becomes ``path`` when
    the block ends, and is removed when it fails: readers see the old file or the whole new one, and a full disk
    leaves no half-written output to block the next run. A failed write with too little space left is raised as
    ``OSError(ENOSPC)`` (torch and some image writers hide the errno)."""
    path = Path(path)
    temporary = path.with_name(f".{path.stem}.{os.getpid()}.partial{path.suffix}")
    try:
        yield temporary
        os.replace(temporary, path)
    except (OSError, RuntimeError) as err:
        if getattr(err, "errno", None) != errno.ENOSPC and free_bytes(path.parent) < MIN_FREE_BYTES:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path)) from err
        raise
    finally:
        temporary.unlink(missing_ok=True)


def free_bytes(folder: Path) -> float:
    """Free space on the disk of ``folder`` (infinite where it cannot be read, e.g. the folder is gone)."""
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return math.inf


def new_figure(nrows: int = 1, ncols: int = 1, figsize: Optional[tuple[float, float]] = None, **kwargs: Any) -> Any:
    """A matplotlib figure and its axes (``Figure.subplots(nrows, ncols, **kwargs)``), laid out tightly when saved,
    made without pyplot: no backend is switched and nothing is registered, so a caller's own plots (a notebook's
    inline ones) stay as they were."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=figsize, layout="tight")
    return figure, figure.subplots(nrows, ncols, **kwargs)


def save_figure(fig: Any, path: Path, **kwargs: Any) -> None:
    """``fig.savefig(path, **kwargs)`` atomically (:func:`written_atomically`)."""
    with written_atomically(path) as temporary, warnings.catch_warnings():
        # a title in a script the font lacks (e.g. a Chinese file name) shows boxes; a warning per glyph adds nothing
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font", category=UserWarning)
        fig.savefig(temporary, **kwargs)


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (:func:`written_atomically`)."""
    with written_atomically(path) as temporary:
        temporary.write_text(text)


def write_torch(path: Path, data: Any) -> None:
    """``torch.save`` ``data`` to ``path`` atomically, through a file object: the archive inside is then named the
    same on every run (after a path, torch names it after the temporary file), so equal data give equal files."""
    import torch

    with written_atomically(path) as temporary, open(temporary, "wb") as file:
        torch.save(data, file)


def write_json(path: Path, data: Any, indent: int = 1) -> None:
    """Write ``data`` as JSON to ``path`` atomically: readers see the old file or the whole new one."""
    write_text(path, json.dumps(finite(data), indent=indent) + "\n")


def check_writable_folder(folder: Path, option: str) -> None:
    """Raise :class:`UsageError` unless files can be written in ``folder`` (which may not exist yet).

    Args:
        folder: Where the outputs will go.
        option: How the command line names it (e.g. ``--out``), for the message.
    """
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{option} {folder} is a file; give a folder")
    ancestor = folder
    while not ancestor.exists():
        if ancestor.is_symlink():
            raise UsageError(f"{option} {folder} cannot be created: {ancestor} is a link to {os.readlink(ancestor)}, "
                             "which does not exist; create that folder or choose another")  # fmt: skip
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise UsageError(f"{option} {folder} cannot be created: {ancestor} is a file; choose another folder")
    try:
        with tempfile.TemporaryFile(dir=ancestor):
            pass
    except OSError as err:
        raise UsageError(f"{option} {folder} is not writable ({err.strerror}); choose another folder") from None
    free = free_bytes(ancestor)
    if free < MIN_FREE_BYTES:
        raise UsageError(f"{option} {folder} is on a full disk ({free >> 10} KiB free); free some space or choose "
                         "another folder")  # fmt: skip


def check_output_path(path: Path, suffixes: tuple[str, ...], overwrite: bool, option: str = "--output-path") -> None:
    """Raise :class:`UsageError` unless ``path`` is a file of one of ``suffixes`` that can be written, and is new
    unless ``overwrite``."""
    path = Path(path)
    if path.suffix.lower() not in suffixes:
        raise UsageError(f"{option} {path} must end in {', '.join(suffixes[:-1])}{' or ' if suffixes[1:] else ''}"
                         f"{suffixes[-1]}")  # fmt: skip
    if path.is_dir():
        raise UsageError(f"{option} {path} is a folder; give a file name, e.g. out{suffixes[0]}")
    if path.exists() and not overwrite:
        raise UsageError(f"{path} already exists; choose another {option} or pass --overwrite")
    check_writable_folder(path.parent, f"{option}'s folder")


def check_plain_name(name: str, what: str) -> None:
    """Raise :class:`UsageError` unless ``name`` can name a file or folder inside another (no '/', not '..')."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise UsageError(
            f"{what} {name!r} names files or folders; start it with a letter or digit and use only letters, digits, "
            "'.', '_' and '-'"
        )


def check_output_files(folder: Path, names: Iterable[str], overwrite: bool, option: str) -> None:
    """Raise :class:`UsageError` unless ``folder`` is writable and, without ``overwrite``, holds none of ``names``.

    Args:
        folder: Where the outputs will go.
        names: The files the command writes there.
        overwrite: Whether the user asked to replace them.
        option: How the command line names the folder (e.g. ``--dest``), for the message.
    """
    check_writable_folder(folder, option)
    existing = [name for name in names if (Path(folder) / name).exists()]
    if existing and not overwrite:
        raise UsageError(f"{folder} already holds {', '.join(existing)}; pass --overwrite or choose another {option}")


def check_input_kept(path: Optional[Path], option: str, folder: Path, names: Iterable[str]) -> None:
    """Raise :class:`UsageError` when the input file ``path`` is one of the files ``names`` that a run writes or
    clears in its output ``folder``: the run would destroy its own input."""
    if path is None:
        return
    if Path(path).resolve() in {(Path(folder) / name).resolve() for name in names}:
        raise UsageError(f"{option} {path} is a file this run writes in --out {folder}, so the run would replace its "
                         "own input; move the file or choose another --out")  # fmt: skip


BENCHMARK_FILE = "bench.json"
"""The file that marks a benchmark's folder and holds its protocol (``rff-image bench``, ``rff-sdf bench``)."""


def check_fit_folder(folder: Path, what: str, key: str) -> None:
    """Raise :class:`UsageError` when ``folder`` (a fit's ``--out``) holds a benchmark, or the ``metrics.json`` of
    another command's run (one without ``key``): the fit's files would be mixed with its files, or replace them.

    Args:
        folder: The fit's output folder.
        what: The fit, for the message (e.g. ``image fit``).
        key: A key every ``metrics.json`` of this fit has (e.g. ``image``).
    """
    folder = Path(folder)
    if (folder / BENCHMARK_FILE).is_file() or (folder / "runs").is_dir():
        raise UsageError(f"{folder} holds a benchmark; choose another --out for this {what}")
    metrics = folder / "metrics.json"
    if metrics.is_file():
        try:
            record = json.loads(metrics.read_text())
        except (OSError, ValueError):
            record = {}
        if not isinstance(record, dict) or key not in record:
            raise UsageError(f"{folder} holds the results of another command (its metrics.json is no {what}'s); "
                             "choose another --out")  # fmt: skip


def clear_outputs(folder: Path, names: Iterable[str]) -> None:
    """Remove the files ``names`` (glob patterns allowed) from ``folder`` where they exist: a run's own outputs,
    before it rewrites them."""
    for name in names:
        for path in Path(folder).glob(name):
            if path.is_file() or path.is_symlink():
                path.unlink()
