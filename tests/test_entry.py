"""How the ``abm`` console script starts and ends: what it loads for quick commands, and its exit
(exit handlers, output, threads) once it skips the interpreter's teardown of modules."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

SCENARIOS = Path(__file__).parent.parent / "scenarios"

# A child that runs the console script with ARGS after SETUP, as `abm ARGS` would; it says so
# when the script returns to it (the interpreter's own exit) instead of leaving at once.
CHILD = """
import sys
{setup}
sys.argv = ["abm", *{args!r}]
from abm.entry import main
try:
    main()
finally:
    print("normal exit")
"""


def console_script(args: list[str], setup: str = "") -> subprocess.CompletedProcess:
    code = CHILD.format(setup=textwrap.dedent(setup), args=args)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_the_exit_runs_the_exit_handlers_after_the_output_and_keeps_the_exit_code():
    setup = """
    import atexit
    atexit.register(lambda: print("exit handler ran"))  # buffered: lost unless flushed after it
    print("before the command")
    """
    done = console_script(["--version"], setup)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "before the command" and lines[1].startswith("abm ") and lines[2] == "exit handler ran"
    usage = console_script(["run"], setup)  # no scenario file: a usage error
    assert usage.returncode == 2 and usage.stdout.splitlines()[-1] == "exit handler ran"
    assert "Missing argument 'FILE'" in usage.stderr


def test_the_exit_skips_the_teardown_of_modules_unless_a_tracer_or_a_thread_needs_it(tmp_path):
    # An object of the main module is finalized by the interpreter's teardown (its __del__ writes).
    setup = """
    import os
    class Finalized:
        def __del__(self):
            os.write(1, b"torn down\\n")
    kept = Finalized()
    """
    plain = subprocess.run([sys.executable, "-c", textwrap.dedent(setup)], capture_output=True, text=True)
    assert plain.stdout == "torn down\n"  # a script's normal exit
    quick = console_script(["--version"], setup)
    assert quick.returncode == 0 and quick.stdout.startswith("abm ") and quick.stdout.count("\n") == 1
    traced = console_script(["--version"], "sys.settrace(lambda *a: None)\n")  # coverage, a debugger
    assert traced.returncode == 0 and traced.stdout.splitlines()[-1] == "normal exit"
    late = tmp_path / "late.txt"
    # The thread waits for the main thread's end, so it is still running when the command ends however
    # long the command takes (a 0.5 s sleep could end first on a loaded machine, and the exit was quick).
    thread = f"""
    import threading
    main = threading.main_thread()
    threading.Thread(target=lambda: (main.join(), open({str(late)!r}, "w").write("done"))).start()
    """
    waited = console_script(["--version"], thread)
    assert waited.returncode == 0 and late.read_text() == "done" and waited.stdout.splitlines()[-1] == "normal exit"


def test_version_help_and_compare_do_not_load_torch():
    """Loading torch takes a second or more: `abm --version` and `abm --help` read no scenario, and
    `abm compare` reads run folders."""
    report = 'import atexit; atexit.register(lambda: print("torch loaded:", "torch" in sys.modules))\n'
    for args in (["--version"], ["--help"], ["run", "--help"]):
        done = console_script(args, report)
        assert done.returncode == 0 and done.stdout.splitlines()[-1] == "torch loaded: False", (args, done.stdout)
    code = 'import sys, abm.outputs.compare; print("torch" in sys.modules)'
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout == "False\n"


def test_compare_of_run_folders_loads_no_torch(small_comparison, tmp_path):
    """`abm compare` of two run folders, to the end: it imported abm.runs (and with it torch) to
    tell a result of abm.run from a folder, which only a Python caller can give."""
    report = 'import atexit; atexit.register(lambda: print("torch loaded:", "torch" in sys.modules))\n'
    out = tmp_path / "cmp"
    runs = [str(small_comparison[name]) for name in ("a", "b")]
    done = console_script(["compare", *runs, "--out", str(out)], report)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "torch loaded: False" and (out / "comparison_by_age.csv").is_file()
    # the console shows comparison.md as written (deaths by age too), then where the report is
    md = (out / "comparison.md").read_text()
    assert "## Deaths by age" in md and done.stdout.startswith(md)
    assert done.stdout.splitlines()[-2] == f"report in {out / 'report.html'}"


def test_validate_checks_an_epidemic_scenario_without_loading_torch():
    """`abm validate` answers while a scenario is being edited: for an epidemic scenario without a
    calibration section it loads no torch (a second or more; the engine's settings and the
    interventions' checks need none), and says what it said before. Only a check that needs the
    population (age weights of 0 under an app adoption) loads it."""
    report = 'import atexit; atexit.register(lambda: print("torch loaded:", "torch" in sys.modules))\n'
    names = {"king_county/vacc_ct": "vacc_ct", "reference/vacc_t30_ct": "reference_vacc_t30_ct"}
    names["king_county/vacc_phase1a"] = "vacc_phase1a"  # priority by occupation setting: checked without torch
    for scenario, name in names.items():
        path = SCENARIOS / f"{scenario}.yaml"
        done = console_script(["validate", str(path)], report)
        assert done.returncode == 0, done.stderr
        verdict = f"ok {path}: scenario {name!r} is valid"
        assert done.stdout.splitlines() == [verdict, "torch loaded: False"], done.stdout
    shown = console_script(["validate", "--show", str(path)], report)
    assert shown.returncode == 0 and shown.stderr.strip() == verdict
    assert shown.stdout.startswith("name: vacc_phase1a\n")
    assert shown.stdout.endswith("\ntorch loaded: False\n")
    # An option that turns an intervention on is noted, as abm run notes it: still without torch.
    on = console_script(["validate", str(path), "--set", "interventions.testing.start_day=5"], report)
    assert on.returncode == 0 and "turns testing on" in on.stderr, on.stderr
    assert on.stdout.endswith("\ntorch loaded: False\n")
    severity = console_script(["validate", "--severity", str(path)], report)  # the chances by age: none either
    assert severity.returncode == 0 and "80+" in severity.stdout
    assert severity.stdout.endswith("\ntorch loaded: False\n")
    zero = "interventions.digital_tracing.age_weights=[0,0,1,1,1,1,1,1,1]"
    args = ["validate", str(SCENARIOS / "king_county/vacc_ct.yaml"), "--set", "population.agents=2000", "--set", zero]
    done = console_script(args, report)
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == "torch loaded: True"


def test_validate_checks_learning_and_private_calibration_scenarios_without_torch_or_scikit_learn():
    """`abm validate` of a learning scenario loaded torch (about 2.8 s: the protocols' configs and
    flags lived beside their round logic, the privacy package and the split check needed tensors),
    and of a private calibration the engine's simulation code too (its observed data were read
    through abm.runs). Now a learning scenario loads neither torch nor any of abm.engine; a private
    calibration loads only the engine's settings (abm.engine.config: its model scenario is an
    epidemic scenario, validated as `abm validate` validates one), none of the simulation. The
    verdicts and messages are as before. Nor does either load scikit-learn (1-4 s): the split
    of one of its sets is checked on labels read from its data files."""
    report = (
        "import atexit\n"
        "atexit.register(lambda: print('loaded:', sorted(m for m in sys.modules"
        " if m in ('torch', 'sklearn') or m.startswith(('abm.engine', 'abm.runs')))))\n"
    )
    learning = SCENARIOS / "learning"
    engine_settings = "loaded: ['abm.engine', 'abm.engine.config']"
    cases = [  # file, --set options, kind, what it loads of torch and the engine
        ("digits_codream", [], "learning", "loaded: []"),  # class groups of scikit-learn's digits
        ("gmm_selection", [], "learning", "loaded: []"),  # p2p_selection's topology and known groups
        ("gmm_fedavg_private", ["--set", "rounds=6"], "learning", "loaded: []"),  # secure aggregation, DP
        ("private_calibration", [], "private calibration", engine_settings),  # a target DP epsilon
        ("private_calibration_kc2020", [], "private calibration", engine_settings),  # King County's 2020 data
        ("private_calibration_flower", [], "private calibration", engine_settings),  # Flower installed
    ]
    for name, sets, kind, loaded in cases:
        path = learning / f"{name}.yaml"
        done = console_script(["validate", str(path), *sets], report)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == [f"ok {path}: {kind} scenario {name!r} is valid", loaded], done.stdout
    refused = [  # a protocol's flags, the DP accountant: the messages of the checks that loaded torch
        (
            "gmm_fedavg_private",
            "runner=flower-sim",
            "protocols[0].name: 'centralized' is not allowed for runner 'flower-sim': the Flower runners carry "
            "only local, fedavg, fedprox, codream, codream_fast; use runner: inprocess",
            "loaded: []",
        ),
        (
            "private_calibration",
            "protocols[2].privacy.dp.epsilon=0.001",
            "protocols[2].privacy.dp.epsilon: 0.001 is not allowed with accountant rdp at delta 1e-05: it must be "
            "above 0.00836708, which no noise multiplier goes below; ask for a larger epsilon, or use accountant: "
            "gdp (exact, any epsilon > 0)",
            "loaded: []",  # refused before its model scenario is read
        ),
    ]
    for name, setting, message, loaded in refused:
        path = learning / f"{name}.yaml"
        done = console_script(["validate", str(path), "--set", setting], report)
        assert done.returncode == 2 and done.stdout.splitlines() == [loaded], done.stdout
        assert " ".join(done.stderr.split()) == f"error: {path} (with --set {setting}): {message}"


def test_an_interrupt_python_cannot_raise_is_not_printed_once_noted():
    """Ctrl-C that lands in a weakref callback (as in the import system's module locks while the
    libraries load) cannot be raised there; Python prints "Exception ignored in" and a traceback.
    Once the interrupt is noted the command ends on it anyway, so the console script's hook says
    nothing of it; another error in a callback is still printed."""
    code = textwrap.dedent(
        """
        import sys, weakref
        from abm import entry, interrupts
        if sys.argv[1] == "hook":
            sys.unraisablehook = entry._quiet_unraisable(sys.unraisablehook)
        interrupts.note_signal(2)
        class A: pass
        def interrupt(_): raise KeyboardInterrupt
        def fail(_): raise ValueError("a real error")
        a, b = A(), A()
        ra, rb = weakref.ref(a, interrupt), weakref.ref(b, fail)
        del a
        print("--", file=sys.stderr)
        del b
        """
    )

    def stderr(mode: str) -> tuple[str, str]:
        done = subprocess.run([sys.executable, "-c", code, mode], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        before, after = done.stderr.split("--\n")
        return before, after

    quiet, real = stderr("hook")
    assert quiet == "" and "ValueError: a real error" in real
    loud, _ = stderr("plain")  # what Python prints without the hook
    assert "Exception ignored in" in loud and "KeyboardInterrupt" in loud
    # ... and the console script installs it, once however many commands run in the process
    installs = (
        "import sys; from abm import entry; sys.argv = ['abm', '--version']; entry.command();"
        " first = sys.unraisablehook; entry.command(); print(first.abm_quiet, sys.unraisablehook is first)"
    )
    done = subprocess.run([sys.executable, "-c", installs], capture_output=True, text=True, timeout=120)
    assert done.stdout.split()[-2:] == ["True", "True"], done.stdout + done.stderr


def test_an_interrupt_while_a_module_loads_waits_for_the_import_to_finish(tmp_path):
    """Ctrl-C that arrives while a library loads is raised once its import has finished, not in
    the middle of it: compiled code that runs Python during an import (torch's distributed
    package does, from C++) can turn an exception raised there into a C++ one and abort the
    process (SIGABRT, "terminate called after throwing an instance of 'pybind11::error_already_set'").
    Here a module sends itself SIGINT halfway through its import: the import still completes, then
    the interrupt is raised, and the console script's handler is the one that raised it."""
    (tmp_path / "slowmodule.py").write_text(
        "import os, signal, time\n"
        "os.kill(os.getpid(), signal.SIGINT)\n"
        "for _ in range(20):\n"
        "    time.sleep(0.005)  # bytecode boundaries where Python runs the pending handler\n"
        "finished = True\n"
    )
    code = textwrap.dedent(
        f"""
        import signal, sys, time
        sys.path.insert(0, {str(tmp_path)!r})
        from abm import entry, interrupts
        signal.signal(signal.SIGINT, entry._interrupt)
        try:
            import slowmodule
            print("imported", slowmodule.finished)
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                time.sleep(0.01)
            print("never interrupted")
        except KeyboardInterrupt:
            print("interrupted after the import:", "slowmodule" in sys.modules, interrupts.interrupted())
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["imported True", "interrupted after the import: True 2"], done.stdout


def test_a_second_interrupt_while_the_first_is_cleaned_up_or_said_is_ignored(tmp_path):
    """Ctrl-C twice in quick succession (or Ctrl-C, then a scheduler's SIGTERM): the second came
    while the first's clean-up ran and raised another KeyboardInterrupt there, which left the
    hidden staging folder beside the output (1 of 8 tries at 0.5-20 ms apart), or, once the
    command had said it was interrupted, ended it with a traceback and the signal's own status
    (-2) instead of 130. Now the second is ignored while the first is handled, and after that is
    said; one that comes after a library swallowed the first stops the command as the first does."""
    code = textwrap.dedent(
        f"""
        import os, shutil, signal, sys, time
        from pathlib import Path
        from abm import entry, interrupts
        from abm.outputs.run_folder import atomic_folder

        out = Path({str(tmp_path / "out")!r})
        removing = shutil.rmtree

        def rmtree(path, *args, **kwargs):
            os.kill(os.getpid(), signal.SIGINT)  # the second Ctrl-C, as the staging folder goes
            for _ in range(5):
                time.sleep(0.002)  # bytecode boundaries, where Python runs the handler
            removing(path, *args, **kwargs)

        shutil.rmtree = rmtree
        signal.signal(signal.SIGINT, entry._interrupt)
        signal.signal(signal.SIGTERM, entry._interrupt)
        interrupts.reset()
        try:
            with atomic_folder(out, "run") as tmp:
                (tmp / "timeseries.csv").write_text("day\\n")
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(5)
            print("not interrupted")
        except KeyboardInterrupt:
            interrupts.report("interrupted: no results were written")
            os.kill(os.getpid(), signal.SIGTERM)  # and a SIGTERM once that was said
            time.sleep(0.05)
        print(sorted(p.name for p in out.parent.iterdir()), interrupts.interrupted())
        interrupts.reset()
        interrupts.note_signal(signal.SIGINT)  # a first interrupt that a library swallowed
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
            print("the second was ignored")
        except KeyboardInterrupt:
            print("the second stops it")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "interrupted: no results were written\n"
    assert done.stdout.splitlines() == ["[] 2", "the second stops it"], done.stdout


class ProgramStopped(Exception):
    """What the handlers of the program that runs a command raise (:func:`program_handlers`)."""


@contextlib.contextmanager
def program_handlers() -> Iterator[Callable]:
    """Ctrl-C and SIGTERM handled by a handler of the program's own (raising ProgramStopped),
    as a program that runs ``abm`` commands in its process might; put back as they were after."""

    def stop(signum: int, frame: object) -> None:
        raise ProgramStopped(signum)

    before = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


@pytest.mark.parametrize("ending", ["written", "interrupted", "refused"])
def test_a_command_run_inside_a_program_leaves_its_signals_and_interrupt_state_as_they_were(
    tmp_path, monkeypatch, ending
):
    """A program that runs a command in its own process (:func:`abm.entry.command`) and goes on:
    the command's Ctrl-C handler stayed in place after it, or Ctrl-C and SIGTERM stayed ignored
    after a command that wrote its output (the program could then no longer be stopped with
    Ctrl-C), and an interrupted command's interrupt stayed noted, so that the next output the
    program wrote through abm's Python API was removed as if interrupted (a KeyboardInterrupt
    out of the write). Now the program's handlers are back and nothing of the command is noted."""
    import abm.cli
    from abm import entry, interrupts, invocation
    from abm.outputs.run_folder import atomic_folder

    def command() -> None:
        if ending == "written":
            with atomic_folder(tmp_path / "first", "run") as tmp:
                (tmp / "timeseries.csv").write_text("day\n")
            raise SystemExit(0)
        if ending == "interrupted":
            try:
                os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C as the command runs
                time.sleep(5)
            except KeyboardInterrupt:
                interrupts.report("interrupted: no results were written")
                raise SystemExit(130) from None
        raise SystemExit(2)  # bad input

    monkeypatch.setattr(abm.cli, "main", command)
    monkeypatch.setattr(sys, "argv", ["abm", "run", "x.yaml"])
    monkeypatch.setattr(invocation, "_command", [])  # the command records its command line there
    with program_handlers() as stop:
        code = entry.command()
        assert code == {"written": 0, "interrupted": 130, "refused": 2}[ending]
        assert {signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)} == {stop}
        assert (interrupts.interrupted(), interrupts.output_complete(), interrupts.reported()) == (None, False, False)
        with atomic_folder(tmp_path / "second", "run") as tmp:  # as abm.run(...).write() does
            (tmp / "timeseries.csv").write_text("day\n")
        assert (tmp_path / "second" / "timeseries.csv").is_file()
        with pytest.raises(ProgramStopped):
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, once the command has returned
            time.sleep(5)
