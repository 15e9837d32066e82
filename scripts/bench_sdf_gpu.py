#!/usr/bin/env python
"""Run the SDF benchmark on a machine with torch but without open3d, pymcubes or nerfstudio (a GPU box).

It trains from sample pools made beforehand on a CPU machine (``rff-sdf pool``), extracts meshes with
scikit-image's marching cubes and measures them with a KD-tree (``distance: kdtree`` in metrics.json). Every run is
written as soon as it finishes, into the same layout as ``rff-sdf bench`` (``OUT/runs/<shape>/<method>/``), so a
time limit loses at most the run in progress. Back on a machine with open3d,
``rff-sdf bench --report-only --out OUT`` recomputes exact metrics, renders, and writes results.json/.md.

Example (BACON's full network sizes and 10,000 samples a step, 5,000 steps, on the two shapes):

    .venv/bin/rff-sdf pool --mesh ../shared/data/meshes/armadillo.obj --out outputs/gpu_pools/armadillo.npz \
        --size 1800000
    .venv/bin/rff-sdf pool --mesh ../shared/data/meshes/bunny-decimated-5k.obj \
        --out outputs/gpu_pools/bunny-decimated-5k.npz --size 1800000
    python scripts/bench_sdf_gpu.py --pools outputs/gpu_pools/armadillo.npz \
        outputs/gpu_pools/bunny-decimated-5k.npz --out $OUT/sdf-gpu --iters 5000 --device cuda --budget-s 500
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pools", nargs="+", type=Path, required=True, help="pool .npz files (rff-sdf pool)")
    parser.add_argument("--out", type=Path, required=True, help="output directory (resumed if it has runs)")
    parser.add_argument(
        "--methods",
        nargs="+",
        default=["mlp-pe", "filtered-pe", "siren", "bacon", "mlp-rff", "filtered-rff", "gauss", "wire"],
        help="methods as for rff-sdf bench (NAME or NAME:key=value,...); runs go in this order",
    )
    parser.add_argument("--iters", type=int, default=5000, help="training steps per run")
    parser.add_argument("--points-per-step", type=int, default=10_000, help="samples per step")
    parser.add_argument("--resolution", type=int, default=256, help="marching-cubes grid side")
    parser.add_argument("--eval-samples", type=int, default=100_000, help="surface samples for the metrics")
    parser.add_argument("--device", default="cuda", help="torch device")
    parser.add_argument("--budget-s", type=float, default=None, help="start no new run after this many seconds")
    parser.add_argument(
        "--set", nargs="*", default=[], metavar="KEY=VALUE", help="network/training options for every run"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    args = parser.parse_args()

    import torch

    from rff_field.bench.sdf import parse_method, run_bench
    from rff_field.bench.variants import set_options
    from rff_field.sdf.fit import SDFNetworkConfig, SDFTrainConfig
    from rff_field.sdf.run import OutputConfig

    network = SDFNetworkConfig()
    train = SDFTrainConfig(iters=args.iters, points_per_step=args.points_per_step, device=args.device)
    set_options([network, train], dict(item.split("=", 1) for item in args.set))
    output = OutputConfig(resolution=args.resolution, eval_samples=args.eval_samples, render=False, save_model=False)
    specs = [parse_method(m) for m in args.methods]
    args.out.mkdir(parents=True, exist_ok=True)
    info = {"torch": torch.__version__, "cuda": torch.cuda.is_available()}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    print(json.dumps(info), flush=True)
    (args.out / "gpu_protocol.json").write_text(json.dumps({**vars(args), **info}, default=str, indent=2) + "\n")

    start = time.perf_counter()
    for pool in args.pools:
        name = Path(pool).stem
        for spec in specs:
            if args.budget_s is not None and time.perf_counter() - start > args.budget_s:
                print(f"budget of {args.budget_s:.0f} s reached; stopping before {name} {spec.label}", flush=True)
                return
            records = run_bench(
                args.out, [(name, pool)], [spec], network, train, output, resume=True, progress=not args.no_progress
            )
            r = records[-1]
            print(
                f"{name} {r['label']}: {r['iters']} steps {r['seconds_per_iter'] * 1e3:.2f} ms/step "
                f"chamfer(kdtree) {r['chamfer']} f {r['f_score']:.3f} [{time.perf_counter() - start:.0f} s]",
                flush=True,
            )


if __name__ == "__main__":
    main()
