"""Every console script and subcommand answers --help, and the benchmark helpers run on tiny inputs."""

import importlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest

from rff_field.cli import bench, demo, export_mesh, image, launch, scene, sdf
from rff_field.cli.common import BROKEN_PIPE_EXIT_STATUS, call_main, note_unused_filter_options
from rff_field.common.help_text import join_wrapped_lines
from rff_field.core.errors import JobsFailed, UsageError

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

BENCHMARKS = (
    "image image-merge image-timing filter-timing batch-timing reproduction-report scale-report sdf nerf nerf-timing "
    "nerf-eval-timing nerf-report hash-grid-timing startup-timing"
)
COMMANDS = {
    "rff-image": (image.entrypoint, ["fit", "bench", "render"]),
    "rff-sdf": (sdf.entrypoint, ["fit", "bench", "pool", "mesh"]),
    "rff-bench": (bench.entrypoint, BENCHMARKS.split()),
    "rff-export-mesh": (export_mesh.entrypoint, [None]),
    "rff-scene": (scene.entrypoint, ["blender", "capture"]),
}


def run(entrypoint, args, monkeypatch) -> int:
    monkeypatch.setattr(sys, "argv", ["prog", *args])
    with pytest.raises(SystemExit) as info:
        entrypoint(args) if entrypoint is not demo.entrypoint else entrypoint()
        sys.exit(0)
    return int(info.value.code or 0)


@pytest.mark.parametrize("name,sub", [(n, s) for n, (_, subs) in COMMANDS.items() for s in subs])
def test_help(name, sub, monkeypatch, capsys):
    entrypoint = COMMANDS[name][0]
    assert run(entrypoint, [sub, "--help"] if sub else ["--help"], monkeypatch) == 0
    text = capsys.readouterr().out
    assert f"usage: {name}" in text and "--" in text  # the console script's name, whatever sys.argv[0] is


@pytest.mark.parametrize(
    "entrypoint,words", [(image.entrypoint, "rff-image bench"), (bench.entrypoint, "rff-bench image")]
)
def test_help_of_a_benchmark_from_a_protocol_table_is_the_benchmarks(entrypoint, words, monkeypatch, capsys):
    args = [words.split()[1], "--protocol", "benchmarks/image/protocols.toml:cpu", "--help"]
    assert run(entrypoint, args, monkeypatch) == 0
    text = capsys.readouterr().out
    assert f"usage: {words} [-h]" in text and "Run methods over a folder of images" in text and "--variants" in text


def test_help_texts_are_not_broken_at_the_docstrings_line_ends(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "300")  # no wrapping by the formatter either
    assert run(image.entrypoint, ["fit", "--help"], monkeypatch) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any("default: scikit-image's astronaut." in line for line in lines)
    assert any("full batch up to 65,536 pixels, 2000 iterations" in line for line in lines)  # the description
    assert any("Where to train: `auto` picks CUDA" in line for line in lines)
    assert not any("``" in line for line in lines)  # reST's inline code shown as `code`


def test_wrapped_docstring_lines_are_joined_but_paragraphs_lists_and_tables_kept():
    text = "First line\n    goes on\n    (here).\n\n    - one\n    - two,\n    continued\n    Table:\n        a  b\n"
    assert join_wrapped_lines(text) == "First line goes on (here).\n\n- one\n- two, continued Table:\n    a  b"


def test_demo_help(monkeypatch, capsys):
    assert run(demo.entrypoint, ["--help"], monkeypatch) == 0
    assert "--output-dir" in capsys.readouterr().out


def test_legacy_flags_are_renamed_with_a_notice(monkeypatch, capsys):
    assert run(image.entrypoint, ["fit", "--no-line-search", "--lr-max", "0.5", "--help"], monkeypatch) == 0
    err = capsys.readouterr().err
    assert "--no-line-search is now --line-search.no-enabled" in err and "--lr-max is now --line-search.lr-max" in err
    assert run(bench.entrypoint, ["sdf", "--filter-lr-max", "0.5", "--help"], monkeypatch) == 0  # rff-sdf's names
    assert "--filter-lr-max is now --line-search.lr-max" in capsys.readouterr().err


