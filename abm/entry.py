"""The ``abm`` console script: Ctrl-C while the command line loads ends the process with one
line and exit code 130 instead of an import traceback, and one that arrives while a command
imports a library is raised once that import has finished (:func:`_interrupt`). A
termination request (SIGTERM, as ``kill`` or a batch scheduler sends) is handled as Ctrl-C, so
that an output being written is removed rather than left half-written; it exits with 143 (128 +
SIGTERM), Ctrl-C with 130. Once a command has written all its output (:func:`abm.interrupts.results_written`),
both are ignored: what remains is printing, and the results are complete. An error raised while
an interrupt was pending is taken as the interrupt: a library's compiled code that the
KeyboardInterrupt lands in may turn it into another exception (:mod:`abm.interrupts`). A second
Ctrl-C or SIGTERM while the command cleans up after the first, or once it has said how the
interrupt ended it, is ignored (:func:`_cleaning_up`): raised there it cut the clean-up short.

A command that ends leaves without the interpreter's teardown of every module, which takes
0.5-1 s once torch is loaded and only frees memory: the exit handlers run and the output is
flushed as in a normal exit (:func:`_leave`). Where a thread that is not a daemon still runs, or a
profiler or tracer is active (cProfile, coverage, a debugger), the exit is the normal one."""

from __future__ import annotations

import _thread
import atexit
import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, NoReturn

from abm import interrupts, invocation

