"""How long the CPU-sized NeRF runs take with one and two torch threads: a training step of rff-nerf-lite (rff-demo's
run) and of rff-nerfacto-lite (on an rff-scene capture), the thread counts taking turns, and rff-demo end to end
with its defaults; writes cpu_threads.json and cpu_threads.md beside this script.

    python benchmarks/nerf/cpu_threads.py [--steps 120] [--rounds 2] [--no-demo]

Each measurement runs in a process of its own; wall and CPU time per step are taken after 20 warm-up steps. The
machine's load average is recorded with each: on a shared machine compare only rows measured side by side.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WARM_UP = 20


def time_steps(method: str, data: str, steps: int, threads: int, out: str) -> None:
    """In this process: train ``steps`` steps and print wall and CPU seconds per step after the warm-up as JSON."""
    import torch

    torch.set_num_threads(threads)
    from nerfstudio.engine.callbacks import TrainingCallback, TrainingCallbackLocation

    from rff_field.nerf import quiet_known_warnings
    from rff_field.nerf.methods import rff_nerf_config, rff_nerfacto_config
    from rff_field.nerf.training import run_config, train_in_process

    quiet_known_warnings()
    build = rff_nerfacto_config if method == "rff-nerfacto-lite" else rff_nerf_config
    config = run_config(build(lite=True), Path(data), Path(out), steps, experiment_name="timing")
    config.machine.device_type = "cpu"
    config.steps_per_eval_batch = config.steps_per_eval_image = config.steps_per_eval_all_images = 10**9
    marks = {}

    def mark(step: int) -> None:
        if step in (WARM_UP, steps - 1):
            marks[step] = (time.perf_counter(), time.process_time())

    def watch(trainer) -> None:
        trainer.callbacks.append(TrainingCallback([TrainingCallbackLocation.AFTER_TRAIN_ITERATION], mark))

    train_in_process(config, watch)
    (wall0, cpu0), (wall1, cpu1) = marks[WARM_UP], marks[steps - 1]
    count = steps - 1 - WARM_UP
    print(json.dumps({"wall_per_step": (wall1 - wall0) / count, "cpu_per_step": (cpu1 - cpu0) / count}))


def measure(args: list[str], env: dict) -> tuple[dict, float, float]:
    """Run ``args``; returns its last JSON line (or {}), wall seconds and CPU seconds (user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(args, env=env, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    return (json.loads(lines[-1]) if lines else {}), wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--no-demo", action="store_true")
    args = parser.parse_args()
    bin_dir = Path(sys.executable).parent
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        scene, capture = f"{folder}/scene", f"{folder}/capture"
        env = {key: value for key, value in os.environ.items() if key != "OMP_NUM_THREADS"}
        subprocess.run([bin_dir / "rff-scene", "blender", "--out", scene, "--num-train-views", "40"], env=env,
                       check=True, capture_output=True)  # fmt: skip
        subprocess.run([bin_dir / "rff-scene", "capture", "--out", capture], env=env, check=True, capture_output=True)
        for index in range(args.rounds):
            for method, data in (("rff-nerf-lite", scene), ("rff-nerfacto-lite", capture)):
                for threads in (1, 2) if index % 2 == 0 else (2, 1):
                    load = os.getloadavg()[0]
                    result, _, _ = measure([sys.executable, __file__, "--time-steps", method, data, str(args.steps),
                                            str(threads), f"{folder}/runs"], env)  # fmt: skip
                    rows.append({"what": f"{method} step", "threads": threads, "load_before": load, **result})
                    print(rows[-1], flush=True)
        if not args.no_demo:
            load = os.getloadavg()[0]
            _, wall, cpu = measure([bin_dir / "rff-demo", "--output-dir", f"{folder}/demo"], env)
            rows.append({"what": "rff-demo, defaults", "threads": 1, "load_before": load, "wall": wall, "cpu": cpu,
                         "load_after": os.getloadavg()[0]})  # fmt: skip
            print(rows[-1], flush=True)
    import torch

    machine = f"{os.cpu_count()} CPUs ({len(os.sched_getaffinity(0))} usable), torch {torch.__version__}"
    (HERE / "cpu_threads.json").write_text(json.dumps({"machine": machine, "rows": rows}, indent=1) + "\n")
    lines = ["| what | torch threads | load average before | wall | CPU |", "|---|---|---|---|---|"]
    for row in rows:
        if "wall_per_step" in row:
            times = f"{row['wall_per_step'] * 1000:.0f} ms/step | {row['cpu_per_step'] * 1000:.0f} ms/step"
        else:
            times = f"{row['wall'] / 60:.1f} min | {row['cpu'] / 60:.1f} min"
        lines.append(f"| {row['what']} | {row['threads']} | {row['load_before']:.1f} | {times} |")
    (HERE / "cpu_threads.md").write_text(
        "# CPU time of the -lite runs with one and two torch threads\n\n"
        f"Written by `cpu_threads.py` on {machine}; steps timed after {WARM_UP} warm-up steps, the thread counts "
        "taking turns. The load average (1 minute) says how busy the machine was with other jobs.\n\n"
        + "\n".join(lines)
        + "\n"
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--time-steps"]:
        method, data, steps, threads, out = sys.argv[2:7]
        time_steps(method, data, int(steps), int(threads), out)
    else:
        main()
