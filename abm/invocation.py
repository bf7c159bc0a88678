"""How this process was started, for the manifests that runs and sweeps write: the ``abm``
command line when the console script (or ``python -m abm``) started it, None when abm is used
from Python (whose own program arguments say nothing about the run)."""

from __future__ import annotations

_command: list[str] = []


def set_command(args: list[str]) -> None:
    """The ``abm`` console script was started with ``args`` (``["abm", "run", ...]``)."""
    _command[:] = args


def command() -> list[str] | None:
    """The ``abm`` command line of this process, or None outside the console script."""
    return list(_command) or None
