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
from typing import TYPE_CHECKING, Annotated

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
    from abm.sweep import SweepAxis, SweepPlan

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
            note_switched_on(file, [sc], [("--set", s) for s in set_ or []], {})
            note_unapplied_settings(file, set_)
            note_idle([sc])
            note_fixed_counts(file, [sc])
            note_residents_per_agent([sc])
            note_priority_groups([sc])
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


def note_unapplied_settings(file: Path, sets: list[str] | None, sweeps: Sequence[SweepAxis] = ()) -> None:
    """A note for each intervention whose key is present with no value (``vaccination:``): it is
    off (a file that extends another turns one off so), while ``{}`` turns it on; for each
    ``--set`` whose mapping replaces one of the file's and so drops keys the file gives, and each
    swept mapping (of ``sweeps``, a sweep's axes) that does so in its variants; for a dose rate
    that ``daily_doses`` replaces; and for a residents' disease table on the reference population,
    which has no residents."""
    from abm.scenario import ScenarioError, apply_set, dotted, read_scenario_data, replaced_keys

    def replaces(option: str, key: str, dropped: list[str], where: str, instead: str) -> str:
        return (
            f"{option} replaces {key} as a whole{where}, so {', '.join(dropped)} given by {file} "
            f"{'is' if len(dropped) == 1 else 'are'} dropped; to change one entry and keep the others, "
            f"write {instead}"
        )

    notes = []
    try:
        data = read_scenario_data(file)
        for item in sets or []:
            dropped = replaced_keys(data, item)
            if dropped:
                key = dotted(item.partition("=")[0].strip())
                notes.append(replaces(f"--set {item}", key, dropped, "", f"--set {key}.NAME=VALUE"))
            data = apply_set(data, item)
    except ScenarioError:
        return
    for axis in sweeps:  # the values that drop the same keys, in one note
        by_dropped: dict[tuple[str, ...], list[str]] = {}
        for text in axis.texts:
            dropped = tuple(replaced_keys(data, f"{axis.key}={text}"))
            if dropped:
                by_dropped.setdefault(dropped, []).append(text)
        for dropped, texts in by_dropped.items():
            key, where = dotted(axis.key), " in its variants" if len(texts) > 1 else " in its variant"
            option = f"--sweep {axis.key}={','.join(texts)}"
            notes.append(replaces(option, key, list(dropped), where, f"--sweep {key}.NAME=VALUE1,VALUE2,..."))
    interventions = data.get("interventions")
    for name, value in interventions.items() if isinstance(interventions, dict) else []:
        if value is None:
            notes.append(
                f"interventions.{name} has no value, so {name} is off; write `{name}: {{}}` to turn it on "
                "with its defaults"
            )
    vaccination = interventions.get("vaccination") if isinstance(interventions, dict) else None
    if isinstance(vaccination, dict) and None not in (
        vaccination.get("daily_doses"),
        vaccination.get("daily_doses_per_100k"),
    ):
        notes.append(
            f"interventions.vaccination gives daily_doses ({vaccination['daily_doses']}) and daily_doses_per_100k "
            f"({vaccination['daily_doses_per_100k']}): daily_doses replaces the rate, which is not used; to use the "
            "rate, set interventions.vaccination.daily_doses=null"
        )
    disease, population = data.get("disease"), data.get("population")
    if (
        isinstance(disease, dict)
        and disease.get("long_term_care_branching") is not None
        and isinstance(population, dict)
        and population.get("kind") == "reference"
    ):
        notes.append(
            "disease.long_term_care_branching is not used: the reference population (population.kind: reference) "
            "has no long-term-care residents"
        )
    for text in notes:
        err_console.print(f"note: {text}", highlight=False, soft_wrap=True)


def run_settings(sc: Scenario) -> dict:
    """What a sweep's run of ``sc`` uses, as plain data: its values without those no such run
    reads (the description, the calibration section, the settings of an intervention with
    ``enabled: false``, the map's days and tract boundaries: a sweep draws no map)."""
    unread = {"description": True, "calibration": True, "outputs": {"map_days", "boundaries"}}
    data = sc.model_dump(mode="json", by_alias=True, exclude=unread)
    on = sc.interventions.enabled()
    data["interventions"] = {name: value for name, value in data["interventions"].items() if name in on}
    return data


