"""Fuzzing the image boundary: the reader with files of every mode, size and damage, and rff-image fit, render and
bench with option values, files and output folders a user may give. The contract: the right pixels or a result
that holds, or exit 2 with one line naming what was wrong; never a traceback, and NaN data never blamed on a rate."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

from rff_field.cli.image import entrypoint
from rff_field.core.errors import UsageError
from rff_field.image.data import MIN_SIDE, load_image
from tests.fuzz import (
    INTEGERS,
    NUMBERS,
    RUNS,
    assert_contract,
    command,
    fuzz,
    number_text,
    options_given,
    options_of,
)

MODES = ["L", "RGB", "RGBA", "LA", "P", "1", "I;16", "F", "CMYK", "I"]
IMAGE_SPECS = st.fixed_dictionaries({
    "mode": st.sampled_from(MODES),
    "size": st.tuples(st.integers(1, 9), st.integers(1, 9)),
    "seed": st.integers(0, 2**32 - 1),
    "float_values": st.sampled_from(["unit", "nan", "above", "negative"]),
    "damage": st.one_of(st.none(), st.integers(0, 400), st.just("bytes")),
})  # fmt: skip


def write_image(spec: dict, folder: Path) -> tuple[Path, np.ndarray]:
    """The file an image spec describes, and the pixels it holds in [0, 1] ([H, W, C], NaN where undefined)."""
    rng = np.random.default_rng(spec["seed"])
    height, width = spec["size"]
    mode, suffix = spec["mode"], {"F": ".tif", "CMYK": ".tif", "I": ".tif"}.get(spec["mode"], ".png")
    path = folder / f"image{suffix}"
    if mode == "F":
        values = rng.random((height, width)).astype(np.float32)
        values[0, 0] = {"unit": values[0, 0], "nan": np.nan, "above": 1.5, "negative": -0.25}[spec["float_values"]]
        image, expected = Image.fromarray(values), values
    elif mode in ("I;16", "I"):
        values = rng.integers(0, 256 if spec["seed"] % 2 else 65536, (height, width))
        image = Image.fromarray(values.astype(np.uint16 if mode == "I;16" else np.int32))
        expected = values / 65535
    elif mode == "1":
        values = rng.integers(0, 2, (height, width)).astype(bool)
        image, expected = Image.fromarray(values), values.astype(float)
    elif mode == "P":
        index = rng.integers(0, 8, (height, width)).astype(np.uint8)
        palette = rng.integers(0, 256, (8, 3)).astype(np.uint8)
        image = Image.fromarray(index, mode="P")
        image.putpalette(palette.flatten().tolist())
        expected = palette[index] / 255
    else:
        channels = {"L": 1, "RGB": 3, "RGBA": 4, "LA": 2, "CMYK": 4}[mode]
        values = rng.integers(0, 256, (height, width, channels)).astype(np.uint8)
        image = Image.fromarray(values[..., 0] if channels == 1 else values, mode=mode)
        kept = {"RGBA": values[..., :3], "LA": values[..., :1], "CMYK": None}.get(mode, values)
        expected = np.asarray(image.convert("RGB")) / 255 if kept is None else kept / 255
    image.save(path)
    if spec["damage"] == "bytes":
        path.write_bytes(rng.integers(0, 256, 64).astype(np.uint8).tobytes())
    elif spec["damage"] is not None:
        path.write_bytes(path.read_bytes()[: spec["damage"]])
    return path, (expected[..., None] if expected.ndim == 2 else expected).astype(np.float64)


@pytest.mark.parametrize("factor", RUNS)
def test_the_reader_gives_the_right_pixels_or_refuses_naming_the_file(factor):
    @fuzz(60, factor)
    @given(spec=IMAGE_SPECS)
    def check(spec):
        with tempfile.TemporaryDirectory() as folder:
            path, expected = write_image(spec, Path(folder))
            try:
                pixels, _ = load_image(path)
            except UsageError as error:
                assert str(path) in str(error) and "\n" not in str(error)
                return
            assert spec["damage"] != "bytes" and spec["mode"] != "I"  # integers of no known range are refused
            assert np.isfinite(expected).all() and 0 <= expected.min() and expected.max() <= 1
            assert min(expected.shape[:2]) >= MIN_SIDE
            np.testing.assert_allclose(pixels.numpy(), expected, atol=1e-6)

    check()


FIT_OPTIONS = {
    "--passes": st.one_of(st.integers(1, 3), INTEGERS),
    "--lr": st.one_of(st.sampled_from([1e-3, 1e30]), NUMBERS),
    "--lr-final": NUMBERS,
    "--batch-size": st.one_of(st.integers(1, 50), INTEGERS),
    "--resolution-scale": st.one_of(st.sampled_from([1.0, 0.5, 1 / 3, 0.3, 2.0]), NUMBERS),
    "--hidden-features": st.one_of(st.integers(1, 8), INTEGERS),
    "--hidden-layers": st.one_of(st.integers(0, 2), INTEGERS),
    "--method": st.sampled_from(["mlp", "siren", "gauss", "wire", "sape", "bacon", "nope"]),
    "--line-search.lr-max": NUMBERS,
    "--line-search.lr-min": NUMBERS,
    "--embedding.num-frequencies": st.one_of(st.integers(1, 4), INTEGERS),
    "--embedding.pe-scale": NUMBERS,
    "--embedding.encoding": st.sampled_from(["pe", "rff", "x"]),
    "--embedding.filter-layers": st.one_of(st.integers(1, 3), INTEGERS),
    "--filter-lr": NUMBERS,
    "--grad-clip": NUMBERS,
    "--seed": INTEGERS,
    "--log-every": st.one_of(st.integers(1, 3), INTEGERS),
    "--time-budget": NUMBERS,
    "--error-vmax": NUMBERS,
}
OUT_STATES = ["new", "a file", "under a file", "a finished fit", "a damaged fit", "a stopped fit"]
RATES = ["--lr", "--line-search.lr-max", "--filter-lr"]


def spelled(value) -> str:
    return number_text(value) if isinstance(value, float) else str(value)


def fit_args(image: Path, out: Path, options: dict) -> list:
    args = ["fit", "--image", image, "--output-dir", out, "--no-progress", "--lpips", "False"]
    for option, value in options.items():
        args += [option, spelled(value)]
    return args


@pytest.fixture(scope="module")
def finished_fit(tmp_path_factory):
    """A small image and a finished fit of it."""
    folder = tmp_path_factory.mktemp("fuzz-image")
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (8, 8, 3)).astype(np.uint8)).save(folder / "a.png")
    code, err = command(entrypoint, fit_args(folder / "a.png", folder / "fit", {"--passes": 2, "--hidden-features": 8}))
    assert code == 0, err
    return folder


def prepare_out(state: str, folder: Path, finished: Path) -> Path:
    import shutil

    out = folder / "out"
    if state == "a file":
        out.write_text("a user's file")
    elif state == "under a file":
        (folder / "file").write_text("a user's file")
        out = folder / "file" / "out"
    elif state != "new":
        shutil.copytree(finished, out)
        if state == "a damaged fit":
            (out / "metrics.json").write_text("{")
        elif state == "a stopped fit":  # a fit of other settings stopped by its time budget: its checkpoint is gone
            metrics = json.loads((out / "metrics.json").read_text())
            (out / "metrics.json").write_text(json.dumps({**metrics, "stopped": "time budget"}))
    return out


@pytest.mark.parametrize("factor", RUNS)
def test_fit_keeps_the_contract(factor, finished_fit):
    @fuzz(12, factor)
    @given(
        image=IMAGE_SPECS,
        options=st.dictionaries(st.sampled_from(list(FIT_OPTIONS)), st.none(), max_size=5).flatmap(
            lambda keys: st.fixed_dictionaries({key: FIT_OPTIONS[key] for key in keys})
        ),
        out_state=st.sampled_from(OUT_STATES),
        overwrite=st.booleans(),
    )
    def check(image, options, out_state, overwrite):
        options = {"--passes": 2, "--hidden-features": 8, **options}
        if isinstance(options["--passes"], int) and 0 < options["--passes"] < 10**6:
            options["--passes"] = min(options["--passes"], 3)  # a valid fit stays short
        with tempfile.TemporaryDirectory() as folder:
            folder = Path(folder)
            path, expected = write_image(image, folder)
            out = prepare_out(out_state, folder, finished_fit / "fit")
            before = {p.name: p.read_bytes() for p in out.glob("*")} if out.is_dir() else {}
            args = fit_args(path, out, options) + (["--overwrite"] if overwrite else [])
            code, err = command(entrypoint, args)

            def correct():
                assert out_state not in ("a file", "under a file", "a damaged fit") or overwrite
                assert out_state != "a finished fit" or overwrite
                metrics = json.loads((out / "metrics.json").read_text())
                factor = round(1 / float(options.get("--resolution-scale", 1)))
                height, width = (side // factor for side in expected.shape[:2])
                assert (metrics["height"], metrics["width"]) == (height, width) and np.isfinite(expected).all()
                assert Image.open(out / "reconstruction.png").size == (width, height)
                assert metrics.get("stopped") or metrics["passes"] == options["--passes"]

            finite = bool(np.isfinite(expected).all()) and image["damage"] is None
            named = [*options_given(args), *options_of(entrypoint, "fit")]
            assert_contract(code, err, named, correct, diverged=RATES if finite else ())
            if code == 2 and not overwrite:  # nothing that was there is changed
                assert before == ({p.name: p.read_bytes() for p in out.glob("*")} if out.is_dir() else {})

    check()


@pytest.mark.parametrize("factor", RUNS)
def test_render_keeps_the_contract(factor, finished_fit):
    @fuzz(15, factor)
    @given(
        scale=st.one_of(st.sampled_from([0.5, 2.0, 1e-9, 1e9]), NUMBERS),
        output=st.sampled_from(["default", "png", "jpg", "a folder", "existing", "under a file"]),
        overwrite=st.booleans(),
    )
    def check(scale, output, overwrite):
        with tempfile.TemporaryDirectory() as folder:
            folder = Path(folder)
            (folder / "file").write_text("a user's file")
            path = {"default": None, "png": folder / "r.png", "jpg": folder / "r.jpg", "a folder": folder,
                    "existing": folder / "file", "under a file": folder / "file" / "r.png"}[output]  # fmt: skip
            if output == "existing":
                path = folder / "taken.png"
                path.write_bytes(b"a user's picture")
            args = ["render", "--fit", finished_fit / "fit", "--resolution-scale", number_text(scale)]
            args += ["--output-path", path] if path is not None else []
            args += ["--overwrite"] if overwrite else []
            written = path or finished_fit / "fit" / f"render-x{scale:g}.png"
            code, err = command(entrypoint, args)

            def correct():
                assert output in ("default", "png") or (output == "existing" and overwrite)
                side = max(1, round(8 * scale))
                assert Image.open(written).size == (side, side)

            assert_contract(code, err, [*options_given(args), *options_of(entrypoint, "render")], correct)
            if path is None and code == 0:
                written.unlink()

    check()


VARIANT_TEXT = st.one_of(
    st.builds(lambda label, preset, items: f"{label}{preset}{''.join(items)}",
              st.sampled_from(["", "x:", "a b:", ":", "é:"]),
              st.sampled_from(["mlp-pe", "filtered-pe", "siren", "wire", "sape", "gauss", "nope", ""]),
              st.lists(st.sampled_from([",hidden_features=4", ",hidden_features=0", ",passes=1", ",zzz=1", ",x",
                                        ",line_search.enabled=maybe", ",embedding.num_frequencies=2", ",=3",
                                        ",hidden_layers=-1", ",lr=nan", ",method=siren"]), max_size=3)),
    st.text(max_size=12),
)  # fmt: skip


@pytest.mark.parametrize("factor", RUNS)
def test_bench_keeps_the_contract(factor, finished_fit):
    @fuzz(10, factor)
    @given(
        variants=st.lists(VARIANT_TEXT, min_size=1, max_size=2),
        shard=st.one_of(st.sampled_from(["1/1", "2/2", "3/2", "0/1", "1/0", "x"]), st.text(max_size=5)),
        names=st.lists(st.sampled_from(["a", "b", ""]), max_size=2),
    )
    def check(variants, shard, names):
        with tempfile.TemporaryDirectory() as folder:
            args = [
                "bench",
                "--images",
                finished_fit,
                "--output-dir",
                Path(folder) / "bench",
                "--passes",
                "1",
                "--no-progress",
                "--lpips",
                "False",
                "--hidden-features",
                "4",
                "--shard",
                shard,
                "--variants",
                *variants,
            ]
            args += ["--names", *names] if names else []  # fmt: skip
            code, err = command(entrypoint, args)

            def correct():
                rows = json.loads((Path(folder) / "bench" / "results.json").read_text())
                assert {row["input"] for row in rows} <= {"a"} and len(rows) <= len(variants)

            assert_contract(code, err, [*options_given(args), "variant ", *options_of(entrypoint, "bench")], correct)

    check()
