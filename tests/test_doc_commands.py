"""The commands that README, docs and benchmark reports show: every ``rff-*`` and ``ns-*`` command line parses with its
command (flags, subcommands and values) and every ``ns-train`` option path names a field of a config; the slow test
runs the README's and the guides' commands as written, in order, in a folder that holds small stand-ins for the data
they name, with the step counts and sizes of :data:`SMALL`."""

from __future__ import annotations

import importlib
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tyro

from tests import REPO

COMMANDS = {
    "rff-image": "rff_field.cli.image:Command",
    "rff-sdf": "rff_field.cli.sdf:Command",
    "rff-export-mesh": "rff_field.cli.export_mesh:ExportMesh",
    "rff-demo": "rff_field.cli.demo:Demo",
    "rff-scene": "rff_field.cli.scene:Command",
    "rff-nerf-bench": "rff_field.cli.nerf_bench:NerfBench",
    "ns-train": "nerfstudio.configs.method_configs:AnnotatedBaseConfigUnion",
    "ns-viewer": "nerfstudio.scripts.viewer.run_viewer:RunViewer",
    "ns-eval": "nerfstudio.scripts.eval:ComputePSNR",
    "ns-render": "nerfstudio.scripts.render:Commands",
    "ns-export": "nerfstudio.scripts.exporter:Commands",
}
"""Each console script's tyro type (module : name)."""
NAMES = "|".join(re.escape(name) for name in COMMANDS)
COMMAND = re.compile(rf"(?<![\w/-])({NAMES})((?:[ \t]+[^\s`|#;&<>()]+)*)")
CONFIG_PATH = re.compile(r"--((?:pipeline|optimizers|machine|viewer)(?:\.[A-Za-z0-9_-]*[A-Za-z0-9_])+)")
GUIDES = [REPO / "README.md", *sorted(REPO.glob("docs/*.md"))]
"""The documents whose commands the slow test runs (benchmark reports are only parsed)."""


def documents(paths=None):
    if paths is None:
        paths = [*GUIDES, *sorted(REPO.glob("benchmarks/**/*.md"))]
    for path in paths:
        text = path.read_text().replace("\\\n", " ")
        blocks = re.findall(r"```(?:bash|sh)?\n(.*?)```", text, re.S) + re.findall(r"`([^`\n]+)`", text)
        yield path.relative_to(REPO), blocks


def shown_commands(paths=None):
    """``(document, command, arguments)`` of every command line, in each document's order (blocks, then spans)."""
    for name, blocks in documents(paths):
        for block in blocks:
            for line in block.splitlines():
                for match in COMMAND.finditer(line.split(" #")[0]):
                    yield str(name), match.group(1), match.group(2).strip()


def command_type(command: str):
    module, name = COMMANDS[command].split(":")
    parsed = getattr(importlib.import_module(module), name)
    return tyro.conf.FlagConversionOff[parsed] if command == "ns-viewer" else parsed  # as ns-viewer parses


def parse(command: str, arguments: str, capsys) -> tuple[str, object]:
    """``("ok", config)`` when ``command arguments`` parses, ``("part", None)`` for a mention or a fragment that leaves
    out required options, ``("error", why)`` otherwise."""
    args = shlex.split(arguments.replace("…", "x"))
    if not args or "--help" in args:
        return "part", None
    capsys.readouterr()
    try:
        return "ok", tyro.cli(command_type(command), args=args)
    except SystemExit as exit:
        error = capsys.readouterr().err
        if "Required options" in error and "Unrecognized" not in error:
            return "part", None
        return "error", f"exit {exit.code}: {error}"


def test_every_command_shown_parses(capsys):
    shown = sorted(set(shown_commands()))
    failures = [f"{name}: {command} {args}: {why}" for name, command, args in shown
                if (why := parse(command, args, capsys))[0] == "error"]  # fmt: skip
    assert len({command for _, command, _ in shown}) == len(COMMANDS) and len(shown) > 40 and failures == []


def resolves(config, path: str) -> bool:
    value = config
    for part in path.split("."):
        key = part.replace("-", "_")
        if isinstance(value, dict) and key in value:
            value = value[key]
        elif hasattr(value, key):
            value = getattr(value, key)
        else:
            return False
    return True


def test_every_ns_train_option_shown_names_a_config_field():
    from nerfstudio.configs.method_configs import all_methods

    from method_configs.rff_nerf import rff_nerf
    from method_configs.rff_nerfacto import rff_nerfacto

    configs = [rff_nerf.config, rff_nerfacto.config, all_methods["nerfacto"], all_methods["vanilla-nerf"]]
    shown = {path for _, blocks in documents() for block in blocks for path in CONFIG_PATH.findall(block)}
    missing = sorted(path for path in shown if not any(resolves(config, path) for config in configs))
    assert len(shown) > 5 and missing == []


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_misspelt_flag_does_not_parse(command, capsys):
    assert parse(command, "--no-such-flag 1", capsys)[0] == "error"


def test_the_readme_torch_example_runs_and_sets_the_filter_rate_every_step():
    readme = (REPO / "README.md").read_text()
    scope: dict = {}
    exec(re.search(r"```python\n(.*?)```", readme, re.S).group(1), scope)
    assert scope["rates"].shape == (200,) and bool((scope["rates"] > 0).all())


