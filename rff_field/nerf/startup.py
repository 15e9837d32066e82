"""What the plugin changes in every ``ns-*`` command while it is installed: a faster start, and help texts as
its own commands print them.

nerfstudio lists the external methods it can offer to install (26 of them) with a dummy trainer config each, whose
``__post_init__`` tells whether ``get_external_methods`` built it with ``inspect.stack()[2].function``.
``inspect.stack`` reads the source file of every frame and searches every loaded module for it: seconds per command
(``benchmarks/nerf/startup.md``). The plugin is loaded just before that list is built, so it swaps the check for
the same test on ``sys._getframe(2)``: the same frame, the same answer.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any, Callable

from rff_field.common.help_text import terminal_help_text


def _skip_when_listed(post_init: Callable[[Any], None]) -> Callable[[Any], None]:
    @functools.wraps(post_init)
    def __post_init__(self: Any) -> None:
        # frames: 0 this function, 1 the dataclass __init__, 2 its caller (nerfstudio's inspect.stack()[2])
        if sys._getframe(2).f_code.co_name == "get_external_methods":
            return
        post_init(self)  # an external method chosen on the command line: nerfstudio's offer to install it

    __post_init__.rff_field_patched = True  # type: ignore[attr-defined]
    return __post_init__


def speed_up_external_method_listing() -> None:
    """Replace the stack walk of nerfstudio's ``ExternalMethodDummyTrainerConfig.__post_init__`` (once)."""
    try:
        from nerfstudio.configs.external_methods import ExternalMethodDummyTrainerConfig
    except ImportError:  # another nerfstudio layout: leave it as it is
        return
    post_init = getattr(ExternalMethodDummyTrainerConfig, "__post_init__", None)
    if post_init is None or getattr(post_init, "rff_field_patched", False):
        return
    ExternalMethodDummyTrainerConfig.__post_init__ = _skip_when_listed(post_init)  # type: ignore[method-assign]


def join_help_lines_in_ns_commands() -> None:
    """In an ``ns-*`` command, let tyro print every help text (nerfstudio's too) as the plugin's commands do
    (:func:`~rff_field.common.help_text.terminal_help_text`): wrapped docstrings joined, reST markup plain."""
    if not os.path.basename(sys.argv[0]).startswith("ns-"):
        return  # another program that imports the method configs keeps tyro as it is
    from tyro import _strings as tyro_strings

    tyro_strings.remove_single_line_breaks = terminal_help_text
