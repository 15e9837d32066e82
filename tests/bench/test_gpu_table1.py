"""scripts/gpu_table1.sh, dry run on the CPU: tiny images, a few iterations, on an interpreter where the command-line
stack (tyro, nerfstudio, viser, open3d) cannot be imported, as on a bare GPU machine. Batched, resumable, stopped by
its budget."""

import json
import os
import subprocess
import sys

import imageio.v3 as iio
import numpy as np

from tests import REPO, import_blocker

BLOCKER = import_blocker("tyro", "nerfstudio", "viser", "open3d", "mcubes")


def run_script(tmp_path, out, budget, **env):
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(BLOCKER)
    environment = {**os.environ, "PYTHONPATH": str(site), "PYTHON": sys.executable, "DEVICE": "cpu", "ITERS": "3",
                   "IMAGES": str(tmp_path / "images"), "OMP_NUM_THREADS": "1", **env}  # fmt: skip
    return subprocess.run(["bash", str(REPO / "scripts" / "gpu_table1.sh"), str(out), str(budget)], env=environment,
                          capture_output=True, text=True, timeout=300)  # fmt: skip


def test_dry_run_batched_resumable_and_within_budget(tmp_path):
    rng = np.random.default_rng(0)
    (tmp_path / "images").mkdir()
    for name, shape in (("a", (16, 24, 3)), ("b", (16, 24, 3)), ("c", (24, 16, 3))):  # c: another size
        iio.imwrite(tmp_path / "images" / f"{name}.png", rng.integers(0, 256, shape, dtype=np.uint8))
    out = tmp_path / "out"
    done = run_script(tmp_path, out, 600, MODELS="2", GRAPH="", TIMING="1", TIMING_BATCHED="1", TIMING_BLOCK="2",
                      TIMING_ROUNDS="1")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    for image in "abc":
        for label in ("mlp-pe", "filtered-pe"):
            metrics = json.loads((out / "table" / "runs" / image / label / "metrics.json").read_text())
            assert metrics["engine"] == "batched" and metrics["iters"] == 3 and metrics["device"] == "cpu"
            assert metrics["batch_models"] == (2 if image in "ab" else 1)  # a and b together, c alone
            assert metrics["config"]["network"]["hidden_features"] == 256 and metrics["downsample"] == 1
    assert "filtered-pe" in (out / "table" / "results.md").read_text()
    assert (out / "timing" / "timing.md").is_file() and (out / "timing" / "batched.md").is_file()

    stamp = (out / "table" / "runs" / "a" / "mlp-pe" / "metrics.json").stat().st_mtime_ns
    again = run_script(tmp_path, out, 600, MODELS="2", GRAPH="")  # everything finished: nothing is fitted again
    assert again.returncode == 0 and "together" not in again.stdout
    assert (out / "table" / "runs" / "a" / "mlp-pe" / "metrics.json").stat().st_mtime_ns == stamp

    stopped = run_script(tmp_path, tmp_path / "late", 0.001, MODELS="2")  # spent before the second batch starts
    assert stopped.returncode == 0 and "budget" in stopped.stdout
    assert len(list((tmp_path / "late").glob("table/runs/*/*/metrics.json"))) <= 2  # the first batch at most


def test_a_batch_stopped_by_the_budget_keeps_what_it_reached_apart(tmp_path):
    (tmp_path / "images").mkdir()
    iio.imwrite(tmp_path / "images" / "a.png", np.random.default_rng(0).integers(0, 256, (16, 24, 3), dtype=np.uint8))
    out = tmp_path / "out"
    # the budget passes during the first batch; it stops at its next check (every 500 iterations), far from the end
    stopped = run_script(tmp_path, out, 0.5, ITERS="100000", VARIANTS="mlp-pe")
    assert stopped.returncode == 0 and "budget" in stopped.stdout, stopped.stdout + stopped.stderr
    metrics = json.loads((out / "table" / "partial" / "runs" / "a" / "mlp-pe" / "metrics.json").read_text())
    assert metrics["iters_requested"] == 100000 and metrics["iters"] % 500 == 0 and "stopped" in metrics
    assert not (out / "table" / "runs" / "a" / "mlp-pe" / "metrics.json").exists()  # still pending
    assert (out / "table" / "partial" / "runs" / "a" / "mlp-pe" / "checkpoint.pt").is_file()
    again = run_script(tmp_path, out, 0.5, ITERS="100000", VARIANTS="mlp-pe")  # the next call goes on from there
    assert again.returncode == 0, again.stdout + again.stderr
    resumed = json.loads((out / "table" / "partial" / "runs" / "a" / "mlp-pe" / "metrics.json").read_text())
    assert resumed["resumed_at"] == [metrics["iters"]] and resumed["iters"] > metrics["iters"]


