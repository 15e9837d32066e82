"""Docstrings as terminal help: tyro's own joiner breaks a help text at every continuation line of an indented
attribute docstring (and before every line that starts with a digit), and prints reST markup as it is."""

from __future__ import annotations

import contextlib
import inspect
import re
from typing import Iterator

LIST_ITEM = re.compile(r"([-*•]|\d+[.)])\s|[\"']")  # "- a", "1. a", and '"name" - what it is' (nerfstudio's)
INLINE_CODE = re.compile(r"``([^`]+)``")
CROSS_REFERENCE = re.compile(r":[a-z]+:`(~[\w.]*\.)?([^`]+)`")  # with ~, Sphinx shows the last name only


def join_wrapped_lines(text: str) -> str:
    """Help text with the line breaks of a wrapped docstring removed: paragraphs (a blank line between), list items
    (``- ``, ``* ``, ``1. ``, a quoted name) and indented lines (a table) keep theirs; the help formatter wraps the
    rest."""
    paragraphs = []
    for paragraph in re.split(r"\n\s*\n", inspect.cleandoc(text)):
        lines: list[str] = []
        for line in paragraph.splitlines():
            if lines and not (line[:1].isspace() or LIST_ITEM.match(line)):
                lines[-1] += " " + line.strip()
            else:
                lines.append(line.rstrip())
        paragraphs.append("\n".join(lines))
    return "\n\n".join(paragraphs)


def terminal_help_text(docstring: str) -> str:
    """A docstring as help text: wrapped lines joined (:func:`join_wrapped_lines`), reST's ````code```` and
    ``:mod:`name``` as `code` and `name`."""
    return CROSS_REFERENCE.sub(r"`\2`", INLINE_CODE.sub(r"`\1`", join_wrapped_lines(docstring)))


@contextlib.contextmanager
def joined_help_lines() -> Iterator[None]:
    """Parse with :func:`terminal_help_text` in place of tyro's own joiner."""
    from tyro import _strings as tyro_strings

    original = tyro_strings.remove_single_line_breaks
    tyro_strings.remove_single_line_breaks = terminal_help_text
    try:
        yield
    finally:
        tyro_strings.remove_single_line_breaks = original
