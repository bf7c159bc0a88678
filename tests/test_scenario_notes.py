"""The notes `abm run`, `abm sweep` and `abm calibrate` print on a scenario (``note: TEXT``) reach
Python callers as warnings of one class, :class:`abm.ScenarioNote`, with the same text, given once
per call, before anything runs, at the caller's line (abm/scenario_notes.py)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

import abm
from abm.cli import app
from abm.residents_per_agent import MoreAgentsThanResidents
from abm.scenario_notes import ScenarioNote

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
NO_INTERVENTION = SCENARIOS / "king_county/no_intervention.yaml"
TINY = ["population.agents=2000", "simulation.days=3", "simulation.replicates=1"]
runner = CliRunner()


def printed_notes(*args: str) -> list[str]:
    """The ``note: `` lines a command prints, without ``note: ``."""
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return [line.removeprefix("note: ") for line in result.stderr.splitlines() if line.startswith("note: ")]


def set_options(sets: list[str]) -> list[str]:
    return [arg for item in sets for arg in ("--set", item)]


def test_abm_run_gives_the_notes_abm_run_prints_as_scenario_note_warnings_at_the_callers_line(tmp_path):
    """abm.run gave none of `abm run`'s notes (an intervention a set turned on, one that starts
    after the last day, a seeding count that stays 5 at 2,000 agents): each is now a ScenarioNote
    with the command's text, once, pointing at this file; the option is named as given here
    (``sets item '...'``, where the command says ``--set ...``)."""
    switched = "interventions.vaccination.start_day=10"
    sets = [*TINY, switched]
    printed = printed_notes("run", str(NO_INTERVENTION), *set_options(sets), "--out", str(tmp_path / "run"))
    assert len(printed) == 3 and printed[0].startswith(f"--set {switched} turns vaccination on")

    with pytest.warns(ScenarioNote) as caught:
        abm.run(NO_INTERVENTION, sets=sets)
    assert [str(w.message) for w in caught] == [
        printed[0].replace(f"--set {switched}", f"sets item {switched!r}"),
        *printed[1:],
    ]
    assert [(w.category, w.filename) for w in caught] == [(ScenarioNote, __file__)] * 3
    assert "starts on day 10, after the 3 simulated days" in str(caught[1].message)
    assert "seeds 5 agents whatever the population" in str(caught[2].message)


def test_a_sets_mapping_that_drops_the_files_keys_is_noted_as_python_writes_it():
    """A ``sets`` mapping that replaces the file's interventions.vaccination (and so its rate of
    124 doses per 100,000) ran at the default rate without a word from Python; the note names the
    item and what to write instead as Python arguments."""
    source = SCENARIOS / "king_county/vacc_budget.yaml"
    with pytest.warns(ScenarioNote) as caught:
        abm.run(source, sets=[*TINY, "interventions.vaccination={start_day: 1}"])
    assert (
        "sets item 'interventions.vaccination={start_day: 1}' replaces interventions.vaccination as a whole, so "
        f"daily_doses_per_100k given by {source} is dropped; to change one entry and keep the others, write "
        "sets=['interventions.vaccination.NAME=VALUE']"
    ) in [str(w.message) for w in caught]


def test_a_scenario_without_such_issues_gets_no_note_and_error_filters_stop_a_run_before_it_starts():
    """Plain data of 2,000 agents (its own: the count of seeds is its own too) gets no note, so an
    error filter lets it run; a note under that filter stops abm.run before its first stage."""
    tiny = {
        "extends": str(NO_INTERVENTION),
        "name": "tiny",
        "population": {"agents": 2000},
        "simulation": {"days": 3, "replicates": 1},
    }
    stages: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", ScenarioNote)
        assert abm.run(tiny, stage=stages.append).summary["scenario"] == "tiny"
        assert len(stages) == 3
        stages.clear()
        with pytest.raises(ScenarioNote, match=r"turns vaccination on \(scenario has no interventions.vaccination\)"):
            abm.run(tiny, sets=["interventions.vaccination.start_day=10"], stage=stages.append)
    assert stages == []


def test_more_agents_than_residents_is_one_kind_of_scenario_note():
    """The warning abm.run gave alone is now one of the notes: a filter on ScenarioNote covers it."""
    assert issubclass(MoreAgentsThanResidents, ScenarioNote) and issubclass(ScenarioNote, UserWarning)
    assert abm.ScenarioNote is ScenarioNote


def test_abm_run_sweep_gives_the_notes_abm_sweep_prints(tmp_path):
    """abm.run_sweep gave none of `abm sweep`'s notes: variants that resolve to the same scenario
    (daily_doses replaces the swept rate), the vaccination that starts after the last day and the
    fixed counts of seeds and doses. They are ScenarioNote warnings with the command's text, once each, at
    this line; an error filter stops the sweep before its first run."""
    source = SCENARIOS / "reference/vacc_budget.yaml"  # daily_doses: 124
    swept = ["interventions.vaccination.daily_doses_per_100k=300,1000"]
    printed = printed_notes(
        "sweep", str(source), "--sweep", swept[0], *set_options(TINY), "--out", str(tmp_path / "sweep")
    )
    assert len(printed) == 4 and "resolve to the same scenario" in printed[-1]

    with pytest.warns(ScenarioNote) as caught:
        abm.run_sweep(source, swept, sets=TINY)
    assert [str(w.message) for w in caught] == printed
    assert {w.filename for w in caught} == {__file__}

    done: list[int] = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", ScenarioNote)
        with pytest.raises(ScenarioNote, match="starts on day 10"):
            abm.run_sweep(source, swept, sets=TINY, progress=lambda d, total: done.append(d))
    assert done == []


def test_more_workers_than_cpus_is_noted_with_the_python_argument(monkeypatch):
    """`abm sweep --workers 3` on 2 CPUs notes it; run_sweep(workers=3) names its argument."""
    import abm.parallel
    from abm.scenario_notes import too_many_workers
    from abm.set_options import PYTHON

    monkeypatch.setattr(abm.parallel, "usable_cpus", lambda: 2)
    assert too_many_workers(3, "local", PYTHON) == [
        "workers=3 is more than the 2 CPUs this process may use: the runs share them and each takes longer (the "
        "results are the same)"
    ]
    assert too_many_workers(2, "local", PYTHON) == too_many_workers(3, "ray", PYTHON) == []


def test_abm_calibrate_notes_a_sets_mapping_that_drops_the_files_keys_before_its_first_trial(tmp_path):
    """`abm calibrate --set seeding={...}` notes that the file's seeding.day is dropped;
    abm.calibrate said nothing. It now warns with the note (Python's names), before any trial:
    under an error filter nothing is written."""
    source = SCENARIOS / "king_county/calibrate_2020.yaml"
    sets = ["seeding={infections: {asymptomatic: 30}}", "population.agents=2000"]
    out = tmp_path / "cal"
    with warnings.catch_warnings():
        warnings.simplefilter("error", ScenarioNote)
        with pytest.raises(ScenarioNote) as raised:
            abm.calibrate(source, out, trials=1, workers=1, sets=sets)
    assert str(raised.value) == (
        "sets item 'seeding={infections: {asymptomatic: 30}}' replaces seeding as a whole, so day given by "
        f"{source} is dropped; to change one entry and keep the others, write sets=['seeding.NAME=VALUE']"
    )
    assert not out.exists() and list(tmp_path.iterdir()) == []
