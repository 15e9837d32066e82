"""Report of the reproduction study: when, and why, does the bias-free filter help?

Reads finished runs of ``rff-image bench`` folders (``RUNS/<image>/<label>/metrics.json``; the labels are those
of the study's protocol, benchmarks/reproduction/protocols.toml, and the bench presets), merges them (a later
folder wins for the same image and label), and writes into --dest:

  results.json   every run's summary (no histories) and the aggregated tables
  results.md     the tables (mean over images and per image) with parameter counts and parameters per value
  width.png      best PSNR against embedding width: plain MLP, filtered, MLP of equal total parameters
  sigma.png      best PSNR against RFF sigma, with and without the filter (128 and 256 frequencies)
  line_search.png  the paper rule's unclipped rate b/k and the 'balance' rate against lr_max over iterations
  learning.png   PSNR over iterations for the ways the filter can learn (one image)

usage: rff-bench reproduction-report --runs DIR [DIR ...] --dest benchmarks/reproduction
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from rff_field.bench.image import stored_line_search_config
from rff_field.common.datasets import DATA_ROOT
from rff_field.common.outputs import check_output_files, new_figure, save_figure, write_text
from rff_field.core.errors import UsageError, check_positive
from rff_field.image.data import downsample, load_image
from rff_field.image.plots import history_series, legend, plot_crops

SUMMARY_KEYS = (
    "method", "image", "iters", "psnr", "best_psnr", "best_iter", "ssim", "seconds_per_iter",
    "num_params", "num_filter_params", "params_per_value", "embedding_dim", "machine", "variant",
)  # fmt: skip

PE_SCALES = (8, 16, 32, 64, 128)
"""Log-linear PE scales of the 64-channel sweep."""
PE_BASE_SCALE = 32
"""The study's base scale: its runs are ``plain-pe64`` / ``filt-pe64``, without a ``-scale`` suffix."""


def pe64_label(prefix: str, scale: float) -> str:
    """Study label of a 64-channel log-linear PE run (``plain`` or ``filt``) at a PE scale."""
    return f"{prefix}-pe64" + ("" if scale == PE_BASE_SCALE else f"-scale{scale}")


TABLES = {
    "width": (
        "Embedding width (log-linear PE, scale 32, 3x64 INR)",
        ["plain-wire5", "filt-wire5", "plain-pe32", "filt-pe32", "eqp-pe32", "plain-pe64", "filt-pe64", "eqp-pe64",
         "eqp-deep-pe64", "plain-pe80", "filt-pe80", "eqp-pe80", "eqp-deep-pe80",
         "plain-pe128", "filt-pe128", "eqp-pe128",
         "plain-pe256", "filt-pe256", "eqp-pe256"],
    ),
    "rff": ("RFF (128 frequencies = 256 channels; 256 = 512 channels)", None),
    "learning": (
        "How the filter learns (base: filt-pe256)",
        ["filt-pe256", "const1e-4", "const1e-3", "const1e-2", "schedule1e-3", "ls-gradient", "ls-max1e-2",
         "balance", "balance-max1e-2"],
    ),
    "learning64": (
        "How the filter learns at 64 channels (base: filt-pe64)",
        ["filt-pe64", "pe64-const1e-4", "pe64-const1e-3", "pe64-const1e-2", "pe64-schedule1e-3", "pe64-ls-gradient",
         "pe64-ls-max1e-2", "pe64-ls-max3e-2", "pe64-ls-max1", "pe64-balance", "pe64-balance-max1e-2"],
    ),
    "init": ("Filter initialisation (base: filt-pe256)",
             ["filt-pe256", "init-identity", "init-orthogonal", "init-scaled0.3", "init-scaled3"]),
    "depth": ("Filter depth and bias (base: filt-pe256, 3 layers)",
              ["depth1", "depth2", "filt-pe256", "depth4", "depth5", "bias"]),
    "init64": ("Filter initialisation at 64 channels (base: filt-pe64)",
               ["filt-pe64", "pe64-init-identity", "pe64-init-orthogonal", "pe64-init-scaled0.3",
                "pe64-init-scaled3"]),
    "depth64": ("Filter depth and bias at 64 channels (base: filt-pe64, 3 layers)",
                ["pe64-depth1", "pe64-depth2", "filt-pe64", "pe64-depth4", "pe64-depth5", "pe64-bias"]),
    "pe_scale64": ("Log-linear PE scale at 64 channels (scale 32 is plain-pe64 / filt-pe64)",
                   [pe64_label(p, s) for s in PE_SCALES if s != PE_BASE_SCALE for p in ("plain", "filt")]),
    "wire": ("WIRE's Nyquist PE with more bands", ["plain-wire5", "filt-wire5", "plain-wire7", "filt-wire7",
                                                    "plain-wire9", "filt-wire9"]),
}  # fmt: skip


