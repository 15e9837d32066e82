"""The commands that README, docs and benchmark reports show parse as written: every ``rff-*`` command line is parsed
by its command (flags, subcommands and values), and every ``ns-train`` option path names a field of a config."""

import importlib
import re
import shlex

import pytest
import tyro

from tests import REPO

COMMANDS = {
    "rff-image": "image:Command",
    "rff-sdf": "sdf:Command",
    "rff-export-mesh": "export_mesh:ExportMesh",
    "rff-demo": "demo:Demo",
    "rff-scene": "scene:Command",
    "rff-nerf-bench": "nerf_bench:NerfBench",
}
"""Each console script's tyro type (module of rff_field.cli : name)."""
COMMAND = re.compile(r"(?<![\w/-])(rff-(?:image|sdf|export-mesh|demo|scene|nerf-bench))((?:[ \t]+[^\s`|#;&<>()]+)*)")
CONFIG_PATH = re.compile(r"--((?:pipeline|optimizers|machine|viewer)(?:\.[A-Za-z0-9_-]*[A-Za-z0-9_])+)")


def documents():
    paths = [REPO / "README.md", *sorted(REPO.glob("docs/*.md")), *sorted(REPO.glob("benchmarks/**/*.md"))]
    for path in paths:
        text = path.read_text().replace("\\\n", " ")
        blocks = re.findall(r"```(?:bash|sh)?\n(.*?)```", text, re.S) + re.findall(r"`([^`\n]+)`", text)
        yield path.relative_to(REPO), blocks


def shown_commands():
    for name, blocks in documents():
        for block in blocks:
            for line in block.splitlines():
                for match in COMMAND.finditer(line.split(" #")[0]):
                    yield str(name), match.group(1), match.group(2).strip()


def parses(command: str, arguments: str, capsys) -> str:
    """'' when ``command arguments`` parses (a fragment that leaves out required options counts), else why not."""
    module, name = COMMANDS[command].split(":")
    command_type = getattr(importlib.import_module(f"rff_field.cli.{module}"), name)
    args = shlex.split(arguments.replace("…", "x"))
    if not args or "--help" in args:  # a mention of the command, or its help
        return ""
    capsys.readouterr()
    try:
        tyro.cli(command_type, args=args)
    except SystemExit as exit:
        error = capsys.readouterr().err
        return "" if "Required options" in error and "Unrecognized" not in error else f"exit {exit.code}: {error}"
    return ""


def test_every_rff_command_shown_parses(capsys):
    shown = sorted(set(shown_commands()))
    failures = [f"{name}: {command} {args}: {why}" for name, command, args in shown
                if (why := parses(command, args, capsys))]  # fmt: skip
    assert len(shown) > 15 and failures == []


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
    assert parses(command, "--no-such-flag 1", capsys) != ""


def test_the_readme_torch_example_runs_and_sets_the_filter_rate_every_step():
    readme = (REPO / "README.md").read_text()
    scope: dict = {}
    exec(re.search(r"```python\n(.*?)```", readme, re.S).group(1), scope)
    assert scope["rates"].shape == (200,) and bool((scope["rates"] > 0).all())
