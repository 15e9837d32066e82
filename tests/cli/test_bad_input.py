"""Bad input ends with one line on stderr and exit status 2 before any training, and writes nothing."""

import json
import sys
import warnings

import imageio.v3 as iio
import numpy as np
import pytest
import torch
from torch import nn

from rff_field.cli import bench, export_mesh, image, sdf
from rff_field.core.embedding import resolve_bands
from rff_field.core.encodings import PositionalEncoding, RandomFourierEncoding
from rff_field.core.errors import UsageError
from rff_field.core.filter import BiasFreeFilter, FilteredEncoding, initialize_filter
from rff_field.core.step_rule import balanced_step_size, filter_step_size
from rff_field.image.data import load_image


def run(entrypoint, args, monkeypatch, capsys) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", ["prog", *map(str, args)])
    with pytest.raises(SystemExit) as info:
        entrypoint([str(a) for a in args])
        sys.exit(0)
    err = capsys.readouterr().err
    return int(info.value.code or 0), err


@pytest.fixture
def picture(tmp_path):
    path = tmp_path / "pic.png"
    iio.imwrite(path, (np.random.default_rng(0).random((16, 16, 3)) * 255).astype(np.uint8))
    return path


@pytest.mark.parametrize(
    "options, message",
    [
        (["--hidden-features", "0"], "--hidden-features must be positive"),
        (["--hidden-features", "-4"], "--hidden-features must be positive"),
        (["--hidden-layers", "-2"], "--hidden-layers must be zero or positive"),
        (["--lr", "-1"], "--lr must be positive"),
        (["--lr", "nan"], "--lr must be a finite number"),
        (["--line-search.lr-max", "inf"], "--line-search.lr-max must be a finite number"),
        (["--lr-max", "inf"], "--line-search.lr-max must be a finite number"),  # the earlier name
        (["--line-search.lr-min", "0.1", "--line-search.lr-max", "0.01"], "must not exceed"),
        (["--rff-sigma", "nan", "--method", "mlp-rff"], "--rff-sigma must be a finite number"),
        (["--downsample", "8", "--pe", "wire"], "use a smaller --downsample"),
        (["--downsample", "0"], "--downsample must be positive, got 0"),
    ],
)
def test_fit_options_that_cannot_work(options, message, picture, tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    code, err = run(image.entrypoint, ["fit", "--image", picture, "--out", out, "--iters", "2", "--no-progress",
                                       "--no-lpips", *options], monkeypatch, capsys)  # fmt: skip
    assert code == 2 and message in err and err.strip().count("\n") <= len(options)  # notices for earlier names
    assert err.strip().splitlines()[-1].startswith("rff-image: error:") and not out.exists()


def test_unwritable_out_fails_before_training(picture, tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    for entrypoint, args in ((image.entrypoint, ["fit", "--image", picture]), (sdf.entrypoint, ["fit"])):
        code, err = run(entrypoint, [*args, "--out", blocker / "out", "--iters", "1"], monkeypatch, capsys)
        assert code == 2 and "cannot be created" in err and "a-file is a file" in err
    assert blocker.read_text() == "not a folder"


def test_overwrite_clears_only_the_runs_own_outputs(picture, tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    args = ["fit", "--image", picture, "--out", out, "--iters", "2", "--no-progress", "--no-lpips",
            "--hidden-features", "8"]  # fmt: skip
    assert run(image.entrypoint, [*args, "--dump-embedding", "2"], monkeypatch, capsys)[0] == 0
    (out / "notes.txt").write_text("mine")
    assert (out / "embedding.png").exists()
    assert run(image.entrypoint, [*args, "--overwrite"], monkeypatch, capsys)[0] == 0
    assert not (out / "embedding.png").exists() and (out / "reconstruction.png").exists()
    assert (out / "notes.txt").read_text() == "mine"


def test_a_fit_refuses_the_folder_of_another_command(picture, tmp_path, monkeypatch, capsys):
    image_fit, benchmark = tmp_path / "image-fit", tmp_path / "bench"
    args = ["fit", "--image", picture, "--iters", "2", "--no-progress", "--no-lpips", "--hidden-features", "8"]
    assert run(image.entrypoint, [*args, "--out", image_fit], monkeypatch, capsys)[0] == 0
    before = {path.name: path.read_bytes() for path in image_fit.iterdir()}
    code, err = run(sdf.entrypoint, ["fit", "--out", image_fit, "--overwrite", "--iters", "1"], monkeypatch, capsys)
    assert code == 2 and "holds the results of another command (its metrics.json is no SDF fit's)" in err
    assert {path.name: path.read_bytes() for path in image_fit.iterdir()} == before
    benchmark.mkdir()
    (benchmark / "bench.json").write_text("{}")
    code, err = run(image.entrypoint, [*args, "--out", benchmark], monkeypatch, capsys)
    assert code == 2 and "holds a benchmark; choose another --out for this image fit" in err
    assert [path.name for path in benchmark.iterdir()] == ["bench.json"]


def test_sdf_fit_without_open3d_says_to_train_from_a_pool(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "open3d", None)  # as on a machine without it: importing it raises
    code, err = run(sdf.entrypoint, ["fit", "--out", tmp_path / "o", "--no-progress"], monkeypatch, capsys)
    assert code == 2 and "sampling a shape needs open3d, which is not installed here" in err
    assert err.strip().count("\n") == 0 and not (tmp_path / "o").exists()


def test_sdf_inputs(tmp_path, monkeypatch, capsys):
    code, err = run(sdf.entrypoint, ["fit", "--mesh", tmp_path, "--out", tmp_path / "o"], monkeypatch, capsys)
    assert code == 2 and "is a folder; give the path of a mesh file" in err
    code, err = run(sdf.entrypoint, ["fit", "--lr", "-1", "--out", tmp_path / "o"], monkeypatch, capsys)
    assert code == 2 and "--lr must be positive" in err
    code, err = run(sdf.entrypoint, ["fit", "--lr", "5e-5", "--out", tmp_path / "o"], monkeypatch, capsys)
    assert code == 2 and "--lr-final (0.0001) must not exceed --lr (5e-05)" in err
    code, err = run(sdf.entrypoint, ["fit", "--hidden-features", "0", "--out", tmp_path / "o"], monkeypatch, capsys)
    assert code == 2 and "--hidden-features must be positive" in err and not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["fit", "--sign-rays", "4"], "--sign-rays must be an odd number >= 1"),
        (["pool", "--sign-rays", "0", "--out", "OUT/p.npz"], "--sign-rays must be an odd number >= 1"),
        (["bench", "--sign-rays", "2"], "--sign-rays must be an odd number >= 1"),
        (["fit", "--device", "gpu"], "--device gpu is not a torch device; use e.g. cpu, cuda or cuda:1"),
        (["fit", "--device", "mps"], "--device mps was asked for but MPS (Apple GPUs) is not available"),
        (["fit", "--pool", "PICTURE"], "is not a sample pool (an .npz written by `rff-sdf pool`)"),
        (["fit", "--pe", "wire"], "the WIRE PE needs an image size; use --pe loglinear or --pe pow2 for shapes"),
        (["bench", "--methods", "siren", "mlp-pe,pe=wire"], "the WIRE PE needs an image size"),
        (["bench", "--methods", "mlp-pe,hidden_features=0"], "--hidden-features must be positive"),
        (["bench", "--methods", "mlp-pe", "--hidden-features", "0"], "variant 'mlp-pe': --hidden-features must be"),
        (
            ["bench", "--methods", "bacon", "--bacon-input-scales", "0.5", "1"],
            "variant 'bacon': --bacon-input-scales needs 9 values (one per filter of 8 hidden layers), got 2",
        ),
        (
            ["fit", "--method", "bacon", "--hidden-layers", "4", "--bacon-output-layers", "2", "3"],
            "--bacon-output-layers must increase within 1..4 and end at 4 (the hidden layers), got 2 3",
        ),
        (["bench", "--meshes", "OUT/missing.ply"], "no mesh file"),
        (["bench", "--meshes", "OUT/a/bunny.ply", "OUT/b/bunny.ply"], "two shapes are named bunny"),
        (["bench", "--figure-mesh", "bunny"], "--figure-mesh bunny is not one of the shapes: generated"),
        (["bench", "--pool-size", "0"], "--pool-size must be positive"),
        (["fit", "--eval-samples", "-1"], "--eval-samples must be positive"),
        (["fit", "--f-threshold", "nan"], "--f-threshold must be a finite number"),
        (["fit", "--grid-batch", "0"], "--grid-batch must be positive"),
        (["pool", "--eval-samples", "-1", "--out", "OUT/p.npz"], "--eval-samples must be positive"),
        (["pool", "--coarse-scale", "-1", "--out", "OUT/p.npz"], "--coarse-scale must be positive"),
        (["pool", "--fine-scale", "nan", "--out", "OUT/p.npz"], "--fine-scale must be a finite number"),
        (["fit", "--seed", "-1"], "--seed must be zero or positive"),
        (["pool", "--seed", "-1", "--out", "OUT/p.npz"], "--seed must be zero or positive"),
        (["pool", "--out", "OUT/dir.npz", "--overwrite"], "--out OUT/dir.npz is a folder"),
        (["fit", "--view", "nan", "10"], "--view must be two finite angles"),
        (["bench", "--view", "10", "inf"], "--view must be two finite angles"),
        # checked before the pools are sampled (minutes for a real mesh)
        (["bench", "--shard", "2/2"], "--shard '2/2': need 0 <= I < N"),
        (["bench", "--job", "5", "--methods", "mlp-pe"], "--job 5 is out of range: there are 1 jobs"),
        (["bench", "--pools", "PICTURE"], "is not a sample pool"),
    ],
)
def test_sdf_options_fail_before_any_work(args, message, picture, tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    (tmp_path / "dir.npz").mkdir()
    args = [str(a).replace("OUT", str(tmp_path)).replace("PICTURE", str(picture)) for a in args]
    extra = [] if args[0] == "pool" else ["--out", out]
    code, err = run(sdf.entrypoint, [*args, *extra], monkeypatch, capsys)
    assert code == 2 and message.replace("OUT", str(tmp_path)) in err and err.strip().count("\n") == 0
    assert not out.exists() and not (tmp_path / "p.npz").exists() and not any((tmp_path / "dir.npz").iterdir())


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
@pytest.mark.parametrize("command", ["fit", "bench"])
def test_sdf_device_advice_names_a_device_the_command_takes(command, tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    code, err = run(sdf.entrypoint, [command, "--device", "cuda", "--out", out], monkeypatch, capsys)
    assert code == 2 and err.strip().endswith("CUDA is not available; use --device cpu")
    code, err = run(sdf.entrypoint, [command, "--device", "auto", "--out", out], monkeypatch, capsys)
    assert code == 2 and err.strip().endswith("use --device cpu or cuda") and not out.exists()


def test_timing_options_fail_before_measuring(picture, tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    common = ["image-timing", "--image", picture, "--variants", "mlp-pe", "--downsample", "1"]
    code, err = run(bench.entrypoint, [*common, "--dest", blocker / "t"], monkeypatch, capsys)
    assert code == 2 and "a-file is a file" in err
    code, err = run(bench.entrypoint, [*common, "--dest", tmp_path / "t", "--rounds", "0"], monkeypatch, capsys)
    assert code == 2 and "--rounds must be positive" in err and not (tmp_path / "t").exists()


def test_bench_inputs_fail_before_any_job(picture, tmp_path, monkeypatch, capsys):
    images = tmp_path / "images"
    images.mkdir()
    iio.imwrite(images / "a.png", np.zeros((16, 16, 3), np.uint8))
    (images / "b.png").write_bytes(b"not a png")
    out = tmp_path / "out"
    common = ["image", "--images", images, "--out", out, "--downsample", "1", "--sweep-names", "--long-names",
              "--iters", "2", "--no-lpips", "--no-progress"]  # fmt: skip
    code, err = run(bench.entrypoint, [*common, "--variants", "nosuchvariant"], monkeypatch, capsys)
    assert code == 2 and "unknown method 'nosuchvariant'" in err and "presets: mlp-pe" in err
    code, err = run(bench.entrypoint, [*common, "--variants", "mlp-pe"], monkeypatch, capsys)
    assert code == 2 and "b.png" in err and not (out / "runs").exists()  # a.png's job did not run first


def test_export_mesh_into_an_unwritable_folder(tmp_path, monkeypatch, capsys):
    config = tmp_path / "config.yml"
    config.write_text("{}")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    args = ["--load-config", config, "--output-path", blocker / "m.ply"]
    code, err = run(export_mesh.entrypoint, args, monkeypatch, capsys)
    assert code == 2 and "a-file is a file" in err and "must end in" not in err  # the folder, not the name


def test_export_mesh_options_fail_before_loading(tmp_path, monkeypatch, capsys):
    config = tmp_path / "config.yml"
    config.write_text("{}")
    code, err = run(export_mesh.entrypoint, ["--load-config", tmp_path, "--output-path", tmp_path / "m.ply"],
                    monkeypatch, capsys)  # fmt: skip
    assert code == 2 and "is a folder; pass the config.yml file" in err
    (tmp_path / "dir.ply").mkdir()
    args = ["--load-config", config, "--output-path", tmp_path / "dir.ply", "--overwrite"]
    code, err = run(export_mesh.entrypoint, args, monkeypatch, capsys)
    assert code == 2 and "dir.ply is a folder; give a file name" in err
    for threshold in ("nan", "0", "-5"):
        args = ["--load-config", config, "--output-path", tmp_path / "m.ply", "--threshold", threshold]
        code, err = run(export_mesh.entrypoint, args, monkeypatch, capsys)
        assert (
            code == 2
            and f"--threshold must be a positive density (densities are never negative), got {float(threshold)}" in err
        )


def test_export_mesh_of_an_sdf_fit_names_its_mesh_and_rff_sdf_mesh(tmp_path, monkeypatch, capsys):
    fit = tmp_path / "sdf fit"
    fit.mkdir()
    for name in ("config.json", "history.npz", "model.pt", "mesh.ply"):
        (fit / name).write_text("")
    for given in (fit, fit / "config.json"):
        code, err = run(export_mesh.entrypoint, ["--load-config", given], monkeypatch, capsys)
        assert code == 2 and "holds an rff-sdf fit" in err and "rff-sdf mesh --fit '" in err, err
    (fit / "model.pt").unlink()  # fitted with --no-save-model: rff-sdf mesh could not extract it again
    code, err = run(export_mesh.entrypoint, ["--load-config", fit], monkeypatch, capsys)
    assert code == 2 and "its weights were not saved" in err and "rff-sdf mesh" not in err


def test_animations_and_bad_variants_are_named(tmp_path, monkeypatch, capsys):
    frames = (np.arange(2 * 8 * 8 * 3) % 255).astype(np.uint8).reshape(2, 8, 8, 3)
    iio.imwrite(tmp_path / "one.gif", frames[:1])
    iio.imwrite(tmp_path / "two.gif", frames)
    assert load_image(tmp_path / "one.gif").pixels.shape == (8, 8, 3)
    with pytest.raises(UsageError, match="two.gif holds 2 frames; give a still image"):
        load_image(tmp_path / "two.gif")
    images = tmp_path / "images"
    images.mkdir()
    iio.imwrite(images / "a.png", frames[0])
    args = ["image", "--images", images, "--out", tmp_path / "out", "--variants", "narrow:mlp-pe,hidden_features=-8",
            "--sweep-names", "--long-names"]  # fmt: skip
    code, err = run(bench.entrypoint, args, monkeypatch, capsys)
    assert code == 2 and "variant 'narrow' (mlp-pe,hidden_features=-8): --hidden-features must be positive" in err


def test_core_constructors_and_rule_check_their_inputs():
    cases = [
        lambda: PositionalEncoding(2, 4, float("nan")),
        lambda: PositionalEncoding(2, 4, 8.0)(torch.rand(5, 3)),
        lambda: PositionalEncoding.pow2(3, 0),
        lambda: RandomFourierEncoding(2, 8, 0.0),
        lambda: BiasFreeFilter(-3),
        lambda: FilteredEncoding(nn.Linear(2, 3)),
        lambda: filter_step_size(1.0, -1.0, -1.0, 1e-3, lr_max=float("nan")),
        lambda: filter_step_size(1.0, -1.0, -1.0, 1e-3, lr_max=float("inf")),
        lambda: filter_step_size(1.0, -1.0, -1.0, 1e-3, lr_min=float("nan")),
        lambda: filter_step_size(1.0, -1.0, -1.0, 1e-3, lr_min=1e-2, lr_max=1e-3),
        lambda: balanced_step_size(-1.0, -1.0, 1e-3, lr_min=1.0, lr_max=0.5),
        lambda: filter_step_size(1.0, -1.0, -1.0, 1e-3, eps=float("nan")),
        lambda: filter_step_size(1.0, -1.0, -1.0, 1e-3, c1=float("nan")),
        lambda: filter_step_size(1.0, -1.0, -1.0, -1e-3),
        lambda: initialize_filter(BiasFreeFilter(6), "scaled", float("nan")),
    ]
    for case in cases:
        with pytest.raises(UsageError):
            case()
    with pytest.raises(UsageError, match=r"BiasFreeFilter\(6\) filters 6 channels, got inputs of shape \(5, 8\)"):
        BiasFreeFilter(6)(torch.rand(5, 8))
    assert PositionalEncoding(3, 4, 8.0)(torch.rand(5, 3)).shape[-1] == PositionalEncoding(3, 4, 8.0).get_out_dim()


@pytest.mark.parametrize("log_every", ["5", "1"])
def test_image_fit_divergence_stops_with_one_line_and_keeps_the_last_finite_state(picture, tmp_path, monkeypatch,
                                                                                    capsys, log_every):  # fmt: skip
    # A rate of 1e30 makes Adam's first step put weights near 1e30, so the next forward pass overflows float32.
    # With a check every step, the state after that first step has finite parameters but gives an infinite loss.
    out = tmp_path / "out"
    args = ["fit", "--image", picture, "--out", out, "--iters", "20", "--log-every", log_every, "--lr", "1e30",
            "--hidden-features", "8", "--no-progress", "--no-lpips"]  # fmt: skip
    code, err = run(image.entrypoint, args, monkeypatch, capsys)
    assert code == 3
    line = err.strip().splitlines()[-1]
    assert line.startswith("rff-image: training diverged at step 1: the loss is") and "--lr (now 1e+30)" in line
    assert f"its outputs are in {out}, marked diverged" in line
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["iters"] == 0 and metrics["iters_requested"] == 20 and "diverged at step 1" in metrics["diverged"]
    assert metrics["psnr"] is not None and (out / "reconstruction.png").is_file()  # the initial, finite network


def test_sdf_fit_divergence_stops_with_one_line(tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    code, err = run(sdf.entrypoint, ["fit", "--out", out, "--iters", "20", "--log-every", "5", "--lr", "1e30",
                                     "--hidden-features", "16", "--hidden-layers", "1", "--pe-frequencies", "4",
                                     "--points-per-step", "200", "--resolution", "16", "--eval-samples", "500",
                                     "--no-render", "--no-save-model", "--no-progress"],
                    monkeypatch, capsys)  # fmt: skip
    assert code == 3
    line = err.strip().splitlines()[-1]
    assert (
        line.startswith("rff-sdf: training diverged at step") and "--lr (now 1e+30) and --lr-final (now 0.0001)" in line
    )
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["diverged"] and metrics["iters"] == 0


def test_benchmark_sizes_and_scene_paths_that_cannot_work(picture, tmp_path, monkeypatch, capsys):
    images = picture.parent
    common = ["image", "--images", images, "--out", tmp_path / "out", "--sweep-names", "--long-names"]
    for option, value in (("--batch-models", "0"), ("--batch-models", "-1"), ("--downsample", "0")):
        code, err = run(bench.entrypoint, [*common, option, value], monkeypatch, capsys)
        assert code == 2 and f"{option} must be positive" in err and not (tmp_path / "out").exists()
    code, err = run(bench.entrypoint, ["nerf", "--data", picture, "--out", tmp_path / "n"], monkeypatch, capsys)
    assert code == 2 and "is not a folder" in err
    for scale in ("0", "nan"):
        code, err = run(bench.entrypoint, ["nerf", "--data", images, "--scale", scale, "--out", tmp_path / "n"],
                        monkeypatch, capsys)  # fmt: skip
        assert code == 2 and "--scale must be" in err and not (tmp_path / "n").exists()
    args = ["nerf", "--data", images, "--seed", "-1", "--variants", "nerfacto", "--out", tmp_path / "n"]
    code, err = run(bench.entrypoint, args, monkeypatch, capsys)
    assert code == 2 and "--seed must be between 0 and 2**32 - 1" in err and not (tmp_path / "n").exists()


def test_image_merge_into_a_file(tmp_path, monkeypatch, capsys):
    (tmp_path / "a-file").write_text("")
    (tmp_path / "source").mkdir()
    (tmp_path / "source" / "bench.json").write_text('{"kind": "image", "protocol": {"downsample": 4}}')
    args = ["image-merge", "--into", tmp_path / "a-file", "--sources", tmp_path / "source"]
    code, err = run(bench.entrypoint, args, monkeypatch, capsys)
    assert code == 2 and "--into" in err and "a-file is a file" in err


def test_divergence_hints_name_the_filter_only_where_there_is_one():
    from rff_field.core.divergence import divergence_hints
    from rff_field.core.optim import LineSearchConfig
    from rff_field.image.fit import FitConfig
    from rff_field.inr.config import NetworkConfig

    plain = FitConfig(network=NetworkConfig(method="mlp-pe")).divergence_hints()
    filtered = FitConfig(network=NetworkConfig(method="filtered-pe")).divergence_hints()
    assert not any("line-search" in hint for hint in plain) and any("line-search.lr-max" in h for h in filtered)
    assert divergence_hints(1e-3, None, LineSearchConfig()) == ["a lower --lr (now 0.001)"]
    assert "--line-search.lr-max" in divergence_hints(1e-3, 1e-3, LineSearchConfig())[1]
    assert divergence_hints(1e-3, 2e-4, LineSearchConfig(enabled=False))[1] == "a lower --filter-lr (now 0.0002)"


def test_reports_without_runs_and_repeated_names_are_refused(picture, tmp_path, monkeypatch, capsys):
    cases = [
        (["scale-report", "--out", tmp_path / "none", "--dest", tmp_path / "d"], "no finished runs"),
        (["reproduction-report", "--runs", tmp_path / "none", "--dest", tmp_path / "d"], "none: no such folder"),
        (["reproduction-report", "--runs", tmp_path, "--dest", tmp_path / "d"], "no finished runs"),
        (["scale-report", "--out", tmp_path, "--previous", picture, "--dest", tmp_path / "d"],
         "pic.png is not a scale report"),
        (["image", "--images", picture.parent, "--names", "pic", "pic", "--out", tmp_path / "o"],
         "--names names pic more than once; name each image once"),
        (["image", "--images", picture.parent, "--crops-image", "nope", "--sweep-names", "--long-names", "--out",
          tmp_path / "o"],
         "--crops-image nope is not one of the images: pic"),
    ]  # fmt: skip
    for args, message in cases:
        code, err = run(bench.entrypoint, args, monkeypatch, capsys)
        assert code == 2 and message in err, args
    assert not (tmp_path / "d").exists() and not (tmp_path / "o").exists()
    config = tmp_path / "config.yml"
    config.write_text("{}")
    args = ["--load-config", config, "--output-path", tmp_path / "m.ply", "--bbox-min", "-1", "-1", "-1",
            "--bbox-max", "inf", "1", "1"]  # fmt: skip
    code, err = run(export_mesh.entrypoint, args, monkeypatch, capsys)
    assert code == 2 and "must be finite numbers" in err


def test_reports_keep_what_is_in_dest_and_name_only_files_inside_it(tmp_path, monkeypatch, capsys):
    run_folder = tmp_path / "bench" / "runs" / "pic" / "mlp-pe"
    run_folder.mkdir(parents=True)
    (run_folder / "metrics.json").write_text(json.dumps({"image": "pic", "iters": 3, "label": "mlp-pe"}))
    dest = tmp_path / "notes"
    dest.mkdir()
    for name in ("results.md", "scale.md"):
        (dest / name).write_text("my notes")
    cases = [
        (["reproduction-report", "--runs", "--dest", tmp_path / "d"], "give the study's benchmark folders with --runs"),
        (["reproduction-report", "--runs", tmp_path / "bench", "--dest", tmp_path / "d"],
         "none of the 1 runs is of --images kodim01 kodim05 kodim13 kodim15 at --iters 5000 (found: pic at 3)"),
        (["reproduction-report", "--runs", tmp_path / "bench", "--dest", dest, "--images", "pic", "--iters", "3"],
         "already holds results.md; pass --overwrite"),
        (["scale-report", "--out", tmp_path / "bench", "--dest", dest], "already holds scale.md; pass --overwrite"),
        (["nerf-report", "--out", tmp_path / "bench", "--dest", dest], "already holds results.md; pass --overwrite"),
        (["nerf-report", "--out", tmp_path / "bench", "--dest", tmp_path / "d", "--name", "../escaped"],
         "--name '../escaped' names files or folders"),
    ]  # fmt: skip
    for args, message in cases:
        code, err = run(bench.entrypoint, args, monkeypatch, capsys)
        assert code == 2 and message in err and err.strip().count("\n") == 0, (args, err)
    assert not (tmp_path / "d").exists() and not (tmp_path / "escaped.md").exists()
    assert [p.read_text() for p in sorted(dest.iterdir())] == ["my notes", "my notes"]


def test_sdf_bench_overwrites_only_a_benchmark(tmp_path, monkeypatch, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "results.md").write_text("my notes")
    for flags in (["--overwrite"], []):  # the advice never names --overwrite for someone's folder
        code, err = run(sdf.entrypoint, ["bench", "--out", mine, *flags], monkeypatch, capsys)
        assert code == 2 and "is not empty and holds no SDF benchmark (runs/, pools/); choose another --out" in err
    assert [p.name for p in mine.iterdir()] == ["results.md"] and (mine / "results.md").read_text() == "my notes"
    logged = tmp_path / "logged"
    (logged / "logs").mkdir(parents=True)  # a script's logs, written before the benchmark starts
    tiny = ["--methods", "mlp-pe", "--iters", "2", "--pool-size", "4000", "--points-per-step", "200",
            "--hidden-features", "8", "--resolution", "16", "--eval-samples", "500", "--no-save-model"]  # fmt: skip
    code, err = run(sdf.entrypoint, ["bench", "--out", logged, *tiny], monkeypatch, capsys)
    assert code == 0, err
    assert (logged / "bench.json").is_file() and (logged / "runs/generated/mlp-pe/metrics.json").is_file()
    (mine / "runs").mkdir()
    code, err = run(sdf.entrypoint, ["bench", "--out", mine], monkeypatch, capsys)
    assert code == 2 and "holds a benchmark; pass --resume to go on or --overwrite to rerun it" in err


@pytest.mark.parametrize(
    "options, message",
    [
        (["--iters", "0"], "--iters must be a positive integer, got 0"),  # not the protocol's 20k iterations
        (["--timing-block", "0"], "--timing-block must be a positive integer"),
        (["--timing-rounds", "-1"], "--timing-rounds must be a positive integer"),
        (["--graph-check", "-1"], "--graph-check must be zero (no check) or a positive number"),
    ],
)
def test_gpu_table_options_fail_before_any_work(options, message, picture, tmp_path, monkeypatch, capsys):
    from rff_field.bench import table1
    from rff_field.bench.protocols import read_protocol

    monkeypatch.chdir(tmp_path)  # the default protocol is the shipped one, wherever the command runs
    code = table1.main(["--out", str(tmp_path / "o"), "--images", str(picture.parent), "--device", "cpu", *options])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1 and not (tmp_path / "o").exists()
    assert read_protocol(table1.parse_args(["--out", "o"]).protocol)[1] == "paper"  # found from any folder


@pytest.mark.parametrize(
    "args, message",
    [
        (["image", "--images", "PICDIR", "--variants", "--sweep-names", "--long-names", "--out", "OUT/o"],
         "nothing to run: --variants is empty"),
        (["image", "--images", "PICDIR", "--names", "pic", "--sweep-names", "--long-names", "--summarize-only",
          "--out", "OUT/o"],
         "no finished jobs of this benchmark"),
        (["image", "--protocol", "OUT/empty:x", "--out", "OUT/o"], "--protocol OUT/empty:x: OUT/empty is a folder"),
        (["image-merge", "--into", "OUT/o", "--sources", "OUT/empty"], "OUT/empty holds no image benchmark"),
        (["image-timing", "--image", "PICDIR", "--variants", "mlp-pe", "--dest", "OUT/o"],
         "--image PICDIR is a folder; give an image file"),
        (["image-timing", "--image", "PICTURE", "--variants", "--dest", "OUT/o"], "--variants is empty"),
        (["batch-timing", "--images", "PICDIR", "--names", "pic", "--variants", "--dest", "OUT/o"],
         "--variants is empty"),
        (["filter-timing", "--widths", "--dest", "OUT/o"], "--widths is empty"),
        *([(["filter-timing", "--device", "cuda", "--dest", "OUT/o"], "CUDA is not available")]
          if not torch.cuda.is_available() else []),
        (["nerf", "--data", "OUT/empty", "--variants", "--out", "OUT/o"], "--variants is empty"),
        (["nerf", "--data", "OUT/empty", "--variants", "a/b:rff-nerf-lite", "--out", "OUT/o"],
         "names files or folders"),
        (["hash-grid-timing", "--log2-hashmap-size", "64", "--dest", "OUT/o"], "use 30 or less"),
    ],
)  # fmt: skip
def test_benchmarks_that_would_run_nothing_or_write_elsewhere_are_refused(
    args, message, picture, tmp_path, monkeypatch, capsys
):
    (tmp_path / "empty").mkdir()
    paths = {"OUT": str(tmp_path), "PICDIR": str(picture.parent), "PICTURE": str(picture)}

    def resolved(text):
        for key, value in paths.items():
            text = text.replace(key, value)
        return text

    code, err = run(bench.entrypoint, [resolved(str(a)) for a in args], monkeypatch, capsys)
    assert code == 2 and resolved(message) in err.strip().splitlines()[-1], err
    assert not (tmp_path / "o").exists()


@pytest.mark.filterwarnings("default::FutureWarning")
def test_a_deprecated_spelling_is_a_one_line_notice_on_the_command_line(picture, tmp_path, monkeypatch, capsys):
    args = ["fit", "--image", picture, "--out", tmp_path / "out", "--iters", "1", "--no-progress", "--no-lpips"]
    monkeypatch.setattr(sys, "argv", ["prog", *map(str, args)])
    shown = warnings.showwarning
    image.entrypoint([str(a) for a in [*args, "--pe", "nerf"]])
    assert warnings.showwarning is shown  # put back after the command
    captured = capsys.readouterr()
    assert "note: PE bands 'nerf' are now called 'pow2'" in captured.out.splitlines()
    assert "Warning" not in captured.out + captured.err
    with pytest.warns(FutureWarning, match="now called 'pow2'"):  # the Python API keeps it a warning
        resolve_bands("nerf", "pow2")
