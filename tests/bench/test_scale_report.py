"""rff-bench scale-report on fabricated runs: pairs, differences, the rule's branches, the files it writes."""

import json

import pytest

from rff_field.bench.scale import ScaleReport
from rff_field.core.errors import UsageError
from rff_field.core.step_rule import filter_step_size

ITERS = 100


def write_run(root, folder, image, label, best, line_search=None):
    psnr = [best - 1.0] * (ITERS - 1) + [best]  # the best at the last iteration
    metrics = {
        "image": image, "height": 128, "width": 192, "iters": ITERS, "best_psnr": best, "psnr": best,
        "best_iter": ITERS - 1, "num_params": 10_000 + (1_452 if line_search else 0),
        "num_filter_params": 1_452 if line_search else 0, "num_values": 192 * 128 * 3, "embedding_dim": 22,
        "line_search": line_search is not None, "seconds_per_iter": 0.01, "machine": "test CPU",
        "config": {"network": {"hidden_features": 64},
                   "line_search": {"lr_min": 0.0, "lr_max": 1e-3, "eps": 1e-6, "c1": 1e-3}},
        "psnr_history": psnr,
    }  # fmt: skip
    if line_search is not None:
        metrics["line_search_history"] = line_search
        metrics["filter_lr_history"] = [
            filter_step_size(*row, 1.0)
            for row in zip(line_search["loss"], line_search["d_filter"], line_search["lr_d_inr"])
        ]
    path = root / folder / "runs" / image / label
    path.mkdir(parents=True)
    (path / "metrics.json").write_text(json.dumps(metrics))


def test_report_pairs_runs_and_counts_the_rules_branches(tmp_path):
    # first half of the steps: the filter's direction goes uphill (d_filter > 0); then a descent whose zero
    # crossing b/k = 1 lies far above lr_max
    half = ITERS // 2
    history = {"loss": [1.0] * ITERS, "d_filter": [1.0] * half + [-1.0] * half, "lr_d_inr": [0.0] * ITERS}
    write_run(tmp_path / "out", "x4-2000", "kodim05", "mlp-wire22-w64", 22.0)
    write_run(tmp_path / "out", "x4-2000", "kodim05", "filt-wire22-w64", 23.5, history)
    write_run(tmp_path / "out", "x4-2000", "kodim05", "filt-wire22-w128-residual", 24.0, history)  # its base: missing
    ScaleReport(out=tmp_path / "out", dest=tmp_path / "dest", images=("kodim05",)).main()

    summary = json.loads((tmp_path / "dest" / "scale.json").read_text())
    base = next(row for row in summary["grid"] if row["tag"] == "wire22-w64")
    assert base["images"]["kodim05"]["diff"] == pytest.approx(1.5)
    assert base["images"]["kodim05"]["ratio"] == pytest.approx(1_452 / 10_000)
    assert base["images"]["kodim05"]["diff_at"]["100"] == pytest.approx(1.5)
    (variant,) = summary["variants"]
    assert summary["runs_done"] == 3 and variant["filtered"]["best_psnr"] == 24.0 and variant["vs_plain"] is None
    (branches,) = [b for b in summary["branches"] if b["label"] == "filt-wire22-w64"]
    assert branches["mismatches_with_recorded_rate"] == 0
    assert branches["phases"]["first 10%"]["uphill"] == 10
    assert branches["phases"]["last 10%"]["crossing_above_max"] == 10
    assert (
        branches["phases"]["middle 80%"]["uphill"] == 40
        and branches["phases"]["middle 80%"]["crossing_above_max"] == 40
    )
    text = (tmp_path / "dest" / "scale.md").read_text()
    assert "| 22.00 | 23.50 | +1.50 |" in text and (tmp_path / "dest" / "scale.png").stat().st_size > 0
    assert not (tmp_path / "dest" / "scale_variants.png").exists()  # no variant ran long


