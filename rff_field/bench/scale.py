"""Report of the scale study: where does the filter's gain go as the image and the network grow?

Reads the finished runs of the study's parts (``benchmarks/reproduction/protocols.toml``, tables ``scale-*``): one
``rff-image bench`` folder per image size and iteration count, ``OUT/x<downsample>-<iterations>/runs/<image>/
<label>/metrics.json``. Each setting runs as a pair, the plain MLP ``mlp-TAG`` and the filtered ``filt-TAG``; the
variants of question 3 are filtered runs ``filt-TAG-VARIANT`` against the pair of ``TAG``. Writes into ``--dest``:

  scale.md           the tables (and the hand-written answers, ``scale_answers.md`` beside it, when present)
  scale.json         the same numbers, with each long or variant run's best PSNR so far at ~64 iterations
  scale.png          the difference filtered - plain against the INR's parameters per value, and against iterations
  scale_variants.png the variants of the long runs against iterations

With ``--previous`` an earlier scale.json stands in for the runs that are no longer (or never were) under
``--out``, so that a new run adds to the report instead of replacing it.

The line search's branches per phase of training come from each filtered run's recorded inputs (loss and the two
slopes of every iteration) put through :func:`rff_field.core.step_rule.filter_step_branch`, checked against the
recorded rates.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from rff_field.bench.image import format_count, stored_line_search_config
from rff_field.common.outputs import check_output_files, new_figure, save_figure, write_text
from rff_field.core.errors import UsageError
from rff_field.core.step_rule import BRANCHES, filter_step_branch

GRID = (  # factor, folder, tag, setting (what changes from the x4 base)
    ("base", "x4-2000", "wire22-w64", "x4, 3x64, WIRE PE 22 ch."),
    ("INR width", "x4-2000", "wire22-w32", "x4, 3x32 (under-parameterised)"),
    ("INR width", "x4-2000", "wire22-w128", "x4, 3x128"),
    ("INR width", "x4-2000", "wire22-w256", "x4, 3x256 (over-parameterised)"),
    ("embedding width", "x4-2000", "wire26-w64", "x4, 3x64, WIRE PE 6 bands (26 ch.)"),
    ("embedding width", "x4-2000", "wire30-w64", "x4, 3x64, WIRE PE 7 bands (30 ch.)"),
    ("embedding width", "x4-2000", "wire26-w128", "x4, 3x128, WIRE PE 6 bands (26 ch.)"),
    ("log-linear PE", "x4-2000", "ll64-w64", "x4, 3x64, log-linear PE 64 ch."),
    ("log-linear PE", "x4-2000", "ll64-w128", "x4, 3x128, log-linear PE 64 ch."),
    ("image size", "x2-2000", "wire26-w64", "x2, 3x64, WIRE PE 26 ch., full batch"),
    ("image size", "x2-2000", "wire26-w128", "x2, 3x128, WIRE PE 26 ch., full batch"),
)
LONG = (  # folder, tag, setting
    ("x4-8000", "wire22-w128", "x4, 3x128, WIRE PE 22 ch., 8000 iterations"),
    ("x2-8000", "wire26-w128", "x2, 3x128, WIRE PE 26 ch., 8000 iterations"),
    ("x4-20000", "wire22-w64", "x4, 3x64, WIRE PE 22 ch., 20000 iterations"),
    ("x2-20000", "wire26-w128", "x2, 3x128, WIRE PE 26 ch., 20000 iterations"),
)
LONG_FOLDERS = {folder for folder, _, _ in LONG}
VARIANTS = (  # folder, base tag, suffix, what changes (filtered runs of question 3)
    ("x4-2000", "wire22-w128", "residual", "residual filter (1 + f_a(γ)) ⊙ γ"),
    ("x4-2000", "wire22-w128", "lsmax1e-2", "line search, lr_max 1e-2"),
    ("x4-2000", "wire22-w128", "const1e-4", "constant filter rate 1e-4, no line search"),
    ("x4-2000", "wire22-w128", "init-identity", "filter initialised as identity matrices (relu(γ) ⊙ γ)"),
    ("x4-2000", "wire22-w128", "depth1", "one filter layer"),
    ("x4-2000", "wire22-w256", "residual", "residual filter (1 + f_a(γ)) ⊙ γ"),
    ("x4-2000", "wire22-w256", "lsmax1e-2", "line search, lr_max 1e-2"),
    ("x2-2000", "wire26-w128", "residual", "residual filter (1 + f_a(γ)) ⊙ γ"),
    ("x2-2000", "wire26-w128", "lsmax1e-2", "line search, lr_max 1e-2"),
    ("x4-8000", "wire22-w128", "residual", "residual filter, 8000 iterations"),
    ("x4-8000", "wire22-w128", "lsmax1e-2", "line search, lr_max 1e-2, 8000 iterations"),
    ("x2-8000", "wire26-w128", "residual", "residual filter, 8000 iterations"),
    ("x2-8000", "wire26-w128", "lsmax1e-2", "line search, lr_max 1e-2, 8000 iterations"),
)
PHASES = (("first 10%", 0.0, 0.1), ("middle 80%", 0.1, 0.9), ("last 10%", 0.9, 1.0))
DIFF_MARKS = (100, 200, 500, 1000, 2000, 4000, 8000, 20000)
REPORT_FILES = ("scale.md", "scale.json", "scale.png", "scale_variants.png")
CURVE_POINTS = 64
"""Log-spaced iterations at which scale.json keeps a run's best PSNR so far (besides :data:`DIFF_MARKS`)."""


