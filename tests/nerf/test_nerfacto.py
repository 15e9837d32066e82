"""rff-nerfacto: real trainings on the generated unbounded capture (nerfstudio-data) and on a Blender scene, then
evaluation, the line search inside nerfacto's four optimizers, the rate kept in the checkpoint, ns-export
pointcloud with its defaults, tinycudann's torch fallback, and the filter-off baseline."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import open3d as o3d
import pytest
import torch
import yaml
from nerfstudio.cameras.rays import RayBundle
from nerfstudio.data.dataparsers.blender_dataparser import BlenderDataParserConfig
from nerfstudio.data.scene_box import SceneBox
from nerfstudio.engine.callbacks import TrainingCallbackLocation
from nerfstudio.engine.trainer import TrainerConfig
from PIL import Image

from rff_field.core.optim import FILTER_GROUP
from rff_field.nerf.evaluate import evaluate_views, evenly_spaced
from rff_field.nerf.loading import load_rff_pipeline
from rff_field.nerf.model import RFFNeRFModelConfig
from rff_field.nerf.nerfacto_field import FourierNerfactoField
from rff_field.nerf.nerfacto_model import RFFNerfactoModel, RFFNerfactoModelConfig
from rff_field.nerf.synthetic_scene import SceneSpec, write_blender_scene
from rff_field.nerf.training import lite_config, reset_nerfstudio_logging, train_in_process
from tests.nerf.environment import ns_environment
from tests.nerf.rule_watcher import RuleWatcher

STEPS = 12
BIN = Path(sys.executable).parent
GROUPS = {"proposal_networks", "fields", "camera_opt", FILTER_GROUP}


def tiny_config(data: Path, output_dir: Path, steps: int = STEPS, blender: bool = False) -> TrainerConfig:
    """rff-nerfacto-lite shrunk to a fraction of a second per step."""
    from rff_field.nerf.method_configs import rff_nerfacto_lite

    config = lite_config(data, output_dir, steps, experiment_name="tiny", base=rff_nerfacto_lite.config)
    if blender:
        config.pipeline.datamanager.dataparser = BlenderDataParserConfig()
    config.pipeline.datamanager.train_num_rays_per_batch = 64
    config.pipeline.datamanager.eval_num_rays_per_batch = 64
    model = config.pipeline.model
    assert isinstance(model, RFFNerfactoModelConfig)
    model.hidden_dim, model.base_num_layers, model.hidden_dim_color, model.hidden_dim_transient = 16, 2, 16, 16
    model.num_frequencies, model.appearance_embed_dim = 3, 4
    model.num_proposal_samples_per_ray, model.num_nerf_samples_per_ray = (8, 8), 8
    args = {"hidden_dim": 8, "log2_hashmap_size": 8, "num_levels": 2, "max_res": 32, "use_linear": False}
    model.proposal_net_args_list = [dict(args), dict(args)]
    model.compute_lpips = False
    # the default bounds: the rule is checked on its inputs at every step whatever they give, and wider bounds
    # (a rate of 10) drive this tiny field's density to inf inside the box within a few steps
    config.steps_per_eval_batch = 5
    config.steps_per_eval_image = config.steps_per_eval_all_images = 10**9
    return config


def untrained_model(num_train_data: int = 3, **options) -> RFFNerfactoModel:
    """An rff-nerfacto model as configured (torch MLPs unless ``implementation`` says otherwise) in [-1, 1]^3."""
    config = RFFNerfactoModelConfig(**{"implementation": "torch", "compute_lpips": False, **options})
    return config.setup(scene_box=SceneBox(aabb=torch.tensor([[-1.0] * 3, [1.0] * 3])), num_train_data=num_train_data)


@pytest.fixture(scope="module")
def trained(capture, tmp_path_factory):
    """rff-nerfacto-lite trained on the unbounded capture, watched by an independent check of the rule."""
    watch = {}

    def on_setup(trainer):
        watch["watcher"] = RuleWatcher(trainer)
        watch["model"] = trainer.pipeline.model

    config_path = train_in_process(tiny_config(capture, tmp_path_factory.mktemp("runs")), on_setup=on_setup)
    return {"config_path": config_path, **watch}


def test_trains_on_the_unbounded_capture_with_the_line_search(trained):
    model: RFFNerfactoModel = trained["model"]
    watcher: RuleWatcher = trained["watcher"]
    assert set(model.get_param_groups()) == GROUPS
    assert len(model.line_search.history) == STEPS == len(watcher.observed)
    watcher.assert_rule_applied()
    (checkpoint,) = (trained["config_path"].parent / "nerfstudio_models").glob("step-*.ckpt")
    state = torch.load(checkpoint, map_location="cpu")  # weights_only, as ns-eval and ns-viewer load it
    assert set(state["optimizers"]) == GROUPS and set(state["schedulers"]) == GROUPS - {FILTER_GROUP}
    # the last step's rate is in the checkpoint, and a loaded model shows it in the viewer
    assert float(state["pipeline"]["_model.filter_lr"]) == pytest.approx(model.line_search.history[-1], rel=1e-6)
    _, pipeline, loaded, step = load_rff_pipeline(trained["config_path"], test_mode="test")
    assert step == STEPS - 1
    assert loaded.viewer_filter_lr.value == pytest.approx(model.line_search.history[-1], rel=1e-5)
    assert loaded.viewer_filter_lr.value > 0


def test_evaluates_the_held_out_views(trained, tmp_path):
    _, pipeline, model, _ = load_rff_pipeline(trained["config_path"], test_mode="test")
    metrics = evaluate_views(pipeline, tmp_path, progress=False)
    assert metrics["num_views"] == 1  # nerfstudio-data holds out one view in ten
    assert np.isfinite(metrics["mean"]["psnr"]) and 0 < metrics["mean"]["ssim"] <= 1
    outputs = model.get_outputs_for_camera(pipeline.datamanager.eval_dataset.cameras[0:1])
    for key in ("rgb", "depth", "accumulation", "normals", "pred_normals", "prop_depth_0"):
        assert outputs[key].shape[:2] == (16, 16)
    assert 0 <= float(outputs["normals"].min()) and float(outputs["normals"].max()) <= 1  # as ns-export expects


def test_trains_and_evaluates_on_a_blender_scene(tmp_path):
    scene = write_blender_scene(tmp_path / "scene", SceneSpec(image_size=16, num_train=4, num_val=1, num_test=3))
    config_path = train_in_process(tiny_config(scene, tmp_path / "runs", steps=3, blender=True))
    _, pipeline, model, _ = load_rff_pipeline(config_path, test_mode="test")
    metrics = evaluate_views(pipeline, tmp_path / "eval", progress=False)
    assert metrics["num_views"] == 3 and np.isfinite(metrics["mean"]["psnr"])  # three: a median would differ
    for key, mean in metrics["mean"].items():
        assert mean == pytest.approx(np.mean([view[key] for view in metrics["views"]]), rel=1e-9), key
    renders = tmp_path / "eval" / "renders"
    assert sorted(p.name for p in renders.glob("r_0_*")) == ["r_0_depth.png", "r_0_gt.png", "r_0_rgb.png"]
    dataset = pipeline.datamanager.eval_dataset
    index = next(i for i, name in enumerate(dataset.image_filenames) if Path(name).stem == "r_0")
    rendered = model.get_outputs_for_camera(dataset.cameras[index : index + 1])["rgb"].clamp(0, 1).numpy()
    written = np.asarray(Image.open(renders / "r_0_rgb.png"), dtype=np.float64) / 255
    assert np.abs(written - rendered).max() <= 0.5 / 255 + 1e-6  # the PNG is the rendering, rounded to 8 bits


def test_evenly_spaced_views_run_from_the_first_to_the_last():
    assert evenly_spaced(10, 3) == [0, 4, 9] and evenly_spaced(3, 10) == [0, 1, 2] and evenly_spaced(7, 1) == [0]


def test_coarse_sampling_for_the_first_steps_then_the_configured_counts(tmp_path):
    scene = write_blender_scene(tmp_path / "scene", SceneSpec(image_size=16, num_train=4, num_val=1, num_test=1))
    config = tiny_config(scene, tmp_path / "runs", steps=5, blender=True)
    model_config = config.pipeline.model
    assert isinstance(model_config, RFFNerfactoModelConfig)
    model_config.coarse_sampling_steps = 3
    model_config.coarse_proposal_samples_per_ray, model_config.coarse_nerf_samples_per_ray = (5, 4), 3
    samples = {True: [], False: []}  # training or not: (proposal samples of each level, field samples) per call

    def record(sampler, inputs, outputs):
        ray_samples, _, ray_samples_list = outputs
        samples[sampler.training].append((tuple(s.shape[-1] for s in ray_samples_list), ray_samples.shape[-1]))

    def on_setup(trainer):
        trainer.pipeline.model.proposal_sampler.register_forward_hook(record)

    config_path = train_in_process(config, on_setup=on_setup)
    assert samples[True] == [((5, 4), 3)] * 3 + [((8, 8), 8)] * 2
    _, pipeline, model, _ = load_rff_pipeline(config_path, test_mode="test")  # a loaded run samples as configured
    samples[False].clear()
    model.proposal_sampler.register_forward_hook(record)
    outputs = model.get_outputs_for_camera(pipeline.datamanager.eval_dataset.cameras[0:1])
    assert outputs["rgb"].shape[:2] == (16, 16)
    assert samples[False] and set(samples[False]) == {((8, 8), 8)}


def test_ns_export_pointcloud_with_its_defaults(trained, tmp_path):
    """The real command, default normal method (the model's 'normals' output): a coloured cloud with normals."""
    cmd = [str(BIN / "ns-export"), "pointcloud", "--load-config", str(trained["config_path"]),
           "--output-dir", str(tmp_path / "cloud"), "--num-points", "300"]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=400, cwd=tmp_path, env=ns_environment())
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    assert "not found" not in out.stdout
    cloud = o3d.io.read_point_cloud(str(tmp_path / "cloud" / "point_cloud.ply"))
    assert len(cloud.points) > 0 and cloud.has_normals() and cloud.has_colors()
    normals = np.asarray(cloud.normals)
    np.testing.assert_allclose(np.linalg.norm(normals, axis=1), 1, atol=1e-3)


