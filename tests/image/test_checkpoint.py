"""A fit stopped at its time budget and resumed from its checkpoint takes the very steps of an uninterrupted fit.

Both runs execute the same operations on the same values in one process, so their curves and reconstructions are
equal to the last bit on any CPU; a checkpoint that missed any part of the state (Adam's moments, the mini-batch
order, the schedule, the filter's rate) would change them.
"""

from __future__ import annotations

import json
import signal
from dataclasses import replace
from types import SimpleNamespace

import imageio.v3 as iio
import numpy as np
import pytest
import torch

from rff_field.bench.image import (
    _check_out,
    build_jobs,
    checkpoint_path,
    job_batch_key,
    job_config,
    run_batch,
    run_bench,
)
from rff_field.bench.jobs import JobOptions
from rff_field.common.checkpoint import CHECKPOINT_FILE, checkpoint_iteration, load_checkpoint
from rff_field.common.stopping import FitInterrupted
from rff_field.core.errors import UsageError
from rff_field.core.optim import LineSearchConfig
from rff_field.image import batched
from rff_field.image import fit as image_fit
from rff_field.image.batched import ImageJob, fit_images
from rff_field.image.checkpoint import FitCheckpoint
from rff_field.image.fit import PixelPredictor, fit_image, prepare_image, run_fit
from tests.bench.test_image import image_folder, tiny_bench  # noqa: F401 (a fixture)
from tests.image.test_batched import config, image
from tests.interrupts import press_ctrl_c_on_call

CASES = {
    "filtered-pe, line search, mini-batches": config("filtered-pe", iters=15, batch_size=50,
                                                     line_search=LineSearchConfig(lr_max=1.0)),
    "filtered-pe, scheduled filter rate": config("filtered-pe", iters=15, filter_schedule=True,
                                                 line_search=LineSearchConfig(enabled=False)),
    "mlp-rff": config("mlp-rff", iters=15),
    "sape": config("sape", iters=15),  # reveals one of its 7 frequency blocks per iteration, 5 before the stop
}  # fmt: skip


def assert_same_fit(resumed, uninterrupted) -> None:
    assert resumed.metrics["psnr_history"] == uninterrupted.metrics["psnr_history"]
    assert torch.equal(resumed.reconstruction, uninterrupted.reconstruction)
    for key in ("filter_lr_history", "line_search_history", "sape_revealed_fraction", "sape_active_fraction"):
        assert resumed.metrics.get(key) == uninterrupted.metrics.get(key), key


def test_a_stopped_fit_resumes_where_it_stopped(tmp_path):
    for name, fit in CASES.items():
        path = tmp_path / name / "checkpoint.pt"
        stopped = fit_image(image(0), fit, progress=False, stop_at=0.0, checkpoint=path)  # stops at iteration 5
        assert stopped.metrics["iters"] == 5 and path.is_file(), name
        again = fit_image(image(0), fit, progress=False, stop_at=0.0, checkpoint=path)  # 5 more, then stops
        assert again.metrics["iters"] == 10 and again.metrics["resumed_at"] == [5], name
        resumed = fit_image(image(0), fit, progress=False, checkpoint=path)
        assert resumed.metrics["iters"] == 15 and resumed.metrics["resumed_at"] == [5, 10], name
        assert_same_fit(resumed, fit_image(image(0), fit, progress=False))


def test_a_stopped_batch_resumes_where_it_stopped(tmp_path):
    fit = CASES["filtered-pe, line search, mini-batches"]
    jobs = [ImageJob(image(k), fit, f"img{k}") for k in range(2)]
    paths = [tmp_path / f"{k}.pt" for k in range(2)]
    fit_images(jobs, stop_at=0.0, checkpoints=paths)
    for resumed, uninterrupted in zip(fit_images(jobs, checkpoints=paths), fit_images(jobs)):
        assert resumed.metrics["resumed_at"] == [5]
        assert_same_fit(resumed, uninterrupted)


