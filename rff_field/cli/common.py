"""What every console script shares: option names of earlier versions, one-line errors and exit statuses.

Each command is a dataclass with a ``main()`` (tyro parses it); :func:`run_command` turns a
:class:`~rff_field.core.errors.UsageError` into one line on stderr and exit status 2, a diverged training into
exit status 3, Ctrl-C into 130, and a closed output pipe (``rff-image --help | head``) into a quiet exit 141.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import sys
from typing import Any, Iterator, Mapping, Optional, Sequence

import tyro

from rff_field.common.help_text import joined_help_lines
from rff_field.common.progress import own_warnings_as_notes
from rff_field.core.errors import DIVERGED_EXIT_STATUS, USAGE_EXIT_STATUS, JobsFailed, TrainingDiverged, UsageError
from rff_field.inr.config import FILTER_ONLY_OPTIONS

LINE_SEARCH_FLAGS = {
    "--line-search": "--line-search.enabled",
    "--no-line-search": "--line-search.no-enabled",
}
"""Flags of earlier versions that every command with a line search accepts."""
BROKEN_PIPE_EXIT_STATUS = 141
"""What a shell reports for a command that SIGPIPE ended (128 + 13)."""


def translate_legacy_flags(argv: Sequence[str], legacy: Mapping[str, str]) -> list[str]:
    """``argv`` with flags of earlier versions renamed, each with a notice on stderr."""
    out = []
    for arg in argv:
        name, eq, value = arg.partition("=")
        if name in legacy:
            print(f"note: {name} is now {legacy[name]}", file=sys.stderr)
            arg = legacy[name] + eq + value
        out.append(arg)
    return out


def expand_home(argv: Sequence[str]) -> list[str]:
    """``argv`` with a leading ``~`` of a value expanded to the home folder, as the shell does for ``--out ~/x`` but
    not for ``--out=~/x`` or a quoted ``'~/x'``; so no command writes into a folder named ``~``."""
    out = []
    for arg in argv:
        name, eq, value = arg.partition("=")
        if arg.startswith("~"):
            arg = os.path.expanduser(arg)
        elif name.startswith("--") and eq and value.startswith("~"):
            arg = name + eq + os.path.expanduser(value)
        out.append(arg)
    return out


def check_no_empty_values(argv: Sequence[str]) -> None:
    """Raise :class:`UsageError` for an option given an empty value (``--out "$OUT"`` with ``OUT`` unset would
    otherwise mean the current folder)."""
    for previous, arg in zip(["", *argv], argv):
        name, eq, value = arg.partition("=")
        if arg == "" and previous.startswith("--") or name.startswith("--") and eq and not value:
            option = previous if arg == "" else name
            raise UsageError(f"{option} was given an empty value (an unset shell variable?); give a value")


def check_no_dash_paths(argv: Sequence[str]) -> None:
    """Raise :class:`UsageError` for an existing file whose name starts with ``-`` given after an option: the
    parser would read it as an option and say only that the value is missing."""
    for previous, arg in zip(["", *argv], argv):
        if arg.startswith("-") and previous.startswith("--") and "=" not in previous and os.path.lexists(arg):
            how = f"{previous}={arg} or {previous} ./{arg}"
            raise UsageError(f"{arg} starts with '-' and reads as an option; write {how}")


def command_arguments(prog: str, argv: Sequence[str], legacy_flags: Mapping[str, str] = {}) -> list[str]:
    """``argv`` as the command parses it: flags of earlier versions renamed, ``~`` expanded; exits with status 2
    on an empty value or a path that would read as an option."""
    argv = expand_home(translate_legacy_flags(argv, legacy_flags))
    try:
        check_no_empty_values(argv)
        check_no_dash_paths(argv)
    except UsageError as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        sys.exit(USAGE_EXIT_STATUS)
    return argv


def call_main(prog: str, command: Any) -> tuple[int, Any]:
    """Run ``command.main()``; returns (exit status, its result). User errors print one line on stderr."""
    try:
        return 0, command.main()
    except UsageError as err:
        message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        print(f"{prog}: error: {message}", file=sys.stderr)
        return USAGE_EXIT_STATUS, None
    except TrainingDiverged as err:
        print(f"{prog}: {err}", file=sys.stderr)
        return DIVERGED_EXIT_STATUS, None
    except JobsFailed as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 1, None
    except KeyboardInterrupt as err:  # a fit says where it stopped and how to resume it
        print(f"{prog}: {str(err) or 'interrupted'}", file=sys.stderr)
        return 130, None
    except OSError as err:
        if err.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        where = f" writing {err.filename}" if err.filename else ""
        print(f"{prog}: error: no space left on the device{where}; free some and run the same command again (a fit "
              "goes on from its checkpoint)", file=sys.stderr)  # fmt: skip
        return 1, None
    except (MemoryError, RuntimeError) as err:  # numpy's and torch's failed allocations (CPU and CUDA)
        text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        if isinstance(err, RuntimeError) and not (type(err).__name__ == "OutOfMemoryError" or "allocate" in text):
            raise
        print(f"{prog}: error: out of memory ({text}); choose smaller sizes or batches", file=sys.stderr)
        return 1, None


@contextlib.contextmanager
def quiet_broken_pipe() -> Iterator[None]:
    """Exit with status 141 and no traceback when the reader of stdout goes away (``--help | head``)."""
    try:
        yield
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python flushes stdout again at exit
        sys.exit(BROKEN_PIPE_EXIT_STATUS)


def parse_command(command_type: Any, description: str, args: Optional[Sequence[str]] = None, **kwargs: Any) -> Any:
    """``tyro.cli`` with help texts joined as written (:func:`joined_help_lines`), and the script's name, not its
    path, in usage lines."""
    kwargs.setdefault("prog", os.path.basename(sys.argv[0]))
    with joined_help_lines():
        return tyro.cli(command_type, args=args, description=description, **kwargs)


def run_command(
    prog: str,
    command_type: Any,
    description: str,
    legacy_flags: Mapping[str, str] = {},
    args: Optional[Sequence[str]] = None,
    default: Any = None,
) -> Any:
    """Parse the command line into ``command_type`` and run its ``main()``; exits on user errors.

    Args:
        prog: The console script's name, for messages.
        command_type: A command dataclass, or a Union of subcommands.
        description: Shown by ``--help``.
        legacy_flags: Flags of earlier versions and their current names.
        args: The arguments (default: ``sys.argv[1:]``).
        default: Defaults that the command line overrides (an instance of ``command_type``).
    """
    argv = command_arguments(prog, sys.argv[1:] if args is None else args, legacy_flags)
    defaults = {} if default is None else {"default": default}
    with quiet_broken_pipe(), own_warnings_as_notes():
        status, result = call_main(prog, parse_command(command_type, description, argv, prog=prog, **defaults))
    if status:
        sys.exit(status)
    return result


def note_unused_filter_options(method: str, *configs: Any) -> None:
    """A notice on stderr naming the filter's options given away from their defaults to ``method`` when it has no
    filter (they are ignored)."""
    if method.startswith("filtered-"):
        return
    given = []
    for config in configs:
        for spec in dataclasses.fields(config):
            if spec.name in FILTER_ONLY_OPTIONS:
                default = spec.default_factory() if spec.default_factory is not dataclasses.MISSING else spec.default
                if getattr(config, spec.name) != default:
                    given.append("--" + spec.name.replace("_", "-") + (".*" if spec.name == "line_search" else ""))
    if given:
        print(f"note: {method} has no filter, so {', '.join(given)} {'is' if len(given) == 1 else 'are'} ignored",
              file=sys.stderr)  # fmt: skip
