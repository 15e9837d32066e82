"""The shared job runner: resume, shards, worker processes, a time budget, atomic results."""

import json
import os
import signal
import time
from functools import partial
from pathlib import Path
from typing import Any, Callable

import pytest

from rff_field.bench.jobs import (
    Job,
    JobClaims,
    JobOptions,
    RunReport,
    _run_before,
    check_no_failures,
    claim_benchmark_folder,
    is_finished,
    run_batches,
    run_jobs,
    selected,
    write_result,
)
from rff_field.bench.variants import parse_variant
from rff_field.common.stopping import FitInterrupted, fit_stops
from rff_field.core.errors import JobsFailed, UsageError


def make_jobs(count: int) -> list[Job]:
    return [Job(i, Path(f"runs/s{i}"), parse_variant("mlp-pe"), f"s{i}") for i in range(count)]


def write_job(out: Path, job: Job) -> None:
    if job.subject == "s2":
        raise RuntimeError("this job breaks")
    write_result(out / job.folder, {"subject": job.subject})


def run_in_batches_of_one(jobs: list[Job], out: Path, run_one: Callable[[Job], Any], options: JobOptions) -> RunReport:
    """:func:`run_jobs` through :func:`run_batches`."""
    return run_batches(jobs, out, lambda batch, stop_at: [run_one(job) for job in batch] or True,
                       key=lambda job: job.subject, max_size=1, options=options)  # fmt: skip


@pytest.mark.parametrize("engine", ["jobs", "batches"])
def test_finished_jobs_are_skipped_unless_overwrite(tmp_path, engine):
    run = run_jobs if engine == "jobs" else run_in_batches_of_one
    jobs = make_jobs(3)
    write_result(tmp_path / jobs[1].folder, {"old": True})
    ran = []
    report = run(jobs, tmp_path, lambda job: ran.append(job.subject), JobOptions())
    assert ran == ["s0", "s2"] and report.skipped == [jobs[1]]
    ran.clear()
    run(jobs, tmp_path, lambda job: ran.append(job.subject), JobOptions(overwrite=True))
    assert ran == ["s0", "s1", "s2"]


def test_a_batch_runs_its_jobs_no_other_process_finished_meanwhile(tmp_path):
    jobs = make_jobs(3)
    ran = []

    def run_batch(batch: list[Job], stop_at) -> bool:
        ran.append([job.subject for job in batch])
        if batch[0].subject == "s0":  # meanwhile another process finishes s1
            write_result(tmp_path / jobs[1].folder, {"by": "other"})
        return True

    report = run_batches(jobs, tmp_path, run_batch, key=lambda job: job.subject == "s0", max_size=2,
                         options=JobOptions())  # fmt: skip
    assert ran == [["s0"], ["s2"]] and report.skipped == [jobs[1]] and report.finished == [jobs[0], jobs[2]]
    assert json.loads((tmp_path / "runs/s1/metrics.json").read_text()) == {"by": "other"}


def test_a_batch_stopped_by_the_budget_is_not_finished(tmp_path):
    report = run_batches(make_jobs(2), tmp_path, lambda batch, stop_at: False, key=lambda job: 0, max_size=2,
                         options=JobOptions(budget_s=60))  # fmt: skip
    assert report.budget_reached and report.finished == []


@pytest.mark.parametrize("engine", ["jobs", "batches"])
def test_jobs_another_process_runs_or_finished_are_left_to_it(tmp_path, engine, capsys):
    jobs = make_jobs(4)
    other = JobClaims(tmp_path)  # the same benchmark started a second time, holding job s1
    assert other.claim([jobs[1]])
    ran = []

    def run_one(job: Job) -> None:
        ran.append(job.subject)
        if job.subject == "s0":  # meanwhile the other process finishes s2
            write_result(tmp_path / jobs[2].folder, {"by": "other"})
        write_result(tmp_path / job.folder, {})

    report = (run_jobs if engine == "jobs" else run_in_batches_of_one)(jobs, tmp_path, run_one, JobOptions())
    assert ran == ["s0", "s3"] and report.busy == [jobs[1]] and report.skipped == [jobs[2]]
    assert "runs/s1: running in another process; left to it" in capsys.readouterr().out
    assert json.loads((tmp_path / "runs/s2/metrics.json").read_text()) == {"by": "other"}
    assert [path.name for path in (tmp_path / ".running").iterdir()] == ["runs--s1.lock"]  # the other's, held
    other.release([jobs[1]])
    run_jobs(jobs, tmp_path, run_one, JobOptions())
    assert ran == ["s0", "s3", "s1"]
    assert not (tmp_path / ".running").exists()  # no lock left behind once no process runs a job