def test_image_and_filter_timing_write_tables(tmp_path):
    rng = np.random.default_rng(0)
    iio.imwrite(tmp_path / "pic.png", (rng.random((16, 16, 3)) * 255).astype(np.uint8))
    result = bench.ImageTiming(image=tmp_path / "pic.png", dest=tmp_path / "t", variants=("mlp-pe", "filtered-pe"),
                               downsample=1, hidden_features=8, block=2, rounds=1).main()  # fmt: skip
    assert [r["label"] for r in result["rows"]] == ["mlp-pe", "filtered-pe"] and result["rows"][0]["ratio"] == 1.0
    assert "| filtered-pe |" in (tmp_path / "t" / "timing.md").read_text()
    padding = bench.FilterTiming(dest=tmp_path / "f", widths=(6,), samples=64, rounds=1, repeats=1).main()
    assert padding["rows"][0]["padded_dim"] == 8
    assert json.loads((tmp_path / "f" / "padding.json").read_text())["rows"][0]["dim"] == 6
    grid = bench.HashGridTiming(dest=tmp_path / "h", points=64, levels=2, log2_hashmap_size=6, rounds=1).main()
    assert [r["pass"] for r in grid["rows"]] == ["forward", "forward+backward"]
    assert "| forward+backward |" in (tmp_path / "h" / "hash_grid.md").read_text()
    table = (tmp_path / "f" / "padding.md").read_text()
    with pytest.raises(UsageError, match="already holds padding.json, padding.md; pass --overwrite"):
        bench.FilterTiming(dest=tmp_path / "f", widths=(6,), samples=64, rounds=1, repeats=1).main()
    assert (tmp_path / "f" / "padding.md").read_text() == table
    bench.FilterTiming(dest=tmp_path / "f", widths=(7,), samples=64, rounds=1, repeats=1, overwrite=True).main()
    assert "| 7 |" in (tmp_path / "f" / "padding.md").read_text()


def test_the_shipped_protocols_are_found_from_any_folder_and_every_table_builds(tmp_path, monkeypatch):
    from rff_field.bench.image import BenchConfig
    from rff_field.bench.protocols import BUNDLED_PROTOCOLS, build_config, read_protocol, tomllib

    monkeypatch.chdir(tmp_path)  # outside the checkout, as with an installed package
    for documented, shipped in BUNDLED_PROTOCOLS.items():
        assert (Path(__file__).parents[2] / documented).resolve() == shipped.resolve()  # the checkout links to it
        for name, table in tomllib.loads(shipped.read_text()).items():
            if isinstance(table, dict):
                values, _ = read_protocol(f"{documented}:{name}")
                assert isinstance(build_config(BenchConfig, values, where=f"{name}."), BenchConfig)


def test_protocol_tables_start_the_image_benchmark(tmp_path, monkeypatch, capsys):
    protocol = tmp_path / "p.toml"
    protocol.write_text('[base]\ndownsample = 2\n[tiny]\nbase = "base"\nvariants = ["mlp-pe"]\nsweep_names = []\n'
                        'long_names = []\nfit = { iters = 3 }\n')  # fmt: skip
    images = tmp_path / "images"
    images.mkdir()
    iio.imwrite(images / "a.png", np.zeros((16, 16, 3), np.uint8))
    args = ["image", "--protocol", f"{protocol}:tiny", "--images", str(images), "--out", str(tmp_path / "o"),
            "--list-jobs"]  # fmt: skip
    assert run(bench.entrypoint, args, monkeypatch) == 0
    assert capsys.readouterr().out.strip().split("\t") == ["0", "pending", "3", "runs/a/mlp-pe"]
    assert run(image.entrypoint, ["bench", *args[1:], "--iters", "5"], monkeypatch) == 0  # options override it
    assert capsys.readouterr().out.strip().split("\t") == ["0", "pending", "5", "runs/a/mlp-pe"]
    assert run(bench.entrypoint, ["image", "--protocol", f"{protocol}:nope"], monkeypatch) == 2
    assert "name one of the tables" in capsys.readouterr().err
    for text, message in [
        ('[bad]\nfit = { colour = "red" }\n', "bad.fit.colour is not an option"),
        ("[bad]\niters = 5\n", "bad.iters is not an option here; it belongs in the nested table bad.fit"),
        ("[bad]\ndownsample = 2.5\n", "bad.downsample takes a value of type int; got 2.5"),
        ('[bad]\nvariants = "mlp-pe"\n', "bad.variants takes a list"),
        ('[bad]\nfit = { network = { pe = "fourier" } }\n', "bad.fit.network.pe takes one of"),
        ("bad = 3\n", "name one of the tables"),
    ]:
        protocol.write_text(text)
        assert run(bench.entrypoint, ["image", "--protocol", f"{protocol}:bad"], monkeypatch) == 2
        assert message in capsys.readouterr().err, text
    protocol.write_bytes(bytes(range(256)))  # not text at all
    assert run(bench.entrypoint, ["image", "--protocol", f"{protocol}:bad"], monkeypatch) == 2
    assert "is not valid TOML" in capsys.readouterr().err


