"""On a GPU, window by window: the paper-width study's full-size rows (Kodak 768x512, 3x256 INR).

The protocol of paper_width.py at full size: coordinates in [-1, 1], Adam, shuffled batches of 65,536 pixels (6 a
pass), the INR's rate 1e-3 x 65,536 / 393,216 decayed by 0.1^(t/T) once a pass, the filter's rate set by the line
search (bound 1e-3), PSNR of a pass from its training MSE, best over passes; TF32 matrix products on a GPU unless
--fp32 (torch's float32 matmul precision "high"). Each row is a resumable job: a call runs the queue for as long as
its --budget allows, then leaves the row in progress as a checkpoint in full_size/ (weights in float32, Adam's
moments in bfloat16, byte-shuffled and compressed, at most 8 MiB), which the next call, on any card and from a fresh
clone, continues. A finished row's checkpoint is deleted; full_size/results.json keeps every row's result and the
windows (card, commit, passes, seconds) that ran it.

    python full_size.py measure --data DIR [--iters N]          # seconds per pass of every row here, 3 passes each
    python full_size.py run --data DIR --budget S [--iters N]   # the queue in order for S seconds, then checkpoint
                                                                # (measures first on a GPU it has not measured)
    python full_size.py report                                  # full_size.md from results.json

DIR holds kodak/kodim01.png and kodak/kodim05.png; scripts/gpu_full_size.sh runs one window on a lent GPU.
"""

from __future__ import annotations

import argparse
import io
import lzma
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import paper_width as pw
import torch

from rff_field.common.machine import machine_description
from rff_field.common.outputs import write_json, write_text, written_atomically
from rff_field.image.data import load_image

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "full_size"
JSON = RESULTS / "results.json"
WIDTH, BATCH, SCALE, ITERS = 256, 65536, 512, 20000
MAX_CHECKPOINT = 8 << 20  # bytes a row in progress may keep in the repository
SAVE_S = 30.0  # seconds kept back from the budget to evaluate and write a checkpoint
MOMENTS = ("exp_avg", "exp_avg_sq", "max_exp_avg_sq")
PAPER = pw.PAPER


def rows() -> dict:
    """The full-size rows: WIRE's PE (30 channels at 768 px), and at D = 512 and 1024 (log-linear, scale 512 =
    Figure 2's) the filter with the line search, plain 3x256, and an MLP as wide as makes its parameters the
    filtered model's, at the protocol's rate and at the filter's unscaled 1e-3; the residual filter at 1024."""
    table = {"mlp-wire30": dict(pe="wire", D=30, scale=None, filter=None, width=WIDTH)}
    for d in (512, 1024):
        base = dict(pe="loglinear", D=d, scale=SCALE)
        target = pw.mlp_params(d, WIDTH) + 3 * d * d
        eq = min(range(WIDTH, 4 * d), key=lambda w: abs(pw.mlp_params(d, w) - target))
        table[f"filt-ls-d{d}"] = dict(base, filter="line search", width=WIDTH)
        table[f"eqp-d{d}"] = dict(base, filter=None, width=eq)
        table[f"eqp-lr1e-3-d{d}"] = dict(base, filter=None, width=eq, inr_lr_unscaled=True)
        table[f"plain-d{d}"] = dict(base, filter=None, width=WIDTH)
    table["residual-d1024"] = dict(table["filt-ls-d1024"], residual=True)
    return table


ROWS = rows()
IMAGES = ["kodim01", "kodim05"]
SETTLING = ["filt-ls-d512", "eqp-d512", "eqp-lr1e-3-d512"]  # what settles the question, first kodim01, then kodim05
QUEUE = [f"{im}/{r}" for im in IMAGES for r in SETTLING] + [
    f"{im}/{r}" for im in IMAGES for r in ROWS if r not in SETTLING
]


def load(image: str, data: Path) -> torch.Tensor:
    return load_image(data / "kodak" / f"{image}.png", "--data")[0]


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else machine_description(device)


def tf32() -> bool:
    return torch.get_float32_matmul_precision() != "highest" and torch.cuda.is_available()


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE)
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


# ---------------- a row's checkpoint: compact enough to keep in the repository ---------------------------------------


