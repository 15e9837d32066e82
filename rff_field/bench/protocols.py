"""Benchmark protocols as data: TOML tables whose keys are a benchmark config's options.

A protocol file holds named tables (``[cpu]``, ``[paper]``, a study's parts...); ``FILE:NAME`` selects one. Its
keys are the config's fields, nested tables its nested configs (``[cpu.fit.network]``), and a table may start
from another with ``base = "NAME"``. Command-line options given after ``--protocol`` override the table. The
project's own files (``benchmarks/image/protocols.toml``, ``benchmarks/reproduction/protocols.toml``) ship in the
package and are found under those names from any folder.
"""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path
from typing import Any, TypeVar

from rff_field.core.errors import UsageError

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

T = TypeVar("T")

BUNDLED_PROTOCOLS = {
    f"benchmarks/{name}/protocols.toml": Path(__file__).parent / "protocol_tables" / f"{name}.toml"
    for name in ("image", "reproduction")
}
"""The project's protocol files, shipped with the package: their documented paths work from any folder."""


def read_protocol(spec: str) -> tuple[dict, str]:
    """The table ``NAME`` of ``FILE:NAME`` (with its ``base`` tables merged in), and its name."""
    path_text, _, name = spec.rpartition(":") if ":" in spec else (spec, "", "")
    path = Path(path_text)
    if not path.is_file() and path.as_posix() in BUNDLED_PROTOCOLS:  # outside a checkout, or an installed package
        path = BUNDLED_PROTOCOLS[path.as_posix()]
    if not path.is_file():
        what = f"{path} is a folder" if path.is_dir() else f"no file {path}"
        raise UsageError(f"--protocol {spec}: {what}; give FILE:NAME, e.g. benchmarks/image/protocols.toml:cpu")
    try:
        tables = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise UsageError(f"--protocol {spec}: {path} is not valid TOML ({err}); fix the file") from None
    tables = {key: value for key, value in tables.items() if isinstance(value, dict)}
    if not name or name not in tables:
        raise UsageError(f"--protocol {spec}: name one of the tables of {path}: {', '.join(tables) or '(none)'}")

    def resolve(table_name: str, seen: tuple[str, ...]) -> dict:
        table = dict(tables[table_name])
        base = table.pop("base", None)
        if base is None:
            return table
        if base in seen or base not in tables:
            raise UsageError(f"--protocol {spec}: table {table_name!r} has base {base!r}, which is missing or circular")
        return merge(resolve(base, (*seen, base)), table)

    return resolve(name, (name,)), name


def merge(base: dict, update: dict) -> dict:
    """``base`` updated by ``update``, nested tables merged key by key."""
    out = dict(base)
    for key, value in update.items():
        out[key] = merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def build_config(config_type: type[T], values: dict[str, Any], where: str = "") -> T:
    """An instance of the dataclass ``config_type`` from its defaults updated by ``values`` (nested dicts for
    nested configs; lists for tuples; strings for paths)."""
    return apply_values(config_type(), values, where)


def apply_values(config: T, values: dict[str, Any], where: str = "") -> T:
    """``config`` (a dataclass instance) with ``values`` set, recursively; unknown keys are an error."""
    hints = typing.get_type_hints(type(config))
    names = {field.name for field in dataclasses.fields(config)}
    for key, value in values.items():
        name = key.replace("-", "_")
        if name not in names:
            owners = [f.name for f in dataclasses.fields(config) if dataclasses.is_dataclass(getattr(config, f.name))
                      and name in {g.name for g in dataclasses.fields(getattr(config, f.name))}]  # fmt: skip
            hint = f"; it belongs in the nested table {where}{owners[0]}" if owners else "; see --help for the options"
            raise UsageError(f"protocol key {where}{key} is not an option here{hint}")
        current = getattr(config, name)
        if isinstance(value, dict) and dataclasses.is_dataclass(current):
            apply_values(current, value, f"{where}{key}.")
        else:
            setattr(config, name, _as_type(value, hints[name], f"{where}{key}"))
    return config


def _as_type(value: Any, hint: Any, key: str) -> Any:
    """``value`` as the type ``hint`` asks for; a value of another type is a :class:`UsageError` naming ``key``."""
    origin = typing.get_origin(hint)
    if origin is typing.Annotated:
        return _as_type(value, typing.get_args(hint)[0], key)
    if origin is typing.Union:
        if value is None:
            return None
        return _as_type(value, next(a for a in typing.get_args(hint) if a is not type(None)), key)
    if origin is tuple:
        if not isinstance(value, list):
            raise UsageError(f'protocol key {key} takes a list, e.g. ["a", "b"]; got {value!r}')
        inner = typing.get_args(hint)[0] if typing.get_args(hint) else Any
        return tuple(_as_type(item, inner, key) for item in value)
    if origin is typing.Literal and value not in typing.get_args(hint):
        raise UsageError(f"protocol key {key} takes one of {', '.join(map(str, typing.get_args(hint)))}; got {value!r}")
    if hint is Path and isinstance(value, str):
        return Path(value)
    expected = {int: (int,), float: (int, float), bool: (bool,), str: (str,)}.get(hint)
    if expected and (not isinstance(value, expected) or (hint is not bool and isinstance(value, bool))):
        raise UsageError(f"protocol key {key} takes a value of type {hint.__name__}; got {value!r}")
    return float(value) if hint is float else value