def test_help_into_a_closed_pipe_exits_quietly():
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write to the pipe fails, as when `| head` has read enough
    code = "import sys; from rff_field.cli import image; sys.argv = ['rff-image', 'fit', '--help']; image.entrypoint()"
    done = subprocess.run([sys.executable, "-c", code], stdout=write_end, stderr=subprocess.PIPE, text=True)
    os.close(write_end)
    assert done.returncode == BROKEN_PIPE_EXIT_STATUS
    assert done.stderr == ""


def test_sdf_help_leaves_out_image_only_network_options(monkeypatch, capsys):
    assert run(sdf.entrypoint, ["fit", "--help"], monkeypatch) == 0
    text = capsys.readouterr().out
    assert "--pe-scale" in text and "--sape-res" not in text and "--wire-bands" not in text


def test_scene_writes_datasets_nerfstudio_reads(tmp_path, monkeypatch, capsys):
    from nerfstudio.data.dataparsers.blender_dataparser import BlenderDataParserConfig
    from nerfstudio.data.dataparsers.nerfstudio_dataparser import NerfstudioDataParserConfig

    tiny = ["--image-size", "8", "--supersample", "1"]
    assert (
        run(scene.entrypoint, ["capture", "--out", str(tmp_path / "my cap"), "--num-views", "10", *tiny], monkeypatch)
        == 0
    )
    assert f"ns-train rff-nerfacto-lite --data '{tmp_path / 'my cap'}'" in capsys.readouterr().out  # ready to paste
    outputs = NerfstudioDataParserConfig(data=tmp_path / "my cap").setup().get_dataparser_outputs("train")
    assert len(outputs.image_filenames) == 9  # nerfstudio holds out one of ten
    args = ["blender", "--out", str(tmp_path / "void"), "--num-train", "3", "--num-val", "1", "--num-test", "2", *tiny]
    assert run(scene.entrypoint, args, monkeypatch) == 0
    outputs = BlenderDataParserConfig(data=tmp_path / "void").setup().get_dataparser_outputs("test")
    assert len(outputs.image_filenames) == 2


@pytest.mark.parametrize(
    "args,message",
    [
        (["capture", "--num-views", "9"], "--num-views must be at least 10, got 9"),
        (["capture", "--distance-min", "5"], "need 0 < --distance-min <= --distance-max, both finite, got 5.0 and 4.5"),
        (["capture", "--distance-max", "inf"], "both finite, got 2.5 and inf"),
        (["capture", "--seed", "-1"], "--seed must be at least 0, got -1"),
        (["blender", "--num-test", "0"], "--num-test must be at least 1, got 0"),
        (["blender", "--seed", "-1"], "--seed must be at least 0, got -1"),
    ],
)
def test_scene_options_fail_before_writing(args, message, tmp_path, monkeypatch, capsys):
    out = tmp_path / "new"
    assert run(scene.entrypoint, [*args, "--out", str(out)], monkeypatch) == 2
    assert message in capsys.readouterr().err and not out.exists()


def test_scene_refuses_a_folder_with_files(tmp_path, monkeypatch, capsys):
    (tmp_path / "mine.txt").write_text("keep")
    assert run(scene.entrypoint, ["capture", "--out", str(tmp_path)], monkeypatch) == 2
    assert "is not empty" in capsys.readouterr().err and sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt"]


def test_usage_names_the_script_not_its_path(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [os.path.join("venv", "bin", "rff-image"), "fit", "--help"])
    with pytest.raises(SystemExit):
        image.entrypoint(["fit", "--help"])
    assert capsys.readouterr().out.startswith("usage: rff-image fit ")


def test_ctrl_c_before_a_fit_starts_says_interrupted(capsys):
    class Command:
        def main(self):
            raise KeyboardInterrupt

    assert call_main("rff-image", Command()) == (130, None)
    assert capsys.readouterr().err == "rff-image: interrupted\n"


