"""The NeRF benchmark: variants trained, resumed, timed side by side and reported, on a tiny generated scene."""

import copy
import json
from pathlib import Path

import pytest
import yaml
from nerfstudio.data.dataparsers.blender_dataparser import BlenderDataParserConfig
from nerfstudio.data.dataparsers.nerfstudio_dataparser import NerfstudioDataParserConfig

from rff_field.bench.jobs import JobOptions
from rff_field.bench.nerf import NerfBenchConfig, NerfEvalTiming, NerfReport, NerfTiming, dataparser_for
from rff_field.bench.variants import set_options
from rff_field.core.errors import UsageError
from rff_field.nerf.synthetic_scene import CaptureSpec, SceneSpec, write_blender_scene, write_nerfstudio_capture

TINY = "base_mlp_num_layers=2,base_mlp_layer_width=16,skip_connections=,num_coarse_samples=4,num_importance_samples=4"


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    spec = SceneSpec(image_size=8, num_train=3, num_val=1, num_test=2, supersample=1)
    return write_blender_scene(tmp_path_factory.mktemp("nerf-bench") / "scene", spec)


def tiny_bench(scene, out, **kwargs) -> NerfBenchConfig:
    variants = (f"off:rff-nerf-lite,use_filter=false,{TINY}", f"on:rff-nerf-lite,{TINY}")
    options = dict(data=scene, out=out, variants=variants, steps=3, scale=1.0)
    options.update(kwargs)
    return NerfBenchConfig(**options)


def test_variants_train_resume_and_report(scene, tmp_path):
    out = tmp_path / "bench"
    bench = tiny_bench(scene, out)
    bench.main()
    runs = {label: json.loads((out / "runs" / label / "metrics.json").read_text()) for label in ("off", "on")}
    assert runs["off"]["params_filter"] == 0 and runs["on"]["params_filter"] > 0
    assert runs["on"]["params_inr"] == runs["off"]["params_inr"]  # the filter is the only difference
    assert runs["on"]["steps"] == 3 and len(runs["on"]["test_views"]) == 2 and runs["on"]["filter_lr"]["steps"] == 3
    stamp = (out / "runs" / "on" / "metrics.json").stat().st_mtime_ns
    bench.main()  # finished variants are kept
    assert (out / "runs" / "on" / "metrics.json").stat().st_mtime_ns == stamp
    with pytest.raises(UsageError, match=r"another protocol \(runs/off, runs/on ran with another variant or length"):
        tiny_bench(scene, out, steps=4).main()  # the finished 3-step variants would pass as 4-step ones
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="mine is not empty and holds no benchmark"):
        tiny_bench(scene, mine).main()

    timing = NerfTiming(bench=bench, rounds=1, block=1, warmup=1).main()
    assert set(timing["ratio_median"]) == {"off", "on"} and timing["ratio_median"]["off"] == 1.0
    rendering = NerfEvalTiming(out=out, labels=("on", "off"), views=1, rounds=2).main()
    assert rendering["ratio_to_first"]["on"] == 1.0 and rendering["rays_per_second_median"]["off"] > 0
    with pytest.raises(UsageError, match="no finished variant"):
        NerfEvalTiming(out=out, labels=("nosuch",), overwrite=True).main()
    with pytest.raises(UsageError, match=r"already holds timing-.*\.json; pass --overwrite"):
        NerfTiming(bench=bench, rounds=1, block=1, warmup=1).main()  # refused before any trainer is set up
    dest = tmp_path / "report"
    NerfReport(out=out, dest=dest, title="tiny").main()
    markdown = (dest / "results.md").read_text()
    assert "| on |" in markdown and "on − off:" in markdown and (dest / "test_views.png").is_file()
    assert "taking turns in one process" in markdown


@pytest.mark.parametrize("clock", ["wall", "cpu"])
def test_time_budget_stops_training(scene, tmp_path, clock):
    variants = (f"on:rff-nerf-lite,{TINY}",)
    tiny_bench(scene, tmp_path / "bench", steps=1000, seconds=1e-6, clock=clock, variants=variants).main()
    run = json.loads((tmp_path / "bench" / "runs" / "on" / "metrics.json").read_text())
    assert run["steps"] == 1 and run["seconds_budget"] == 1e-6 and run["clock"] == clock
    assert 0 < run["train_cpu_seconds"]


def test_bad_variants_fail_before_training(scene, tmp_path):
    with pytest.raises(UsageError, match="unknown nerfstudio method"):
        tiny_bench(scene, tmp_path, variants=("nosuchmethod",)).check()
    with pytest.raises(UsageError, match="unknown option"):
        tiny_bench(scene, tmp_path, variants=("rff-nerf-lite,colour=red",)).check()
    with pytest.raises(UsageError, match="share a label"):
        tiny_bench(scene, tmp_path, variants=("rff-nerf-lite", "rff-nerf-lite")).check()
    with pytest.raises(UsageError, match="out of range"):
        tiny_bench(scene, tmp_path, jobs=JobOptions(job=5)).main()
    with pytest.raises(UsageError, match=r"variant 'ls': --pipeline.model.line-search.lr-max must be"):
        tiny_bench(scene, tmp_path, variants=("ls:rff-nerf-lite,line_search.lr_max=-1",)).main()
    assert not (tmp_path / "runs").exists() and not (tmp_path / "nerfstudio").exists()


