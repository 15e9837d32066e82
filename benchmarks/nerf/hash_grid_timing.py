"""Time the proposal networks' hash grid on torch: nerfstudio's ``HashEncoding`` against ``TorchHashEncoding``
(``rff_field/nerf/hash_grid.py``), the two taking turns; prints the Markdown table of ``hash_grid.md``.

    python benchmarks/nerf/hash_grid_timing.py [--points 131072] [--rounds 7]
"""

import argparse
import statistics
import time

import torch
from nerfstudio.field_components.encodings import HashEncoding

from rff_field.nerf.hash_grid import TorchHashEncoding

parser = argparse.ArgumentParser()
parser.add_argument("--points", type=int, default=131072)
parser.add_argument("--rounds", type=int, default=7)
args = parser.parse_args()
grid = {"num_levels": 5, "max_res": 128, "log2_hashmap_size": 15, "implementation": "torch"}
encodings = {"nerfstudio": HashEncoding(**grid), "rff_field": TorchHashEncoding(**grid)}
encodings["rff_field"].load_state_dict(encodings["nerfstudio"].state_dict())
points = torch.rand(args.points, 3)
seconds = {(kind, name): [] for kind in ("forward", "forward+backward") for name in encodings}
for index in range(args.rounds + 1):  # the first round warms up
    for name in list(encodings)[:: 1 if index % 2 else -1]:
        encoding = encodings[name]
        start = time.perf_counter()
        with torch.no_grad():
            encoding(points)
        middle = time.perf_counter()
        encoding.hash_table.grad = None
        encoding(points).sum().backward()
        if index:
            seconds["forward", name].append(middle - start)
            seconds["forward+backward", name].append(time.perf_counter() - middle)
print(
    f"{args.points:,} points, 5 levels of 2^15 entries; {torch.get_num_threads()} torch threads, torch "
    f"{torch.__version__}; median of {args.rounds} rounds\n"
)
print("| pass | nerfstudio (ms) | rff_field (ms) | speed-up |\n|---|---:|---:|---:|")
for kind in ("forward", "forward+backward"):
    theirs, ours = (1e3 * statistics.median(seconds[kind, name]) for name in ("nerfstudio", "rff_field"))
    print(f"| {kind} | {theirs:.1f} | {ours:.1f} | {theirs / ours:.2f}x |")
