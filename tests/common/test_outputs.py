"""Output files and folders: atomic writes that never replace a file unasked, write errors as one line naming the
path, stray partial files removed, one run at a time in an output folder (an OS lock released however it ends)."""

import errno
import os
import signal
import subprocess
import sys
import time

import pytest

from rff_field.common.outputs import LOCK_FILE, check_output_file, claimed_folder, write_text, written_atomically
from rff_field.core.errors import UsageError
from tests import REPO


def test_a_file_is_replaced_only_when_asked_and_a_write_error_names_the_path(tmp_path):
    path = tmp_path / "result.txt"
    write_text(path, "first")
    with pytest.raises(UsageError, match="already exists"):
        with written_atomically(path, overwrite=False) as temporary:
            temporary.write_text("second")
    assert path.read_text() == "first" and [p.name for p in tmp_path.iterdir()] == ["result.txt"]
    with pytest.raises(UsageError, match=f"cannot write {path}: No space left on device") as error:
        with written_atomically(path) as temporary:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # as a full disk answers a write
    assert "\n" not in str(error.value) and path.read_text() == "first"


def test_partial_files_of_dead_processes_are_removed_and_those_of_live_ones_kept(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stray, live = tmp_path / f".result.{int(dead.stdout)}.partial.txt", tmp_path / f".result.{os.getppid()}.partial.txt"
    stray.write_text("half")
    live.write_text("being written")
    write_text(tmp_path / "result.txt", "whole")
    assert not stray.exists() and live.exists()


@pytest.mark.parametrize("where", ["a file", "under a file"])
def test_an_output_folder_that_is_a_file_or_under_one_is_refused_naming_the_option(where, tmp_path):
    (tmp_path / "file").write_text("a user's file")
    folder = tmp_path / "file" / ("sub" if where == "under a file" else "")
    with pytest.raises(UsageError, match="--output-dir"):
        with claimed_folder(folder, "--output-dir"):
            pass
    with pytest.raises(UsageError, match="--output-path"):
        check_output_file(folder / "mesh.ply", "--output-path", overwrite=True)
    assert (tmp_path / "file").read_text() == "a user's file"


def test_a_second_run_into_a_claimed_folder_is_refused_and_the_claim_ends_with_its_process(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from rff_field.common.outputs import claimed_folder\n"
         "with claimed_folder(sys.argv[1], '--output-dir'):\n    print('held', flush=True); time.sleep(600)", tmp_path],
        cwd=REPO, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(
            UsageError, match=f"--output-dir {tmp_path} is in use by another run \\(process {holder.pid}\\)"
        ):
            with claimed_folder(tmp_path, "--output-dir"):
                pass
    finally:
        holder.send_signal(signal.SIGKILL)  # no cleanup of its own: the system releases the lock
        holder.wait()
    with claimed_folder(tmp_path, "--output-dir"):
        assert (tmp_path / LOCK_FILE).exists()
    assert not (tmp_path / LOCK_FILE).exists()


def test_the_claim_holds_within_one_process(tmp_path):
    start = time.monotonic()
    with claimed_folder(tmp_path, "--output-dir"), pytest.raises(UsageError, match="in use"):
        with claimed_folder(tmp_path, "--output-dir"):
            pass
    assert time.monotonic() - start < 5  # refused at once, not waited for


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_a_full_disk_under_torch_save_is_one_line_naming_the_file(tmp_path):
    import torch

    with pytest.raises(UsageError, match=f"cannot write {tmp_path / 'model.pt'}: No space left on device"):
        with written_atomically(tmp_path / "model.pt"), open("/dev/full", "wb") as full:
            torch.save(torch.zeros(1000), full)  # its zip writer raises a RuntimeError while handling the OSError
    assert not list(tmp_path.iterdir())
