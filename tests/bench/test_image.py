"""``rff-image bench``: variant parsing, parameter matching, the job grid, resuming, sharding, summaries."""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import replace

import imageio.v3 as iio
import numpy as np
import pytest

from rff_field.bench.image import (
    BenchConfig,
    apply_overrides,
    build_jobs,
    check_merge,
    job_config,
    match_size,
    merge_runs,
    parameter_count,
    parse_variant,
    run_bench,
)
from rff_field.bench.jobs import JobOptions
from rff_field.image.data import UsageError
from rff_field.image.fit import FitConfig
from rff_field.inr.config import NetworkConfig

pytestmark = pytest.mark.usefixtures("one_thread")


def test_parse_variant_forms():
    preset = parse_variant("filtered-pe-fixed-lr")
    assert preset.label == "filtered-pe-fixed-lr"
    assert preset.overrides == {"method": "filtered-pe", "line_search.enabled": "false"}
    labelled = parse_variant("hi:filtered-rff,rff_sigma=40,lr-max=1e-2")
    assert labelled.label == "hi"
    assert labelled.overrides == {"method": "filtered-rff", "rff_sigma": "40", "lr_max": "1e-2"}
    plain = parse_variant("mlp-rff,rff_sigma=5")
    assert plain.label == "mlp-rff_rff_sigma_5" and plain.overrides["rff_sigma"] == "5"
    with pytest.raises(UsageError):
        parse_variant("rff_sigma=5")
    with pytest.raises(UsageError):
        parse_variant("mlp-rff,rff_sigma")
    with pytest.raises(UsageError, match=r"the method is its first item; write siren,\.\.\. instead"):
        parse_variant("mlp-pe,method=siren")


def test_filter_options_given_to_a_method_without_filter_are_named(capsys):
    parse_variant("mlp-pe,lr_max=1e-2,filter_residual=true,hidden_features=8")
    assert "mlp-pe has no filter, so lr_max, filter_residual are ignored" in capsys.readouterr().out
    parse_variant("filtered-pe,lr_max=1e-2")
    assert "no filter" not in capsys.readouterr().out


@pytest.mark.parametrize("label", ["..", ".", "a/b", "../../evil", "_x", "a b"])
def test_a_label_that_is_not_a_plain_folder_name_is_refused(label):
    # labels name job folders: '..' or 'a/b' would write outside them or over another job's
    with pytest.raises(UsageError, match="the label of variant .* names files or folders"):
        parse_variant(f"{label}:mlp-pe")
    with pytest.raises(UsageError, match="the label before ':' is empty"):
        parse_variant(":mlp-pe")


def test_overrides_are_typed_and_checked():
    base = FitConfig()
    config = apply_overrides(
        base,
        {"method": "filtered-rff", "rff_sigma": "40", "line_search": "false", "lr": "2e-3", "filter_layers": "2",
         "direction": "gradient"},
    )  # fmt: skip
    assert config.network.method == "filtered-rff" and config.network.rff_sigma == 40.0
    assert config.line_search.enabled is False and config.lr == 2e-3 and config.network.filter_layers == 2
    assert config.line_search.direction == "gradient"
    assert base.network.method == "filtered-pe" and base.line_search.enabled  # the base is untouched
    with pytest.raises(UsageError, match="unknown option"):
        apply_overrides(base, {"method": "mlp-pe", "nope": "1"})
    with pytest.raises(UsageError, match="choose one of"):
        apply_overrides(base, {"method": "mlp-pe", "direction": "sideways"})
    with pytest.raises(UsageError, match="true or false"):
        apply_overrides(base, {"method": "mlp-pe", "line_search": "maybe"})
    with pytest.raises(UsageError, match="int"):
        apply_overrides(base, {"method": "mlp-pe", "iters": "many"})