@dataclass
class ScaleReport:
    """Tables and figure of the scale study from its finished runs."""

    out: Path = Path("outputs/study-scale")
    """The study's folder (one ``x<downsample>-<iterations>`` benchmark folder per part)."""
    dest: Path = Path("benchmarks/reproduction")
    """Where to write scale.md, scale.json and scale.png."""
    images: tuple[str, ...] = ("kodim05", "kodim01")
    """Images, in table order."""
    previous: Optional[Path] = None
    """An earlier scale.json (e.g. benchmarks/reproduction/scale.json) whose entries stand in for runs that are not
    under --out; the runs under --out replace the entries of the same setting and image."""
    overwrite: bool = False
    """Replace the report's files already in --dest (scale.md, scale.json and the figures)."""

    def main(self) -> None:
        """Write the report."""
        previous = read_previous(self.previous) if self.previous is not None else None
        check_output_files(self.dest, REPORT_FILES, self.overwrite, "--dest")
        summary = summarize(self.out, list(self.images))
        if previous is not None:
            summary = merge_previous(summary, previous)
        if not summary["runs_done"]:
            others = sorted({image for _, image, _ in load_runs(self.out)} - set(self.images))
            hint = f"; its runs are of {', '.join(others)}: name those with --images" if others else ""
            raise UsageError(f"no finished runs of {', '.join(self.images)} under {self.out}/*/runs{hint}; run the "
                             "scale study's protocols first")  # fmt: skip
        self.dest.mkdir(parents=True, exist_ok=True)
        answers = self.dest / "scale_answers.md"
        write_text(self.dest / "scale.md", markdown(summary, answers.read_text() if answers.exists() else None))
        write_text(self.dest / "scale.json", json.dumps(summary, indent=1) + "\n")
        plot(summary, self.dest / "scale.png")
        plot_long_variants(summary, self.dest / "scale_variants.png")
        print(f"{summary['runs_done']} runs -> {self.dest / 'scale.md'}, scale.json, scale.png")


def load_runs(out: Path) -> dict[tuple[str, str, str], dict]:
    """``{(folder, image, label): metrics}`` of every finished job under ``out``."""
    runs = {}
    for path in sorted(out.glob("*/runs/*/*/metrics.json")):
        folder, _, image, label = path.parent.relative_to(out).parts
        runs[(folder, image, label)] = json.loads(path.read_text())
    return runs


def best_so_far(history: list) -> np.ndarray:
    """The best PSNR up to each iteration (NaN entries skipped)."""
    values = np.array([np.nan if v is None else v for v in history], dtype=float)
    return np.fmax.accumulate(np.where(np.isnan(values), -np.inf, values))


def compact_curve(history: list) -> dict:
    """The best PSNR so far at about :data:`CURVE_POINTS` log-spaced iterations and at :data:`DIFF_MARKS` (None
    before the first finite value): enough to plot a run and to take differences at the marks."""
    best = best_so_far(history)
    n = len(best)
    spaced = np.geomspace(1, n, CURVE_POINTS).round().astype(int) if n else np.zeros(0, dtype=int)
    iters = sorted({int(t) for t in spaced} | {t for t in DIFF_MARKS if t <= n})
    return {"iters": iters, "psnr": [float(best[t - 1]) if np.isfinite(best[t - 1]) else None for t in iters]}


