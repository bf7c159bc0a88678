"""Whether a command's output is complete: after that, the ``abm`` console script
(:mod:`abm.entry`) ignores Ctrl-C and SIGTERM, since what remains is printing."""

from __future__ import annotations

_written: list[bool] = []
STARTING = "interrupted while starting; nothing was run"  # Ctrl-C while the libraries load


def results_written() -> None:
    """A command has written all its output (in the console script, later interrupts are
    ignored; elsewhere this changes nothing)."""
    _written.append(True)


def output_complete() -> bool:
    """Whether :func:`results_written` was called since :func:`reset`."""
    return bool(_written)


def reset() -> None:
    """A new command starts: its output is not written yet."""
    _written.clear()
