"""The reproduction report's arithmetic: rows, the share of steps at the bound, and the margins it publishes."""

import json

import pytest

from rff_field.bench.reproduction import load_runs, margin_rows, markdown_table, row


def fit_metrics(label: str, image: str, best: float, final: float, rates=None, config=None) -> dict:
    return {"label": label, "image": image, "iters": 10, "best_psnr": best, "psnr": final, "variant": label,
            "num_params": 100, "num_filter_params": 20, "params_per_value": 0.5, "line_search": rates is not None,
            "filter_lr_history": rates, "config": config or {}}  # fmt: skip


NESTED = {"line_search": {"enabled": True, "lr_max": 1e-2, "lr_min": 0.0, "eps": 1e-6, "c1": 1e-3, "rule": "paper",
                          "direction": "adam"}}  # fmt: skip
LEGACY = {"line_search": True, "lr_max": 1e-2, "ls_eps": 1e-6}  # written before the options were nested


@pytest.mark.parametrize("config", [NESTED, LEGACY], ids=["nested", "legacy"])
def test_the_share_at_the_bound_uses_the_run_own_bound(config):
    runs = {("ls", "a", 10): fit_metrics("ls", "a", 30.0, 29.0, [2e-3, 1e-2, 1e-2, 5e-3], config)}
    assert row(runs, "ls", 10, ["a"])["at_lr_max"] == 0.5  # 2e-3 lies above the default 1e-3, not at 1e-2


def test_rows_average_the_images_that_ran_and_the_table_says_how_many():
    runs = {("f", "a", 10): fit_metrics("f", "a", 30.0, 29.0), ("f", "b", 10): fit_metrics("f", "b", 32.0, 31.0)}
    found = row(runs, "f", 10, ["a", "b", "c"])
    assert (found["images"], found["best_psnr"], found["psnr"], found["at_lr_max"]) == (2, 31.0, 30.0, None)
    line = markdown_table([found], ["a", "b", "c"])[-1]
    assert line.startswith("| f (2 images) |") and "| 31.00 | 30.00 | – | 30.00 / 29.00 | 32.00 / 31.00 | – |" in line


def test_margins_count_an_image_at_the_target_as_a_win(tmp_path):
    bests = {("filt-pe64", "a"): 33.0, ("eqp-pe64", "a"): 30.0, ("filt-pe64", "b"): 30.0, ("eqp-pe64", "b"): 31.0}
    for (label, image), best in bests.items():
        folder = tmp_path / label / image
        folder.mkdir(parents=True)
        (folder / "metrics.json").write_text(json.dumps(fit_metrics(label, image, best, best)))
    runs = load_runs([tmp_path])
    found = next(r for r in margin_rows(runs, ["a", "b"], {"iters": 10, "long_iters": 20})
                 if r["equal_params"] == "eqp-pe64")  # fmt: skip
    assert found["per_image"] == {"a": 3.0, "b": -1.0} and found["mean"] == 1.0 and found["images_at_target"] == 1