ALIASES = {
    "mlp-pe": "plain-wire5",
    "filtered-pe": "filt-wire5",
    "mlp-pe-loglinear": "plain-pe256",
    "filtered-pe-loglinear": "filt-pe256",
    "mlp-pe-wide": "plain-pe256",  # the presets' earlier names
    "filtered-pe-wide": "filt-pe256",
    "mlp-rff": "plain-rff128-s10",
    "filtered-rff": "filt-rff128-s10",
}
"""Bench presets that are the same run as a study label (renamed to it when the study label itself is missing)."""


def load_runs(folders: list[Path]) -> dict[tuple[str, str, int], dict]:
    runs: dict[tuple[str, str, int], dict] = {}
    for folder in folders:
        for path in sorted(folder.glob("**/metrics.json")):
            metrics = json.loads(path.read_text())
            label = metrics.get("label") or path.parent.name
            metrics["_folder"] = str(path.parent)
            runs[(label, metrics["image"], int(metrics["iters"]))] = metrics
    for label, image, iters in list(runs):
        alias = ALIASES.get(label)
        if alias and (alias, image, iters) not in runs:
            runs[(alias, image, iters)] = runs.pop((label, image, iters))  # renamed, so no run is counted twice
    return runs


def history(metrics: dict, key: str) -> tuple[list[int], list[float]]:
    """A per-iteration history, full or thinned to [iteration, value] pairs (0-based iterations)."""
    steps, values = history_series(metrics.get(key))
    return [int(s) - 1 for s in steps], values.tolist()


def sub_history(metrics: dict, key: str) -> tuple[list[int], list[float]]:
    """A history of the line search's quantities (``loss``, ``d_filter``, ``lr_d_inr``)."""
    return history(metrics.get("line_search_history") or {}, key)


def row(runs: dict, label: str, iters: int, images: list[str]) -> dict | None:
    found = {img: runs[(label, img, iters)] for img in images if (label, img, iters) in runs}
    if not found:
        return None
    any_run = next(iter(found.values()))
    best = [m["best_psnr"] for m in found.values()]
    final = [m["psnr"] for m in found.values()]
    return {
        "label": label,
        "variant": any_run.get("variant", ""),
        "images": len(found),
        "best_psnr": statistics.fmean(best),
        "psnr": statistics.fmean(final),
        "num_params": any_run["num_params"],
        "num_filter_params": any_run["num_filter_params"],
        "params_per_value": any_run["params_per_value"],
        "embedding_dim": any_run.get("embedding_dim"),
        "per_image": {img: {"best_psnr": m["best_psnr"], "psnr": m["psnr"]} for img, m in found.items()},
        "at_lr_max": _fraction_at_max(found.values()),
    }


def _fraction_at_max(runs) -> float | None:
    fractions = []
    for metrics in runs:
        if not metrics.get("line_search"):
            continue
        _, rates = history(metrics, "filter_lr_history")
        lr_max = float(stored_line_search_config(metrics.get("config", {}))["lr_max"])
        if rates:
            fractions.append(sum(r >= lr_max * (1 - 1e-9) for r in rates) / len(rates))
    return statistics.fmean(fractions) if fractions else None