SMALL = {
    "ns-train": ["--max-num-iterations", "3", "--vis", "tensorboard", "--machine.device-type", "cpu"],
    "rff-demo": ["--steps", "300", "--image-size", "32", "--num-train-views", "10", "--num-test-views", "2",
                 "--mesh-resolution", "32", "--mesh-threshold", "1"],
    "rff-nerf-bench": ["--steps", "4"],
    "rff-image fit": ["--passes", "5"],
    "rff-image bench": ["--passes", "5", "--hidden-features", "16"],
    "rff-sdf fit": ["--steps", "100", "--hidden-features", "16"],
    "rff-sdf mesh": ["--resolution", "32"],
    "rff-sdf bench": ["--steps", "5", "--hidden-features", "16"],
}  # fmt: skip
"""Options set (replaced, or added: for ns-train after the method's name) so that a command runs in a minute at most:
ns-train on the CPU without the viewer (which stays open after training until Ctrl-C); an SDF with a surface to
mesh again; the demo's mesh threshold within the density of its 300 steps (the demo with its defaults runs in
tests/nerf/test_slow.py)."""
NOT_RUN = {
    "ns-viewer": "serves the viewer until Ctrl-C",
    "colmap": "needs a COLMAP project",
}
"""Commands (by a word in them) that the slow test parses but does not run, and why."""
PLACEHOLDER = re.compile(r"(?<![\w.-])(?:[A-Z]+|\.\.\.)(?![\w/.-])")
"""A word that stands for the reader's own (``--fit DIR``, ``--variants ...``): such a line is parsed, not run."""
RUN = "outputs/capture/rff-nerfacto-lite/stand-in/config.yml"
"""The trained run that ``.../config.yml`` and ``<timestamp>`` stand for."""


def small(command: str, args: list[str]) -> list[str]:
    """``args`` with the options of :data:`SMALL` for the command (and its subcommand)."""
    options = SMALL.get(command, SMALL.get(f"{command} {args[0]}", []))
    args = list(args)
    added = []
    for flag, value in zip(options[::2], options[1::2]):
        if flag in args:
            args[args.index(flag) + 1] = value
        else:
            added += [flag, value]
    where = 1 if command == "ns-train" else len(args)  # ns-train: before a data parser's subcommand
    return args[:where] + added + args[where:]


def write_stand_ins(folder: Path) -> None:
    """Small data at the paths the documents name."""
    import trimesh
    from PIL import Image

    from rff_field.nerf.synthetic_scene import CaptureSpec, SceneSpec, write_blender_scene, write_nerfstudio_capture

    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 255, (64, 64, 3), dtype=np.uint8)).save(folder / "photo.png")
    (folder / "my-images").mkdir()
    for name in ("a", "b"):
        Image.fromarray(rng.integers(0, 255, (64, 64, 3), dtype=np.uint8)).save(folder / "my-images" / f"{name}.png")
    for name in ("bunny", "a", "b"):
        trimesh.creation.icosphere(subdivisions=2).export(folder / f"{name}.obj")
    for name in ("lego", "chair"):  # the chair at 1/8 scale in rff-nerf-bench: 32 pixels
        write_blender_scene(folder / "data" / "nerf_synthetic" / name, SceneSpec(256, 6, 2, 2, supersample=1))
    write_nerfstudio_capture(folder / "data" / "my_capture", CaptureSpec(32, num_views=10, supersample=1))


def run(args: list[str], folder: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    """A console script of this environment, as a shell that activated it runs it."""
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
           "OMP_NUM_THREADS": "1"}  # fmt: skip
    return subprocess.run(args, cwd=folder, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_every_command_of_the_readme_and_guides_runs_as_written_on_small_stand_ins(tmp_path, capsys):
    write_stand_ins(tmp_path)
    trained = run(["ns-train", "rff-nerfacto-lite", "--data", "data/my_capture", "--vis", "tensorboard",
                   "--max-num-iterations", "300", "--output-dir", "outputs", "--experiment-name", "capture",
                   "--timestamp", "stand-in"], tmp_path)  # fmt: skip
    assert trained.returncode == 0, trained.stderr
    done, failures = set(), []
    for name, command, arguments in shown_commands(GUIDES):
        arguments = arguments.replace(".../config.yml", RUN).replace("<timestamp>", "stand-in")
        line = f"{command} {arguments}"
        if parse(command, arguments, capsys)[0] != "ok" or any(word in line for word in NOT_RUN):
            continue
        if PLACEHOLDER.search(arguments):
            continue
        if command == "ns-train" and "--data" not in arguments:  # a mention of a method
            continue
        args = [command, *small(command, shlex.split(arguments))]
        if tuple(args) in done:
            continue
        done.add(tuple(args))
        finished = run(args, tmp_path)
        if finished.returncode != 0:
            failures.append(f"{name}: {shlex.join(args)}: exit {finished.returncode}: {finished.stderr[-2000:]}")
    assert len(done) > 20
    assert not failures, "\n".join(failures)