def note_same_variants(sweep_plan: SweepPlan) -> None:
    """A note for each group of a sweep's variants that resolve to the same scenario, as runs use
    it (:func:`run_settings`): the swept values change nothing the runs use (a rate that another
    key replaces, a setting of an intervention that is off, the calibration section), so those
    variants' results are the same."""
    import json

    groups: dict[str, list[int]] = {}
    for v, sc in enumerate(sweep_plan.variants):
        groups.setdefault(json.dumps(run_settings(sc), sort_keys=True), []).append(v)
    for variants in groups.values():
        if len(variants) > 1:
            labels = " and ".join(f"({sweep_plan.label(v, short=True)})" for v in variants)
            err_console.print(
                f"note: the variants {labels} resolve to the same scenario (the swept values change nothing the "
                "runs use), so their results are the same",
                highlight=False,
                soft_wrap=True,
            )


def note_workers(workers: int | None, backend: str) -> None:
    """A note when ``--workers`` asks this machine for more processes at once than the CPUs it may
    use: they share them, each run slower (the results are the same)."""
    from abm.parallel import usable_cpus

    cpus = usable_cpus()
    if backend == "local" and workers is not None and workers > cpus:
        err_console.print(
            f"note: --workers {workers} is more than the {cpus} CPU{'s' if cpus > 1 else ''} this process may use: "
            "the runs share them and each takes longer (the results are the same)",
            highlight=False,
            soft_wrap=True,
        )


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
    if text is not None:
        err_console.print(f"note: {text}", highlight=False, soft_wrap=True)


def note_switched_on(file: Path, resolved: list, options: list[tuple[str, str]], overrides: dict) -> None:
    """A note for each intervention that is on in a ``resolved`` scenario while ``file`` (with
    ``overrides``, without the options) lacks it: the ``(option, key=value)`` options turned it on,
    with the defaults for everything they do not set."""
    from abm.overrides import resolve
    from abm.scenario import ScenarioError

    try:
        base = resolve(file, overrides, None)
    except ScenarioError:  # the file is valid only with its options: nothing to compare with
        return
    names = type(base.interventions).model_fields
    for name in names:
        if getattr(base.interventions, name, None) is not None:
            continue
        if not any(getattr(getattr(sc.interventions, name, None), "enabled", False) for sc in resolved):
            continue
        keys = [(opt, text, text.split("=", 1)[0].strip()) for opt, text in options]
        given = [
            f"{opt} {text}"
            for opt, text, key in keys
            if key == "interventions" or key.startswith(f"interventions.{name}")
        ]
        err_console.print(
            f"note: {', '.join(given) or 'an option'} turns {name} on ({file} has no interventions.{name}); "
            "its other settings take their defaults",
            highlight=False,
            soft_wrap=True,
        )


def per_100k_text(count: float, agents: int) -> str:
    """``count`` per 100,000 of ``agents``, as a note gives it: whole from 10 up (15,000), else
    two significant figures (0.22)."""
    rate = count * 1e5 / agents
    return f"{rate:,.0f}" if rate >= 10 else f"{rate:.2g}"