def test_checkpoints_of_different_iterations_do_not_share_a_batch(tmp_path):
    fit = CASES["mlp-rff"]
    paths = [tmp_path / f"{k}.pt" for k in range(2)]
    for k, stops in enumerate((2, 1)):  # to iterations 10 and 5
        for _ in range(stops):
            fit_image(image(k), fit, name=f"img{k}", progress=False, stop_at=0.0, checkpoint=paths[k])
    with pytest.raises(ValueError, match=r"different iterations \(\[5, 10\]\)"):
        fit_images([ImageJob(image(k), fit, f"img{k}") for k in range(2)], checkpoints=paths)


def test_the_time_per_iteration_counts_every_run_of_a_resumed_fit(tmp_path, monkeypatch):
    clock = [0.0]  # one second a training step: the fit's only forward pass of an iteration at full batch
    forward = PixelPredictor.__call__

    def one_second(self, *args, **kwargs):
        clock[0] += 1.0
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(PixelPredictor, "__call__", one_second)
    monkeypatch.setattr(image_fit, "time", SimpleNamespace(perf_counter=lambda: clock[0]))
    fit, path = CASES["mlp-rff"], tmp_path / "checkpoint.pt"
    runs = [fit_image(image(0), fit, progress=False, stop_at=0.0, checkpoint=path) for _ in range(2)]
    runs.append(fit_image(image(0), fit, progress=False, checkpoint=path))
    assert [run.metrics["iters"] for run in runs] == [5, 10, 15]
    assert [run.metrics["seconds_per_iter"] for run in runs] == [1.0, 1.0, 1.0]


def test_a_fit_that_reports_otherwise_resumes_the_checkpoint(tmp_path):
    fit, path = CASES["mlp-rff"], tmp_path / "checkpoint.pt"
    fit_image(image(0), fit, progress=False, stop_at=0.0, checkpoint=path)  # stops at iteration 5
    reporting = replace(fit, log_every=3, dump_embedding=2, error_vmax=0.5)
    resumed = fit_image(image(0), reporting, progress=False, checkpoint=path)
    assert resumed.metrics["resumed_at"] == [5]
    assert_same_fit(resumed, fit_image(image(0), fit, progress=False))


def test_a_checkpoint_of_other_settings_or_another_image_is_not_resumed(tmp_path):
    fit = CASES["mlp-rff"]
    path = tmp_path / "checkpoint.pt"
    fit_image(image(0), fit, progress=False, stop_at=0.0, checkpoint=path)
    notices = []
    for other_image, other_fit in ((image(0), config("mlp-rff", iters=16)), (image(0, size=13), fit)):
        result = fit_image(other_image, other_fit, progress=False, notify=notices.append, checkpoint=tmp_path / "c")
        assert "resumed_at" not in result.metrics
    assert load_checkpoint(path, FitCheckpoint, "other settings", notices.append) is None
    # the first fit left its last step's checkpoint in c (its caller removes it once the outputs are written)
    other = "was written by a fit with other settings; this fit starts from the first step"
    assert notices == [f"{tmp_path / 'c'} {other}", f"{path} {other}"]
    path.write_bytes(b"not a checkpoint")
    assert fit_image(image(0), fit, progress=False, notify=notices.append, checkpoint=path).metrics["iters"] == 15
    assert "cannot be read" in notices[-1]


