"""The ``abm`` console script: imports the command line inside a guard, so that Ctrl-C while
the libraries load ends with one line and exit code 130 instead of an import traceback. A
termination request (SIGTERM, as ``kill`` or a batch scheduler sends) is handled as Ctrl-C, so
that an output being written is removed rather than left half-written; it exits with 143 (128 +
SIGTERM), Ctrl-C with 130. Once a command has written all its output (:func:`abm.interrupts.results_written`),
both are ignored: what remains is printing, and the results are complete."""

from __future__ import annotations

import atexit
import os
import signal
import sys

from abm import interrupts, invocation

_signal_received: list[int] = []


def _interrupt(signum: int, frame: object) -> None:
    if interrupts.output_complete():
        return
    _signal_received.append(signum)
    raise KeyboardInterrupt


def _interrupted_code() -> int:
    """128 + the signal: 130 after Ctrl-C (SIGINT), 143 after a termination request (SIGTERM)."""
    return 128 + (_signal_received[0] if _signal_received else signal.SIGINT)


def _ignore_late_signals() -> None:
    """Once the output is complete, ignore Ctrl-C and SIGTERM through the interpreter's shutdown
    as well: CPython puts a signal that has a Python handler back to its default action when it
    shuts down (one set to be ignored stays so), and a signal then would end the process with
    130 or 143 after it wrote complete results."""
    if interrupts.output_complete():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def main() -> None:
    """Run the ``abm`` command."""
    interrupts.reset()
    invocation.set_command(["abm", *sys.argv[1:]])
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    try:
        from abm.cli import main as cli_main
    except KeyboardInterrupt:
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
            _ignore_late_signals()
            raise
        # Interrupted, and the command has cleaned up and said so: leave with 130 for the same
        # reason as above, after the exit handlers a normal exit would run.
        sys.stdout.flush()
        sys.stderr.flush()
        atexit._run_exitfuncs()
        os._exit(_interrupted_code())
    _ignore_late_signals()
