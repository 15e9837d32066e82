"""Bad input to rff-image: the exit status, and a message that names the option or file (before any fit)."""

import numpy as np
import pytest
from PIL import Image

from rff_field.cli.image import entrypoint


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A folder with an image, a finished fit (``fit``) and a file that is no image."""
    root = tmp_path_factory.mktemp("rff-image")
    (root / "images").mkdir()
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (12, 12, 3), dtype=np.uint8)).save(root / "images/a.png")
    (root / "not-an-image.png").write_text("no pixels here")
    entrypoint(["fit", "--image", str(root / "images/a.png"), "--out", str(root / "fit"), "--iters", "1",
                "--no-progress", "--lpips", "False", "--hidden-features", "8"])  # fmt: skip
    return root


FIT = [
    "fit",
    "--image",
    "{root}/images/a.png",
    "--out",
    "{root}/new",
    "--iters",
    "2",
    "--no-progress",
    "--lpips",
    "False",
]
BENCH = [
    "bench",
    "--images",
    "{root}/images",
    "--out",
    "{root}/bench",
    "--iters",
    "1",
    "--no-progress",
    "--lpips",
    "False",
]
CASES = [
    (["fit", "--image", "{root}/missing.png"], 2, "missing.png"),
    (["fit", "--image", "{root}/not-an-image.png"], 2, "not-an-image.png"),
    ([*FIT, "--iters", "0"], 2, "--iters"),
    ([*FIT, "--downsample", "0"], 2, "--downsample"),
    ([*FIT, "--downsample", "8"], 2, "--downsample"),
    ([*FIT, "--batch-size", "0"], 2, "--batch-size"),
    ([*FIT, "--lr", "1e-3", "--lr-final", "1"], 2, "--lr-final"),
    ([*FIT, "--line-search.lr-max", "-1"], 2, "--line-search.lr-max"),
    ([*FIT, "--embedding.num-frequencies", "0"], 2, "--embedding.num-frequencies"),
    ([*FIT, "--method", "nope"], 2, "--method"),
    ([*FIT, "--device", "gpu"], 2, "--device"),
    ([*FIT, "--out", "{root}/fit"], 2, "--out"),
    ([*FIT, "--lr", "1e30", "--log-every", "1", "--out", "{root}/diverged"], 3, "--lr"),
    (["render", "--fit", "{root}/nowhere"], 2, "nowhere"),
    (["render", "--fit", "{root}/fit", "--scale", "0"], 2, "--scale"),
    (["render", "--fit", "{root}/fit", "--scale", "1e5"], 2, "--scale"),
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