def test_the_bench_resumes_a_stopped_job_and_removes_its_checkpoint(image_folder, tmp_path, capsys):  # noqa: F811
    bench = tiny_bench(image_folder, tmp_path / "out", variants=("mlp-pe", "filtered-pe"), sweep_names=(),
                       long_names=())  # fmt: skip
    bench.fit.iters, bench.fit.log_every = 10, 4
    jobs = build_jobs(bench)
    _check_out(bench, jobs)  # the folder becomes this benchmark's, as run_bench makes it before any job
    first = jobs[0]  # mlp-pe on one.png: stopped as a budget would stop it
    loaded = prepare_image(first.source, bench.downsample)
    fit = job_config(bench, first, 3, max(loaded.pixels.shape[:2]))
    key = job_batch_key(bench, first)
    fit_images([ImageJob(loaded.pixels, fit, loaded.name)], stop_at=0.0, checkpoints=[checkpoint_path(bench, first)])
    assert job_batch_key(bench, first) != key  # it no longer shares a batch with jobs starting at iteration 0
    capsys.readouterr()
    run_bench(replace(bench, jobs=JobOptions(list_jobs=True)))
    assert capsys.readouterr().out.splitlines()[:2] == [
        "0\tcheckpoint at 4\t10\truns/one/mlp-pe",
        "1\tpending\t10\truns/two/mlp-pe",
    ]
    run_bench(bench, notify=lambda message: None)
    metrics = json.loads((bench.out / first.folder / "metrics.json").read_text())
    assert metrics["resumed_at"] == [4] and metrics["iters"] == 10
    assert not checkpoint_path(bench, first).exists()


def test_either_engine_resumes_the_checkpoint_the_other_left(image_folder, tmp_path):  # noqa: F811
    bench = tiny_bench(image_folder, tmp_path / "out", variants=("mlp-pe",), sweep_names=(), long_names=())
    bench.fit.iters, bench.fit.log_every = 10, 4
    jobs = build_jobs(bench)
    _check_out(bench, jobs)
    first = jobs[0]
    loaded = prepare_image(first.source, bench.downsample)
    fit = job_config(bench, first, 3, max(loaded.pixels.shape[:2]))
    fit_images([ImageJob(loaded.pixels, fit, loaded.name)], stop_at=0.0, checkpoints=[checkpoint_path(bench, first)])
    sequential = replace(bench, engine="sequential", jobs=JobOptions(job=first.index))
    run_bench(sequential, notify=lambda message: None)
    metrics = json.loads((bench.out / first.folder / "metrics.json").read_text())
    assert metrics["resumed_at"] == [4] and metrics["iters"] == 10
    assert not checkpoint_path(bench, first).exists() and not (bench.out / first.folder / CHECKPOINT_FILE).exists()
    assert not (bench.out / "partial").exists()  # no empty folders left behind


def test_the_job_list_shows_the_checkpoint_of_a_sequential_job(image_folder, tmp_path, capsys):  # noqa: F811
    bench = tiny_bench(image_folder, tmp_path / "out", variants=("mlp-pe",), sweep_names=(), long_names=(),
                       engine="sequential")  # fmt: skip
    bench.fit.iters, bench.fit.log_every = 10, 4
    jobs = build_jobs(bench)
    _check_out(bench, jobs)
    loaded = prepare_image(jobs[0].source, bench.downsample)
    fit = job_config(bench, jobs[0], 3, max(loaded.pixels.shape[:2]))
    checkpoint = bench.out / jobs[0].folder / CHECKPOINT_FILE  # where rff-image fit keeps it
    checkpoint.parent.mkdir(parents=True)
    fit_image(loaded.pixels, fit, loaded.name, progress=False, stop_at=0.0, checkpoint=checkpoint)
    capsys.readouterr()
    run_bench(replace(bench, jobs=JobOptions(list_jobs=True)))
    assert capsys.readouterr().out.splitlines()[0] == "0\tcheckpoint at 4\t10\truns/one/mlp-pe"


def test_the_bench_stops_and_resumes_a_sape_job(image_folder, tmp_path):  # noqa: F811
    bench = tiny_bench(image_folder, tmp_path / "out", variants=("sape",), sweep_names=(), long_names=())
    bench.fit.iters, bench.fit.log_every = 10, 4
    jobs = build_jobs(bench)
    _check_out(bench, jobs)
    assert not run_batch(bench, jobs[:1], stop_at=0.0, notify=lambda message: None)  # SAPE is fitted on its own
    assert checkpoint_iteration(checkpoint_path(bench, jobs[0]), FitCheckpoint) == 4
    run_bench(bench, notify=lambda message: None)
    metrics = json.loads((bench.out / jobs[0].folder / "metrics.json").read_text())
    assert metrics["resumed_at"] == [4] and metrics["iters"] == 10 and "sape_blocks" in metrics
    assert not checkpoint_path(bench, jobs[0]).exists()


