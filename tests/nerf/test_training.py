"""A real rff-nerf-lite training run on a tiny generated scene (CPU, in this process), then what users do with it:
the line search set the filter's rate every step, checkpoints and config round-trip, mesh export, the viewer."""

from __future__ import annotations

import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import open3d as o3d
import pytest
import torch
import yaml
from nerfstudio.engine.trainer import TrainerConfig

from rff_field.common.stopping import FitInterrupted
from rff_field.core.errors import TrainingDiverged
from rff_field.core.optim import FILTER_GROUP
from rff_field.nerf.filtered_model import FIELDS_GROUP, FILTER_LR_TAG
from rff_field.nerf.model import RFFNeRFModel, RFFNeRFModelConfig
from rff_field.nerf.synthetic_scene import SceneSpec, write_blender_scene
from rff_field.nerf.training import lite_config, train_in_process
from tests.nerf.rule_watcher import RuleWatcher

STEPS = 30
LOG_EVERY = 4  # --logging.steps-per-log: the filter's rate is logged with nerfstudio's own scalars
LR_MAX = 10.0  # wide bounds: the rule's value (often above 1 here) is then not just its upper bound
BIN = Path(sys.executable).parent


def tiny_config(data: Path, output_dir: Path, steps: int = STEPS) -> TrainerConfig:
    """rff-nerf-lite shrunk to a fraction of a second per step."""
    config = lite_config(data, output_dir, steps, experiment_name="tiny")
    config.pipeline.datamanager.train_num_rays_per_batch = 128
    config.pipeline.datamanager.eval_num_rays_per_batch = 128
    model = config.pipeline.model
    assert isinstance(model, RFFNeRFModelConfig)
    model.num_coarse_samples = 16
    model.num_importance_samples = 16
    model.base_mlp_num_layers = 2
    model.base_mlp_layer_width = 32
    model.skip_connections = ()
    model.head_mlp_num_layers = 1
    model.head_mlp_layer_width = 16
    model.num_frequencies = 6
    model.compute_lpips = False
    model.line_search.lr_max = LR_MAX
    config.steps_per_eval_batch = 10
    config.logging.steps_per_log = LOG_EVERY
    config.steps_per_eval_image = 10**9
    config.steps_per_eval_all_images = 10**9
    return config


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Train the tiny config once for the whole module."""
    root = tmp_path_factory.mktemp("nerf")
    scene = write_blender_scene(
        root / "scene", SceneSpec(image_size=16, num_train=6, num_val=2, num_test=2, supersample=2)
    )
    config = tiny_config(scene, root / "runs")
    watch = {}

    def on_setup(trainer):
        watch["watcher"] = RuleWatcher(trainer)
        watch["model"] = trainer.pipeline.model

    config_path = train_in_process(config, on_setup=on_setup)
    return {"root": root, "scene": scene, "config_path": config_path, **watch}


def test_trains_and_writes_checkpoint(trained):
    ckpts = sorted((trained["config_path"].parent / "nerfstudio_models").glob("step-*.ckpt"))
    assert [c.name for c in ckpts] == [f"step-{STEPS - 1:09d}.ckpt"]
    state = torch.load(ckpts[0], map_location="cpu")  # torch's default weights_only=True, as ns-eval/ns-viewer load
    assert any("position_encoding.filter" in k for k in state["pipeline"])
    assert set(state["optimizers"]) == {FIELDS_GROUP, FILTER_GROUP}


def test_line_search_set_filter_lr_every_step_to_the_rule(trained):
    watcher: RuleWatcher = trained["watcher"]
    model: RFFNeRFModel = trained["model"]
    assert model.line_search is not None
    assert len(watcher.from_recorded) == STEPS and len(watcher.observed) == STEPS
    assert len(model.line_search.history) == STEPS
    watcher.assert_rule_applied()
    np.testing.assert_allclose(model.line_search.history, watcher.observed, rtol=0, atol=0)
    assert all(0.0 <= lr <= LR_MAX for lr in watcher.observed)


def test_filter_lr_logged_with_nerfstudios_scalars(trained):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(trained["config_path"].parent))
    acc.Reload()
    logged = list(range(0, STEPS, LOG_EVERY))
    assert [e.step for e in acc.Scalars("Train Loss")] == logged
    events = acc.Scalars(FILTER_LR_TAG)
    assert [e.step for e in events] == logged
    history = trained["model"].line_search.history
    np.testing.assert_allclose([e.value for e in events], [history[step] for step in logged], rtol=1e-6)


def test_config_round_trips_and_loads_with_eval_setup(trained):
    from rff_field.nerf.loading import load_rff_pipeline

    config = yaml.load(trained["config_path"].read_text(), Loader=yaml.Loader)
    assert isinstance(config, TrainerConfig) and config.method_name == "rff-nerf-lite"
    assert isinstance(config.pipeline.model, RFFNeRFModelConfig)
    assert config.pipeline.model.line_search.lr_max == LR_MAX and config.pipeline.model.base_mlp_layer_width == 32
    assert config.optimizers[FILTER_GROUP]["scheduler"] is None

    _, pipeline, model, step = load_rff_pipeline(trained["config_path"], test_mode="test")
    assert step == STEPS - 1
    trained_weight = trained["model"].field_fine.position_encoding.filter[0].weight
    assert torch.equal(model.field_fine.position_encoding.filter[0].weight.cpu(), trained_weight.detach().cpu())
    # The two levels are made to differ by construction (a few training steps may leave both blank): the coarse
    # field empty (white background), the fine one opaque and black.
    with torch.no_grad():
        for field, density, colour in ((model.field_coarse, -30.0, 0.0), (model.field_fine, 20.0, -20.0)):
            for head, bias in ((field.field_output_density, density), (field.field_heads[0], colour)):
                head.net.weight.zero_()
                head.net.bias.fill_(bias)
    outputs = model.get_outputs_for_camera(pipeline.datamanager.eval_dataset.cameras[0:1])
    for key in ("rgb", "depth", "accumulation", "rgb_coarse", "rgb_fine"):
        assert key in outputs and outputs[key].shape[:2] == (16, 16)
    for key in ("rgb", "depth", "accumulation"):  # what ns-eval and the viewer show: the fine rendering
        assert torch.equal(outputs[key], outputs[f"{key}_fine"]) and not torch.equal(
            outputs[key], outputs[f"{key}_coarse"]
        )


def test_viewer_shows_the_filter_rate_of_the_loaded_checkpoint(trained, tmp_path):
    """The last step's rate is kept in the checkpoint (a buffer) and shown by a loaded model's 'Filter LR'; a
    checkpoint written before the buffer existed still loads."""
    from rff_field.nerf.loading import load_rff_pipeline

    last = trained["model"].line_search.history[-1]
    _, _, model, _ = load_rff_pipeline(trained["config_path"], test_mode="inference")
    assert float(model.filter_lr) == pytest.approx(last, rel=1e-6)
    assert model.viewer_filter_lr.value == pytest.approx(last, rel=1e-5) and model.viewer_filter_lr.value > 0

    run_dir = tmp_path / "old"
    shutil.copytree(trained["config_path"].parent, run_dir)
    (checkpoint,) = (run_dir / "nerfstudio_models").glob("step-*.ckpt")
    state = torch.load(checkpoint, map_location="cpu")
    del state["pipeline"]["_model.filter_lr"]
    torch.save(state, checkpoint)
    _, _, old, _ = load_rff_pipeline(run_dir / "config.yml", test_mode="inference")
    assert float(old.filter_lr) == 0 and old.viewer_filter_lr.value == 0


def test_export_mesh_writes_a_coloured_mesh(trained, tmp_path):
    from rff_field.cli.export_mesh import ExportMesh, run
    from rff_field.common.mesh import sample_grid

    model = trained["model"]
    grid = sample_grid(lambda x: model.field_fine.density_fn(x)[..., 0], [-1.5] * 3, [1.5] * 3, 24)
    threshold = float(np.quantile(grid, 0.9))  # a level the short-trained density surely crosses
    out = tmp_path / "mesh.ply"
    args = ExportMesh(load_config=trained["config_path"], output_path=out, resolution=24, threshold=threshold)
    assert run(args) == 0
    mesh = o3d.io.read_triangle_mesh(str(out))
    assert len(mesh.triangles) > 0 and mesh.has_vertex_colors()
    colours = np.asarray(mesh.vertex_colors)
    assert colours.min() >= 0 and colours.max() <= 1 and colours.std() > 0
    # components: only the largest was kept
    _, counts, _ = mesh.cluster_connected_triangles()
    assert len(counts) == 1
    # never overwrite without the flag
    assert run(args) == 2
    too_high = ExportMesh(
        load_config=trained["config_path"], output_path=tmp_path / "m2.ply", resolution=8, threshold=1e9
    )
    assert run(too_high) == 2
    assert not (tmp_path / "m2.ply").exists()


def test_export_mesh_rejects_a_config_that_is_not_rff_nerf(trained, tmp_path, capsys):
    from nerfstudio.configs.method_configs import method_configs

    from rff_field.cli.export_mesh import ExportMesh, run

    other = tmp_path / "config.yml"
    other.write_text(yaml.dump(method_configs["nerfacto"]))
    assert run(ExportMesh(load_config=other, output_path=tmp_path / "x.ply")) == 2
    assert "'nerfacto' run, not an rff-nerf one" in capsys.readouterr().err
    (tmp_path / "junk.yml").write_text("just: [text")
    assert run(ExportMesh(load_config=tmp_path / "junk.yml", output_path=tmp_path / "x.ply")) == 2
    assert run(ExportMesh(load_config=tmp_path / "missing.yml", output_path=tmp_path / "x.ply")) == 2
    out = capsys.readouterr().err
    assert "not a readable nerfstudio config" in out and "does not exist" in out
    assert not (tmp_path / "x.ply").exists()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_viewer_serves_the_trained_model(trained, tmp_path):
    port = _free_port()
    log = open(tmp_path / "viewer.log", "w")
    proc = subprocess.Popen(
        [str(BIN / "ns-viewer"), "--load-config", str(trained["config_path"]), "--viewer.websocket-port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
        start_new_session=True,
    )
    try:
        status, deadline = None, time.time() + 180
        while time.time() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as response:
                    status = response.status
                    break
            except OSError:
                time.sleep(1)
        assert status == 200, (tmp_path / "viewer.log").read_text()[-2000:]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
    assert proc.returncode is not None


def test_filter_off_is_the_baseline_with_one_change(tmp_path):
    """The MLP+PE baseline has the same fields except the filter, and no 'filter' optimizer group."""
    from nerfstudio.data.scene_box import SceneBox

    box = SceneBox(aabb=torch.tensor([[-1.5] * 3, [1.5] * 3]))
    on = RFFNeRFModelConfig(compute_lpips=False).setup(scene_box=box, num_train_data=1)
    off = RFFNeRFModelConfig(compute_lpips=False, use_filter=False).setup(scene_box=box, num_train_data=1)
    assert set(on.get_param_groups()) == {FIELDS_GROUP, FILTER_GROUP}
    assert set(off.get_param_groups()) == {FIELDS_GROUP}
    inr_on, inr_off = on.get_param_groups()[FIELDS_GROUP], off.get_param_groups()[FIELDS_GROUP]
    assert [p.shape for p in inr_on] == [p.shape for p in inr_off]
    d = 3 + 3 * 2 * 10  # nerf-pytorch PE with 10 bands
    assert [tuple(p.shape) for p in on.get_param_groups()[FILTER_GROUP]] == [(d, d)] * 6  # 3 layers x coarse/fine
    assert math.isclose(sum(p.numel() for p in on.get_param_groups()[FILTER_GROUP]), 6 * d * d)


def test_the_embedding_and_filter_options_reach_both_fields():
    from nerfstudio.data.scene_box import SceneBox

    box = SceneBox(aabb=torch.tensor([[-1.5] * 3, [1.5] * 3]))

    def encodings(**options):
        model = RFFNeRFModelConfig(compute_lpips=False, **options).setup(scene_box=box, num_train_data=1)
        return [field.position_encoding for field in model.fields]

    rff = dict(encoding="rff", rff_num_frequencies=7, rff_seed=3)
    d = 3 + 2 * 7
    for encoding in encodings(
        **rff, filter_num_layers=2, filter_bias=True, filter_init="identity", filter_residual=True
    ):
        assert encoding.get_out_dim() == d and encoding.residual
        assert [tuple(p.shape) for p in encoding.filter.parameters()] == [(d, d), (d,), (d, d), (d,)]
        assert torch.equal(encoding.filter[0].weight.detach(), torch.eye(d))
    frequencies = encodings(**rff)[0].encoding.B
    assert torch.equal(encodings(**rff)[1].encoding.B, frequencies)  # a seed gives the same frequencies
    assert not torch.equal(encodings(**{**rff, "rff_seed": 4})[0].encoding.B, frequencies)
    assert torch.equal(encodings(**rff, rff_sigma=16.0)[0].encoding.B, 2 * frequencies)  # the default sigma is 8
    x = torch.rand(4, 3)
    low, high = (encodings(pe_bands="loglinear", pe_scale=scale)[0].encoding(x) for scale in (5.0, 10.0))
    assert torch.equal(low[:, :3], high[:, :3]) and not torch.equal(low, high)  # the same input, other bands


def test_filtering_the_direction_alone_gives_a_filter_group():
    from nerfstudio.data.scene_box import SceneBox

    box = SceneBox(aabb=torch.tensor([[-1.5] * 3, [1.5] * 3]))
    model = RFFNeRFModelConfig(compute_lpips=False, use_filter=False, filter_direction=True).setup(
        scene_box=box, num_train_data=1
    )
    d = 3 + 3 * 2 * 4  # the direction's nerf-pytorch PE with 4 bands
    assert [tuple(p.shape) for p in model.get_param_groups()[FILTER_GROUP]] == [(d, d)] * 6
    assert model.has_filter  # the line search is attached to it


def test_trains_on_a_nerfstudio_dataset(trained, tmp_path):
    """`ns-train rff-nerf-lite nerfstudio-data --data ...`: the same scene as a transforms.json dataset."""
    import json

    from nerfstudio.data.dataparsers.nerfstudio_dataparser import NerfstudioDataParserConfig

    scene, data = trained["scene"], tmp_path / "ns"
    (data / "images").mkdir(parents=True)
    frames = []
    for split in ("train", "test"):
        meta = json.loads((scene / f"transforms_{split}.json").read_text())
        for frame in meta["frames"]:
            name = f"{split}_{frame['file_path'].split('/')[-1]}.png"
            (data / "images" / name).write_bytes((scene / (frame["file_path"][2:] + ".png")).read_bytes())
            frames.append({"file_path": f"images/{name}", "transform_matrix": frame["transform_matrix"]})
    focal = 8 / math.tan(0.5 * meta["camera_angle_x"])
    intrinsics = {"fl_x": focal, "fl_y": focal, "cx": 8, "cy": 8, "w": 16, "h": 16, "camera_model": "OPENCV"}
    (data / "transforms.json").write_text(json.dumps({**intrinsics, "frames": frames}))

    config = tiny_config(data, tmp_path / "runs", steps=3)
    config.pipeline.datamanager.dataparser = NerfstudioDataParserConfig(
        train_split_fraction=0.75
    )  # 8 frames: 2 to evaluate
    config.pipeline.model.collider_params = {"near_plane": 0.05, "far_plane": 6.0}
    config_path = train_in_process(config)
    assert (config_path.parent / "nerfstudio_models" / "step-000000002.ckpt").exists()


def test_divergence_stops_training_and_keeps_only_finite_checkpoints(trained, tmp_path):
    from nerfstudio.engine.callbacks import TrainingCallback, TrainingCallbackLocation

    config = tiny_config(trained["scene"], tmp_path / "runs", steps=10)
    config.steps_per_save = 2

    def poison(trainer) -> None:
        def at(step: int) -> None:
            if step == 3:  # a field parameter turns NaN before step 3: its loss is the first non-finite one
                with torch.no_grad():
                    trainer.pipeline.model.field_fine.mlp_base.layers[0].weight.fill_(float("nan"))

        trainer.callbacks.insert(0, TrainingCallback([TrainingCallbackLocation.BEFORE_TRAIN_ITERATION], at))

    with pytest.raises(TrainingDiverged, match="diverged at step 3: the loss is nan") as info:
        train_in_process(config, on_setup=poison)
    message = str(info.value)
    assert "fields parameters" in message and "are not finite" in message
    assert "--optimizers.fields.optimizer.lr" in message
    checkpoints = sorted((config.get_base_dir() / "nerfstudio_models").glob("step-*.ckpt"))
    assert [c.name for c in checkpoints] == ["step-000000002.ckpt"]  # nerfstudio keeps only the latest
    assert checkpoints[-1].name in str(info.value)
    for checkpoint in checkpoints:
        state = torch.load(checkpoint, map_location="cpu")["pipeline"]
        assert all(bool(torch.isfinite(v).all()) for v in state.values() if v.is_floating_point())


def test_ctrl_c_stops_training_after_the_step_with_a_checkpoint(trained, tmp_path, capsys):
    from nerfstudio.engine.callbacks import TrainingCallback, TrainingCallbackLocation

    config = tiny_config(trained["scene"], tmp_path / "runs", steps=10)
    steps = []

    def press_ctrl_c_at_step_3(trainer) -> None:
        def at(step: int) -> None:
            steps.append(step)
            if step == 3:
                signal.raise_signal(signal.SIGINT)

        trainer.callbacks.append(TrainingCallback([TrainingCallbackLocation.BEFORE_TRAIN_ITERATION], at))

    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(FitInterrupted, match="interrupted after step 4 of 10"):  # the demo and benchmark stop
        train_in_process(config, on_setup=press_ctrl_c_at_step_3)
    assert steps == [0, 1, 2, 3]  # step 3 ran to its end, and no other started
    checkpoints = sorted((config.get_base_dir() / "nerfstudio_models").glob("step-*.ckpt"))
    assert len(checkpoints) == 1 and torch.load(checkpoints[0], map_location="cpu")["step"] == 4
    notice = capsys.readouterr().err
    assert "Ctrl-C: training stops after this step and saves its checkpoint" in notice
    assert "ns-train" not in notice  # trained in process (rff-demo, rff-bench nerf): nothing about ns-train's options
    assert signal.getsignal(signal.SIGINT) is before
    with pytest.raises(KeyboardInterrupt):  # after training, Ctrl-C acts as usual
        signal.raise_signal(signal.SIGINT)


def test_a_checkpoint_with_non_finite_values_is_refused(trained, tmp_path, capsys):
    from rff_field.cli.export_mesh import ExportMesh, run

    run_dir = tmp_path / "run"
    shutil.copytree(trained["config_path"].parent, run_dir)
    (checkpoint,) = (run_dir / "nerfstudio_models").glob("step-*.ckpt")
    state = torch.load(checkpoint, map_location="cpu")
    key = next(k for k in state["pipeline"] if "filter" in k)
    state["pipeline"][key] = torch.full_like(state["pipeline"][key], float("nan"))
    torch.save(state, checkpoint)
    assert run(ExportMesh(load_config=run_dir / "config.yml", output_path=tmp_path / "m.ply")) == 2
    err = capsys.readouterr().err
    assert "holds non-finite values" in err and "diverged" in err and not (tmp_path / "m.ply").exists()


def test_a_config_written_before_line_search_options_moved_loads_as_it_trained():
    dumped = yaml.dump(RFFNeRFModelConfig())
    lines = dumped.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("line_search:"))
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith(" "))  # past its nested keys
    older = "\n".join([*lines[:start], "line_search: false", "line_search_lr_max: 0.5", *lines[end:]])
    loaded = yaml.load(older, Loader=yaml.Loader).line_search
    assert (loaded.enabled, loaded.lr_max) == (False, 0.5)


def test_without_the_line_search_the_checkpoint_and_log_hold_the_fixed_filter_rate(trained, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    config = tiny_config(trained["scene"], tmp_path / "runs", steps=2)
    config.pipeline.model.line_search.enabled = False
    config.logging.steps_per_log = 1
    rate = config.optimizers[FILTER_GROUP]["optimizer"].lr
    config_path = train_in_process(config)
    (checkpoint,) = (config_path.parent / "nerfstudio_models").glob("step-*.ckpt")
    assert float(torch.load(checkpoint, map_location="cpu")["pipeline"]["_model.filter_lr"]) == pytest.approx(rate)
    events = EventAccumulator(str(config_path.parent))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars(FILTER_LR_TAG)] == [
        (0, pytest.approx(rate)),
        (1, pytest.approx(rate)),
    ]


def test_a_scheduler_on_the_filter_group_is_refused(trained, tmp_path):
    from nerfstudio.engine.schedulers import ExponentialDecaySchedulerConfig

    config = tiny_config(trained["scene"], tmp_path / "runs", steps=2)
    config.optimizers[FILTER_GROUP]["scheduler"] = ExponentialDecaySchedulerConfig(lr_final=1e-5)
    with pytest.raises(RuntimeError, match="'filter' group must have no scheduler"):
        train_in_process(config)


def test_the_latest_checkpoint_of_a_run_is_loaded_and_a_run_without_one_refused(trained, tmp_path):
    from rff_field.core.errors import UsageError
    from rff_field.nerf.loading import load_rff_pipeline

    run = tmp_path / "run"
    shutil.copytree(trained["config_path"].parent, run)
    (latest,) = (run / "nerfstudio_models").glob("step-*.ckpt")
    earlier = torch.load(latest, map_location="cpu")
    earlier["step"] = 3
    torch.save(earlier, run / "nerfstudio_models" / "step-000000003.ckpt")  # sorts first, as --steps-per-save writes
    assert load_rff_pipeline(run / "config.yml", test_mode="test")[3] == STEPS - 1
    for checkpoint in (run / "nerfstudio_models").glob("step-*.ckpt"):
        checkpoint.unlink()
    with pytest.raises(UsageError, match=r"no checkpoint \(step-\*\.ckpt\) in .*; train the model first"):
        load_rff_pipeline(run / "config.yml", test_mode="test")
