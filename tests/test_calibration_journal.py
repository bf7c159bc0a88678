"""An interrupted calibration continues from its finished trials, and ends as an uninterrupted
one does (abm.calibration.journal)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml
from conftest import tiny_calibration
from typer.testing import CliRunner

import abm.calibration.optimize as optimize
from abm.cli import app
from abm.outputs.journal import journal_path
from abm.plugin_errors import PluginFailure

TIMINGS = ["datetime_start", "datetime_complete", "duration"]


class Trials:
    """Counts the trials simulated (their values in ``ran``); Ctrl-C (or ``stop_with``) as a trial
    begins once ``stop_after`` have run."""

    def __init__(self, monkeypatch, stop_after: int | None = None, stop_with: BaseException | None = None) -> None:
        self.ran: list[dict] = []
        self.stop_after = stop_after
        real = optimize.simulate_values

        def simulate(data, values, source):
            if self.stop_after is not None and len(self.ran) == self.stop_after:
                raise stop_with or KeyboardInterrupt()
            self.ran.append(values)
            return real(data, values, source)

        monkeypatch.setattr(optimize, "simulate_values", simulate)

    def again(self) -> None:
        """Count afresh, without stopping."""
        self.ran.clear()
        self.stop_after = None


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """A calibration of 7 trials in batches of 2, with 2 re-ranked, run to its end."""
    tmp = tmp_path_factory.mktemp("whole")
    path = tiny_calibration(tmp, trials=7)
    optimize.calibrate(path, tmp / "out", workers=1)
    return tmp / "out"


def test_an_interrupted_calibration_continues_where_it_stopped(tmp_path, monkeypatch, uninterrupted):
    """Batches of 4 (parallel_trials' default): stopped as trial 5 begins, trials 0-4 are kept;
    run again, trials 0-3 (a whole batch) are told from the file and trial 4 (part of a batch)
    runs again with 5 and 6. Every output but the timings is the uninterrupted run's."""
    path = tiny_calibration(tmp_path, trials=7)
    out = tmp_path / "out"
    kept = journal_path(out, "trials")
    trials = Trials(monkeypatch, stop_after=5)
    notes: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        optimize.calibrate(path, out, workers=1, note=notes.append)
    assert not out.exists() and kept.is_file()
    assert notes == [f"5 finished trials are kept in {kept}; the same command continues from them"]
    lines = kept.read_text().splitlines()
    assert [json.loads(x)["number"] for x in lines[1:]] == [0, 1, 2, 3, 4]
    trials.again()
    notes.clear()
    told: list[tuple[int, int]] = []
    reused: list[int] = []
    progress = lambda done, total, loss: told.append((done, total))  # noqa: E731
    optimize.calibrate(path, out, workers=1, note=notes.append, progress=progress, reused=reused.append)
    assert len(trials.ran) == 3 + 2  # trials 4, 5 and 6, then the 2 re-ranked
    assert told == [(k, 7) for k in range(1, 8)]  # the kept ones too, as before
    assert reused == [4]  # told once, as trial 4 began to run
    assert notes == [
        f"continuing an interrupted run: 5 finished trials are kept in {kept}",
        "re-running the 2 trials of lowest loss with 2 replicates each (calibration.rerank_trials, rerank_replicates): "
        "the best re-run is the fit",
    ]
    assert not kept.exists()  # gone once the folder is written
    a, b = pd.read_csv(out / "trials.csv"), pd.read_csv(uninterrupted / "trials.csv")
    pd.testing.assert_frame_equal(a.drop(columns=TIMINGS), b.drop(columns=TIMINGS))
    assert (out / "calibrated.yaml").read_text() == (uninterrupted / "calibrated.yaml").read_text()
    summary, whole = (json.loads((d / "calibration.json").read_text()) for d in (out, uninterrupted))
    assert {k: v for k, v in summary.items() if k != "seconds"} == {k: v for k, v in whole.items() if k != "seconds"}


def test_kept_trials_cut_short_or_of_another_scenario_are_not_told(tmp_path, monkeypatch):
    path = tiny_calibration(tmp_path, trials=4, rerank_trials=0)
    data = yaml.safe_load(path.read_text())
    data["calibration"]["parallel_trials"] = 2
    path.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    kept = journal_path(out, "trials")
    trials = Trials(monkeypatch, stop_after=4)
    with pytest.raises(KeyboardInterrupt):
        optimize.calibrate(path, out, workers=1, trials=5)
    lines = kept.read_text().splitlines()
    assert len(lines) == 1 + 4
    # A killed process may leave a line cut short: the trials before it are told, the rest run.
    kept.write_text("\n".join(lines[:3]) + "\n" + lines[3][: len(lines[3]) // 2])
    trials.again()
    optimize.calibrate(path, out, workers=1)
    assert len(trials.ran) == 2  # trials 0-1 told (a whole batch), 2-3 run
    # Another scenario's file (here: another seed) is replaced, and every trial runs.
    data["simulation"]["seed"] = 6
    path.write_text(yaml.safe_dump(data))
    kept.write_text(json.dumps({"format": 1, "key": "another"}) + "\n")
    trials.again()
    notes: list[str] = []
    optimize.calibrate(path, out, workers=1, note=notes.append)
    assert len(trials.ran) == 4
    assert notes == [
        f"{kept} held the trials of other work (another scenario, other options or other abm code), "
        "which this command cannot reuse; replaced"
    ]
    assert not kept.exists()


def test_bad_trial_values_leave_no_kept_trials(tmp_path):
    path = tiny_calibration(tmp_path, trials=2, rerank_trials=0)
    data = yaml.safe_load(path.read_text())
    data["calibration"]["parameters"] = {
        "seeding.infections.asymptomatic": {"low": 1, "high": 2900, "integer": True},
        "seeding.infections.presymptomatic_mild": {"low": 1, "high": 2900, "integer": True},
    }
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ValueError, match="a calibration trial's values"):
        optimize.calibrate(path, tmp_path / "out", workers=1)
    assert not journal_path(tmp_path / "out", "trials").exists() and not (tmp_path / "out").exists()


def test_abm_calibrate_says_the_finished_trials_are_kept_when_interrupted(tmp_path, monkeypatch):
    path = tiny_calibration(tmp_path, trials=4, rerank_trials=0)
    Trials(monkeypatch, stop_after=2)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["calibrate", str(path), "--workers", "1", "--out", str(out)])
    assert result.exit_code == 130, result.output
    said = " ".join(result.output.split())
    assert f"2 finished trials are kept in {journal_path(out, 'trials')}; the same command continues from them" in said
    assert f"interrupted: no results were written to {out}" in said


def test_a_plugin_that_fails_leaves_no_kept_trials(tmp_path, monkeypatch):
    """A plug-in that failed in trial 2 left trials 0 and 1 kept beside the folder ("the same
    command continues from them"), made by the failing plug-in; now none is kept, as a sweep
    keeps no runs then: exit code 1, the plug-in's line, and nothing but the scenario left."""
    path = tiny_calibration(tmp_path, trials=4, rerank_trials=0)
    failure = PluginFailure("sick_leave", "attach", None, "RuntimeError: no register", "Traceback (...)\n")
    Trials(monkeypatch, stop_after=2, stop_with=failure)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["calibrate", str(path), "--workers", "1", "--out", str(out)])
    assert result.exit_code == 1, result.output
    assert (
        "abm calibrate: the plug-in 'sick_leave' failed in attach, before day 0: RuntimeError: no register"
        in result.stderr.splitlines()
    )
    assert "kept" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_abm_calibrate_says_how_many_kept_trials_it_reused(tmp_path, monkeypatch):
    """The lines of the trials run afresh say how many were kept (their pace is left out of the
    time left); the kept ones' lines do not."""
    path = tiny_calibration(tmp_path, trials=3, rerank_trials=0)
    data = yaml.safe_load(path.read_text())
    data["calibration"]["parallel_trials"] = 2
    path.write_text(yaml.safe_dump(data))
    trials = Trials(monkeypatch, stop_after=2)
    args = ["calibrate", str(path), "--workers", "1", "--out", str(tmp_path / "out")]
    assert CliRunner().invoke(app, args).exit_code == 130
    trials.again()
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("trial ")]
    assert len(lines) == 3 and len(trials.ran) == 1
    assert ["2 kept trials reused" in line for line in lines] == [False, False, True]