def markdown_table(rows: list[dict], images: list[str]) -> list[str]:
    head = "| variant | spec | params | filter params | params/value | best PSNR | final PSNR | at lr_max | "
    head += " | ".join(images) + " |"
    lines = [head, "|---|---|---:|---:|---:|---:|---:|---:|" + "---:|" * len(images)]
    for r in rows:
        cells = []
        for img in images:
            v = r["per_image"].get(img)
            cells.append(f"{v['best_psnr']:.2f} / {v['psnr']:.2f}" if v else "–")
        at_max = "–" if r["at_lr_max"] is None else f"{100 * r['at_lr_max']:.0f}%"
        partial = "" if r["images"] == len(images) else f" ({r['images']} images)"
        lines.append(
            f"| {r['label']}{partial} | `{r['variant']}` | {r['num_params']:,} | {r['num_filter_params']:,} | "
            f"{r['params_per_value']:.3f} | {r['best_psnr']:.2f} | {r['psnr']:.2f} | {at_max} | "
            + " | ".join(cells)
            + " |"
        )
    return lines


TARGET_DB = 3.0
"""The study's target: a faithful filtered configuration beats the equal-parameter MLP by this much (best PSNR)
on at least three of the four images."""

MARGINS = [  # (filtered variant, equal-parameter MLP without filter, iterations as a key into --iters/--long-iters)
    ("filt-pe32", "eqp-pe32", "iters"), ("filt-pe64", "eqp-pe64", "iters"), ("filt-pe64", "eqp-deep-pe64", "iters"),
    ("pe64-const1e-2", "eqp-pe64", "iters"), ("pe64-ls-max1e-2", "eqp-pe64", "iters"),
    ("filt-pe80", "eqp-pe80", "iters"), ("filt-pe80", "eqp-deep-pe80", "iters"), ("filt-pe128", "eqp-pe128", "iters"),
    ("filt-pe256", "eqp-pe256", "iters"),
    ("filt-pe64", "eqp-pe64", "long_iters"), ("filt-pe64", "eqp-deep-pe64", "long_iters"),
    ("filt-pe80", "eqp-pe80", "long_iters"), ("filt-pe80", "eqp-deep-pe80", "long_iters"),
]  # fmt: skip


def margin_rows(runs: dict, images: list[str], iters: dict[str, int]) -> list[dict]:
    """Best PSNR of each filtered variant minus its equal-parameter MLP's, per image where both ran."""
    rows = []
    for filtered, plain, budget in MARGINS:
        n = iters[budget]
        per_image = {img: runs[(filtered, img, n)]["best_psnr"] - runs[(plain, img, n)]["best_psnr"]
                     for img in images if (filtered, img, n) in runs and (plain, img, n) in runs}  # fmt: skip
        if per_image:
            wins = sum(d >= TARGET_DB for d in per_image.values())
            rows.append({"filtered": filtered, "equal_params": plain, "iters": n, "per_image": per_image,
                         "mean": statistics.fmean(per_image.values()), "images_at_target": wins})  # fmt: skip
    return rows


def margin_table(rows: list[dict], images: list[str]) -> list[str]:
    lines = [f"| filtered | equal-parameter MLP | iterations | mean | {' | '.join(images)} | ≥ {TARGET_DB:g} dB |",
             "|---|---|---:|---:|" + "---:|" * len(images) + "---:|"]  # fmt: skip
    for r in rows:
        cells = [f"{r['per_image'][img]:+.2f}" if img in r["per_image"] else "–" for img in images]
        lines.append(f"| {r['filtered']} | {r['equal_params']} | {r['iters']} | {r['mean']:+.2f} | "
                     f"{' | '.join(cells)} | {r['images_at_target']} of {len(r['per_image'])} |")  # fmt: skip
    return lines


