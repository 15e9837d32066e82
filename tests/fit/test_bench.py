"""The bench runner, through rff-image bench in real processes: killed with SIGTERM or SIGKILL it leaves no process
behind, and rerunning the same command finishes the table."""

import importlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from rff_field.core.errors import UsageError
from rff_field.fit.bench import parse_variant, run_bench

VARIANTS = ["mlp-pe", "filtered-pe", "siren"]


def processes_naming(text: str) -> list[int]:
    """Processes whose command line holds ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and text in (entry / "cmdline").read_bytes().decode(errors="replace"):
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def finished(out: Path) -> int:
    return len(list(out.glob("runs/*/*/metrics.json")))


SMALL = ["--variants", *VARIANTS, "--log-every", "50", "--hidden-features", "16", "--no-progress"]
COMMANDS = {
    "image": ["--passes", "600", "--lpips", "False"],
    "sdf": [
        "--steps",
        "600",
        "--hidden-layers",
        "1",
        "--embedding.num-frequencies",
        "8",
        "--points-per-step",
        "500",
        "--resolution",
        "16",
    ],
}
"""rff-image and rff-sdf, small: one image (made by the test) or the generated shape."""


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_killed_bench_leaves_no_process_and_its_rerun_finishes_the_table(command, tmp_path):
    out = tmp_path / "bench"
    args = ["bench", "--output-dir", str(out), *SMALL, *COMMANDS[command]]
    if command == "image":
        images = tmp_path / "images"
        images.mkdir()
        Image.fromarray(np.random.default_rng(0).integers(0, 256, (16, 16, 3), dtype=np.uint8)).save(images / "a.png")
        args += ["--images", str(images)]
    script = f"import sys; from rff_field.cli.{command} import entrypoint; entrypoint(sys.argv[1:])"
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    for signum, status in ((signal.SIGTERM, 130), (signal.SIGKILL, -signal.SIGKILL)):
        done = finished(out)
        process = subprocess.Popen([sys.executable, "-c", script, *args], env=environment, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while finished(out) == done and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)  # until it finishes a job, then kill it in the next one
        time.sleep(0.5)
        process.send_signal(signum)
        assert process.wait(timeout=60) == status, process.stderr.read().decode()
        if signum == signal.SIGTERM:
            assert "its checkpoint is in" in process.stderr.read().decode()
        assert processes_naming(str(out)) == []
        assert json.loads((out / "results.json").read_text())  # written over the finished jobs
    run_command = importlib.import_module(f"rff_field.cli.{command}").entrypoint
    run_command(args)
    rows = json.loads((out / "results.json").read_text())
    assert sorted(row["variant"] for row in rows) == sorted(VARIANTS)
    assert any(row.get("resumed_at") for row in rows)  # the job stopped by SIGTERM went on from its checkpoint
    assert "| 1/1 |" in (out / "results.md").read_text()


def test_shards_split_the_grid_and_each_writes_the_whole_table(tmp_path):
    presets = {"a": {"width": 1}, "b": {"width": 2}}
    variants = [parse_variant(text, presets) for text in ("a", "b", "wide:b,width=3")]
    ran = []

    def run_job(job):
        ran.append((job.input, job.variant.label))
        job.folder.mkdir(parents=True)
        (job.folder / "metrics.json").write_text(json.dumps({"score": len(ran)}))

    columns = [("score", "score", ".0f")]
    run_bench(tmp_path, ["x", "y"], variants, run_job, {"iters": 1}, columns, shard="2/2")
    assert ran == [("x", "b"), ("y", "a"), ("y", "wide")]
    rows = run_bench(tmp_path, ["x", "y"], variants, run_job, {"iters": 1}, columns, shard="1/2")
    assert len(ran) == 6 and len(rows) == 6 and (tmp_path / "results.md").read_text().count("| 2/2 |") == 3
    with pytest.raises(UsageError, match="other settings"):
        run_bench(tmp_path, ["x", "y"], variants, run_job, {"iters": 2}, columns)