def killed_fit(tmp_path):
    """An image file, and the folder of an ``rff-image fit`` of it killed after its first checkpoint (iteration 5)."""
    path, out = tmp_path / "small.png", tmp_path / "fit"
    iio.imwrite(path, (image(0).numpy() * 255).astype(np.uint8))
    loaded = prepare_image(path, 1)
    fit_image(
        loaded.pixels, CASES["mlp-rff"], loaded.name, progress=False, stop_at=0.0, checkpoint=out / CHECKPOINT_FILE
    )
    return path, out


def test_rff_image_fit_resumes_a_killed_run_and_removes_its_checkpoint(tmp_path):
    path, out = killed_fit(tmp_path)
    fit = CASES["mlp-rff"]
    notices = []
    metrics = run_fit(path, out, fit, 1, progress=False, notify=notices.append)
    assert metrics["resumed_at"] == [5] and metrics["iters"] == 15
    assert any(notice.startswith("resuming at iteration 5 of 15 from") for notice in notices)
    assert (out / "metrics.json").is_file() and not (out / CHECKPOINT_FILE).exists()


def test_a_checkpoint_that_cannot_be_written_does_not_end_the_fit(tmp_path):
    (tmp_path / "a-file").write_text("")
    notices = []
    result = fit_image(
        image(0),
        CASES["mlp-rff"],
        progress=False,
        notify=notices.append,
        stop_at=0.0,
        checkpoint=tmp_path / "a-file" / CHECKPOINT_FILE,
    )  # its folder cannot be made: a file is there
    assert result.metrics["iters"] == 5 and "stopped" in result.metrics
    assert len(notices) == 1 and "could not save the checkpoint" in notices[0] and "goes on" in notices[0]


def test_ctrl_c_ends_the_iteration_saves_a_checkpoint_and_the_fit_resumes(tmp_path, monkeypatch):
    fit, path = CASES["mlp-rff"], tmp_path / CHECKPOINT_FILE  # full batch: one forward pass per iteration
    press_ctrl_c_on_call(monkeypatch, PixelPredictor, "__call__", at=7)
    with pytest.raises(FitInterrupted, match=f"interrupted after iteration 7 of 15; its checkpoint is in {path}"):
        fit_image(image(0), fit, progress=False, checkpoint=path)
    monkeypatch.undo()
    resumed = fit_image(image(0), fit, progress=False, checkpoint=path)
    assert resumed.metrics["resumed_at"] == [7]
    assert_same_fit(resumed, fit_image(image(0), fit, progress=False))


def test_ctrl_c_stops_a_batch_with_a_checkpoint_of_each_fit(tmp_path, monkeypatch):
    fit = CASES["mlp-rff"]
    jobs = [ImageJob(image(k), fit, f"img{k}") for k in range(2)]
    paths = [tmp_path / f"{k}.pt" for k in range(2)]
    press_ctrl_c_on_call(monkeypatch, batched, "_gather", at=13)  # inputs and targets: two calls an iteration
    message = f"interrupted after iteration 7 of 15; the checkpoints are in {paths[0]}, {paths[1]}, and the same"
    with pytest.raises(FitInterrupted, match=message):
        fit_images(jobs, checkpoints=paths)
    monkeypatch.undo()
    for resumed, uninterrupted in zip(fit_images(jobs, checkpoints=paths), fit_images(jobs)):
        assert resumed.metrics["resumed_at"] == [7]
        assert_same_fit(resumed, uninterrupted)


