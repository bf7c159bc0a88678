"""The ``abm`` console script: imports the command line inside a guard, so that Ctrl-C while
the libraries load ends with one line and exit code 130 instead of an import traceback. A
termination request (SIGTERM, as ``kill`` or a batch scheduler sends) is handled as Ctrl-C, so
that an output being written is removed rather than left half-written; it exits with 143 (128 +
SIGTERM), Ctrl-C with 130. Once a command has written all its output (:func:`abm.interrupts.results_written`),
both are ignored: what remains is printing, and the results are complete. An error raised while
an interrupt was pending is taken as the interrupt: a library's compiled code that the
KeyboardInterrupt lands in may turn it into another exception (:mod:`abm.interrupts`)."""

from __future__ import annotations

import atexit
import os
import signal
import sys

from abm import interrupts, invocation


def _interrupt(signum: int, frame: object) -> None:
    if interrupts.output_complete():
        return
    interrupts.note_signal(signum)
    raise KeyboardInterrupt


def _interrupted_code() -> int:
    """128 + the signal: 130 after Ctrl-C (SIGINT), 143 after a termination request (SIGTERM)."""
    return 128 + (interrupts.interrupted() or signal.SIGINT)


def main() -> None:
    """Run the ``abm`` command."""
    interrupts.reset()
    invocation.set_command(["abm", *sys.argv[1:]])
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    try:
        from abm.cli import main as cli_main
    except BaseException as exc:
        if not isinstance(exc, KeyboardInterrupt) and interrupts.interrupted() is None:
            raise
        sys.stderr.write("interrupted while starting; nothing was run\n")
        sys.stderr.flush()
        # Not SystemExit: an interrupt that lands in code an extension module runs through
        # PyRun_* while it loads is marked unhandled by CPython even when caught here, and the
        # interpreter then ends itself by the signal at exit (-2, not 130). Nothing has started
        # yet, so there is nothing to clean up.
        os._exit(_interrupted_code())
    try:
        cli_main()
    except SystemExit as exc:
        if exc.code != 130:
            raise
        # Interrupted, and the command has cleaned up and said so: leave with 130 for the same
        # reason as above, after the exit handlers a normal exit would run.
        sys.stdout.flush()
        sys.stderr.flush()
        atexit._run_exitfuncs()
        os._exit(_interrupted_code())
