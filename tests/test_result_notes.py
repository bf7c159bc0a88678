"""The notes on results that `abm sweep` (and `abm calibrate`, `abm learn`) print after their
tables reach Python callers as warnings of class :class:`abm.ResultNote` (a ScenarioNote), with the
same text, once the result is complete, at the caller's line (abm/result_notes.py); abm.run gives
the one its command says in its table, abm.compare those `abm compare` gives under its table. The
calibration's note: tests/test_calibration_gradient.py; learning's: tests/learning/test_scenario.py."""

from __future__ import annotations

import html
import re
import warnings
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

import abm
from abm.cli import app
from abm.outputs.compare import table_note
from abm.result_notes import ResultNote
from abm.scenario_notes import ScenarioNote

NO_INTERVENTION = Path(__file__).resolve().parents[1] / "scenarios/king_county/no_intervention.yaml"
# 2,000 agents with a fast epidemic (seed 40): the hospital curve rises through day 39 of 40, is
# back at its maximum on the last of 30 days, and has peaked (day 61) well before day 120.
FAST = ["disease.transmission_rate=5.02"]
LOWER_BOUND = "the peak may come later, after the run, so it is a lower bound; run more days"
runner = CliRunner()


def result_notes(caught: list[warnings.WarningMessage]) -> list[str]:
    """The texts of the ResultNote warnings among ``caught``."""
    return [str(w.message) for w in caught if issubclass(w.category, ResultNote)]


def test_result_note_is_a_scenario_note_exported_from_abm():
    assert abm.ResultNote is ResultNote and issubclass(ResultNote, ScenarioNote)
    note = ResultNote("text", result=1)
    assert str(note) == "text" and note.result == 1


@pytest.mark.parametrize(("days", "words"), [(40, "still rising"), (30, "maximum reached again")])
def test_abm_run_notes_a_hospital_curve_at_its_maximum_on_the_last_day(days, words):
    """abm.run said nothing where `abm run`'s table says the hospital peak may come later (its
    mean curve at its maximum on the last day): a ResultNote now says so, at this line, with the
    result complete."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = abm.run(NO_INTERVENTION, agents=2000, days=days, replicates=2, seed=40, sets=FAST)
    peak = result.summary["peak_hospital_occupancy"]
    assert peak["at_end"] and peak["value"] > 0
    assert (peak["day"] == days - 1) == (words == "still rising")
    assert result_notes(caught) == [
        "the hospital curve (beds incl. ICU, mean over replicates) is at its maximum on the last simulated day "
        f"({words}; peak_hospital_occupancy.at_end in summary.json): {LOWER_BOUND}"
    ]
    late = [w for w in caught if w.category is ResultNote]
    assert [w.filename for w in late] == [__file__] and late[0].message.result is result


def test_abm_run_of_a_curve_that_peaked_before_the_end_gives_no_result_note():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = abm.run(NO_INTERVENTION, agents=2000, days=120, replicates=2, seed=40, sets=FAST)
    peak = result.summary["peak_hospital_occupancy"]
    assert peak["value"] > 0 and peak["day"] < 100 and not peak["at_end"]
    assert result_notes(caught) == []


def test_abm_run_with_warnings_as_errors_hands_over_the_finished_result():
    """A filter that makes ResultNote an error raises it from abm.run once the run is done; the
    note holds the result, which writes its folder as ever."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScenarioNote)
        warnings.simplefilter("error", ResultNote)
        with pytest.raises(ResultNote) as raised:
            abm.run(NO_INTERVENTION, agents=2000, days=40, replicates=2, seed=40, sets=FAST)
    result = raised.value.result
    assert isinstance(result, abm.RunResult) and result.summary["peak_hospital_occupancy"]["at_end"]


