"""The job model every benchmark shares: resumable jobs in folders, shards, worker processes, a time budget.

A job writes its own folder under the benchmark's output folder; it is finished once that folder holds
``metrics.json`` (written last, atomically), so a benchmark can be interrupted, resumed, split across processes
(``--shard I/N``) or machines (``--job K``), and stopped at a time budget without losing a finished job.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import fnmatch
import json
import multiprocessing
import shutil
import signal
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Hashable, Mapping, Optional, Sequence

from rff_field.bench.variants import Variant
from rff_field.common.checkpoint import TrainingCheckpoint, checkpoint_iteration, differing_settings
from rff_field.common.locks import release, try_lock
from rff_field.common.options import option_flag, option_value
from rff_field.common.outputs import BENCHMARK_FILE, check_writable_folder, clear_outputs, write_json
from rff_field.common.progress import warnings_as_notes
from rff_field.common.stopping import FitInterrupted, follow_parent_stop
from rff_field.core.errors import JobsFailed, UsageError

RESULT_FILE = "metrics.json"
"""The file whose presence marks a job as finished."""


@dataclass
class Job:
    """One run of a benchmark.

    Args:
        index: Position in the benchmark's job list (stable for a given command line).
        folder: The job's folder, relative to the benchmark's output folder.
        variant: The method and its overrides.
        subject: What it fits: an image, a shape, a scene.
        group: Which part of the benchmark it belongs to (e.g. ``main``, ``sweep``, ``long``).
        iters: Training iterations (None: the protocol's).
        source: The subject's file or folder.
    """

    index: int
    folder: Path
    variant: Variant
    subject: str
    group: str = "main"
    iters: Optional[int] = None
    source: Optional[Path] = None


@dataclass
class JobOptions:
    """Which jobs of a benchmark to run, and how."""

    shard: str = "0/1"
    """Run only jobs whose index is I modulo N (``I/N``), to split the benchmark across processes."""
    job: Optional[int] = None
    """Run only this job (an index from --list-jobs) and do not summarise."""
    list_jobs: bool = False
    """Print the job list (index, status, folder) and exit."""
    workers: int = 1
    """Jobs run side by side, each in its own process (useful on a GPU that small jobs leave idle)."""
    budget_s: Optional[float] = None
    """Start no job after this many seconds (finished jobs are kept; rerun the command to go on)."""
    overwrite: bool = False
    """Rerun jobs that already finished (their folders are replaced); in a folder of another protocol, remove the
    earlier protocol's jobs first."""

    def check(self, jobs: Sequence[Job]) -> None:
        """Raise :class:`UsageError` for options that cannot work with ``jobs``."""
        parse_shard(self.shard)
        if self.job is not None and not 0 <= self.job < len(jobs):
            raise UsageError(f"--job {self.job} is out of range: there are {len(jobs)} jobs (see --list-jobs)")
        if self.workers < 1:
            raise UsageError(f"--workers must be at least 1, got {self.workers}")
        if self.budget_s is not None and not self.budget_s > 0:
            raise UsageError(f"--budget-s must be positive, got {self.budget_s}")


@dataclass
class ResumableJobOptions(JobOptions):
    """:class:`JobOptions` whose time budget also stops running fits, which the next run resumes from checkpoints."""

    budget_s: Optional[float] = None
    """Start no job after this many seconds, and stop running fits at their next progress update with a checkpoint
    (an image fit of --engine sequential finishes first); finished jobs are kept, and the message at the budget
    says how the next run goes on from there."""


def parse_shard(text: str) -> tuple[int, int]:
    """``"I/N"`` -> (I, N), checked."""
    try:
        shard, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise UsageError(f"--shard {text!r}: expected I/N, e.g. 0/2") from None
    if count < 1 or not 0 <= shard < count:
        raise UsageError(f"--shard {text!r}: need 0 <= I < N")
    return shard, count


def is_finished(out: Path, job: Job) -> bool:
    """Whether ``job`` has written its result in ``out``."""
    return (out / job.folder / RESULT_FILE).is_file()


def selected(jobs: Sequence[Job], options: JobOptions) -> list[Job]:
    """The jobs this invocation is asked to run (one job, or a shard)."""
    if options.job is not None:
        return [jobs[options.job]]
    shard, count = parse_shard(options.shard)
    return [job for job in jobs if job.index % count == shard]


def read_benchmark(folder: Path) -> Optional[tuple[str, dict]]:
    """The kind (``image``, ``sdf``, ``nerf``) and protocol of the benchmark in ``folder``; None where it holds none.

    Folders written before ``bench.json`` recorded its kind are told by their protocol's keys (an SDF benchmark
    older still keeps its protocol in ``results.json``).
    """
    for name in (BENCHMARK_FILE, "results.json"):
        try:
            record = json.loads((Path(folder) / name).read_text())
        except (OSError, ValueError):
            continue
        protocol = record.get("protocol") if isinstance(record, dict) else None
        if isinstance(protocol, dict):
            kind = record.get("kind") or ("image" if "downsample" in protocol else "sdf" if "pool_size" in protocol
                                          else None)  # fmt: skip
            if kind is not None:
                return kind, protocol
    return None


def job_table(jobs: Sequence[Job]) -> dict:
    """``{folder: {"variant": spec, "iters": iters}}``: the jobs of a benchmark as its protocol records them (a
    folder run with another variant or length is another protocol's)."""
    return {str(job.folder): {"variant": job.variant.spec, "iters": job.iters} for job in jobs}


def claim_benchmark_folder(
    out: Path,
    kind: str,
    protocol: dict,
    overwrite: bool,
    job_folders: Sequence[str],
    growing: Sequence[str] = ("jobs",),
    own_files: Sequence[str] = (),
    compared: Callable[[dict], dict] = lambda protocol: protocol,
) -> None:
    """Make ``out`` this benchmark's folder before any job runs, and record its protocol there (``bench.json``).

    Refused, whatever ``overwrite`` says: a folder that holds files but no benchmark, or another command's benchmark.
    A benchmark of this kind with another protocol is refused too, unless ``overwrite``: then its jobs and summary
    are removed first, so that none of them passes as a finished job of this protocol.

    Args:
        out: The benchmark's ``--out``.
        kind: What runs the benchmark (``image``, ``sdf``, ``nerf``).
        protocol: What every job in the folder must share (JSON values).
        overwrite: Whether the user asked to rerun every job.
        job_folders: Glob patterns of the job folders under ``out`` (e.g. ``runs/*/*``), removed with ``overwrite``.
        growing: Keys of ``protocol`` that map names to values and gain names as jobs are added (merged, and only
            the names in both compared).
        own_files: Glob patterns of other files this benchmark's commands write in ``out`` (e.g. timings).
        compared: The part of a protocol that must agree (default: all of it).
    """
    out = Path(out)
    check_writable_folder(out, "--out")
    protocol = json.loads(json.dumps(protocol))
    found = read_benchmark(out) if out.is_dir() else None
    if found is None:
        patterns = (BENCHMARK_FILE, "logs", *own_files)
        foreign = [] if not out.is_dir() else [p.name for p in out.iterdir() if not p.name.startswith(".")
                                               and not any(fnmatch.fnmatch(p.name, g) for g in patterns)]  # fmt: skip
        if foreign:
            raise UsageError(f"{out} is not empty and holds no benchmark ({BENCHMARK_FILE}); choose another --out")
    elif found[0] != kind:
        raise UsageError(f"{out} holds an `rff-bench {found[0]}` benchmark, not one of `rff-bench {kind}`; choose "
                         "another --out (--overwrite does not replace another command's results)")  # fmt: skip
    else:
        stored = found[1]
        conflicts = differing_settings(compared(stored), compared(protocol))
        if conflicts and not overwrite:
            raise UsageError(
                f"{out} holds a benchmark with another protocol ({describe_conflicts(conflicts)}; see "
                f"{out / BENCHMARK_FILE}); use another --out, or --overwrite to rerun every job with this one"
            )
        if conflicts:
            removed = remove_job_folders(out, job_folders)
            clear_outputs(out, ("results.json", "results.md"))  # the summary of the removed jobs
            reasons = describe_conflicts(conflicts)
            print(f"note: {out} held {removed} jobs of another protocol ({reasons}); removed them")
        else:
            for key in growing:  # names added since are recorded too
                protocol[key] = {**stored.get(key, {}), **protocol.get(key, {})}
    out.mkdir(parents=True, exist_ok=True)
    record = {"kind": kind, "protocol": protocol}
    try:
        unchanged = json.loads((out / BENCHMARK_FILE).read_text()) == record
    except (OSError, ValueError):
        unchanged = False
    if not unchanged:
        write_json(out / BENCHMARK_FILE, record)  # atomic: jobs of other processes may read it


def describe_conflicts(
    conflicts: Mapping[str, tuple[Any, Any]], stored_in: str = "there", current_in: str = "now"
) -> str:
    """Differing protocol keys (:func:`differing_settings`) in words: each option by its flag with its stored and
    its current value (said to be ``stored_in`` and ``current_in``), images (``images.NAME``, by content) by name,
    the jobs recorded by :func:`job_table` by their folders."""
    jobs = sorted({key[len("jobs.") :].rpartition(".")[0] for key in conflicts if key.startswith("jobs.")})
    images = sorted(key[len("images.") :] for key in conflicts if key.startswith("images."))
    reasons = sorted(f"{option_flag(key)}: {option_value(stored)} {stored_in}, {option_value(current)} {current_in}"
               for key, (stored, current) in conflicts.items() if not key.startswith(("jobs.", "images.")))  # fmt: skip
    if images:
        reasons.append(f"image {', '.join(images)} changed since its jobs ran" if len(images) == 1 else
                       f"images {', '.join(images)} changed since their jobs ran")  # fmt: skip
    if jobs:
        reasons.append(f"{', '.join(jobs)} ran with another variant or length (--iters, --steps)")
    return "; ".join(reasons)


def remove_job_folders(out: Path, patterns: Sequence[str]) -> int:
    """Remove the job folders under ``out`` that match ``patterns`` (a linked folder: the link only); how many."""
    removed = 0
    for pattern in patterns:
        for folder in sorted(Path(out).glob(pattern)):
            if folder.is_symlink():
                folder.unlink()
            elif folder.is_dir():
                shutil.rmtree(folder)
            else:
                continue
            removed += 1
    return removed


def print_jobs(jobs: Sequence[Job], out: Path, pending_status: Optional[Callable[[Job], str]] = None) -> None:
    """The job list: index, status, iterations, folder (``pending_status``: the status of an unfinished job, e.g.
    where its checkpoint stands; default ``pending``)."""
    for job in jobs:
        status = "done" if is_finished(out, job) else pending_status(job) if pending_status else "pending"
        print(f"{job.index}\t{status}\t{job.iters if job.iters is not None else '-'}\t{job.folder}")


def write_result(folder: Path, result: dict) -> None:
    """Write ``result`` as the job's ``metrics.json`` atomically (a job is finished once the file exists)."""
    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / RESULT_FILE, result)