def test_match_size_equalises_parameters_by_width_or_depth():
    filtered = NetworkConfig(method="filtered-rff", hidden_features=64)
    target = parameter_count(filtered, 3, 192)
    plain = NetworkConfig(method="mlp-rff", hidden_features=64)
    width = match_size(plain, target, 3, 192)
    assert width > 64
    assert abs(parameter_count(replace(plain, hidden_features=width), 3, 192) - target) / target < 0.01
    # 64 -> 64 filter (3 layers, 12,288 weights) against hidden layers of 64x64+64: three more layers
    pe = NetworkConfig(method="mlp-pe", pe="loglinear", pe_frequencies=16, hidden_features=64)
    target = parameter_count(replace(pe, method="filtered-pe"), 3, 192)
    depth = match_size(pe, target, 3, 192, by="depth")
    assert depth == pe.hidden_layers + 3
    with pytest.raises(UsageError, match="match_by=height"):
        match_size(pe, target, 3, 192, by="height")


@pytest.fixture
def image_folder(tmp_path):
    folder = tmp_path / "images"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for name in ("one", "two"):
        smooth = np.cumsum(np.cumsum(rng.random((16, 20, 3)), 0), 1)
        iio.imwrite(folder / f"{name}.png", (255 * smooth / smooth.max()).astype(np.uint8))
    (folder / "notes.txt").write_text("not an image")
    return folder


def tiny_bench(folder, out, **kwargs) -> BenchConfig:
    fit = FitConfig(iters=4, network=NetworkConfig(hidden_features=8, rff_frequencies=8, pe_frequencies=4),
                    lpips=False, device="cpu")  # fmt: skip
    options = dict(
        images=folder, out=out, variants=("mlp-pe", "filtered-rff", "eq:mlp-rff,match_params=filtered-rff"), fit=fit,
        downsample=1, sweep_names=("one",), sweep_sigmas=(1.0, 10.0), sweep_pe_scales=(4.0,), sweep_iters=3,
        long_names=("two",), long_iters=6, long_variants=("mlp-pe",), progress=False,
    )  # fmt: skip
    job_options = {key: kwargs.pop(key) for key in ("shard", "job", "list_jobs", "overwrite") if key in kwargs}
    options.update(kwargs)
    return BenchConfig(**options, jobs=JobOptions(**job_options))


def test_job_grid(image_folder, tmp_path):
    jobs = build_jobs(tiny_bench(image_folder, tmp_path / "out"))
    folders = [str(job.folder) for job in jobs]
    assert folders[:6] == ["runs/one/mlp-pe", "runs/two/mlp-pe", "runs/one/filtered-rff", "runs/two/filtered-rff",
                           "runs/one/eq", "runs/two/eq"]  # fmt: skip
    assert "sweep/one/filtered-rff-sigma10" in folders and "sweep/one/filtered-pe-scale4" in folders
    assert folders[-1] == "long/two/mlp-pe" and jobs[-1].iters == 6
    assert len(jobs) == 6 + 6 + 1 and [job.index for job in jobs] == list(range(len(jobs)))
    sweep = next(job for job in jobs if job.variant.label == "mlp-pe-scale4")
    config = job_config(tiny_bench(image_folder, tmp_path / "out"), sweep, 3, 20)
    assert config.network.pe == "loglinear" and config.network.pe_scale == 4.0 and config.iters == 3
    with pytest.raises(UsageError, match="--names names three, which .* lacks; give file stems of its images$"):
        build_jobs(tiny_bench(image_folder, tmp_path / "out", names=("three",)))
    with pytest.raises(UsageError, match="--long-names names three, .* or pass --long-names with no names to skip"):
        build_jobs(tiny_bench(image_folder, tmp_path / "out", long_names=("three",)))
    both = "--sweep-names names four; --long-names names three, .* or pass --sweep-names --long-names with no names"
    with pytest.raises(UsageError, match=both):
        build_jobs(tiny_bench(image_folder, tmp_path / "out", sweep_names=("four",), long_names=("three",)))
    with pytest.raises(UsageError, match="unknown option"):
        build_jobs(tiny_bench(image_folder, tmp_path / "out", variants=("mlp-pe,bogus=1",)))
    with pytest.raises(UsageError, match="match_by=height"):
        build_jobs(tiny_bench(image_folder, tmp_path / "out", variants=("mlp-pe,match_params=mlp-pe,match_by=height",)))


def test_two_images_of_one_name_are_refused(image_folder, tmp_path):
    shutil.copy(image_folder / "one.png", image_folder / "one.jpg")  # both would be the jobs of image "one"
    with pytest.raises(UsageError, match="one.jpg and one.png in .* share the name 'one'"):
        build_jobs(tiny_bench(image_folder, tmp_path / "out"))


