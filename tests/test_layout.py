"""The package's imports run one way (core -> inr -> applications -> bench -> cli), and the repository cites
nothing outside itself."""

import ast
import re
import sys

from tests import REPO

LAYERS = {"core": 0, "common": 0.5, "inr": 1, "image": 2, "sdf": 2, "nerf": 2, "bench": 3, "cli": 4}
APPLICATIONS = {"image", "sdf", "nerf"}


def package_imports():
    for path in sorted((REPO / "rff_field").rglob("*.py")):
        parts = path.relative_to(REPO / "rff_field").parts
        if len(parts) == 1:
            continue  # rff_field/__init__.py
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rff_field."):
                yield path, parts[0], node.module.split(".")[1]
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("rff_field."):
                        yield path, parts[0], alias.name.split(".")[1]


def test_imports_run_one_way():
    backwards = [
        f"{path.relative_to(REPO)} imports rff_field.{target}"
        for path, source, target in package_imports()
        if LAYERS[target] > LAYERS[source]
        or (source in APPLICATIONS and target in APPLICATIONS and source != target)
        or (source == "common" and target != "common" and target != "core")
    ]
    assert backwards == []


def test_core_needs_only_torch():
    third_party = set()
    for path in (REPO / "rff_field" / "core").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                third_party.add(node.module.split(".")[0])
            elif isinstance(node, ast.Import):
                third_party.update(alias.name.split(".")[0] for alias in node.names)
    allowed = {"torch", "jaxtyping", "nerfstudio", "rff_field"}  # nerfstudio optional (try/except)
    assert third_party - allowed - set(sys.stdlib_module_names) == set()


def test_no_citation_outside_the_repository():
    pattern = re.compile(r"DESIGN\.md|cpu_slo[t]|/wor[k]/|/tm[p]/[a-z]")  # the brackets keep this line from matching
    files = [*REPO.glob("rff_field/**/*.py"), *REPO.glob("tests/**/*.py"), *REPO.glob("docs/*.md"),
             *REPO.glob("scripts/*"), *REPO.glob("benchmarks/**/*.md"), *REPO.glob("benchmarks/**/*.toml"),
             *REPO.glob("benchmarks/**/*.json"), REPO / "README.md"]  # fmt: skip
    assert [f"{path.relative_to(REPO)}" for path in files if pattern.search(path.read_text())] == []


def test_cited_repository_files_exist():
    """Every file of the repository that code, tests, scripts or docs name by path exists (no stale references)."""
    pattern = re.compile(
        r"(?<![\w/.-])((?:benchmarks|scripts|docs|tests|rff_field)/[\w./-]*\.(?:md|toml|json|png|py|sh))"
    )
    files = [*REPO.glob("rff_field/**/*.py"), *REPO.glob("tests/**/*.py"), *REPO.glob("docs/*.md"),
             *REPO.glob("scripts/*"), *REPO.glob("benchmarks/**/*.md"), REPO / "README.md"]  # fmt: skip
    missing = {
        f"{path.relative_to(REPO)} cites {match.group(1)}"
        for path in files
        for match in pattern.finditer(path.read_text())
        if "*" not in match.group(1) and not (REPO / match.group(1)).exists()
    }
    assert sorted(missing) == []


def test_markdown_links_resolve():
    """Every relative link in the repository's Markdown points at a file or folder that exists."""
    link = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
    broken = [
        f"{path.relative_to(REPO)} links {match.group(1)}"
        for path in [REPO / "README.md", *REPO.glob("docs/*.md"), *REPO.glob("benchmarks/**/*.md")]
        for match in link.finditer(path.read_text())
        if "://" not in match.group(1) and not (path.parent / match.group(1)).exists()
    ]
    assert broken == []
