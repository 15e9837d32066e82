"""The package uses nerfstudio by its public surface: no private names of nerfstudio, no deleted attributes."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nerfstudio

from tests import REPO

SOURCES = sorted([*(REPO / "rff_field").rglob("*.py"), *(REPO / "method_configs").rglob("*.py")])
NERFSTUDIO_SOURCES = sorted(Path(nerfstudio.__file__).parent.rglob("*.py"))


def test_reaching_past_a_public_surface_carries_a_reason_on_its_line():
    pattern = re.compile(r"nerfstudio[.a-z_]*\._|\._get_|delattr\(")
    bare = [f"{path.relative_to(REPO)}:{number}" for path in SOURCES
            for number, line in enumerate(path.read_text().splitlines(), 1)
            if pattern.search(line) and "#" not in line]  # fmt: skip
    assert not bare


def private_names(tree: ast.AST) -> tuple[set[str], set[str]]:
    """The ``_``-prefixed (not dunder) attribute names a module reads and those it defines."""
    used, defined = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Attribute):
            (defined if isinstance(node.ctx, ast.Store) else used).add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
    keep = lambda names: {name for name in names if name.startswith("_") and not name.startswith("__")}  # noqa: E731
    return keep(used), keep(defined)


def test_the_package_reads_no_private_name_nerfstudio_defines():
    used, ours = set(), {"_target"}  # _target: the config hook nerfstudio documents for plugins
    for path in SOURCES:
        names = private_names(ast.parse(path.read_text()))
        used |= names[0]
        ours |= names[1]
    nerfstudio_names = set()
    for path in NERFSTUDIO_SOURCES:
        nerfstudio_names |= private_names(ast.parse(path.read_text()))[1]
    assert nerfstudio_names, "the scan found nerfstudio's own private names"  # the premise: the scan works
    leaked = (used - ours) & nerfstudio_names
    assert not leaked
