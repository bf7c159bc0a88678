"""simulation.start_date: the date of day 0 names the days in a run's tables, summary, console,
plots and map; it changes no result, and without it nothing changes."""

from __future__ import annotations

import io
import json
from datetime import date
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import fixed_seeds_note
from typer.testing import CliRunner

import abm
from abm.cli import app
from abm.outputs.calendar import date_of, with_dates
from abm.outputs.compare import compare, comparison_table, markdown, scenario_differences, table_note
from abm.outputs.differences import replicate_costs
from abm.outputs.plots import RunTables, day_label

NI = Path(__file__).resolve().parents[1] / "scenarios/king_county/no_intervention.yaml"
START = "simulation.start_date=2020-02-27"  # day 2 is 2020-02-29 (a leap day), day 3 2020-03-01
runner = CliRunner()


def test_date_of_counts_calendar_days_through_a_leap_year():
    assert [date_of(date(2020, 2, 27), d) for d in (0, 2, 3, 365)] == [
        "2020-02-27",
        "2020-02-29",
        "2020-03-01",
        "2021-02-26",
    ]


def test_with_dates_puts_the_date_after_the_day_and_leaves_a_table_without_a_start_as_it_is():
    table = pd.DataFrame({"day": [0, 0, 1, 31], "replicate": [0, 1, 0, 0]})
    dated = with_dates(table, date(2021, 1, 1))
    assert list(dated.columns) == ["day", "date", "replicate"]
    assert dated["date"].tolist() == ["2021-01-01", "2021-01-01", "2021-01-02", "2021-02-01"]
    assert list(table.columns) == ["day", "replicate"]  # the input is not changed
    assert with_dates(table, None) is table


@pytest.fixture(scope="module")
def runs():
    with fixed_seeds_note():
        dated = abm.run(NI, agents=1500, days=40, replicates=2, sets=[START])
    with fixed_seeds_note():
        plain = abm.run(NI, agents=1500, days=40, replicates=2)
    return dated, plain


def test_a_dated_run_names_its_days_and_simulates_the_same_epidemic(runs):
    dated, plain = runs
    for name in ("timeseries", "by_age", "by_tract"):
        with_date, without = getattr(dated, name), getattr(plain, name)
        assert list(with_date.columns) == [without.columns[0], "date", *without.columns[1:]]
        expected = [date_of(date(2020, 2, 27), d) for d in with_date["day"]]
        assert with_date["date"].tolist() == expected
        pd.testing.assert_frame_equal(with_date.drop(columns="date"), without)  # the same epidemic
    s = dated.summary
    assert s["start_date"] == "2020-02-27" and "start_date" not in plain.summary
    for key in ("peak_hospitalized", "peak_hospital_occupancy", "peak_icu", "peak_new_infections"):
        peak = s[key]
        assert "date" in peak  # null where the curve stays at zero
        assert peak["date"] == (None if peak["day"] is None else date_of(date(2020, 2, 27), peak["day"]))
        assert "date" not in plain.summary[key]
    data = dated.map(tiles=False).data
    assert data.dates == [date_of(date(2020, 2, 27), d) for d in data.days]
    assert data.day_text(data.days.index(7)) == "day 7 (2020-03-05)"  # the frames are weekly
    assert plain.map(tiles=False).data.dates is None


