"""The paper's Table 1 on a lent GPU, without the command-line stack: ``python -m rff_field.bench.table1``.

Runs the image benchmark's ``paper`` protocol (``benchmarks/image/protocols.toml:paper``: Kodak at 768x512, 3x256
networks, best PSNR over 20k iterations, mini-batches of 65,536 pixels with the learning rates scaled by batch
over pixels) into ``OUT/table``: one job at a time (``--batch-models K`` fits K jobs of one network together),
its step replayed as a CUDA graph with ``--cuda-graph``; each finished job is written at once as its own
``runs/<image>/<label>/metrics.json``, finished jobs are skipped when the command runs again, and a job still
running at the time budget stops at its next progress check, writes what it reached under ``partial/`` with a
checkpoint, and stays pending: the next run resumes it there. ``--graph-check`` and ``--timing`` first compare the
graph with eager steps and measure seconds per iteration side by side (``OUT/timing``). Needs torch, numpy,
scikit-image, matplotlib, jaxtyping and rich: no tyro, no nerfstudio. ``scripts/gpu_table1.sh`` calls it."""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Optional, Sequence

from rff_field.bench.image import (
    BenchConfig,
    build_jobs,
    check_before_work,
    checked_jobs,
    job_config,
    list_images,
    run_bench,
)
from rff_field.bench.protocols import build_config, read_protocol
from rff_field.bench.timing import BatchTiming, ImageTiming
from rff_field.common.datasets import DATA_ROOT
from rff_field.common.outputs import write_text
from rff_field.core.errors import DIVERGED_EXIT_STATUS, USAGE_EXIT_STATUS, TrainingDiverged, UsageError, check_positive
from rff_field.image.data import downsample, load_image
from rff_field.image.fit import fit_image

TABLE_VARIANTS = ("mlp-pe", "filtered-pe", "mlp-rff", "filtered-rff", "siren", "gauss", "wire", "filtered-pe-fixed-lr")
"""The rows of the paper's Table 1 (and the line-search ablation), in the order the script runs them."""
PAPER_PROTOCOL = "benchmarks/image/protocols.toml:paper"
"""The repository's paper protocol, wherever the command runs from."""


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="folder for table/ (resumable) and timing/")
    parser.add_argument(
        "--images",
        type=Path,
        default=DATA_ROOT / "kodak",
        help="folder of images (default: $RFF_DATA/kodak, else ../shared/data/kodak)",
    )
    parser.add_argument("--budget-s", type=float, default=None, help="stop after this many seconds")
    parser.add_argument("--protocol", default=PAPER_PROTOCOL, help="FILE:NAME (default: the paper protocol)")
    parser.add_argument("--variants", nargs="+", default=list(TABLE_VARIANTS[:2]), help="rows to run")
    parser.add_argument(
        "--names", nargs="*", default=[], help="image names (default: the protocol's, else every image)"
    )
    parser.add_argument("--overwrite", action="store_true", help="rerun every job (another protocol in OUT/table)")
    parser.add_argument("--iters", type=int, default=None, help="iterations (default: the protocol's)")
    parser.add_argument("--batch-models", type=int, default=1, help="most jobs fitted together")
    parser.add_argument("--precision", choices=("fp32", "tf32", "bf16"), default="fp32")
    parser.add_argument("--cuda-graph", action="store_true", help="replay a fit's step as a CUDA graph (batches of 1)")
    parser.add_argument("--fused-line-search", action="store_true",
                        help="compile the line search's arithmetic into fused kernels (line_search.fused)")  # fmt: skip
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--timing", action="store_true", help="first measure s/iteration side by side")
    parser.add_argument("--timing-batched", action="store_true", help="with --timing: batched against one by one too")
    parser.add_argument("--graph-check", type=int, default=0, metavar="ITERS",
                        help="first fit ITERS iterations with and without the CUDA graph and compare")  # fmt: skip
    parser.add_argument("--timing-block", type=int, default=20, help="iterations per variant and round")
    parser.add_argument("--timing-rounds", type=int, default=3, help="counted timing rounds")
    return parser.parse_args(argv)


def bench_config(args: argparse.Namespace) -> BenchConfig:
    """The protocol's benchmark config with this command's images, rows and settings (checked)."""
    if args.iters is not None:
        check_positive("--iters", args.iters, integer=True)
    check_positive("--timing-block", args.timing_block, integer=True)
    check_positive("--timing-rounds", args.timing_rounds, integer=True)
    if args.graph_check < 0:
        raise UsageError(
            f"--graph-check must be zero (no check) or a positive number of iterations, got {args.graph_check}"
        )
    values, name = read_protocol(args.protocol)
    config = build_config(BenchConfig, values, where=f"{name}.")
    config.images, config.out = args.images, args.out / "table"
    config.names, config.variants = tuple(args.names) or config.names, tuple(args.variants)
    config.fit.iters = config.fit.iters if args.iters is None else args.iters
    config.fit.device, config.fit.precision, config.fit.cuda_graph = args.device, args.precision, args.cuda_graph
    config.fit.line_search.fused = args.fused_line_search
    config.engine, config.batch_models = "batched", args.batch_models
    config.jobs.budget_s, config.jobs.overwrite = args.budget_s, args.overwrite
    config.progress = False
    return config