def test_a_lock_whose_file_its_holder_removed_meanwhile_is_taken_on_the_file_there_now(tmp_path, monkeypatch):
    import fcntl

    from rff_field.common import locks

    path = tmp_path / ".running" / "job.lock"
    holders = [locks.try_lock(path)]
    flock = fcntl.flock

    def holder_releases_first(descriptor, operation):  # the holder lets go between this open and this lock
        if holders:
            locks.release(holders.pop(), remove=path)
        flock(descriptor, operation)

    monkeypatch.setattr(fcntl, "flock", holder_releases_first)
    taken = locks.try_lock(path)
    monkeypatch.setattr(fcntl, "flock", flock)
    assert taken is not None and os.fstat(taken).st_ino == os.stat(path).st_ino  # the file there now is locked
    assert locks.try_lock(path) is None  # so a third process finds it taken
    locks.release(taken, remove=path)
    assert not path.exists()


def test_a_second_fit_on_a_folder_in_use_stops_at_once(tmp_path):
    from rff_field.common.locks import exclusive_folder
    from rff_field.image.fit import run_fit

    with exclusive_folder(tmp_path / "fit", "rff-image fit"):
        with pytest.raises(UsageError, match="fit is in use by another rff-image fit; wait for it to finish"):
            run_fit(None, tmp_path / "fit", progress=False)
        assert list((tmp_path / "fit").iterdir()) == []
    assert not (tmp_path / "fit").exists()  # made by the holder, which wrote nothing


def test_shards_and_single_jobs_partition_the_list():
    jobs = make_jobs(5)
    shards = [selected(jobs, JobOptions(shard=f"{i}/2")) for i in range(2)]
    assert [j.index for j in shards[0]] == [0, 2, 4] and [j.index for j in shards[1]] == [1, 3]
    assert selected(jobs, JobOptions(job=3)) == [jobs[3]]
    for bad in (JobOptions(shard="2/2"), JobOptions(job=5), JobOptions(workers=0), JobOptions(budget_s=0)):
        with pytest.raises(UsageError):
            bad.check(jobs)


def test_budget_stops_starting_jobs_and_a_rerun_goes_on(tmp_path):
    jobs = make_jobs(4)
    ran = []

    def run_one(job: Job) -> None:
        ran.append(job.subject)
        time.sleep(0.2)
        write_result(tmp_path / job.folder, {})

    report = run_jobs(jobs, tmp_path, run_one, JobOptions(budget_s=0.1))
    assert report.budget_reached and ran == ["s0"]  # the first job starts at 0 s, the next after 0.2 s
    run_jobs(jobs, tmp_path, run_one, JobOptions())
    assert ran == ["s0", "s1", "s2", "s3"] and all(is_finished(tmp_path, job) for job in jobs)


def test_workers_run_jobs_in_processes_and_a_failure_spares_the_others(tmp_path):

    jobs = make_jobs(4)
    report = run_jobs(jobs, tmp_path, partial(write_job, tmp_path), JobOptions(workers=2))
    assert sorted(j.subject for j in report.finished) == ["s0", "s1", "s3"]
    assert [(j.subject, "breaks" in message) for j, message in report.failed] == [("s2", True)]
    assert json.loads((tmp_path / "runs/s3/metrics.json").read_text()) == {"subject": "s3"}
    assert not is_finished(tmp_path, jobs[2])
    with pytest.raises(JobsFailed, match=r"^1 job\(s\) failed, the first runs/s2 with RuntimeError: this job breaks;"):
        check_no_failures(report)  # the command exits non-zero once it has summarised the others


def sleep_then_write(out: Path, seconds: float, job: Job) -> None:
    time.sleep(seconds)
    write_result(out / job.folder, {})


def write_batch(out: Path, batch: list[Job], stop_at) -> bool:
    for job in batch:
        write_result(out / job.folder, {})
    return True


def test_workers_start_no_job_past_the_budget(tmp_path):
    jobs = make_jobs(4)  # two workers: the third job could start after 0.3 s at the soonest
    report = run_jobs(jobs, tmp_path, partial(sleep_then_write, tmp_path, 0.3), JobOptions(workers=2, budget_s=0.1))
    assert report.budget_reached and len(report.finished) <= 2


def test_batches_in_workers_leave_no_lock_behind(tmp_path):
    jobs = make_jobs(3)
    report = run_batches(jobs, tmp_path, partial(write_batch, tmp_path), key=lambda job: 0, max_size=2,
                         options=JobOptions(workers=2))  # fmt: skip
    assert sorted(job.subject for job in report.finished) == ["s0", "s1", "s2"]
    assert not (tmp_path / ".running").exists()