def test_costs_csv_gives_the_date_as_the_timeseries_does(runs, tmp_path):
    """costs.csv had no date column in a dated run, where every other table by day has one: now
    the date after the day, the timeseries' date of that day; without a start date, none. A run
    that booked nothing gets the column in its header too. abm compare reads the costs as before:
    the dated and the plain run cost the same, replicate by replicate."""
    vacc = NI.parent / "vacc_ct.yaml"
    with fixed_seeds_note():
        dated, plain = (abm.run(vacc, agents=1500, days=20, replicates=2, sets=sets) for sets in ([START], []))
    folders = [dated.write(tmp_path / "dated", figures=False), plain.write(tmp_path / "plain", figures=False)]
    costs, without = (pd.read_csv(f / "costs.csv") for f in folders)
    columns = ["item", "day", "replicate", "count", "unit_cost", "cost"]
    assert list(without.columns) == columns
    assert list(costs.columns) == ["item", "day", "date", "replicate", "count", "unit_cost", "cost"]
    assert len(costs) > 0 and set(costs["item"]) >= {"test_rt_pcr", "vaccine_dose"}
    ts = pd.read_csv(folders[0] / "timeseries.csv")
    days = ts.drop_duplicates("day").set_index("day")["date"]
    assert costs["date"].tolist() == days.loc[costs["day"]].tolist()
    assert costs["date"].iloc[0] == date_of(date(2020, 2, 27), costs["day"].iloc[0])
    pd.testing.assert_frame_equal(costs.drop(columns="date"), without)
    assert list(runs[0].costs.columns) == ["item", "day", "date", *columns[2:]] and runs[0].costs.empty
    assert list(runs[1].costs.columns) == columns
    table = compare(folders).table
    assert table["total_cost"].iloc[0] == table["total_cost"].iloc[1] > 0
    runs_read = [RunTables.from_folder(f) for f in folders]
    assert replicate_costs(runs_read[0]).tolist() == replicate_costs(runs_read[1]).tolist()


def test_plots_name_day_0_where_every_run_gives_the_same_date(runs):
    dated, plain = runs
    one, other = RunTables.from_result(dated), RunTables.from_result(plain)
    assert day_label([one]) == "day (day 0 = 2020-02-27)"
    assert day_label([one, other]) == day_label([other]) == "day"
    # a start date is no difference between the runs' epidemics: compare does not call it one,
    # but says that their days are not the same dates
    assert scenario_differences([one, other]) == {}
    note = " ".join(table_note([one, other]).split())
    assert "The runs give different dates for day 0 (no_intervention: 2020-02-27, no_intervention: none)" in note
    assert "different dates for day 0" not in table_note([one, one])


def test_the_comparison_table_gives_the_peak_date_where_a_run_has_dates(runs):
    dated, plain = runs
    one, other = RunTables.from_result(dated), RunTables.from_result(plain)
    table = comparison_table([one, other])
    columns = list(table.columns)
    assert columns[columns.index("peak_hospital_day") + 1] == "peak_hospital_date"
    peak = dated.summary["peak_hospital_occupancy"]
    assert table["peak_hospital_date"][0] == date_of(date(2020, 2, 27), peak["day"])
    assert pd.isna(table["peak_hospital_date"][1])  # no start date: empty
    head, _, first, second = markdown(table).splitlines()[:4]
    cells = [c.strip() for c in head.split("|")]
    at = cells.index("date of peak")
    assert first.split("|")[at].strip() == table["peak_hospital_date"][0] and second.split("|")[at].strip() == ""
    assert "peak_hospital_date" not in comparison_table([other, other]).columns  # no dates: no column


def test_the_console_names_the_peak_date(runs, monkeypatch, tmp_path):
    from rich.console import Console

    from abm import cli

    buffer = io.StringIO()
    monkeypatch.setattr(cli, "out_console", Console(file=buffer, width=200, markup=False))
    s = dict(runs[0].summary)
    s["peak_hospital_occupancy"] = {"value": 2.0, "day": 3, "per_100k": 133.3, "at_end": False, "date": "2020-03-01"}
    cli.print_summary(s, 0.1, tmp_path)
    lines = buffer.getvalue().splitlines()
    rows = {c[1].strip(): c[2].strip() for c in (x.split("│") for x in lines if x.count("│") == 4)}
    assert rows["peak hospital beds incl. ICU"] == "2.0 on day 3, 2020-03-01 (133/100k)"
    del s["peak_hospital_occupancy"]["date"]  # a summary without dates (no start date): days only
    cli.print_summary(s, 0.1, tmp_path)
    assert "2.0 on day 3 (133/100k)" in buffer.getvalue()


def test_a_date_that_is_not_one_is_refused_naming_the_key(tmp_path):
    result = runner.invoke(
        app, ["run", str(NI), "--set", "simulation.start_date=2021-02-29", "--out", str(tmp_path / "o")]
    )
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "simulation.start_date" in text and "2021-02-29" in text, text
    assert list(tmp_path.iterdir()) == []


