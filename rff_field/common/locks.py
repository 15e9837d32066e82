"""Folders held by one process at a time: a second fit on the same ``--out``, or a second benchmark process on the
same job, finds it taken at once instead of reading the other's checkpoint and writing over its files.

Locks are ``flock`` locks on a file descriptor, so the system drops them when a process ends, killed or not; where
``fcntl`` does not exist (Windows), nothing is locked.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator, Optional

from rff_field.core.errors import UsageError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


def try_lock(path: Path) -> Optional[int]:
    """An open descriptor of ``path`` (a folder, or a file created empty if missing) holding an exclusive lock on it,
    or None when another process holds it. Pass the descriptor to :func:`release`."""
    path = Path(path)
    while True:
        if not path.is_dir():
            path.parent.mkdir(parents=True, exist_ok=True)
        try:
            descriptor = os.open(path, os.O_RDONLY if path.is_dir() else os.O_RDONLY | os.O_CREAT, 0o644)
        except FileNotFoundError:  # its folder was removed by a process releasing the last lock in it
            continue
        if fcntl is None:
            return descriptor
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            return None
        if path.is_dir() or _is_file_at(descriptor, path):
            return descriptor
        os.close(descriptor)  # its holder removed the file after this process opened it: lock the one there now


def _is_file_at(descriptor: int, path: Path) -> bool:
    try:
        there = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(descriptor)
    return (there.st_dev, there.st_ino) == (held.st_dev, held.st_ino)


def release(descriptor: int, remove: Optional[Path] = None) -> None:
    """Give up a lock of :func:`try_lock`; ``remove``: its file, removed first (while it is still held, so that no
    other process holds a lock on a file no longer there)."""
    if remove is not None and fcntl is not None:
        Path(remove).unlink(missing_ok=True)
    os.close(descriptor)


@contextlib.contextmanager
def exclusive_folder(folder: Path, command: str) -> Iterator[Path]:
    """Hold ``folder`` (created if missing) while the block runs; raise :class:`UsageError` at once when another
    process holds it. A folder created here and still empty at the end (the work stopped before writing) is
    removed."""
    folder = Path(folder)
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    descriptor = try_lock(folder)
    if descriptor is None:
        raise UsageError(f"{folder} is in use by another {command}; wait for it to finish or choose another --out")
    try:
        yield folder
    finally:
        if created and not any(folder.iterdir()):
            folder.rmdir()
        release(descriptor)
