#!/usr/bin/env python
"""Pack finished benchmark parts for transfer: summaries, figures and each run's metrics.json with its
per-iteration histories thinned to at most --points values (first, last and best kept).

usage: python scripts/pack_bench_results.py SRC_DIR DEST_DIR [--points 1000] [--keep-reconstructions PART ...]
"""

import argparse
import json
import tarfile
from pathlib import Path


def thin(values: list, points: int) -> list:
    if len(values) <= points:
        return values
    step = len(values) / points
    keep = sorted({int(i * step) for i in range(points)} | {len(values) - 1})
    return [[i, values[i]] for i in keep]  # [iteration, value] pairs once thinned


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("src", type=Path)
    parser.add_argument("dest", type=Path)
    parser.add_argument("--points", type=int, default=1000)
    parser.add_argument("--keep-reconstructions", nargs="*", default=[])
    args = parser.parse_args()
    args.dest.mkdir(parents=True, exist_ok=True)
    for part in sorted(p for p in args.src.iterdir() if p.is_dir()):
        with tarfile.open(args.dest / f"{part.name}.tgz", "w:gz") as tar:
            for path in sorted(part.rglob("*")):
                rel = path.relative_to(args.src)
                if path.is_dir():
                    continue
                if path.name == "metrics.json":
                    metrics = json.loads(path.read_text())
                    for key, value in list(metrics.items()):
                        if key.endswith("_history") and isinstance(value, list):
                            metrics[key] = thin(value, args.points)
                        elif key.endswith("_history") and isinstance(value, dict):
                            metrics[key] = {k: thin(v, args.points) for k, v in value.items()}
                    tmp = args.dest / "_metrics.json"
                    tmp.write_text(json.dumps(metrics))
                    tar.add(tmp, arcname=str(rel))
                elif path.parent == part or path.suffix in (".json", ".md", ".log"):
                    tar.add(path, arcname=str(rel))
                elif path.name == "reconstruction.png" and part.name in args.keep_reconstructions:
                    tar.add(path, arcname=str(rel))
            log = args.src / f"{part.name}.log"
            if log.exists():
                tar.add(log, arcname=log.name)
    (args.dest / "_metrics.json").unlink(missing_ok=True)


if __name__ == "__main__":
    main()
