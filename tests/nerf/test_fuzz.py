"""Fuzzing the NeRF boundary: datasets that ns-train's checks take or refuse (every accepted one nerfstudio parses
into finite cameras and images of their size), and rff-export-mesh, rff-scene, rff-demo and rff-nerf-bench with
option values, files and crafted configs a user may give, against the contract of every command."""

from __future__ import annotations

import copy
import json
import math
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
import trimesh
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

from rff_field.cli import demo, export_mesh, nerf_bench, scene
from rff_field.core.errors import UsageError
from rff_field.nerf.checks import check_dataset
from tests.fuzz import INTEGERS, NUMBERS, RUNS, assert_contract, command, fuzz, number_text, options_given, options_of
from tests.nerf.test_options import parsed

SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, st.integers(-5, 5000), st.text(max_size=4))
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=3), inner, max_size=2),
    max_leaves=24,
)
MATRICES = st.one_of(
    st.lists(st.lists(NUMBERS, min_size=4, max_size=4), min_size=4, max_size=4),
    st.lists(st.lists(st.sampled_from([0.0, 1.0, -1.0]), min_size=3, max_size=4), min_size=3, max_size=4),
    JSON,
)
IMAGE_DAMAGE = st.sampled_from(["L", "LA", "P", "I;16", "CMYK", "1", "bigger", "bytes", "missing"])
BLENDER_EDITS = st.one_of(
    st.tuples(st.just("frame"), st.integers(0, 5), st.just("transform_matrix"), MATRICES),
    st.tuples(st.just("frame"), st.integers(0, 5), st.just("file_path"), st.one_of(JSON, st.just("./train/r_0.png"))),
    st.tuples(st.just("meta"), st.just(0), st.sampled_from(["camera_angle_x", "frames"]), JSON),
    st.tuples(st.just("delete"), st.integers(0, 5), st.sampled_from(["transform_matrix", "file_path"]), st.none()),
    st.tuples(st.just("image"), st.integers(0, 5), st.just(""), IMAGE_DAMAGE),
)
CAPTURE_KEYS = ["fl_x", "fl_y", "cx", "cy", "w", "h", "k1", "p2", "camera_model", "distortion_params",
                "applied_transform"]  # fmt: skip
CAPTURE_EDITS = st.one_of(
    st.tuples(st.sampled_from(["meta", "frame"]), st.integers(0, 9), st.sampled_from(CAPTURE_KEYS), JSON),
    st.tuples(st.just("frame"), st.integers(0, 9), st.just("transform_matrix"), MATRICES),
    st.tuples(st.just("image"), st.integers(0, 9), st.just(""), IMAGE_DAMAGE),
)


def damage_image(path: Path, kind: str) -> None:
    try:
        size = Image.open(path).size
    except OSError:  # damaged already
        return
    if kind == "missing":
        path.unlink()
    elif kind == "bytes":
        path.write_bytes(b"\x89PNG not really")
    elif kind == "bigger":
        Image.new("RGB", (size[0] + 1, size[1])).save(path)
    else:
        Image.new(kind, size).save(path, format="PNG" if kind != "CMYK" else "TIFF")


def apply_edits(data: Path, transforms: str, edits: list) -> None:
    path = data / transforms
    meta = json.loads(path.read_text())
    for where, index, key, value in edits:
        frames = meta["frames"] if isinstance(meta.get("frames"), list) and meta["frames"] else [{}]
        frame = frames[index % len(frames)]
        if where == "image" and isinstance(frame, dict) and isinstance(frame.get("file_path"), str):
            image = data / frame["file_path"].replace("./", "")
            image = image if image.suffix else image.with_suffix(".png")
            if image.exists():
                damage_image(image, value)
        elif where == "meta":
            meta[key] = value
        elif isinstance(frame, dict) and where == "frame":
            frame[key] = value
        elif isinstance(frame, dict):
            frame.pop(key, None)
    path.write_text(json.dumps(meta))


