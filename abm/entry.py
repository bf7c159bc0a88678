"""The ``abm`` console script: imports the command line inside a guard, so that Ctrl-C while
the libraries load ends with one line and exit code 130 instead of an import traceback. A
termination request (SIGTERM, as ``kill`` or a batch scheduler sends) is handled as Ctrl-C, so
that an output being written is removed rather than left half-written."""

from __future__ import annotations

import signal
import sys


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> None:
    """Run the ``abm`` command."""
    signal.signal(signal.SIGTERM, _terminate)
    try:
        from abm.cli import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write("interrupted while starting; nothing was run\n")
        raise SystemExit(130) from None
    cli_main()