def test_a_calibration_stopped_before_its_first_trial_leaves_no_kept_trials(tmp_path, monkeypatch):
    """Ctrl-C before any trial finished left a file holding only its header, and the same command
    then said it "held the trials of other work (another scenario or abm version); replaced". Now
    nothing is left; and a header alone (a process killed before its first trial finished) is
    taken without a word."""
    path = tiny_calibration(tmp_path, trials=2, rerank_trials=0)
    out = tmp_path / "out"
    kept = journal_path(out, "trials")
    trials = Trials(monkeypatch, stop_after=0)
    args = ["calibrate", str(path), "--workers", "1", "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 130, result.output
    assert result.output.splitlines()[-1] == f"interrupted: no results were written to {out}"
    assert "note:" not in result.output and sorted(p.name for p in tmp_path.iterdir()) == [path.name]
    with monkeypatch.context() as killed, pytest.raises(KeyboardInterrupt):  # as after a SIGKILL
        killed.setattr(optimize.TrialJournal, "remove", lambda self: None)
        optimize.calibrate(path, out, workers=1)
    assert len(kept.read_text().splitlines()) == 1
    trials.again()
    notes: list[str] = []
    optimize.calibrate(path, out, workers=1, note=notes.append)
    assert notes == [] and len(trials.ran) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([path.name, "out"])


def test_a_calibration_whose_trials_cannot_be_kept_goes_on_and_says_so(tmp_path):
    """Where the file cannot be written (here a folder is in its place), the calibration runs to
    its end as it would, with one note."""
    path = tiny_calibration(tmp_path, trials=2, rerank_trials=0)
    out = tmp_path / "out"
    journal_path(out, "trials").mkdir()
    notes: list[str] = []
    optimize.calibrate(path, out, workers=1, note=notes.append)
    assert len(pd.read_csv(out / "trials.csv")) == 2
    assert len(notes) == 1 and notes[0].startswith(f"finished trials cannot be kept in {journal_path(out, 'trials')} (")
    assert notes[0].endswith("; the command goes on, but if it stops before its end it will start over")


def test_a_calibration_folder_taken_while_the_trials_ran_keeps_them_and_says_so(tmp_path, monkeypatch):
    """``--out`` is checked before the trials and again as the folder is written. A folder someone
    made there meanwhile, with a file of their own, ends `abm calibrate` with one line naming it
    and exit code 2, and that line now says the finished trials are kept (they were, unsaid), and that no
    results were written there, in `abm run`'s words (it did not); once the folder is free the same command
    runs no trial again."""
    path = tiny_calibration(tmp_path, trials=2, rerank_trials=0)
    out = tmp_path / "out"
    kept = journal_path(out, "trials")
    trials = Trials(monkeypatch)

    def check_then_take(target, *args, **kwargs):
        out.mkdir(exist_ok=True)
        (out / "notes.txt").write_text("mine")
        return real_atomic(target, *args, **kwargs)

    real_atomic = optimize.atomic_folder
    monkeypatch.setattr(optimize, "atomic_folder", check_then_take)
    args = ["calibrate", str(path), "--workers", "1", "--out", str(out)]
    result = CliRunner().invoke(app, args)
    said = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert f"error: output folder '{out}': exists and was not written by abm" in said, said
    assert said.endswith(
        f"remove this one yourself; no results were written to {out}; 2 finished trials are kept in {kept}; "
        "the same command continues from them"
    ), said
    assert said.count("error:") == 1 and (out / "notes.txt").read_text() == "mine" and kept.exists()
    (out / "notes.txt").unlink()
    monkeypatch.setattr(optimize, "atomic_folder", real_atomic)
    trials.again()
    assert CliRunner().invoke(app, args).exit_code == 0
    assert trials.ran == [] and (out / "calibrated.yaml").exists() and not kept.exists()


def test_a_calibration_interrupted_as_its_folder_is_written_says_its_trials_are_kept(tmp_path, monkeypatch):
    """Ctrl-C once every trial is done, as the folder is written (its plot drawn): the trials are
    kept for the same command, and it says so, as when stopped during the trials (it kept them
    without a word)."""
    path = tiny_calibration(tmp_path, trials=2, rerank_trials=0)
    out = tmp_path / "out"

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(optimize, "plot_fit", interrupted)
    result = CliRunner().invoke(app, ["calibrate", str(path), "--workers", "1", "--out", str(out)])
    said = " ".join(result.output.split())
    kept = journal_path(out, "trials")
    assert result.exit_code == 130, result.output
    assert said.endswith(
        f"note: 2 finished trials are kept in {kept}; the same command continues from them "
        f"interrupted: no results were written to {out}"
    ), said
