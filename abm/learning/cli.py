"""The ``abm learn FILE [--out DIR] [--runner NAME] [--set key.path=value ...]`` command body (wired
into the ``abm`` typer app)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from abm.learning.errors import FlowerRunError, LearningScenarioError, SecureAggregationError


def load_or_exit(
    load: Callable[..., tuple[Any, Any]], file: Path, runner: str | None, sets: list[str] | None = None
) -> Any:
    """The scenario ``load(file, runner, sets)`` returns first, with the checks ``abm validate``
    makes of it before it runs (:func:`check_before_run`: a learning scenario's split, Flower
    installed), so that a scenario they refuse gets its one message before anything is said of a
    run; on an invalid one, its message on stderr and exit code 2. Those checks' messages name the
    file with its ``--set`` options, as ``abm validate`` says them (a private calibration's
    ``load`` returns the file's folder second, which they named)."""
    import typer

    try:
        scenario = load(file, runner, sets)[0]
        check_before_run(scenario, named(file, sets, runner))
        return scenario
    except LearningScenarioError as e:
        print(f"error: {e}", file=sys.stderr)
        raise typer.Exit(code=2) from None


# What sets a run's memory, by the kind of output (run_or_exit's ``kind``): named when it runs out.
SIZE_KEYS = {
    "learning": "data.n_samples, data.n_features, the models' hidden, channels and embed_dim, split.participants",
    "private_calibration": "institutions[*].agents and budget, the evaluation's simulations, the models' widths",
}


def out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is an allocation that failed: on the CPU, NumPy's MemoryError or torch's
    allocator (:func:`abm.memory.cpu_allocation_failed`, as ``abm run`` knows them), or a GPU's
    (a RuntimeError that says "out of memory", as ``torch.OutOfMemoryError`` does)."""
    from abm.memory import cpu_allocation_failed

    return cpu_allocation_failed(exc) or (isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower())


def memory_message(kind: str) -> str:
    """What a run of ``kind`` that ran out of memory says (after the file's name)."""
    return f"the run needs more memory than this machine has; give smaller sizes ({SIZE_KEYS[kind]})"


def check_before_run(scenario: Any, source: str) -> None:
    """The checks ``abm learn`` makes of a loaded scenario (a learning or a private-calibration
    one) only as it runs, for ``abm validate``: a learning scenario's split
    (:func:`abm.learning.split.check_split`) and, for the Flower runners, that Flower is
    installed. Raises :class:`LearningScenarioError` with ``source`` (the file, with any
    ``--set`` options) first, as ``abm learn`` says it."""
    from abm.learning.scenario import LearningScenario, class_count

    learning = isinstance(scenario, LearningScenario)
    try:
        if learning:
            from abm.learning.split import check_split

            check_model_sizes(scenario, check_split(scenario), class_count(scenario.data))
        else:  # a private calibration's calibrators read (channels, weeks) series into the joint bins
            from abm.private_calibration.observed import CHANNELS

            check_model_sizes(scenario, (len(CHANNELS), scenario.model.weeks), scenario.grid().n_classes)
        if scenario.runner != "inprocess":
            from abm.learning.flower import import_flwr

            import_flwr()
    except LearningScenarioError as e:
        raise LearningScenarioError(f"{source}: {e}") from None
    except (MemoryError, RuntimeError) as e:  # the data of absurd sizes (n_samples: 1e11) are built here
        if not out_of_memory(e):
            raise
        kind = "learning" if learning else "private_calibration"
        raise LearningScenarioError(f"{source}: {memory_message(kind)}") from None


def check_model_sizes(scenario: Any, input_shape: tuple[int, ...], classes: int) -> None:
    """A learning or private-calibration scenario's models (its own and every protocol's) on
    inputs of ``input_shape`` into ``classes``: one whose weights alone exceed this machine's
    memory and swap (a hidden width of 1e11) raises MemoryError, as building it would, so that
    :func:`check_before_run` refuses it as it refuses data of such sizes, for ``abm validate``
    too, which builds no model (it said the scenario was valid, and ``abm learn`` refused it only
    after saying it was running)."""
    from abm.memory import total_memory_bytes

    total = total_memory_bytes()
    if total is None:
        return
    specs = [*scenario.models, *(m for p in scenario.protocols for m in p.models or [])]
    if any(4 * spec.parameter_count(input_shape, classes) > total for spec in specs):  # float32 weights
        raise MemoryError("the models' weights exceed this machine's memory")


def run_or_exit(
    work: Callable[[], dict[str, Any]], target: Path, file: Path | str, kind: str = "learning", header: str = ""
) -> dict[str, Any]:
    """``work()``'s report, ``header`` said first on stderr once the output folder is known to be
    usable; a bad output folder (for an output of ``kind``), or a scenario found
    unworkable once its data are built (``file`` named: the path, with any ``--set`` options,
    :func:`abm.learning.scenario.scenario_data`), gets its message and exit code 2; a
    secure-aggregation round that cannot be summed (a diverged update), a Flower run that cannot
    go on (a client process ended, a client operation raised or went unanswered), or a file
    system that fails as the folder is written (a full disk), one line and exit code 1; an
    installed plug-in whose code fails in a simulation (a private calibration's model scenario may
    have one), its line and traceback and exit code 1 (:func:`abm.cli.plugin_failed`);
    a run that runs out of memory (sizes too large for the machine: :func:`out_of_memory`), one
    line naming what sets them and exit code 2; Ctrl-C a one-line notice and exit code 130 (nothing
    is written in any of these, and the lines say whether an earlier output in ``target`` is kept:
    :func:`abm.outputs.run_folder.not_written`)."""
    import typer

    from abm.cli import learning_progress, not_written, plugin_failed, progress_bar
    from abm.interrupts import report, results_written
    from abm.learning.progress import listening
    from abm.outputs.run_folder import OutputFolderError, OutputWriteError, check_target
    from abm.plugin_errors import PluginFailure

    try:
        check_target(target, kind)
        if header:  # one write: print() writes the line and its newline apart, and a Ctrl-C between
            sys.stderr.write(f"{header}\n")  # the two glued the interrupt's line to this one
            sys.stderr.flush()
        with progress_bar("") as bar, listening(learning_progress(bar)):  # gone before the table prints
            result = work()
            results_written()  # the output is complete: an interrupt as the bar closes is ignored (abm.entry)
        return result
    except OutputFolderError as e:
        print(f"error: {e}", file=sys.stderr)
        raise typer.Exit(code=2) from None
    except LearningScenarioError as e:
        print(f"error: {file}: {e}", file=sys.stderr)
        raise typer.Exit(code=2) from None
    except OutputWriteError as e:  # the file system failed (a full disk): the run's results are lost
        print(f"error: {e}", file=sys.stderr)
        raise typer.Exit(code=1) from None
    except SecureAggregationError as e:  # a round that cannot be unmasked (a survivor went silent): the run failed
        print(f"error: {file}: {e}; {not_written(target)}", file=sys.stderr)
        raise typer.Exit(code=1) from None
    except FlowerRunError as e:  # a client ended, failed or went silent, or the clients did not connect in time
        print(f"error: {file}: the Flower run failed: {e}; {not_written(target)}", file=sys.stderr)
        raise typer.Exit(code=1) from None
    except PluginFailure as e:  # a plug-in of the model scenario (private calibration) failed: its defect
        plugin_failed("learn", e, target)
    except (MemoryError, RuntimeError) as e:
        if not out_of_memory(e):
            raise
        print(f"error: {file}: {memory_message(kind)}; {not_written(target)}", file=sys.stderr)
        raise typer.Exit(code=2) from None
    except KeyboardInterrupt:
        report(f"interrupted: {not_written(target)}")
        raise typer.Exit(code=130) from None


def named(file: Path, sets: list[str] | None, runner: str | None) -> str:
    """The scenario file in ``abm learn``'s messages, with the ``--set`` and ``--runner`` options
    that changed it (``FILE (with --set rounds=2 --runner flower)``)."""
    from abm.set_options import COMMAND_LINE

    return COMMAND_LINE.scenario(str(file), list(sets or []), [] if runner is None else [("runner", runner)])


def announce(scenario: Any, protocols: int, members: str, target: Path) -> str:
    """The line that says what is about to run and where it goes."""
    return (
        f"running {scenario.name}: {members}, {protocols} protocols (local-only included), runner {scenario.runner} "
        f"-> {target}"
    )


def learn(file: Path, out: Path | None = None, runner: str | None = None, sets: list[str] | None = None) -> None:
    """Run a learning scenario; write report.json, report.md, report.html and plots to OUT
    (default runs/<name>).

    ``runner`` (inprocess, flower-sim, flower) overrides the scenario's ``runner`` key; ``sets``
    (``key.path=value``, as ``abm run --set``) override any key. An invalid scenario, runner or
    set prints one clear message and exits with code 2, writing nothing.
    """
    from abm.byte_sizes import size_text
    from abm.learning.report import (
        console_legend,
        gain_shown,
        key_width,
        privacy_lines,
    )
    from abm.learning.result import learn as learn_scenario
    from abm.learning.runner import protocol_specs
    from abm.learning.scenario import load_scenario
    from abm.result_notes import learning_notes
    from abm.scenario import COMMAND_LINE

    scenario = load_or_exit(load_scenario, file, runner, sets)
    target = out if out is not None else Path("runs") / scenario.name
    header = announce(scenario, len(protocol_specs(scenario)), f"{scenario.split.participants} participants", target)
    report = run_or_exit(
        lambda: learn_scenario(file, target, runner=runner, sets=sets, names=COMMAND_LINE, warn=False).report,
        target,
        named(file, sets, runner),
        header=header,
    )
    width = key_width(report["protocols"], 22)
    print(f"{'protocol':<{width}}{'mean':>8}{'MCG':>8}{'CGS':>8}{'min gain':>10}{'sent':>11}")
    for key, r in report["protocols"].items():
        print(
            f"{key:<{width}}{r['mean_score']:>8.3f}{gain_shown(r['mcg']):>8.3f}{r['cgs']:>8.3f}"
            f"{gain_shown(r['min_gain']):>10.3f}{size_text(r['bytes_total']):>11}"
        )
    print(console_legend(report))
    for line in privacy_lines(report["protocols"]):
        print(line)
    print(f"report: {target / 'report.json'}")
    for note in learning_notes(report):
        print(f"note: {note}", file=sys.stderr)
