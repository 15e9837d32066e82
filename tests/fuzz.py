"""What the fuzz tests share: hypothesis's settings for a fast run (in the default suite, the same examples every
time) and a long one (marked slow, new examples every run), and the contract every command keeps whatever its input:
exit 0 with a correct result, or exit 2 with one line naming an option or file (tyro's own parse errors: its box
naming the option); never a traceback."""

from __future__ import annotations

import contextlib
import functools
import io
import math
import re
from typing import Callable, Iterable, Optional

import pytest
from hypothesis import HealthCheck, Phase, event, settings
from hypothesis import strategies as st

RUNS = [pytest.param(2, id="fast"), pytest.param(30, id="long", marks=pytest.mark.slow)]
"""The multiple of a test's example count that a run draws: fast (the default suite) or long (``-m slow``)."""


def fuzz(examples: int, factor: int) -> settings:
    """Settings of ``examples * factor`` examples: the fast run derandomized (the same examples every time), the long
    one random; no example database, no deadline, no shrinking beyond a few steps (commands are slow)."""
    return settings(
        max_examples=examples * factor,
        derandomize=factor == RUNS[0].values[0],
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target],
        print_blob=True,
    )


def command(entrypoint: Callable, args: Iterable) -> tuple[int, str]:
    """Run a console script in-process: its exit status (0 when it returns) and what it wrote on stderr. Any other
    exception propagates: a traceback is a broken contract."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            entrypoint([str(arg) for arg in args])
            code = 0
        except SystemExit as end:
            code = end.code
    return code, err.getvalue()


def assert_contract(code: int, err: str, named: Iterable[str], correct: Optional[Callable[[], None]] = None,
                    diverged: Iterable[str] = ()) -> None:  # fmt: skip
    """Exit 0 and ``correct()`` holds; or exit 2 with a last line that is an error naming one of ``named``; or, when
    ``diverged`` (rate options that were raised), exit 3 naming one of them."""
    lines = err.strip().splitlines()
    event(f"exit status {code}")  # pytest --hypothesis-show-statistics shows how often each ended so
    assert "Traceback" not in err, err
    if code == 0:
        if correct is not None:
            correct()
        return
    diverged = list(diverged)
    if code == 3 and diverged:
        assert lines and "diverged" in lines[-1] and any(option in lines[-1] for option in diverged), err
        return
    assert code == 2, f"exit status {code}:\n{err}"
    if "For full helptext" in err:  # tyro's own parse errors: a box naming the option, with suggestions
        assert any(name in err for name in named if name), err
        return
    assert lines and ": error: " in lines[-1], err
    assert any(name in lines[-1] for name in named if name), f"the error names none of {list(named)}: {lines[-1]}"


def options_given(args: Iterable) -> list[str]:
    """The options (``--x``) and file or folder paths among ``args``."""
    return [str(arg) for arg in args if str(arg).startswith("--") or "/" in str(arg)]


@functools.cache
def options_of(entrypoint: Callable, *subcommand: str) -> tuple[str, ...]:
    """Every option a command's ``--help`` lists (an error may name one as the way out)."""
    help_text = io.StringIO()
    with contextlib.redirect_stdout(help_text), contextlib.suppress(SystemExit):
        entrypoint([*subcommand, "--help"])
    help_text = help_text.getvalue()
    return tuple(sorted(set(re.findall(r"--[a-z0-9][a-z0-9.-]*", help_text)) - {"--help"}, key=len, reverse=True))


NUMBERS = st.one_of(
    st.sampled_from([0.0, -1.0, 1e-30, 1e30, math.inf, -math.inf, math.nan, 1.0, 0.5]),
    st.floats(allow_nan=True, allow_infinity=True, width=64),
)
"""Floats a user may type, the awkward ones first."""
INTEGERS = st.sampled_from([0, -1, 1, 2, 2**31, 2**63, 10**12, -(2**70), 2**70])
"""Awkward integers a user may type (each test draws the small valid ones itself: a valid size in between, such as a
grid of 1000 points a side, is right and merely slow)."""


def number_text(value: float) -> str:
    """A float as a command line spells it."""
    return repr(value) if math.isfinite(value) else {math.inf: "inf", -math.inf: "-inf"}.get(value, "nan")