def test_a_variant_of_a_long_run_gets_its_curve_and_figure(tmp_path):
    for label, best in (("mlp-wire22-w128", 28.0), ("filt-wire22-w128", 27.0), ("filt-wire22-w128-residual", 28.5)):
        write_run(tmp_path / "out", "x4-8000", "kodim01", label, best)
    for label, best in (("mlp-wire26-w128", 25.0), ("filt-wire26-w128-residual", 25.25)):  # x2: the same image
        write_run(tmp_path / "out", "x2-8000", "kodim01", label, best)
    ScaleReport(out=tmp_path / "out", dest=tmp_path / "dest", images=("kodim01",)).main()
    variant, x2_variant = json.loads((tmp_path / "dest" / "scale.json").read_text())["variants"]
    assert variant["diff_at"]["100"] == pytest.approx(0.5)
    curve = variant["curves"]["variant"]  # the best so far at log-spaced iterations and the marks, not every one
    assert curve["iters"][0] == 1 and curve["iters"][-1] == ITERS and len(curve["iters"]) < ITERS
    assert curve["psnr"][0] == 27.5 and curve["psnr"][-1] == 28.5
    assert x2_variant["vs_plain"] == pytest.approx(0.25) and x2_variant["vs_paper"] is None  # against its own scale
    text = (tmp_path / "dest" / "scale.md").read_text()
    assert "| x4 wire22-w128, residual filter, 8000 iterations | kodim01 | +0.50 |" in text
    assert (tmp_path / "dest" / "scale_variants.png").stat().st_size > 0 and "scale_variants.png" in text


def test_previous_report_stands_in_for_runs_no_longer_on_disk(tmp_path):
    for label, best in (("mlp-wire26-w128", 25.0), ("filt-wire26-w128", 24.75)):
        write_run(tmp_path / "old", "x2-8000", "kodim05", label, best)
    write_run(tmp_path / "old", "x4-2000", "kodim05", "mlp-wire22-w64", 22.0)
    write_run(tmp_path / "old", "x4-2000", "kodim05", "filt-wire22-w64", 23.5)
    ScaleReport(out=tmp_path / "old", dest=tmp_path / "first", images=("kodim05",)).main()
    # later, on another disk: one variant of the long pair, and the base pair rerun with a new result
    write_run(tmp_path / "new", "x2-8000", "kodim05", "filt-wire26-w128-residual", 25.5)
    write_run(tmp_path / "new", "x4-2000", "kodim05", "mlp-wire22-w64", 22.5)
    previous = tmp_path / "first" / "scale.json"
    ScaleReport(out=tmp_path / "new", dest=tmp_path / "dest", images=("kodim05",), previous=previous).main()

    summary = json.loads((tmp_path / "dest" / "scale.json").read_text())
    assert summary["runs_done"] == 4  # the two of the long pair, the variant, the fresh plain run of the base
    base = next(row for row in summary["grid"] if row["tag"] == "wire22-w64")["images"]["kodim05"]
    assert base["plain"]["best_psnr"] == 22.5 and base["filtered"] is None  # a fresh run replaces the whole cell
    (long,) = summary["long"]
    assert long["diff"] == pytest.approx(-0.25)
    (variant,) = summary["variants"]
    assert variant["vs_plain"] == pytest.approx(0.5) and variant["vs_paper"] == pytest.approx(0.75)
    assert variant["diff_at"]["100"] == pytest.approx(0.5)  # from the pair's curve kept in the earlier report
    text = (tmp_path / "dest" / "scale.md").read_text()
    assert (
        "Finished runs: 4." in text and "| x2 wire26-w128, residual filter, 8000 iterations | kodim05 | +0.50 |" in text
    )
    assert (tmp_path / "dest" / "scale_variants.png").stat().st_size > 0


def test_previous_must_be_a_file(tmp_path):
    write_run(tmp_path / "out", "x4-2000", "kodim05", "mlp-wire22-w64", 22.0)
    with pytest.raises(UsageError, match="--previous .* is not a file"):
        ScaleReport(
            out=tmp_path / "out", dest=tmp_path / "d", images=("kodim05",), previous=tmp_path / "no.json"
        ).main()
    assert not (tmp_path / "d").exists()


def test_differences_start_where_both_runs_have_a_value():
    from rff_field.bench.scale import curve_difference, pair_summary

    def run(history):
        return {"image": "a", "height": 8, "width": 8, "iters": len(history), "psnr": history[-1],
                "best_psnr": max(h for h in history if h), "num_params": 100, "num_filter_params": 0,
                "num_values": 192, "embedding_dim": 10, "config": {"network": {"hidden_features": 8}},
                "psnr_history": history}  # fmt: skip

    plain = run([None] * 150 + [10.0] * 50)  # no finite value before iteration 151
    filtered = run([12.0] * 200)
    summary = pair_summary(plain, {**filtered, "num_filter_params": 20})
    assert summary["diff_at"] == {"200": 2.0} and json.dumps(summary, allow_nan=False)
    curves = {"iters": [1, 2], "psnr": [1.0, 0.5]}, {"iters": [1, 2], "psnr": [0.0, 0.5]}  # a reference of 0 dB
    assert curve_difference(*curves) == ([1, 2], [1.0, 0.0])
