"""Writing results: atomic files (a killed run leaves no half file), replaced only when asked, write errors in one
line; one run at a time in an output folder (an OS lock); JSON without NaN, PNGs, figures without pyplot."""

from __future__ import annotations

import contextlib
import fcntl
import glob
import json
import math
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Optional

from rff_field.core.errors import UsageError

if TYPE_CHECKING:
    from torch import Tensor

LOCK_FILE = ".rff-field.lock"
"""The file in an output folder that a run holds an OS lock on while it writes there."""


def finite(value: Any) -> Any:
    """``value`` with non-finite floats replaced by None and paths by strings, recursively (valid JSON)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(item) for item in value]
    return str(value) if isinstance(value, Path) else value


def remove_stray_partials(folder: Path, stem: str = "*", suffix: str = "*") -> None:
    """Remove :func:`written_atomically`'s temporary files in ``folder`` (of ``stem``, ``suffix``) left by dead runs."""
    pattern = (
        f".{glob.escape(stem) if stem != '*' else stem}.*.partial{glob.escape(suffix) if suffix != '*' else suffix}"
    )
    for partial in Path(folder).glob(pattern):
        pid = partial.name.rpartition(".partial")[0].rpartition(".")[2]
        if pid.isdigit() and not process_alive(int(pid)):
            partial.unlink(missing_ok=True)


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


@contextlib.contextmanager
def written_atomically(path: Path, overwrite: bool = True) -> Iterator[Path]:
    """A temporary path beside ``path`` that becomes ``path`` when the block ends without error; a :class:`UsageError`
    names ``path`` if it exists (without ``overwrite``) or on an ``OSError`` (a full disk, a read-only folder)."""
    path = Path(path)
    temporary = path.with_name(f".{path.stem}.{os.getpid()}.partial{path.suffix}")
    try:
        remove_stray_partials(path.parent, path.stem, path.suffix)
        yield temporary
        if overwrite:
            os.replace(temporary, path)
        else:
            try:
                os.link(temporary, path)  # never replaces a file
            except FileExistsError:
                raise
            except OSError:  # a file system without hard links
                if path.exists():
                    raise FileExistsError(path) from None
                os.replace(temporary, path)
    except FileExistsError:
        raise UsageError(f"{path} already exists; pass --overwrite to replace it, or choose another path") from None
    except Exception as err:  # an OSError, or a writer's own error while it handled one (torch.save's zip writer)
        cause = err
        while cause is not None and not isinstance(cause, OSError):
            cause = cause.__cause__ or cause.__context__
        if cause is None:
            raise
        raise UsageError(f"cannot write {path}: {cause.strerror or type(cause).__name__}") from None
    finally:
        temporary.unlink(missing_ok=True)


def check_output_file(path: Path, option: str, overwrite: bool) -> None:
    """Raise :class:`UsageError` naming ``option`` unless ``path`` is free (or ``overwrite``) and writable."""
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"{option} {path} is a folder; give a file path")
    if path.exists() and not overwrite:
        raise UsageError(f"{option} {path} already exists; pass --overwrite to replace it, or choose another")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"{option} {path}: its folder cannot be created ({err.strerror})") from None
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {path}: its folder {path.parent} is not writable")


@contextlib.contextmanager
def claimed_folder(folder: Path, option: str) -> Iterator[Path]:
    """``folder`` (created if needed) as this run's alone for the block, by an OS lock that ends with the process; a
    :class:`UsageError` names ``option`` if it cannot be written or is in use. Stray partial files are removed."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{option} {folder} is a file, not a folder; choose another {option}")
    lock = folder / LOCK_FILE
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle = open(lock, "a+")
    except OSError as err:
        raise UsageError(f"{option} {folder} cannot be written ({err.strerror}); choose another {option}") from None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if not os.path.samestat(os.fstat(handle.fileno()), os.stat(lock)):  # its holder removed it meanwhile
                raise BlockingIOError
        except (BlockingIOError, FileNotFoundError):
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise UsageError(f"{option} {folder} is in use by another run ({holder}); wait for it to end or choose "
                             f"another {option}") from None  # fmt: skip
        handle.seek(0)
        handle.truncate()
        handle.write(f"process {os.getpid()}")
        handle.flush()
        remove_stray_partials(folder)
        try:
            yield folder
        finally:
            lock.unlink(missing_ok=True)  # while still held: a run that opened it meanwhile sees it gone


def clear_folder(folder: Path) -> None:
    """Remove everything in a folder this run claimed (:func:`claimed_folder`) but its lock."""
    for entry in Path(folder).iterdir():
        if entry.name != LOCK_FILE:
            shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically."""
    with written_atomically(path) as temporary:
        temporary.write_text(text)


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` as JSON (non-finite floats as null) to ``path`` atomically."""
    write_text(path, json.dumps(finite(data), indent=1) + "\n")


def save_image(pixels: Tensor, path: Path, overwrite: bool = True) -> None:
    """Write a tensor ``[H, W, C]`` of values in [0, 1] as an 8-bit PNG (one channel as grayscale), atomically."""
    import numpy as np
    from PIL import Image

    array = np.rint(pixels.detach().cpu().clamp(0, 1).numpy() * 255).astype(np.uint8)
    with written_atomically(path, overwrite) as temporary:
        Image.fromarray(array[..., 0] if array.shape[2] == 1 else array).save(temporary, format="PNG")


def write_torch(path: Path, data: Any) -> None:
    """``torch.save`` ``data`` to ``path`` atomically."""
    import torch

    with written_atomically(path) as temporary, open(temporary, "wb") as file:
        torch.save(data, file)


def new_figure(nrows: int = 1, ncols: int = 1, figsize: Optional[tuple[float, float]] = None, **kwargs: Any) -> Any:
    """A matplotlib figure and its axes, laid out tightly, made without pyplot (a caller's backend and plots stay)."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=figsize, layout="tight")
    return figure, figure.subplots(nrows, ncols, **kwargs)


def save_figure(fig: Any, path: Path, **kwargs: Any) -> None:
    """``fig.savefig(path, **kwargs)`` atomically."""
    with written_atomically(path) as temporary:
        fig.savefig(temporary, **kwargs)