def test_export_mesh_of_the_main_field(trained, tmp_path, capsys):
    from rff_field.cli.export_mesh import ExportMesh, run
    from rff_field.common.mesh import sample_grid

    model = trained["model"]
    box = ([-0.5] * 3, [0.5] * 3)
    grid = sample_grid(lambda x: model.field.density_fn(x)[..., 0], *box, 16)
    threshold = float(np.quantile(grid, 0.9))  # a level the short-trained density surely crosses
    args = dict(
        load_config=trained["config_path"], resolution=16, threshold=threshold, bbox_min=box[0], bbox_max=box[1]
    )
    assert run(ExportMesh(output_path=tmp_path / "mesh.ply", **args)) == 0
    mesh = o3d.io.read_triangle_mesh(str(tmp_path / "mesh.ply"))
    assert len(mesh.triangles) > 0 and mesh.has_vertex_colors()
    assert run(ExportMesh(output_path=tmp_path / "coarse.ply", field="coarse", **args)) == 2
    assert "has one main field" in capsys.readouterr().err and not (tmp_path / "coarse.ply").exists()


def test_the_tcnn_option_falls_back_to_torch_with_nerfstudios_notice(capsys):
    """tinycudann is absent here: 'tcnn' builds the same torch modules as 'torch', and says so."""
    from nerfstudio.utils.external import TCNN_EXISTS

    assert not TCNN_EXISTS
    models = {}
    for implementation in ("torch", "tcnn"):
        torch.manual_seed(0)
        models[implementation] = untrained_model(implementation=implementation)
        printed = capsys.readouterr().out
        assert ("Using a slow implementation for the MLP module" in printed) == (implementation == "tcnn")
    torch_model, fallback = models["torch"], models["tcnn"]
    assert fallback.field.mlp_base.mlp.tcnn_encoding is None and fallback.field.mlp_head.tcnn_encoding is None
    shapes = {name: p.shape for name, p in torch_model.named_parameters()}
    assert {name: p.shape for name, p in fallback.named_parameters()} == shapes
    positions = torch.rand(64, 3) * 2 - 1
    with torch.no_grad():
        assert torch.equal(torch_model.field.density_fn(positions), fallback.field.density_fn(positions))


