"""The variant grammar every benchmark shares: ``[LABEL:]METHOD[,key=value...]``.

A variant is a method plus overrides of its options, e.g. ``filtered-pe,line_search.enabled=false`` or
``wide:mlp-pe,hidden_features=300``. A key is an option's name (dashes or underscores), dotted for a nested
option (``line_search.lr_max``); a name that occurs once in the whole config may be given alone (``lr_max``).
Without a label, the variant's label is its text with unsafe characters replaced. A benchmark may name
presets: a preset's name given alone stands for its spec and labels it.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Optional, Sequence

from rff_field.common.outputs import check_plain_name
from rff_field.core.errors import UsageError
from rff_field.core.optim import LineSearchConfig
from rff_field.inr.config import FILTER_ONLY_OPTIONS

LEGACY_KEYS = {
    "line_search": "line_search.enabled",
    "ls_eps": "line_search.eps",
    "filter_lr_max": "line_search.lr_max",
    "filter_lr_min": "line_search.lr_min",
    "line_search_direction": "line_search.direction",
    "pe_bands": "wire_bands",
}
"""Option names of earlier versions, accepted with a notice."""


@dataclass(frozen=True)
class Variant:
    """A labelled method with overrides.

    Args:
        label: Name of the variant's rows and folders.
        spec: ``METHOD[,key=value...]`` (the text after the label).
        overrides: ``{"method": METHOD, key: value, ...}``, keys with underscores, values as written.
    """

    label: str
    spec: str
    overrides: dict

    @property
    def method(self) -> str:
        return self.overrides["method"]


def safe_label(text: str) -> str:
    """``text`` with every run of characters other than letters, digits, '.', '_' and '-' replaced by '_'."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)


def parse_variant(text: str, presets: Mapping[str, str] = {}, methods: Optional[Sequence[str]] = None) -> Variant:
    """Parse ``[LABEL:]METHOD[,key=value...]`` or a preset's name.

    The form ``METHOD:key=value,...`` of earlier ``rff-sdf bench`` versions is read too (labelled by its text).

    Args:
        text: The variant as written.
        presets: Named variants (name -> spec).
        methods: The methods allowed (None: any).
    """
    text = text.strip()
    label, colon, spec = text.partition(":")
    if not colon:
        label, spec = ("", text) if text not in presets else (text, presets[text])
    elif "=" in spec.split(",")[0]:  # METHOD:key=value,... (earlier rff-sdf bench form)
        label, spec = text, f"{label},{spec}"
    elif not label:
        raise UsageError(f"variant {text!r}: the label before ':' is empty; give one or leave out the ':'")
    else:
        check_plain_name(label, f"the label of variant {text!r},")
    parts = [part.strip() for part in spec.split(",") if part.strip()]
    if not parts or "=" in parts[0]:
        raise UsageError(f"variant {text!r}: expected [LABEL:]METHOD[,key=value...], e.g. filtered-pe,lr_max=1e-2")
    method = parts[0]
    if methods is not None and method not in methods:
        known = ", ".join(methods) + (f"; presets: {', '.join(presets)}" if presets else "")
        raise UsageError(f"variant {text!r}: unknown method {method!r}; choose one of {known}")
    overrides = {"method": method}
    for part in parts[1:]:
        key, sep, value = part.partition("=")
        if not sep:
            raise UsageError(f"variant {text!r}: {part!r} is not key=value")
        key = key.strip().replace("-", "_")
        if key == "method":
            raise UsageError(f"variant {text!r}: the method is its first item; write {value.strip()},... instead of "
                             f"{method},method={value.strip()}")  # fmt: skip
        overrides[key] = value.strip()
    return Variant(label or safe_label(text), spec, overrides)


def note_unused_filter_keys(variant: Variant, notify: Callable[[str], None]) -> None:
    """Pass ``notify`` a notice naming the keys of ``variant`` that only a filtered method reads, when its method has
    no filter (they are ignored)."""
    if variant.method.startswith("filtered-"):
        return
    line_search = {field.name for field in dataclasses.fields(LineSearchConfig)}
    unused = [key for key in variant.overrides
              if LEGACY_KEYS.get(key, key).split(".")[0] in FILTER_ONLY_OPTIONS or key in line_search]  # fmt: skip
    if unused:
        verb = "is" if len(unused) == 1 else "are"
        notify(f"variant {variant.label}: {variant.method} has no filter, so {', '.join(unused)} {verb} ignored")


