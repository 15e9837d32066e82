"""What every console script shares: tyro parsing, one-line errors with their exit statuses (a usage or file error 2,
a divergence 3, Ctrl-C 130), and the package's log notices (logger ``rff_field``) as lines on stderr."""

from __future__ import annotations

import logging
import sys
from typing import Any, Optional, Sequence

import tyro

from rff_field.core.errors import (
    DIVERGED_EXIT_STATUS,
    INTERRUPTED_EXIT_STATUS,
    USAGE_EXIT_STATUS,
    TrainingDiverged,
    UsageError,
)


class NoticeHandler(logging.Handler):
    """Writes each record as one line to the ``sys.stderr`` of the moment (a test may have replaced it)."""

    def emit(self, record: logging.LogRecord) -> None:
        print(self.format(record), file=sys.stderr)


def show_notices(prog: str) -> None:
    """Print the package's log records of level INFO and above as ``prog: message`` on stderr."""
    logger = logging.getLogger("rff_field")
    for handler in [h for h in logger.handlers if isinstance(h, NoticeHandler)]:
        logger.removeHandler(handler)
    handler = NoticeHandler()
    handler.setFormatter(logging.Formatter(f"{prog}: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)


def run_command(prog: str, command_type: Any, description: str, args: Optional[Sequence[str]] = None) -> Any:
    """Parse ``args`` (default: ``sys.argv[1:]``) into ``command_type`` (a dataclass with ``main()``, or a Union of
    them as subcommands) and return its ``main()``; an error exits with one line and its status."""
    show_notices(prog)
    try:
        command = tyro.cli(command_type, args=args, description=description, prog=prog)
        return command.main()
    except UsageError as err:
        print(f"{prog}: error: {first_line(err)}", file=sys.stderr)
        sys.exit(USAGE_EXIT_STATUS)
    except TrainingDiverged as err:
        print(f"{prog}: {first_line(err)}", file=sys.stderr)
        sys.exit(DIVERGED_EXIT_STATUS)
    except OSError as err:  # a file or folder the command could not read or write
        where = f" {err.filename}:" if err.filename else ""
        print(f"{prog}: error:{where} {err.strerror or first_line(err) or type(err).__name__}", file=sys.stderr)
        sys.exit(USAGE_EXIT_STATUS)
    except KeyboardInterrupt as err:
        print(f"{prog}: {first_line(err) or 'interrupted'}", file=sys.stderr)
        sys.exit(INTERRUPTED_EXIT_STATUS)


def first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else ""
