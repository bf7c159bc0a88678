"""The notes on a finished command's results: what ``abm sweep``, ``abm calibrate`` and ``abm
learn`` print after their tables (``note: TEXT``), and ``abm compare`` in the paragraph under its
table, and what :func:`abm.run`, :func:`abm.run_sweep`, :func:`abm.calibrate`, :func:`abm.learn`
and :func:`abm.compare` give, with the same text, as warnings of class
:class:`ResultNote` once the result is complete (and, where they write a folder, written):

- a run's hospital curve at its maximum on the last simulated day (:func:`run_notes`; ``abm run``
  says so in its table's peak rows instead), or a sweep's runs whose curve is (:func:`sweep_notes`):
  the peak may come after the run;
- a calibration's fitted values at (or within 1% of) a bound of their range
  (:func:`calibration_notes`);
- a learning run's participants scored on so few test samples that their gains say little
  (:func:`learning_notes`);
- compared runs (``abm compare``, :func:`abm.compare`, which gives them; comparison.md says them
  in the paragraph under its table) whose cost per averted hospitalization or death is not
  reliable, that lack the reproduction number, whose hospital curve is at its maximum on the last
  day (:func:`compared_peaks_at_end`) or that differ in more than their interventions
  (:func:`comparison_notes`).

Importing this module is light (no torch, no pandas)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from abm.outputs.peaks import AT_END_WORDS, PEAK_MAY_COME_LATER, peak_at_end
from abm.scenario_notes import ScenarioNote

if TYPE_CHECKING:
    import pandas as pd

    from abm.outputs.compare import Comparison


class ResultNote(ScenarioNote):
    """A note on a finished result (the text a command prints after ``note: ``), which
    :func:`abm.run`, :func:`abm.run_sweep`, :func:`abm.calibrate` and :func:`abm.learn` give as a
    warning once their result is complete; a :class:`abm.ScenarioNote` too, so that one filter
    takes both. ``result`` is the result the note is on (the function's return value): where
    ``warnings.simplefilter("error", ResultNote)`` makes the function raise the note instead of
    returning, ``except abm.ResultNote as note: note.result`` still has it (and the folder that
    :func:`abm.calibrate` and :func:`abm.learn` write is written before the note is given)."""

    def __init__(self, text: str, result: Any = None) -> None:
        super().__init__(text)
        self.result = result


# What a hospital peak held to the last day means, in the run's note and the sweep's.
LOWER_BOUND = f"{PEAK_MAY_COME_LATER}, after the run, so it is a lower bound; run more days"


def run_notes(summary: dict[str, Any]) -> list[ResultNote]:
    """The note on a run (its ``summary``, summary.json) whose mean hospital curve (beds incl.
    ICU) is at its maximum on the last simulated day (:func:`abm.outputs.peaks.peak_at_end`):
    still rising then, or back at that maximum. ``abm run``'s table says it in its peak rows."""
    end = peak_at_end(summary["peak_hospital_occupancy"], summary["days"])
    if end is None:
        return []
    return [
        ResultNote(
            f"the hospital curve (beds incl. ICU, mean over replicates) is at its maximum on the last simulated day "
            f"({AT_END_WORDS[end]}; peak_hospital_occupancy.at_end in summary.json): {LOWER_BOUND}"
        )
    ]


def sweep_notes(table: pd.DataFrame) -> list[ResultNote]:
    """The note on a sweep (``table``: sweep.csv, a row per run) some of whose runs have their
    hospital curve at its maximum on the last simulated day (``peak_hospital_at_end``); none for
    a table without that column (one made by hand)."""
    if "peak_hospital_at_end" not in table:
        return []
    late = int(table["peak_hospital_at_end"].sum())
    if not late:
        return []
    return [
        ResultNote(
            f"in {late} of {len(table)} runs the hospital curve is at its maximum on the last simulated day "
            f"(peak_hospital_at_end in sweep.csv): {LOWER_BOUND}"
        )
    ]


def compared_peaks_at_end(ends: dict[str, str | None]) -> list[ResultNote]:
    """The note on compared runs (``ends``: each run's label and where its mean hospital curve is
    on the last simulated day, :func:`abm.outputs.peaks.peak_at_end`) some of whose curves are at
    their maximum then, still rising or back at it: the peaks shown are lower bounds."""
    rising, again = ([label for label, end in ends.items() if end == kind] for kind in ("rising", "again"))
    clauses = [f"the hospital curve of {', '.join(rising)} is still rising"] if rising else []
    that = "that" if rising else "the hospital curve"
    clauses += [f"{that} of {', '.join(again)} is at its maximum again"] if again else []
    if not clauses:
        return []
    return [
        ResultNote(
            f"On the last simulated day {' and '.join(clauses)}: {PEAK_MAY_COME_LATER}, after the run, so the peak "
            "shown is a lower bound; run more days"
        )
    ]


def comparison_notes(comparison: Comparison) -> list[ResultNote]:
    """The notes on a comparison (:class:`abm.outputs.compare.Comparison`) that the paragraph under
    its table gives (comparison.md, report.html, what ``abm compare`` prints), in that order: runs
    whose cost per averted hospitalization or death is not reliable, runs without the first week's
    reproduction number or the generation interval, hospital curves at their maximum on the last
    day (:func:`compared_peaks_at_end`), and runs that differ in more than their interventions
    (capacities, regions, dates of day 0, scenario values)."""
    from abm.outputs.compare import note_parts

    return [part for part in note_parts(comparison.runs, comparison.table) if isinstance(part, ResultNote)]


def calibration_notes(summary: dict[str, Any]) -> list[ResultNote]:
    """The note on a calibration (``summary``, calibration.json) whose fitted values lie at (or
    within 1% of) a bound of their range (``at_bounds``): the fit may want a value outside it."""
    if not summary["at_bounds"]:
        return []
    return [
        ResultNote(
            f"fitted at (or within 1% of) a bound: {', '.join(summary['at_bounds'])}; the fit may want a value "
            "outside calibration.parameters' bounds"
        )
    ]


def learning_notes(report: dict[str, Any]) -> list[ResultNote]:
    """The note on a learning run (``report``, report.json) some of whose participants are scored
    on few test samples (:func:`abm.learning.report.few_test_samples`); none for a private
    calibration's report, which scores no test samples."""
    if "test_sizes" not in report:
        return []
    from abm.learning.report import few_test_samples

    text = few_test_samples(report)
    return [] if text is None else [ResultNote(text)]


def with_result(notes: list[ResultNote], result: Any) -> list[ResultNote]:
    """``notes``, each holding ``result`` (:attr:`ResultNote.result`), to give as warnings."""
    for note in notes:
        note.result = result
    return notes
