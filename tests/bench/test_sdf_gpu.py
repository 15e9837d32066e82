"""The GPU runner works where open3d, pymcubes and nerfstudio are all missing."""

import json
import subprocess
import sys

import numpy as np

from rff_field.sdf.data import MeshSDF, build_pool, load_shape
from tests import REPO

BLOCKER = """
import importlib.abc, runpy, sys
BLOCKED = ("open3d", "mcubes", "nerfstudio")
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is blocked for this test")
        return None
sys.meta_path.insert(0, Block())
import importlib.util
from tests import REPO
_find_spec = importlib.util.find_spec
importlib.util.find_spec = lambda name, *a: None if name.split(".")[0] in BLOCKED else _find_spec(name, *a)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_gpu_runner_without_open3d_pymcubes_or_nerfstudio(tmp_path):
    _, mesh = load_shape(None)
    pool = tmp_path / "generated.npz"
    np.savez(pool, **build_pool(MeshSDF(mesh, seed=0), 6000, "generated", surface_samples=3000))
    out = tmp_path / "gpu"
    # fmt: off
    cmd = [
        sys.executable, "-c", BLOCKER, str(REPO / "scripts" / "bench_sdf_gpu.py"),
        "--pools", str(pool), "--out", str(out), "--methods", "filtered-pe", "bacon", "--iters", "20",
        "--points-per-step", "300", "--resolution", "24", "--eval-samples", "2000", "--device", "cpu",
        "--set", "hidden_features=32", "hidden_layers=2", "pe_frequencies=6", "bacon_max_frequency=32",
        "--no-progress",
    ]
    # fmt: on
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    info = json.loads(done.stdout.splitlines()[0])
    assert "torch" in info
    for method in ("filtered-pe", "bacon"):
        metrics = json.loads((out / "runs" / "generated" / method / "metrics.json").read_text())
        assert metrics["iters"] == 20 and metrics["distance"] == "kdtree" and metrics["hidden_features"] == 32