def test_a_start_date_other_than_the_calibrations_is_refused(tmp_path):
    """Day 0 is one date: a calibration scenario that gives both simulation.start_date and
    calibration.start_date (2020-02-01 in calibrate_2020.yaml) must give the same; abm calibrate
    refuses two before anything runs and writes nothing."""
    src = NI.parent / "calibrate_2020.yaml"
    other = runner.invoke(app, ["validate", str(src), "--set", "simulation.start_date=2020-02-02"])
    text = " ".join(other.output.split())
    assert other.exit_code == 2, text
    assert (
        "invalid scenario: calibration.start_date: 2020-02-01 is not simulation.start_date: 2020-02-02; both are the "
        "date of day 0: give it in one of them (the other takes it) or the same date in both" in text
    )
    same = runner.invoke(app, ["validate", str(src), "--set", "simulation.start_date=2020-02-01"])
    assert same.exit_code == 0 and "is valid" in same.output, same.output
    out = tmp_path / "cal"
    args = ["calibrate", str(src), "--set", "simulation.start_date=2020-02-02", "--trials", "1", "--out", str(out)]
    refused = runner.invoke(app, args)
    assert refused.exit_code == 2 and "both are the date of day 0" in " ".join(refused.output.split())
    assert list(tmp_path.iterdir()) == []  # no folder, no kept trials


def dated_calibration(tmp_path: Path, start_in: str) -> Path:
    """A small calibration scenario whose day 0 (2020-03-01) is given only in ``start_in``
    (simulation or calibration), with its seeding day written as a date."""
    src = tmp_path / f"{start_in}.yaml"
    sim, cal = ("start_date: 2020-03-01, ", "") if start_in == "simulation" else ("", "  start_date: 2020-03-01\n")
    src.write_text(
        f"extends: {NI.parent / 'base.yaml'}\n"
        "name: dated\n"
        "population: {agents: 1000}\n"
        f"simulation: {{{sim}days: 75, replicates: 1}}\n"
        "seeding: {day: 2020-03-03}\n"
        f"calibration:\n{cal}"
        "  fit_window: [2020-03-02, 2020-04-05]\n"
        "  holdout_window: [2020-04-06, 2020-05-14]\n"
        "  parameters: {disease.transmission_rate: {low: 2, high: 5}}\n"
        "  trials: 1\n",
        encoding="utf-8",
    )
    return src


@pytest.mark.parametrize("start_in", ["simulation", "calibration"])
def test_a_start_date_given_once_is_day_0_of_the_run_and_of_the_calibration(tmp_path, start_in):
    """Either start date, given alone, is given to the other: only simulation.start_date no
    longer meets the calibration's default (2020-02-01) and is refused as two dates, and only
    calibration.start_date lets day settings be dates and the calibrated scenario name dates."""
    from abm.scenario import load_scenario

    src = dated_calibration(tmp_path, start_in)
    sc = load_scenario(src)
    assert (sc.simulation.start_date, sc.calibration.start_date) == (date(2020, 3, 1), date(2020, 3, 1))
    assert sc.seeding.day == 2
    out = tmp_path / "out"
    result = runner.invoke(app, ["calibrate", str(src), "--workers", "1", "--out", str(out)])
    assert result.exit_code == 0, result.output
    calibrated = yaml.safe_load((out / "calibrated.yaml").read_text(encoding="utf-8"))
    assert calibrated["simulation"]["start_date"] == calibrated["calibration"]["start_date"] == "2020-03-01"
    assert calibrated["seeding"]["day"] == 2
    report = json.loads((out / "calibration.json").read_text(encoding="utf-8"))
    assert report["fit_window"] == ["2020-03-02", "2020-04-05"]
    assert list(report["fit"]) == ["hospital_admissions", "deaths"]


def test_a_run_scenarios_start_date_adds_no_calibration():
    """A scenario without a calibration section keeps none when it gives simulation.start_date."""
    from abm.day_dates import shared_start_date

    data = {"simulation": {"start_date": date(2020, 3, 1)}}
    assert shared_start_date(data) == {"simulation": {"start_date": date(2020, 3, 1)}}
    assert shared_start_date({"simulation": {}, "calibration": {}}) == {"simulation": {}, "calibration": {}}
    result = runner.invoke(app, ["validate", str(NI), "--set", "simulation.start_date=2020-03-01"])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("start_in", ["simulation", "calibration"])
