"""Quick GPU timing of representative image fits (used to size the GPU study run)."""

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rff_field.image.fit import FitConfig, run_fit  # noqa: E402
from rff_field.inr.config import NetworkConfig  # noqa: E402

out = Path(sys.argv[1])
cases = [
    ("mlp-pe", dict(method="mlp-pe", hidden_features=64), 4, {}),
    ("filt-pe256", dict(method="filtered-pe", pe="loglinear", hidden_features=64), 4, {}),
    ("filt-pe256-nols", dict(method="filtered-pe", pe="loglinear", hidden_features=64), 4, {"line_search": False}),
    ("filt-rff256-full", dict(method="filtered-rff", rff_frequencies=256, hidden_features=64), 4, {}),
    ("paper-filt-pe256", dict(method="filtered-pe", pe="loglinear", hidden_features=256), 1, {}),
    ("paper-mlp-pe", dict(method="mlp-pe", hidden_features=256), 1, {}),
]
for name, net, down, extra in cases:
    iters = 300 if down == 4 else 30
    cfg = FitConfig(network=NetworkConfig(**net), iters=iters, device="cuda", lpips=False, log_every=100, **extra)
    t = time.time()
    m = run_fit(ROOT / ".device_data/kodak/kodim05.png", out / name, cfg, downsample_factor=down, progress=False)
    print(
        f"{name}: {m['seconds_per_iter'] * 1000:.2f} ms/iter, psnr {m['psnr']:.2f}, wall {time.time() - t:.1f}s",
        flush=True,
    )
