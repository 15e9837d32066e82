"""The bench runner every application shares: variants (``[LABEL:]PRESET[,key=value...]``) x inputs, a folder per job
(``runs/<input>/<label>/``: a finished job is skipped on a rerun, an unfinished one resumes), ``--shard I/N`` for
separate processes, and results.json and results.md over every finished job."""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import re
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence, TypeVar

from rff_field.common.outputs import write_json, write_text
from rff_field.core.errors import UsageError
from rff_field.fit.checkpoint import CHECKPOINT_FILE, settings_key

logger = logging.getLogger(__name__)
Config = TypeVar("Config")
PROTOCOL_FILE = "bench.json"
"""The base settings of a bench's jobs, in its folder (a rerun with others is refused)."""


@dataclass(frozen=True)
class Variant:
    """A labelled preset with options set: a row of the results table."""

    label: str
    """Name of the row and of the jobs' folders."""
    preset: str
    """The preset it starts from."""
    options: tuple[tuple[str, str], ...] = ()
    """``(dotted key, value as written)`` set on top of the preset."""


def parse_variant(text: str, presets: Mapping[str, Mapping[str, Any]]) -> Variant:
    """Parse ``[LABEL:]PRESET[,key=value...]``; a :class:`UsageError` names the variant."""
    text = text.strip()
    label, colon, spec = text.partition(":") if ":" in text.split(",")[0] else ("", "", text)
    if colon and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", label):
        raise UsageError(
            f"variant {text!r}: the label {label!r} must start with a letter or digit and hold only "
            "letters, digits, '.', '_' and '-'"
        )
    preset, *items = [item.strip() for item in spec.split(",")]
    if preset not in presets:
        raise UsageError(f"variant {text!r}: unknown preset {preset!r}; choose one of {', '.join(presets)}")
    options = []
    for item in items:
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            raise UsageError(f"variant {text!r}: {item!r} is not key=value")
        options.append((key.strip().replace("-", "_"), value.strip()))
    return Variant(label or re.sub(r"[^A-Za-z0-9._-]+", "_", text), preset, tuple(options))


def option_paths(config: Any, prefix: str = "") -> dict[str, tuple[Any, str]]:
    """Every option of a nested dataclass (also in dicts, as nerfstudio's optimizers): dotted path -> (holder, name)."""
    out: dict[str, tuple[Any, str]] = {}
    items = (
        config.items()
        if isinstance(config, dict)
        else ((f.name, getattr(config, f.name)) for f in dataclasses.fields(config))
    )
    for name, value in items:
        if isinstance(name, str) and name.startswith("_"):
            continue
        if (dataclasses.is_dataclass(value) and not isinstance(value, type)) or isinstance(value, dict):
            out.update(option_paths(value, f"{prefix}{name}."))
        elif not isinstance(config, dict):
            out[prefix + name] = (config, name)
    return out


def set_option(config: Any, key: str, value: Any) -> None:
    """Set option ``key`` (a dotted path, or a tail naming one option) of ``config``, converting a string to its type;
    a :class:`UsageError` names ``key``."""
    paths = option_paths(config)
    matches = [key] if key in paths else [path for path in paths if path.endswith("." + key)]
    if not matches:
        raise UsageError(f"unknown option {key!r} in a variant; use a dotted option path (see --help)")
    if len(matches) > 1:
        raise UsageError(f"option {key!r} in a variant is ambiguous: write one of {', '.join(matches)}")
    holder, name = paths[matches[0]]
    if isinstance(value, str):
        value = convert(value, typing.get_type_hints(type(holder))[name], key)
    setattr(holder, name, value)


