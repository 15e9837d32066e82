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