def test_batches_of_the_first_subjects_run_first_for_every_key(tmp_path):
    # subjects s0..s4 under two variants (variant-major, as the image benchmark lists them); s1 and s3 have another
    # size, so a variant's jobs fall under two keys
    jobs = [Job(i, Path(f"runs/s{i % 5}/v{i // 5}"), parse_variant("mlp-pe"), f"s{i % 5}") for i in range(10)]
    ran = []
    report = run_batches(jobs, tmp_path, lambda batch, stop_at: ran.append([j.subject for j in batch]) or True,
                         key=lambda job: (job.index // 5, job.subject in ("s1", "s3")), max_size=2,
                         options=JobOptions())  # fmt: skip
    assert ran == [["s0", "s2"], ["s0", "s2"], ["s1", "s3"], ["s1", "s3"], ["s4"], ["s4"]]
    assert len(report.finished) == 10


def test_a_batch_that_waited_in_a_worker_past_the_budget_does_not_start():
    def run(batch, stop_at):
        return "ran"

    assert _run_before(time.monotonic() - 1, run, []) is False
    assert _run_before(None, run, []) == "ran"


def fit_until_interrupted(parent_only: bool, batch: list[Job], stop_at=None) -> bool:
    """A fit that saves a checkpoint when it stops; the first job presses Ctrl-C once two fits run: as a terminal
    does (to this process, the other worker and the parent), or with ``parent_only`` to the parent alone."""
    (job,) = batch
    folder = Path(job.source)

    def save(step: int) -> list[Path]:
        path = folder / f"checkpoint-{job.index}"
        path.write_text(str(step))
        return [path]

    with fit_stops(3000, None, save) as stops:
        (folder / f"running-{job.index}").write_text(str(os.getpid()))
        if job.index == 0:
            while len(list(folder.glob("running-*"))) < 2:
                time.sleep(0.01)
            workers = [] if parent_only else [int(path.read_text()) for path in folder.glob("running-*")]
            for pid in [os.getppid(), *workers]:
                os.kill(pid, signal.SIGINT)
        for step in range(1, 3000):  # 30 s at most: a fit that misses the interrupt finishes, and the test fails
            time.sleep(0.01)
            stops.stop(step)
    return True


@pytest.mark.parametrize(
    ("engine", "parent_only"), [("jobs", False), ("batches", False), ("batches", True)], ids=["jobs", "batches", "kill"]
)
def test_ctrl_c_stops_the_running_fits_of_every_worker_and_starts_no_other_job(tmp_path, engine, parent_only):
    jobs = [Job(i, Path(f"runs/s{i}"), parse_variant("mlp-pe"), f"s{i}", source=tmp_path) for i in range(4)]
    fit = partial(fit_until_interrupted, parent_only)
    options = JobOptions(workers=2)
    with pytest.raises(FitInterrupted) as interrupted:
        if engine == "jobs":
            run_jobs(jobs, tmp_path / "out", partial(run_one_fit, parent_only), options)
        else:
            run_batches(jobs, tmp_path / "out", fit, lambda job: job.index, 1, options)
    saved = {tmp_path / "checkpoint-0", tmp_path / "checkpoint-1"}
    assert set(interrupted.value.saved) == saved and all(path.is_file() for path in saved)
    assert str(interrupted.value).startswith("interrupted; the checkpoints are in ")
    assert sorted(path.name for path in tmp_path.glob("running-*")) == ["running-0", "running-1"]


def run_one_fit(parent_only: bool, job: Job) -> bool:
    return fit_until_interrupted(parent_only, [job])


def test_a_benchmark_folder_is_refused_to_other_commands_and_other_protocols(tmp_path, capsys):
    out = tmp_path / "out"
    claim_benchmark_folder(out, "image", {"downsample": 4, "jobs": {"runs/a/x": 1}}, False, ("runs/*/*",))
    write_result(out / "runs/a/x", {"done": True})
    elsewhere = tmp_path / "elsewhere"
    write_result(elsewhere, {"kept": True})
    (out / "runs/b").mkdir()
    (out / "runs/b/linked").symlink_to(elsewhere, target_is_directory=True)
    for overwrite in (False, True):
        with pytest.raises(UsageError, match=r"holds an `rff-bench image` benchmark, not one of `rff-bench sdf`"):
            claim_benchmark_folder(out, "sdf", {"pool_size": 1}, overwrite, ("runs/*/*",))
    with pytest.raises(UsageError, match=r"another protocol \(--downsample: 4 there, 2 now;"):
        claim_benchmark_folder(out, "image", {"downsample": 2}, False, ("runs/*/*",))
    claim_benchmark_folder(out, "image", {"downsample": 4, "jobs": {"runs/b/y": 2}}, False, ("runs/*/*",))
    assert json.loads((out / "bench.json").read_text())["protocol"]["jobs"] == {"runs/a/x": 1, "runs/b/y": 2}
    assert (out / "runs/a/x/metrics.json").is_file()

    (out / "results.md").write_text("the summary of the jobs at x4")
    claim_benchmark_folder(out, "image", {"downsample": 2}, True, ("runs/*/*",))
    assert not (out / "results.md").exists()
    assert "held 2 jobs of another protocol (--downsample: 4 there, 2 now); removed them" in capsys.readouterr().out
    assert not (out / "runs/a/x").exists() and not (out / "runs/b/linked").is_symlink()
    assert (elsewhere / "metrics.json").is_file()  # a linked job: the link goes, not what it points to
    assert json.loads((out / "bench.json").read_text()) == {"kind": "image", "protocol": {"downsample": 2}}

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="is not empty and holds no benchmark"):
        claim_benchmark_folder(mine, "nerf", {}, True, ("runs/*",))
    (mine / "notes.txt").unlink()
    (mine / "timing-rff-nerf.json").write_text("{}")  # written by another command of this benchmark
    claim_benchmark_folder(mine, "nerf", {"scale": 1}, False, ("runs/*",), own_files=("timing-*.json",))
