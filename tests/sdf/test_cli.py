"""``rff-sdf fit``, ``bench`` and ``pool`` end to end with tiny settings, and their one-line errors."""

import json
import math
import sys

import numpy as np
import pytest
import torch

from rff_field.bench.sdf import FLOOR_LABEL, parse_method, results_table
from rff_field.cli import sdf as cli
from rff_field.core.errors import UsageError
from rff_field.sdf.fit import SDFNetworkConfig, SDFTrainConfig, build_sdf_network
from rff_field.sdf.run import prepare_out_dir

TINY = [
    "--hidden-features", "32", "--hidden-layers", "2", "--pe-frequencies", "6", "--rff-frequencies", "18",
    "--points-per-step", "400", "--resolution", "24", "--eval-samples", "2000", "--bacon-max-frequency", "32",
]  # fmt: skip


def run_cli(monkeypatch, capsys, *args):
    """Run the console script; returns (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["rff-sdf", *map(str, args)])
    code = 0
    try:
        cli.entrypoint()
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


def test_fit_writes_mesh_metrics_and_rendering(tmp_path):
    out = tmp_path / "fit"
    record = cli.main(["fit", "--out", str(out), "--method", "filtered-pe", "--iters", "60", *TINY])
    for name in ("mesh.ply", "metrics.json", "render.png", "history.npz", "config.json", "model.pt"):
        assert (out / name).is_file(), name
    metrics = json.loads((out / "metrics.json").read_text())
    for key in ("method", "mesh", "iters", "seconds_per_iter", "chamfer", "chamfer_l1", "normal_consistency",
                "f_score", "f_threshold", "num_samples", "parameters", "filter_parameters"):  # fmt: skip
        assert key in metrics, key
    assert metrics["method"] == "filtered-pe" and metrics["mesh"] == "generated" and metrics["iters"] == 60
    assert metrics["sampling"] == "fresh" and metrics["distance"] == "exact"
    assert metrics["seed"] == 0 and metrics["source"] == "generated bumpy sphere"
    assert set(metrics["normalization"]) == {"center", "scale", "offset"}
    assert record["chamfer"] == metrics["chamfer"]
    history = np.load(out / "history.npz")
    assert len(history["loss"]) == 60 and len(history["filter_lr"]) == 60
    assert metrics["final_loss"] == pytest.approx(float(history["loss"][-1]), rel=1e-6)
    assert metrics["final_loss_mean_last5pct"] == pytest.approx(float(history["loss"][-3:].mean()), rel=1e-6)
    # its weights give the same mesh again, and a finer one
    assert cli.main(["mesh", "--fit", str(out), "--resolution", "24", "--no-progress"]) == out / "mesh-24.ply"
    assert (out / "mesh-24.ply").read_bytes() == (out / "mesh.ply").read_bytes()
    finer = cli.main(["mesh", "--fit", str(out), "--resolution", "40", "--output-path", str(tmp_path / "fine.ply"),
                      "--no-progress"])  # fmt: skip
    assert finer.stat().st_size > (out / "mesh.ply").stat().st_size


def test_mesh_refuses_what_is_not_a_finished_fit_and_keeps_existing_files(tmp_path, monkeypatch, capsys):
    code, _, err = run_cli(monkeypatch, capsys, "mesh", "--fit", tmp_path, "--no-progress")
    assert code == 2 and "has no config.json or model.pt: not a finished fit" in err and err.count("\n") == 1
    (tmp_path / "model.pt").write_bytes(b"")
    for network in ('{"method": "filtered-pe", "bogus": 1}', '{"method": "mlp-pe"}'):  # unknown key; empty weights
        (tmp_path / "config.json").write_text(f'{{"network": {network}}}')
        code, _, err = run_cli(monkeypatch, capsys, "mesh", "--fit", tmp_path, "--no-progress")
        assert code == 2 and "cannot rebuild the network" in err and err.count("\n") == 1
    weights = build_sdf_network(SDFNetworkConfig(method="mlp-pe", hidden_features=8, hidden_layers=1)).state_dict()
    torch.save({name: torch.full_like(value, math.nan) for name, value in weights.items()}, tmp_path / "model.pt")
    (tmp_path / "config.json").write_text('{"network": {"method": "mlp-pe", "hidden_features": 8, "hidden_layers": 1}}')
    code, _, err = run_cli(monkeypatch, capsys, "mesh", "--fit", tmp_path, "--no-progress")
    assert code == 2 and "non-finite values: its training diverged" in err
    (tmp_path / "model.pt").unlink()
    code, _, err = run_cli(monkeypatch, capsys, "mesh", "--fit", tmp_path, "--no-progress")
    assert code == 2 and "holds a fit without its weights (model.pt): it was fit with --no-save-model" in err
    torch.save(weights, tmp_path / "model.pt")
    (tmp_path / "mesh-512.ply").write_text("mine")
    code, _, err = run_cli(monkeypatch, capsys, "mesh", "--fit", tmp_path, "--no-progress")
    assert code == 2 and "already exists" in err and (tmp_path / "mesh-512.ply").read_text() == "mine"
    (tmp_path / "notes.txt").write_text("mine")
    prepare_out_dir(tmp_path, overwrite=True)  # the fit run again: the mesh of the earlier weights goes
    assert not (tmp_path / "mesh-512.ply").exists() and (tmp_path / "notes.txt").read_text() == "mine"


def test_fit_refuses_a_non_empty_out_dir(tmp_path, monkeypatch, capsys):
    (tmp_path / "keep.txt").write_text("user data")
    code, _, err = run_cli(monkeypatch, capsys, "fit", "--out", tmp_path, "--iters", "2", *TINY)
    assert code == 2
    assert err.strip().count("\n") == 0 and "not empty" in err and "--overwrite" in err
    assert (tmp_path / "keep.txt").read_text() == "user data"


def test_a_second_fit_on_a_folder_in_use_stops_before_sampling(tmp_path, monkeypatch, capsys):
    from rff_field.common.locks import exclusive_folder
    from rff_field.sdf import run

    monkeypatch.setattr(run.GroundTruth, "from_mesh_sdf", lambda *args: pytest.fail("sampled a folder in use"))
    with exclusive_folder(tmp_path / "fit", "rff-sdf fit"):
        code, _, err = run_cli(monkeypatch, capsys, "fit", "--out", tmp_path / "fit", "--iters", "2", *TINY)
        assert list((tmp_path / "fit").iterdir()) == []
    assert code == 2 and "in use by another rff-sdf fit" in err


@pytest.mark.parametrize(
    "content, message",
    [(b"", "is empty"), (b"ply\nformat nonsense\n\x00\x01", "could not read"), (b"v 0 0 0\nv 1 0 0\n", "no triangles")],
)
def test_bad_meshes_give_one_line_errors(tmp_path, monkeypatch, capsys, content, message):
    suffix = ".ply" if content.startswith(b"ply") else ".obj"
    mesh = tmp_path / f"bad{suffix}"
    mesh.write_bytes(content)
    code, _, err = run_cli(monkeypatch, capsys, "fit", "--mesh", mesh, "--out", tmp_path / "o", "--iters", "2")
    assert code == 2 and message in err and err.startswith("rff-sdf: error:")
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()  # nothing written for a bad input


def test_not_watertight_mesh_names_the_way_out(tmp_path, monkeypatch, capsys):
    import open3d as o3d

    from rff_field.sdf.data import sphere_mesh

    mesh = sphere_mesh(0.3, 3)
    mesh.remove_triangles_by_index([7])
    o3d.io.write_triangle_mesh(str(tmp_path / "open.ply"), mesh)
    code, _, err = run_cli(monkeypatch, capsys, "fit", "--mesh", tmp_path / "open.ply", "--out", tmp_path / "o")
    assert code == 2 and "not watertight" in err and "--fill-holes" in err
    o3d.io.write_triangle_mesh(str(tmp_path / "closed.ply"), sphere_mesh(0.3, 3))
    meshes = [tmp_path / "closed.ply", tmp_path / "open.ply"]
    code, _, err = run_cli(monkeypatch, capsys, "bench", "--meshes", *meshes, "--out", tmp_path / "b", "--iters", "2")
    assert code == 2 and "open.ply is not watertight" in err
    assert not (tmp_path / "b").exists()  # closed.ply was not sampled first


def test_invalid_options_are_reported(tmp_path, monkeypatch, capsys):
    code, _, err = run_cli(monkeypatch, capsys, "fit", "--out", tmp_path / "o", "--iters", "0")
    assert code == 2 and "--iters" in err
    code, _, err = run_cli(monkeypatch, capsys, "bench", "--out", tmp_path / "b", "--methods", "nope")
    assert code == 2 and "unknown method" in err


def test_method_specs_parse_overrides():
    spec = parse_method("fixed-lr:filtered-pe,line_search.enabled=false,hidden-features=48,lr=2e-3")
    network, train = spec.configs(SDFNetworkConfig(), SDFTrainConfig())
    assert spec.label == spec.slug == "fixed-lr" and network.method == "filtered-pe" and network.hidden_features == 48
    assert not train.line_search.enabled and train.lr == 0.002
    legacy = parse_method("filtered-pe:line_search=false")  # the form of earlier versions
    assert legacy.label == "filtered-pe:line_search=false" and not legacy.configs(network, train)[1].line_search.enabled
    with pytest.raises(ValueError, match="unknown option"):
        parse_method("mlp-pe:color=red")


def test_bench_pool_resume_and_report(tmp_path):
    out = tmp_path / "bench"
    args = ["bench", "--out", str(out), "--iters", "8", "--methods", "mlp-pe", "bacon", "filtered-pe:line_search=false"]
    result = cli.main([*args, *TINY])
    for name in ("results.json", "results.md", "figure_generated.png", "pools/generated.npz"):
        assert (out / name).is_file(), name
    runs = json.loads((out / "results.json").read_text())["runs"]
    assert [r["label"] for r in runs] == ["mlp-pe", "bacon", "filtered-pe:line_search=false"]
    assert all(r["sampling"] == "pool" and r["pool_size"] == 8 * 400 for r in runs)
    assert "| mlp-pe |" in (out / "results.md").read_text()
    assert len(result["records"]) == 3
    # A second bench refuses the directory; --resume reuses finished runs without training again.
    with pytest.raises(UsageError):
        cli.main([*args, *TINY])
    stamp = (out / "runs/generated/mlp-pe/metrics.json").stat().st_mtime_ns
    cli.main([*args, *TINY, "--resume", "--log-every", "3"])  # how often it reports is no part of the protocol
    assert (out / "runs/generated/mlp-pe/metrics.json").stat().st_mtime_ns == stamp
    # --resume with other settings would mix runs of two protocols in one table: refused.
    conflicts = (
        r"--iters: \d+ there, 9 now; --pool-size: \d+ there, \d+ now; "
        "runs/generated/mlp-pe ran with another variant or length"
    )
    with pytest.raises(UsageError, match=rf"another protocol \({conflicts} .*; see .*bench.json\)"):
        cli.main(["bench", "--out", str(out), "--iters", "9", "--methods", "mlp-pe", *TINY, "--resume"])
    # --report-only recomputes metrics that were not exact (as from a machine without open3d).
    path = out / "runs/generated/bacon/metrics.json"
    record = json.loads(path.read_text())
    path.write_text(json.dumps(record | {"distance": "kdtree", "chamfer": 1.0}))
    cli.main(["bench", "--out", str(out), "--report-only"])
    assert json.loads(path.read_text())["chamfer"] == pytest.approx(record["chamfer"])
    # --reevaluate recomputes every run, e.g. with another F-score threshold.
    cli.main(
        ["bench", "--out", str(out), "--report-only", "--reevaluate", "--f-threshold", "0.5", "--eval-samples", "2000"]
    )
    runs = json.loads((out / "results.json").read_text())["runs"]
    assert [r["label"] for r in runs] == ["mlp-pe", "bacon", "filtered-pe:line_search=false"]  # given order
    assert all(r["f_threshold"] == 0.5 and r["f_score"] == float(r["mesh_triangles"] > 0) for r in runs)
    # --floor adds the exact SDF's marching cubes as a reference row, which scores better than the tiny fits; it is
    # measured as the runs were (grid 24, 2000 samples), whatever this command line says.
    cli.main(["bench", "--out", str(out), "--report-only", "--floor", "--resolution", "16", "--eval-samples", "500"])
    runs = json.loads((out / "results.json").read_text())["runs"]
    floor = runs[-1]
    assert floor["label"] == "exact-sdf" and floor["mesh_closed"]
    assert (floor["resolution"], floor["num_samples"], floor["f_threshold"]) == (24, 2000, 0.5)
    assert floor["chamfer"] < min(r["chamfer"] for r in runs[:-1] if r["chamfer"] is not None)
    assert "| exact-sdf |" in (out / "results.md").read_text()
    summary = (out / "results.md").read_text()
    cli.main(["bench", "--out", str(out), "--report-only"])  # a report rebuilt alone: the same rows, the same order
    assert [r["label"] for r in json.loads((out / "results.json").read_text())["runs"]][-1] == "exact-sdf"
    assert (out / "results.md").read_text() == summary


def test_metrics_map_the_normalised_space_back_to_the_mesh_files_units(tmp_path):
    import open3d as o3d

    from rff_field.bench.sdf import load_pool_arrays, write_pool
    from rff_field.sdf.data import load_shape
    from rff_field.sdf.run import GroundTruth

    box = o3d.geometry.TriangleMesh.create_box(2000.0, 1000.0, 500.0).translate((1e4, -3e3, 7.0))
    o3d.io.write_triangle_mesh(str(tmp_path / "box.ply"), box)
    _, mesh, normalization = load_shape(tmp_path / "box.ply")
    pool = write_pool(tmp_path / "box.ply", tmp_path / "box.npz", 1000, surface_samples=200, progress=False)
    stored = GroundTruth.from_arrays(load_pool_arrays(pool), "box").normalization
    assert stored == normalization
    mapping = normalization.as_dict()
    back = (np.asarray(mesh.vertices) - mapping["offset"]) / mapping["scale"] + np.asarray(mapping["center"])
    np.testing.assert_allclose(np.sort(back, axis=0), np.sort(np.asarray(box.vertices), axis=0), rtol=1e-12)
    assert mapping["scale"] == pytest.approx(0.9 / 2000.0)  # a distance d in normalised units is d / scale


def test_pool_then_fit_from_the_pool(tmp_path):
    pool = tmp_path / "shape.npz"
    cli.main(["pool", "--out", str(pool), "--size", "4000", "--eval-samples", "1000"])
    with np.load(pool) as data:
        assert data["coarse_points"].shape == (2000, 3) and data["surface_points"].shape == (1000, 3)
    with pytest.raises(UsageError):
        cli.main(["pool", "--out", str(pool), "--size", "10"])
    out = tmp_path / "fit"
    cli.main(["fit", "--pool", str(pool), "--out", str(out), "--method", "siren", "--iters", "5", *TINY])
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["sampling"] == "pool" and metrics["mesh"] == "generated" and metrics["source"] == str(pool)


def test_help_documents_every_option(capsys):
    texts = {}
    for sub in ("fit", "bench", "pool"):
        with pytest.raises(SystemExit):
            cli.main([sub, "--help"])
        texts[sub] = capsys.readouterr().out
    assert "--line-search.no-enabled" in texts["fit"] and "--filter-bias" in texts["fit"] and "--mesh" in texts["fit"]
    assert "--methods" in texts["bench"] and "--method " not in texts["bench"]  # per-run method is suppressed
    assert "--size" in texts["pool"]


def test_bench_takes_variants_as_the_other_benchmarks_do(tmp_path, capsys):
    cli.main(["bench", "--variants", "mlp-pe", "a:siren", "--list-jobs", "--out", str(tmp_path / "bench")])
    listed = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[-1] for line in listed] == ["runs/generated/mlp-pe", "runs/generated/a"]


def test_the_table_marks_the_best_network_not_the_exact_sdf_reference():
    rows = [dict(mesh="bunny", label=label, chamfer=chamfer) for label, chamfer in
            [("mlp-pe", 3e-7), (FLOOR_LABEL, 1e-7), ("filtered-pe", 2e-7)]]  # fmt: skip
    bold = [line.split(" | ")[0] for line in results_table(rows).splitlines() if "**" in line]
    assert bold == ["| filtered-pe"]


def test_bench_without_progress_prints_one_line_a_job(tmp_path, monkeypatch, capsys):
    out = tmp_path / "bench"
    code, stdout, err = run_cli(monkeypatch, capsys, "bench", "--out", out, "--methods", "mlp-pe", "--iters", "4",
                                "--no-progress", *TINY)  # fmt: skip
    assert code == 0 and err == ""
    assert stdout.splitlines() == ["job 0/1: runs/generated/mlp-pe", f"wrote {out / 'results.json'}, "
                                   f"{out / 'results.md'}, {out / 'figure_generated.png'}"]  # fmt: skip


def test_the_exact_reference_of_a_sheet_thinner_than_a_voxel_writes_no_empty_mesh(tmp_path):
    import open3d as o3d

    from rff_field.bench.sdf import exact_floor, write_pool
    from rff_field.sdf.run import OutputConfig

    sheet = o3d.geometry.TriangleMesh.create_box(1.0, 1.0, 1e-3)  # 1e-3 of its width: far under a voxel of 8
    o3d.io.write_triangle_mesh(str(tmp_path / "sheet.ply"), sheet)
    pool = write_pool(tmp_path / "sheet.ply", tmp_path / "sheet.npz", 2000, surface_samples=500, progress=False)
    run_dir = tmp_path / "out/runs/sheet" / FLOOR_LABEL
    run_dir.mkdir(parents=True)
    (run_dir / "mesh.ply").write_text("a stale mesh")
    record = exact_floor(tmp_path / "out", "sheet", pool, OutputConfig(resolution=8, eval_samples=200, render=False))
    assert record["mesh_triangles"] == 0 and not (run_dir / "mesh.ply").exists()
    assert (run_dir / "metrics.json").is_file()


def test_the_claim_compares_each_method_by_its_run_without_overrides():
    from rff_field.bench.sdf import claim_check

    def record(label: str, chamfer: float) -> dict:
        return {"mesh": "bunny", "label": label, "method": label.partition(":")[0], "chamfer": chamfer}

    records = [record("filtered-pe", 1e-7), record("mlp-pe:hidden_features=157", 1e-7), record("mlp-pe", 2e-7),
               record("siren:hidden_layers=4", 4e-7)]  # fmt: skip
    assert claim_check(records) == [
        "- bunny: filtered-pe Chamfer 1e-07 is lower than mlp-pe (x0.50); lower than siren:hidden_layers=4 (x0.25)"
    ]