def test_filter_off_is_the_baseline_with_one_change():
    on, off = untrained_model(), untrained_model(use_filter=False)
    assert set(on.get_param_groups()) == GROUPS and set(off.get_param_groups()) == GROUPS - {FILTER_GROUP}
    for name in GROUPS - {FILTER_GROUP}:
        assert [p.shape for p in on.get_param_groups()[name]] == [p.shape for p in off.get_param_groups()[name]]
    d = 3 + 3 * 2 * 12  # log-linear PE, 12 bands per axis, input included
    assert [tuple(p.shape) for p in on.get_param_groups()[FILTER_GROUP]] == [(d, d)] * 3
    assert isinstance(on.field, FourierNerfactoField) and not hasattr(on.field, "log2_hashmap_size")


def test_rff_nerfacto_filters_in_the_residual_form_unless_asked_for_the_papers():
    assert untrained_model().field.mlp_base.encoding.residual
    assert not untrained_model(filter_residual=False).field.mlp_base.encoding.residual
    assert not RFFNeRFModelConfig().position_spec().filter_residual  # rff-nerf keeps the paper's form
    assert RFFNeRFModelConfig(filter_residual=True).position_spec().filter_residual


def test_nerfactos_distortion_loss_is_off_unless_asked_for():
    rays = RayBundle(
        origins=torch.tensor([[0.0, 0.0, -3.0]]).repeat(8, 1),
        directions=torch.nn.functional.normalize(torch.randn(8, 3).abs() * 0.1 + torch.tensor([0.0, 0.0, 1.0]), dim=-1),
        pixel_area=torch.full((8, 1), 1e-4),
        camera_indices=torch.zeros(8, 1, dtype=torch.long),
    )
    batch = {"image": torch.rand(8, 3)}

    def losses(**options):
        torch.manual_seed(0)
        model = untrained_model(num_train_data=1, **options)
        with torch.no_grad():
            outputs = model(rays)
            return model.get_loss_dict(outputs, batch, model.get_metrics_dict(outputs, batch))

    default, nerfactos = losses(), losses(distortion_loss_mult=0.002)
    assert float(nerfactos["distortion_loss"]) > 0
    assert float(default.get("distortion_loss", 0.0)) == 0.0
    assert float(default["rgb_loss"]) == pytest.approx(float(nerfactos["rgb_loss"]))