_RECHECK_S = 0.05  # how soon an interrupt that arrived during an import is tried again
_starting: list[bool] = []  # set while the command line itself loads (:func:`command`)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """The handler of Ctrl-C and SIGTERM: raise KeyboardInterrupt, unless the output is complete
    (ignored) or the command line is still loading (one line, and the process ends: nothing has
    started). While a module is being imported the interrupt waits for the import to finish: an
    exception raised in Python code that compiled code runs during an import can become a C++
    exception and abort the process (torch's distributed package runs such code from C++ as it
    loads). It is tried again every 50 ms from a timer thread until no import is under way.
    A further interrupt while the command cleans up after the first is ignored (:func:`_cleaning_up`)."""
    if interrupts.output_complete() or interrupts.reported():
        return
    if _starting:
        interrupts.end_starting(signum)
    if interrupts.interrupted() is None:
        interrupts.note_signal(signum)
    elif _cleaning_up():
        return
    if _importing(frame):
        later = threading.Timer(_RECHECK_S, _thread.interrupt_main, args=(signum,))
        later.daemon = True
        later.start()
        return
    raise KeyboardInterrupt


def _cleaning_up() -> bool:
    """Whether the code a signal interrupted runs because of an earlier interrupt: the exception
    it handles (in an ``except`` or ``finally`` block, or a context manager's exit, where the
    output folder's staging copy is removed, the workers are stopped, the kept work is noted) is
    a KeyboardInterrupt, or arose while one was handled (a library may turn it into another
    error). A second Ctrl-C there raised a KeyboardInterrupt in the middle of that clean-up: it
    left the hidden staging folder beside the output, or ended the command with a traceback and
    the signal's own exit status. Where the first interrupt was swallowed by a library instead
    (nothing handles it), a further one stops the command as the first would have."""
    exc, seen = sys.exc_info()[1], set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__context__
    return False


def _importing(frame: FrameType | None) -> bool:
    """Whether the import system is among the callers of ``frame``."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _quiet_unraisable(previous: Callable[[Any], object]) -> Callable[[Any], object]:
    """An unraisable-exception hook that says nothing of a KeyboardInterrupt raised where Python
    cannot raise it (a weakref callback, as in the import system's module locks, or a
    finalizer) once the interrupt is noted: the command still ends on it (:mod:`abm.interrupts`),
    and Python would print "Exception ignored in ..." and a traceback. Anything else goes to
    ``previous``."""

    def hook(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and interrupts.interrupted() is not None:
            return
        previous(unraisable)

    hook.abm_quiet = True  # type: ignore[attr-defined]  # installed once, however many commands run
    return hook


def _interrupted_code() -> int:
    """128 + the signal: 130 after Ctrl-C (SIGINT), 143 after a termination request (SIGTERM)."""
    return 128 + (interrupts.interrupted() or signal.SIGINT)


def _ignore_late_signals() -> None:
    """Once the output is complete, ignore Ctrl-C and SIGTERM through the interpreter's shutdown
    as well: CPython puts a signal that has a Python handler back to its default action when it
    shuts down (one set to be ignored stays so), and a signal then would end the process with
    130 or 143 after it wrote complete results."""
    if interrupts.output_complete():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def command() -> int | str | None:
    """Run the ``abm`` command in this process and return its exit code (what its SystemExit
    carried); the process goes on. Only Ctrl-C while the libraries load ends it (below).

    Once it returns, Ctrl-C and SIGTERM are handled as they were before it, and
    :mod:`abm.interrupts` holds nothing of it: the program that called it goes on as if the
    command had not run there. A command's Ctrl-C handler stayed in place (or Ctrl-C and SIGTERM
    stayed ignored, after a command that wrote its output), and an interrupted command's
    interrupt stayed noted, so that each later output written in the process through abm's
    Python API was taken as interrupted and removed."""
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return _command()
    finally:
        for signum, handler in handlers.items():
            if handler is not None:  # None: a handler set outside Python, which cannot be put back
                signal.signal(signum, handler)
        interrupts.reset()


def _command() -> int | str | None:
    """:func:`command` for the console script (:func:`main`): the handlers stay, and so does
    what :mod:`abm.interrupts` noted, for the exit code and the process's end."""
    interrupts.reset()
    invocation.set_command(["abm", *sys.argv[1:]])
    if not getattr(sys.unraisablehook, "abm_quiet", False):
        sys.unraisablehook = _quiet_unraisable(sys.unraisablehook)
    # Ctrl-C while the command line loads ends the process at once, from the handler (nothing has
    # started): raised instead, it could land in code an extension module runs while it loads.
    # (abm/__main__.py has the same ending in place while this module itself loads.) Noted before
    # the handler is in place: one that came in between raised a KeyboardInterrupt, a traceback.
    _starting.append(True)
    try:
        signal.signal(signal.SIGTERM, _interrupt)
        signal.signal(signal.SIGINT, _interrupt)
        from abm.cli import main as cli_main
    finally:
        _starting.clear()
    try:
        cli_main()
    except SystemExit as exc:
        if exc.code != 130:
            _ignore_late_signals()
        return exc.code
    _ignore_late_signals()
    return 0


def main() -> None:
    """The ``abm`` console script (and ``python -m abm``): run the command, then end the process
    with its exit code. For a command inside another program, :func:`command`."""
    code = _command()
    if code == 130:
        # Interrupted, and the command has cleaned up and said so: leave with 130 for the same
        # reason as above, after the exit handlers a normal exit would run.
        _leave(_interrupted_code())
    if not isinstance(code, int | None) or _teardown_needed():
        raise SystemExit(code)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe, say: the interpreter's exit reports it
        raise SystemExit(code) from None
    _leave(code or 0)


def _teardown_needed() -> bool:
    """Whether the exit must be the interpreter's own: a thread that is not a daemon still runs
    (the interpreter waits for it), or a profiler or tracer writes its report at the end."""
    main_thread = threading.main_thread()
    running = [t for t in threading.enumerate() if t is not main_thread and not t.daemon]
    return bool(running) or sys.getprofile() is not None or sys.gettrace() is not None


def _leave(code: int) -> NoReturn:
    """Exit with ``code`` after the exit handlers, with stdout and stderr flushed, and without the
    interpreter's teardown of modules."""
    sys.stdout.flush()
    sys.stderr.flush()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
