"""Bad input to rff-image: the exit status, and a message that names the option or file (before any fit)."""

import errno
import os
import shutil

import numpy as np
import pytest
import torch
from PIL import Image

from rff_field.cli.image import entrypoint
from rff_field.common.outputs import claimed_folder
from tests import exit_status


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A folder with an image, a finished fit (``fit``) and a file that is no image."""
    root = tmp_path_factory.mktemp("rff-image")
    (root / "images").mkdir()
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (12, 12, 3), dtype=np.uint8)).save(root / "images/a.png")
    (root / "not-an-image.png").write_text("no pixels here")
    Image.fromarray(np.full((12, 12), np.nan, np.float32)).save(root / "nan.tif")
    entrypoint(["fit", "--image", str(root / "images/a.png"), "--output-dir", str(root / "fit"), "--passes", "1",
                "--no-progress", "--lpips", "False", "--hidden-features", "8"])  # fmt: skip
    return root


FIT = [
    "fit",
    "--image",
    "{root}/images/a.png",
    "--output-dir",
    "{root}/new",
    "--passes",
    "2",
    "--no-progress",
    "--lpips",
    "False",
]
BENCH = [
    "bench",
    "--images",
    "{root}/images",
    "--output-dir",
    "{root}/bench",
    "--passes",
    "1",
    "--no-progress",
    "--lpips",
    "False",
]
CASES = [
    (["fit", "--image", "{root}/missing.png"], 2, "missing.png"),
    (["fit", "--image", "{root}/not-an-image.png"], 2, "not-an-image.png"),
    ([*FIT, "--passes", "0"], 2, "--passes"),
    ([*FIT, "--resolution-scale", "0"], 2, "--resolution-scale"),
    ([*FIT, "--resolution-scale", "0.3"], 2, "--resolution-scale"),  # not 1/k
    ([*FIT, "--resolution-scale", "0.125"], 2, "--resolution-scale"),  # under 3 pixels a side
    ([*FIT, "--batch-size", "0"], 2, "--batch-size"),
    ([*FIT, "--lr", "1e-3", "--lr-final", "1"], 2, "--lr-final"),
    ([*FIT, "--line-search.lr-max", "-1"], 2, "--line-search.lr-max"),
    ([*FIT, "--embedding.num-frequencies", "0"], 2, "--embedding.num-frequencies"),
    ([*FIT, "--method", "nope"], 2, "--method"),
    ([*FIT, "--device", "gpu"], 2, "--device"),
    ([*FIT, "--output-dir", "{root}/fit"], 2, "--output-dir"),
    (
        ["fit", "--image", "{root}/nan.tif", "--output-dir", "{root}/new"],
        2,
        "nan.tif",
    ),  # a data error, not a divergence
    (
        [*FIT, "--passes", "1000000", "--output-dir", "{root}/not-an-image.png"],
        2,
        "--output-dir",
    ),  # refused before training
    ([*FIT, "--passes", "1000000", "--output-dir", "{root}/not-an-image.png/fit"], 2, "--output-dir"),
    ([*FIT, "--passes", str(10**15)], 2, "--passes"),  # its record of the steps would not fit in memory
    (["render", "--fit", "{root}/fit", "--output-path", "{root}/images"], 2, "--output-path"),  # a folder
    ([*FIT, "--lr", "1e30", "--log-every", "1", "--output-dir", "{root}/diverged"], 3, "--lr"),
    (["render", "--fit", "{root}/nowhere"], 2, "nowhere"),
    (["render", "--fit", "{root}/fit", "--resolution-scale", "0"], 2, "--resolution-scale"),
    (["render", "--fit", "{root}/fit", "--resolution-scale", "1e5"], 2, "--resolution-scale"),
    (["render", "--fit", "{root}/fit", "--output-path", "{root}/render.jpg"], 2, "--output-path"),
    (["bench", "--images", "{root}/missing"], 2, "--images"),
    ([*BENCH, "--names", "b"], 2, "--images"),
    ([*BENCH, "--variants", "nope"], 2, "nope"),
    ([*BENCH, "--variants", "mlp-pe,zzz=1"], 2, "zzz"),
    ([*BENCH, "--variants", "mlp-pe,iters"], 2, "iters"),
    ([*BENCH, "--variants", "mlp-pe,line_search.enabled=maybe"], 2, "line_search.enabled"),
    ([*BENCH, "--variants", "mlp-pe,hidden_features=-8"], 2, "--hidden-features"),
    ([*BENCH, "--variants", "x:mlp-pe", "x:siren"], 2, "--variants"),
    ([*BENCH, "--shard", "3/2"], 2, "--shard"),
]


@pytest.mark.parametrize("args, status, named", CASES, ids=[" ".join(case[0][:1] + case[0][-2:]) for case in CASES])
def test_bad_input(args, status, named, folder, capsys):
    with pytest.raises(SystemExit) as exit:
        entrypoint([arg.format(root=folder) for arg in args])
    assert exit.value.code == status
    assert named in capsys.readouterr().err
    assert not (folder / "bench").exists() or status != 2


def test_a_finished_fit_is_not_replaced_unasked_whatever_state_its_metrics_are_in(folder, tmp_path, capsys):
    out = tmp_path / "fit"
    shutil.copytree(folder / "fit", out)
    (out / "metrics.json").write_text('{"method": "filtered-pe", "psnr"')  # damaged, e.g. by a full disk
    weights = (out / "model.pt").read_bytes()
    args = [arg.format(root=folder) for arg in FIT[:3]] + ["--output-dir", str(out), *FIT[5:]]
    assert exit_status(entrypoint, args) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "metrics.json" in error[0] and (out / "model.pt").read_bytes() == weights
    assert exit_status(entrypoint, [*args, "--overwrite"]) == 0


def test_a_second_fit_into_the_folder_of_a_running_one_is_refused(folder, tmp_path, capsys):
    args = [arg.format(root=folder) for arg in FIT[:3]] + ["--output-dir", str(tmp_path), *FIT[5:]]
    with claimed_folder(tmp_path, "--output-dir"):  # as a fit running in another process holds it
        assert exit_status(entrypoint, args) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert (
        len(error) == 1
        and "--output-dir" in error[0]
        and "in use" in error[0]
        and not (tmp_path / "metrics.json").exists()
    )
    assert exit_status(entrypoint, args) == 0


def test_an_error_while_writing_ends_in_one_line_naming_the_file(folder, tmp_path, capsys, monkeypatch):
    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(torch, "save", disk_full)
    args = [arg.format(root=folder) for arg in FIT[:3]] + ["--output-dir", str(tmp_path / "fit"), *FIT[5:]]
    assert exit_status(entrypoint, args) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "checkpoint.pt" in error[0] and "No space left" in error[0]