def test_an_image_too_small_for_a_variant_fails_before_anything_is_written(image_folder, tmp_path):
    bench = tiny_bench(image_folder, tmp_path / "out", variants=("mlp-pe",), sweep_names=(), long_names=(),
                       downsample=4)  # fmt: skip
    with pytest.raises(UsageError, match=r"one.png is 5x4 at --downsample 4, and variant 'mlp-pe' cannot fit it"):
        run_bench(bench)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("engine", ["batched", "sequential"])
def test_an_images_notices_are_shown_once_before_training(tmp_path, engine):
    folder = tmp_path / "images"
    folder.mkdir()
    rgba = np.random.default_rng(0).integers(0, 256, (16, 20, 4), dtype=np.uint8)
    iio.imwrite(folder / "clear.png", rgba)
    notices = []
    config = tiny_bench(folder, tmp_path / "out", variants=("mlp-pe", "filtered-pe"), sweep_names=(), long_names=(),
                        engine=engine)  # fmt: skip
    run_bench(config, notify=notices.append)
    alpha = [notice for notice in notices if "alpha channel" in notice]
    assert len(alpha) == 1 and "clear" in alpha[0] and notices.index(alpha[0]) == 0


def test_earlier_preset_names_and_their_finished_jobs_still_count(image_folder, tmp_path, capsys):
    assert parse_variant("filtered-pe-nols").label == "filtered-pe-fixed-lr"
    assert "preset filtered-pe-nols is now filtered-pe-fixed-lr" in capsys.readouterr().out
    out = tmp_path / "out"
    (out / "runs" / "one" / "mlp-pe-wide").mkdir(parents=True)
    (out / "runs" / "one" / "mlp-pe-wide" / "metrics.json").write_text("{}")
    bench = tiny_bench(image_folder, out, variants=("mlp-pe-loglinear",), sweep_names=(), long_names=())
    assert [str(job.folder) for job in build_jobs(bench)] == ["runs/one/mlp-pe-wide", "runs/two/mlp-pe-loglinear"]


def test_match_params_names_a_reference_variant_that_does_not_run(image_folder, tmp_path):
    deep = "deep:mlp-pe,pe=loglinear,match_params=ref,match_by=depth"
    bench = tiny_bench(image_folder, tmp_path / "out", variants=(deep,), sweep_names=(), long_names=(),
                       reference_variants=("ref:filtered-pe,pe=loglinear",))  # fmt: skip
    (job,) = [job for job in build_jobs(bench) if job.subject == "one"]
    config = job_config(bench, job, 3, 20)
    reference = apply_overrides(bench.fit, parse_variant(bench.reference_variants[0]).overrides).network
    assert config.network.hidden_features == bench.fit.network.hidden_features
    assert config.network.hidden_layers > bench.fit.network.hidden_layers
    target = parameter_count(reference, 3, 20)
    gaps = [abs(parameter_count(replace(config.network, hidden_layers=config.network.hidden_layers + step), 3, 20)
                - target) for step in (-1, 0, 1)]  # fmt: skip
    assert gaps[1] == min(gaps)
    with pytest.raises(UsageError, match="reference-variants"):
        job_config(replace(bench, reference_variants=()), job, 3, 20)
    with pytest.raises(UsageError, match=r"^variant 'deep': match_params=ref: no variant with that label"):
        run_bench(replace(bench, reference_variants=()))  # not an error of the image's size


