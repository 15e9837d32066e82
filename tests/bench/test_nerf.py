"""The NeRF benchmark: variants trained, resumed, timed side by side and reported, on a tiny generated scene."""

import json

import pytest

from rff_field.bench.jobs import JobOptions
from rff_field.bench.nerf import NerfBenchConfig, NerfReport, NerfTiming
from rff_field.core.errors import UsageError
from rff_field.nerf.synthetic_scene import SceneSpec, write_blender_scene

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

    timing = NerfTiming(bench=bench, rounds=1, block=1, warmup=1).main()
    assert set(timing["ratio_median"]) == {"off", "on"} and timing["ratio_median"]["off"] == 1.0
    dest = tmp_path / "report"
    NerfReport(out=out, dest=dest, title="tiny").main()
    markdown = (dest / "results.md").read_text()
    assert "| on |" in markdown and "on − off:" in markdown and (dest / "test_views.png").is_file()


def test_wall_time_budget_stops_training(scene, tmp_path):
    bench = tiny_bench(scene, tmp_path / "bench", steps=1000, seconds=1e-6, variants=(f"on:rff-nerf-lite,{TINY}",))
    bench.main()
    run = json.loads((tmp_path / "bench" / "runs" / "on" / "metrics.json").read_text())
    assert run["steps"] == 1 and run["seconds_budget"] == 1e-6


def test_bad_variants_fail_before_training(scene, tmp_path):
    with pytest.raises(UsageError, match="unknown nerfstudio method"):
        tiny_bench(scene, tmp_path, variants=("nosuchmethod",)).check()
    with pytest.raises(UsageError, match="unknown option"):
        tiny_bench(scene, tmp_path, variants=("rff-nerf-lite,colour=red",)).check()
    with pytest.raises(UsageError, match="share a label"):
        tiny_bench(scene, tmp_path, variants=("rff-nerf-lite", "rff-nerf-lite")).check()
    with pytest.raises(UsageError, match="out of range"):
        tiny_bench(scene, tmp_path, jobs=JobOptions(job=5)).main()
    assert not (tmp_path / "runs").exists()
