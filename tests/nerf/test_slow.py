"""A newcomer's first hour, measured (``-m slow``; minutes on a CPU): a generated capture trained by ns-train
without flags and meshed by rff-export-mesh without flags; rff-nerfacto-lite on a Blender scene without flags;
a rate that collapses the density; the demo."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import trimesh

from rff_field.cli import demo, export_mesh, scene
from rff_field.nerf.evaluate import evaluate_views
from rff_field.nerf.loading import load_pipeline
from rff_field.nerf.training import train_in_process
from tests import SHARED_DATA
from tests.nerf.conftest import ns_command
from tests.nerf.test_options import parsed

pytestmark = pytest.mark.slow
CHAIR = SHARED_DATA / "nerf_synthetic" / "chair"
TOPS = {"cube": (-0.35, -0.35, 0.2), "cylinder": (0.4, -0.35, 0.55), "sphere": (0.3, 0.35, 0.2)}
"""The tops of the capture's objects, in its own coordinates."""
needs_chair = pytest.mark.skipif(not CHAIR.is_dir(), reason="the NeRF synthetic chair is not in $RFF_DATA")


def test_a_capture_trained_without_flags_meshes_its_objects_in_its_own_coordinates_without_flags(tmp_path):
    scene.entrypoint(["capture", "--output-dir", str(tmp_path / "capture")])
    done = ns_command("ns-train", "rff-nerfacto-lite", "--data", str(tmp_path / "capture"), "--max-num-iterations",
                      "600", "--vis", "tensorboard", "--output-dir", str(tmp_path / "outputs"),
                      timeout=3600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "trains on the CPU" in done.stdout + done.stderr
    (config,) = (tmp_path / "outputs").glob("*/rff-nerfacto-lite/*/config.yml")
    export_mesh.entrypoint(["--load-config", str(config), "--output-path", str(tmp_path / "mesh.ply")])
    mesh = trimesh.load(tmp_path / "mesh.ply", process=False)
    vertices = np.asarray(mesh.vertices)
    for name, top in TOPS.items():
        assert np.linalg.norm(vertices - top, axis=1).min() <= 0.15, name
    x, y, z = vertices.T
    assert ((np.abs(x) <= 1.2) & (np.abs(y) <= 1.2) & (z >= -0.8) & (z <= 0.9)).mean() >= 0.9
    assert 1_000 <= len(mesh.faces) <= 400_000


@needs_chair
def test_rff_nerfacto_lite_on_a_blender_scene_without_flags_scores_at_least_as_rff_nerf_lite(tmp_path):
    flags = ["--machine.device-type", "cpu", "--max-num-iterations", "300",
             "--pipeline.datamanager.camera-res-scale-factor", "0.0625", "--vis", "tensorboard"]  # fmt: skip
    psnr = {}
    for method in ("rff-nerfacto-lite", "rff-nerf-lite"):
        config = parsed(method, *flags, "blender-data", "--data", CHAIR, tmp_path=tmp_path)
        _, pipeline, _ = load_pipeline(train_in_process(config), test_mode="test")
        psnr[method] = evaluate_views(pipeline)["mean"]["psnr"]
    assert psnr["rff-nerfacto-lite"] >= psnr["rff-nerf-lite"], psnr


@needs_chair
def test_a_fields_rate_that_collapses_the_density_stops_ns_train_with_status_3_naming_it(tmp_path):
    done = ns_command("ns-train", "rff-nerf-lite", "--optimizers.fields.optimizer.lr", "10", "--max-num-iterations",
                      "400", "--pipeline.datamanager.camera-res-scale-factor", "0.0625", "--vis", "tensorboard",
                      "--output-dir", str(tmp_path), "--data", str(CHAIR), timeout=1800)  # fmt: skip
    assert done.returncode == 3
    line = done.stderr.strip().splitlines()[-1]
    assert "collapsed" in line and "--optimizers.fields.optimizer.lr (now 10)" in line


def test_the_demo_runs_end_to_end(tmp_path):
    summary = demo.Demo(output_dir=tmp_path / "demo").main()
    assert summary["test_metrics"]["psnr"] > 20
    assert len(trimesh.load(summary["mesh"], process=False).faces) > 1000


def test_ctrl_c_in_ns_train_with_its_viewer_saves_a_checkpoint_and_exits_130(scene, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests import REPO

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    command = [
        str(Path(sys.executable).parent / "ns-train"),
        "rff-nerf-lite",
        "--data",
        str(scene),
        "--output-dir",
        str(tmp_path),
        "--vis",
        "viewer",
        "--viewer.websocket-port",
        "7461",
        "--max-num-iterations",
        "100000",
    ]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    deadline = time.monotonic() + 600
    while not list(tmp_path.glob("*/*/*/config.yml")) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(1)
    time.sleep(30)  # into training
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=120) == 130
    assert "checkpoint" in process.stderr.read().strip().splitlines()[-1]
    assert list(tmp_path.glob("*/*/*/nerfstudio_models/step-*.ckpt"))
