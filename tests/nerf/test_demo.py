"""``rff-demo`` end to end on a tiny setting: scene, training, test-view metrics and renders, mesh, summary."""

from __future__ import annotations

import json

import open3d as o3d
import torch

from rff_field.cli.demo import MARKER, Demo, run


def _tiny(output_dir, **overrides) -> Demo:
    options = dict(
        output_dir=output_dir,
        steps=20,
        image_size=16,
        num_train_views=6,
        num_test_views=2,
        mesh_resolution=32,
        mesh_threshold=0.5,  # the density of a 20-step model is still low (about 0.4 to 0.56 here)
    )
    options.update(overrides)
    return Demo(**options)


def test_demo_end_to_end(tmp_path, capsys):
    out = tmp_path / "my demo"
    assert run(_tiny(out)) == 0
    printed = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 20 and summary["mesh_error"] is None
    for key in ("metrics", "renders", "mesh", "config"):
        assert key in printed or summary[key] in printed.replace("\n", "")
    metrics = json.loads((out / "eval" / "metrics.json").read_text())
    assert metrics["num_views"] == 2 and {"psnr", "ssim"} <= set(metrics["mean"])
    assert 5 < metrics["mean"]["psnr"] < 60
    renders = sorted(p.name for p in (out / "eval" / "renders").iterdir())
    assert renders == sorted(f"r_{i}_{kind}.png" for i in range(2) for kind in ("gt", "rgb", "depth"))
    mesh = o3d.io.read_triangle_mesh(summary["mesh"])
    assert len(mesh.triangles) > 0 and mesh.has_vertex_colors()
    assert (out / "scene" / "transforms_test.json").exists() and (out / MARKER).exists()
    assert f"ns-viewer --load-config '{summary['config']}'" in printed  # quoted to be pasted into a shell

    # a second run needs --overwrite
    assert run(_tiny(out, steps=1)) == 2
    assert "pass --overwrite" in capsys.readouterr().err


def test_overwrite_replaces_only_the_demo_results(tmp_path):
    out = tmp_path / "demo"
    (out / "runs" / "old").mkdir(parents=True)
    (out / "mesh.ply").write_text("old mesh")
    (out / MARKER).write_text("")
    (out / "notes.txt").write_text("mine")
    demo = _tiny(out, overwrite=True)
    demo.check()
    demo._prepare_output()
    assert sorted(p.name for p in out.iterdir()) == sorted([MARKER, "notes.txt"])


def test_demo_never_touches_a_foreign_folder(tmp_path, capsys):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("precious")
    assert run(_tiny(tmp_path / "mine", overwrite=True)) == 2
    assert "was not written by rff-demo" in capsys.readouterr().err
    assert (tmp_path / "mine" / "thesis.tex").read_text() == "precious"
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["thesis.tex"]
    assert run(_tiny(tmp_path / "x", steps=0)) == 2
    assert "--steps must be at least 1" in capsys.readouterr().err


def test_demo_options_that_cannot_work_fail_before_the_scene(tmp_path, capsys, monkeypatch):
    for threshold in (float("nan"), -1.0):
        assert run(_tiny(tmp_path / "x", mesh_threshold=threshold)) == 2
        assert "--mesh-threshold must be" in capsys.readouterr().err
    for seed in (-1, 2**32):
        assert run(_tiny(tmp_path / "x", seed=seed)) == 2
        assert f"--seed must be between 0 and 2**32 - 1 (numpy's seeds), got {seed}" in capsys.readouterr().err
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert run(_tiny(tmp_path / "x", device="cuda")) == 2
    assert "CUDA is not available" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
    (tmp_path / "file").write_text("")
    assert run(_tiny(tmp_path / "file" / "demo")) == 2
    assert "cannot be created" in capsys.readouterr().err