def test_a_bad_start_date_given_once_is_named_at_its_own_key_only(tmp_path, start_in):
    """A start date that is no date is not given on: one message, at the key that holds it."""
    src = dated_calibration(tmp_path, start_in)
    result = runner.invoke(app, ["validate", str(src), "--set", f"{start_in}.start_date=2021-02-29"])
    text = " ".join(result.output.split())
    assert result.exit_code == 2, text
    other = "calibration" if start_in == "simulation" else "simulation"
    assert f"{start_in}.start_date" in text and "2021-02-29" in text and f"{other}.start_date" not in text, text


def test_a_start_date_whose_days_run_past_the_last_date_is_refused(tmp_path):
    """A run from 9999-12-31 crashed after simulating (OverflowError in date_of as the tables got
    their dates); it is bad input, refused before anything runs."""
    out = tmp_path / "o"
    args = ["run", str(NI), "--agents", "500", "--days", "2", "--set", "simulation.start_date=9999-12-31"]
    result = runner.invoke(app, [*args, "--out", str(out)])
    text = " ".join(result.output.split())
    assert result.exit_code == 2, text
    assert "simulation.start_date: 9999-12-31 is too late: the 2 simulated days would end after 9999-12-31" in text
    assert not out.exists()
    last = runner.invoke(
        app, ["validate", str(NI), "--set", "simulation.days=1", "--set", "simulation.start_date=9999-12-31"]
    )
    assert last.exit_code == 0, last.output


def test_day_settings_written_as_dates_are_the_days_after_the_start_date(tmp_path):
    """With a start date, start_day, from_day, until_day, seeding.day and map_days entries may be
    dates (YAML's, or ISO text as a quoted value or a sweep's); the scenario holds day numbers."""
    from abm.scenario import load_scenario

    src = tmp_path / "dated.yaml"
    src.write_text(
        f"extends: {NI.parent / 'vacc.yaml'}\n"
        "simulation: {start_date: 2020-02-27, days: 60}\n"
        "seeding: {day: 2020-02-29}\n"
        "outputs: {map_days: [2020-03-01, 10]}\n"
        "interventions:\n"
        "  vaccination: {start_day: '2020-03-28'}\n"
        "  contact_multipliers: {closures: [{from_day: 2020-03-02, until_day: 2020-04-01}]}\n",
        encoding="utf-8",
    )
    sc = load_scenario(src)
    assert sc.seeding.day == 2 and sc.outputs.map_days == [3, 10]  # 2020-02-29 is a leap day
    assert sc.interventions.vaccination.start_day == 30
    closure = sc.interventions.contact_multipliers.closures[0]
    assert (closure.from_day, closure.until_day) == (4, 34)
    assert "start_day: 30" in sc.resolved_yaml() and "2020-03-28" not in sc.resolved_yaml()
    assert (
        load_scenario(src, ["interventions.vaccination.start_day=2020-03-07"]).interventions.vaccination.start_day == 9
    )


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (
            "simulation.start_date=null",
            "interventions.vaccination.start_day: 2021-01-15 is a date: give simulation.start_date (the date of "
            "day 0) to write days as dates, or write the day's number",
        ),
        (
            "simulation.start_date=2021-02-01",
            "interventions.vaccination.start_day: 2021-01-15 is not allowed: it is before simulation.start_date "
            "(2021-02-01)",
        ),
    ],
)
def test_a_day_written_as_a_date_needs_a_start_date_before_it(tmp_path, setting: str, message: str):
    src = tmp_path / "dated.yaml"
    src.write_text(
        f"extends: {NI.parent / 'vacc.yaml'}\nsimulation: {{start_date: 2021-01-01}}\n"
        "interventions: {vaccination: {start_day: 2021-01-15}}\n",
        encoding="utf-8",
    )
    assert runner.invoke(app, ["validate", str(src)]).exit_code == 0
    result = runner.invoke(app, ["validate", str(src), "--set", setting])
    assert result.exit_code == 2 and message in " ".join(result.output.split()), result.output


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (
            "seeding.day=2021-08-01",
            "invalid scenario: seeding.day: 212 is not within the 60 simulated days (0..59); nothing would happen "
            "(days written as dates, counted from simulation.start_date 2021-01-01: seeding.day: 2021-08-01 is day "
            "212)",
        ),
        (
            "interventions.contact_multipliers={closures: [{from_day: 2021-02-01, until_day: 2021-01-20}]}",
            "invalid scenario: interventions.contact_multipliers.closures[0]: until_day (19) must come after from_day "
            "(31) (days written as dates, counted from simulation.start_date 2021-01-01: "
            "interventions.contact_multipliers.closures[0].from_day: 2021-02-01 is day 31; "
            "interventions.contact_multipliers.closures[0].until_day: 2021-01-20 is day 19)",
        ),
        (
            "outputs.map_days=[2021-03-05]",
            "invalid scenario: outputs.map_days: [63] not allowed; map days must lie within the 60 simulated days "
            "(0..59) (days written as dates, counted from simulation.start_date 2021-01-01: outputs.map_days[0]: "
            "2021-03-05 is day 63)",
        ),
        (  # a message about another key names no date
            "disease.transmission_rate=-1",
            "invalid scenario: disease.transmission_rate: -1 is not allowed: must be at least 0",
        ),
    ],
)
def test_a_message_about_a_day_written_as_a_date_names_the_date(tmp_path, setting: str, message: str):
    """The checks see day numbers: a message naming a day the user wrote as a date says which date
    it is (it named only the day number, which the user did not write)."""
    src = tmp_path / "dated.yaml"
    src.write_text(
        f"extends: {NI.parent / 'vacc.yaml'}\nsimulation: {{start_date: 2021-01-01, days: 60}}\n"
        "interventions: {vaccination: {start_day: 2021-01-15}}\n",
        encoding="utf-8",
    )
    result = runner.invoke(app, ["validate", str(src), "--set", setting])
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and text.endswith(message), text
    assert "2021-01-15" not in text  # the valid date is not named


