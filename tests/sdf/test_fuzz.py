"""Fuzzing the SDF boundary: the mesh reader with shapes of every size and damage, and rff-sdf fit, mesh and bench
with option values, meshes and output paths a user may give. The contract: a mesh read as it is (never repaired
unasked) or refused naming the file; a command's result or exit 2 with one line naming what was wrong."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
import trimesh
from hypothesis import given
from hypothesis import strategies as st

from rff_field.cli.sdf import entrypoint
from rff_field.core.errors import UsageError
from rff_field.sdf.data import load_mesh
from tests.fuzz import INTEGERS, NUMBERS, RUNS, assert_contract, command, fuzz, number_text, options_given, options_of

MESH_SPECS = st.fixed_dictionaries({
    "shape": st.sampled_from(["sphere", "box", "tetrahedron"]),
    "scale": st.sampled_from([1.0, 1e-30, 1e30, 0.0, 1e-3, 1e6, -2.0]),
    "offset": st.sampled_from([0.0, 1e12, -5.0]),
    "damage": st.sampled_from([None, "nan", "inf", "collapsed face", "index out of range", "open", "flat",
                               "no faces", "bytes", "empty", "duplicated vertices"]),
    "suffix": st.sampled_from([".ply", ".obj", ".off", ".stl"]),
})  # fmt: skip


def write_mesh(spec: dict, folder: Path) -> tuple[Path, trimesh.Trimesh]:
    """The file a mesh spec describes, and the shape it should read as (when it is one)."""
    tetrahedron = trimesh.Trimesh([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], [[0, 2, 1], [0, 1, 3], [0, 3, 2],
                                                                                [1, 2, 3]])  # fmt: skip
    shape = {"sphere": trimesh.creation.icosphere(1), "box": trimesh.creation.box(), "tetrahedron": tetrahedron}[
        spec["shape"]
    ]
    vertices, faces = shape.vertices * spec["scale"] + spec["offset"], shape.faces.copy()
    damage = spec["damage"]
    if damage in ("nan", "inf"):
        vertices[0, 1] = np.nan if damage == "nan" else np.inf
    elif damage == "collapsed face":
        faces[0, 2] = faces[0, 1]
    elif damage == "open":
        faces = faces[1:]
    elif damage == "flat":
        vertices[:, 2] = 0
    elif damage == "no faces":
        faces = faces[:0]
    elif damage == "duplicated vertices":
        vertices, faces = vertices[faces.flatten()], np.arange(3 * len(faces)).reshape(-1, 3)
    path = folder / f"shape{spec['suffix']}"
    if damage == "index out of range":
        path = path.with_suffix(".obj")
        lines = [f"v {x!r} {y!r} {z!r}" for x, y, z in vertices] + [f"f {a + 1} {b + 1} {c + 1}" for a, b, c in faces]
        path.write_text("\n".join(lines + [f"f 1 2 {len(vertices) + 5}"]) + "\n")
    elif damage == "bytes":
        path.write_bytes(np.random.default_rng(0).integers(0, 256, 80).astype(np.uint8).tobytes())
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        trimesh.Trimesh(vertices, faces, process=False).export(path)
    return path, trimesh.Trimesh(vertices, faces)


@pytest.mark.parametrize("factor", RUNS)
def test_the_reader_reads_a_shape_as_it_is_or_refuses_naming_the_file(factor):
    @fuzz(60, factor)
    @given(spec=MESH_SPECS)
    def check(spec):
        with tempfile.TemporaryDirectory() as folder:
            path, shape = write_mesh(spec, Path(folder))
            try:
                mesh = load_mesh(path)
            except UsageError as error:
                assert str(path) in str(error) and "\n" not in str(error)
                return
            assert spec["damage"] in (None, "duplicated vertices") and spec["scale"] != 0
            assert np.isfinite(mesh.vertices).all() and mesh.is_watertight and mesh.volume > 0
            stored = trimesh.load(path, force="mesh", process=False)  # at the file's precision
            assert mesh.volume == pytest.approx(abs(stored.volume), rel=1e-6)  # the same solid, not a repaired one
            assert len(mesh.faces) == len(shape.faces)

    check()


FIT_OPTIONS = {
    "--steps": st.one_of(st.integers(1, 2), INTEGERS),
    "--lr": NUMBERS,
    "--points-per-step": st.one_of(st.integers(2, 64), INTEGERS),
    "--resolution": st.one_of(st.integers(8, 12), INTEGERS),
    "--hidden-features": st.one_of(st.integers(1, 8), INTEGERS),
    "--hidden-layers": st.one_of(st.integers(0, 2), INTEGERS),
    "--method": st.sampled_from(["mlp", "siren", "gauss", "wire", "sape", "bacon", "x"]),
    "--embedding.num-frequencies": st.one_of(st.integers(1, 4), INTEGERS),
    "--line-search.lr-max": NUMBERS,
    "--grad-clip": NUMBERS,
    "--log-every": st.one_of(st.integers(1, 2), INTEGERS),
}
SMALL = {"--steps": 1, "--points-per-step": 16, "--resolution": 8, "--hidden-features": 4, "--hidden-layers": 1,
         "--embedding.num-frequencies": 2}  # fmt: skip


def spelled(value) -> str:
    return number_text(value) if isinstance(value, float) else str(value)


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzz-sdf")
    args = ["fit", "--output-dir", folder / "fit", "--device", "cpu", "--no-progress"]
    code, err = command(entrypoint, args + [arg for item in SMALL.items() for arg in map(str, item)])
    assert code == 0, err
    return folder / "fit"


@pytest.mark.parametrize("factor", RUNS)
def test_fit_keeps_the_contract(factor, fitted):
    @fuzz(6, factor)
    @given(
        mesh=st.one_of(st.none(), MESH_SPECS),
        options=st.dictionaries(st.sampled_from(list(FIT_OPTIONS)), st.none(), min_size=1, max_size=3).flatmap(
            lambda keys: st.fixed_dictionaries({key: FIT_OPTIONS[key] for key in keys})
        ),
        out_state=st.sampled_from(["new", "a file", "a finished fit"]),
        fill_holes=st.booleans(),
    )
    def check(mesh, options, out_state, fill_holes):
        options = {**SMALL, **options}
        for option in ("--steps", "--points-per-step", "--resolution"):  # a valid fit stays short
            if isinstance(options[option], int) and SMALL[option] < options[option] < 10**5:
                options[option] = SMALL[option]
        with tempfile.TemporaryDirectory() as folder:
            folder = Path(folder)
            out = folder / "out"
            if out_state == "a file":
                out.write_text("a user's file")
            elif out_state == "a finished fit":
                import shutil

                shutil.copytree(fitted, out)
            args = ["fit", "--output-dir", out, "--device", "cpu", "--no-progress"]
            args += ["--mesh", write_mesh(mesh, folder)[0]] if mesh is not None else []
            args += ["--fill-holes"] if fill_holes else []
            args += [arg for option, value in options.items() for arg in (option, spelled(value))]
            code, err = command(entrypoint, args)

            def correct():
                assert out_state == "new"
                metrics = json.loads((out / "metrics.json").read_text())
                assert metrics["steps"] == options["--steps"] and (metrics["chamfer"] is None) == (
                    not (out / "mesh.ply").exists()
                )

            assert_contract(code, err, [*options_given(args), *options_of(entrypoint, "fit")], correct,
                            diverged=["--lr", "--line-search.lr-max"])  # fmt: skip

    check()


@pytest.mark.parametrize("factor", RUNS)
def test_mesh_keeps_the_contract(factor, fitted):
    @fuzz(10, factor)
    @given(
        resolution=st.one_of(st.integers(8, 16), INTEGERS),
        output=st.sampled_from(["default", "ply", "txt", "a folder", "existing", "under a file"]),
        overwrite=st.booleans(),
        device=st.sampled_from(["cpu", "auto", "cuda", "gpu"]),
    )
    def check(resolution, output, overwrite, device):
        with tempfile.TemporaryDirectory() as folder:
            folder = Path(folder)
            (folder / "taken.ply").write_text("a user's file")
            taken = folder / "taken.ply"
            path = {"default": None, "ply": folder / "m.ply", "txt": folder / "m.txt", "a folder": folder,
                    "existing": taken, "under a file": taken / "m.ply"}[output]  # fmt: skip
            args = ["mesh", "--fit", fitted, "--resolution", resolution, "--device", device, "--no-progress"]
            args += (["--output-path", path] if path is not None else []) + (["--overwrite"] if overwrite else [])
            written = path or fitted / f"mesh-{resolution}.ply"
            code, err = command(entrypoint, args)

            def correct():
                assert output in ("default", "ply") or (output == "existing" and overwrite)
                assert len(trimesh.load(written).faces) > 0

            assert_contract(code, err, [*options_given(args), *options_of(entrypoint, "mesh"), "the network"], correct)
            if path is None and code == 0:
                written.unlink()

    check()


@pytest.mark.parametrize("factor", RUNS)
def test_bench_keeps_the_contract(factor):
    @fuzz(6, factor)
    @given(
        variants=st.lists(
            st.sampled_from(
                ["mlp-pe", "sape", "x:siren,hidden_features=0", "bacon,zzz=1", "nope", "a:mlp-pe", "a:gauss"]
            ),
            min_size=1,
            max_size=2,
        ),  # fmt: skip
        meshes=st.lists(MESH_SPECS, max_size=1),
        shard=st.sampled_from(["1/1", "3/2", "x"]),
    )
    def check(variants, meshes, shard):
        with tempfile.TemporaryDirectory() as folder:
            paths = [write_mesh(spec, Path(folder))[0] for spec in meshes]
            args = [
                "bench",
                "--output-dir",
                Path(folder) / "bench",
                "--device",
                "cpu",
                "--no-progress",
                "--shard",
                shard,
                "--variants",
                *variants,
                *[arg for item in SMALL.items() for arg in map(str, item)],
            ]
            args += ["--meshes", *paths] if paths else []  # fmt: skip
            code, err = command(entrypoint, args)

            def correct():
                rows = json.loads((Path(folder) / "bench" / "results.json").read_text())
                assert len(rows) == len(set(variants))

            assert_contract(code, err, [*options_given(args), "variant ", *options_of(entrypoint, "bench")], correct)

    check()