def test_abm_run_prints_its_table_and_gives_no_warning(tmp_path):
    """`abm run` says the peak may come later in its table's peak rows, which report.html keeps
    (as before), and gives no Python warning (warn=False)."""
    args = ["run", str(NO_INTERVENTION), "--agents", "2000", "--days", "40", "--replicates", "2", "--seed", "40"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = runner.invoke(app, [*args, "--set", FAST[0], "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert caught == []
    page = html.unescape((tmp_path / "run" / "report.html").read_text())
    assert "(still rising on the last day: the peak may come later)</td>" in page


def sweep_args(days: int, out: Path) -> list[str]:
    return ["sweep", str(NO_INTERVENTION), "--sweep", "disease.transmission_rate=5.02", "--replicates", "2",
            "--agents", "2000", "--days", str(days), "--seed", "40", "--out", str(out)]  # fmt: skip


def test_abm_run_sweep_gives_the_note_abm_sweep_prints_and_report_html_keeps_it(tmp_path):
    """`abm sweep` noted runs whose hospital curve is at its maximum on the last day; abm.run_sweep
    said nothing, and report.html neither. Now run_sweep gives that note, with the command's text,
    as a ResultNote at this line, and report.html (written by the command or by write) says it
    under the tables; the command gives no Python warning."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        printed = runner.invoke(app, sweep_args(30, tmp_path / "cli"))
    assert printed.exit_code == 0, printed.output
    assert caught == []
    notes = [line.removeprefix("note: ") for line in printed.stderr.splitlines() if line.startswith("note: in ")]
    late = int(pd.read_csv(tmp_path / "cli" / "sweep.csv")["peak_hospital_at_end"].sum())
    assert late > 0
    assert notes == [
        f"in {late} of 2 runs the hospital curve is at its maximum on the last simulated day (peak_hospital_at_end "
        f"in sweep.csv): {LOWER_BOUND}"
    ]

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sweep = abm.run_sweep(
            NO_INTERVENTION, ["disease.transmission_rate=5.02"], replicates=2, agents=2000, days=30, seed=40
        )
    assert result_notes(caught) == notes
    late_note = next(w for w in caught if w.category is ResultNote)
    assert late_note.filename == __file__ and late_note.message.result is sweep
    for folder in (tmp_path / "cli", sweep.write(tmp_path / "py")):
        page = html.unescape((folder / "report.html").read_text())
        assert re.findall(r"<p>Note: (.*?)\.</p>", page) == notes, folder


def test_a_sweep_whose_curves_peaked_in_time_gives_no_result_note(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sweep = abm.run_sweep(
            NO_INTERVENTION, ["disease.transmission_rate=5.02"], replicates=2, agents=2000, days=120, seed=40
        )
    assert not sweep.table["peak_hospital_at_end"].any() and (sweep.table["peak_hospital_day"] > 0).all()
    assert result_notes(caught) == []
    assert "Note:" not in (sweep.write(tmp_path / "sw") / "report.html").read_text()


def test_run_sweep_with_warnings_as_errors_keeps_its_runs_and_hands_over_the_result(tmp_path):
    """An error filter raises the sweep's note once the runs are done: the runs stay kept in
    ``keep`` (a second call reuses them) and the note holds the result, which writes the folder."""
    keep = tmp_path / "runs.jsonl"
    args = dict(replicates=2, agents=2000, days=30, seed=40, keep=keep)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScenarioNote)
        warnings.simplefilter("error", ResultNote)
        with pytest.raises(ResultNote) as raised:
            abm.run_sweep(NO_INTERVENTION, ["disease.transmission_rate=5.02"], **args)
    assert keep.exists()
    told = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = abm.run_sweep(NO_INTERVENTION, ["disease.transmission_rate=5.02"], note=told.append, **args)
    assert told and told[0].startswith("continuing an interrupted run")
    pd.testing.assert_frame_equal(again.table, raised.value.result.table)
    raised.value.result.write(tmp_path / "sw")
    assert (tmp_path / "sw" / "sweep.csv").exists() and not keep.exists()


def run_args(out: Path, days: int, *sets: str) -> list[str]:
    return ["run", str(NO_INTERVENTION), "--agents", "2000", "--days", str(days), "--replicates", "2", "--seed", "40",
            "--set", FAST[0], *(a for s in sets for a in ("--set", s)), "--out", str(out)]  # fmt: skip


def test_abm_compare_gives_the_notes_under_its_table_as_result_notes(tmp_path):
    """`abm compare` says in the paragraph under its table (comparison.md, which it prints) that
    the runs' hospital curves are at their maximum on the last day and that their capacities
    differ; abm.compare gave no warning and its Comparison had no way to read them. Now it gives
    each, with the printed sentence's text, as a ResultNote at this line holding the comparison
    (Comparison.notes lists them); the command's output is as before and warns nothing."""
    ni, beds = tmp_path / "ni", tmp_path / "beds"
    for args in (run_args(ni, 30), run_args(beds, 30, "outputs.hospital_beds_per_100k=150")):
        assert runner.invoke(app, args).exit_code == 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        printed = runner.invoke(app, ["compare", str(ni), str(beds), "--out", str(tmp_path / "cli")])
    assert printed.exit_code == 0, printed.output
    assert caught == []
    expected = [
        "On the last simulated day the hospital curve of no_intervention (ni), no_intervention (beds) is at its "
        "maximum again: the peak may come later, after the run, so the peak shown is a lower bound; run more days",
        "The runs are measured against different hospital capacities (no_intervention (ni): 55, no_intervention "
        "(beds): 150 beds per 100,000): each run's peak / capacity and days over capacity are against its own "
        "capacity, so they differ by more than the interventions' effect",
    ]
    paragraph = " ".join(printed.stdout.split())
    assert f" {expected[0]}. The day of peak is the first day the mean curve reaches its maximum. {expected[1]}." in (
        paragraph
    )

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        comparison = abm.compare([ni, beds], out=tmp_path / "py")
    assert result_notes(caught) == expected == comparison.notes
    assert {w.filename for w in caught} == {__file__} and all(w.message.result is comparison for w in caught)
    assert (tmp_path / "py" / "comparison.md").read_text() == (tmp_path / "cli" / "comparison.md").read_text()

    with warnings.catch_warnings():
        warnings.simplefilter("error", ResultNote)
        with pytest.raises(ResultNote) as raised:
            abm.compare([ni, beds], out=tmp_path / "again")
    assert str(raised.value) == expected[0] and isinstance(raised.value.result, abm.Comparison)
    assert (tmp_path / "again" / "comparison.md").is_file()  # written before the note


def test_abm_compare_gives_the_notes_on_runs_without_the_reproduction_number(tmp_path):
    """A run without the reproduction number (outputs.reproduction_number: false) is named under
    the table, with that the first run lacks it; abm.compare gives both sentences as ResultNotes."""
    off, on = tmp_path / "off", tmp_path / "on"
    assert runner.invoke(app, run_args(off, 120, "outputs.reproduction_number=false")).exit_code == 0
    assert runner.invoke(app, run_args(on, 120)).exit_code == 0  # the same epidemic, peaked by day 61
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        comparison = abm.compare([off, on])
    lacking = [
        "The first week's reproduction number and the generation interval: n/a for no_intervention (off), run with "
        "outputs.reproduction_number: false (infections not put down to infectors)",
        "The first run lacks the first week's reproduction number, so no run's change in it is shown",
        "The first run lacks the generation interval, so no run's change in it is shown",
    ]
    assert result_notes(caught) == comparison.notes == lacking
    assert "".join(f" {text}." for text in lacking) in " ".join(table_note(comparison.runs).split())


def test_abm_compare_of_like_runs_that_peaked_in_time_gives_no_result_note():
    """Two results of one scenario and seed whose hospital curves peaked well before the last day:
    nothing averted (no cost per averted), nothing differs, both have the reproduction number."""
    runs = [abm.run(NO_INTERVENTION, agents=2000, days=120, replicates=2, seed=40, sets=FAST, warn=False) for _ in "ab"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        comparison = abm.compare(runs)
    assert comparison.table["peak_hospital_day"].max() < 100
    assert caught == [] and comparison.notes == []
