"""Whether a command's output is complete: after that, the ``abm`` console script
(:mod:`abm.entry`) ignores Ctrl-C and SIGTERM, since what remains is printing. And whether such
an interrupt was received before: the KeyboardInterrupt it raises may be turned into another
error, or swallowed, by a library's compiled code it lands in (matplotlib's renderer reports it
as "Invalid affine transformation matrix"), so the command asks here rather than trusting the
exception."""

from __future__ import annotations

_written: list[bool] = []
_received: list[int] = []
_reported: list[bool] = []
STARTING = "interrupted while starting; nothing was run"  # Ctrl-C while the libraries load


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
    import sys

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