def test_a_note_on_a_day_of_a_dated_scenario_names_its_date(tmp_path):
    """A note that an intervention starts after the run names the day's date where day 0 has one
    (it said "starts on day 212" of a start day written 2021-08-01); an undated scenario's note is
    as before."""
    src = tmp_path / "dated.yaml"
    src.write_text(
        f"extends: {NI.parent / 'vacc.yaml'}\nsimulation: {{start_date: 2021-01-01, days: 60}}\n"
        "interventions: {vaccination: {start_day: 2021-08-01}}\n",
        encoding="utf-8",
    )
    result = runner.invoke(app, ["validate", str(src)])
    assert result.exit_code == 0 and " ".join(result.output.split()).startswith(
        "note: interventions.vaccination starts on day 212 (2021-08-01), after the 60 simulated days (0..59): it does "
        "nothing in this run ok"
    ), result.output
    result = runner.invoke(
        app,
        [
            "validate",
            str(src),
            "--set",
            "simulation.start_date=null",
            "--set",
            "interventions.vaccination.start_day=212",
        ],
    )
    assert result.exit_code == 0 and " ".join(result.output.split()).startswith(
        "note: interventions.vaccination starts on day 212, after the 60 simulated days (0..59)"
    ), result.output


def test_a_bad_start_date_is_named_not_asked_for(tmp_path):
    """A day written as a date beside a start date that is no date: the message names the start
    date's value (it said "give simulation.start_date", which the file gives)."""
    src = tmp_path / "dated.yaml"
    src.write_text(
        f"extends: {NI.parent / 'vacc.yaml'}\nsimulation: {{start_date: soon}}\n"
        "interventions: {vaccination: {start_day: 2021-01-15}}\n",
        encoding="utf-8",
    )
    result = runner.invoke(app, ["validate", str(src)])
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "simulation.start_date: 'soon' is not allowed: must be a date" in text, text
    assert "give simulation.start_date" not in text


def test_a_sweep_over_dates_runs_each_day_and_keeps_the_dates_as_text(tmp_path):
    from abm.sweep import plan

    src = tmp_path / "dated.yaml"
    src.write_text(f"extends: {NI.parent / 'vacc.yaml'}\nsimulation: {{start_date: 2021-01-01}}\n", encoding="utf-8")
    sp = plan(src, ["interventions.vaccination.start_day=2021-01-10,2021-01-20"], replicates=1, agents=2000, days=30)
    assert [v.interventions.vaccination.start_day for v in sp.variants] == [9, 19]
    assert list(sp.axes[0].values) == ["2021-01-10", "2021-01-20"]  # text in sweep.csv and sweep.json