def curve_difference(curve: Optional[dict], reference: Optional[dict]) -> Optional[tuple[list[int], list[float]]]:
    """``curve - reference`` at the iterations both compact curves hold (None without both)."""
    if not curve or not reference:
        return None
    theirs = dict(zip(reference["iters"], reference["psnr"]))
    points = [(t, v - theirs[t]) for t, v in zip(curve["iters"], curve["psnr"])
              if v is not None and theirs.get(t) is not None]  # fmt: skip
    return ([t for t, _ in points], [d for _, d in points]) if points else None


def plot_difference(ax, diff: Optional[tuple[list[int], list[float]]], entry: dict, label: str) -> None:
    """A curve of differences; without one, the entry's differences at :data:`DIFF_MARKS` with dots (entries
    written before scale.json kept curves)."""
    if diff is None and entry.get("diff_at"):
        marks = sorted(int(t) for t in entry["diff_at"])
        ax.plot(marks, [entry["diff_at"][str(t)] for t in marks], lw=1.2, marker=".", label=label)
    elif diff is not None:
        ax.plot(*diff, lw=1.2, label=label)


def run_row(metrics: Optional[dict]) -> Optional[dict]:
    """The numbers of one run that the tables show."""
    if metrics is None:
        return None
    keys = ("image", "height", "width", "iters", "best_psnr", "psnr", "best_iter", "num_params", "num_filter_params",
            "num_values", "embedding_dim", "line_search", "seconds_per_iter", "machine")  # fmt: skip
    row = {key: metrics.get(key) for key in keys}
    row["hidden_features"] = metrics["config"]["network"]["hidden_features"]
    return row


def pair_summary(plain: Optional[dict], filtered: Optional[dict]) -> dict:
    """Sizes, parameter counts and the difference of best PSNR (filtered - plain) of a pair of runs."""
    p, f = run_row(plain), run_row(filtered)
    summary: dict = {"plain": p, "filtered": f, "diff": f["best_psnr"] - p["best_psnr"] if p and f else None}
    ref = p or f
    if ref is not None:
        inr = p["num_params"] if p else f["num_params"] - f["num_filter_params"]
        filter_params = f["num_filter_params"] if f else None
        summary.update(
            size=f"{ref['width']}x{ref['height']}",
            channels=ref["embedding_dim"],
            inr_params=inr,
            filter_params=filter_params,
            ratio=filter_params / inr if filter_params else None,
            inr_params_per_value=inr / ref["num_values"],
        )
    if plain is not None and filtered is not None:
        a, b = best_so_far(plain["psnr_history"]), best_so_far(filtered["psnr_history"])
        marks = [t for t in DIFF_MARKS if t <= min(len(a), len(b)) and np.isfinite(a[t - 1]) and np.isfinite(b[t - 1])]
        summary["diff_at"] = {str(t): float(b[t - 1] - a[t - 1]) for t in marks}  # none before both have a value
    return summary


def branch_counts(metrics: dict) -> Optional[dict]:
    """How often each branch of the rule set the filter's rate, per phase of training (None without records)."""
    history = metrics.get("line_search_history")
    if not history or not metrics.get("line_search"):
        return None
    search = stored_line_search_config(metrics["config"])
    bounds = {key: search[key] for key in ("lr_min", "lr_max", "eps", "c1")}
    recorded = metrics.get("filter_lr_history") or []
    steps = len(history["loss"])
    branches, armijo, crossings, mismatches = [], [], [], 0
    for i in range(steps):
        inputs = [math.nan if v is None else v for v in (history["loss"][i], history["d_filter"][i])]
        inputs += [math.nan if history["lr_d_inr"][i] is None else history["lr_d_inr"][i], 1.0]
        rate, branch, corrected = filter_step_branch(*inputs, **bounds)
        branches.append(branch)
        armijo.append(corrected)
        k = -inputs[1] + bounds["eps"]
        if all(math.isfinite(v) for v in inputs) and k != 0:
            crossings.append(abs((inputs[0] + inputs[2]) / k))
        if i < len(recorded) and recorded[i] is not None and not math.isclose(rate, recorded[i], rel_tol=1e-6):
            mismatches += 1
    phases = {}
    for name, start, end in PHASES:
        lo, hi = round(start * steps), round(end * steps)
        counts = Counter(branches[lo:hi])
        phases[name] = {"steps": hi - lo, **{b: counts.get(b, 0) for b in BRANCHES}, "armijo": sum(armijo[lo:hi])}
    return {
        "steps": steps,
        "lr_max": bounds["lr_max"],
        "phases": phases,
        "median_crossing": float(np.median(crossings)) if crossings else None,
        "mismatches_with_recorded_rate": mismatches,
    }


