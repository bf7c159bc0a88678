"""Learning and private calibration from Python: :func:`learn` (``abm.learn``, what ``abm learn``
runs) and the :class:`LearningResult` it returns. Light to import: the learning libraries load
when :func:`learn` is called."""

from __future__ import annotations

import contextlib
import reprlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from abm.learning.errors import LearningScenarioError
from abm.learning.progress import listening
from abm.scenario_kinds import EPIDEMIC_SECTIONS, LEARNING, PRIVATE_CALIBRATION, learning_kind

if TYPE_CHECKING:
    import pandas as pd

    from abm.set_options import OptionNames


def scenario_kind(data: dict[str, Any], source: str) -> str | None:
    """What a scenario's top-level mapping ``data`` (from ``source``, named in the message) is for
    ``abm learn``: :data:`PRIVATE_CALIBRATION`, :data:`LEARNING` or None (neither: an epidemic
    scenario, or one the learning loader will say is incomplete;
    :func:`abm.scenario_kinds.learning_kind`). Another ``kind`` than private_calibration raises
    :class:`LearningScenarioError`."""
    if "kind" in data and data["kind"] != "private_calibration":
        raise LearningScenarioError(
            f"{source}: kind: {data['kind']!r} is not allowed: write private_calibration (or leave kind out "
            "for a learning or an epidemic scenario)"
        )
    return learning_kind(data)


@dataclass(frozen=True)
class LearningResult:
    """A finished learning or private-calibration run: ``report``, what ``report.json`` holds;
    ``folder``, the report folder written; ``kind``, ``learning`` or ``private calibration``.
    :attr:`table` gives each protocol's figures (the table ``abm learn`` prints) as a DataFrame."""

    report: dict[str, Any]
    folder: Path
    kind: str

    @property
    def table(self) -> pd.DataFrame:
        """One row per protocol (by its key) with its figures that are single values: for
        learning ``mean_score``, ``mcg``, ``cgs``, ``min_gain``, ``bytes_total``, ...; for a
        private calibration ``mean_recovery``, ``mcg``, ``cgs``, ``mean_nd``, ``bytes_total``, ...
        (``report.json``'s ``protocols``, without their lists and mappings)."""
        import pandas as pd

        rows = {
            key: {k: v for k, v in figures.items() if v is None or isinstance(v, str | int | float)}
            for key, figures in self.report["protocols"].items()
        }
        return pd.DataFrame.from_dict(rows, orient="index")

    def __repr__(self) -> str:
        """The scenario, its protocols and the folder in one line (the report would fill a
        notebook's cell)."""
        protocols = list(self.report["protocols"])
        return f"<LearningResult of {self.report['scenario']!r} ({self.kind}): protocols {protocols}; in {self.folder}>"


def learn(
    scenario: str | Path | dict[str, Any],
    out: str | Path | None = None,
    *,
    runner: str | None = None,
    sets: list[str] | None = None,
    progress: Callable[[str, int, int, str], None] | None = None,
    names: OptionNames | None = None,
    warn: bool = True,
) -> LearningResult:
    """Run a decentralized-learning or a private-calibration scenario and write its report
    folder, as ``abm learn`` does (it calls this); return the report and the folder.

    Arguments:
        scenario: a learning scenario (docs/learning.md) or a private-calibration one (``kind:
            private_calibration``, docs/private_calibration.md): a file's path, or its data (a
            dict; a private calibration's relative paths are then read from scenarios/learning).
        out: the report folder (None: ``runs/<name>``); a new or empty folder, or a report abm
            wrote, which is replaced.
        runner: ``inprocess``, ``flower-sim`` or ``flower`` (None: the scenario's ``runner`` key).
        sets: ``key.path=value`` texts, as ``abm learn --set`` takes them (``["rounds=5"]``).
        progress: called as ``progress(label, done, total, note)`` as the work advances: a
            protocol's rounds (``label`` its key), a private calibration's simulations; ``note``
            says how it ended once ``done == total``; an empty ``label`` brings a line of its own
            in ``note`` (:mod:`abm.learning.progress`). None: nothing is told.
        names: how messages name the arguments: :data:`abm.set_options.PYTHON` (``sets=[...]``,
            None's default) or ``COMMAND_LINE`` (``--set``, as ``abm learn`` gives).
        warn: once the report folder is written, give the note ``abm learn`` prints after its
            table (participants scored on fewer than 20 test samples, whose gains say little) as
            a warning of class :class:`abm.ResultNote` (:mod:`abm.result_notes`), with its text,
            that holds the result as ``note.result`` (False: ``abm learn``, which prints it).

    The report folder holds ``report.json``, ``report.md``, ``report.html``, ``scenario.json``
    and the plots; it is written at the end, all at once. Needs the ``learning`` extra. Bad input
    raises :class:`abm.learning.LearningScenarioError` (a ``ValueError``) with the message ``abm
    learn`` prints; nothing is printed or written then.
    """
    from abm.learning.files import read_yaml
    from abm.outputs.run_folder import output_path
    from abm.set_options import PYTHON

    names = names or PYTHON
    if progress is not None and not callable(progress):
        raise LearningScenarioError(
            f"progress: {reprlib.repr(progress)} is not allowed; give a function progress(label, done, total, note), "
            "or None"
        )
    if isinstance(scenario, bool) or not isinstance(scenario, dict | str | Path):
        raise LearningScenarioError(
            f"scenario: {reprlib.repr(scenario)} is not allowed; give a scenario file's path or its data (a dict)"
        )
    source = "scenario" if isinstance(scenario, dict) else str(scenario)
    data = scenario if isinstance(scenario, dict) else read_yaml(scenario)
    kind = scenario_kind(data, source)
    if kind is None and EPIDEMIC_SECTIONS & data.keys():
        raise LearningScenarioError(
            f"{source}: this is an epidemic scenario, not a learning one; run it with abm.run(), or abm.calibrate() "
            "for its calibration section"
        )
    folder = output_path(out, "out") if out is not None else None
    with listening(progress) if progress is not None else contextlib.nullcontext():
        found = _run(scenario, kind, folder, runner, sets, names)
    result = LearningResult(found[0], found[1], kind or LEARNING)
    if warn:  # once the folder is written: a filter that makes the note an error loses nothing
        from abm import result_notes, scenario_notes

        scenario_notes.warn(result_notes.with_result(result_notes.learning_notes(result.report), result))
    return result


def _run(
    scenario: str | Path | dict[str, Any],
    kind: str | None,
    folder: Path | None,
    runner: str | None,
    sets: list[str] | None,
    names: OptionNames,
) -> tuple[dict[str, Any], Path]:
    """Run ``scenario`` of ``kind`` (:func:`learn`'s checked arguments; ``folder`` None: its
    default); its report and the folder written."""
    if kind == PRIVATE_CALIBRATION:
        from abm.private_calibration import report as private
        from abm.private_calibration.scenario import load_scenario as load_private

        folder = folder or Path("runs") / load_private(scenario, runner, sets, names)[0].name
        return private.run_private_calibration(scenario, folder, runner, sets, names=names), folder
    else:
        from abm.learning import report as learning
        from abm.learning.scenario import load_scenario

        folder = folder or Path("runs") / load_scenario(scenario, runner, sets, names)[0].name
        return learning.run_scenario(scenario, folder, runner, sets, names=names), folder
