"""The ``abm`` command."""

from __future__ import annotations

import contextlib
import functools
import math
import os
import shlex
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from abm.cli_typer import Typer
from abm.examples import DEFAULT_DIR as DEFAULT_EXAMPLES_DIR
from abm.interrupts import STARTING, interrupted, report, reported, results_written
from abm.outputs.journal import journal_path
from abm.outputs.run_folder import (
    OutputFolderError,
    OutputWriteError,
    check_target,
    not_written,
    output_path,
)
from abm.plugin_errors import PluginError, PluginFailure
from abm.plurals import counted
from abm.progress_lines import LogLines, Pace

if TYPE_CHECKING:
    from abm.outputs.summary_table import SummaryTable
    from abm.scenario import Scenario
    from abm.sweep import SweepAxis

app = Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Agent-based epidemic simulator for King County, WA: run scenarios, compare interventions, calibrate "
    "to observed data, calibrate across institutions without pooling data.",
)
LOG_WIDTH = 120  # columns of stdout in a file or a pipe


class OnceConsole(Console):
    """A rich console whose text, interrupted (Ctrl-C, SIGTERM) as it is written, does not come
    out again with the next text: rich empties what it holds only once it is written and flushed,
    and an interrupt in between left it there, so that the next line printed it a second time
    (``trial 2 of 12 done: ...`` twice, above the note of the kept trials; 3 of 30 interrupts
    sent as a line came)."""

    def _check_buffer(self) -> None:
        try:
            super()._check_buffer()
        except BaseException:
            del self._buffer[:]
            raise


# Messages carry the user's text (paths, values, --set options such as `key=[a, b]`), which rich
# would read as markup: markup is off, and the few styled words are Text spans. Written to a file or
# a pipe (a batch job's log), where rich would take 80 columns and wrap the tables' cells, stdout
# takes 120 unless COLUMNS says otherwise.
out_console = OnceConsole(markup=False, width=None if os.environ.get("COLUMNS") or sys.stdout.isatty() else LOG_WIDTH)
err_console = OnceConsole(stderr=True, markup=False)


