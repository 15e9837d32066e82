"""The package's shape: imports run one way without cycles, the sizes the project set itself, and a repository that
cites nothing outside itself."""

import ast
import re

from tests import REPO

LAYERS = {"core": 0, "inr": 1, "common": 1, "fit": 2, "image": 3, "sdf": 3, "nerf": 3, "cli": 4}
APPLICATIONS = {"image", "sdf", "nerf"}


def python_files(*folders: str):
    return sorted(path for folder in folders for path in (REPO / folder).rglob("*.py"))


def module_name(path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")


def imports(path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.split(".")[0] in ("rff_field", "method_configs")}


def test_imports_run_one_way():
    backwards = []
    for path in python_files("rff_field"):
        parts = path.relative_to(REPO / "rff_field").parts
        if len(parts) == 1:
            continue
        for name in imports(path):
            if name.startswith("method_configs"):
                backwards.append(f"{module_name(path)} imports {name}")
                continue
            target = name.split(".")[1] if "." in name else None
            if target not in LAYERS or target == parts[0]:
                continue
            if LAYERS[target] > LAYERS[parts[0]] or (parts[0] in APPLICATIONS and target in APPLICATIONS):
                backwards.append(f"{module_name(path)} imports {name}")
    assert backwards == []


def test_no_import_cycles():
    modules = {module_name(path): path for path in python_files("rff_field", "method_configs")}
    graph = {name: {target for target in imports(path) if target in modules and target != name}
             for name, path in modules.items()}  # fmt: skip
    cycles, state = [], {}

    def visit(name, stack):
        state[name] = "open"
        for target in sorted(graph[name]):
            if state.get(target) == "open":
                cycles.append(" -> ".join([*stack[stack.index(target) :], target]))
            elif target not in state:
                visit(target, [*stack, target])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert cycles == []


def line_count(*folders: str) -> int:
    return sum(len(path.read_text().splitlines()) for path in python_files(*folders))


def test_sizes():
    assert line_count("rff_field", "method_configs") <= 8000
    assert line_count("tests") <= 5000
    line_search = [REPO / "rff_field/core" / name for name in ("line_search.py", "step_rule.py", "optim.py")]
    assert sum(len(path.read_text().splitlines()) for path in line_search if path.exists()) <= 500


def test_method_configs_hold_only_method_specifications():
    from nerfstudio.plugins.types import MethodSpecification

    import method_configs.rff_nerf
    import method_configs.rff_nerfacto

    for module in (method_configs.rff_nerf, method_configs.rff_nerfacto):
        public = {name: value for name, value in vars(module).items() if not name.startswith("_")}
        specs = [value for value in public.values() if isinstance(value, MethodSpecification)]
        assert len(specs) == 2


def test_no_citation_outside_the_repository():
    pattern = re.compile(r"DESIGN\.md|shared/DESIG[N]|/wor[k]/|/tm[p]/[a-z]")  # brackets: this line does not match
    files = [*python_files("rff_field", "method_configs", "tests", "benchmarks"), *REPO.glob("docs/*.md"),
             *REPO.glob("benchmarks/**/*.md"), REPO / "README.md"]  # fmt: skip
    assert [str(path.relative_to(REPO)) for path in files if pattern.search(path.read_text())] == []


def test_markdown_links_resolve():
    link = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
    broken = [
        f"{path.relative_to(REPO)} links {match.group(1)}"
        for path in [REPO / "README.md", *REPO.glob("docs/*.md"), *REPO.glob("benchmarks/**/*.md")]
        for match in link.finditer(path.read_text())
        if "://" not in match.group(1) and not (path.parent / match.group(1)).exists()
    ]
    assert broken == []
