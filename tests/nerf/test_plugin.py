"""The plugin registers its four methods as nerfstudio finds them, and loading them changes nothing in nerfstudio or
tyro."""

from __future__ import annotations

import json
import subprocess
import sys

from tests import REPO

LOAD_AS_NS_TRAIN = r"""
import importlib, inspect, json, re, sys
from pathlib import Path
import tyro._strings
# what the package imports of nerfstudio, loaded first, and the module whose class the plugin used to patch
sources = [p.read_text() for folder in sys.argv[1:] for p in Path(folder).rglob("*.py")]
names = {m for text in sources for m in re.findall(r"^\s*(?:from|import) (nerfstudio[\w.]*)", text, re.M)}
for name in sorted(names | {"nerfstudio.configs.external_methods", "nerfstudio.plugins.registry"}):
    importlib.import_module(name)

def snapshot():
    seen = {}
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] in ("nerfstudio", "tyro") and module is not None:
            seen[name] = {key: id(value) for key, value in vars(module).items()}
            for key, value in vars(module).items():
                if inspect.isclass(value) and value.__module__ == name:
                    seen[f"{name}.{key}"] = {k: id(v) for k, v in vars(value).items()}
    seen["sys"] = {"excepthook": id(sys.excepthook)}
    return seen

before = snapshot()
sys.argv[0] = "ns-train"  # as the command that loads them
from nerfstudio.plugins.registry import discover_methods
methods, descriptions = discover_methods()
after = snapshot()
changed = sorted(f"{owner}.{key}" for owner, attributes in before.items() for key, value in attributes.items()
                 if after[owner].get(key) != value)
print(json.dumps({"methods": sorted(methods), "changed": changed,
                  "modules": [sys.modules[f"method_configs.{m}"].__file__ for m in ("rff_nerf", "rff_nerfacto")]}))
"""


def test_the_four_methods_load_as_ns_train_finds_them_and_change_no_attribute_of_nerfstudio_or_tyro():
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    folders = [str(REPO / "rff_field"), str(REPO / "method_configs")]
    done = subprocess.run([sys.executable, "-c", LOAD_AS_NS_TRAIN, *folders], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert {"rff-nerf", "rff-nerf-lite", "rff-nerfacto", "rff-nerfacto-lite"} <= set(found["methods"])
    assert all(path.startswith(str(REPO / "method_configs")) for path in found["modules"])
    assert found["changed"] == []
