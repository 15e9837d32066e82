"""Output files are written whole or not at all, and a full disk gives one line, before the work where it can."""

import errno
import shutil

import pytest
import torch

from rff_field.cli.common import call_main
from rff_field.common import outputs
from rff_field.common.outputs import check_writable_folder, write_text, write_torch, written_atomically
from rff_field.core.errors import UsageError


def test_a_failed_write_leaves_the_old_file_and_no_partial_one(tmp_path):
    target = tmp_path / "results.md"
    write_text(target, "old")
    with pytest.raises(ValueError), written_atomically(target) as temporary:
        temporary.write_text("half")
        raise ValueError("the writer failed")
    assert target.read_text() == "old" and [path.name for path in tmp_path.iterdir()] == ["results.md"]
    write_text(target, "new")
    assert target.read_text() == "new" and len(list(tmp_path.iterdir())) == 1


def test_equal_tensors_give_equal_files_whatever_the_process(tmp_path, monkeypatch):
    weights = {"layer.weight": torch.arange(6.0).reshape(2, 3)}
    write_torch(tmp_path / "a.pt", weights)
    monkeypatch.setattr(outputs.os, "getpid", lambda: 12345)  # another process's temporary file name
    write_torch(tmp_path / "b.pt", weights)
    assert (tmp_path / "a.pt").read_bytes() == (tmp_path / "b.pt").read_bytes()
    assert torch.equal(torch.load(tmp_path / "b.pt", weights_only=True)["layer.weight"], weights["layer.weight"])


def test_a_write_failing_on_a_full_disk_is_reported_as_no_space(tmp_path, monkeypatch):
    full = shutil.disk_usage(tmp_path)._replace(free=1024)
    monkeypatch.setattr(outputs.shutil, "disk_usage", lambda path: full)
    with pytest.raises(OSError) as info, written_atomically(tmp_path / "model.pt") as temporary:
        torch.save({"w": torch.zeros(3)}, temporary)
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 64 vs 0")  # torch's words
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(tmp_path / "model.pt")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(UsageError, match=r"--out .* is on a full disk \(1 KiB free\); free some space"):
        check_writable_folder(tmp_path / "fit", "--out")


def test_no_space_left_is_one_line_and_status_1(capsys):
    class Command:
        def main(self):
            raise OSError(errno.ENOSPC, "No space left on device", "out/mesh.ply")

    assert call_main("rff-sdf", Command()) == (1, None)
    err = capsys.readouterr().err
    assert err == "rff-sdf: error: no space left on the device writing out/mesh.ply; free some and run the same " \
                  "command again (a fit goes on from its checkpoint)\n"  # fmt: skip

    class Other:
        def main(self):
            raise FileNotFoundError(errno.ENOENT, "No such file", "x")

    with pytest.raises(FileNotFoundError):  # other failures keep their traceback: they are bugs to report
        call_main("rff-sdf", Other())


def test_an_sdf_fit_resumes_beside_the_temporary_file_of_a_cut_write(tmp_path):
    from rff_field.sdf.run import check_out_dir

    (tmp_path / "checkpoint.pt").write_bytes(b"")
    (tmp_path / ".metrics.123.partial.json").write_text("{")  # left by a write that a kill cut short
    check_out_dir(tmp_path, overwrite=False)
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="is not empty"):
        check_out_dir(tmp_path, overwrite=False)
