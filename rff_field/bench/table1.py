"""The paper's Table 1 on a lent GPU, without the command-line stack: ``python -m rff_field.bench.table1``.

Runs the image benchmark's ``paper`` protocol (``benchmarks/image/protocols.toml:paper``: Kodak at 768x512, 3x256
networks, best PSNR over 20k iterations, mini-batches of 65,536 pixels with the learning rates scaled by batch
over pixels) with the batched engine into ``OUT/table``: jobs that share a network fit together, each finished job
is written at once as its own ``runs/<image>/<label>/metrics.json``, finished jobs are skipped when the command
runs again, and no batch runs past the time budget (a batch still running then is dropped, its jobs stay
pending). With ``--timing`` it first measures seconds per iteration side by side (``OUT/timing``). Needs torch, numpy,
scikit-image, matplotlib, jaxtyping and rich: no tyro, no nerfstudio. ``scripts/gpu_table1.sh`` calls it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

from rff_field.bench.image import BenchConfig, list_images, run_bench
from rff_field.bench.protocols import build_config, read_protocol
from rff_field.bench.timing import BatchTiming, ImageTiming
from rff_field.common.datasets import DATA_ROOT
from rff_field.core.errors import DIVERGED_EXIT_STATUS, USAGE_EXIT_STATUS, TrainingDiverged, UsageError

TABLE_VARIANTS = ("mlp-pe", "filtered-pe", "mlp-rff", "filtered-rff", "siren", "gauss", "wire", "filtered-pe-fixed-lr")
"""The rows of the paper's Table 1 (and the line-search ablation), in the order the script runs them."""


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
    parser.add_argument("--protocol", default="benchmarks/image/protocols.toml:paper", help="FILE:NAME")
    parser.add_argument("--variants", nargs="+", default=list(TABLE_VARIANTS[:2]), help="rows to run")
    parser.add_argument("--names", nargs="*", default=[], help="image names (default: every image)")
    parser.add_argument("--iters", type=int, default=None, help="iterations (default: the protocol's)")
    parser.add_argument("--batch-models", type=int, default=2, help="most jobs fitted together")
    parser.add_argument("--precision", choices=("fp32", "tf32", "bf16"), default="fp32")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--timing", action="store_true", help="first measure s/iteration side by side")
    parser.add_argument("--timing-block", type=int, default=20, help="iterations per variant and round")
    parser.add_argument("--timing-rounds", type=int, default=3, help="counted timing rounds")
    return parser.parse_args(argv)


def bench_config(args: argparse.Namespace) -> BenchConfig:
    """The protocol's benchmark config with this command's images, rows and settings."""
    values, name = read_protocol(args.protocol)
    config = build_config(BenchConfig, values, where=f"{name}.")
    config.images, config.out = args.images, args.out / "table"
    config.names, config.variants = tuple(args.names), tuple(args.variants)
    config.fit.iters = args.iters or config.fit.iters
    config.fit.device, config.fit.precision = args.device, args.precision
    config.engine, config.batch_models = "batched", args.batch_models
    config.jobs.budget_s = args.budget_s
    config.progress = False
    return config


def measure(config: BenchConfig, args: argparse.Namespace) -> None:
    """Seconds per iteration at the protocol's size: variants and precisions side by side, then K fits one after
    another against batched."""
    images = list_images(config.images, config.names)
    network = config.fit.network.hidden_features
    variants = ("mlp-pe", "filtered-pe", "filtered-pe-fixed-lr", "filt-tf32:filtered-pe,precision=tf32",
                "filt-bf16:filtered-pe,precision=bf16", "mlp-tf32:mlp-pe,precision=tf32")  # fmt: skip
    ImageTiming(image=images[0], dest=args.out / "timing", variants=variants, downsample=config.downsample,
                hidden_features=network, block=args.timing_block, rounds=args.timing_rounds,
                device=args.device).main()  # fmt: skip
    BatchTiming(images=config.images, dest=args.out / "timing", names=tuple(p.stem for p in images[:4]),
                variants=("mlp-pe", "filtered-pe"), downsample=config.downsample, hidden_features=network,
                block=args.timing_block, rounds=args.timing_rounds, device=args.device).main()  # fmt: skip


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    start = time.monotonic()
    try:
        config = bench_config(args)
        if args.timing:
            measure(config, args)
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
