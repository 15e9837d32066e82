"""How nested configs appear on the command line (tyro markers shared by the configs and the commands)."""

import tyro

Flat = tyro.conf.arg(name="", prefix_name=False)
"""A nested config whose options appear without its name (``--iters``, not ``--train.iters``); configs nested inside
it keep theirs (``--line-search.lr-max``, ``--embedding.filtered``)."""

Values = tyro.conf.FlagConversionOff
"""A config whose booleans take a value, as in ``ns-train`` (``--embedding.filtered False``); a command's own switches
(``--overwrite``) stay flags."""
