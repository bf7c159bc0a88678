"""The ``abm`` console script: imports the command line inside a guard, so that Ctrl-C while
the libraries load ends with one line and exit code 130 instead of an import traceback."""

from __future__ import annotations

import sys


def main() -> None:
    """Run the ``abm`` command."""
    try:
        from abm.cli import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write("interrupted while starting; nothing was run\n")
        raise SystemExit(130) from None
    cli_main()
