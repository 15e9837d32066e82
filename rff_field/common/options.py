"""How nested configs appear on the command line (tyro markers shared by the configs and the commands)."""

from __future__ import annotations

import tyro

Flat = tyro.conf.arg(name="", prefix_name=False)
"""A nested config whose options appear without its name (``--iters``, not ``--fit.iters``); configs nested
inside it keep theirs (``--line-search.lr-max``)."""

NoPrefix = tyro.conf.OmitArgPrefixes
"""A nested config whose options, and those of every config inside it, appear without any prefix."""