def read_previous(path: Path) -> dict:
    """The earlier report ``path`` (a scale.json); :class:`UsageError` when it is none."""
    if not path.is_file():
        raise UsageError(f"--previous {path} is not a file; give an earlier scale.json or leave it out")
    try:
        previous = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError):
        previous = None
    if not isinstance(previous, dict) or not {"grid", "long"} <= previous.keys():
        raise UsageError(f"--previous {path} is not a scale report (a scale.json written by rff-bench scale-report)")
    return previous


def summarize(out: Path, images: list[str]) -> dict:
    """Every table of the report as numbers."""
    runs = load_runs(out)

    def get(folder: str, image: str, label: str) -> Optional[dict]:
        return runs.get((folder, image, label))

    grid = []
    for factor, folder, tag, setting in GRID:
        per_image = {im: pair_summary(get(folder, im, f"mlp-{tag}"), get(folder, im, f"filt-{tag}")) for im in images}
        diffs = [v["diff"] for v in per_image.values() if v["diff"] is not None]
        grid.append({"factor": factor, "folder": folder, "tag": tag, "setting": setting, "images": per_image,
                     "mean_diff": float(np.mean(diffs)) if len(diffs) == len(images) else None})  # fmt: skip
    long = []
    for folder, tag, setting in LONG:
        for im in images:
            plain, filtered = get(folder, im, f"mlp-{tag}"), get(folder, im, f"filt-{tag}")
            if plain or filtered:
                curves = {
                    k: compact_curve(m["psnr_history"]) for k, m in (("plain", plain), ("filtered", filtered)) if m
                }
                long.append({"folder": folder, "tag": tag, "setting": setting, "image": im,
                             **pair_summary(plain, filtered), "curves": curves})  # fmt: skip
    variants = []
    for folder, base, suffix, setting in VARIANTS:
        for im in images:
            filtered = get(folder, im, f"filt-{base}-{suffix}")
            if filtered is None:
                continue
            plain, paper = get(folder, im, f"mlp-{base}"), get(folder, im, f"filt-{base}")
            curves = {"variant": compact_curve(filtered["psnr_history"])}
            variants.append({"folder": folder, "base": base, "setting": setting, "image": im,
                             "filtered": run_row(filtered),
                             "vs_plain": filtered["best_psnr"] - plain["best_psnr"] if plain else None,
                             "vs_paper": filtered["best_psnr"] - paper["best_psnr"] if paper else None,
                             "diff_at": pair_summary(plain, filtered).get("diff_at"), "curves": curves})  # fmt: skip
    branches = []
    for (folder, image, label), metrics in sorted(runs.items()):
        counts = branch_counts(metrics)
        if counts is not None:
            branches.append({"folder": folder, "image": image, "label": label, **counts})
    machines = sorted({m["machine"] for m in runs.values() if m.get("machine")})
    return with_counts(images, machines, {"grid": grid, "long": long, "variants": variants, "branches": branches})


def with_counts(images: list[str], machines: list[str], tables: dict) -> dict:
    """The summary: its images, the number of runs its tables show, the machines, and the tables."""
    return {"images": images, "runs_done": len(run_keys(tables)), "machines": machines, **tables}


def run_keys(tables: dict) -> set[tuple[str, str, str]]:
    """``(folder, image, run)`` of every run the tables show."""
    keys = set()
    for row in tables["grid"]:
        for image, v in row["images"].items():
            keys |= {(row["folder"], image, f"{kind}-{row['tag']}") for kind in ("plain", "filtered") if v[kind]}
    for e in tables["long"]:
        keys |= {(e["folder"], e["image"], f"{kind}-{e['tag']}") for kind in ("plain", "filtered") if e[kind]}
    keys |= {(e["folder"], e["image"], f"{e['base']} {e['setting']}") for e in tables["variants"]}
    return keys