def assert_parsed(config, data: Path, splits: tuple[str, ...]) -> None:
    """What nerfstudio reads of an accepted dataset: finite cameras and images of the cameras' sizes."""
    from nerfstudio.data.datasets.base_dataset import InputDataset

    parser = copy.deepcopy(config.pipeline.datamanager.dataparser)
    parser.data = data
    for split in splits:
        outputs = parser.setup().get_dataparser_outputs(split)
        cameras = outputs.cameras
        for values in (cameras.camera_to_worlds, cameras.fx, cameras.fy, cameras.cx, cameras.cy):
            assert values.isfinite().all()
        assert (cameras.fx > 0).all() and (cameras.fy > 0).all()
        dataset = InputDataset(outputs)
        for index in range(len(dataset)):
            image = dataset.get_numpy_image(index)
            assert image.dtype == np.uint8 and image.shape[2] in (3, 4)
            assert image.shape[:2] == (int(cameras.height[index]), int(cameras.width[index]))


@pytest.mark.parametrize("factor", RUNS)
@pytest.mark.parametrize("layout", ["blender", "capture"])
def test_ns_trains_checks_pass_only_data_nerfstudio_reads_right(layout, factor, scene, capture, tmp_path_factory):
    @fuzz(25, factor)
    @given(edits=st.lists(BLENDER_EDITS if layout == "blender" else CAPTURE_EDITS, min_size=1, max_size=3))
    def check(edits):
        with tempfile.TemporaryDirectory() as folder:
            data = Path(folder) / "data"
            shutil.copytree(scene if layout == "blender" else capture, data)
            apply_edits(data, "transforms_train.json" if layout == "blender" else "transforms.json", edits)
            method = "rff-nerf-lite" if layout == "blender" else "rff-nerfacto-lite"
            config = parsed(method, "--machine.device-type", "cpu", "--data", data, tmp_path=Path(folder) / "runs")
            try:
                config.prepare()
            except UsageError as error:
                assert "\n" not in str(error) and str(data) in str(error)
                return
            assert_parsed(config, data, ("train", "val"))

    check()


@pytest.mark.parametrize("factor", RUNS)
def test_export_mesh_keeps_the_contract(factor, trained, tmp_path_factory):
    config_path = trained["config_path"]
    run = config_path.parent

    @fuzz(10, factor)
    @given(
        threshold=st.one_of(st.sampled_from([0.01, 1.0]), st.floats(1e-3, 10), NUMBERS),
        resolution=st.one_of(st.integers(8, 12), st.integers(8, 10), st.sampled_from([0, 7, -1, 3000, 2**31])),
        box=st.one_of(st.none(), st.none(), st.lists(st.one_of(st.floats(-2, 2), NUMBERS), min_size=6, max_size=6)),
        options=st.lists(
            st.sampled_from(["--keep-ground", "--nerfstudio-frame", "--field", "--min-component", "--batch-size"]),
            max_size=3,
            unique=True,
        ),  # fmt: skip
        values=st.tuples(st.sampled_from(["fine", "coarse", "x"]), NUMBERS, st.one_of(st.integers(1, 4096), INTEGERS)),
        load=st.sampled_from(["run"] * 5 + ["missing", "a folder", "garbage", "crafted", "other yaml"]),
        output=st.sampled_from(["ply"] * 4 + ["txt", "existing", "under a file"]),
    )
    def check(threshold, resolution, box, options, values, load, output):
        with tempfile.TemporaryDirectory() as folder:
            folder = Path(folder)
            (folder / "taken.ply").write_text("a user's file")
            out = {"ply": folder / "m.ply", "txt": folder / "m.txt", "existing": folder / "taken.ply",
                   "under a file": folder / "taken.ply" / "m.ply"}[output]  # fmt: skip
            load_path = {"run": config_path, "missing": folder / "none.yml", "a folder": folder}.get(load)
            if load_path is None:
                load_path = run / f"fuzz-{load}.yml"
                text = {"garbage": "\x00\x01 not: [yaml", "other yaml": "a: [1, 2]\nb: {c: !!python/tuple [1]}",
                        "crafted": config_path.read_text().replace(
                            "experiment_name: tiny", f"experiment_name: !!python/object/apply:os.system "
                            f"['touch {folder / 'ran'}']")}[load]  # fmt: skip
                load_path.write_text(text)
            args = ["--load-config", load_path, "--output-path", out, "--threshold", number_text(threshold),
                    "--resolution", resolution]  # fmt: skip
            if box is not None:
                args += ["--bbox-min", *map(number_text, box[:3]), "--bbox-max", *map(number_text, box[3:])]
            given_values = {"--field": values[0], "--min-component": number_text(values[1]), "--batch-size": values[2]}
            for option in options:
                args += (
                    [option] if option in ("--keep-ground", "--nerfstudio-frame") else [option, given_values[option]]
                )
            code, err = command(export_mesh.entrypoint, args)

            def correct():
                assert load == "run" and output == "ply"
                mesh = trimesh.load(out)
                assert len(mesh.faces) > 0 and np.isfinite(mesh.vertices).all()
                if box is not None:
                    tolerance = 1e-3 * max(1.0, float(np.ptp(box)))
                    assert (mesh.vertices >= np.array(box[:3]) - tolerance).all()
                    assert (mesh.vertices <= np.array(box[3:]) + tolerance).all()

            assert_contract(code, err, [*options_given(args), *options_of(export_mesh.entrypoint)], correct)
            assert not (folder / "ran").exists()

    check()