def fixed_counts(sc: Scenario, own: int) -> list[str]:
    """Notes (without ``note: ``) on what a scenario gives as counts that stay the same at any
    number of agents (the initial infections, vaccination's daily_doses, the daily capacities of
    test types and of manual tracing), with their share per 100,000 of its agents and of ``own``,
    the agents of the scenario file without the options, and the setting that scales instead,
    where there is one."""
    counts: list[tuple[str, float, str | None]] = []
    seeds = sum(sc.seeding.infections.values()) if sc.seeding.infections_per_100k is None else 0
    if seeds:
        counts.append((f"seeding.infections seeds {counted(seeds, 'agent')}", seeds, "infections_per_100k"))
    vaccination = getattr(sc.interventions, "vaccination", None)
    if vaccination is not None and vaccination.enabled and vaccination.daily_doses is not None:
        doses = vaccination.daily_doses
        counts.append(
            (f"interventions.vaccination.daily_doses gives {doses} doses a day", doses, "daily_doses_per_100k")
        )
    testing = getattr(sc.interventions, "testing", None)
    for i, test in enumerate(testing.tests if testing is not None and testing.enabled else []):
        if test.daily_capacity:  # 0 gets its own note: the test type does nothing
            key = f"interventions.testing.tests[{i}].daily_capacity"
            counts.append((f"{key} gives {test.daily_capacity} {test.name} tests a day", test.daily_capacity, None))
    tracing = getattr(sc.interventions, "manual_tracing", None)
    if tracing is not None and tracing.enabled and tracing.daily_capacity:
        capacity = tracing.daily_capacity
        what = f"interventions.manual_tracing.daily_capacity gives {capacity} interviews a day"
        counts.append((what, capacity, None))
    agents = sc.population.agents
    return [
        f"{what} whatever the population: {per_100k_text(count, agents)} per 100,000 at {agents:,} agents, against "
        f"{per_100k_text(count, own)} at the file's {own:,}" + (f" ({rate} scales instead)" if rate else "")
        for what, count, rate in counts
    ]


def rounded_to_none(sc: Scenario) -> dict[str, str]:
    """For a seeding per 100,000 (``infections_per_100k``), each stage above 0 whose count rounds
    half up to none at the scenario's agents, with why in numbers: its rate, the agents it comes
    to and the fewest agents that seed one (``3 per 100,000 is 0.06 agents, rounded half up to 0;
    16,667 agents or more seed one``)."""
    from fractions import Fraction

    rates, agents = sc.seeding.infections_per_100k, sc.population.agents
    if rates is None:
        return {}
    counts = sc.seeding.counts(agents)
    return {
        stage: f"{rate:g} per 100,000 is {rate * agents / 1e5:.2g} agents, rounded half up to 0; "
        f"{math.ceil(Fraction(50_000) / Fraction(repr(float(rate)))):,} agents or more seed one"
        for stage, rate in rates.items()
        if rate > 0 and counts[stage] == 0
    }


def seeds_no_one(sc: Scenario) -> str:
    """What says that a scenario's seeding infects no one (its counts, or its rate per 100,000
    rounded to none at its agents, in numbers: :func:`rounded_to_none`)."""
    if sc.seeding.infections_per_100k is None:
        return "seeding.infections seeds no one"
    why = "; ".join(f"{stage}: {text}" for stage, text in rounded_to_none(sc).items())
    return f"seeding.infections_per_100k seeds no one at {sc.population.agents:,} agents" + (f" ({why})" if why else "")


def file_agents(file: Path) -> int | None:
    """The agents of scenario ``file`` without a command's options (None where it is not valid
    without them)."""
    from abm.overrides import resolve
    from abm.scenario import ScenarioError

    try:
        return resolve(file).population.agents
    except ScenarioError:
        return None


def note_fixed_counts(file: Path, resolved: list) -> None:
    """A note for each count of the ``resolved`` scenarios that stays the same at any number of
    agents (:func:`fixed_counts`) where an option (``--agents``, ``--set population.agents=...``, a
    swept value) gave them other agents than ``file``'s own, once though several variants have it."""
    own = file_agents(file)
    if own is None:
        return
    texts = (text for sc in resolved if sc.population.agents != own for text in fixed_counts(sc, own))
    for text in dict.fromkeys(texts):
        err_console.print(f"note: {text}", highlight=False, soft_wrap=True)


def note_idle(resolved: list, labels: list[str] | None = None) -> None:
    """A note for each intervention that starts after the last simulated day, since the run then
    goes without it, for a scenario that seeds no infection, and for each stage of a seeding per
    100,000 that rounds to none at its agents (:func:`rounded_to_none`; in any of the ``resolved``
    scenarios: a sweep's variants, each named by its ``labels`` in a note that holds for some of
    them only). A day a note names gets its date in a scenario with ``simulation.start_date``."""
    from abm.day_dates import with_day_dates

    per_variant = []
    for sc in resolved:
        texts = [with_day_dates(text, sc.simulation.start_date) for text in sc.interventions.idle(sc.simulation.days)]
        if not any(sc.seeding.counts(sc.population.agents).values()):
            texts.append(
                f"{seeds_no_one(sc)}, so no one is infected in this run (only the interventions' own counts and "
                "costs, such as doses, are recorded)"
            )
        else:  # some stages seeded, others rounded to none
            texts += [
                f"seeding.infections_per_100k seeds no {stage} agent at {sc.population.agents:,} agents: {text}"
                for stage, text in rounded_to_none(sc).items()
            ]
        per_variant.append(texts)
    note_variants(per_variant, labels)