def check_no_failures(report: "RunReport") -> None:
    """Raise :class:`JobsFailed` when jobs of ``report`` failed (worker processes keep the others going; call this
    after summarising what finished)."""
    if report.failed:
        job, error = report.failed[0]
        raise JobsFailed(f"{len(report.failed)} job(s) failed, the first {job.folder} with {error}; the finished ones "
                         "are kept: fix the cause and run the same command again to retry the rest")  # fmt: skip


@dataclass
class RunReport:
    """What :func:`run_jobs` did."""

    finished: list[Job] = field(default_factory=list)
    skipped: list[Job] = field(default_factory=list)
    failed: list[tuple[Job, str]] = field(default_factory=list)
    budget_reached: bool = False
    busy: list[Job] = field(default_factory=list)
    """Jobs that another process (the same command started twice, or another shard) was running."""


class JobClaims:
    """Locks on the jobs this process runs, under ``OUT/.running/`` (removed with the last of them): another process
    running the same benchmark leaves them to it instead of fitting them a second time and writing over its files."""

    def __init__(self, out: Path) -> None:
        self.folder = Path(out) / ".running"
        self.held: dict[Path, tuple[int, Path]] = {}

    def claim(self, jobs: Sequence[Job]) -> bool:
        """Lock every job of ``jobs``; False (holding none of them) when another process holds one."""
        taken = []
        for job in jobs:
            lock = self.folder / (job.folder.as_posix().replace("/", "--") + ".lock")
            descriptor = try_lock(lock)
            if descriptor is None:
                self.release(taken)
                return False
            self.held[job.folder] = (descriptor, lock)
            taken.append(job)
        return True

    def release(self, jobs: Sequence[Job]) -> None:
        """Give up the locks of ``jobs``, and remove their files (and the folder, once no process holds any)."""
        for job in jobs:
            if job.folder in self.held:
                descriptor, lock = self.held.pop(job.folder)
                release(descriptor, remove=lock)
        with contextlib.suppress(OSError):  # not empty: other processes hold locks there
            self.folder.rmdir()