@pytest.mark.parametrize("factor", RUNS)
def test_scene_keeps_the_contract(factor):
    @fuzz(8, factor)
    @given(
        layout=st.sampled_from(["blender", "capture"]),
        size=st.one_of(st.integers(8, 12), INTEGERS),
        views=st.one_of(st.integers(1, 12), st.sampled_from([0, -1, 10**9, 10**15, 2**63])),
        supersample=st.one_of(st.just(1), INTEGERS),
        distances=st.tuples(NUMBERS, NUMBERS),
        out_state=st.sampled_from(["new", "new", "empty", "a file", "not empty"]),
    )
    def check(layout, size, views, supersample, distances, out_state):
        with tempfile.TemporaryDirectory() as folder:
            out = Path(folder) / "scene"
            if out_state == "empty":
                out.mkdir()
            elif out_state == "a file":
                out.write_text("a user's file")
            elif out_state == "not empty":
                out.mkdir()
                (out / "notes.txt").write_text("a user's notes")
            count = "--num-train-views" if layout == "blender" else "--num-views"
            args = [layout, "--output-dir", out, "--image-size", size, count, views, "--supersample", supersample]
            if layout == "capture":
                args += ["--distance-min", number_text(distances[0]), "--distance-max", number_text(distances[1])]
            code, err = command(scene.entrypoint, args)

            def correct():
                from nerfstudio.data.dataparsers.blender_dataparser import BlenderDataParserConfig
                from nerfstudio.data.dataparsers.nerfstudio_dataparser import NerfstudioDataParserConfig

                assert out_state in ("new", "empty")
                parser = BlenderDataParserConfig() if layout == "blender" else NerfstudioDataParserConfig()
                first = check_dataset(parser, out, "val", "rff-nerf-lite")
                assert Image.open(first).size == (size, size)

            assert_contract(code, err, [*options_given(args), *options_of(scene.entrypoint, layout)], correct)
            if code == 2 and out_state == "not empty":
                assert (out / "notes.txt").read_text() == "a user's notes"

    check()


DEMO_BAD = {
    "--steps": st.sampled_from([0, -1]),
    "--image-size": st.sampled_from([0, 7, 10**9]),
    "--num-train-views": st.sampled_from([0, -3]),
    "--num-test-views": st.sampled_from([0]),
    "--mesh-resolution": st.sampled_from([7, 0, 10**6]),
    "--mesh-threshold": st.sampled_from([0.0, -1.0, math.nan, math.inf]),
    "--seed": st.sampled_from([-1, 2**32, 2**70]),
    "--embedding.num-frequencies": st.sampled_from([0, -2]),
    "--embedding.filter-layers": st.sampled_from([0]),
    "--embedding.pe-scale": st.sampled_from([0.0, math.nan]),
    "--device": st.sampled_from(["cuda", "tpu"]),
}


@pytest.mark.parametrize("factor", RUNS)
def test_demo_refuses_bad_options_before_any_work(factor):
    import torch

    bad = {
        option: values for option, values in DEMO_BAD.items() if option != "--device" or not torch.cuda.is_available()
    }

    @fuzz(10, factor)
    @given(
        options=st.dictionaries(st.sampled_from(list(bad)), st.none(), min_size=1, max_size=3).flatmap(
            lambda keys: st.fixed_dictionaries({key: bad[key] for key in keys})
        ),
        out_state=st.sampled_from(["new", "a file", "not empty"]),
    )
    def check(options, out_state):
        with tempfile.TemporaryDirectory() as folder:
            out = Path(folder) / "demo"
            if out_state == "a file":
                out.write_text("a user's file")
            elif out_state == "not empty":
                out.mkdir()
                (out / "notes.txt").write_text("a user's notes")
            args = ["--output-dir", out]
            for option, value in options.items():
                args += [option, number_text(value) if isinstance(value, float) else value]
            code, err = command(demo.entrypoint, args)
            assert code == 2
            assert_contract(code, err, [*options_given(args), *options_of(demo.entrypoint)])
            assert out_state != "new" or not out.exists()

    check()