def test_bench_runs_resumes_and_summarises(image_folder, tmp_path, capsys):
    out = tmp_path / "out"
    config = tiny_bench(image_folder, out)
    summary = run_bench(config, notify=lambda message: None)
    assert summary["jobs_done"] == summary["jobs_total"] == 13
    for name in ("results.json", "results.md", "crops_one.png", "crops_flat_one.png", "curves_one.png", "sweep.png",
                 "bench.json"):  # fmt: skip
        assert (out / name).is_file(), name
    stored = json.loads((out / "results.json").read_text())
    means = stored["groups"]["main"]["means"]
    assert set(means) == {"mlp-pe", "filtered-rff", "eq"}
    assert (
        abs(means["eq"]["num_params"] - means["filtered-rff"]["num_params"]) / means["filtered-rff"]["num_params"]
        < 0.05
    )
    assert means["filtered-rff"]["num_filter_params"] == 3 * 16 * 16
    run = stored["groups"]["main"]["runs"][0]
    assert {"psnr", "best_psnr", "ssim", "lpips", "seconds_per_iter", "num_params", "params_per_value"} <= set(run)
    markdown = (out / "results.md").read_text()
    assert "| filtered-rff |" in markdown and "params/value" in markdown and "Robustness sweep" in markdown

    metrics_file = out / "runs/one/mlp-pe/metrics.json"
    stamp = metrics_file.stat().st_mtime_ns
    os.utime(metrics_file, ns=(stamp - 10**9, stamp - 10**9))
    run_bench(config, notify=lambda message: None)  # finished jobs are skipped
    assert metrics_file.stat().st_mtime_ns == stamp - 10**9

    capsys.readouterr()
    run_bench(tiny_bench(image_folder, out, list_jobs=True))
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 13 and all("\tdone\t" in line for line in lines)

    run_bench(tiny_bench(image_folder, out, sweep_names=(), crops_image="two", summarize_only=True))
    figures = sorted(path.name for path in out.glob("*.png"))
    assert figures == ["crops_flat_two.png", "crops_two.png", "curves_two.png"]  # the earlier summary's are gone

    exact = json.loads(metrics_file.read_text()) | {"psnr": None, "best_psnr": None}  # as an exact fit stores them
    metrics_file.write_text(json.dumps(exact))
    stored = run_bench(tiny_bench(image_folder, out, sweep_names=(), summarize_only=True))
    other = json.loads((out / "runs/two/mlp-pe/metrics.json").read_text())
    means = stored["groups"]["main"]["means"]["mlp-pe"]
    assert means["psnr"] == pytest.approx(other["psnr"]) and means["values_counted"] == {"psnr": 1, "best_psnr": 1}
    row = next(line for line in (out / "results.md").read_text().splitlines() if line.startswith("| mlp-pe |"))
    assert row.count("(1 of 2)") == 2


def test_shard_and_single_job(image_folder, tmp_path):
    out = tmp_path / "out"
    run_bench(tiny_bench(image_folder, out, shard="1/2", sweep_names=(), long_names=()), notify=lambda m: None)
    done = sorted(str(p.parent.relative_to(out)) for p in out.glob("runs/*/*/metrics.json"))
    assert done == ["runs/two/eq", "runs/two/filtered-rff", "runs/two/mlp-pe"]  # odd indices 1, 3, 5
    assert run_bench(tiny_bench(image_folder, out, job=0, sweep_names=(), long_names=())) is None
    assert (out / "runs/one/mlp-pe/metrics.json").exists()
    with pytest.raises(UsageError, match="out of range"):
        run_bench(tiny_bench(image_folder, out, job=99, sweep_names=(), long_names=()))
    with pytest.raises(UsageError, match="I/N"):
        run_bench(tiny_bench(image_folder, out, shard="x", sweep_names=(), long_names=()))


def test_bench_protects_foreign_folders_and_other_protocols(image_folder, tmp_path):
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("precious")
    with pytest.raises(UsageError, match="holds no benchmark"):
        run_bench(tiny_bench(image_folder, foreign, sweep_names=(), long_names=(), variants=("mlp-pe",)))
    out = tmp_path / "out"
    run_bench(tiny_bench(image_folder, out, sweep_names=(), long_names=(), variants=("mlp-pe",)))
    other = tiny_bench(image_folder, out, sweep_names=(), long_names=(), variants=("mlp-pe",), downsample=2)
    with pytest.raises(UsageError, match="another protocol"):
        run_bench(other)


def test_overwrite_with_another_protocol_removes_the_earlier_protocols_jobs(image_folder, tmp_path, capsys):
    out = tmp_path / "out"
    options = dict(sweep_names=(), long_names=(), names=("one",))
    run_bench(tiny_bench(image_folder, out, variants=("mlp-pe",), **options))
    longer = tiny_bench(image_folder, out, variants=("filtered-rff",), overwrite=True, **options)
    longer.fit.iters = 5
    run_bench(longer)
    assert re.search(
        r"held 1 jobs of another protocol \(--iters: \d+ there, 5 now\); removed them", capsys.readouterr().out
    )
    assert not (out / "runs/one/mlp-pe").exists()  # it would otherwise pass as a finished 5-iteration job
    rerun = tiny_bench(image_folder, out, variants=("mlp-pe",), **options)
    rerun.fit.iters = 5
    summary = run_bench(rerun)
    assert [run["iters"] for run in summary["groups"]["main"]["runs"]] == [5]