def convert(text: str, hint: Any, key: str) -> Any:
    """``text`` as a value of the type ``hint`` (bool, int, float, str, Literal, Optional, tuple of those)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union:
        if text.lower() == "none":
            return None
        return convert(text, next(arg for arg in args if arg is not type(None)), key)
    if origin is typing.Literal:
        if text not in map(str, args):
            raise UsageError(f"{key}={text}: choose one of {', '.join(map(str, args))}")
        return next(arg for arg in args if str(arg) == text)
    if origin is tuple:
        return tuple(convert(item, args[0] if args else str, key) for item in text.split())
    if hint is bool:
        if text.lower() not in ("true", "false"):
            raise UsageError(f"{key}={text}: expected true or false")
        return text.lower() == "true"
    try:
        return hint(text) if hint in (int, float, str, Path) else text
    except ValueError:
        raise UsageError(f"{key}={text}: expected a value of type {hint.__name__}") from None


def apply_variant(base: Config, variant: Variant, presets: Mapping[str, Mapping[str, Any]]) -> Config:
    """A checked copy of ``base`` with the variant's preset and options; a :class:`UsageError` names the variant."""
    config = copy.deepcopy(base)
    try:
        for key, value in [*presets[variant.preset].items(), *variant.options]:
            set_option(config, key, value)
        config.check()
    except UsageError as err:
        raise UsageError(f"variant {variant.label!r}: {err}") from None
    return config


def parse_shard(text: str) -> tuple[int, int]:
    """``I/N`` -> (I, N), with 1 <= I <= N."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not match or not 1 <= int(match[1]) <= int(match[2]):
        raise UsageError(f"--shard {text}: expected I/N with 1 <= I <= N, e.g. 1/2")
    return int(match[1]), int(match[2])


@dataclass(frozen=True)
class Job:
    """One fit of the grid."""

    input: str
    variant: Variant
    folder: Path


def read_metrics(folder: Path) -> Optional[dict]:
    """A fit folder's ``metrics.json`` (None when absent); a :class:`UsageError` names a damaged one."""
    path = Path(folder) / "metrics.json"
    if not path.exists():
        return None
    try:
        metrics = json.loads(path.read_text())
    except (OSError, ValueError):
        metrics = None
    if not isinstance(metrics, dict):
        raise UsageError(f"{path} is damaged (not a fit's metrics); delete it, or pass --overwrite to fit again")
    return metrics


def job_metrics(folder: Path) -> Optional[dict]:
    """The ``metrics.json`` of a finished job (None while unfinished: missing, unreadable or marked ``stopped``)."""
    try:
        metrics = read_metrics(folder)
    except UsageError:
        return None
    return metrics if metrics is not None and not metrics.get("stopped") else None


def check_fit_folder(out: Path, overwrite: bool, outputs: Sequence[str]) -> None:
    """Refuse an ``out`` holding a finished or damaged fit, or stray files matching ``outputs``, unless ``overwrite``,
    which removes them and the checkpoint; a fit stopped by its time budget goes on."""
    out = Path(out)
    if overwrite:
        for pattern in [*outputs, CHECKPOINT_FILE, "metrics.json"]:
            for path in out.glob(pattern):
                path.unlink()
        return
    metrics = read_metrics(out)
    if metrics is not None and not metrics.get("stopped"):
        raise UsageError(f"--output-dir {out} already holds a fit; pass --overwrite or choose another --output-dir")
    others = [path.name for pattern in outputs for path in out.glob(pattern)]
    if metrics is None and others and not (out / CHECKPOINT_FILE).exists():
        raise UsageError(f"--output-dir {out} holds {others[0]}, not of a fit in progress; pass --overwrite to replace "
                         "it or choose another --output-dir")  # fmt: skip


