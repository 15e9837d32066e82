"""The commands the docs, benchmark READMEs and scripts show use options that exist: every flag of an ``rff-*``
command is in that command's ``--help``, and every ``ns-train`` config path names a field of a method's config."""

import re

import pytest

from rff_field.cli import demo
from rff_field.cli.common import LINE_SEARCH_FLAGS
from tests import REPO
from tests.cli.test_commands import COMMANDS as SUBCOMMANDS
from tests.cli.test_commands import run

COMMANDS = {
    **{name: (entrypoint, subs != [None]) for name, (entrypoint, subs) in SUBCOMMANDS.items()},
    "rff-demo": (demo.entrypoint, False),
}
"""Each console script and whether its first word is a subcommand."""
COMMAND = re.compile(r"\b(rff-(?:image|sdf|bench|scene|export-mesh|demo))\b([^`|#;&\n]*)")
CONFIG_FLAG = re.compile(r"--((?:pipeline|optimizers|machine|viewer)(?:\.[A-Za-z0-9_-]*[A-Za-z0-9_])+)")
FLAG = re.compile(r"--[A-Za-z0-9][A-Za-z0-9._-]*")


def documents():
    paths = [REPO / "README.md", REPO / "Makefile", REPO / ".ci" / "run"]
    paths += sorted((REPO / "docs").glob("*.md")) + sorted((REPO / "benchmarks").rglob("*.md"))
    paths += sorted((REPO / "scripts").glob("*.sh"))
    for path in paths:
        yield path.relative_to(REPO), path.read_text().replace("\\\n", " ")


def shown_commands():
    for name, text in documents():
        for match in COMMAND.finditer(text):
            words = match.group(2).replace("[", " ").replace("]", " ").split()
            flags = [word.split("=")[0] for word in words if word.startswith("--")]
            has_sub = COMMANDS[match.group(1)][1]
            if flags and (not has_sub or (words and not words[0].startswith("-"))):
                yield name, match.group(1), words[0] if has_sub else None, flags


def help_flags(command, sub, monkeypatch, capsys) -> set[str]:
    monkeypatch.setenv("COLUMNS", "200")
    run(COMMANDS[command][0], [sub, "--help"] if sub else ["--help"], monkeypatch)
    return set(FLAG.findall(capsys.readouterr().out))


def test_every_flag_shown_with_an_rff_command_exists(monkeypatch, capsys):
    known: dict = {}
    unknown = []
    shown = list(shown_commands())
    for name, command, sub, flags in shown:
        if (command, sub) not in known:
            known[command, sub] = help_flags(command, sub, monkeypatch, capsys)
        unknown += [f"{name}: {command} {sub or ''} {flag}" for flag in flags if flag not in known[command, sub]]
    unknown = [line for line in unknown if line.split()[-1] not in {"--help", *LINE_SEARCH_FLAGS}]
    assert len(shown) > 20 and unknown == []


def test_a_misspelt_flag_would_be_caught(monkeypatch, capsys):
    assert "--mesh" in help_flags("rff-sdf", "fit", monkeypatch, capsys)
    assert "--meshes" not in help_flags("rff-sdf", "fit", monkeypatch, capsys)


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
    pytest.importorskip("nerfstudio")
    from nerfstudio.configs.method_configs import all_methods

    from rff_field.nerf import method_configs

    configs = [spec.config for spec in (method_configs.rff_nerf, method_configs.rff_nerfacto)]
    configs += [all_methods["nerfacto"], all_methods["vanilla-nerf"]]  # the benchmarks train these too
    shown = {path for _, text in documents() for path in CONFIG_FLAG.findall(text)}
    missing = sorted(path for path in shown if not any(resolves(config, path) for config in configs))
    assert len(shown) > 10 and missing == []
    assert not resolves(configs[0], "pipeline.model.no-such-option")
