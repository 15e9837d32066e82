"""How nested configs appear on the command line (tyro markers shared by the configs and the commands).

Without tyro (a bare GPU machine running ``python -m rff_field.bench.table1``), the configs still import: the markers
are then inert annotations, and only the commands need tyro.
"""

from __future__ import annotations

import reprlib

try:
    import tyro
except ImportError:
    tyro = None

Flat = tyro.conf.arg(name="", prefix_name=False) if tyro is not None else "flat"
"""A nested config whose options appear without its name (``--iters``, not ``--fit.iters``); configs nested
inside it keep theirs (``--line-search.lr-max``)."""

NoPrefix = tyro.conf.OmitArgPrefixes if tyro is not None else "no-prefix"
"""A nested config whose options, and those of every config inside it, appear without any prefix."""

Hidden = tyro.conf.Suppress if tyro is not None else "hidden"
"""An inherited option that does not apply to this command (it keeps its default and is left out of --help)."""


def option_flag(key: str) -> str:
    """The command-line flag of a dotted config key, as the commands show it: nested configs without their names,
    but for the line search's (``fit.network.hidden_features`` -> ``--hidden-features``,
    ``train.line_search.lr_max`` -> ``--line-search.lr-max``). Keys that are not dotted names (``image content``)
    are returned unchanged."""
    parts = key.split(".")
    if not all(part.isidentifier() for part in parts):
        return key
    kept = parts[parts.index("line_search") :] if "line_search" in parts else parts[-1:]
    return "--" + ".".join(kept).replace("_", "-")


def option_value(value: object) -> str:
    """An option's value in a message (None, the unset optional: ``default``)."""
    return "default" if value is None else reprlib.repr(value)
