#!/usr/bin/env python
"""Run the image benchmark without tyro (e.g. on a GPU machine), several jobs at once.

The same jobs, folders and summaries as ``rff-image bench`` (``rff_field.bench.image``); finished jobs are skipped,
so it resumes, and the folder can be shared with CPU runs of the same protocol. On a GPU the small CPU-protocol
images leave the device mostly idle, so ``--workers`` processes run jobs side by side.

Protocols:
  cpu    Kodak x4 (192x128), 3x64 networks (the paper's parameters per value), 5000 iterations; the sweep on
         kodim05 (2000 iterations); kodim05 at 20k iterations (the benchmarks/image/ CPU protocol).
  paper  full resolution, 3x256, 20k iterations, mini-batches of 65,536 pixels (the paper's Table 1 protocol).

Examples:
  python scripts/bench_image.py --protocol cpu --device cuda --workers 8 --out outputs/bench-image-gpu
  python scripts/bench_image.py --protocol paper --device cuda --names kodim05 --variants mlp-pe filtered-pe
  python scripts/bench_image.py --protocol cpu --summarize-only --out outputs/bench-image-gpu
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import multiprocessing
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rff_field.bench.image import PRESETS, BenchConfig, build_jobs, merge_runs, run_bench  # noqa: E402
from rff_field.image.data import UsageError  # noqa: E402
from rff_field.image.fit import FitConfig  # noqa: E402
from rff_field.inr.config import NetworkConfig  # noqa: E402

KODAK4 = ("kodim01", "kodim05", "kodim13", "kodim15")
LONG_CPU = ("mlp-pe", "filtered-pe", "filtered-pe-nols", "siren", "gauss", "mlp-rff", "mlp-pe-wide", "wire",
            "filtered-pe-wide", "filtered-rff")  # fmt: skip


def protocol(name: str, args: argparse.Namespace) -> BenchConfig:
    """The BenchConfig of a named protocol, with the command line's overrides."""
    if name == "cpu":
        fit = FitConfig(iters=5000, network=NetworkConfig(hidden_features=64), log_every=250)
        options = dict(downsample=4, sweep_names=("kodim05",), sweep_iters=2000, long_names=("kodim05",),
                       long_iters=20000, long_variants=LONG_CPU, names=KODAK4)  # fmt: skip
    else:
        fit = FitConfig(iters=20000, network=NetworkConfig(hidden_features=256), log_every=500)
        options = dict(downsample=1, sweep_names=(), long_names=(), names=())
    fit.device = args.device
    fit.lpips = not args.no_lpips
    if args.iters is not None:
        fit.iters = args.iters
    if args.names is not None:
        options["names"] = tuple(args.names)
    if args.no_sweep:
        options["sweep_names"] = ()
    if args.no_long:
        options["long_names"] = ()
    variants = tuple(args.variants) if args.variants else tuple(PRESETS)
    return BenchConfig(images=args.images, out=args.out, variants=variants, fit=fit, progress=False,
                       crops_image=args.crops_image, reference_variants=tuple(args.reference_variants),
                       **options)  # fmt: skip


def run_one(config: BenchConfig, index: int) -> str:
    import torch

    torch.set_num_threads(1)
    run_bench(dataclasses.replace(config, job=index), notify=lambda message: print(f"note: {message}", flush=True))
    return f"job {index} done"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--protocol", choices=("cpu", "paper"), default="cpu", help="protocol preset (see above)")
    parser.add_argument("--images", type=Path, default=ROOT.parent / "shared" / "data" / "kodak", help="image folder")
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "bench-image-gpu", help="output folder")
    parser.add_argument("--names", nargs="*", help="image stems (default: the protocol's)")
    parser.add_argument("--variants", nargs="*", help="variants (default: every preset, SAPE included)")
    parser.add_argument("--reference-variants", nargs="*", default=[],
                        help="variants that match_params may name without running them")  # fmt: skip
    parser.add_argument("--iters", type=int, help="iterations of the main grid (default: the protocol's)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto", help="training device")
    parser.add_argument("--workers", type=int, default=1, help="jobs run side by side (processes)")
    parser.add_argument("--no-sweep", action="store_true", help="skip the robustness sweep")
    parser.add_argument("--no-long", action="store_true", help="skip the long runs")
    parser.add_argument("--no-lpips", action="store_true", help="skip LPIPS")
    parser.add_argument("--crops-image", help="image of the crops and curves figures (default: the first)")
    parser.add_argument("--list-jobs", action="store_true", help="print the jobs and exit")
    parser.add_argument("--summarize-only", action="store_true", help="only rebuild the summaries")
    parser.add_argument(
        "--merge-from",
        nargs="+",
        type=Path,
        default=[],
        metavar="DIR",
        help="link the finished jobs of these folders (same protocol; later ones win) into --out "
        "first, with --alias, e.g. to summarise GPU and CPU runs of one protocol together",
    )
    parser.add_argument(
        "--merge-long-from",
        nargs="+",
        type=Path,
        default=[],
        metavar="DIR",
        help="like --merge-from, for folders whose main jobs are this protocol's long runs "
        "(e.g. a bench run with --iters 20000)",
    )
    parser.add_argument(
        "--alias",
        nargs="*",
        default=[],
        metavar="FROM=TO",
        help="with --merge-from: a job label in the source folders and the label it fills here",
    )
    args = parser.parse_args()
    try:
        config = protocol(args.protocol, args)
        if args.merge_from or args.merge_long_from:
            sources = [(d, None) for d in args.merge_from] + [(d, "long") for d in args.merge_long_from]
            linked = merge_runs(sources, config.out, dict(a.split("=", 1) for a in args.alias))
            print(f"linked {linked} finished jobs into {config.out}", flush=True)
        if args.list_jobs or args.summarize_only:
            run_bench(dataclasses.replace(config, list_jobs=args.list_jobs, summarize_only=args.summarize_only))
            return 0
        jobs = build_jobs(config)
        pending = [job.index for job in jobs if not (config.out / job.folder / "metrics.json").exists()]
        print(f"{len(pending)} of {len(jobs)} jobs pending; {args.workers} worker(s)", flush=True)
        if pending:
            run_one(config, pending[0])  # also checks --out and writes bench.json before the workers start
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(max_workers=args.workers, mp_context=context) as pool:
            futures = {pool.submit(run_one, config, index): index for index in pending[1:]}
            for future in concurrent.futures.as_completed(futures):
                try:
                    print(future.result(), flush=True)
                except Exception as error:  # keep the other jobs going
                    print(f"job {futures[future]} failed: {error}", flush=True)
        summary = run_bench(dataclasses.replace(config, summarize_only=True))
        print(f"{summary['jobs_done']} of {summary['jobs_total']} jobs done -> {config.out / 'results.md'}")
    except UsageError as error:
        print(f"bench_image: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