def shuffled(value):
    """Float tensors as their byte planes (byte k of every value together, which compresses); the rest as it is."""
    if isinstance(value, dict):
        return {k: shuffled(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shuffled(v) for v in value]
    if isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel():
        t = value.detach().cpu().contiguous()
        planes = t.reshape(-1).view(torch.uint8).view(-1, t.element_size()).t().contiguous()
        return ("planes", str(t.dtype), tuple(t.shape), planes)
    return value


def unshuffled(value):
    if isinstance(value, dict):
        return {k: unshuffled(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unshuffled(v) for v in value]
    if isinstance(value, tuple) and len(value) == 4 and value[0] == "planes":
        _, dtype, shape, planes = value
        return planes.t().contiguous().view(getattr(torch, dtype.removeprefix("torch."))).view(shape)
    return value


def pack(state: dict) -> bytes:
    """A :meth:`paper_width.Fit.state` as compressed bytes: Adam's moments rounded to bfloat16 (a resumed row
    differs from an unbroken one by that rounding, once a window)."""
    opt = dict(state["opt"])
    opt["state"] = {i: {k: v.to(torch.bfloat16) if k in MOMENTS else v for k, v in s.items()}
                    for i, s in opt["state"].items()}  # fmt: skip
    state = dict(state, opt=opt, mse=torch.tensor(state["mse"], dtype=torch.float64),
                 records=torch.tensor(state["records"], dtype=torch.float64).reshape(-1, 4))  # fmt: skip
    buffer = io.BytesIO()
    torch.save(shuffled(state), buffer)
    return lzma.compress(buffer.getvalue(), preset=6)


def unpack(data: bytes) -> dict:
    state = unshuffled(torch.load(io.BytesIO(lzma.decompress(data)), weights_only=False))
    for s in state["opt"]["state"].values():
        for k in MOMENTS:
            if k in s:
                s[k] = s[k].float()
    return dict(state, mse=state["mse"].tolist(), records=state["records"].tolist())


# ---------------- runs ------------------------------------------------------------------------------------------------


def read_results() -> dict:
    import json

    return json.loads(JSON.read_text()) if JSON.exists() else {"runs": {}, "timing": {}}


def make_fit(job: str, data: Path, iters: int, device: torch.device, cache: dict) -> pw.Fit:
    image, label = job.split("/")
    if image not in cache:
        cache.clear()  # one image's pixels and embeddings at a time
        cache[image] = load(image, data)
    per_pass = -(-cache[image].shape[0] * cache[image].shape[1] // BATCH)
    return pw.Fit(label, cache[image], iters, cache.setdefault("gamma", {}), row=ROWS[label], batch=BATCH,
                  device=str(device), record_every=per_pass)  # fmt: skip


def row_params(row: dict) -> int:
    """The INR's parameters and the filter's 3 D^2."""
    return pw.mlp_params(row["D"], row["width"]) + (3 * row["D"] ** 2 if row["filter"] else 0)


def checkpoint_fits(row: dict) -> bool:
    """Whether a row's checkpoint stays within :data:`MAX_CHECKPOINT`: 8 bytes a parameter (weights in float32, two
    moments in bfloat16), compressed to about three quarters (measured: 5.9 MiB for D = 512's 1.05M)."""
    return row_params(row) * 8 * 0.8 <= MAX_CHECKPOINT


def history_marks(iters: int) -> list[int]:
    """Passes at which results.json keeps the best PSNR so far."""
    marks = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000} | set(range(250, iters + 1, 250))
    return sorted(m for m in marks if m <= iters) + ([iters] if iters not in marks else [])


def measure(data: Path, iters: int, device: torch.device, revision: str, passes: int = 3) -> None:
    """A warm-up pass, then ``passes`` timed passes of each row (fresh models, nothing kept) on kodim01."""
    card, cache, timing = device_name(device), {}, {}
    for label in ROWS:
        fit = make_fit(f"kodim01/{label}", data, iters, device, cache)
        fit.attach()
        times = []
        for _ in range(passes + 1):
            start = time.perf_counter()
            fit.one_pass()
            times.append(time.perf_counter() - start)
        timing[label] = statistics.median(times[1:])
        print(f"{label}: {timing[label]:.4f} s/pass, {timing[label] * iters / 60:.1f} min for {iters}", flush=True)
        del fit
    results = read_results()
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    results.setdefault("timing", {})[card] = dict(
        s_per_pass=timing, passes=passes, torch=torch.__version__, tf32=tf32(), commit=revision, utc=now
    )
    write_json(JSON, results)


def run(jobs: list[str], data: Path, iters: int, budget: float, device: torch.device, revision: str) -> None:
    """Advance ``jobs`` in order until ``budget`` seconds have passed, keeping :data:`SAVE_S` to write the row in
    progress; on a GPU not measured yet, :func:`measure` first."""
    started, card, cache = time.monotonic(), device_name(device), {}
    if device.type == "cuda" and card not in read_results().get("timing", {}):
        measure(data, iters, device, revision)
    s_per_pass = read_results().get("timing", {}).get(card, {}).get("s_per_pass", {})
    for job in jobs:
        done = read_results()["runs"].get(job)
        if done and done["iters"] != iters:
            sys.exit(f"{job} runs {done['iters']} iterations in results.json; this call asks for {iters} (--iters)")
        if done and done["status"] == "finished":
            continue
        if time.monotonic() - started + 2 * SAVE_S > budget:
            break
        image, label = job.split("/")
        left = budget - (time.monotonic() - started) - SAVE_S
        need = s_per_pass.get(label, 0) * (iters - (done or {}).get("done", 0))
        if need > left and not checkpoint_fits(ROWS[label]):
            print(f"{job}: skipped: its checkpoint would exceed 8 MiB, so it must finish in one window, and it needs "
                  f"{need / 60:.0f} minutes here ({left / 60:.0f} left): give it a longer --budget, or run every row "
                  "with fewer --iters", flush=True)  # fmt: skip
            continue
        fit, ckpt = make_fit(job, data, iters, device, cache), RESULTS / f"{image}-{label}.pt"
        if ckpt.exists():
            fit.restore(unpack(ckpt.read_bytes()))
        fit.attach()
        first, window_start, times = fit.it, time.monotonic(), []
        print(f"{job}: from pass {first} of {iters} on {card}", flush=True)
        while fit.it < iters:
            start = time.monotonic()
            fit.one_pass()
            times.append(time.monotonic() - start)
            per_pass = statistics.median(times[1:] or times)
            if time.monotonic() - started + 2 * per_pass + SAVE_S > budget:
                break
        finished = fit.it >= iters
        result = fit.evaluate()
        history = result.pop("psnr_history")
        window = dict(card=card, torch=torch.__version__, tf32=tf32(),
                      commit=revision, utc=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                      passes=[first, fit.it], seconds=round(time.monotonic() - window_start, 1),
                      s_per_pass=round(statistics.median(times[1:] or times), 5))  # fmt: skip
        windows = (done or {}).get("windows", []) + [window]
        result.update(
            image=image,
            status="finished" if finished else "running",
            windows=windows,
            best_so_far={str(m): max(history[:m]) for m in history_marks(iters) if m <= len(history)},
        )
        if finished:
            ckpt.unlink(missing_ok=True)
        else:
            packed = pack(fit.state())
            if len(packed) > MAX_CHECKPOINT:  # written all the same: the window's work is not lost
                print(f"{job}: its checkpoint takes {len(packed) / 2**20:.1f} MiB, over the 8 MiB a row may keep in "
                      "the repository", flush=True)  # fmt: skip
            with written_atomically(ckpt) as temporary:
                temporary.write_bytes(packed)
            result["checkpoint_mib"] = round(len(packed) / 2**20, 2)
        results = read_results()
        results["runs"][job] = result
        write_json(JSON, results)
        print(f"{job}: {result['status']} at {fit.it}/{iters}, best {result['best_psnr']:.2f} dB, "
              f"{window['s_per_pass']:.4f} s/pass", flush=True)  # fmt: skip
        del fit
        if not finished:
            break


# ---------------- report ------------------------------------------------------------------------------------------


def report() -> None:
    results = read_results()
    runs, timing = results["runs"], results.get("timing", {})
    finished = {job: r for job, r in runs.items() if r["status"] == "finished"}
    pairs = [(im, finished.get(f"{im}/filt-ls-d512"), finished.get(f"{im}/eqp-d512"),
              finished.get(f"{im}/eqp-lr1e-3-d512")) for im in IMAGES]  # fmt: skip
    settled = [(im, f, e, c) for im, f, e, c in pairs if f and e and c]
    if settled:
        answer = "; ".join(
            f"{im}: filtered {f['best_psnr']:.2f} dB, equal-parameter MLP {e['best_psnr']:.2f} dB at the protocol's "
            f"rate and {c['best_psnr']:.2f} dB at the filter's"
            for im, f, e, c in settled
        )
    else:
        answer = "not yet: no image has all three D = 512 rows finished (see the table for what has run)"
    values = 768 * 512 * 3
    lines = [
        "# The paper-width study at full size (GPU, window by window)",
        "",
        f"**Answer.** {answer}. The paper's Table 1: MLP+PE {PAPER['MLP+PE']} dB, PE+Ours {PAPER['PE+Ours']} dB "
        "(means over 24 images).",
        "",
        "Protocol: Kodak at 768x512, a 3x256 ReLU INR, batches of 65,536 shuffled pixels (6 a pass), the INR's rate "
        "1e-3/6 decayed by 0.1^(t/T) once a pass, the filter's set by the line search (bound 1e-3); best PSNR over "
        "passes (training MSE) / final model. A row that ran in more than one window was resumed from a "
        "checkpoint whose Adam moments were rounded to bfloat16; a row whose checkpoint would exceed the 8 MiB a "
        "row may keep in the repository (D = 1024 with the filter or at equal parameters) must finish in one window.",
        "",
        "| row | D | INR width | params | params/value | "
        + " | ".join(f"{im} best / final (SSIM)" for im in IMAGES)
        + " |",
        "|---|---:|---:|---:|---:|" + "---|" * len(IMAGES),
    ]
    for label, row in ROWS.items():
        params = row_params(row)
        cells = []
        for im in IMAGES:
            r = runs.get(f"{im}/{label}")
            if r is None:
                cells.append("waiting for a GPU")
            else:
                cell = f"{r['best_psnr']:.2f} / {r['final_psnr']:.2f} ({r['ssim']:.3f})"
                cells.append(cell if r["status"] == "finished" else f"{cell} at pass {r['done']} of {r['iters']}")
        lines.append(f"| {label} | {row['D']} | {row['width']} | {params:,} | {params / values:.2f} | "
                     + " | ".join(cells) + " |")  # fmt: skip
    lines += ["", "## Windows", "", "| row | card | commit | passes | seconds | s/pass | TF32 |"]
    lines += ["|---|---|---|---|---:|---:|---|"]
    for job, r in runs.items():
        for w in r["windows"]:
            lines.append(f"| {job} | {w['card']} | {w['commit']} | {w['passes'][0]}-{w['passes'][1]} | "
                         f"{w['seconds']:.0f} | {w['s_per_pass']:.4f} | {w['tf32']} |")  # fmt: skip
    for card, t in timing.items():
        lines += ["", f"## Seconds per pass on {card} (`measure`, torch {t['torch']}, TF32 {t['tf32']}, {t['utc']})",
                  "", "| row | s/pass | minutes for 20k passes |", "|---|---:|---:|"]  # fmt: skip
        lines += [f"| {k} | {v:.4f} | {v * ITERS / 60:.1f} |" for k, v in t["s_per_pass"].items()]
    lines += ["", "Rerun: see the docstring of `full_size.py`.", ""]
    write_text(HERE / "full_size.md", "\n".join(lines))


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["measure", "run", "report"])
    p.add_argument("--data", type=Path, help="the folder holding kodak/")
    p.add_argument("--iters", type=int, default=ITERS, help="passes over the image (the paper's 20k iterations)")
    p.add_argument("--budget", type=float, default=540.0, help="run: seconds for this call, checkpoint included")
    p.add_argument("--jobs", nargs="*", default=QUEUE, help="run: IMAGE/ROW jobs in order (default: the queue)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--fp32", action="store_true", help="full float32 matrix products on a GPU (default: TF32)")
    p.add_argument("--commit", default="", help="the commit to record (default: git's; a device's copy may have none)")
    a = p.parse_args()
    revision = a.commit or git_commit()
    if a.device.startswith("cuda"):
        torch.set_float32_matmul_precision("highest" if a.fp32 else "high")
    unknown = [job for job in a.jobs if job.count("/") != 1 or job.split("/")[1] not in ROWS]
    if unknown:
        sys.exit(f"--jobs: unknown {unknown}; rows are {', '.join(ROWS)}")
    if a.what != "report" and (a.data is None or not (a.data / "kodak").is_dir()):
        sys.exit("--data: give the folder that holds kodak/")
    RESULTS.mkdir(exist_ok=True)
    if a.what == "measure":
        measure(a.data, a.iters, torch.device(a.device), revision)
    elif a.what == "run":
        run(a.jobs, a.data, a.iters, a.budget, torch.device(a.device), revision)
    report()