class CommandBar(Progress):
    """A command's progress bar on stderr, counting ``unit`` (days, runs), that disappears when
    done, where stderr is a terminal. Elsewhere (a log file, a pipe) the bar is off, which would
    only leave a blank line there, and :attr:`lines` tells the progress in plain lines instead
    (:class:`abm.progress_lines.LogLines`, the rules for them); None on a terminal."""

    def __init__(self, unit: str) -> None:
        super().__init__(
            TextColumn("{task.description}", style="bold", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(unit),
            TimeElapsedColumn(),
            console=err_console,
            transient=True,
            disable=not err_console.is_terminal,
        )
        self.lines: LogLines | None = None
        if self.disable:
            self.lines = LogLines(lambda text: err_console.print(text, highlight=False, soft_wrap=True))

    def stop(self) -> None:
        """Take the bar down; no progress line comes after (a stage's line waiting for its moment)."""
        if self.lines is not None:
            self.lines.close()
        super().stop()


def progress_bar(unit: str) -> CommandBar:
    """A :class:`CommandBar` counting ``unit``."""
    return CommandBar(unit)


def log_lines(bar: Progress) -> LogLines | None:
    """The lines ``bar`` tells its progress in, where it is off (stderr not a terminal)."""
    return bar.lines if isinstance(bar, CommandBar) else None


class StepLines:
    """A progress callback that prints a line per finished ``unit`` (trial, step) on stderr with
    its loss, the time so far and about how long is left (:class:`Pace`):
    ``trial 57 of 200 done: loss 0.412 (2 min 10 s, about 5 min left)``; with ``best``, the
    lowest loss so far too (where the lowest is what is kept: Optuna's trials, their re-runs):
    ``trial 57 of 200 done: loss 0.412, best so far 0.305 (...)``. Told by :meth:`reused` that
    the steps so far were kept ones (a continued calibration), it says so in the lines after and
    takes the pace from the steps run afresh only:
    ``trial 57 of 200 done: loss 0.412 (40 kept trials reused; 2 min 10 s, about 5 min left)``."""

    def __init__(self, unit: str, best: bool = False) -> None:
        self.unit, self.best = unit, best
        self.pace = Pace()
        self.lowest = math.inf
        self.kept = 0

    def reused(self, count: int) -> None:
        """The first ``count`` steps told were kept ones, told at once; the next is run afresh."""
        self.kept = count
        self.pace.restart(count)

    def __call__(self, done: int, total: int, loss: float) -> None:
        self.lowest = min(self.lowest, loss)  # a NaN loss is never the lowest
        so_far = f", best so far {self.lowest:.3f}" if self.best and math.isfinite(self.lowest) else ""
        kept = f"{counted(self.kept, 'kept ' + self.unit)} reused; " if self.kept else ""
        err_console.print(
            f"{self.unit} {done} of {total} done: loss {loss:.3f}{so_far} ({kept}{self.pace(done, total)})",
            highlight=False,
            soft_wrap=True,  # one line, however long (a log file)
        )


def step_lines(unit: str, best: bool = False) -> StepLines:
    """A :class:`StepLines` for ``unit``."""
    return StepLines(unit, best)


def advance(bar: Progress, task: TaskID, unit: str, slowing: bool = False) -> Callable[[int, int], None]:
    """The progress callback of a command's bar: it moves the bar on a terminal, and elsewhere
    tells the progress in lines (:meth:`abm.progress_lines.LogLines.counter`; ``slowing``: the
    steps may keep taking longer, as a run's days do)."""
    lines = log_lines(bar)
    if lines is not None:
        return lines.counter(unit, slowing)
    return lambda done, total: bar.update(task, completed=done)


def staged(bar: Progress, task: TaskID, label: str) -> Callable[[str], None]:
    """A callback for the part of its work a command is in (building the population, simulating
    the days, writing files): the bar's description, ``label``, says it after a colon; where the
    bar is off (stderr not a terminal), a line names it as it starts
    (:meth:`abm.progress_lines.LogLines.stage`)."""
    lines = log_lines(bar)
    if lines is not None:
        return lines.stage

    def say(text: str) -> None:
        bar.update(task, description=f"{label}: {text}", refresh=True)

    return say


def _print_version(value: bool) -> None:
    if value:
        from abm import __version__

        out_console.print(f"abm {__version__} (torch {_torch_version()})", highlight=False, soft_wrap=True)
        raise typer.Exit()


def _torch_version() -> str:
    """torch's version, read from its package metadata: importing torch takes a second or more."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:  # not installed as a package (a source tree on the path)
        import torch

        return torch.__version__


@app.callback()
def _options(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="print the version and exit")
    ] = False,
) -> None:
    """Options of the `abm` command itself."""


def loading() -> contextlib.AbstractContextManager[None]:
    """Around a command's imports of the engine's libraries (torch, pandas: a second or more, which
    `abm --version` and `abm --help` do without): Ctrl-C there ends with one line and exit code 130,
    as while `abm` starts."""
    return on_interrupt(STARTING)


def fail(message: str, code: int = 2) -> None:
    """Print an error on stderr and exit with ``code``: 2 for bad input, 1 for a run that failed
    for another reason (a lost worker process, an output the file system failed to write)."""
    err_console.print(Text.assemble(("error:", "bold red"), f" {message}"), highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def plugin_failed(command: str, exc: PluginFailure, target: str | Path, bar: Progress | None = None) -> None:
    """End ``abm command`` after an installed plug-in's code failed (a defect of the plug-in, not
    bad input: exit code 1): one line naming the plug-in, its hook, the day and the error, what
    became of the output (:func:`not_written`), then the plug-in's traceback from its frame down,
    as Python prints one (without the local variables a traceback of the command would show).
    ``bar`` is stopped first, so that the lines stay."""
    if bar is not None:
        bar.stop()
    err_console.print(Text.assemble((f"abm {command}:", "bold red"), f" {exc}"), highlight=False, soft_wrap=True)
    err_console.print(f"{not_written(target)}; the plug-in's traceback follows", highlight=False, soft_wrap=True)
    err_console.print(exc.details.rstrip("\n"), highlight=False, soft_wrap=True)
    raise typer.Exit(1)


def out_option(value: str | Path) -> Path:
    """``--out``'s value as a Path; an empty one is refused (exit code 2) as given, ``''``: Path
    would read it as the working folder, and the message would name ``'.'``."""
    try:
        return output_path(value)
    except OutputFolderError as exc:
        fail(str(exc))
        raise  # not reached: fail() exits


def stop_on_interrupt(target: str | Path, bar: Progress | None = None) -> contextlib.AbstractContextManager[None]:
    """End the command with one line (``interrupted: `` and :func:`not_written`) and exit code 130
    (143 after SIGTERM, :mod:`abm.entry`) on Ctrl-C or SIGTERM, the output having been removed by
    :func:`abm.outputs.run_folder.atomic_folder`. ``bar`` is stopped first, so that the line stays."""
    return on_interrupt(f"interrupted: {not_written(target)}", bar)


@contextlib.contextmanager
def on_interrupt(message: str, bar: Progress | None = None) -> Iterator[None]:
    """Print ``message`` and exit with code 130 on Ctrl-C or SIGTERM, also when the interrupt
    reaches here as another error, which a library's compiled code made of it
    (:mod:`abm.interrupts`); ``bar`` is stopped first."""
    try:
        yield
    except typer.Exit:
        raise
    except (KeyboardInterrupt, Exception) as exc:
        if not isinstance(exc, KeyboardInterrupt) and interrupted() is None:
            raise
        if bar is not None:
            bar.stop()
        report(message)
        raise typer.Exit(130) from None


# The `learning` extra: module -> the package pip installs it from.
LEARNING_EXTRA = {"scipy": "scipy", "sklearn": "scikit-learn", "cryptography": "cryptography"}


def require_learning_extra(file: Path) -> None:
    """Exit 2 with the install line when a package of the `learning` extra, which learning and
    private-calibration scenarios need, is not installed."""
    from importlib.util import find_spec

    def missing(module: str) -> bool:
        try:
            return find_spec(module) is None
        except ValueError:  # a module entry set to None (blocked)
            return True

    absent = [package for module, package in LEARNING_EXTRA.items() if missing(module)]
    if absent:
        fail(
            f"{file}: learning and private-calibration scenarios need the `learning` extra "
            f"({', '.join(absent)} not installed): pip install -e '.[learning]' in a checkout of abm, or pip install "
            "'abm-epidemic[learning]'"
        )


# Arguments and options that several commands take alike.
ScenarioFile = Annotated[Path, typer.Argument(help="scenario YAML file")]
AgentsOption = Annotated[int | None, typer.Option(help="number of agents")]
DaysOption = Annotated[int | None, typer.Option(help="days to simulate")]
DeviceOption = Annotated[str | None, typer.Option(help="cpu, cuda or cuda:N")]
RayAddressOption = Annotated[str | None, typer.Option(help="Ray: address of a running cluster")]

SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="override a scenario value: key.path=value, the value read as YAML (simulation.days=90, "
        "seeding.infections={asymptomatic: 10}; a list item by its index: disease.dwell_times[0].shape=2); "
        "repeatable",
    ),
]

LearnSetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="override a scenario value: key.path=value, the value read as YAML (rounds=3, "
        "split.label_skew={alpha: 0.5}; a list item by its index: protocols[0].params.lr=0.1); repeatable",
    ),
]


@app.command()
def validate(
    file: ScenarioFile,
    set_: SetOption = None,
    show: Annotated[
        bool,
        typer.Option(
            "--show",
            help="print every value the scenario runs with, defaults filled in, as YAML on standard output "
            "(the verdict then goes to standard error); for an epidemic scenario, loading that YAML gives the same "
            "scenario",
        ),
    ] = False,
    severity: Annotated[
        bool,
        typer.Option(
            "--severity",
            help="also print what an infection leads to by age under the scenario's disease settings: the chance of "
            "symptoms, a hospital stay, intensive care and death (the infection fatality ratio), and for all ages "
            "weighted by the region's residents (the reference population's own age weights for population.kind: "
            "reference; epidemic scenarios)",
        ),
    ] = False,
) -> None:
    """Check a scenario file without running it.

    FILE is an epidemic scenario (for `abm run`, `abm sweep` or `abm calibrate`)
    or a learning or private-calibration scenario (for `abm learn`). Says what
    is wrong (file, key, value and what is allowed), or that it is valid.
    With --show, also prints every value the scenario would run with; with
    --severity, the chances of each outcome of an infection by age.

    Exit code 0 when it is valid, 2 when it is not."""
    from abm.calibration.errors import CalibrationError
    from abm.learning.errors import LearningScenarioError
    from abm.set_options import COMMAND_LINE, ScenarioError

    if severity and show:
        fail("--severity and --show both write to standard output; give one of them")
    kind = learning_kind(file)
    if severity and kind is not None:
        fail(f"{file}: --severity is for epidemic scenarios, and this is a {kind} scenario")
    if kind is not None:
        require_learning_extra(file)
    try:
        if kind == "private calibration":
            with loading():
                from abm.private_calibration.scenario import load_scenario as load_private_calibration
                from abm.private_calibration.scenario import portable

            # the model scenario by its full path, as a report's scenario.json names it: --show's YAML,
            # saved anywhere, loads again (the path relative to FILE named no file from elsewhere)
            learned = portable(*load_private_calibration(file, None, set_))
        elif kind == "learning":
            with loading():
                from abm.learning.scenario import load_scenario as load_learning

            learned = load_learning(file, None, set_)[0]
        else:
            with loading():
                from abm.overrides import resolve
                from abm.scenario import check_device, check_population_settings

            sc = resolve(file, None, set_)  # as `abm run` reads it: the calibration section checked alike
            check_device(sc, COMMAND_LINE.scenario(str(file), set_ or [], []))
            note_scenario(file, [sc], sets=set_)
            check_population_settings(sc, COMMAND_LINE.scenario(str(file), set_ or [], []))
        if kind is not None:  # the checks `abm learn` makes before it runs (the split, Flower installed)
            from abm.learning.cli import check_before_run

            check_before_run(learned, COMMAND_LINE.scenario(str(file), set_ or [], []))
    except (ScenarioError, LearningScenarioError, CalibrationError) as exc:
        fail(str(exc))
    if kind is None:
        name, resolved = sc.name, sc.with_capacity().resolved_yaml()
    else:
        import yaml

        name = learned.name
        resolved = yaml.safe_dump(learned.model_dump(mode="json", by_alias=True), sort_keys=False, width=100)
    label = f"{kind} scenario" if kind else "scenario"
    verdict = Text.assemble(("ok", "green"), f" {file}: {label} {name!r} is valid")
    if show:
        sys.stdout.write(resolved)
        err_console.print(verdict, highlight=False, soft_wrap=True)
    else:
        out_console.print(verdict, highlight=False, soft_wrap=True)
    if severity:
        from abm.outputs.severity_table import scenario_severity_table

        print_table(scenario_severity_table(sc))


def refuse_learning_scenario(file: Path) -> None:
    """Exit 2 with a pointer to `abm learn` when ``file`` is a learning or private-calibration scenario."""
    from abm.scenario_kinds import not_epidemic

    kind = learning_kind(file)
    if kind is not None:
        fail(not_epidemic(kind, str(file), python=False))


def is_epidemic_scenario(file: Path) -> bool:
    """Whether ``file`` reads as an epidemic scenario (it extends one or has its sections)."""
    from abm.learning.errors import LearningScenarioError
    from abm.learning.files import read_yaml
    from abm.scenario_kinds import EPIDEMIC_SECTIONS

    try:
        data = read_yaml(file)
    except LearningScenarioError:
        return False
    return bool(EPIDEMIC_SECTIONS & data.keys())


def learning_kind(file: Path) -> str | None:
    """'private calibration' or 'learning' when ``file`` is a scenario for `abm learn`, else None
    (an epidemic scenario, or a file the epidemic loader will report as unreadable); exits 2 on a
    ``kind`` other than private_calibration (:func:`abm.learning.result.scenario_kind`)."""
    from abm.learning.errors import LearningScenarioError
    from abm.learning.files import read_yaml
    from abm.learning.result import scenario_kind

    try:
        data = read_yaml(file)
    except LearningScenarioError:
        return None
    try:
        return scenario_kind(data, str(file))
    except LearningScenarioError as exc:
        fail(str(exc))
        raise  # not reached: fail() exits


def print_notes(notes: Sequence[object]) -> None:
    """Print each note (:mod:`abm.scenario_notes`) as ``note: TEXT`` on stderr."""
    for note in notes:
        err_console.print(f"note: {note}", highlight=False, soft_wrap=True)


def note_scenario(file: Path, resolved: list, **given: Any) -> None:
    """Print the notes on scenario ``file`` run as ``resolved``
    (:func:`abm.scenario_notes.scenario_notes`, with the command's options as ``given``)."""
    from abm.scenario_notes import scenario_notes

    print_notes(scenario_notes(file, resolved, **given))


def note_unapplied_settings(file: Path, sets: list[str] | None, sweeps: Sequence[SweepAxis] = ()) -> None:
    """Print the notes on settings of ``file``, ``--set`` and ``--sweep`` that are not used
    (:func:`abm.scenario_notes.unapplied_settings`)."""
    from abm.scenario_notes import unapplied_settings

    print_notes(unapplied_settings(file, sets, sweeps))


def note_workers(workers: int | None, backend: str) -> None:
    """Print the note on ``--workers`` above the CPUs this process may use
    (:func:`abm.scenario_notes.too_many_workers`)."""
    from abm.scenario_notes import too_many_workers

    print_notes(too_many_workers(workers, backend))


def note_memory(
    scenarios: list[Scenario],
    *,
    replicates: int | None = None,
    runs: int = 1,
    fewer: tuple[str, ...] = ("replicates", "agents"),
) -> None:
    """A note when ``runs`` CPU runs at once of the largest of ``scenarios`` (with ``replicates``,
    default their own) may need more memory than this machine has available
    (:func:`abm.memory.memory_note`; ``fewer``: what to reduce)."""
    from abm.memory import memory_note

    text = memory_note(scenarios, replicates=replicates, runs=runs, fewer=fewer)
    print_notes([text] if text is not None else [])


@app.command()
def run(
    file: ScenarioFile,
    out: Annotated[
        Path | None, typer.Option(parser=out_option, metavar="PATH", help="run folder (default runs/<scenario name>)")
    ] = None,
    agents: AgentsOption = None,
    days: DaysOption = None,
    replicates: Annotated[int | None, typer.Option(help="replicates, run as one batch")] = None,
    seed: Annotated[int | None, typer.Option(help="random seed")] = None,
    device: DeviceOption = None,
    set_: SetOption = None,
) -> None:
    """Run a scenario and write its results to a run folder.

    FILE is a scenario YAML file (`abm validate FILE` checks it without running).
    The options change its values for this run; the run folder's
    scenario.resolved.yaml holds every value used, and its report.html shows
    the run on one page (open it in a browser). The folder is written at the
    end, all at once; an earlier one is replaced only if abm wrote it. A note
    comes first where the run's estimated memory exceeds what this machine has
    available (the run goes on).

    Exit code 0 when done; 2 for bad input, a run this machine's memory cannot
    hold included (nothing is written); 130 after Ctrl-C, 143 after SIGTERM
    (nothing is written, an earlier run is kept); 1 when an installed
    plug-in's code fails (one line naming it, then its traceback; nothing is
    written) or the file system fails as the folder is written (a full disk:
    nothing is written, an earlier run is kept)."""
    with loading():
        from abm.overrides import given as options_given
        from abm.runs import resolve
        from abm.runs import run as run_scenario
        from abm.scenario import COMMAND_LINE, ScenarioError, check_device

    refuse_learning_scenario(file)
    overrides = {"agents": agents, "days": days, "replicates": replicates, "seed": seed, "device": device}
    try:
        sc = resolve(file, overrides, set_)
        check_device(sc, COMMAND_LINE.scenario(str(file), set_ or [], options_given(overrides)))
    except ScenarioError as exc:
        fail(str(exc))
    target = out or Path("runs") / sc.name
    try:
        check_target(target, "run")
    except OutputFolderError as exc:
        fail(str(exc))
    note_scenario(file, [sc], sets=set_, overrides=overrides)
    note_memory([sc])
    from abm.plurals import counted

    err_console.print(
        f"running {sc.name}: {sc.population.agents:,} agents x {counted(sc.simulation.replicates, 'replicate')}, "
        f"{counted(sc.simulation.days, 'day')} -> {target}",
        highlight=False,
        soft_wrap=True,
    )
    with progress_bar("days") as bar:
        label = f"{sc.name}: {sc.population.agents:,} agents x {sc.simulation.replicates}"
        task = bar.add_task(label, total=sc.simulation.days)
        with stop_on_interrupt(target, bar):
            try:
                stage = staged(bar, task, label)
                result = run_scenario(sc, progress=advance(bar, task, "days", slowing=True), stage=stage, warn=False)
                stage("writing files")
                result.write(target)
                results_written()
            except ScenarioError as exc:  # found once the run has its population: named by the file and options
                given = [(k, v) for k, v in overrides.items() if v is not None]
                fail(f"{COMMAND_LINE.scenario(str(file), set_ or [], given)}: {str(exc).removeprefix(sc.name + ': ')}")
            except OutputFolderError as exc:  # checked before the run; something took the folder since
                fail(f"{exc}; {not_written(target)}")
            except OutputWriteError as exc:
                fail(str(exc), code=1)
            except PluginFailure as exc:
                plugin_failed("run", exc, target, bar)
    print_summary(result.summary, result.manifest["timings"]["engine_seconds"], target)


@app.command()
def learn(
    file: Annotated[Path, typer.Argument(help="learning scenario YAML file")],
    out: Annotated[
        Path | None,
        typer.Option(parser=out_option, metavar="PATH", help="report folder (default runs/<scenario name>)"),
    ] = None,
    runner: Annotated[
        str | None,
        typer.Option(help="inprocess, flower-sim or flower (default: the scenario's runner key)"),
    ] = None,
    set_: LearnSetOption = None,
) -> None:
    """Run a decentralized-learning scenario; write report.json, plots, and report.md and report.html.

    FILE is a learning scenario (data, split and protocols: docs/learning.md)
    or a private-calibration scenario (kind: private_calibration:
    docs/private_calibration.md); both need the `learning` extra (README,
    "Decentralized learning"). `abm validate FILE` checks it without running.
    --set key.path=value changes a value of the file, as for `abm run`
    (protocols[0].params.lr=0.1); scenario.json holds the scenario as run.
    The report folder is written at the end, all at once.

    Exit code 0 when done; 2 for bad input, sizes this machine's memory cannot
    hold included (nothing is written); 130 after Ctrl-C, 143 after SIGTERM
    (nothing is written, an earlier report is kept); 1 when the run fails (a
    Flower client ends or fails, a secure-aggregation round cannot be summed,
    an installed plug-in of a private calibration's model scenario fails: one
    line naming it, then its traceback) or the file system fails as the folder is written (a full disk: nothing is
    written, an earlier report is kept)."""
    from abm.learning.scenario import RUNNERS

    if runner is not None and runner not in RUNNERS:  # the option, not the file's runner key, is at fault
        fail(f"--runner: {runner!r} is not allowed; allowed: {', '.join(RUNNERS)}")
    kind = learning_kind(file)
    if kind is None and is_epidemic_scenario(file):
        fail(f"{file}: this is an epidemic scenario, not a learning one; run it with `abm run {file}`")
    require_learning_extra(file)
    with stop_on_interrupt(out or "runs/<name>"):  # while the learning libraries load or the data are built
        if kind == "private calibration":
            from abm.private_calibration.cli import learn as run_learning
        else:
            from abm.learning.cli import learn as run_learning

        run_learning(file, out, runner, set_)


def learning_progress(bar: Progress) -> Callable[[str, int, int, str], None]:
    """A listener for :mod:`abm.learning.progress`: a bar per label (a protocol's rounds, the
    institutions' simulations) while it runs, then a line with its note; with no label, the
    note alone as a line. Where the bar is off (stderr not a terminal), lines tell how far each
    label is as it runs (:meth:`abm.progress_lines.LogLines.counter`), before the line with its note."""
    tasks: dict[str, TaskID] = {}
    lines = log_lines(bar)
    counters: dict[str, Callable[[int, int], None]] = {}

    def listen(label: str, done: int, total: int, note: str) -> None:
        if not label:
            bar.console.print(note, highlight=False, soft_wrap=True)
            return
        if lines is not None and done < total:
            counters.setdefault(label, lines.counter(label))(done, total)
        if label not in tasks:
            tasks[label] = bar.add_task(label, total=total)
        bar.update(tasks[label], completed=done)
        if done == total:
            counters.pop(label, None)
            bar.remove_task(tasks.pop(label))
            # A line printed under the bar is followed by the bar as last drawn (rich draws the
            # live display it last rendered): render it now, without the finished bar, else
            # that bar is drawn once more, stale, under the line.
            bar.refresh()
            bar.console.print(f"{label}: {note}", highlight=False, soft_wrap=True)

    return listen


def default_calibration_folder(file: Path, sets: list[str] | None) -> Path | str:
    """Where ``abm calibrate FILE`` without --out writes, for its messages: runs/<name>-calibration,
    the scenario's name read here (a file that cannot be read leaves the pattern, and the
    calibration's own checks say what is wrong with it)."""
    from abm.scenario import ScenarioError, load_scenario

    try:
        return Path("runs") / f"{load_scenario(file, sets).name}-calibration"
    except (ScenarioError, OSError):
        return "runs/<name>-calibration"


@app.command()
def calibrate(
    file: Annotated[Path, typer.Argument(help="scenario YAML file with a calibration section")],
    out: Annotated[
        Path | None,
        typer.Option(parser=out_option, metavar="PATH", help="output folder (default runs/<name>-calibration)"),
    ] = None,
    trials: Annotated[
        int | None, typer.Option(help="Optuna trials, or gradient steps (default: the scenario's)")
    ] = None,
    method: Annotated[str, typer.Option(help="optuna (TPE over the free parameters) or gradient")] = "optuna",
    backend: Annotated[
        str, typer.Option(help="where Optuna trials run: local (worker processes here) or ray")
    ] = "local",
    workers: Annotated[
        int | None,
        typer.Option(
            help="Optuna trials run at once, each with the scenario's simulation.threads: local worker processes "
            "(default: calibration.parallel_trials or the usable CPUs, whichever is fewer, and 1 on cuda; 1: in this "
            "process) or "
            "Ray tasks (default: parallel_trials or the cluster's CPUs); the trials do not depend on it"
        ),
    ] = None,
    ray_address: RayAddressOption = None,
    agents: AgentsOption = None,
    replicates: Annotated[int | None, typer.Option(help="replicates of each trial")] = None,
    device: DeviceOption = None,
    set_: SetOption = None,
) -> None:
    """Fit a scenario's free parameters to observed data.

    FILE is a scenario YAML file with a calibration section (docs/calibration.md;
    `abm validate FILE` checks it without running). Optuna draws
    calibration.parallel_trials trials at a time and --workers of them run at
    once, so the trials are the same for any --workers. It prints the fitted
    parameters and each target's losses on the fit and held-out windows as
    tables. The output folder holds calibrated.yaml, trials.csv (or steps.csv),
    fit.png, fit_weekly.csv (the weekly counts the losses compare),
    calibration.json (the same values, for programs) and report.html
    (the tables and the plot on one page); it is written at the end, all at
    once, and replaces only a calibration abm wrote. Optuna trials that
    finished are kept beside it until then (.<folder>.trials.jsonl): a
    calibration stopped before its end continues from them when the same
    command runs again, with the same results.

    Exit code 0 when done; 2 for bad input (nothing is written); 1 when a worker
    process is lost (killed, out of memory), an installed plug-in's code fails
    (one line naming it and the trial, then its traceback; no folder is
    written, no trials are kept) or the file system fails as the folder is
    written (a full disk; no folder is written, finished trials are kept); 130
    after Ctrl-C, 143 after SIGTERM (no folder is written, finished trials are
    kept, no worker is left running)."""
    with loading():
        from abm.calibration.observed import CalibrationError
        from abm.calibration.result import calibrate as fit
        from abm.parallel import WorkerLost, check_ray_address
        from abm.result_notes import calibration_notes
        from abm.scenario import COMMAND_LINE, ScenarioError

    if trials is not None and trials < 1:
        fail(f"--trials: {trials} is not allowed; give at least 1")
    try:
        check_ray_address(ray_address, backend, CalibrationError, COMMAND_LINE)
    except CalibrationError as exc:
        fail(str(exc))
    refuse_learning_scenario(file)
    note_unapplied_settings(file, set_)
    note_workers(workers, backend)
    unit = "step" if method == "gradient" else "trial"
    lines = step_lines(unit, best=method != "gradient")  # the gradient keeps its last step
    target = out or default_calibration_folder(file, set_)
    with stop_on_interrupt(target):
        try:
            summary = fit(
                file,
                out,
                trials=trials,
                sets=set_,
                progress=lines,
                reused=lines.reused,
                rerun_progress=step_lines("re-run", best=True),
                note=lambda text: err_console.print(f"note: {text}", highlight=False, soft_wrap=True),
                method=method,
                backend=backend,
                workers=workers,
                ray_address=ray_address,
                names=COMMAND_LINE,
                agents=agents,
                replicates=replicates,
                device=device,
                warn=False,  # noted above, and by note
            ).summary
            results_written()
        except (ScenarioError, CalibrationError, OutputFolderError) as exc:
            fail(str(exc))
        except (WorkerLost, OutputWriteError) as exc:
            fail(str(exc), code=1)
        except PluginFailure as exc:
            plugin_failed("calibrate", exc, target)
    print_calibration(summary)
    print_notes(calibration_notes(summary))
    out_console.print(f"results in {summary['folder']}", highlight=False, soft_wrap=True)


@app.command()
def sweep(
    file: ScenarioFile,
    sweep_: Annotated[
        list[str] | None,
        typer.Option("--sweep", help="key.path=v1,v2,... (repeatable; variants are every combination)"),
    ] = None,
    replicates: Annotated[int | None, typer.Option(help="replicates per variant (default: the scenario's)")] = None,
    backend: Annotated[str, typer.Option(help="local or ray")] = "local",
    workers: Annotated[
        int | None,
        typer.Option(
            help="runs at once: local worker processes (default 1; each run holds its population in memory, about "
            "2.5 GB for all of King County, so N at once need N times that) or Ray tasks (default: as many as the "
            "cluster takes); the tables do not depend on it"
        ),
    ] = None,
    ray_address: RayAddressOption = None,
    out: Annotated[
        Path | None, typer.Option(parser=out_option, metavar="PATH", help="output folder (default runs/<name>-sweep)")
    ] = None,
    agents: AgentsOption = None,
    days: DaysOption = None,
    seed: Annotated[int | None, typer.Option(help="seed of replicate 0 (replicate r uses seed + r)")] = None,
    device: DeviceOption = None,
    set_: SetOption = None,
) -> None:
    """Run every combination of --sweep values, with replicates, locally or on Ray.

    FILE is a scenario YAML file (`abm validate FILE` checks it without
    running); --set, --agents, --days, --seed and --device change it for every
    variant. Writes one combined table (sweep.csv, with infections and deaths
    by age group in its last columns), a mean/sd table per variant with its
    changes from the first (sweep_summary.csv), a plot (sweep.png),
    sweep.json and report.html (the tables it prints, the plot and links), at
    the end, all at once; the tables do not depend on the backend or on
    --workers. Finished runs are kept beside the folder until then
    (.<folder>.runs.jsonl): a sweep stopped before its end continues from them
    when the same command runs again, with the same tables.

    Exit code 0 when done; 2 for bad input (nothing is written); 1 when a worker
    process is lost (killed, out of memory), an installed plug-in's code fails
    (no folder is written, no runs are kept) or the file system fails as the
    folder is written (a full disk; no folder is written, finished runs are
    kept); 130 after Ctrl-C, 143 after SIGTERM (no folder is written, finished
    runs are kept, no worker is left running)."""
    with loading():
        from abm.outputs.sweep_by_age import WHERE_BY_AGE
        from abm.overrides import given as options_given
        from abm.parallel import WorkerLost, check_ray_address, check_workers
        from abm.result_notes import sweep_notes
        from abm.scenario import COMMAND_LINE, ScenarioError, check_device
        from abm.sweep import BACKENDS, plan, run_sweep

    if not sweep_:
        fail("--sweep: give at least one key.path=value1,value2,...")
    if backend not in BACKENDS:
        fail(f"--backend: {backend!r} is not allowed; allowed: {', '.join(BACKENDS)}")
    try:
        check_workers(workers, ScenarioError)
        check_ray_address(ray_address, backend, ScenarioError, COMMAND_LINE)
    except ScenarioError as exc:
        fail(str(exc))
    refuse_learning_scenario(file)
    overrides = {"agents": agents, "days": days, "seed": seed, "device": device}
    try:
        sp = plan(file, sweep_, replicates=replicates, sets=set_, **overrides)
        if backend == "local":  # the runs' device is this machine's (Ray's tasks check their cluster's)
            source = COMMAND_LINE.scenario(str(file), set_ or [], options_given(overrides))
            for sc in sp.variants:  # each replicate runs alone
                check_device(sc, source, batch=1)
    except ScenarioError as exc:
        fail(str(exc))
    target = out or Path("runs") / f"{sp.variants[0].name}-sweep"
    try:
        check_target(target, "sweep")
    except OutputFolderError as exc:
        fail(str(exc))
    note_scenario(file, sp.variants, sets=set_, overrides=overrides, sweeps=sweep_, sweep_plan=sp)
    note_workers(workers, backend)
    total = len(sp.variants) * sp.replicates
    if backend == "local":  # each run is one replicate; --workers of them at once
        note_memory(sp.variants, replicates=1, runs=min(workers or 1, total), fewer=("agents",))
    with progress_bar("runs") as bar:
        task = bar.add_task(f"{sp.variants[0].name}: {len(sp.variants)} variants x {sp.replicates}", total=total)
        with stop_on_interrupt(target, bar):
            try:
                result = run_sweep(
                    file,
                    sweep_,
                    backend=backend,
                    workers=workers,
                    ray_address=ray_address,
                    progress=advance(bar, task, "runs"),
                    sweep_plan=sp,
                    names=COMMAND_LINE,
                    warn=False,  # noted above
                    keep=journal_path(target, "runs"),
                    note=lambda text: bar.console.print(f"note: {text}", highlight=False, soft_wrap=True),
                )
                result.write(target)
                results_written()
            except (ScenarioError, OutputFolderError) as exc:  # the folder: something took it during the runs
                fail(str(exc))
            except (WorkerLost, OutputWriteError) as exc:
                fail(str(exc), code=1)
            except PluginFailure as exc:
                plugin_failed("sweep", exc, target, bar)
    for st in result.tables():  # the means, then the changes from the first variant
        print_table(st)
    print_notes(sweep_notes(result.table))
    out_console.print(WHERE_BY_AGE, highlight=False, soft_wrap=True)
    out_console.print(f"results in {target}", highlight=False, soft_wrap=True)


@app.command()
def compare(
    runs: Annotated[list[Path], typer.Argument(help="run folders written by `abm run`; the first is the reference")],
    out: Annotated[Path, typer.Option(parser=out_option, metavar="PATH", help="report folder")] = Path(
        "runs/comparison"
    ),
) -> None:
    """Overlay runs in the same plots and write a comparison table (CSV, Markdown) and an HTML report.

    RUNS are run folders written by `abm run`, of the same number of days; the
    first is the reference: what the others avert (hospitalizations, deaths),
    their cost per averted hospitalization and death and their changes are
    taken against it. The report folder (--out) holds comparison.csv,
    comparison_by_age.csv (deaths by age and what each run averts there),
    comparison.md, report.html and plots/; it is written at the end, all at
    once, and replaces only a comparison abm wrote.

    Exit code 0 when done; 2 for bad input (nothing is written); 130 after
    Ctrl-C, 143 after SIGTERM (nothing is written, an earlier report is kept); 1
    when the file system fails as the folder is written (a full disk: nothing
    is written, an earlier report is kept)."""
    with loading():
        from abm.outputs.compare import CompareError, load_runs

    here = out.resolve()
    with stop_on_interrupt(out):
        try:
            comparison = load_runs(runs)  # first: a folder that is no run is named as such
            if any(here == r.resolve() or here in r.resolve().parents for r in runs):
                fail(f"--out {out} (the report folder) is one of the runs or holds one; give another with --out")
            check_target(out, "comparison")
            comparison.write(out)
            results_written()
        except (CompareError, OutputFolderError) as exc:
            fail(str(exc))
        except OutputWriteError as exc:
            fail(str(exc), code=1)
    # comparison.md as written: the table, its note, the region's figures and deaths by age
    out_console.print((out / "comparison.md").read_text(encoding="utf-8"), highlight=False, soft_wrap=True)
    out_console.print(f"report in {out / 'report.html'}", highlight=False, soft_wrap=True)


data_app = Typer(add_completion=False, no_args_is_help=True, help="Data files the project can use.")
app.add_typer(data_app, name="data")


@data_app.command("boundaries")
def data_boundaries(
    region: Annotated[str, typer.Option(help="bundled region name or region folder")] = "king_county",
    from_: Annotated[
        Path | None, typer.Option("--from", help="a Census tract boundary zip you already have (no download)")
    ] = None,
    timeout: Annotated[float, typer.Option(help="download timeout in seconds")] = 30.0,
) -> None:
    """Download and cache the Census tract boundary file for the region's state.

    Maps then draw real tract boundaries instead of cells built from the tract centroids.
    The file is read in full before it replaces the cached one. Exit code 0 when
    done; 2 for bad input (the cache is left as it was); 1 when the download
    fails; 130 after Ctrl-C, 143 after SIGTERM (the cache is left as it was)."""
    from abm.outputs.boundaries import (
        BoundaryError,
        cached_boundary_file,
        census_url,
        download_boundaries,
        shapes_from_file,
        vintage_note,
    )
    from abm.populations import load_region
    from abm.populations.region import RegionError

    if not math.isfinite(timeout) or timeout <= 0:
        fail(f"--timeout: {timeout:g} is not allowed; give a number of seconds above 0")
    try:
        reg = load_region(region)
    except (RegionError, OSError) as exc:
        fail(f"--region {region}: {exc}")
    state = reg.figures.fips[:2]
    if len(state) != 2:
        fail(f"--region {region}: the region has no state FIPS code (fips in region.yaml)")
    if from_ is None:
        err_console.print(f"downloading {census_url(state)} ...", highlight=False, soft_wrap=True)
    cached = cached_boundary_file(state)
    kept = f"; the file cached before is kept: {cached}" if cached is not None else ""
    with on_interrupt(f"interrupted: nothing was cached{kept}"):  # once cached, an interrupt is ignored
        try:
            path = download_boundaries(state, timeout=timeout, source=from_, tracts=reg.tracts)
            shapes = shapes_from_file(reg.tracts, path)
        except BoundaryError as exc:
            err_console.print(Text.assemble(("error:", "bold red"), f" {exc}"), highlight=False, soft_wrap=True)
            raise typer.Exit(1 if from_ is None else 2) from None
    out_console.print(
        f"cached {path}: {len(shapes.geometry)} tracts of {reg.name}; {shapes.source}", highlight=False, soft_wrap=True
    )
    if shapes.missing:
        err_console.print(
            f"note: {shapes.missing} of the region's {len(shapes.geoid)} tracts are not in the file. "
            f"{vintage_note(state)}.",
            highlight=False,
            soft_wrap=True,
        )


@data_app.command("scenarios")
def data_scenarios(
    folder: Annotated[
        Path, typer.Argument(parser=out_option, metavar="DIR", show_default=True, help="folder to copy them to")
    ] = DEFAULT_EXAMPLES_DIR,
    force: Annotated[
        bool, typer.Option("--force", help="write over the files of their names in a DIR that holds files")
    ] = False,
) -> None:
    """Copy abm's example scenarios (king_county/, reference/, learning/) and their JSON Schemas (schemas/) to DIR.

    They keep their layout, so that `extends:` and `../king_county/...` find
    their files; with the default DIR, README's commands (`abm run
    scenarios/king_county/no_intervention.yaml`) then run from this folder. A
    DIR that exists and is not empty is refused
    unless --force, which writes the examples over the files of their names
    there and keeps its other files. The folder is written all at once.

    Exit code 0 when done; 2 for bad input (nothing is written); 130 after
    Ctrl-C, 143 after SIGTERM, and 1 when the file system fails (nothing is
    written; a DIR that existed is kept as it was)."""
    from abm.example_copy import copy_examples

    untouched = f"{folder} is as it was" if folder.exists() else f"nothing was written to {folder}"
    with on_interrupt(f"interrupted: {untouched}"):
        try:
            copied = copy_examples(folder, force=force)
        except (OutputFolderError, FileNotFoundError) as exc:
            fail(str(exc))
        except OutputWriteError as exc:
            fail(str(exc), code=1)
    say = functools.partial(out_console.print, highlight=False, soft_wrap=True)
    say(f"wrote {counted(len(copied.files), 'example file')} to {folder}{os.sep}:")
    by_folder: dict[str, list[str]] = {}
    for name in copied.files:
        parent, _, file = name.rpartition("/")
        by_folder.setdefault(parent, []).append(file)
    for parent, files in by_folder.items():
        say(f"  {parent + '/' if parent else '.'} ({len(files)}): {', '.join(files)}")
    if copied.overwritten:
        say(f"wrote over {counted(len(copied.overwritten), 'file')} that differed: {', '.join(copied.overwritten)}")
    if copied.kept:
        say(f"kept {counted(len(copied.kept), 'other file')}: {', '.join(copied.kept)}")
    first = "king_county/no_intervention.yaml"
    if first in copied.files:
        say(f"run one: abm run {shlex.quote((folder / first).as_posix())}")


@data_app.command("schema")
def data_schema(
    kind: Annotated[
        str,
        typer.Argument(
            metavar="KIND",
            show_default=True,
            help="the kind of scenario file: epidemic (abm run, sweep, calibrate), learning or private_calibration "
            "(abm learn)",
        ),
    ] = "epidemic",
    out: Annotated[
        str | None, typer.Option("--out", metavar="FILE", help="file to write; default: standard output")
    ] = None,
) -> None:
    """Write the JSON Schema of a kind of scenario file, for editors.

    An editor given it (VS Code's YAML extension, JetBrains IDEs, any client
    of yaml-language-server) completes keys, shows each key's meaning and
    marks unknown keys and wrong values as the file is written
    (docs/editors.md). It is generated from the models `abm validate` checks
    with, and holds the installed plug-in interventions (the example
    scenarios' schemas/, which `abm data scenarios` copies, hold the built-in
    ones). The file is written all at once.

    Exit code 0 when done; 2 for bad input (nothing is written); 1 when the
    file system fails (nothing is written)."""
    from abm.scenario_schemas import KINDS, schema_text, write_schema

    if kind not in KINDS:
        fail(f"KIND: {kind!r} is not a kind of scenario file; give one of {', '.join(KINDS)}")
    if out is not None and not out.strip():
        fail(f"--out {out!r}: give a file name, not an empty value")
    target = Path(out) if out is not None else None
    if target is not None and target.is_dir():
        fail(f"--out {out}: is a folder; give the path of the file to write")
    if target is not None and not target.parent.is_dir():
        fail(f"--out {out}: the folder {target.parent} does not exist; create it or give another file")
    with loading():
        text = schema_text(kind)
    if target is None:
        sys.stdout.write(text)
        return
    with on_interrupt(f"interrupted: nothing was written to {out}"):
        try:
            write_schema(text, target)
        except OSError as exc:
            fail(f"--out {out}: cannot be written ({exc.strerror or exc}); nothing was written", code=1)
    out_console.print(f"wrote the {kind} scenario schema to {out}", highlight=False, soft_wrap=True)


def print_table(
    st: SummaryTable, *, left: tuple[str, ...] = (), no_wrap_from: int | None = None, headings: bool = False
) -> None:
    """``st`` as a rich table on stdout: its first column and those named in ``left`` to the left,
    the others to the right (from column ``no_wrap_from`` on, never wrapped); with ``headings``, a
    row whose other cells are all empty (a heading over the rows below it) in bold."""
    table = Table(title=st.title, caption=st.caption or None)
    for i, name in enumerate(st.columns):
        right = i > 0 and name not in left
        table.add_column(
            name,
            justify="right" if right else "left",
            overflow="fold",
            no_wrap=no_wrap_from is not None and i >= no_wrap_from,
        )
    for row in st.rows:
        heading = headings and not any(row[1:])
        table.add_row(Text(row[0], style="bold") if heading else row[0], *row[1:])
    out_console.print(table)


def print_calibration(summary: dict) -> None:
    """Two short tables on stdout, for a reader who has not read docs/calibration.md
    (:func:`abm.calibration.report.calibration_tables`, as ``report.html`` shows them): the
    fitted parameters and, per target, each loss on the fit and held-out windows (a target's own
    row in bold)."""
    from abm.calibration.report import calibration_tables

    for st in calibration_tables(summary):
        print_table(st, left=("at a bound",), headings=st.columns[0] == "target / loss")


def print_summary(s: dict, engine_seconds: float, target: Path) -> None:
    """A short table of the main results on stdout (:func:`abm.outputs.summary_table.summary_table`,
    as ``report.html`` shows it, with the engine's seconds; the region's column never wrapped), and
    where the results are."""
    from abm.outputs.summary_table import summary_table

    print_table(summary_table(s, engine_seconds), no_wrap_from=2)
    out_console.print(f"results in {target}", highlight=False, soft_wrap=True)


def main() -> None:
    """Console-script entry point. An interrupt outside a command's own handling (while Typer
    builds the commands or reads the options, or in a command before its work starts) is said
    as one line with exit code 130: Typer would end such a Ctrl-C silently, or with a traceback."""
    try:
        app()
    except KeyboardInterrupt:
        report(STARTING)
        raise SystemExit(130) from None
    except PluginError as exc:  # raised as the scenario model is built, before a command's own handling
        err_console.print(Text.assemble(("error:", "bold red"), f" {exc}"), highlight=False, soft_wrap=True)
        raise SystemExit(2) from None
    except SystemExit as exc:
        if exc.code == 130 and not reported():
            report(STARTING)
        raise


if __name__ == "__main__":
    main()