def test_graph_check_and_batches_of_one_with_the_graph(tmp_path):
    (tmp_path / "images").mkdir()
    iio.imwrite(tmp_path / "images" / "a.png", np.random.default_rng(0).integers(0, 256, (16, 24, 3), dtype=np.uint8))
    out = tmp_path / "out"
    done = run_script(tmp_path, out, 600, GRAPH_CHECK="4")  # the defaults: batches of one, the graph
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads((out / "timing" / "graph_check.json").read_text())
    assert [row["variant"] for row in rows] == ["mlp-pe", "filtered-pe"]
    assert all(row["max_psnr_gap"] == 0 for row in rows)  # on a CPU the graph's step runs eagerly: the same fit
    metrics = json.loads((out / "table" / "runs" / "a" / "filtered-pe" / "metrics.json").read_text())
    assert metrics["config"]["cuda_graph"] is True and metrics["batch_models"] == 1


def test_the_fused_line_search_in_the_table_and_its_check(tmp_path):
    (tmp_path / "images").mkdir()
    iio.imwrite(tmp_path / "images" / "a.png", np.random.default_rng(1).integers(0, 256, (16, 24, 3), dtype=np.uint8))
    out = tmp_path / "out"
    done = run_script(tmp_path, out, 600, GRAPH_CHECK="4", FUSED="1", VARIANTS="filtered-pe")
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {row["variant"]: row for row in json.loads((out / "timing" / "graph_check.json").read_text())}
    # fused against unfused: the same rates to rounding (about 1e-8 relative), so the same curve to far below 0.01 dB
    assert rows["filtered-pe"]["max_psnr_gap"] < 0.01 and rows["filtered-pe"]["max_rate_rel_gap"] < 1e-5
    metrics = json.loads((out / "table" / "runs" / "a" / "filtered-pe" / "metrics.json").read_text())
    assert metrics["config"]["line_search"]["fused"] is True


def test_the_protocols_images_unless_names_are_given_and_overwrite(tmp_path):
    from rff_field.bench.table1 import bench_config, parse_args

    protocol = tmp_path / "protocols.toml"
    protocol.write_text('[two]\nnames = ["kodim01", "kodim05"]\n[every]\n')
    args = ["--out", str(tmp_path / "out"), "--images", str(tmp_path)]
    assert bench_config(parse_args([*args, "--protocol", f"{protocol}:two"])).names == ("kodim01", "kodim05")
    given = bench_config(parse_args([*args, "--protocol", f"{protocol}:two", "--names", "kodim05", "--overwrite"]))
    assert given.names == ("kodim05",) and given.jobs.overwrite
    every = bench_config(parse_args([*args, "--protocol", f"{protocol}:every"]))
    assert every.names == () and not every.jobs.overwrite


def test_bad_options_are_refused_before_the_timing(tmp_path, capsys):
    from rff_field.bench import table1

    (tmp_path / "images").mkdir()
    iio.imwrite(tmp_path / "images" / "a.png", np.random.default_rng(0).integers(0, 256, (16, 24, 3), dtype=np.uint8))
    args = ["--out", str(tmp_path / "out"), "--images", str(tmp_path / "images"), "--device", "cpu", "--timing",
            "--variants", "mlp-pe", "no-such-method"]  # fmt: skip
    assert table1.main(args) == 2
    assert "no-such-method" in capsys.readouterr().err and not (tmp_path / "out" / "timing").exists()
