"""``rff-sdf`` end to end (fit, mesh, bench on small settings) and its answers to bad input."""

import json

import numpy as np
import pytest
import torch
import trimesh

from rff_field.cli.sdf import entrypoint
from rff_field.sdf.data import ShapeSampler
from rff_field.sdf.fit import SDFTask
from tests import exit_status

SMALL = ["--points-per-step", "1000", "--hidden-features", "32", "--hidden-layers", "1", "--resolution", "32",
         "--embedding.num-frequencies", "64",
         "--device", "cpu", "--no-progress"]  # fmt: skip


def run(args, capsys) -> tuple[int, str]:
    """Exit status and stderr of ``rff-sdf ARGS``."""
    return exit_status(entrypoint, args), capsys.readouterr().err


@pytest.fixture(scope="module")
def ellipsoid(tmp_path_factory):
    """A closed mesh far from BACON's unit box, in units of its own."""
    path = tmp_path_factory.mktemp("shapes") / "ellipsoid.ply"
    trimesh.creation.icosphere(3).apply_scale([30, 20, 10]).apply_translation([100, -50, 7]).export(path)
    return path


@pytest.fixture(scope="module")
def fitted(ellipsoid, tmp_path_factory):
    out = tmp_path_factory.mktemp("fits") / "ellipsoid"
    entrypoint(["fit", "--mesh", str(ellipsoid), "--output-dir", str(out), "--steps", "300", *SMALL])
    return out


@pytest.mark.numerics
def test_fit_meshes_the_shape_where_the_input_mesh_is(fitted, ellipsoid):
    truth = trimesh.load(ellipsoid)
    for mesh in ("mesh.ply", "mesh-24.ply"):
        if mesh == "mesh-24.ply":
            entrypoint(["mesh", "--fit", str(fitted), "--resolution", "24", "--no-progress"])
        bounds = trimesh.load(fitted / mesh).bounds
        np.testing.assert_allclose(bounds, truth.bounds, atol=0.03 * truth.extents.max())
    metrics = json.loads((fitted / "metrics.json").read_text())
    # the last step may sit on a loss spike (rounding decides: 0.67 to 0.99 seen), so a loose F-score
    assert metrics["steps"] == 300 and metrics["chamfer"] < 1e-4 and metrics["f_score"] > 0.5
    assert (fitted / "render.png").is_file() and not (fitted / "checkpoint.pt").exists()


def test_a_diverged_fit_stops_and_is_not_meshed(tmp_path, capsys):
    out = tmp_path / "fit"
    code, err = run(["fit", "--output-dir", out, "--steps", "20", "--log-every", "5", "--lr", "1e30", *SMALL], capsys)
    assert code == 3 and "diverged" in err and len(err.strip().splitlines()) == 1
    assert json.loads((out / "metrics.json").read_text())["diverged"] and not (out / "mesh.ply").exists()
    code, err = run(["mesh", "--fit", out], capsys)
    assert code == 2 and "diverged" in err and len(err.strip().splitlines()) == 1
    assert not list(out.glob("mesh*"))


def test_bench_runs_each_variant_on_each_shape(tmp_path, capsys):
    variants = ["mlp-pe", "small-bacon:bacon,hidden_layers=2"]  # BACON: the loss averages its outputs
    code, _ = run(["bench", "--output-dir", tmp_path, "--variants", *variants, "--steps", "10", *SMALL], capsys)
    rows = json.loads((tmp_path / "results.json").read_text())
    assert code == 0 and [row["variant"] for row in rows] == ["mlp-pe", "small-bacon"]
    assert all(row["input"] == "generated" and row["steps"] == 10 and "chamfer" in row for row in rows)
    assert rows[1]["network"]["hidden_layers"] == 2 and "small-bacon" in (tmp_path / "results.md").read_text()


def test_a_stopped_fit_goes_on_to_the_uninterrupted_result(tmp_path, capsys, caplog):
    args = ["--steps", "40", "--log-every", "10", "--resolution", "16", *SMALL]
    run(["fit", "--output-dir", tmp_path / "whole", *args], capsys)
    run(["fit", "--output-dir", tmp_path / "parts", "--time-budget", "1e-9", *args], capsys)  # stops at the first check
    assert json.loads((tmp_path / "parts" / "metrics.json").read_text())["stopped"]
    assert run(["mesh", "--fit", tmp_path / "parts"], capsys)[0] == 2  # not finished: nothing to mesh
    code, _ = run(["fit", "--output-dir", tmp_path / "parts", *args], capsys)
    whole, parts = (json.loads((tmp_path / name / "metrics.json").read_text()) for name in ("whole", "parts"))
    assert code == 0 and "resuming at step 10" in caplog.text and parts["resumed_at"] == [10]
    assert parts["loss_history"] == whole["loss_history"] and parts["chamfer"] == whole["chamfer"]


