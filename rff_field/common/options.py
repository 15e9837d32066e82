"""How nested configs appear on the command line (tyro markers shared by the configs and the commands)."""

import tyro

Flat = tyro.conf.arg(name="", prefix_name=False)
"""A nested config whose options drop its name (``--lr``, not ``--train.lr``); configs nested in it keep theirs."""

Values = tyro.conf.FlagConversionOff
"""A config whose booleans take a value, as in ``ns-train`` (``--embedding.filtered False``)."""