def test_ctrl_c_before_training_leaves_no_empty_out_folder(tmp_path, monkeypatch):
    path = tmp_path / "small.png"
    iio.imwrite(path, (image(0).numpy() * 255).astype(np.uint8))
    press_ctrl_c_on_call(monkeypatch, image_fit, "build_network", at=1)
    with pytest.raises(KeyboardInterrupt):
        run_fit(path, tmp_path / "fit", CASES["mlp-rff"], 1, progress=False)
    assert not (tmp_path / "fit").exists()
    (tmp_path / "mine").mkdir()
    press_ctrl_c_on_call(monkeypatch, image_fit, "build_network", at=1)
    with pytest.raises(KeyboardInterrupt):
        run_fit(path, tmp_path / "mine", CASES["mlp-rff"], 1, progress=False)
    assert (tmp_path / "mine").is_dir()  # the user's own folder stays


def test_sigterm_stops_a_fit_as_ctrl_c_does(tmp_path, monkeypatch):
    fit, path = CASES["mlp-rff"], tmp_path / CHECKPOINT_FILE
    press_ctrl_c_on_call(monkeypatch, PixelPredictor, "__call__", at=7, signum=signal.SIGTERM)
    with pytest.raises(FitInterrupted, match=f"interrupted after iteration 7 of 15; its checkpoint is in {path}"):
        fit_image(image(0), fit, progress=False, checkpoint=path)
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # put back as it was


def test_a_fit_interrupted_while_measuring_goes_on_without_training_again(tmp_path, monkeypatch):
    fit, path = CASES["mlp-rff"], tmp_path / CHECKPOINT_FILE
    press_ctrl_c_on_call(monkeypatch, image_fit, "image_metrics", at=1)
    with pytest.raises(FitInterrupted, match=r"interrupted after training \(15 iterations\), while measuring; its"):
        fit_image(image(0), fit, progress=False, checkpoint=path)
    monkeypatch.undo()
    resumed = fit_image(image(0), fit, progress=False, checkpoint=path)
    assert resumed.metrics["resumed_at"] == [15]  # no iteration trained again
    assert_same_fit(resumed, fit_image(image(0), fit, progress=False))


def test_rff_image_fit_interrupted_while_writing_goes_on_without_overwrite(tmp_path, monkeypatch):
    path, out = tmp_path / "small.png", tmp_path / "fit"
    iio.imwrite(path, (image(0).numpy() * 255).astype(np.uint8))
    fit = CASES["mlp-rff"]
    press_ctrl_c_on_call(monkeypatch, image_fit, "plot_curves", at=1)  # reconstruction.png is written by then
    with pytest.raises(FitInterrupted, match="interrupted while writing the outputs; its checkpoint is in"):
        run_fit(path, out, fit, 1, progress=False)
    assert (out / "reconstruction.png").is_file() and not (out / "metrics.json").exists()
    monkeypatch.undo()
    metrics = run_fit(path, out, fit, 1, progress=False, notify=lambda message: None)
    assert metrics["resumed_at"] == [15] and not (out / CHECKPOINT_FILE).exists()
    with pytest.raises(UsageError, match="already holds"):  # finished: its outputs are kept
        run_fit(path, out, fit, 1, progress=False)


def test_rff_image_fit_refuses_a_checkpoint_of_another_image_of_the_same_name_and_size(tmp_path):
    path, out = killed_fit(tmp_path)
    iio.imwrite(path, (image(1).numpy() * 255).astype(np.uint8))
    with pytest.raises(UsageError, match=r"other settings \(image content differs\)"):
        run_fit(path, out, CASES["mlp-rff"], 1, progress=False)
    assert checkpoint_iteration(out / CHECKPOINT_FILE, FitCheckpoint) == 5  # kept


def test_rff_image_fit_refuses_to_discard_a_checkpoint_of_other_settings(tmp_path):
    path, out = killed_fit(tmp_path)
    longer = replace(CASES["mlp-rff"], iters=20)
    with pytest.raises(UsageError, match=r"other settings \(--iters: 15 there, 20 now\); rerun with those to go on"):
        run_fit(path, out, longer, 1, progress=False)
    assert checkpoint_iteration(out / CHECKPOINT_FILE, FitCheckpoint) == 5  # kept
    metrics = run_fit(path, out, longer, 1, overwrite=True, progress=False, notify=lambda message: None)
    assert metrics["iters"] == 20 and "resumed_at" not in metrics
