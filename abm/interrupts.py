"""Whether a command's output is complete: after that, the ``abm`` console script
(:mod:`abm.entry`) ignores Ctrl-C and SIGTERM, since what remains is printing. And whether such
an interrupt was received before: the KeyboardInterrupt it raises may be turned into another
error, or swallowed, by a library's compiled code it lands in (matplotlib's renderer reports it
as "Invalid affine transformation matrix"), so the command asks here rather than trusting the
exception."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: loaded before the start-up handler
if TYPE_CHECKING:
    from typing import NoReturn

_written: list[bool] = []
_received: list[int] = []
_reported: list[bool] = []
STARTING = "interrupted while starting; nothing was run"  # Ctrl-C while the libraries load


def end_starting(signum: int, frame: object = None) -> NoReturn:
    """A signal handler for the command's start-up: Ctrl-C (SIGINT) or SIGTERM while the command
    line loads ends the process at once with :data:`STARTING` and 128 + the signal. Nothing has
    started; a KeyboardInterrupt raised instead would end it with an import traceback, or land in
    code an extension module runs while it loads."""
    sys.stderr.write(STARTING + "\n")
    sys.stderr.flush()
    os._exit(128 + signum)


def results_written() -> None:
    """A command has written all its output (in the console script, later interrupts are
    ignored; elsewhere this changes nothing)."""
    if not _written:  # once: abm.run(...).write() may be called any number of times
        _written.append(True)


def output_complete() -> bool:
    """Whether :func:`results_written` was called since :func:`reset`."""
    return bool(_written)


def note_signal(signum: int) -> None:
    """The console script received ``signum`` (SIGINT or SIGTERM) before the output was complete."""
    _received.append(signum)


def interrupted() -> int | None:
    """The first interrupting signal received since :func:`reset`, or None."""
    return _received[0] if _received else None


def report(message: str) -> None:
    """Say on stderr how an interrupt ended the command (once it has cleaned up)."""
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
    _reported.append(True)


def reported() -> bool:
    """Whether :func:`report` said how an interrupt ended the command, since :func:`reset`."""
    return bool(_reported)


def reset() -> None:
    """A new command starts: its output is not written yet, and nothing interrupted it."""
    _written.clear()
    _received.clear()
    _reported.clear()