def test_a_label_run_with_another_variant_is_another_protocol(image_folder, tmp_path):
    out = tmp_path / "out"
    options = dict(sweep_names=(), long_names=(), names=("one",))
    run_bench(tiny_bench(image_folder, out, variants=("a:mlp-pe",), **options))
    with pytest.raises(UsageError, match=r"another protocol \(runs/one/a ran with another variant or length"):
        run_bench(tiny_bench(image_folder, out, variants=("a:mlp-rff",), **options))


def test_summarize_only_refuses_options_the_jobs_did_not_run_with(image_folder, tmp_path):
    out = tmp_path / "out"
    options = dict(sweep_names=(), long_names=(), variants=("mlp-pe",))
    run_bench(tiny_bench(image_folder, out, **options))
    written = {path.name: path.read_bytes() for path in out.iterdir() if path.is_file()}
    with pytest.raises(UsageError, match=r"--summarize-only: .* another protocol \(--downsample: \d+ there, 2 now;"):
        run_bench(tiny_bench(image_folder, out, downsample=2, summarize_only=True, **options))
    assert {path.name: path.read_bytes() for path in out.iterdir() if path.is_file()} == written


def test_bench_reuses_finished_jobs_only_for_the_same_images(image_folder, tmp_path):
    out = tmp_path / "out"
    options = dict(sweep_names=(), long_names=(), variants=("mlp-pe",))
    run_bench(tiny_bench(image_folder, out, names=("one",), **options))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(image_folder / "one.png", elsewhere / "one.png")  # the same file in another folder: reused
    assert run_bench(tiny_bench(elsewhere, out, names=("one",), **options)) is not None
    run_bench(tiny_bench(image_folder, out, **options))  # an image added: its fingerprint is recorded too
    assert set(json.loads((out / "bench.json").read_text())["protocol"]["images"]) == {"one", "two"}
    shutil.copy(image_folder / "two.png", elsewhere / "one.png")  # another image under the same name
    with pytest.raises(UsageError, match=r"another protocol \(image one changed since its jobs ran"):
        run_bench(tiny_bench(elsewhere, out, names=("one",), **options))


def test_bench_reads_a_folder_written_before_the_line_search_options_were_nested(image_folder, tmp_path):
    out = tmp_path / "out"
    config = tiny_bench(image_folder, out, sweep_names=(), long_names=(), variants=("mlp-pe",))
    run_bench(config)
    marker = out / "bench.json"
    stored = json.loads(marker.read_text())
    fit = stored["protocol"]["fit"]
    search = fit.pop("line_search")
    fit.update(line_search=search["enabled"], rule=search["rule"], direction=search["direction"],
               lr_min=search["lr_min"], lr_max=search["lr_max"], ls_eps=search["eps"], c1=search["c1"])  # fmt: skip
    marker.write_text(json.dumps(stored))
    run_bench(config)  # the same settings in the old layout: not another protocol
    fit["lr_max"] = search["lr_max"] * 10
    marker.write_text(json.dumps(stored))
    with pytest.raises(UsageError, match=r"another protocol \(--line-search.lr-max: \S+ there, \S+ now"):
        run_bench(config)


