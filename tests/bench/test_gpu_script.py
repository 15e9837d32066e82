"""scripts/gpu_nerf.sh, the GPU check of rff-nerfacto, as a CPU dry run: a generated scene, one second of training per
variant, the test views evaluated and the table written."""

import json
import os
import subprocess
import sys
from pathlib import Path

from rff_field.nerf.synthetic_scene import SceneSpec, write_blender_scene
from tests import REPO


def test_gpu_script_dry_run_on_the_cpu(tmp_path):
    scene = write_blender_scene(tmp_path / "scene", SceneSpec(image_size=8, num_train=3, num_val=1, num_test=2))
    tiny = (",hidden_dim=16,base_num_layers=2,num_frequencies=3,num_proposal_samples_per_ray=8 8,"
            "num_nerf_samples_per_ray=4,train_num_rays_per_batch=64,eval_num_rays_per_chunk=256")  # fmt: skip
    env = {**os.environ, "DEVICE": "cpu", "CHAIR": str(scene), "SCALE": "1", "PYTHON": sys.executable, "OPTIONS": tiny}
    out = tmp_path / "out"
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "gpu_nerf.sh"), str(out), "1"], capture_output=True, text=True, env=env,
        timeout=300,
    )  # fmt: skip
    logs = "".join(p.read_text()[-1500:] for p in sorted((out / "logs").glob("*.log"))) if out.exists() else ""
    assert result.returncode == 0, result.stderr[-2000:] + logs
    report = json.loads((out / "report" / "results.json").read_text())
    assert set(report["variants"]) == {"filter", "baseline"}
    for run in report["variants"].values():
        assert run["seconds_budget"] == 1 and run["steps"] >= 1 and run["device"] == "cpu"
    assert report["variants"]["filter"]["params_filter"] > 0 == report["variants"]["baseline"]["params_filter"]
    table = (out / "report" / "results.md").read_text()
    assert "| filter |" in table and "| baseline |" in table and table in result.stdout
    assert (out / "logs" / "env.txt").read_text().count("tinycudann") == 1
    assert Path(out / "report" / "test_views.png").is_file()


def test_a_call_cut_by_its_limit_packs_what_finished_and_exits_with_the_runs_status(tmp_path):
    import shutil
    import tarfile

    repo = tmp_path / "repo"  # the call's script beside a stand-in for the run: one variant finishes, one hangs
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "gpu_nerf_call.sh", repo / "scripts")
    (repo / "scripts" / "gpu_nerf.sh").write_text(
        'mkdir -p "$1/runs/filter" "$1/.running"; echo "{}" > "$1/runs/filter/metrics.json"\n'
        '[ -n "$FAIL" ] && exit 2\nsleep 60\n'
    )
    (tmp_path / "python").write_text("#!/bin/sh\nexit 0\n")  # pip and the import check pass
    (tmp_path / "python").chmod(0o755)
    out = tmp_path / "OUT"
    out.mkdir()
    env = {**os.environ, "OUT": str(out), "PYTHON": str(tmp_path / "python"), "LIMIT_S": "2"}
    call = ["bash", str(repo / "scripts" / "gpu_nerf_call.sh"), "1"]
    result = subprocess.run(call, capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 75 and "stopped at LIMIT_S=2 s" in result.stdout
    with tarfile.open(out / "gpu-nerf.tgz") as packed:
        assert packed.getnames() == [
            "outputs/gpu-nerf", "outputs/gpu-nerf/runs", "outputs/gpu-nerf/runs/filter",
            "outputs/gpu-nerf/runs/filter/metrics.json",
        ]  # fmt: skip
    failed = subprocess.run(call, capture_output=True, text=True, env={**env, "FAIL": "1"}, timeout=60)
    assert failed.returncode == 2 and "rc=2" in failed.stdout