def test_images_too_small_to_evaluate_at_the_scale_are_refused_before_training(scene, tmp_path):
    message = r"the images of the dataset are 8x8, 4x4 at --scale 0.5: evaluation \(SSIM\) needs at least 8 pixels"
    with pytest.raises(UsageError, match=message):
        tiny_bench(scene, tmp_path / "bench", scale=0.5).check()
    from rff_field.nerf.method_configs import rff_nerf_lite
    from rff_field.nerf.pipeline import check_pipeline_config

    config = copy.deepcopy(rff_nerf_lite.config.pipeline)
    config.datamanager.data = scene
    config.datamanager.camera_res_scale_factor = 0.5
    with pytest.raises(UsageError, match="at --pipeline.datamanager.camera-res-scale-factor 0.5"):
        check_pipeline_config(config)


NERFACTO_TINY = (
    "hidden_dim=16,base_num_layers=2,hidden_dim_color=16,num_frequencies=3,appearance_embed_dim=4,"
    "num_proposal_samples_per_ray=8 8,num_nerf_samples_per_ray=4,train_num_rays_per_batch=64,compute_lpips=false"
)


def test_nerfacto_variants_on_a_blender_scene(scene, tmp_path):
    """rff-nerfacto-lite reads transforms.json by default; the benchmark gives it the Blender parser for a Blender
    scene, and nerfstudio's optimizers are reachable by their dotted path."""
    out = tmp_path / "bench"
    lr = "optimizers.fields.optimizer.lr=3e-3"
    bench = tiny_bench(scene, out, steps=2, variants=(f"acto:rff-nerfacto-lite,{NERFACTO_TINY},{lr}",))
    bench.main()
    run = json.loads((out / "runs" / "acto" / "metrics.json").read_text())
    assert run["steps"] == 2 and len(run["test_views"]) == 2 and run["eval_rays_per_second"] > 0
    assert run["params_filter"] == 3 * (3 + 3 * 2 * 3) ** 2
    config = yaml.load(Path(run["config"]).read_text(), Loader=yaml.Loader)
    assert isinstance(config.pipeline.datamanager.dataparser, BlenderDataParserConfig)
    assert config.optimizers["fields"]["optimizer"].lr == 3e-3


def test_dataparser_follows_the_layout(scene, tmp_path):
    capture = write_nerfstudio_capture(tmp_path / "capture", CaptureSpec(image_size=8, num_views=2, supersample=1))
    assert isinstance(dataparser_for(scene, NerfstudioDataParserConfig()), BlenderDataParserConfig)
    assert isinstance(dataparser_for(capture, BlenderDataParserConfig()), NerfstudioDataParserConfig)
    kept = NerfstudioDataParserConfig(scale_factor=2.0)
    assert dataparser_for(capture, kept) is kept and dataparser_for(tmp_path, kept) is kept


def test_options_inside_dictionaries_need_their_full_path():
    """nerfstudio's optimizer configs sit in a dict: their dotted path sets them, a short name stays what it was."""
    from rff_field.bench.nerf import base_config

    config = copy.deepcopy(base_config("rff-nerfacto-lite"))
    set_options([config], {"optimizers.filter.optimizer.eps": "1e-6", "eps": "1e-4"})
    assert config.optimizers["filter"]["optimizer"].eps == 1e-6
    assert config.pipeline.model.line_search.eps == 1e-4  # 'eps' alone: the line search's, as before


def test_eval_views_are_evenly_spaced(scene, tmp_path):
    out = tmp_path / "bench"
    bench = tiny_bench(scene, out, steps=1, eval_views=1, variants=(f"on:rff-nerf-lite,{TINY}",))
    bench.main()
    run = json.loads((out / "runs" / "on" / "metrics.json").read_text())
    assert [view["view"] for view in run["test_views"]] == ["r_0"]
    with pytest.raises(UsageError, match="--eval-views must be at least 1"):
        tiny_bench(scene, out, eval_views=0).check()


def test_report_shows_only_views_every_variant_rendered(scene, tmp_path):
    out = tmp_path / "bench"
    tiny_bench(scene, out, steps=1, variants=(f"all:rff-nerf-lite,{TINY}",)).main()  # both test views
    tiny_bench(scene, out, steps=1, eval_views=1, variants=(f"one:rff-nerf-lite,{TINY}",)).main()  # r_0 only
    NerfReport(out=out, dest=tmp_path / "report", title="tiny", views=("r_1", "r_0")).main()
    assert (tmp_path / "report" / "test_views.png").is_file()
    runs = {label: json.loads((out / "runs" / label / "metrics.json").read_text()) for label in ("all", "one")}
    gap = runs["one"]["test_views"][0]["psnr"] - runs["all"]["test_views"][0]["psnr"]  # on r_0, the view both have
    markdown = (tmp_path / "report" / "results.md").read_text()
    assert f"one − all: {gap:+.2f} dB PSNR" in markdown and "of 1 test views (the views both rendered)" in markdown