def test_every_console_script_answers_help_through_its_launcher(monkeypatch, capsys):
    scripts = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]["scripts"]
    assert set(scripts) == {*COMMANDS, "rff-demo"}
    for name, target in scripts.items():
        module, _, function = target.partition(":")
        monkeypatch.setattr(sys, "argv", [name, "--help"])
        with pytest.raises(SystemExit) as info:
            getattr(importlib.import_module(module), function)()
        assert info.value.code == 0 and capsys.readouterr().out.startswith(f"usage: {name}")


def test_ctrl_c_while_a_command_loads_says_interrupted(monkeypatch, capsys):
    def press_ctrl_c(name):
        raise KeyboardInterrupt

    monkeypatch.setattr(importlib, "import_module", press_ctrl_c)
    with pytest.raises(SystemExit) as info:
        launch.rff_image()
    assert info.value.code == 130 and capsys.readouterr().err == "rff-image: interrupted\n"


def test_filter_options_given_to_a_method_without_a_filter_get_a_note(capsys):
    from rff_field.core.optim import LineSearchConfig
    from rff_field.image.fit import FitConfig
    from rff_field.inr.config import NetworkConfig
    from rff_field.sdf.fit import SDFNetworkConfig, SDFTrainConfig

    config = FitConfig(network=NetworkConfig(method="mlp-pe", filter_residual=True))
    config.line_search = LineSearchConfig(lr_max=0.01)
    note_unused_filter_options("mlp-pe", config.network, config)
    assert (
        capsys.readouterr().err.strip()
        == "note: mlp-pe has no filter, so --filter-residual, --line-search.* are ignored"
    )
    note_unused_filter_options("filtered-pe", config.network, config)
    note_unused_filter_options("mlp-pe", NetworkConfig(method="mlp-pe"), FitConfig())
    assert capsys.readouterr().err == ""
    note_unused_filter_options("siren", SDFNetworkConfig(method="siren"), SDFTrainConfig(filter_lr=0.1))
    assert capsys.readouterr().err.strip() == "note: siren has no filter, so --filter-lr is ignored"


def test_a_scene_that_fails_while_writing_leaves_no_files_behind(tmp_path, monkeypatch, capsys):
    def write_then_run_out_of_memory(out, spec, progress):
        (out / "images").mkdir(parents=True)
        (out / "images" / "frame_00001.png").write_bytes(b"partial")
        raise MemoryError("Unable to allocate 671. GiB for an array")

    monkeypatch.setattr(scene, "write_nerfstudio_capture", write_then_run_out_of_memory)
    out = tmp_path / "cap"
    out.mkdir()  # an empty folder of the user's stays, empty
    assert run(scene.entrypoint, ["capture", "--out", str(out)], monkeypatch) == 1
    err = capsys.readouterr().err
    assert err.startswith("rff-scene: error: out of memory (Unable to allocate 671. GiB") and err.count("\n") == 1
    assert out.is_dir() and not any(out.iterdir())


def test_a_scene_stopped_by_kill_leaves_no_files_behind(tmp_path, monkeypatch, capsys):
    def write_then_get_killed(out, spec, progress):
        (out / "images").mkdir(parents=True)
        (out / "images" / "frame_00001.png").write_bytes(b"partial")
        signal.raise_signal(signal.SIGTERM)

    monkeypatch.setattr(scene, "write_nerfstudio_capture", write_then_get_killed)
    assert run(scene.entrypoint, ["capture", "--out", str(tmp_path / "cap")], monkeypatch) == 130
    assert capsys.readouterr().err == "rff-scene: interrupted\n"
    assert not (tmp_path / "cap").exists()  # made by the command, so removed with what it held
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_only_failed_allocations_become_one_line_errors(capsys):
    class Command:
        def __init__(self, error):
            self.error = error

        def main(self):
            raise self.error

    message = "DefaultCPUAllocator: can't allocate memory: you tried to allocate 40000000000 bytes."
    assert call_main("rff-bench", Command(RuntimeError(message))) == (1, None)
    assert "rff-bench: error: out of memory (DefaultCPUAllocator" in capsys.readouterr().err
    with pytest.raises(RuntimeError, match="shape mismatch"):
        call_main("rff-bench", Command(RuntimeError("shape mismatch")))
    assert call_main("rff-bench", Command(JobsFailed("1 job(s) failed, the first runs/a with KeyError"))) == (1, None)
    assert capsys.readouterr().err == "rff-bench: error: 1 job(s) failed, the first runs/a with KeyError\n"