@pytest.mark.parametrize("factor", RUNS)
def test_nerf_bench_refuses_bad_options_before_any_training(factor, scene):
    @fuzz(8, factor)
    @given(
        variants=st.lists(
            st.sampled_from(
                [
                    "rff-nerf-lite,zzz=1",
                    "vanilla-nerf",
                    "x:rff-nerfacto-lite,hidden_dim=0",
                    "rff-nerf-lite,embedding.filter_layers=-1",
                    "a:rff-nerf-lite,a=b=c",
                    ",",
                    "rff-nerf-lite,optimizers.fields.optimizer.lr=nan",
                ]
            ),
            min_size=1,
            max_size=2,
        ),  # fmt: skip
        steps=st.one_of(st.just(1), INTEGERS),
        scale=st.one_of(st.just(1.0), NUMBERS),
        shard=st.sampled_from(["1/1", "0/0", "2/1", "a"]),
        data=st.sampled_from(["scene", "missing", "a file"]),
    )
    def check(variants, steps, scale, shard, data):
        with tempfile.TemporaryDirectory() as folder:
            (Path(folder) / "file").write_text("a user's file")
            path = {"scene": scene, "missing": Path(folder) / "none", "a file": Path(folder) / "file"}[data]
            args = ["--data", path, "--output-dir", Path(folder) / "bench", "--steps", steps, "--resolution-scale",
                    number_text(scale), "--shard", shard, "--device", "cpu", "--variants", *variants]  # fmt: skip
            code, err = command(nerf_bench.entrypoint, args)
            assert code == 2
            assert_contract(code, err, [*options_given(args), "variant ", *options_of(nerf_bench.entrypoint)])
            assert not list((Path(folder) / "bench").glob("runs/*/*/nerfstudio"))

    check()


TRAIN_OPTIONS = {
    "--pipeline.datamanager.train-num-rays-per-batch": st.one_of(st.integers(1, 64), INTEGERS),
    "--pipeline.datamanager.camera-res-scale-factor": st.one_of(st.sampled_from([0.5, 1.0]), NUMBERS),
    "--optimizers.fields.optimizer.lr": st.one_of(st.just(5e-4), NUMBERS),
    "--pipeline.model.line-search.lr-max": st.one_of(st.just(1e-3), NUMBERS),
    "--pipeline.model.embedding.num-frequencies": st.one_of(st.integers(1, 6), INTEGERS),
    "--pipeline.model.num-coarse-samples": st.one_of(st.integers(1, 8), INTEGERS),
    "--machine.seed": INTEGERS,
    "--max-num-iterations": st.one_of(st.just(1), INTEGERS),
}


@pytest.mark.parametrize("factor", RUNS)
def test_ns_train_options_are_refused_naming_them_or_train(factor, scene):
    import torch

    @fuzz(6, factor)
    @given(
        options=st.dictionaries(st.sampled_from(list(TRAIN_OPTIONS)), st.none(), min_size=1, max_size=3).flatmap(
            lambda keys: st.fixed_dictionaries({key: TRAIN_OPTIONS[key] for key in keys})
        )
    )
    def check(options):
        args = [arg for option, value in options.items() for arg in (option, number_text(value)
                if isinstance(value, float) else value)]  # fmt: skip
        with tempfile.TemporaryDirectory() as folder:
            try:
                config = parsed("rff-nerf-lite", "--machine.device-type", "cpu", *args, "--data", scene,
                                tmp_path=Path(folder))  # fmt: skip
            except SystemExit as end:  # tyro's parse errors: a box naming the option
                assert end.code == 2
                return
            try:
                config.prepare()
            except UsageError as error:
                assert "\n" not in str(error) and any(option in str(error) for option in [*options, "--data"])
                return
            config.set_timestamp()
            config.save_config()
            trainer = config.setup(local_rank=0, world_size=1)
            trainer.setup()
            loss, _, _ = trainer.train_iteration(0)
            trainer.shutdown()
            torch.set_flush_denormal(False)  # the model flushes subnormals on its thread; hypothesis draws them
            assert loss.isfinite()

    check()