def _subnormal_survives() -> bool:
    """Whether this thread keeps a subnormal product (1e-40 lies below float32's smallest normal, 1.2e-38)."""
    return float(torch.tensor([1e-30]) * 1e-10) != 0.0


@pytest.mark.parametrize("model_name", ["rff-nerf", "rff-nerfacto"])
def test_a_forward_pass_sets_the_threads_handling_of_subnormals(model_name):
    """Densities of empty space underflow to subnormals, which some CPUs compute with many times slower; the models
    flush them (``flush_denormals``) on whichever thread renders, and leave them with the option off."""
    if not torch.set_flush_denormal(False):
        pytest.skip("this CPU cannot flush subnormal floats")
    rays = RayBundle(
        origins=torch.tensor([[0.0, 0.0, -4.0]]).repeat(4, 1),
        directions=torch.tensor([[0.0, 0.0, 1.0]]).repeat(4, 1),
        pixel_area=torch.full((4, 1), 1e-4),
        camera_indices=torch.zeros(4, 1, dtype=torch.long),
    )

    def model(**options):
        if model_name == "rff-nerfacto":
            return untrained_model(num_train_data=1, **options)
        config = RFFNeRFModelConfig(num_coarse_samples=4, num_importance_samples=4, compute_lpips=False, **options)
        return config.setup(scene_box=SceneBox(aabb=torch.tensor([[-1.5] * 3, [1.5] * 3])), num_train_data=1)

    try:
        assert _subnormal_survives()
        with torch.no_grad():
            model()(rays)
            assert not _subnormal_survives()
            model(flush_denormals=False)(rays)
            assert _subnormal_survives()
    finally:
        torch.set_flush_denormal(False)


