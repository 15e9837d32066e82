"""Paths as users type them: ``~`` expanded in every form, empty values refused, broken links named before any
work, and no run replaces its own input."""

import sys
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest

from rff_field.bench.image import list_images
from rff_field.cli import image, sdf
from rff_field.cli.common import check_no_dash_paths, expand_home
from rff_field.common.outputs import check_writable_folder
from rff_field.core.errors import UsageError

TINY_FIT = ["--iters", "2", "--hidden-features", "8", "--no-lpips", "--no-progress", "--device", "cpu"]


def run(entrypoint, args, monkeypatch, capsys) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", ["prog", *map(str, args)])
    with pytest.raises(SystemExit) as info:
        entrypoint([str(arg) for arg in args])
        sys.exit(0)
    return int(info.value.code or 0), capsys.readouterr().err


def small_png(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    iio.imwrite(path, (np.arange(12 * 8 * 3).reshape(8, 12, 3) % 251).astype(np.uint8))
    return path


def test_a_leading_tilde_is_expanded_where_the_shell_leaves_it(monkeypatch):
    monkeypatch.setenv("HOME", "/home/user")
    assert expand_home(["--out=~/x", "~/y", "~", "--out", "a~b", "--name=x~", "-~"]) == [
        "--out=/home/user/x", "/home/user/y", "/home/user", "--out", "a~b", "--name=x~", "-~"
    ]  # fmt: skip


def test_an_image_fit_with_out_tilde_writes_into_the_home_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    args = ["fit", "--image", small_png(tmp_path / "a.png"), "--out=~/fit", *TINY_FIT]
    assert run(image.entrypoint, args, monkeypatch, capsys)[0] == 0
    assert (tmp_path / "home" / "fit" / "metrics.json").is_file() and not (tmp_path / "~").exists()


@pytest.mark.parametrize(
    "entrypoint, args",
    [
        (image.entrypoint, ["fit", "--out", ""]),
        (image.entrypoint, ["fit", "--out="]),
        (sdf.entrypoint, ["fit", "--out", ""]),
    ],
)
def test_an_empty_value_is_refused_before_any_work(entrypoint, args, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, err = run(entrypoint, args, monkeypatch, capsys)
    assert code == 2 and "--out was given an empty value (an unset shell variable?)" in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_a_file_named_like_an_option_gets_the_way_to_write_it(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    small_png(tmp_path / "-lead.png")
    code, err = run(image.entrypoint, ["fit", "--image", "-lead.png", "--out", "o"], monkeypatch, capsys)
    assert code == 2 and "write --image=-lead.png or --image ./-lead.png" in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()
    check_no_dash_paths(["--image=-lead.png", "--lr", "-1", "--out", "./-lead.png"])  # written so, or no such file


def test_a_broken_link_as_out_is_named_before_training(tmp_path, monkeypatch, capsys):
    (tmp_path / "link").symlink_to(tmp_path / "gone")
    with pytest.raises(UsageError, match="link is a link to .*gone, which does not exist"):
        check_writable_folder(tmp_path / "link" / "fit", "--out")
    args = ["fit", "--image", small_png(tmp_path / "a.png"), "--out", tmp_path / "link", *TINY_FIT]
    code, err = run(image.entrypoint, args, monkeypatch, capsys)
    assert code == 2 and "which does not exist; create that folder or choose another" in err
    assert not (tmp_path / "gone").exists()


def test_a_fit_does_not_replace_its_own_input(tmp_path, monkeypatch, capsys):
    picture = small_png(tmp_path / "run" / "reconstruction.png")
    before = picture.read_bytes()
    code, err = run(image.entrypoint, ["fit", "--image", picture, "--out", picture.parent, "--overwrite", *TINY_FIT],
                    monkeypatch, capsys)  # fmt: skip
    assert code == 2 and "so the run would replace its own input" in err and picture.read_bytes() == before

    import open3d as o3d

    from rff_field.sdf.data import sphere_mesh

    mesh = tmp_path / "shape" / "mesh.ply"
    mesh.parent.mkdir()
    o3d.io.write_triangle_mesh(str(mesh), sphere_mesh(0.3, 2))
    code, err = run(sdf.entrypoint, ["fit", "--mesh", mesh, "--out", mesh.parent, "--overwrite", "--iters", "1"],
                    monkeypatch, capsys)  # fmt: skip
    assert code == 2 and f"--mesh {mesh} is a file this run writes" in err and mesh.is_file()


def test_a_benchmark_folder_skips_hidden_files_and_names_broken_links(tmp_path):
    folder = tmp_path / "images"
    small_png(folder / "a.png")
    small_png(folder / ".b.png")
    (folder / "._a.png").write_bytes(b"\0\5\26\7Mac OS X")  # macOS's AppleDouble companion of a.png
    assert [path.name for path in list_images(folder, ())] == ["a.png"]
    (folder / "c.png").symlink_to(tmp_path / "gone.png")
    with pytest.raises(UsageError, match="c.png in --images is a link to .*gone.png, which does not exist"):
        list_images(folder, ())
    nested = tmp_path / "nested"
    small_png(nested / "inner" / "a.png")
    with pytest.raises(UsageError, match=r"no PNG/JPEG images in .*nested \(subfolders are not searched\)"):
        list_images(nested, ())