def merge_previous(fresh: dict, previous: dict) -> dict:
    """``fresh`` with ``previous``'s entries where ``fresh`` has no run of the same setting and image, in the
    order of :data:`GRID`, :data:`LONG` and :data:`VARIANTS`. A fresh variant whose pair exists only in
    ``previous`` gets its differences of best PSNR from the pair's entry there."""
    images = fresh["images"]
    old_grid = {(row["folder"], row["tag"]): row for row in previous.get("grid", [])}
    for row in fresh["grid"]:
        old = old_grid.get((row["folder"], row["tag"]), {}).get("images", {})
        for image in images:
            v = row["images"][image]
            if not (v["plain"] or v["filtered"]) and image in old:
                row["images"][image] = old[image]
        diffs = [v["diff"] for v in row["images"].values() if v["diff"] is not None]
        row["mean_diff"] = float(np.mean(diffs)) if len(diffs) == len(images) else None

    def union(key: str, fields: tuple[str, ...], order: list[tuple]) -> list[dict]:
        entries = {tuple(e[f] for f in fields): e for e in previous.get(key, [])}
        entries = {k: e for k, e in entries.items() if k[:-1] in order and k[-1] in images}
        entries.update({tuple(e[f] for f in fields): e for e in fresh[key]})
        return sorted(entries.values(), key=lambda e: (order.index(tuple(e[f] for f in fields[:-1])),
                                                       images.index(e["image"])))  # fmt: skip

    long = union("long", ("folder", "tag", "image"), [(folder, tag) for folder, tag, _ in LONG])
    variants = union("variants", ("folder", "base", "setting", "image"), [(f, b, s) for f, b, _, s in VARIANTS])
    pairs = {(e["folder"], e["tag"], e["image"]): e for e in long}
    pairs.update({(row["folder"], row["tag"], im): v for row in fresh["grid"] for im, v in row["images"].items()})
    for e in variants:
        pair = pairs.get((e["folder"], e["base"], e["image"]), {})
        for name, kind in (("vs_plain", "plain"), ("vs_paper", "filtered")):
            if e[name] is None and pair.get(kind):
                e[name] = e["filtered"]["best_psnr"] - pair[kind]["best_psnr"]
        if not e.get("diff_at"):
            diff = curve_difference(e.get("curves", {}).get("variant"), pair.get("curves", {}).get("plain"))
            e["diff_at"] = diff and {str(t): d for t, d in zip(*diff) if t in DIFF_MARKS}
    branches = {(b["folder"], b["image"], b["label"]): b for b in previous.get("branches", []) if b["image"] in images}
    branches.update({(b["folder"], b["image"], b["label"]): b for b in fresh["branches"]})
    machines = sorted(set(fresh["machines"]) | set(previous.get("machines", [])))
    tables = {"grid": fresh["grid"], "long": long, "variants": variants,
              "branches": [branches[key] for key in sorted(branches)]}  # fmt: skip
    return with_counts(images, machines, tables)