def note_residents_per_agent(resolved: list, labels: list[str] | None = None) -> None:
    """A note for a ``resolved`` scenario with more agents than its region's residents, which
    scales the figures for the region down (:func:`abm.residents_per_agent.more_agents_than_residents`;
    a sweep's variants named by their ``labels`` where only some have it)."""
    from abm.residents_per_agent import more_agents_than_residents

    note_variants([[t] if (t := more_agents_than_residents(sc)) else [] for sc in resolved], labels)


def note_priority_groups(resolved: list, labels: list[str] | None = None) -> None:
    """A note for each plain age group of a ``resolved`` scenario's vaccination priority list that
    cuts its population's age bands (:func:`abm.named_settings.priority_group_notes`; a sweep's
    variants named by their ``labels`` where only some have it)."""
    from abm.named_settings import priority_group_notes
    from abm.populations import load_region

    note_variants([priority_group_notes(sc, load_region(sc.population.region)) for sc in resolved], labels)


def note_variants(per_variant: list[list[str]], labels: list[str] | None = None) -> None:
    """Print each note text of ``per_variant`` (the texts of each scenario run: one, or a sweep's
    variants) once, in order; a text that holds for some variants only names them by their
    ``labels``."""
    from abm.plurals import plural

    where: dict[str, list[int]] = {}
    for v, texts in enumerate(per_variant):
        for text in dict.fromkeys(texts):
            where.setdefault(text, []).append(v)
    for text, variants in where.items():
        if labels is not None and len(variants) < len(per_variant):
            text += f" ({plural('variant', len(variants))} {'; '.join(labels[v] for v in variants)})"
        err_console.print(f"note: {text}", highlight=False, soft_wrap=True)


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
    note_switched_on(file, [sc], [("--set", s) for s in set_ or []], overrides)
    note_unapplied_settings(file, set_)
    note_idle([sc])
    note_fixed_counts(file, [sc])
    note_residents_per_agent([sc])
    note_priority_groups([sc])
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
            ).summary
            results_written()
        except (ScenarioError, CalibrationError, OutputFolderError) as exc:
            fail(str(exc))
        except (WorkerLost, OutputWriteError) as exc:
            fail(str(exc), code=1)
        except PluginFailure as exc:
            plugin_failed("calibrate", exc, target)
    print_calibration(summary)
    if summary["at_bounds"]:
        err_console.print(
            f"note: fitted at (or within 1% of) a bound: {', '.join(summary['at_bounds'])}; the fit may want a value "
            "outside calibration.parameters' bounds",
            highlight=False,
            soft_wrap=True,
        )
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
    options = [("--set", s) for s in set_ or []] + [("--sweep", s) for s in sweep_]
    note_switched_on(file, sp.variants, options, overrides)
    note_unapplied_settings(file, set_, sp.axes)
    labels = [sp.label(v, short=True) for v in range(len(sp.variants))]
    note_idle(sp.variants, labels)
    note_fixed_counts(file, sp.variants)
    note_residents_per_agent(sp.variants, labels)
    note_priority_groups(sp.variants, labels)
    note_same_variants(sp)
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
    late = int(result.table["peak_hospital_at_end"].sum())
    if late:
        err_console.print(
            f"note: in {late} of {total} runs the hospital curve is at its maximum on the last simulated day "
            "(peak_hospital_at_end in sweep.csv): the peak may come later, after the run, so it is a lower bound; "
            "run more days",
            highlight=False,
            soft_wrap=True,
        )
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
    """Copy abm's example scenarios (king_county/, reference/, learning/) to DIR.

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