def plot_width(runs: dict, images: list[str], iters: int, path: Path) -> None:
    widths = {32: "pe32", 64: "pe64", 80: "pe80", 128: "pe128", 256: "pe256"}
    fig, ax = new_figure(figsize=(6, 4))
    for prefix, name, style in (("plain", "MLP (no filter)", "o-"), ("filt", "MLP + filter (paper)", "s-"),
                                ("eqp", "MLP, equal total parameters", "^--")):  # fmt: skip
        xs, ys = [], []
        for width, tag in widths.items():
            r = row(runs, f"{prefix}-{tag}", iters, images)
            if r is not None and r["images"] == len(images):
                xs.append(width)
                ys.append(r["best_psnr"])
        if xs:
            ax.plot(xs, ys, style, label=name)
    ax.set_xscale("log", base=2)
    save_axes(fig, ax, "embedding channels D (log-linear PE, scale 32)",
              f"best PSNR (dB), mean of {len(images)} Kodak x4 images", f"3x64 INR, {iters} iterations", path,
              legend_size=None)  # fmt: skip


def plot_sigma(runs: dict, images: list[str], iters: int, path: Path, image: str = "kodim05") -> bool:
    """Best PSNR against RFF sigma: the mean over all images where every image finished (left) and one image over
    every sigma that ran (right; the GPU budget ended before sigma 20 and 40 on all images)."""
    fig, axes = new_figure(1, 2, figsize=(11, 4), sharey=True)
    drawn = False
    for n, style in ((128, "-"), (256, ":")):
        for prefix, name, marker in (("plain", "MLP+RFF", "o"), ("filt", "MLP+RFF+filter", "s")):
            mean_xy, one_xy = [], []
            for sigma in (1, 5, 10, 20, 40):
                r = row(runs, f"{prefix}-rff{n}-s{sigma}", iters, images)
                if r is not None and r["images"] == len(images):
                    mean_xy.append((sigma, r["best_psnr"]))
                if r is not None and image in r["per_image"]:
                    one_xy.append((sigma, r["per_image"][image]["best_psnr"]))
            for ax, xy in ((axes[0], mean_xy), (axes[1], one_xy)):
                if xy:
                    drawn = True
                    ax.plot(*zip(*xy), marker + style, label=f"{name}, {2 * n} channels")
    if drawn:
        axes[0].set_title(f"mean of {len(images)} Kodak x4 images")
        axes[1].set_title(f"{image} (x4)")
        axes[0].set_ylabel("best PSNR (dB)")
        for ax in axes:
            ax.set_xscale("log")
            ax.set_xlabel("RFF sigma")
            ax.grid(alpha=0.3)
            legend(ax, fontsize=8)
        fig.suptitle(f"3x64 INR, {iters} iterations")
        save_figure(fig, path, dpi=120)
    return drawn


def plot_pe_scale(runs: dict, iters: int, path: Path, image: str = "kodim05") -> bool:
    """Best PSNR against the log-linear PE's scale on one image, with and without the filter (the PE analogue of
    the sigma sweep)."""
    fig, ax = new_figure(figsize=(6, 4))
    drawn = False
    for prefix, name, marker in (("plain", "MLP+PE", "o-"), ("filt", "MLP+PE+filter", "s-")):
        xy = [(scale, runs[key]["best_psnr"]) for scale in PE_SCALES
              if (key := (pe64_label(prefix, scale), image, iters)) in runs]  # fmt: skip
        if len(xy) > 1:
            drawn = True
            ax.plot(*zip(*xy), marker, label=f"{name}, 64 channels")
    if drawn:
        ax.set_xscale("log", base=2)
        title = f"{image} (x4), 3x64 INR, {iters} iterations"
        save_axes(fig, ax, "PE scale (highest frequency)", "best PSNR (dB)", title, path)
    return drawn