def fmt(value: Optional[float], digits: int = 2, sign: bool = False) -> str:
    if value is None or not math.isfinite(value):
        return "–"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def markdown(summary: dict, answers: Optional[str]) -> str:
    """scale.md."""
    images = summary["images"]
    lines = [
        "# Scale study: where does the filter's gain go as the image and the network grow?",
        "",
        "Kodak images area-downsampled x4 (192x128) or x2 (384x256); a ReLU INR of 3 hidden layers of 32 to 256; "
        "WIRE's PE (floor(log2(side/4)) bands and the input: 22 channels at x4, 26 at x2) unless a row sets the "
        "bands or uses the paper's log-linear PE (scale 32, 64 channels); Adam 1e-3 decayed by 0.1^(t/T), full "
        "batch (x2 too: 98,304 pixels per step, so no rate scaling), seed 0; the filter: 3 bias-free layers, "
        "PyTorch's default initialisation, its rate set every step by the line search (lr_max 1e-3). **Best "
        "PSNR** over the iterations (dB) of the plain MLP (`mlp-pe`) and the filtered one (`filtered-pe`); "
        "Δ = filtered − plain. Runs: `rff-bench image --protocol benchmarks/reproduction/protocols.toml:scale-*`; "
        "report: `rff-bench scale-report --overwrite` (with `--previous benchmarks/reproduction/scale.json` to keep "
        "the runs no longer on disk).",
        "",
        f"Machine: {'; '.join(summary['machines']) or 'n/a'}; one torch thread per job on a core of its own (at "
        "most two jobs side by side). Finished runs: "
        f"{summary['runs_done']}. Parameters: INR = the plain network; filter = 3·D² for D embedding channels; "
        "per value = per fitted pixel value (pixels x 3); ratio = filter / INR.",
    ]
    if answers:
        lines += ["", answers.strip()]
    head = "| factor | setting | size | D | INR params | filter params | ratio | INR params / value |"
    sep = "|---|---|---|---:|---:|---:|---:|---:|"
    for im in images:
        head += f" {im} plain | {im} filtered | {im} Δ |"
        sep += "---:|---:|---:|"
    lines += ["", "## 1. One factor at a time (2000 iterations)", "", head + " mean Δ |", sep + "---:|"]
    for row in summary["grid"]:
        ref = next((v for v in row["images"].values() if v.get("size")), None)
        cells = [row["factor"], row["setting"]]
        if ref:
            counts = [format_count(ref["inr_params"]), format_count(ref["filter_params"])]
            cells += [ref["size"], str(ref["channels"]), *counts, fmt(ref["ratio"], 3),
                      fmt(ref["inr_params_per_value"], 3)]  # fmt: skip
        else:
            cells += ["–"] * 6
        for im in images:
            v = row["images"][im]
            p, f = v["plain"], v["filtered"]
            cells += [fmt(p and p["best_psnr"]), fmt(f and f["best_psnr"]), fmt(v["diff"], sign=True)]
        lines.append("| " + " | ".join(cells + [fmt(row["mean_diff"], sign=True)]) + " |")

    marks = [str(t) for t in DIFF_MARKS]
    lines += ["", "## 2. Δ of the best PSNR so far against iterations", "",
              "| setting | image | " + " | ".join(f"Δ at {t}" for t in marks) + " |",
              "|---|---|" + "---:|" * len(marks)]  # fmt: skip
    variants_over_time = [
        {"setting": f"{e['folder'].split('-')[0]} {e['base']}, {e['setting']}", "images": {e["image"]: e}}
        for e in summary["variants"]
        if e["folder"] in LONG_FOLDERS
    ]
    for row in [*({"setting": e["setting"], "images": {e["image"]: e}} for e in summary["long"]), *variants_over_time,
                *summary["grid"]]:  # fmt: skip
        for im, v in row["images"].items():
            if v.get("diff_at"):
                cells = [fmt(v["diff_at"].get(t), sign=True) for t in marks]
                lines.append(f"| {row['setting']} | {im} | " + " | ".join(cells) + " |")

    lines += ["", "## 3. Variants of the filter where it trails (filtered runs; 2000 iterations unless said)", "",
              "Δ plain: against the plain MLP of the base setting; Δ paper: against the filtered run with the "
              "paper's settings.", "",
              "| image | base | variant | best PSNR | Δ plain | Δ paper |", "|---|---|---|---:|---:|---:|"]  # fmt: skip
    for e in summary["variants"]:
        lines.append(f"| {e['image']} | {e['folder'].split('-')[0]} {e['base']} | {e['setting']} | "
                     f"{fmt(e['filtered']['best_psnr'])} | {fmt(e['vs_plain'], sign=True)} | "
                     f"{fmt(e['vs_paper'], sign=True)} |")  # fmt: skip

    lines += ["", "## 4. Which branch of the rule set the filter's rate, per phase of training", "",
              "Each filtered run's recorded inputs of every iteration (loss, d_filter, lr·d_inr) put through "
              "`filter_step_branch` (the rule itself): the share of each phase's steps per branch (branches "
              "under 0.5% left out) and, after '+', the share where the sufficient-decrease check then replaced the "
              "rate. Median crossing: abs(b/k), the rate the rule asks for before clipping. Mismatches: steps whose "
              "recomputed rate differs from the recorded one.", "",
              "| run | image | " + " | ".join(name for name, _, _ in PHASES) + " | median crossing | lr_max | "
              "mismatches |", "|---|---|" + "---|" * len(PHASES) + "---:|---:|---:|"]  # fmt: skip
    for r in summary["branches"]:
        cells = []
        for phase in r["phases"].values():
            n = max(phase["steps"], 1)
            shares = [f"{b} {100 * phase[b] / n:.0f}%" for b in BRANCHES if phase[b] / n >= 0.005]
            cells.append(", ".join(shares) + (f" + Armijo {100 * phase['armijo'] / n:.1f}%" if phase["armijo"] else ""))
        cells += [fmt(r["median_crossing"], 3), f"{r['lr_max']:g}", str(r["mismatches_with_recorded_rate"])]
        lines.append(f"| {r['folder']}/{r['label']} | {r['image']} | " + " | ".join(cells) + " |")
    lines += ["", "![Δ against the INR's parameters per value and against iterations](scale.png)"]
    if any(e["folder"] in LONG_FOLDERS for e in summary["variants"]):
        lines += ["", "![the variants of question 3 against iterations](scale_variants.png)"]
    return "\n".join(lines) + "\n"