@pytest.mark.parametrize("option, before", [("filter_residual", False), ("coarse_sampling_steps", 0)])
def test_runs_saved_before_an_option_load_as_they_trained(option, before):
    """nerfstudio reads a run's config.yml into the dataclass without calling __init__: a key missing from an older
    file must mean what that run trained (the paper's form, nerfacto's counts from the first step), not today's
    default."""
    dumped = yaml.dump(RFFNerfactoModelConfig())
    assert getattr(yaml.load(dumped, Loader=yaml.Loader), option) != before
    older = "\n".join(line for line in dumped.splitlines() if not line.startswith(f"{option}:"))
    assert older != dumped and getattr(yaml.load(older, Loader=yaml.Loader), option) == before


@pytest.mark.parametrize("fused", [False, True])
def test_line_search_under_mixed_precision_and_a_grad_scaler(capture, tmp_path, fused):
    """nerfstudio's train_iteration with autocast and an enabled GradScaler (a CPU one: nerfstudio's own disables
    itself without CUDA): the rule sees the unscaled gradients, also with the line search compiled."""
    reset_nerfstudio_logging()
    config = tiny_config(capture, tmp_path / "runs", steps=4)
    config.pipeline.model.line_search.fused = fused
    config.set_timestamp()
    trainer = config.setup(local_rank=0, world_size=1)
    trainer.mixed_precision = True  # nerfstudio turns it off on the CPU; autocast runs in bfloat16 here
    trainer.grad_scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10)
    trainer.setup()
    watcher = RuleWatcher(trainer)
    model: RFFNerfactoModel = trainer.pipeline.model
    try:
        for step in range(4):
            trainer.step = step
            trainer.pipeline.train()
            for callback in trainer.callbacks:
                callback.run_callback_at_location(step, TrainingCallbackLocation.BEFORE_TRAIN_ITERATION)
            trainer.train_iteration(step)
            for callback in trainer.callbacks:
                callback.run_callback_at_location(step, TrainingCallbackLocation.AFTER_TRAIN_ITERATION)
    finally:
        trainer.shutdown()
        reset_nerfstudio_logging()
    assert trainer.grad_scaler.get_scale() >= 2.0**9  # the gradients were scaled (by 1024, or 512 after an overflow)
    assert len(watcher.inputs) == 4
    watcher.assert_rule_applied()
    assert float(model.filter_lr) == pytest.approx(model.line_search.history[-1], rel=1e-6)
    assert model.line_search.compiled == fused


def test_full_size_method_trains_and_evaluates(capture, tmp_path):
    """``rff-nerfacto`` as configured (sizes, samples, mixed precision, parallel data manager; tinycudann's torch
    fallback), two steps on the unbounded capture, then the held-out view."""
    from rff_field.nerf.method_configs import rff_nerfacto

    config = lite_config(capture, tmp_path / "runs", 2, experiment_name="full", base=rff_nerfacto.config)
    config.pipeline.datamanager.train_num_rays_per_batch = 256  # the model as configured, fewer rays per step
    config.pipeline.model.compute_lpips = False
    config.steps_per_eval_batch = config.steps_per_eval_image = config.steps_per_eval_all_images = 10**9
    _, pipeline, model, step = load_rff_pipeline(train_in_process(config), test_mode="test")
    assert step == 1 and model.config.hidden_dim == rff_nerfacto.config.pipeline.model.hidden_dim
    assert model.config.coarse_sampling_steps == 0  # chosen by the data: no coarse start on a capture
    assert float(model.filter_lr) > 0
    metrics = evaluate_views(pipeline, tmp_path / "eval", progress=False)
    assert metrics["num_views"] == 1 and np.isfinite(metrics["mean"]["psnr"])


def test_the_lite_decays_its_rates_over_its_own_run():
    """rff-nerfacto-lite's fields and proposal networks reach their final rate at its last step."""
    from rff_field.nerf.method_configs import rff_nerfacto_lite

    config = rff_nerfacto_lite.config
    for group in ("fields", "proposal_networks"):
        lr, schedule = config.optimizers[group]["optimizer"].lr, config.optimizers[group]["scheduler"]
        optimizer = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=lr)
        multiplier = schedule.setup().get_scheduler(optimizer, lr).lr_lambdas[0]
        assert lr * multiplier(0) == pytest.approx(1e-2)
        assert lr * multiplier(config.max_num_iterations - 1) == pytest.approx(schedule.lr_final, rel=1e-3)