def run_bench(
    out: Path,
    inputs: Sequence[str],
    variants: Sequence[Variant],
    run_job: Callable[[Job], Any],
    protocol: Any,
    columns: Sequence[tuple[str, str, str]],
    shard: str = "1/1",
    figure: Optional[Callable[[Path, list[dict]], None]] = None,
    note: str = "",
) -> list[dict]:
    """Run this shard's unfinished jobs, writing the results after each; returns the finished jobs' rows.
    ``run_job`` writes a job's ``metrics.json`` last; ``protocol`` (plain data) must match the folder's earlier runs;
    ``columns``: ``(header, metrics key, format)``, the first also per input; ``figure`` draws from the rows."""
    index, count = parse_shard(shard)
    labels = [variant.label for variant in variants]
    if len(set(labels)) < len(labels):
        raise UsageError(f"--variants: two variants have the label {next(x for x in labels if labels.count(x) > 1)!r}")
    check_protocol(Path(out), protocol)
    jobs = [Job(name, variant, Path(out) / "runs" / name / variant.label) for name in inputs for variant in variants]
    mine = [job for number, job in enumerate(jobs) if number % count == index - 1]
    metrics = [read_metrics(job.folder) for job in mine]  # a damaged one stops the bench here, before any fit
    todo = [job for job, done in zip(mine, metrics) if done is None or done.get("stopped")]
    try:
        for number, job in enumerate(todo, 1):
            logger.info(f"job {number} of {len(todo)}: {job.variant.label} on {job.input}")
            run_job(job)
            if number < len(todo):
                write_results(Path(out), jobs, columns, figure, note)
    finally:  # also after an interrupted job: the table covers every finished one
        rows = write_results(Path(out), jobs, columns, figure, note)
    return rows


def check_protocol(out: Path, protocol: Any) -> None:
    """Record ``protocol`` in ``out``, or refuse a folder holding a bench run with another."""
    path, key = out / PROTOCOL_FILE, settings_key(protocol)
    if path.is_file() and settings_key(json.loads(path.read_text())) != key:
        raise UsageError(
            f"{out} holds a bench run with other settings ({path}); choose another --output-dir or run it "
            "with the same options"
        )
    if not path.is_file():
        out.mkdir(parents=True, exist_ok=True)
        write_json(path, json.loads(key)[0])


def write_results(
    out: Path,
    jobs: Sequence[Job],
    columns: Sequence[tuple[str, str, str]],
    figure: Optional[Callable[[Path, list[dict]], None]],
    note: str = "",
) -> list[dict]:
    """``results.json`` (finished jobs' metrics without histories) and ``results.md`` (a row per variant)."""
    rows = []
    for job in jobs:
        metrics = job_metrics(job.folder)
        if metrics is not None:
            kept = {key: value for key, value in metrics.items() if not key.endswith("_history")}
            rows.append({"input": job.input, "variant": job.variant.label, **kept})
    inputs = list(dict.fromkeys(job.input for job in jobs))
    variants = list(dict.fromkeys(job.variant.label for job in jobs))
    header, key, form = columns[0]
    lines = [
        f"| variant | {' | '.join(f'{header} {name}' for name in inputs)} | "
        + " | ".join(f"mean {title}" for title, _, _ in columns)
        + " | jobs |"
    ]
    lines.append("|---" * (len(inputs) + len(columns) + 2) + "|")
    for label in variants:
        mine = {row["input"]: row for row in rows if row["variant"] == label}
        cells = [cell(mine[name], key, form) if name in mine else "" for name in inputs]
        for _, column, column_form in columns:
            values = [row[column] for row in mine.values() if isinstance(row.get(column), (int, float))]
            cells.append(format(sum(values) / len(values), column_form) if values else "")
        lines.append(f"| {label} | {' | '.join(cells)} | {len(mine)}/{len(inputs)} |")
    write_json(out / "results.json", rows)
    footer = f"{note}\n" if note else ""
    write_text(out / "results.md", "\n".join(lines) + f"\n\n{footer}A diverged job is marked with `(diverged)`.\n")
    if figure is not None and rows:
        figure(out, rows)
    return rows


def cell(row: dict, key: str, form: str) -> str:
    value = row.get(key)
    text = format(value, form) if isinstance(value, (int, float)) else "-"
    return text + (" (diverged)" if row.get("diverged") else "")
