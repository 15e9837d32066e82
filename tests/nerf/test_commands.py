"""The NeRF commands in-process: rff-scene writes what ns-train reads, rff-nerf-bench runs a resumable grid, and bad
input to rff-scene, rff-export-mesh, rff-demo and rff-nerf-bench stops with status 2 and one line naming it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rff_field.cli import demo, export_mesh, nerf_bench, scene
from rff_field.cli.nerf_bench import MIN_EVAL_SIDE
from rff_field.nerf.synthetic_scene import SCENES, SceneSpec, cast_rays, orbit_pose, render_view, write_blender_scene
from tests import exit_status


def run(entrypoint, args, capsys) -> tuple[int, str]:
    """The exit status and stderr of an in-process command."""
    return exit_status(entrypoint, args), capsys.readouterr().err


def test_rff_scene_writes_both_layouts_with_the_view_counts_of_rff_demo(tmp_path, capsys):
    args = ["--image-size", 8, "--supersample", 1]
    blender = ["blender", "--output-dir", tmp_path / "b", "--num-train-views", 3, "--num-test-views", 2, *args]
    run(scene.entrypoint, blender, capsys)
    assert len(json.loads((tmp_path / "b" / "transforms_train.json").read_text())["frames"]) == 3
    assert len(list((tmp_path / "b" / "test").glob("*.png"))) == 2
    run(scene.entrypoint, ["capture", "--output-dir", tmp_path / "c", "--num-views", 10, *args], capsys)
    assert len(json.loads((tmp_path / "c" / "transforms.json").read_text())["frames"]) == 10


def test_rff_scene_blender_kinds_are_different_objects_inside_the_parsers_scene_box():
    alphas = {kind: render_view(orbit_pose(15, 30), 32, supersample=1, objects=objects)[..., 3]
              for kind, objects in SCENES.items()}  # fmt: skip
    for kind, alpha in alphas.items():
        assert 0.02 < alpha.mean() < 0.9, kind
        assert all(np.abs(alpha - other).mean() > 0.02 for name, other in alphas.items() if name != kind), kind
    # rays leaving the box [-1.5, 1.5]^3 through its faces meet nothing: every object lies inside it
    grid = np.stack(np.meshgrid(*[np.linspace(-1.5, 1.5, 41)] * 2, indexing="ij"), -1).reshape(-1, 2)
    for axis in range(3):
        for side in (-1.5, 1.5):
            origins = np.insert(grid, axis, side, axis=1)
            dirs = np.zeros_like(origins)
            dirs[:, axis] = np.sign(side)
            for kind, objects in SCENES.items():
                assert not cast_rays(origins, dirs, objects)[1].any(), (kind, axis, side)


def test_rff_nerf_bench_trains_the_grid_once_skips_finished_variants_and_shards(tmp_path, capsys):
    scene = write_blender_scene(tmp_path / "scene", SceneSpec(MIN_EVAL_SIDE, 6, 2, 2, supersample=1))
    small = (
        "num_coarse_samples=8,num_importance_samples=8,base_mlp_num_layers=2,skip_connections=,base_mlp_layer_width=16"
    )
    variants = [f"off:rff-nerf-lite,embedding.filtered=false,{small}", f"on:rff-nerf-lite,{small}"]
    args = ["--data", scene, "--output-dir", tmp_path / "bench", "--steps", 2, "--resolution-scale", 1,
            "--device", "cpu", "--variants", *variants]  # fmt: skip
    assert run(nerf_bench.entrypoint, [*args, "--shard", "2/2"], capsys)[0] == 0
    runs = tmp_path / "bench" / "runs" / scene.name
    assert (runs / "on" / "metrics.json").is_file() and not (runs / "off").exists()
    first = (runs / "on" / "metrics.json").stat().st_mtime_ns
    assert run(nerf_bench.entrypoint, args, capsys)[0] == 0
    assert (runs / "on" / "metrics.json").stat().st_mtime_ns == first  # finished: skipped
    rows = json.loads((tmp_path / "bench" / "results.json").read_text())
    assert {row["variant"] for row in rows} == {"off", "on"}
    assert {row["filter_parameters"] > 0 for row in rows} == {True, False}
    size = f"{MIN_EVAL_SIDE}x{MIN_EVAL_SIDE}"
    assert {row["test_view_size"] for row in rows} == {size}
    table = (tmp_path / "bench" / "results.md").read_text()
    assert "| on |" in table and f"rendered at {size} pixels" in table


def touched(path):
    path.touch()
    return path


BAD_INPUT = [
    (scene.entrypoint, lambda t, s: ["blender", "--output-dir", s], "--output-dir"),  # a folder with files
    (scene.entrypoint, lambda t, s: ["blender", "--output-dir", t / "x", "--image-size", 4], "--image-size"),
    (scene.entrypoint, lambda t, s: ["blender", "--output-dir", t / "x", "--num-train-views", 0], "--num-train-views"),
    (scene.entrypoint, lambda t, s: ["capture", "--output-dir", t / "x", "--num-views", 5], "--num-views"),
    (scene.entrypoint, lambda t, s: ["capture", "--output-dir", t / "x", "--distance-min", 0], "--distance-min"),
    (export_mesh.entrypoint, lambda t, s: ["--load-config", t / "missing.yml"], "--load-config"),
    (export_mesh.entrypoint, lambda t, s: ["--load-config", s / "transforms_train.json"], "--load-config"),
    (export_mesh.entrypoint, lambda t, s: ["--load-config", t, "--threshold", 0], "--threshold"),
    (export_mesh.entrypoint, lambda t, s: ["--load-config", t, "--resolution", 2], "--resolution"),
    (export_mesh.entrypoint, lambda t, s: ["--load-config", t, "--output-path", t / "m.txt"], "--output-path"),
    (export_mesh.entrypoint, lambda t, s: ["--load-config", t, "--output-path", touched(t / "m.ply")], "--overwrite"),
    (export_mesh.entrypoint, lambda t, s: ["--load-config", t, "--bbox-min", 0, 0, 0], "--bbox-max"),
    (
        export_mesh.entrypoint,
        lambda t, s: ["--load-config", t, "--bbox-min", 1, 0, 0, "--bbox-max", 0, 1, 1],
        "--bbox-min",
    ),  # fmt: skip
    (export_mesh.entrypoint, lambda t, s: ["--load-config", t, "--min-component", 1], "--min-component"),
    (demo.entrypoint, lambda t, s: ["--output-dir", t, "--steps", 0], "--steps"),
    (demo.entrypoint, lambda t, s: ["--output-dir", t, "--threads", 0], "--threads"),
    (demo.entrypoint, lambda t, s: ["--output-dir", s], "--output-dir"),  # a folder rff-demo did not write
    (
        demo.entrypoint,
        lambda t, s: ["--output-dir", t / "d", "--embedding.num-frequencies", 0],
        "--embedding.num-frequencies",
    ),  # fmt: skip
    (nerf_bench.entrypoint, lambda t, s: ["--data", t / "missing"], "--data"),
    (
        nerf_bench.entrypoint,
        lambda t, s: ["--data", s, "--output-dir", t, "--resolution-scale", 1],
        "--resolution-scale",
    ),  # 16 px test views
    (nerf_bench.entrypoint, lambda t, s: ["--data", s, "--output-dir", t, "--shard", "3/2"], "--shard"),
    (
        nerf_bench.entrypoint,
        lambda t, s: ["--data", s, "--output-dir", t, "--variants", "vanilla-nerf"],
        "vanilla-nerf",
    ),
    (
        nerf_bench.entrypoint,
        lambda t, s: ["--data", s, "--output-dir", t, "--variants", "rff-nerf-lite,widht=3"],
        "widht",
    ),
    (
        nerf_bench.entrypoint,
        lambda t, s: [
            "--data",
            s,
            "--output-dir",
            t,
            "--resolution-scale",
            2,
            "--variants",
            "rff-nerf-lite,embedding.filter_layers=0",
        ],
        "filter-layers",
    ),  # fmt: skip
]


@pytest.mark.parametrize(
    "entrypoint, args, named", BAD_INPUT, ids=[f"{e.__module__.split('.')[-1]}-{n}" for e, _, n in BAD_INPUT]
)
def test_bad_input_stops_with_status_2_and_one_line_naming_it(entrypoint, args, named, scene, tmp_path, capsys):
    code, err = run(entrypoint, args(tmp_path, scene), capsys)
    assert code == 2
    assert named in err.strip().splitlines()[-1] and "Traceback" not in err