def test_the_density_mlp_maps_the_contracted_cube_onto_the_embeddings_interval():
    from nerfstudio.field_components.encodings import Identity

    from rff_field.nerf.nerfacto_field import FourierDensityMLP

    seen = []
    encoding = Identity(in_dim=3)
    encoding.register_forward_hook(lambda module, inputs, output: seen.append(inputs[0]))
    mlp = FourierDensityMLP(encoding, num_layers=3, layer_width=16, out_dim=5, implementation="torch")
    out = mlp(torch.tensor([[0.0, 0.5, 1.0]]))  # nerfacto's contracted positions lie in [0, 1]
    assert torch.equal(seen[0], torch.tensor([[-2.0, 0.0, 2.0]])) and out.shape == (1, 5)
    assert [(layer.in_features, layer.out_features) for layer in mlp.mlp.layers] == [(3, 16), (16, 16), (16, 5)]
    assert isinstance(mlp.mlp.activation, torch.nn.ReLU) and mlp.mlp.out_activation is None


def test_nerfactos_options_reach_the_field_and_the_proposal_networks():
    default = untrained_model()
    assert default.field.spatial_distortion is not None and default.field.appearance_embedding_dim > 0
    grids = [dict(hidden_dim=8, log2_hashmap_size=10, num_levels=4, max_res=64, use_linear=False),
             dict(hidden_dim=12, log2_hashmap_size=10, num_levels=4, max_res=128, use_linear=False)]  # fmt: skip
    model = untrained_model(disable_scene_contraction=True, hidden_dim_color=24, use_appearance_embedding=False,
                            average_init_density=0.5, proposal_net_args_list=grids)  # fmt: skip
    field = model.field
    assert field.spatial_distortion is None and field.appearance_embedding_dim == 0
    assert field.mlp_head.layer_width == 24 and field.average_init_density == 0.5
    proposals = [(p.spatial_distortion, p.average_init_density, p.mlp_base[1].layer_width, int(p.max_res))
                 for p in model.proposal_networks]  # fmt: skip
    assert proposals == [(None, 0.5, 8, 64), (None, 0.5, 12, 128)]
    assert model.renderer_depth.method == "median"  # nerfacto's depth output


def test_an_lpips_that_could_not_be_computed_is_left_out_of_the_metrics(monkeypatch):
    from nerfstudio.models.nerfacto import NerfactoModel

    model = untrained_model()
    for lpips, kept in ((float("nan"), False), (0.25, True)):
        monkeypatch.setattr(NerfactoModel, "get_image_metrics_and_images",
                            lambda self, outputs, batch, value=lpips: ({"psnr": 20.0, "lpips": value}, {}))  # fmt: skip
        metrics, _ = model.get_image_metrics_and_images({}, {})
        assert ("lpips" in metrics) is kept and metrics["psnr"] == 20.0


@pytest.mark.parametrize(
    "options",
    [dict(lr_final=1e-4, max_steps=50), dict(lr_final=1e-4, max_steps=50, warmup_steps=10, lr_pre_warmup=1e-6),
     dict(lr_final=1e-4, max_steps=50, warmup_steps=10, ramp="linear"), dict(max_steps=50)],
    ids=["decay", "cosine warmup", "linear warmup", "no lr_final"],
)  # fmt: skip
def test_the_float_scheduler_follows_nerfstudios_schedule(options):
    from nerfstudio.engine.schedulers import ExponentialDecaySchedulerConfig

    from rff_field.nerf.schedulers import FloatExponentialDecaySchedulerConfig

    def rates(config) -> list:
        optimizer = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=1e-2)
        scheduler = config.setup().get_scheduler(optimizer, 1e-2)
        return [scheduler.lr_lambdas[0](step) for step in range(60)]  # past max_steps too

    ours = rates(FloatExponentialDecaySchedulerConfig(**options))
    theirs = rates(ExponentialDecaySchedulerConfig(**options))
    assert all(type(rate) is float for rate in ours)  # no numpy scalar reaches the checkpoint
    assert ours == pytest.approx([float(rate) for rate in theirs], rel=1e-9)