def option_paths(config: object, prefix: str = "", in_dict: bool = False) -> dict[str, tuple[object, str, bool]]:
    """Every option of a (nested) dataclass instance: dotted path -> (the instance holding it, its field name,
    whether it is reached through a dictionary).

    Dataclasses inside dictionaries are included under their keys (nerfstudio's
    ``optimizers.fields.optimizer.lr``).
    """
    out: dict[str, tuple[object, str, bool]] = {}
    for field in dataclasses.fields(config):
        if field.name.startswith("_"):
            continue
        value = getattr(config, field.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            out.update(option_paths(value, f"{prefix}{field.name}.", in_dict))
        elif isinstance(value, dict):
            out.update(_dict_paths(value, f"{prefix}{field.name}."))
        else:
            out[prefix + field.name] = (config, field.name, in_dict)
    return out


def _dict_paths(mapping: dict, prefix: str) -> dict[str, tuple[object, str, bool]]:
    out: dict[str, tuple[object, str, bool]] = {}
    for key, value in mapping.items():
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            out.update(option_paths(value, f"{prefix}{key}.", in_dict=True))
        elif isinstance(value, dict):
            out.update(_dict_paths(value, f"{prefix}{key}."))
    return out


def set_options(
    configs: Iterable[object],
    overrides: Mapping[str, str],
    skip: Iterable[str] = (),
    notify: Optional[Callable[[str], None]] = None,
) -> None:
    """Set ``key=value`` overrides on the dataclass instances ``configs`` (typed and checked).

    Args:
        configs: The configs whose options the keys name (searched in this order).
        overrides: Key (a dotted path or a name that occurs once) -> value as written.
        skip: Keys that are not options (e.g. a benchmark's own ``match_params``).
        notify: Receives a notice for each option name of an earlier version.
    """
    paths: dict[str, tuple[object, str]] = {}
    in_dicts: set[str] = set()  # reached by their full path only, so that short names mean what they meant before
    for config in configs:
        for path, (holder, name, in_dict) in option_paths(config).items():
            paths.setdefault(path, (holder, name))
            if in_dict:
                in_dicts.add(path)

    def matching(key: str) -> list[str]:
        return [key] if key in paths else [p for p in paths if p.endswith("." + key) and p not in in_dicts]

    for key, text in overrides.items():
        if key in skip:
            continue
        matches = matching(key)
        if not matches and key in LEGACY_KEYS:
            if notify is not None:
                notify(f"option {key!r} in a variant is now {LEGACY_KEYS[key]!r}")
            key = LEGACY_KEYS[key]
            matches = matching(key)
        if not matches:
            raise UsageError(f"unknown option {key!r} in a variant; use an option of the config (see --help)")
        if len(matches) > 1:
            raise UsageError(f"option {key!r} in a variant is ambiguous: write one of {', '.join(matches)}")
        holder, name = paths[matches[0]]
        hint = typing.get_type_hints(type(holder))[name]
        setattr(holder, name, convert(text, hint, key))


def convert(text: str, hint: object, name: str) -> object:
    """``text`` as a value of the type ``hint`` (bool, int, float, str, Literal, Optional, tuple of those)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union:
        if text.lower() in ("none", "null"):
            return None
        return convert(text, next(a for a in args if a is not type(None)), name)
    if origin is typing.Literal:
        if text not in args:
            raise UsageError(f"{name}={text}: choose one of {', '.join(map(str, args))}")
        return text
    if origin is tuple:
        items = [item for item in text.split(" ") if item]
        inner = args[0] if args else str
        return tuple(convert(item, inner, name) for item in items)
    if hint is bool:
        if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
            raise UsageError(f"{name}={text}: expected true or false")
        return text.lower() in ("true", "1", "yes")
    try:
        return hint(text) if hint in (int, float, str) else text
    except ValueError:
        raise UsageError(f"{name}={text}: expected a value of type {getattr(hint, '__name__', hint)}") from None