def plot(summary: dict, path: Path) -> None:
    """Δ against the INR's parameters per value (2000 iterations) and against iterations (long runs)."""
    fig, axes = new_figure(1, 2, figsize=(12, 4.6))
    markers = {"kodim05": "o", "kodim01": "s"}
    colours = {"x4": "tab:blue", "x2": "tab:red"}
    ax = axes[0]
    for row in summary["grid"]:
        scale = row["folder"].split("-")[0]
        for im, v in row["images"].items():
            if v["diff"] is None:
                continue
            hollow = row["tag"].startswith("ll")
            ax.scatter(v["inr_params_per_value"], v["diff"], marker=markers.get(im, "^"), s=40,
                       facecolors="none" if hollow else colours[scale], edgecolors=colours[scale])  # fmt: skip
            ax.annotate(row["tag"], (v["inr_params_per_value"], v["diff"]), fontsize=6, xytext=(3, 2),
                        textcoords="offset points")  # fmt: skip
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("INR parameters per pixel value")
    ax.set_ylabel("Δ best PSNR, filtered − plain (dB)")
    ax.set_title("2000 iterations (blue x4, red x2; hollow: log-linear PE; circle kodim05, square kodim01)",
                 fontsize=8)  # fmt: skip
    ax.grid(alpha=0.3)
    ax = axes[1]
    for e in summary["long"]:
        curves = e.get("curves", {})
        plot_difference(
            ax, curve_difference(curves.get("filtered"), curves.get("plain")), e, f"{e['setting']}, {e['image']}"
        )
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xscale("log")
    ax.set_ylim(-4, 4)
    ax.set_xlabel("iteration")
    ax.set_ylabel("Δ best PSNR so far (dB)")
    ax.grid(alpha=0.3)
    if summary["long"]:
        ax.legend(fontsize=7, loc="lower right")  # "best" searches every point of the 20k curves
    save_figure(fig, path, dpi=120)


def plot_long_variants(summary: dict, path: Path) -> None:
    """Δ of the best PSNR so far against the plain MLP, one panel per long run's setting and image, for the
    paper's filter and each variant (nothing when no variant ran long). Entries written before scale.json kept
    curves are drawn through their marks."""
    pairs = {(e["folder"], e["tag"], e["image"]): e for e in summary["long"]}
    panels: dict[tuple[str, str, str], list[dict]] = {}
    for e in summary["variants"]:
        if (e["folder"], e["base"], e["image"]) in pairs:
            panels.setdefault((e["folder"], e["base"], e["image"]), []).append(e)
    if not panels:
        return
    fig, axes = new_figure(1, len(panels), figsize=(6 * len(panels), 4.4), squeeze=False)
    for ax, (key, mine) in zip(axes[0], panels.items()):
        pair = pairs[key]
        plain = pair.get("curves", {}).get("plain")
        lines = [("paper's filter", pair, curve_difference(pair.get("curves", {}).get("filtered"), plain))]
        lines += [(e["setting"], e, curve_difference(e.get("curves", {}).get("variant"), plain)) for e in mine]
        for label, e, diff in lines:
            plot_difference(ax, diff, e, label)
        ax.axhline(0, color="k", lw=0.8)
        ax.set_xscale("log")
        ax.set_ylim(-3, 3)
        ax.set_xlabel("iteration")
        ax.set_ylabel("Δ best PSNR so far, against the plain MLP (dB)")
        ax.set_title(f"{key[2]}, {key[0].split('-')[0]} {key[1]}", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower left")
    save_figure(fig, path, dpi=120)