def test_the_task_resumes_the_same_samples():
    sampler = ShapeSampler(trimesh.creation.icosphere(2, radius=0.3), seed=1)
    task, model = SDFTask(sampler, 100, torch.device("cpu")), torch.nn.Linear(3, 1)
    task.loss(model, 0)
    state = task.state_dict()
    expected = task.loss(model, 1)
    resumed = SDFTask(ShapeSampler(sampler.mesh, seed=2), 100, torch.device("cpu"))
    resumed.load_state_dict(state)
    assert resumed.loss(model, 1).equal(expected)


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bad")
    (folder / "notes.txt").write_text("not a mesh")
    (folder / "garbage.ply").write_bytes(b"ply\nformat ascii 1.0\nnonsense\n")
    trimesh.PointCloud(np.random.default_rng(0).random((20, 3))).export(folder / "points.ply")
    sphere = trimesh.creation.icosphere(2)
    trimesh.Trimesh(sphere.vertices, sphere.faces[1:]).export(folder / "open.ply")
    vertices = sphere.vertices.copy()
    vertices[5] = np.nan
    trimesh.Trimesh(vertices, sphere.faces, process=False).export(folder / "nan.ply")
    faces = sphere.faces.copy()
    faces[0, 2] = faces[0, 1]
    trimesh.Trimesh(sphere.vertices, faces, process=False).export(folder / "degenerate.ply")
    (folder / "empty").mkdir()
    (folder / "taken.ply").write_text("a user's file")
    return folder


BAD_INPUT = [
    (["fit", "--mesh", "BAD/missing.ply"], "missing.ply"),
    (["fit", "--mesh", "BAD/notes.txt"], "notes.txt"),
    (["fit", "--mesh", "BAD/garbage.ply"], "garbage.ply"),
    (["fit", "--mesh", "BAD/points.ply"], "points.ply"),
    (["fit", "--mesh", "BAD/open.ply"], "--fill-holes"),
    (["fit", "--mesh", "BAD/nan.ply", "--fill-holes"], "nan.ply has non-finite vertex"),  # not dropped and filled
    (["fit", "--mesh", "BAD/degenerate.ply", "--fill-holes"], "degenerate.ply has 1 degenerate"),
    (["fit", "--output-dir", "BAD/taken.ply"], "--output-dir"),  # a file
    (["fit", "--points-per-step", str(10**13)], "--points-per-step"),
    (["fit", "--steps", "0"], "--steps"),
    (["fit", "--resolution", "4"], "--resolution"),
    (["fit", "--points-per-step", "1"], "--points-per-step"),
    (["fit", "--lr", "1e-5"], "--lr-final"),
    (["fit", "--hidden-features", "0"], "--hidden-features"),
    (["fit", "--embedding.filter-layers", "0"], "--embedding.filter-layers"),
    (["fit", "--embedding.num-frequencies", "0"], "--embedding.num-frequencies"),
    (["fit", "--line-search.lr-max", "-1"], "--line-search.lr-max"),
    (["fit", "--method", "sape"], "--method"),
    (["fit", "--method", "filtered-pe"], "--method"),
    (["fit", "--pe-bands", "loglinear"], "--pe-bands"),
    (["fit", "--output-dir", "FIT"], "--overwrite"),
    (["fit", "--output-dir", "FIT", "--overwrite", "--mesh", "BAD/open.ply"], "--fill-holes"),  # FIT is kept
    (["mesh", "--fit", "BAD/empty"], "empty"),
    (["mesh", "--fit", "FIT", "--resolution", "4"], "--resolution"),
    (["mesh", "--fit", "FIT", "--resolution", "3000"], "the largest that fits is"),  # about 400 GiB
    (["mesh", "--fit", "FIT", "--output-path", "BAD/taken.ply"], "--overwrite"),
    (["mesh", "--fit", "FIT", "--output-path", "BAD/mesh.txt"], "--output-path"),
    (["bench", "--variants", "nope"], "nope"),
    (["bench", "--variants", "sape"], "sape"),
    (["bench", "--variants", "mlp-pe,hidden_features=0"], "--hidden-features"),
    (["bench", "--meshes", "BAD/open.ply"], "--fill-holes"),
    (["bench", "--shard", "3/2"], "--shard"),
]


@pytest.mark.parametrize("args, named", BAD_INPUT, ids=[" ".join(args) for args, _ in BAD_INPUT])
def test_bad_input_is_refused_in_one_line_naming_it(args, named, bad_files, fitted, tmp_path, capsys):
    args = [arg.replace("BAD", str(bad_files)).replace("FIT", str(fitted)) for arg in args]
    if args[0] != "mesh" and "--output-dir" not in args:
        args += ["--output-dir", tmp_path / "out"]
    before = sorted(path.name for path in fitted.iterdir())
    code, err = run(args, capsys)
    assert code == 2 and named in err, err
    assert sorted(path.name for path in fitted.iterdir()) == before and not (tmp_path / "out").exists()