def _claim(
    claims: JobClaims, out: Path, jobs: Sequence[Job], report: RunReport, describe: str, overwrite: bool
) -> list[Job]:
    """Claim ``jobs`` to run them now: those of them to run, none when another process runs them; unless
    ``overwrite``, those another process finished since this one listed them are left out."""
    if not claims.claim(jobs):
        report.busy += list(jobs)
        print(f"{describe}: running in another process; left to it", flush=True)
        return []
    finished = [] if overwrite else [job for job in jobs if is_finished(out, job)]
    claims.release(finished)
    report.skipped += finished
    return [job for job in jobs if job not in finished]


class WorkerPool:
    """Spawned processes that run jobs side by side and stop together on Ctrl-C.

    Ctrl-C in a terminal reaches every process: a worker's running fit ends its step, saves its checkpoint and
    stops; an idle worker ignores it, and no job starts after it. An interrupt that only this process receives
    (``kill -INT``) stops the running fits the same way.
    """

    def __init__(self, workers: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.stopping = context.Event()
        self.executor = concurrent.futures.ProcessPoolExecutor(
            max_workers=workers, mp_context=context, initializer=_start_worker, initargs=(self.stopping,)
        )
        self.futures: list[concurrent.futures.Future] = []

    def submit(self, run: Callable[..., Any], *args: Any) -> concurrent.futures.Future:
        """Run ``run(*args)`` in a worker (unless the pool was interrupted before it started there)."""
        future = self.executor.submit(_run_unless_stopping, run, *args)
        self.futures.append(future)
        return future

    def interrupted(self) -> FitInterrupted:
        """After Ctrl-C: start no other job, wait for the running ones to stop; the exception to raise, which names
        the checkpoints they saved."""
        self.stopping.set()
        for future in self.futures:
            future.cancel()
        concurrent.futures.wait(self.futures)
        saved = []
        for future in self.futures:
            error = None if future.cancelled() else future.exception()
            if isinstance(error, FitInterrupted):
                saved += error.saved
        return FitInterrupted("interrupted", saved)

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.executor.shutdown(wait=True, cancel_futures=True)


_stopping: Optional[Any] = None
"""In a worker: the pool's event that says it was interrupted."""


def _start_worker(stopping: Any) -> None:
    global _stopping
    _stopping = stopping
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # an idle worker outlives Ctrl-C, so the pool can wind down
    follow_parent_stop(stopping.is_set)
    warnings.showwarning = warnings_as_notes(warnings.showwarning)


def _run_unless_stopping(run: Callable[..., Any], *args: Any) -> Any:
    if _stopping is not None and _stopping.is_set():
        return None
    signal.signal(signal.SIGINT, signal.default_int_handler)  # a job takes Ctrl-C as in the main process
    try:
        return run(*args)
    except KeyboardInterrupt:  # this worker saw the Ctrl-C first: no worker takes another job
        if _stopping is not None:
            _stopping.set()
        raise
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def run_jobs(
    jobs: Sequence[Job],
    out: Path,
    run_one: Callable[[Job], Any],
    options: JobOptions,
    total: Optional[int] = None,
) -> RunReport:
    """Run the jobs that are not finished (all of them with ``options.overwrite``), in order.

    With ``options.workers > 1`` the jobs run in that many spawned processes (``run_one`` must then be picklable:
    a module-level function or a ``functools.partial`` of one); a job that fails there is reported and the others
    go on. No job starts after ``options.budget_s`` seconds.

    Args:
        jobs: The jobs to run.
        out: The benchmark's output folder.
        run_one: Runs one job and writes its folder.
        options: Workers, budget, overwrite.
        total: Jobs in the whole benchmark (for progress lines; default ``len(jobs)``).
    """
    report = RunReport()
    pending = []
    for job in jobs:
        (report.skipped if is_finished(out, job) and not options.overwrite else pending).append(job)
    total = total if total is not None else len(jobs)
    start = time.monotonic()

    def over_budget() -> bool:
        return options.budget_s is not None and time.monotonic() - start > options.budget_s

    claims = JobClaims(out)
    if options.workers == 1:
        for job in pending:
            if over_budget():
                report.budget_reached = True
                break
            if not _claim(claims, out, [job], report, f"job {job.index}/{total}: {job.folder}", options.overwrite):
                continue
            print(f"job {job.index}/{total}: {job.folder}" + (f" ({job.iters} iterations)" if job.iters else ""))
            try:
                run_one(job)
            finally:
                claims.release([job])
            report.finished.append(job)
        return report

    with WorkerPool(options.workers) as pool:
        futures: dict[concurrent.futures.Future, Job] = {}
        queue = list(pending)
        try:
            while queue or futures:
                while queue and len(futures) < options.workers and not over_budget():
                    job = queue.pop(0)
                    if not _claim(
                        claims, out, [job], report, f"job {job.index}/{total}: {job.folder}", options.overwrite
                    ):
                        continue
                    print(f"job {job.index}/{total}: {job.folder} started", flush=True)
                    futures[pool.submit(run_one, job)] = job
                if queue and over_budget():
                    report.budget_reached = True
                    queue.clear()
                if not futures:
                    break
                done, _ = concurrent.futures.wait(futures, return_when=concurrent.futures.FIRST_COMPLETED)
                for future in done:
                    job = futures.pop(future)
                    claims.release([job])
                    try:
                        future.result()
                        report.finished.append(job)
                        print(f"job {job.index}/{total}: {job.folder} done", flush=True)
                    except Exception as error:  # keep the other jobs going
                        report.failed.append((job, f"{type(error).__name__}: {error}"))
                        print(f"job {job.index}/{total}: {job.folder} failed: {error}", flush=True)
        except KeyboardInterrupt:
            raise pool.interrupted() from None
    return report


def _run_before(
    stop_at: Optional[float], run_batch: Callable[[list[Job], Optional[float]], bool], batch: list[Job]
) -> bool:
    """``run_batch(batch, stop_at)`` in a worker, unless the batch waited there until past ``stop_at``."""
    if stop_at is not None and time.monotonic() > stop_at:
        return False
    return run_batch(batch, stop_at)


def checkpoint_status(path: Path, kind: type[TrainingCheckpoint]) -> str:
    """The status of an unfinished job whose fit keeps its checkpoint at ``path``: ``pending``, or where the checkpoint
    of a fit that was stopped (or is running) stands, e.g. ``checkpoint at 5000``."""
    iteration = checkpoint_iteration(path, kind)
    return f"checkpoint at {iteration}" if iteration else "pending"


def run_batches(
    jobs: Sequence[Job],
    out: Path,
    run_batch: Callable[[list[Job], Optional[float]], bool],
    key: Callable[[Job], Hashable],
    max_size: int,
    options: JobOptions,
    total: Optional[int] = None,
    start: Optional[float] = None,
) -> RunReport:
    """:func:`run_jobs` for an engine that runs several jobs at once.

    The pending jobs are grouped by ``key`` (jobs with equal keys can share a batch), in order of first appearance,
    into batches of at most ``max_size``; batches run in the order of their first subject (a stable sort, so every
    key's batch of the first subjects runs before any batch of later ones). ``run_batch(batch, stop_at)`` runs one
    batch and writes each job's folder; ``stop_at`` is the ``time.monotonic()`` value of the end of the budget (None
    without one), past which it stops and returns False, leaving its jobs pending. No batch starts after the
    budget, which counts from ``start`` (a ``time.monotonic()`` value, e.g. the command's start when it prepared
    data first; default: now). With ``options.workers > 1`` the batches run in that many spawned processes
    (``run_batch`` must then be picklable).
    """
    report = RunReport()
    pending: dict[Hashable, list[Job]] = {}
    for job in jobs:
        if is_finished(out, job) and not options.overwrite:
            report.skipped.append(job)
        else:
            pending.setdefault(key(job), []).append(job)
    batches = [group[i : i + max_size] for group in pending.values() for i in range(0, len(group), max_size)]
    # batches of the first subjects first (every key of them), so that a run stopped by its budget compares variants
    rank = {subject: i for i, subject in enumerate(dict.fromkeys(job.subject for job in jobs))}
    batches.sort(key=lambda batch: min(rank[job.subject] for job in batch))
    total = total if total is not None else len(jobs)
    start = time.monotonic() if start is None else start
    stop_at = start + options.budget_s if options.budget_s is not None else None

    def describe(batch: list[Job]) -> str:
        if len(batch) == 1:
            return f"job {batch[0].index}/{total}: {batch[0].folder}"
        return f"jobs {', '.join(str(job.index) for job in batch)}/{total} together: {batch[0].folder.parent.name} ..."

    def finished(batch: list[Job], done: bool) -> None:
        if done:
            report.finished += batch
        else:
            report.budget_reached = True

    claims = JobClaims(out)
    if options.workers == 1:
        for batch in batches:
            if stop_at is not None and time.monotonic() > stop_at:
                report.budget_reached = True
                break
            batch = _claim(claims, out, batch, report, describe(batch), options.overwrite)
            if not batch:
                continue
            print(describe(batch), flush=True)
            try:
                finished(batch, run_batch(batch, stop_at))
            finally:
                claims.release(batch)
        return report

    with WorkerPool(options.workers) as pool:
        try:
            futures = {}
            for batch in batches:
                batch = _claim(claims, out, batch, report, describe(batch), options.overwrite)
                if not batch:
                    continue
                print(describe(batch), flush=True)
                futures[pool.submit(_run_before, stop_at, run_batch, batch)] = batch
            for future in concurrent.futures.as_completed(futures):
                batch = futures[future]
                claims.release(batch)
                try:
                    finished(batch, future.result())
                except Exception as error:  # keep the other batches going
                    report.failed += [(job, f"{type(error).__name__}: {error}") for job in batch]
                    print(f"{describe(batch)} failed: {error}", flush=True)
        except KeyboardInterrupt:
            raise pool.interrupted() from None
    return report
