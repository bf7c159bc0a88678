"""Ctrl-C at any moment of ``abm``'s start-up ends it with one line and exit code 130, never a
KeyboardInterrupt traceback (abm/__main__.py, then :mod:`abm.entry`)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import textwrap
import time
import tomllib
from pathlib import Path

import pytest

from abm.interrupts import STARTING

SCENARIO = Path(__file__).parent.parent / "scenarios/reference/vacc.yaml"
VALIDATE = ["validate", str(SCENARIO)]


def default_sigint() -> None:
    """In the child: Ctrl-C's default action, whatever the test runner inherited."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupted(err: str, code: int) -> bool:
    """The ending a Ctrl-C at start-up must have: the one line and 130."""
    return code == 130 and err.splitlines() == [STARTING]


# A child that sends itself SIGINT as MODULE is about to be imported, then runs abm as
# `python -m abm validate FILE` ("-m") or the `abm` console script does (its entry point in
# pyproject.toml, "module:function"): a Ctrl-C at that exact moment of the start-up.
AT_IMPORT = """
import importlib, os, runpy, signal, sys

module, scenario, launch = sys.argv[1], sys.argv[2], sys.argv[3]


class CtrlC:
    def find_spec(self, name, path=None, target=None):
        if name == module:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None


sys.meta_path.insert(0, CtrlC())
sys.argv = ["abm", "validate", scenario]
if launch == "-m":
    runpy.run_module("abm", run_name="__main__", alter_sys=True)
else:
    where, function = launch.split(":")
    sys.exit(getattr(importlib.import_module(where), function)())
print("not interrupted")
"""


def console_script() -> str:
    """The ``abm`` console script's entry point, as pyproject.toml declares it."""
    project = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())
    return project["project"]["scripts"]["abm"]


# Modules of the start-up, in the order they load: abm.interrupts, before the handler is in place
MODULES = ["abm.interrupts", "abm.entry", "abm.invocation", "abm.cli", "typer", "abm.scenario"]


@pytest.mark.parametrize("launch", ["-m", "console script"])
@pytest.mark.parametrize("module", MODULES)
def test_ctrl_c_as_the_command_line_loads_says_so_in_one_line(module, launch):
    """abm.entry and what it imports loaded before any handler was in place: a Ctrl-C there was
    Python's, a KeyboardInterrupt traceback through ``from abm.entry import main``."""
    launch = console_script() if launch == "console script" else launch
    child = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(AT_IMPORT), module, str(SCENARIO), launch],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=default_sigint,
    )
    assert interrupted(child.stderr, child.returncode), (child.returncode, child.stderr)
    assert "not interrupted" not in child.stdout


@pytest.mark.parametrize("delay", [0, 0.015, 0.02, 0.025, 0.05, 0.1, 0.2])  # 15-25 ms: abm.entry loads, idle
def test_ctrl_c_at_any_early_moment_of_python_m_abm_has_no_traceback(delay):
    """A real Ctrl-C a moment after ``python -m abm validate FILE`` starts, three times each (the
    moment in the start-up it lands in varies). Allowed besides the one line and 130: the end of
    a process the signal reached before the interpreter had its own handler (killed by SIGINT,
    nothing said), and, should the command have finished first, its normal end. On a loaded
    machine the signal may also land in the interpreter's own start-up, before the first line of
    abm's code (its ``site`` module, which imports the installed packages' path hooks, or
    ``runpy``): Python's traceback then names none of abm's files, and abm cannot change it."""
    for _ in range(3):
        proc = subprocess.Popen(
            [sys.executable, "-m", "abm", *VALIDATE],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=default_sigint,
        )
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        assert not re.search(r'File "[^"]*[/\\]abm[/\\]', err), err  # a traceback through abm's code
        if "Traceback" in err:  # Python's start-up, before abm's (above)
            continue
        killed_before_python = proc.returncode == -signal.SIGINT and err == ""
        assert interrupted(err, proc.returncode) or killed_before_python or proc.returncode == 0, (proc.returncode, err)


def test_a_worker_of_the_console_script_keeps_sigterm_for_its_pool(tmp_path):
    """A --workers pool's worker process imports the program's main script again, and the `abm`
    console script imports abm/__main__.py, which put in the start-up handler: each worker then
    answered the pool's SIGTERM (a Ctrl-C of `abm sweep --workers 2`, a failed run) with
    "interrupted while starting; nothing was run" and exit code 143, where it used to end by the
    signal. Workers keep the default handling."""
    script = tmp_path / "abm_script.py"
    script.write_text(
        "import signal, sys\n"
        "from abm.__main__ import main  # as pip's console script imports it\n"
        "if __name__ == '__main__':\n"
        "    from abm.parallel import ProcessPool\n"
        "    with ProcessPool(1) as pool:\n"
        "        [(_, handler)] = pool.finished(signal.getsignal, [(signal.SIGTERM,)])\n"
        "    print(handler is signal.SIG_DFL, signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)\n"
    )
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=root, env=None
    )
    assert done.returncode == 0, done.stderr
    # the worker: the default; the program itself: the start-up handler, as before
    assert done.stdout.split() == ["True", "False"], done.stdout