def measure(config: BenchConfig, args: argparse.Namespace) -> None:
    """Seconds per iteration at the protocol's size: variants and precisions side by side, then K fits one after
    another against batched."""
    images = list_images(config.images, config.names)
    network = config.fit.network.hidden_features
    variants = ("mlp-pe", "filtered-pe", "filtered-pe-fixed-lr", "mlp-graph:mlp-pe,cuda_graph=true",
                "filt-graph:filtered-pe,cuda_graph=true",
                "fixed-graph:filtered-pe,line_search.enabled=false,cuda_graph=true",
                "mlp-graph-tf32:mlp-pe,cuda_graph=true,precision=tf32",
                "filt-graph-tf32:filtered-pe,cuda_graph=true,precision=tf32",
                "filt-fused:filtered-pe,line_search.fused=true",
                "filt-graph-fused:filtered-pe,cuda_graph=true,line_search.fused=true",
                "filt-graph-fused-tf32:filtered-pe,cuda_graph=true,line_search.fused=true,precision=tf32")  # fmt: skip
    ImageTiming(image=images[0], dest=args.out / "timing", variants=variants, downsample=config.downsample,
                hidden_features=network, block=args.timing_block, rounds=args.timing_rounds,
                device=args.device).main()  # fmt: skip
    if not args.timing_batched:
        return
    BatchTiming(images=config.images, dest=args.out / "timing", names=tuple(p.stem for p in images[:4]),
                variants=("mlp-pe", "filtered-pe"), downsample=config.downsample, hidden_features=network,
                block=args.timing_block, rounds=args.timing_rounds, device=args.device).main()  # fmt: skip


def graph_check(config: BenchConfig, iters: int, dest: Path) -> dict:
    """Fit the first image with ``mlp-pe`` and ``filtered-pe`` for ``iters`` iterations with the CUDA graph (and
    the fused line search when the config asks for it) and with eager, unfused steps (same seeds), and write how
    far apart the two fits end (``graph_check.json`` / ``.md``): both change only the order of floating-point
    operations, so the curves agree to rounding."""
    first = list_images(config.images, config.names)[0].stem
    check = replace(config, variants=("mlp-pe", "filtered-pe"), names=(first,))
    check.fit = replace(config.fit, iters=iters, log_every=iters, cuda_graph=False)
    rows = []
    for job in build_jobs(check):
        pixels = downsample(load_image(job.source).pixels, check.downsample)
        fit = job_config(check, job, pixels.shape[-1], max(pixels.shape[:2]))
        plain = replace(fit, cuda_graph=False, line_search=replace(fit.line_search, fused=False))
        eager, graphed = (fit_image(pixels, setting, job.subject, progress=False).metrics
                          for setting in (plain, replace(fit, cuda_graph=True)))  # fmt: skip
        gap = max(abs(a - b) for a, b in zip(eager["psnr_history"], graphed["psnr_history"]))
        rates = [(a, b) for a, b in zip(eager["filter_lr_history"] or [], graphed["filter_lr_history"] or [])]
        rate_gap = max((abs(a - b) / max(abs(a), 1e-30) for a, b in rates), default=None)
        rows.append({"variant": job.variant.label, "image": job.subject, "iters": iters, "psnr_eager": eager["psnr"],
                     "psnr_graph": graphed["psnr"], "max_psnr_gap": gap, "max_rate_rel_gap": rate_gap,
                     "seconds_per_iter_eager": eager["seconds_per_iter"],
                     "seconds_per_iter_graph": graphed["seconds_per_iter"], "machine": eager["machine"]})  # fmt: skip
    dest.mkdir(parents=True, exist_ok=True)
    write_text(dest / "graph_check.json", json.dumps(rows, indent=1) + "\n")
    lines = ["| variant | image | iterations | PSNR eager | PSNR graph | max PSNR gap (dB) | max rate gap (rel.) "
             "| s/it eager | s/it graph |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in rows:
        rate_gap = "-" if r["max_rate_rel_gap"] is None else f"{r['max_rate_rel_gap']:.1e}"
        lines.append(f"| {r['variant']} | {r['image']} | {r['iters']} | {r['psnr_eager']:.3f} | {r['psnr_graph']:.3f} "
                     f"| {r['max_psnr_gap']:.4f} | {rate_gap} | {r['seconds_per_iter_eager']:.4f} "
                     f"| {r['seconds_per_iter_graph']:.4f} |")  # fmt: skip
    write_text(dest / "graph_check.md", "\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)
    return {"rows": rows}


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    start = time.monotonic()
    try:
        config = bench_config(args)
        check_before_work(config, checked_jobs(config))  # not after minutes of timing
        if args.graph_check:
            graph_check(config, args.graph_check, args.out / "timing")
        if args.timing:
            measure(config, args)
        if args.timing or args.graph_check:
            if config.jobs.budget_s is not None:
                config.jobs.budget_s -= time.monotonic() - start
                if config.jobs.budget_s <= 0:
                    print("the budget went to the timing; run again for the table")
                    return 0
        run_bench(config)
    except UsageError as err:
        print(f"table1: error: {err}", file=sys.stderr)
        return USAGE_EXIT_STATUS
    except TrainingDiverged as err:
        print(f"table1: {err}", file=sys.stderr)
        return DIVERGED_EXIT_STATUS
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