def save_axes(fig, ax, xlabel: str, ylabel: str, title: str, path: Path, legend_size: float | None = 7) -> None:
    """Label a one-panel figure, add its grid and legend (``legend_size`` None: matplotlib's size), and write it."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    legend(ax, fontsize=legend_size)
    save_figure(fig, path, dpi=120)


def plot_line_search(runs: dict, image: str, iters: int, labels: list[str], path: Path) -> bool:
    fig, axes = new_figure(1, 2, figsize=(11, 4))
    drawn, bounds = False, set()
    for label in labels:
        metrics = runs.get((label, image, iters))
        if metrics is None or not metrics.get("line_search_history"):
            continue
        steps, loss = sub_history(metrics, "loss")
        _, d_filter = sub_history(metrics, "d_filter")
        _, lr_d_inr = sub_history(metrics, "lr_d_inr")
        search = stored_line_search_config(metrics.get("config", {}))
        eps = float(search["eps"])
        bounds.add(float(search["lr_max"]))
        ratio = [(lo + li) / (-df + eps) if (-df + eps) != 0 else math.nan
                 for lo, df, li in zip(loss, d_filter, lr_d_inr)]  # fmt: skip
        balance = [li / df if df < 0 and li < 0 else math.nan for df, li in zip(d_filter, lr_d_inr)]
        axes[0].plot(steps, [abs(r) for r in ratio], label=f"{label}: |b/k| (paper rule, unclipped)", lw=0.8)
        axes[0].plot(steps, balance, label=f"{label}: lr_I d_I / d_A (balance)", lw=0.8)
        s2, rates = history(metrics, "filter_lr_history")
        axes[1].plot(s2, rates, label=label, lw=0.8)
        drawn = True
    if drawn:
        for lr_max in sorted(bounds):
            axes[0].axhline(lr_max, color="k", ls="--", lw=1, label=f"lr_max = {lr_max:g}")
        axes[0].set_yscale("log")
        axes[0].set_xlabel("iteration")
        axes[0].set_title(f"what the rules ask for ({image})")
        legend(axes[0], fontsize=7)
        axes[1].set_yscale("log")
        axes[1].set_xlabel("iteration")
        axes[1].set_title("filter learning rate actually set")
        legend(axes[1], fontsize=7)
        save_figure(fig, path, dpi=120)
    return drawn


def plot_psnr_curves(curves: list[tuple[str, dict]], title: str, path: Path) -> bool:
    """Training PSNR over iterations, one line per (legend name, metrics)."""
    if not curves:
        return False
    fig, ax = new_figure(figsize=(7, 4))
    for name, metrics in curves:
        steps, psnr = history_series(metrics.get("psnr_history"))
        ax.plot(steps, psnr, label=name, lw=0.8)
    save_axes(fig, ax, "iteration", "training PSNR (dB)", title, path)
    return True


def plot_learning(runs: dict, image: str, iters: int, labels: list[str], path: Path) -> bool:
    curves = [(label, runs[(label, image, iters)]) for label in labels if (label, image, iters) in runs]
    return plot_psnr_curves(curves, f"{image}, Kodak x4, 3x64 INR", path)


def plot_budget(runs: dict, iters: int, path: Path) -> bool:
    """Every run at the long budget: one panel per image, one colour per variant, zoomed past the first 1000
    iterations (where every curve climbs from 5 dB)."""
    done = {key: m for key, m in runs.items() if key[2] == iters}
    images = sorted({image for _, image, _ in done})
    labels = sorted({label for label, _, _ in done})
    if not images:
        return False
    fig, axes = new_figure(1, len(images), figsize=(3.6 * len(images) + 1, 4), squeeze=False)
    for ax, image in zip(axes[0], images):
        low = []
        for index, label in enumerate(labels):
            if (label, image, iters) in done:
                steps, psnr = history_series(done[(label, image, iters)].get("psnr_history"))
                ax.plot(steps, psnr, color=f"C{index % 10}", label=label, lw=0.8)
                low += [value for step, value in zip(steps, psnr) if step >= 1000]
        if low:
            ax.set_ylim(bottom=min(low) - 1)
        ax.set_title(image)
        ax.set_xlabel("iteration")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("training PSNR (dB)")
    handles = {h.get_label(): h for ax in axes[0] for h in ax.get_lines()}
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=min(len(handles), 6), fontsize=8)
    fig.suptitle(f"The paper's budget: {iters} iterations, Kodak x4, 3x64 INR")
    fig.get_layout_engine().set(rect=(0, 0.08, 1, 1))
    save_figure(fig, path, dpi=120)
    return True


def plot_noise_crops(runs: dict, image_path: Path, iters: int, labels: list[str], dest: Path) -> list[str]:
    """Crops of a flat and of a detailed region for the runs that kept their reconstruction (the paper's claim:
    the filter removes the noise high-frequency embeddings put into flat regions)."""
    image = image_path.stem
    found = [(label, runs.get((label, image, iters))) for label in labels]
    done = [(label, Path(m["_folder"]), m) for label, m in found if m]
    done = [run for run in done if (run[1] / "reconstruction.png").exists()]
    if len(done) < 2 or not image_path.exists():
        return []
    target = downsample(load_image(image_path).pixels, 4)
    names = [f"noise_flat_{image}.png", f"noise_edges_{image}.png"]
    plot_crops(target, done, dest / names[0], title=image, flat=True)
    plot_crops(target, done, dest / names[1], title=image)
    return names


@dataclass
class ReproductionReport:
    """Tables and figures of the reproduction study from the finished runs of its benchmark folders."""

    runs: tuple[Path, ...]
    """Benchmark output folders, merged in order (a later folder wins for the same image and label)."""
    dest: Path = Path("benchmarks/reproduction")
    """Where to write results.json, results.md and the figures."""
    images: tuple[str, ...] = ("kodim01", "kodim05", "kodim13", "kodim15")
    """Images of the tables."""
    kodak: Path = DATA_ROOT / "kodak"
    """Kodak folder (for the crops); the default lies under $RFF_DATA when that is set."""
    iters: int = 5000
    """Iterations of the main tables."""
    long_iters: int = 20000
    """Iterations of the budget table."""
    overwrite: bool = False
    """Replace the report files already in --dest (results.md, results.json and the figures)."""

    def main(self) -> None:
        """Write the report."""
        write_report(self)


REPORT_FILES = ("results.json", "results.md", "width.png", "sigma.png", "pe_scale.png", "line_search.png",
                "learning.png", "budget.png", "noise_flat_kodim05.png", "noise_edges_kodim05.png")  # fmt: skip
"""Every file the report may write into --dest."""


def write_report(args: ReproductionReport) -> None:
    """Write results.json, results.md and the figures of the study into ``args.dest``."""
    if not args.runs:
        raise UsageError("give the study's benchmark folders with --runs (e.g. --runs outputs/study/*)")
    check_positive("--iters", args.iters, integer=True)
    check_positive("--long-iters", args.long_iters, integer=True)
    missing = [str(folder) for folder in args.runs if not folder.is_dir()]
    if missing:
        raise UsageError(f"--runs {' '.join(missing)}: no such folder; give the study's benchmark folders")
    check_output_files(args.dest, REPORT_FILES, args.overwrite, "--dest")
    runs = load_runs(args.runs)
    if not runs:
        raise UsageError(f"no finished runs under {', '.join(map(str, args.runs))}; run the benchmark first")
    others = sorted({f"x{m.get('downsample')}" for m in runs.values() if m.get("downsample", 4) != 4})
    if others:
        raise UsageError(f"--runs hold runs at {', '.join(others)}; this report describes the study's Kodak x4 "
                         "(192x128) runs: give only those")  # fmt: skip
    if not any(image in args.images and iters == args.iters for _, image, iters in runs):
        found = sorted({(image, iters) for _, image, iters in runs})
        raise UsageError(
            f"none of the {len(runs)} runs is of --images {' '.join(args.images)} at --iters {args.iters} "
            f"(found: {', '.join(f'{image} at {iters}' for image, iters in found[:6])}); choose those options to match"
        )
    args.dest.mkdir(parents=True, exist_ok=True)
    machines = sorted({m.get("machine", "?") for m in runs.values()})
    report = {"images": args.images, "iters": args.iters, "machines": machines, "tables": {}}
    lines = ["# Reproduction study: when does the bias-free filter help?", "",
             f"Kodak x4 (192x128) images {', '.join(args.images)}; 3x64 ReLU INR (about the paper's parameters "
             "per value), Adam 1e-3 decayed by 0.1^(t/T), full batch, seed 0. Cells: best / final PSNR (dB). "
             "'at lr_max': share of iterations at which the line search set the filter's rate to its upper bound.",
             f"Machines: {'; '.join(machines)}.", ""]  # fmt: skip
    shown: set[str] = set()
    for key, (title, labels) in TABLES.items():
        if labels is None:
            labels = [f"{p}-rff{n}-s{s}" for n in (128, 256) for s in (1, 5, 10, 20, 40) for p in ("plain", "filt")]
        rows = [r for r in (row(runs, label, args.iters, args.images) for label in labels) if r]
        if not {r["label"] for r in rows} - shown:
            continue  # nothing this table adds to the ones above (e.g. a factor whose runs have not been made)
        shown |= {r["label"] for r in rows}
        report["tables"][key] = rows
        lines += [f"## {title}, {args.iters} iterations", "", *markdown_table(rows, args.images), ""]
    long_labels = sorted({label for (label, _, it) in runs if it == args.long_iters})
    long_rows = [r for r in (row(runs, label, args.long_iters, args.images) for label in long_labels) if r]
    if long_rows:
        report["tables"]["long"] = long_rows
        lines += [f"## The paper's budget: {args.long_iters} iterations", "",
                  *markdown_table(long_rows, args.images), ""]  # fmt: skip
    margins = margin_rows(runs, args.images, {"iters": args.iters, "long_iters": args.long_iters})
    if margins:
        report["margins"] = margins
        lines += ["## The target: filter minus an MLP of equal total parameters (best PSNR, dB)", "",
                  *margin_table(margins, args.images), ""]  # fmt: skip
    report["runs"] = [{k: m.get(k) for k in SUMMARY_KEYS} | {"label": label} for (label, _, _), m in runs.items()]
    figures = []
    plot_width(runs, args.images, args.iters, args.dest / "width.png")
    figures.append("width.png")
    if plot_sigma(runs, args.images, args.iters, args.dest / "sigma.png"):
        figures.append("sigma.png")
    if plot_pe_scale(runs, args.iters, args.dest / "pe_scale.png"):
        figures.append("pe_scale.png")
    ls_labels = ["filt-pe256", "filt-pe64", "pe64-ls-max3e-2", "pe64-ls-max1", "balance", "pe64-balance"]
    if plot_line_search(runs, "kodim05", args.iters, ls_labels, args.dest / "line_search.png"):
        figures.append("line_search.png")
    learn = [
        "filt-pe64",
        "pe64-const1e-4",
        "pe64-const1e-2",
        "pe64-schedule1e-3",
        "pe64-ls-gradient",
        "pe64-ls-max1e-2",
        "pe64-ls-max3e-2",
        "pe64-balance",
        "eqp-pe64",
        "plain-pe64",
        "filt-pe256",
        "const1e-4",
        "const1e-2",
        "schedule1e-3",
        "balance",
    ]
    if plot_learning(runs, "kodim05", args.iters, learn, args.dest / "learning.png"):
        figures.append("learning.png")
    noisy = ["plain-rff128-s10", "mlp-rff", "filt-rff128-s10", "filtered-rff", "plain-rff128-s40", "filt-rff128-s20",
             "filt-rff128-s40", "plain-pe64", "filt-pe64", "eqp-pe64"]  # fmt: skip
    if not (args.kodak / "kodim05.png").is_file():
        print(f"note: --kodak {args.kodak} holds no kodim05.png, so the noise crops are left out")
    figures += plot_noise_crops(runs, args.kodak / "kodim05.png", args.iters, noisy, args.dest)
    if plot_budget(runs, args.long_iters, args.dest / "budget.png"):
        figures.append("budget.png")
    lines += ["## Figures", ""] + [f"![{f}]({f})" for f in figures] + [""]
    write_text(args.dest / "results.json", json.dumps(report, indent=1))
    write_text(args.dest / "results.md", "\n".join(lines))
    print(f"{len(runs)} runs -> {args.dest / 'results.md'}")