def test_merge_runs_fills_jobs_from_other_folders(image_folder, tmp_path):
    quiet = dict(sweep_names=(), long_names=())
    a, b, c, merged = (tmp_path / name for name in ("a", "b", "c", "merged"))
    run_bench(tiny_bench(image_folder, a, variants=("mlp-pe",), names=("one",), **quiet), notify=lambda m: None)
    run_bench(tiny_bench(image_folder, b, variants=("study:filtered-rff",), **quiet), notify=lambda m: None)
    longer = tiny_bench(image_folder, c, variants=("mlp-pe",), names=("two",), **quiet)
    longer.fit.iters = 6
    run_bench(longer, notify=lambda m: None)

    linked = merge_runs([(a, None), (b, None), (c, "long")], merged, {"study": "filtered-rff"})
    assert linked == 4
    assert (merged / "runs/one/filtered-rff").is_symlink() and (merged / "long/two/mlp-pe").is_symlink()
    assert (merged / "bench.json").read_text() == (a / "bench.json").read_text()
    summary = run_bench(tiny_bench(image_folder, merged, sweep_names=(), long_names=("two",), long_iters=6,
                                   long_variants=("mlp-pe",), summarize_only=True))  # fmt: skip
    assert summary["jobs_done"] == 4
    assert set(summary["groups"]["main"]["means"]) == {"mlp-pe", "filtered-rff"}  # stored as "study" in b
    assert summary["groups"]["main"]["means"]["filtered-rff"]["images"] == 2
    assert [r["iters"] for r in summary["groups"]["long"]["runs"]] == [6]


def test_merge_refuses_other_protocols_other_commands_and_foreign_folders(tmp_path):
    def benchmark(name: str, kind: str = "image", iters: int = 4):
        folder = tmp_path / name
        folder.mkdir()
        protocol = {"downsample": 4, "fit": {"iters": iters, "lr": 1e-3}, "images": {}, "jobs": {}}
        (folder / "bench.json").write_text(json.dumps({"kind": kind, "protocol": protocol}))
        return folder

    a, b, long, sdf = benchmark("a"), benchmark("b", iters=5), benchmark("long", iters=20), benchmark("sdf", "sdf")
    check_merge([a], [long], tmp_path / "new")  # long runs differ in their iterations only
    with pytest.raises(UsageError, match="--into .*a is one of the sources"):
        check_merge([a], [], a)
    check_merge([a], [], benchmark("c"))  # an image benchmark of the same protocol
    with pytest.raises(
        UsageError, match=r"b holds a benchmark of another protocol than .*a \(--iters: \d+ in .*a, 5 in .*b\)"
    ):
        check_merge([a, b], [], tmp_path / "new")
    with pytest.raises(UsageError, match="sdf holds no image benchmark"):
        check_merge([a, sdf], [], tmp_path / "new")
    user = tmp_path / "user"
    user.mkdir()
    (user / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="user is not empty and holds no image benchmark"):
        check_merge([a], [], user)
    with pytest.raises(UsageError, match=r"b holds a benchmark of another protocol \(--iters: \d+ in .*a, 5 in .*b\)"):
        check_merge([a], [], b)


def test_results_markdown_puts_each_value_in_its_column():
    from dataclasses import asdict

    from rff_field.bench.image import results_markdown

    def run(image: str, best: float, final: float, diverged=None) -> dict:
        return {"label": "f", "variant": "filtered-pe", "image": image, "iters": 10, "best_psnr": best, "psnr": final,
                "ssim": 0.5, "seconds_per_iter": 0.25, "diverged": diverged}  # fmt: skip

    means = {"f": {"variant": "filtered-pe", "images": 2, "psnr": 20.0, "best_psnr": 21.0, "ssim": 0.5, "lpips": None,
                   "seconds_per_iter": 0.25, "num_params": 1000, "num_filter_params": 300, "params_per_value": 1.5,
                   "hidden_features": 64, "diverged": 1, "values_counted": {"psnr": 1}}}  # fmt: skip
    runs = [run("a", 21.0, 20.0), run("b", 22.0, 19.5, diverged="at step 3")]
    empty = {"means": {}, "runs": []}
    summary = {"protocol": {"fit": asdict(FitConfig()), "downsample": 4}, "images_folder": "kodak", "machines": ["m"],
               "jobs_done": 2, "jobs_total": 2, "groups": {"main": {"means": means, "runs": runs}, "sweep": empty,
                                                           "long": empty}}  # fmt: skip
    lines = results_markdown(summary).splitlines()
    assert (
        "| f (diverged: 1 of 2) | `filtered-pe` (width 64) | 2 | 20.00 (1 of 2) | 21.00 | 0.5000 | – | 0.2500 |"
        in (lines[lines.index("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|") + 1])
    )
    assert "| f | 21.00 / 20.00 / 0.500 / 0.250 | 22.00 / 19.50 / 0.500 / 0.250 (diverged) |" in lines
