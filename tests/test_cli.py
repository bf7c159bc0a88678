"""The ``abm`` command end to end: output files and their contents, and bad input."""

from __future__ import annotations

import hashlib
import html
import json
import os
import platform
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from conftest import copy_output, fixed_seeds_note
from typer.testing import CliRunner

from abm.cli import app
from abm.engine import STAGE_NAMES, DiseaseConfig
from abm.outputs.run_folder import MARK
from abm.outputs.summary_table import summary_table
from abm.scenario import load_scenario
from abm.scenario_notes import ScenarioNote

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "scenarios"
SCENARIO = SCENARIOS / "king_county/no_intervention.yaml"
runner = CliRunner()


def listing(mark: str) -> list[str]:
    """An output folder mark's lines but those of the files' contents (which differ from run to run)."""
    return [line for line in mark.splitlines() if not line.startswith("sha256: ")]


def abm_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "abm", *args], capture_output=True, text=True, check=False, env=env)


def peak_of(curve: pd.Series, agents: int) -> dict:
    """The summary's peak of a mean curve (indexed by day), computed here from the table."""
    value, day = float(curve.max()), int(curve.idxmax())
    return {
        "value": pytest.approx(value),
        "day": day if value > 0 else None,
        "per_100k": pytest.approx(value / agents * 1e5),
        "at_end": value > 0 and curve.iloc[-1] == value,  # at its peak on the last day: it may still be rising
    }


def test_a_peak_still_held_on_the_last_day_is_at_end():
    # The mean curve reaches its peak on day 1 and holds it to the last day: the peak's day is the
    # first day at the peak, and the curve may still be rising after the run (at_end).
    from abm.outputs.peaks import peak

    plateau = np.array([[0, 1], [2, 2], [1, 3], [3, 1]], dtype=np.float64)  # [day, replicate]: 0.5, 2, 2, 2
    assert peak(plateau, 100) == {"value": 2.0, "day": 1, "per_100k": 2000.0, "at_end": True}
    falling = plateau[:3].copy()
    falling[2] = [1, 1]  # 0.5, 2, 1
    assert peak(falling, 100)["at_end"] is False


@pytest.mark.parametrize(("replicates", "said"), [("1", "1 replicate"), ("2", "2 replicates")])
def test_abm_run_counts_its_replicates_in_words(tmp_path, replicates, said):
    """`abm run` said "1,000 agents x 1 replicates" and titled its table "1 replicate(s)"."""
    out = tmp_path / "run"
    args = ["run", str(SCENARIO), "--agents", "300", "--days", "3", "--replicates", replicates, "--out", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert f"\nrunning no_intervention: 300 agents x {said}, 3 days -> {out}\n" in f"\n{result.stderr}"
    assert f"no_intervention: 300 agents, 3 days, {said}" in result.stdout and "replicate(s)" not in result.stdout


def test_a_one_day_run_counts_its_day_in_words(tmp_path):
    """`abm run --days 1` said "running vacc: 300 agents x 1 replicate, 1 days" and noted that
    vaccination "starts on day 10, after the 1 simulated days (0..0)"; its table's title says "1 day"."""
    out = tmp_path / "run"
    vacc = SCENARIOS / "king_county/vacc.yaml"
    args = ["run", str(vacc), "--agents", "300", "--days", "1", "--replicates", "1", "--out", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert f"running vacc: 300 agents x 1 replicate, 1 day -> {out}\n" in result.stderr
    text = " ".join(result.stderr.split())
    assert "note: interventions.vaccination starts on day 10, after the 1 simulated day (0..0)" in text
    assert "vacc: 300 agents, 1 day, 1 replicate" in result.stdout and "1 days" not in result.output


def test_one_replicate_has_no_sd(tmp_path):
    """One replicate has no spread to measure: summary.json wrote an sd of 0, which reads as no
    variation at all. It is null, and the console shows the mean alone."""
    import abm

    with (
        fixed_seeds_note(),
        pytest.warns(ScenarioNote, match=r"^sets item 'interventions\.vaccination\.start_day=0' turns vaccination on"),
    ):
        result = abm.run(SCENARIO, agents=500, days=3, replicates=1, sets=["interventions.vaccination.start_day=0"])
    out = result.write(tmp_path / "one", figures=False)
    s = json.loads((out / "summary.json").read_text())
    assert result.summary["total_cost"]["mean"] > 0  # something to spread: doses were booked
    for key in ("cumulative_infected", "deaths", "total_cost"):
        assert s[key]["sd"] is None, key
    for key in ("cumulative_infected", "hospitalizations", "deaths", "total_cost"):  # scaled to the county too
        assert s["region_scaled"][key]["sd"] is None, key
    factor = 2_252_782 / 500
    assert s["region_scaled"]["total_cost"]["mean"] == pytest.approx(s["total_cost"]["mean"] * factor)
    assert s["region_scaled"]["cumulative_infected"]["mean"] == pytest.approx(s["cumulative_infected"]["mean"] * factor)
    with fixed_seeds_note():
        two = abm.run(SCENARIO, agents=500, days=3, replicates=2)
    assert two.summary["cumulative_infected"]["sd"] == pytest.approx(
        two.timeseries[two.timeseries.day == 2].cumulative_infected.std(ddof=1)
    )


def test_run_writes_a_complete_run_folder(tmp_path):
    out = tmp_path / "ni"
    # 60 agents seeded with severe symptoms: hospital admissions from day 6, deaths, ICU, and
    # occupancy over the 1.65 beds of 3,000 agents on most (not all) of the 30 days; and two in
    # step-down care (HOSPITALIZED_RECOVERING), so that every hospital stage has someone and the
    # first days are over capacity with no one in the HOSPITALIZED stage.
    args = (
        "run",
        str(SCENARIO),
        "--out",
        str(out),
        "--agents",
        "3000",
        "--days",
        "30",
        "--replicates",
        "2",
        "--seed",
        "9",
        "--set",
        "contacts.community.weight=0.3",
        "--set",
        "seeding.infections={severe_symptoms: 60, hospitalized_recovering: 2}",
    )
    # os.environ as the child's environment: under pytest, children otherwise inherit COLUMNS=80
    proc = abm_cli(*args, env={k: v for k, v in os.environ.items() if k != "COLUMNS"})
    assert proc.returncode == 0, proc.stderr
    assert "cumulative infected" in proc.stdout
    names = {p.name for p in out.iterdir()}
    assert names == {
        MARK,
        "scenario.resolved.yaml",
        "manifest.json",
        "timeseries.csv",
        "timeseries.parquet",
        "by_age.csv",
        "by_tract.csv",
        "summary.json",
        "costs.csv",
        "map.html",
        "plots",
        "report.html",
    }
    # The mark lists every entry abm wrote (those of plots/ too), the kind of output, and each file's content.
    entries = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.name != MARK)
    assert "plots/hospital_occupancy.png" in entries and set(entries) >= names - {MARK}
    digests = [
        f"sha256: {hashlib.sha256((out / n).read_bytes()).hexdigest()} {n}" for n in entries if (out / n).is_file()
    ]
    assert (out / MARK).read_text().splitlines()[1:] == [*(f"  {n}" for n in entries), *digests, "kind: run"]
    ts = pd.read_csv(out / "timeseries.csv")
    assert len(ts) == 30 * 2 and set(ts.replicate) == {0, 1} and ts.day.max() == 29
    derived = ["new_infections", "cumulative_infected", "active", "hospitalized", "icu", "hospital_occupancy"]
    entries = ["new_hospitalizations", "new_icu", "new_deaths"]
    # No intervention: no intervention columns. ("hospitalized" is a stage and a derived column.)
    stage_derived = ["new_infections", "cumulative_infected", "active", "icu", "hospital_occupancy", "deaths"]
    reproduction = ["secondary_infections", "reproduction_number", "generation_interval"]
    assert list(ts.columns) == ["day", "replicate", *STAGE_NAMES, *stage_derived, *entries, *reproduction]
    assert (ts[STAGE_NAMES].sum(axis=1) == 3000).all()
    assert ts.equals(pd.read_parquet(out / "timeseries.parquet"))
    # Derived columns, from the stage counts of the same row.
    assert ts.hospital_occupancy.equals(ts.hospitalized + ts.critical_icu + ts.hospitalized_recovering)
    assert ts.icu.equals(ts.critical_icu) and ts.deaths.equals(ts.death)
    assert ts.cumulative_infected.equals(3000 - ts.susceptible)
    assert ts.active.equals(3000 - ts.susceptible - ts.recovered - ts.death)
    # ... and over the days of each replicate: new infections are the cumulative curve's steps
    # (the 62 seeded ones on day 0), new deaths the deaths' steps (death is for good).
    assert (ts[["hospitalized", "critical_icu", "hospitalized_recovering", "death"]].max() > 0).all()
    for _, rep in ts.groupby("replicate"):
        rep = rep.set_index("day")
        prev = rep.shift(1, fill_value=0)  # the day before (nothing before day 0)
        assert rep.new_infections.equals(rep.cumulative_infected - prev.cumulative_infected)
        assert rep.new_infections.loc[0] == 62
        assert rep.new_deaths.equals(rep.deaths - prev.deaths)
        # Every stage lasts at least a day: an agent who enters a stage is in it at the day's end,
        # and one who leaves it was in it the day before. Admissions come from severe symptoms,
        # ICU entries from HOSPITALIZED; deaths leave the hospital, recoveries too (unknown here).
        assert (rep.new_hospitalizations <= rep.hospitalized).all() and (rep.new_icu <= rep.critical_icu).all()
        assert (rep.new_hospitalizations <= prev.severe_symptoms).all() and (rep.new_icu <= prev.hospitalized).all()
        assert (rep.hospitalized - prev.hospitalized + rep.new_icu <= rep.new_hospitalizations).all()
        assert (rep.critical_icu - prev.critical_icu <= rep.new_icu).all()
        # Into the hospital: admissions, and the two seeded in step-down care on day 0.
        arrived = rep.new_hospitalizations + 2 * (rep.index == 0)
        assert (rep.hospital_occupancy - prev.hospital_occupancy + rep.new_deaths <= arrived).all()
        # Everyone in hospital or dead arrived there on some day.
        assert (rep.hospital_occupancy + rep.deaths <= arrived.cumsum()).all() and arrived.sum() > 2
        assert (rep.critical_icu + rep.hospitalized_recovering <= rep.new_icu.cumsum() + 2).all()
    s = json.loads((out / "summary.json").read_text())
    assert (s["agents"], s["days"], s["replicates"], s["seed"]) == (3000, 30, 2, 9)
    assert (s["scenario"], s["region"], s["region_population"], s["device"]) == (
        "no_intervention",
        "King County, WA",
        2252782,
        "cpu",
    )
    final = ts[ts.day == 29]
    assert s["cumulative_infected"]["mean"] == pytest.approx(final.cumulative_infected.mean())
    assert s["cumulative_infected"]["sd"] == pytest.approx(final.cumulative_infected.std(ddof=1))
    assert s["cumulative_infected"]["share"] == pytest.approx(final.cumulative_infected.mean() / 3000)
    by_day = ts.groupby("day").mean()
    assert s["peak_hospitalized"] == peak_of(by_day.hospitalized, 3000)
    assert s["peak_hospital_occupancy"] == peak_of(by_day.hospital_occupancy, 3000)
    assert s["peak_icu"] == peak_of(by_day.icu, 3000)
    # Infections by transmission: without the 62 seeded on day 0.
    assert s["peak_new_infections"] == peak_of(by_day.new_infections - 62 * (by_day.index == 0), 3000)
    cumulative = by_day.cumulative_infected
    assert s["peak_infection_rate_2nd_difference"] == pytest.approx(cumulative.diff().diff().max())
    assert s["deaths"] == {"mean": pytest.approx(final.deaths.mean()), "sd": pytest.approx(final.deaths.std(ddof=1))}
    admitted = ts.groupby("replicate").new_hospitalizations.sum()
    assert s["hospitalizations"] == {"mean": pytest.approx(admitted.mean()), "sd": pytest.approx(admitted.std(ddof=1))}
    assert s["hospitalizations"]["mean"] > 0  # the two replicates admit someone
    assert s["total_cost"] == {"mean": 0.0, "sd": 0.0}
    # Capacity: 55 beds per 100,000 of the 3,000 agents; days over it are the mean curve's.
    beds = 55.0 * 3000 / 1e5
    capacity = s["hospital_capacity"]
    assert capacity["beds"] == pytest.approx(beds)
    assert capacity["days_over_capacity"] == int((by_day.hospital_occupancy > beds).sum())
    assert 0 < capacity["days_over_capacity"] < 30
    # Capacity is for the whole occupancy: on the first days it is over with no one HOSPITALIZED.
    assert ((by_day.hospitalized <= beds) & (by_day.hospital_occupancy > beds)).any()
    per_replicate = ts.groupby("replicate").hospital_occupancy.max()
    assert capacity["replicates_over_capacity"] == int((per_replicate > beds).sum())
    # ICU capacity: the region's 6.1 ICU beds per 100,000, against the mean ICU curve.
    icu_beds = 6.1 * 3000 / 1e5
    assert s["icu_capacity"]["beds_per_100k"] == 6.1 and s["icu_capacity"]["beds"] == pytest.approx(icu_beds)
    assert s["icu_capacity"]["days_over_capacity"] == int((by_day.icu > icu_beds).sum())
    assert s["icu_capacity"]["replicates_over_capacity"] == int((ts.groupby("replicate").icu.max() > icu_beds).sum())
    # Scaled to the county: each count x 2,252,782 residents / 3,000 agents; the unscaled keys as above.
    factor = 2_252_782 / 3000
    scaled = s["region_scaled"]
    assert scaled["factor"] == pytest.approx(factor, rel=1e-15)
    for key in ("cumulative_infected", "hospitalizations", "deaths", "total_cost"):
        assert scaled[key] == {
            "mean": pytest.approx(s[key]["mean"] * factor),
            "sd": pytest.approx(s[key]["sd"] * factor),
        }
    for key in ("peak_hospitalized", "peak_hospital_occupancy", "peak_icu"):
        assert scaled[key] == pytest.approx(s[key]["value"] * factor), key
    assert scaled["hospital_capacity_beds"] == pytest.approx(55.0 * 2_252_782 / 1e5)
    assert scaled["icu_capacity_beds"] == pytest.approx(6.1 * 2_252_782 / 1e5)
    # The console: a column headed by the county and its factor, with whole numbers in thousands.
    lines = proc.stdout.splitlines()
    assert "King County, WA (x 750.9)" in next(line for line in lines if "measure" in line)
    cells = {c[1].strip(): c[3].strip() for c in (line.split("│") for line in lines if line.count("│") == 4)}
    ci = scaled["cumulative_infected"]
    assert cells["cumulative infected"] == f"{ci['mean']:,.0f} ± {ci['sd']:,.0f}"
    assert re.fullmatch(r"\d{1,3}(,\d{3})+ ± \d{1,3}(,\d{3})*", cells["cumulative infected"])  # over 1,000
    # Without COLUMNS a pipe gets 120 columns: no label wraps onto a second line.
    assert set(cells) - {"measure", ""} == {row[0] for row in summary_table(s, 1.0).rows}  # "": a value wrapped
    deaths = scaled["deaths"]
    assert cells["deaths"] == f"{deaths['mean']:,.0f} ± {deaths['sd']:,.0f}" and cells["total cost ($)"] == "0 ± 0"
    assert cells["engine seconds"] == ""
    footer = " ".join(proc.stdout.split())
    assert "simulated agents: counts and costs of the 3,000 agents simulated" in footer
    assert "multiplied by the region's 2,252,782 residents / 3,000 agents, which assumes the agents are a" in footer
    # report.html: the console's rows, cell for cell, without the engine's seconds (a timing would
    # make a repeated run's page differ); the facts of the run; every plot and snapshot; the files.
    page = (out / "report.html").read_text()
    first = re.search(r"<tbody>(.*?)</tbody>", page, re.S).group(1)  # the main results (the severity table follows)
    rows = [[html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", r)] for r in re.findall(r"<tr>(.*?)</tr>", first)]
    console_rows = summary_table(s, 1.0).rows  # as abm run prints them, with its seconds last
    assert [r for r in rows if r] == console_rows[:-1] and console_rows[-1][0] == "engine seconds"
    html_cells = {r[0]: r[2] for r in rows if r}
    assert html_cells["cumulative infected"] == cells["cumulative infected"] and html_cells["deaths"] == cells["deaths"]
    assert "King County, WA (2,252,782 residents), 3,000 agents, 30 days, 2 replicates, seed 9, device cpu." in page
    assert "None: the epidemic runs without interventions." in page
    images = sorted(re.findall(r'<img src="plots/([^"]+)"', page))
    assert images == sorted(p.name for p in (out / "plots").glob("*.png")) and "hospital_occupancy.png" in images
    assert sorted(re.findall(r'<li><a href="([^"]+)"', page)) == sorted(
        [
            "scenario.resolved.yaml",
            "summary.json",
            "timeseries.csv",
            "by_age.csv",
            "by_tract.csv",
            "costs.csv",
            "map.html",
        ]
    )
    # by_tract: means over replicates per tract, which add up to the timeseries' means.
    by_tract = pd.read_csv(out / "by_tract.csv", dtype={"geoid": str})
    assert by_tract.geoid.str.startswith("53033").all() and by_tract.day.nunique() == 30
    assert (by_tract.groupby("day").agents.sum() == 3000).all()
    assert (by_tract.groupby("geoid").agents.nunique() == 1).all()
    sums = by_tract.groupby("day")[["new_infections", "cumulative_infected", "active", "hospital_occupancy", "deaths"]]
    pd.testing.assert_frame_equal(sums.sum(), by_day[sums.sum().columns], check_dtype=False)
    has_agents = by_tract.agents > 0
    assert has_agents.any() and by_tract.cumulative_infected.max() > 0
    per_100k = by_tract.cumulative_infected / by_tract.agents * 1e5
    assert by_tract.cumulative_per_100k[has_agents].to_numpy() == pytest.approx(per_100k[has_agents].to_numpy())
    assert by_tract.cumulative_per_100k[~has_agents].isna().all()
    # by_age: per day and replicate, the age groups add up to the timeseries' row.
    by_age = pd.read_csv(out / "by_age.csv")
    assert set(by_age.age_group) == {"0-9", "10-19", "20-29", "30-39", "40-49", "50-59", "60-69", "70-79", "80+"}
    age_sums = by_age.groupby(["day", "replicate"])[["agents", *derived, "deaths"]].sum()
    assert (age_sums.agents == 3000).all()
    pd.testing.assert_frame_equal(
        age_sums[[*derived, "deaths"]], ts.set_index(["day", "replicate"])[[*derived, "deaths"]]
    )
    # The resolved scenario re-creates the run: same scenario with the overrides applied.
    resolved = load_scenario(out / "scenario.resolved.yaml")
    assert resolved.population.agents == 3000 and resolved.simulation.seed == 9
    assert resolved.contacts.community.weight == 0.3 and resolved.seeding.infections == {
        "severe_symptoms": 60,
        "hospitalized_recovering": 2,
    }
    assert resolved.outputs.hospital_beds_per_100k == capacity["beds_per_100k"] == pytest.approx(55.0, 0.01)
    assert resolved.outputs.icu_beds_per_100k == s["icu_capacity"]["beds_per_100k"] == 6.1
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["abm_version"] == version("abm-epidemic") and manifest["torch"] == torch.__version__
    assert manifest["python"] == platform.python_version()
    assert (manifest["scenario"], manifest["seed"], manifest["device"]) == ("no_intervention", 9, "cpu")
    assert (manifest["agents"], manifest["replicates"], manifest["days"]) == (3000, 2, 30)
    # The abm command line as given (`python -m abm` runs the same console script).
    assert manifest["command"] == ["abm", *args]
    created = datetime.fromisoformat(manifest["created_utc"])
    assert timedelta(0) <= datetime.now(UTC) - created < timedelta(minutes=10)
    assert manifest["timings"]["engine_seconds"] > 0 and min(manifest["timings"].values()) >= 0
    assert manifest["files"] == [*sorted(names - {"manifest.json"}), "manifest.json"]
    # Re-running the resolved scenario writes the same files byte for byte (map and plots too);
    # only the manifest's timings differ, and so the mark's record of the manifest's content.
    again = tmp_path / "again"
    assert abm_cli("run", str(out / "scenario.resolved.yaml"), "--out", str(again)).returncode == 0
    files = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file() and p.name != "manifest.json")
    assert sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file() and p.name != "manifest.json") == files
    assert {"map.html", "summary.json", "timeseries.parquet"} <= {p.name for p in files}
    assert [f for f in files if (out / f).read_bytes() != (again / f).read_bytes()] == [Path(MARK)]
    manifest_digest = re.compile(r"^sha256: [0-9a-f]{64} manifest\.json$")
    marks = [[x for x in (f / MARK).read_text().splitlines() if not manifest_digest.match(x)] for f in (out, again)]
    assert marks[0] == marks[1] and len(marks[0]) == len((out / MARK).read_text().splitlines()) - 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
def test_device_cuda_without_a_gpu_is_refused_before_anything_runs(tmp_path):
    out = tmp_path / "gpu"
    args = ["run", str(SCENARIO), "--agents", "500", "--days", "5", "--device", "cuda", "--out", str(out)]
    result = runner.invoke(app, args)
    text = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert "simulation.device: 'cuda' is not allowed here: no CUDA device is available; use cpu" in text
    assert "(with --agents 500 --days 5 --device cuda)" in text and "running" not in text
    assert list(tmp_path.iterdir()) == []


def test_intervention_counts_in_the_timeseries_match_the_costs(tmp_path):
    """Every priced count is booked in costs.csv, day by day and replicate by replicate, at its
    price; the summary's total cost is the sum of the bookings. Quarantine and tracing cost
    nothing by default: here they get prices, so that their items are booked too."""
    out = tmp_path / "vacc_ct"
    scenario = SCENARIO.parent / "vacc_ct.yaml"
    args = ["run", str(scenario), "--out", str(out), "--agents", "3000", "--days", "40", "--replicates", "2"]
    prices = {
        "interventions.quarantine.cost_per_day": 7,
        "interventions.digital_tracing.cost_per_notification": 3,
        "interventions.manual_tracing.cost_per_interview": 11,
    }
    sets = ["seeding.infections={mild_symptoms: 20}", *(f"{key}={price}" for key, price in prices.items())]
    result = runner.invoke(app, [*args, *(x for s in sets for x in ("--set", s))])
    assert result.exit_code == 0, result.output
    ts = pd.read_csv(out / "timeseries.csv").set_index(["day", "replicate"]).sort_index()
    costs = pd.read_csv(out / "costs.csv")
    assert costs["count"].dtype == np.int64  # units are whole: written 3, not 3.0
    # item: (the timeseries' count, its price); RT-PCR tests cost $5 and doses $20 by default.
    ts["doses"] = ts["first_doses"] + ts["second_doses"]
    items = {
        "test_rt_pcr": ("tests", 5.0),
        "quarantine_day": ("in_quarantine", 7.0),
        "dct_notification": ("app_notifications", 3.0),
        "mct_interview": ("interviews", 11.0),
        "vaccine_dose": ("doses", 20.0),
    }
    assert set(costs["item"]) == set(items)
    assert costs.duplicated(["item", "day", "replicate"]).sum() == 0 and (costs["count"] > 0).all()
    for item, (column, price) in items.items():
        booked = costs[costs["item"] == item].set_index(["day", "replicate"])
        assert (booked["unit_cost"] == price).all(), item
        assert (booked["cost"] == booked["count"] * price).all(), item
        counts = booked["count"].reindex(ts.index, fill_value=0)
        assert (ts[column] > 0).any() and (counts == ts[column]).all(), item
    # The total cost per replicate is what costs.csv books for it.
    totals = costs.groupby("replicate")["cost"].sum().reindex([0, 1], fill_value=0)
    priced = sum(ts[column].groupby("replicate").sum() * price for column, price in items.values())
    assert totals.to_numpy() == pytest.approx(priced.to_numpy())
    summary = json.loads((out / "summary.json").read_text())
    assert summary["total_cost"] == {"mean": pytest.approx(totals.mean()), "sd": pytest.approx(totals.std(ddof=1))}
    ts = ts.reset_index()
    for _, rep in ts.groupby("replicate"):
        rep = rep.set_index("day")
        # 300 doses per 100,000 a day: 9 a day from day 10 for 30 days, every one given.
        assert rep["doses"].loc[:9].sum() == 0 and (rep["doses"].loc[10:] == 9).all()
        # Protection takes 14 days after dose 1; the protected are counted within the susceptible.
        assert rep["vaccine_protected"].loc[:23].sum() == 0 and rep["vaccine_protected"].loc[39] > 0
        assert (rep["vaccine_protected"] <= rep["susceptible"]).all()
        # RT-PCR results come 1-3 days after the test: by each day, no more results than tests the day before
        assert (rep["positive_results"].cumsum() <= rep["tests"].cumsum().shift(1, fill_value=0)).all()
    assert costs.loc[costs["item"] == "vaccine_dose", "cost"].sum() == 2 * 270 * 20.0
    assert (ts["in_quarantine"] > 0).any() and ts["positive_results"].sum() > 0


def test_unpriced_items_are_booked_at_a_cost_of_0_like_unpriced_tests(tmp_path):
    """Tests and doses at price 0 were booked (rows at cost 0), quarantine days, notifications and
    interviews at price 0 (their default) were not: costs.csv now books every item, 0 included."""
    out = tmp_path / "vacc_ct"
    scenario = SCENARIO.parent / "vacc_ct.yaml"
    args = ["run", str(scenario), "--out", str(out), "--agents", "3000", "--days", "30", "--replicates", "1"]
    sets = ["seeding.infections={mild_symptoms: 20}", "interventions.testing.tests[0].cost=0"]
    result = runner.invoke(app, [*args, *(x for s in sets for x in ("--set", s))])
    assert result.exit_code == 0, result.output
    ts = pd.read_csv(out / "timeseries.csv").set_index("day")
    costs = pd.read_csv(out / "costs.csv")
    items = {"test_rt_pcr": "tests", "quarantine_day": "in_quarantine", "dct_notification": "app_notifications"}
    items |= {"mct_interview": "interviews"}
    assert set(items) <= set(costs["item"]) and (costs.loc[costs["item"].isin(items), "cost"] == 0).all()
    for item, column in items.items():
        counts = costs[costs["item"] == item].set_index("day")["count"].reindex(ts.index, fill_value=0)
        assert (ts[column] > 0).any() and (counts == ts[column]).all(), item


def test_an_option_that_turns_an_intervention_on_gets_a_note(tmp_path):
    base = ["--agents", "2000", "--days", "3", "--replicates", "1", "--set", "interventions.vaccination.start_day=1"]
    result = runner.invoke(app, ["run", str(SCENARIO), "--out", str(tmp_path / "a"), *base])
    assert result.exit_code == 0, result.output
    note = " ".join(result.stderr.split())
    assert "--set interventions.vaccination.start_day=1 turns vaccination on" in note
    assert "has no interventions.vaccination" in note
    vacc = SCENARIO.parent / "vacc.yaml"
    result = runner.invoke(app, ["run", str(vacc), "--out", str(tmp_path / "b"), *base])
    assert result.exit_code == 0 and "turns vaccination on" not in " ".join(result.stderr.split())
    # An option that leaves the intervention off gets no note.
    off = [*base[:-1], "interventions.vaccination.enabled=false"]
    result = runner.invoke(app, ["run", str(SCENARIO), "--out", str(tmp_path / "c"), *off])
    notes = [line for line in result.stderr.splitlines() if line.startswith("note:")]
    # the one note left is on the file's 5 initial infections at --agents 2000
    assert result.exit_code == 0 and [n.split(" whatever")[0] for n in notes] == [
        "note: seeding.infections seeds 5 agents"
    ]


def test_validate_notes_an_option_that_turns_an_intervention_on_as_run_does():
    """`abm validate FILE --set ...` checks FILE as `abm run` would run it, but said nothing where a
    --set turned an intervention on with its defaults; the same note as `abm run`'s now, and none
    where the file has the intervention already."""
    sets = ["--set", "interventions.vaccination.start_day=30"]
    result = runner.invoke(app, ["validate", str(SCENARIO), *sets])
    assert result.exit_code == 0, result.output
    assert " ".join(result.stderr.split()) == (
        f"note: --set interventions.vaccination.start_day=30 turns vaccination on ({SCENARIO} has no "
        "interventions.vaccination); its other settings take their defaults"
    )
    result = runner.invoke(app, ["validate", str(SCENARIO.parent / "vacc.yaml"), *sets])
    assert result.exit_code == 0 and result.stderr == ""


def test_validate_accepts_the_shipped_scenarios():
    """Every epidemic scenario shipped (King County's and the reference set), each named as valid."""
    king_county = sorted((SCENARIOS / "king_county").glob("*.yaml"))
    reference = sorted((SCENARIOS / "reference").glob("*.yaml"))
    # those the README lists, the base they extend and the calibration scenarios
    listed = {"ni", "no_intervention", "sq", "vacc", "ct", "vacc_ct", "vacc_budget"}
    listed |= {"vacc_t30", "vacc_t60", "vacc_t30_ct", "vacc_t60_ct"}
    ours = {"vacc_phase1a", "vacc_on_schedule"}  # listed too, not the thesis's: King County's only
    assert {p.stem for p in king_county} >= listed | ours | {"base", "calibrate_2020", "calibrate_2020_severity"}
    assert {p.stem for p in reference} >= (listed - {"no_intervention"}) | {"base"}
    for path in king_county + reference:
        result = runner.invoke(app, ["validate", str(path)])
        assert result.exit_code == 0, result.output
        # every scenario is named in its file: the reference set's with a prefix
        name = f"reference_{path.stem}" if path.parent.name == "reference" else path.stem
        assert "".join(f"ok {path}: scenario {name!r} is valid".split()) in "".join(result.output.split())


def test_validate_show_prints_every_value_and_round_trips(tmp_path):
    """--show prints the resolved scenario (defaults filled in, --set applied) as the only output
    on stdout; loaded back it is the same scenario; a learning scenario is shown too."""
    from abm.scenario import load_scenario

    src = SCENARIOS / "king_county/vacc_ct.yaml"
    proc = subprocess.run(
        [sys.executable, "-m", "abm", "validate", str(src), "--set", "simulation.days=77", "--show"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and "is valid" in proc.stderr and "is valid" not in proc.stdout
    shown = yaml.safe_load(proc.stdout)
    assert shown["simulation"]["days"] == 77
    # defaults the file never states are there: the digital tracing window and the default test
    assert shown["interventions"]["digital_tracing"]["window_days"] == 7
    assert shown["interventions"]["testing"]["tests"][0]["name"] == "rt_pcr"
    # the capacity the run uses, as its scenario.resolved.yaml names it: the region's (it showed null)
    assert shown["outputs"]["hospital_beds_per_100k"] == pytest.approx(55.0, 0.01)
    assert shown["outputs"]["icu_beds_per_100k"] == 6.1
    (tmp_path / "full.yaml").write_text(proc.stdout, encoding="utf-8")
    again = load_scenario(tmp_path / "full.yaml")
    assert again.resolved_yaml() == proc.stdout
    assert again == load_scenario(src, ["simulation.days=77"]).with_capacity()
    learning = runner.invoke(app, ["validate", str(SCENARIOS / "learning/gmm_mapl.yaml"), "--show"])
    verdict = " ".join(learning.stderr.split())
    assert learning.exit_code == 0 and "'gmm_mapl' is valid" in verdict and "is valid" not in learning.stdout
    assert yaml.safe_load(learning.stdout)["name"] == "gmm_mapl"


def test_one_line_messages_stay_on_one_line_when_piped(tmp_path):
    """A message with a long path is not broken at the 80 columns rich assumes off a terminal, so
    a log or grep sees it whole (CI failed once on a verdict wrapped by a longer checkout path)."""
    deep = tmp_path / ("long_folder_name_" * 6) / "sub"
    deep.mkdir(parents=True)
    path = deep / "gmm.yaml"
    path.write_text((SCENARIOS / "learning/gmm_mapl.yaml").read_text(), encoding="utf-8")
    env = {**os.environ, "COLUMNS": "80"}
    proc = subprocess.run(
        [sys.executable, "-m", "abm", "validate", str(path)], capture_output=True, text=True, timeout=120, env=env
    )
    assert len(f"ok {path}: learning scenario 'gmm_mapl' is valid") > 120
    assert proc.returncode == 0 and proc.stdout == f"ok {path}: learning scenario 'gmm_mapl' is valid\n"


def test_validate_checks_learning_and_private_calibration_scenarios(tmp_path):
    for path in (SCENARIOS / "learning").glob("*.yaml"):
        result = runner.invoke(app, ["validate", str(path)])
        assert result.exit_code == 0, result.output
        kind = "private calibration" if "private_calibration" in path.name else "learning"
        assert f"{kind} scenario" in " ".join(result.output.split())
    bad = tmp_path / "bad.yaml"
    text = (SCENARIOS / "learning/gmm_mapl.yaml").read_text().replace("rounds:", "roundz:", 1)
    assert "roundz:" in text
    bad.write_text(text)
    result = runner.invoke(app, ["validate", str(bad)])
    assert result.exit_code == 2 and "roundz: unknown key" in " ".join(result.output.split())
    for text, key in (
        ("name: x\ndata: {source: iris}\n", "split"),
        ("kind: private_calibration\nname: x\n", "institutions"),
    ):
        bad.write_text(text)
        result = runner.invoke(app, ["validate", str(bad)])
        assert result.exit_code == 2 and f"invalid scenario: {key}: required key is missing" in " ".join(
            result.output.split()
        )
    bad.write_bytes(bytes(range(128, 256)))
    out = ["--out", str(tmp_path / "out")]
    for args in (["validate", str(bad)], ["run", str(bad), *out], ["learn", str(bad), *out]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2 and "not a text file" in result.output, args
    assert not (tmp_path / "out").exists()
    result = runner.invoke(app, ["validate", str(SCENARIOS / "learning/gmm_mapl.yaml"), "--set", "roundz=3"])
    assert result.exit_code == 2 and "(with --set roundz=3): invalid scenario: roundz: unknown key" in " ".join(
        result.output.split()
    )


def test_learning_commands_name_the_missing_learning_extra(tmp_path, monkeypatch):
    for module in ("scipy", "sklearn"):
        monkeypatch.setitem(sys.modules, module, None)  # as if not installed
    out = tmp_path / "out"
    for args in (
        ["validate", str(SCENARIOS / "learning/gmm_mapl.yaml")],
        ["learn", str(SCENARIOS / "learning/gmm_mapl.yaml"), "--out", str(out)],
        ["learn", str(SCENARIOS / "learning/private_calibration.yaml"), "--out", str(out)],
    ):
        result = runner.invoke(app, args)
        text = " ".join(result.output.split())
        assert result.exit_code == 2, (args, result.output)
        assert "need the `learning` extra (scipy, scikit-learn not installed): pip install -e '.[learning]'" in text
    assert not out.exists()
    assert runner.invoke(app, ["validate", str(SCENARIO)]).exit_code == 0  # epidemic scenarios do not need it


def test_the_flower_runners_name_the_missing_flower_extra(monkeypatch):
    from abm.learning.errors import LearningScenarioError
    from abm.learning.flower import import_flwr

    monkeypatch.setitem(sys.modules, "flwr", None)
    hint = r"need flwr, which is not installed: pip install -e '\.\[flower\]'"
    with pytest.raises(LearningScenarioError, match=hint):
        import_flwr()


def test_extends_and_set(tmp_path):
    base = tmp_path / "base.yaml"
    base.write_text("name: base\nsimulation: {days: 50, replicates: 3}\ncontacts: {household: {weight: 1.5}}\n")
    child = tmp_path / "child.yaml"
    child.write_text("extends: base.yaml\nname: child\nsimulation: {days: 20}\n")
    sc = load_scenario(child, ["contacts.occupation.weight=0.5", "seeding.infections={asymptomatic: 7}"])
    assert (sc.name, sc.simulation.days, sc.simulation.replicates) == ("child", 20, 3)
    assert sc.contacts.household.weight == 1.5 and sc.contacts.occupation.weight == 0.5
    assert sc.seeding.infections == {"asymptomatic": 7}


BAD = [
    (
        "simulation: {dayz: 10}",
        "simulation.dayz: unknown key; did you mean 'days'? allowed keys: days, replicates, seed, device",
    ),
    ("simulation: {days: ten}", "simulation.days: 'ten' is not allowed"),
    (
        "contacts: {occupation: {rewire_probability: 1.5}}",
        "contacts.occupation.rewire_probability: 1.5 is not allowed: must be at most 1",
    ),
    ("seeding: {infections: {asymptomatic: -3}}", "seeding.infections.asymptomatic: -3 is not allowed"),
    ("seeding: {day: -1}", "seeding.day: -1 is not allowed: must be at least 0"),
    ("population: {agents: 900000000000}", "population.agents: 900000000000 agents x 1 replicate need at least about"),
    ("simulation: [1, 2", "invalid YAML"),
    (
        "population: {region: nowhere}",
        "nowhere' is not allowed: no region folder with region.yaml and tracts.csv there; bundled regions: king_county",
    ),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_bad_input_gets_one_clear_message_exit_2_and_nothing_written(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(f"name: bad\n{text}\n")
    out = tmp_path / "out"
    result = runner.invoke(app, ["run", str(path), "--out", str(out)])
    assert result.exit_code == 2
    flat = " ".join(result.output.split())
    assert str(path) in flat.replace(" ", "") or str(path) in flat
    assert message in flat
    assert not out.exists() and sorted(os.listdir(tmp_path)) == ["bad.yaml"]


def test_unreadable_file_and_bad_set(tmp_path):
    result = runner.invoke(app, ["run", str(tmp_path / "missing.yaml")])
    assert result.exit_code == 2 and "cannot read the scenario file" in result.output
    result = runner.invoke(app, ["validate", str(SCENARIO), "--set", "simulation.days"])
    assert result.exit_code == 2 and "write key.path=value" in result.output
    result = runner.invoke(app, ["run", str(SCENARIO), "--days", "-5", "--out", str(tmp_path / "x")])
    assert result.exit_code == 2 and "simulation.days: -5 is not allowed" in " ".join(result.output.split())
    assert not (tmp_path / "x").exists()


def test_a_crash_mid_run_leaves_no_half_written_folder_and_keeps_the_old_one(tmp_path, monkeypatch):
    out = tmp_path / "run"
    out.mkdir()
    (out / "summary.json").write_text("{}")
    (out / MARK).write_text("")  # an earlier output of abm (only those may be replaced)

    def boom(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr("abm.outputs.tables.by_tract", boom)
    result = runner.invoke(app, ["run", str(SCENARIO), "--agents", "500", "--days", "5", "--out", str(out)])
    assert result.exit_code != 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    assert (out / "summary.json").read_text() == "{}"
    monkeypatch.undo()
    # And an interrupted write (after the tables) also leaves the old folder as it was.
    monkeypatch.setattr("pandas.DataFrame.to_parquet", boom)
    result = runner.invoke(app, ["run", str(SCENARIO), "--agents", "500", "--days", "5", "--out", str(out)])
    assert result.exit_code != 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"] and (out / "summary.json").read_text() == "{}"


def test_a_full_disk_while_the_run_folder_is_written_gets_one_message_and_exit_1(
    tmp_path, monkeypatch, small_run_folder
):
    """The disk fills up part-way through the tables: one line naming the folder and the cause
    (not a traceback), exit code 1 (the environment failed, the input was fine), no staging
    folder left, and the earlier run there as it was."""
    import errno

    out = copy_output(small_run_folder, tmp_path / "run")  # the earlier run, written once
    small = ["--agents", "500", "--days", "5", "--replicates", "1", "--out", str(out)]
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}

    def full(self, path, *args, **kwargs):
        Path(path).write_bytes(b"PAR1")  # part of the file, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("pandas.DataFrame.to_parquet", full)
    result = runner.invoke(app, ["run", str(SCENARIO), *small, "--seed", "7"])
    text = " ".join(result.output.split())
    assert result.exit_code == 1, result.output
    assert (
        f"error: output folder '{out}': writing failed (No space left on device); nothing was written; "
        "the earlier output there is kept" in text
    ), text
    assert "Traceback" not in result.output and text.count("error:") == 1
    assert [p.name for p in tmp_path.iterdir()] == ["run"]
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_an_output_folder_taken_while_the_run_ran_gets_one_line_and_exit_2(tmp_path, monkeypatch):
    """``--out`` is checked before the run and again as the folder is written. A folder someone
    made there meanwhile, with a file of their own, ends `abm run` with one line naming it and exit
    code 2, their file kept (it ended with an OutputFolderError traceback and exit code 1)."""
    import abm.runs

    out, real = tmp_path / "run", abm.runs.run

    def run_then_take_the_folder(*args, **kwargs):
        result = real(*args, **kwargs)
        out.mkdir()
        (out / "notes.txt").write_text("mine")
        return result

    monkeypatch.setattr(abm.runs, "run", run_then_take_the_folder)
    small = ["--agents", "500", "--days", "5", "--replicates", "1", "--out", str(out)]
    result = runner.invoke(app, ["run", str(SCENARIO), *small])
    text = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert f"error: output folder '{out}': exists and was not written by abm" in text, text
    assert text.endswith(f"remove this one yourself; no results were written to {out}"), text
    assert text.count("error:") == 1
    assert [p.name for p in tmp_path.iterdir()] == ["run"] and (out / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("command", ["calibrate", "learn"])
def test_calibrate_and_learn_say_a_failed_write_in_one_line_with_exit_1(tmp_path, monkeypatch, command):
    """`abm calibrate` and `abm learn` end on a file system failure (:class:`OutputWriteError`,
    raised by the output folder's writer) with its message and exit code 1, not a traceback."""
    from abm.outputs.run_folder import OutputWriteError

    message = f"output folder '{tmp_path / 'x'}': writing failed (Disk quota exceeded); nothing was written"

    def failing(*_args, **_kwargs):
        raise OutputWriteError(message)

    if command == "calibrate":
        monkeypatch.setattr("abm.calibration.optimize.calibrate", failing)
        args = [str(SCENARIOS / "king_county/calibrate_2020.yaml"), "--trials", "1"]
    else:
        monkeypatch.setattr("abm.learning.report.run_scenario", failing)
        args = [str(SCENARIOS / "learning/gmm_mapl.yaml")]
    result = runner.invoke(app, [command, *args, "--out", str(tmp_path / "x")])
    assert result.exit_code == 1, result.output
    assert f"error: {message}" in " ".join(result.output.split()) and result.exception is not None
    assert not isinstance(result.exception, OutputWriteError)  # ended by the command, not raised through it


def test_a_folder_put_in_place_by_another_writer_meanwhile_gets_a_write_error(tmp_path, monkeypatch):
    """Two commands writing the same folder at once: when the other one's folder lands between
    this one's check and its rename (the rename then fails), this one raises OutputWriteError
    naming the folder, removes its staging folder and leaves the other's output whole."""
    from abm.outputs.run_folder import MARK_TEXT, OutputWriteError, atomic_folder

    out = tmp_path / "out"
    real_rename = Path.rename

    def other_writer_first(self, target):
        if Path(target) == out and not out.exists():  # the other process's output lands just now
            out.mkdir()
            (out / "summary.json").write_text("other")
            (out / MARK).write_text(MARK_TEXT + "  summary.json\nkind: run\n")
        return real_rename(self, target)  # a folder onto a non-empty one: fails

    monkeypatch.setattr(Path, "rename", other_writer_first)
    with (
        pytest.raises(OutputWriteError, match=f"output folder '{out}': writing failed") as caught,
        atomic_folder(out, "run") as tmp,
    ):
        (tmp / "summary.json").write_text("mine")
    monkeypatch.setattr(Path, "rename", real_rename)
    assert caught.value.errno is not None
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    assert (out / "summary.json").read_text() == "other"


@pytest.mark.parametrize("failure", [KeyboardInterrupt, OSError])
def test_an_output_that_is_not_written_leaves_none_of_the_folders_made_for_it(tmp_path, failure):
    """``--out new/deeper/run`` makes ``new`` and ``new/deeper`` to write the run in; a write that
    is interrupted (Ctrl-C) or fails (a full disk) removes them with the run (they were left,
    empty), up to one that now holds something else."""
    from abm.outputs.run_folder import OutputWriteError, atomic_folder

    error = OutputWriteError if failure is OSError else KeyboardInterrupt
    with pytest.raises(error), atomic_folder(tmp_path / "new" / "deeper" / "run", "run") as tmp:
        (tmp / "summary.json").write_text("{}")
        raise failure
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(error), atomic_folder(tmp_path / "new" / "deeper" / "run", "run") as tmp:
        (tmp_path / "new" / "notes.txt").write_text("mine")  # put there meanwhile
        raise failure
    assert [p.name for p in (tmp_path / "new").iterdir()] == ["notes.txt"]


def test_resolved_yaml_round_trips(tmp_path):
    """The resolved scenario a run saves loads back as the same scenario, every field."""
    sc = load_scenario(SCENARIO)
    assert yaml.safe_load(sc.resolved_yaml())["disease"]["dwell_times"][0]["from"] == "asymptomatic"
    path = tmp_path / "resolved.yaml"
    path.write_text(sc.resolved_yaml())
    again = load_scenario(path)
    assert again == sc and again.resolved_yaml() == sc.resolved_yaml()


def default_sigint() -> None:
    """In the child: Ctrl-C's default action, whatever the test runner inherited (a shell starts
    background jobs with SIGINT ignored, and children inherit that)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_ctrl_c_or_kill_leaves_no_run_folder(tmp_path, signame):
    """Ctrl-C (SIGINT) or a termination request (SIGTERM, from kill or a batch scheduler)."""
    import signal
    import time

    out = tmp_path / "big"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "abm",
            "run",
            str(SCENARIO),
            "--agents",
            "200000",
            "--replicates",
            "3",
            "--out",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    # Interrupt once the run has started (it announces itself on stderr), not while importing.
    first = proc.stderr.readline()
    while first.startswith("note: "):  # --agents keeps the scenario's count of initial infections
        first = proc.stderr.readline()
    assert first.startswith("running "), first
    time.sleep(1.5)
    proc.send_signal(getattr(signal, signame))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + getattr(signal, signame), err  # 130 or 143
    assert "no results were written" in err
    assert list(tmp_path.iterdir()) == []


# A Ctrl-C (or SIGTERM) that lands in compiled code: the console script's handler raises
# KeyboardInterrupt there, and the library turns it into another error (matplotlib's Agg renderer,
# interrupted while a plot was saved, reported "ValueError: Invalid affine transformation matrix";
# torch, while importing, a RuntimeError) or swallows it (Python prints "Exception ignored").
INTERRUPTED_IN_COMPILED_CODE = """
import os, signal, sys, types

from abm import entry
from abm.outputs import plots

mode, signame = sys.argv[1], sys.argv[2]


def hit_by_interrupt(*args, **kwargs):
    try:
        os.kill(os.getpid(), getattr(signal, signame))
    except KeyboardInterrupt:
        if mode == "converted":
            raise ValueError("Invalid affine transformation matrix") from None
        if mode == "importing":
            raise RuntimeError("Error calling __set_name__ on 'Field' instance") from None


class Importing(types.ModuleType):
    def __getattr__(self, name):
        hit_by_interrupt()


if mode == "importing":
    sys.modules["abm.cli"] = Importing("abm.cli")
plots.write_plots = hit_by_interrupt
sys.argv = ["abm", *sys.argv[3:]]
entry.main()
"""


@pytest.mark.parametrize(
    ("mode", "signame"), [("converted", "SIGINT"), ("swallowed", "SIGINT"), ("converted", "SIGTERM")]
)
def test_an_interrupt_that_a_library_turns_into_another_error_still_stops_the_run(
    tmp_path, small_run_folder, mode, signame
):
    """One line, exit code 130 (143 for SIGTERM), no traceback, and the earlier run of the same
    name is kept as it was: the interrupt counts, whatever the library made of it (it once ended
    with a ValueError traceback and exit code 1, or with exit code 0 and the new run in place)."""
    import signal

    out = copy_output(small_run_folder, tmp_path / "out")  # the earlier run, written once
    small = ["--agents", "500", "--days", "5", "--replicates", "1", "--out", str(out)]
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    script = [sys.executable, "-c", INTERRUPTED_IN_COMPILED_CODE, mode, signame]
    proc = subprocess.run([*script, "run", str(SCENARIO), *small, "--seed", "2"], capture_output=True, text=True)
    assert proc.returncode == 128 + getattr(signal, signame), proc.stderr
    assert f"interrupted: no results were written; the earlier results in {out} are kept" in proc.stderr
    assert "Traceback" not in proc.stderr and "Error" not in proc.stderr, proc.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


# The same for `abm compare`, whose overlay plots are drawn by its own reference to write_plots.
INTERRUPTED_COMPARE = INTERRUPTED_IN_COMPILED_CODE.replace(
    "plots.write_plots = hit_by_interrupt",
    "import abm.outputs.compare\nabm.outputs.compare.write_plots = hit_by_interrupt",
)


@pytest.mark.parametrize(
    ("mode", "signame"), [("converted", "SIGINT"), ("swallowed", "SIGINT"), ("converted", "SIGTERM")]
)
def test_an_interrupt_while_a_comparison_is_written_says_so_and_keeps_the_earlier_one(
    tmp_path, small_comparison, mode, signame
):
    """Ctrl-C while `abm compare` drew its plots said "interrupted while starting; nothing was
    run", and when matplotlib turned the interrupt into a ValueError it ended with a traceback of
    thousands of lines and exit code 1. Now: one line naming the folder, 130 (143), no traceback,
    and the earlier comparison kept as it was."""
    import signal

    # Two runs and `abm compare a b --out cmp`, written once.
    a, b, out = (copy_output(small_comparison[name], tmp_path / name) for name in ("a", "b", "cmp"))
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    script = [sys.executable, "-c", INTERRUPTED_COMPARE, mode, signame]
    proc = subprocess.run([*script, "compare", str(a), str(b), "--out", str(out)], capture_output=True, text=True)
    assert proc.returncode == 128 + getattr(signal, signame), proc.stderr
    assert proc.stderr == f"interrupted: no results were written; the earlier results in {out} are kept\n", proc.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "cmp"]


@pytest.mark.parametrize("earlier", [False, True], ids=["new_folder", "earlier_output"])
@pytest.mark.parametrize("command", ["run", "sweep", "calibrate", "compare"])
def test_an_interrupted_command_says_whether_an_earlier_output_is_kept(tmp_path, monkeypatch, command, earlier):
    """Ctrl-C as the work starts: one line, exit code 130. Where the folder holds an earlier
    output of abm, which stays as it was, the line says so (it said "no results were written to
    DIR" either way, as if DIR were gone)."""
    from conftest import tiny_calibration

    import abm.calibration.optimize
    import abm.outputs.compare
    import abm.runs
    import abm.sweep
    from abm.outputs.run_folder import atomic_folder

    def stop(*_args, **_kwargs):
        raise KeyboardInterrupt

    out = tmp_path / "out"
    small = ["--agents", "500", "--days", "5", "--replicates", "1"]
    args, patched, kind = {
        "run": (["run", str(SCENARIO), *small], (abm.runs, "run"), "run"),
        "sweep": (["sweep", str(SCENARIO), "--sweep", "contacts.community.weight=0.3,0.6", *small],
                  (abm.sweep, "run_task"), "sweep"),
        "calibrate": (["calibrate", str(tiny_calibration(tmp_path, trials=2, rerank_trials=0)), "--workers", "1"],
                      (abm.calibration.optimize, "simulate_values"), "calibration"),
        "compare": (["compare", str(tmp_path / "a"), str(tmp_path / "b")], (abm.outputs.compare, "load_runs"),
                    "comparison"),
    }[command]  # fmt: skip
    monkeypatch.setattr(*patched, stop)
    if earlier:
        with atomic_folder(out, kind) as tmp:
            (tmp / "earlier.txt").write_text("earlier")
    result = runner.invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 130, result.output
    said = result.output.splitlines()[-1]
    if earlier:
        assert said == f"interrupted: no results were written; the earlier results in {out} are kept"
        assert (out / "earlier.txt").read_text() == "earlier"
    else:
        assert said == f"interrupted: no results were written to {out}"
        assert not out.exists()


def test_an_interrupted_calibration_without_out_names_its_default_folder(tmp_path, monkeypatch):
    """It named the pattern runs/<name>-calibration, not the folder, and so could not say that an
    earlier calibration there is kept."""
    from conftest import tiny_calibration

    import abm.calibration.optimize
    from abm.outputs.run_folder import atomic_folder

    def stop(*_args, **_kwargs):
        raise KeyboardInterrupt

    scenario = tiny_calibration(tmp_path, trials=2, rerank_trials=0)
    name = yaml.safe_load(scenario.read_text())["name"]
    monkeypatch.setattr(abm.calibration.optimize, "simulate_values", stop)
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["calibrate", str(scenario), "--workers", "1"])
    assert result.exit_code == 130 and result.output.splitlines()[-1] == (
        f"interrupted: no results were written to {Path('runs') / f'{name}-calibration'}"
    ), result.output
    with atomic_folder(tmp_path / "runs" / f"{name}-calibration", "calibration") as tmp:
        (tmp / "earlier.txt").write_text("earlier")
    result = runner.invoke(app, ["calibrate", str(scenario), "--workers", "1"])
    assert result.exit_code == 130 and result.output.splitlines()[-1] == (
        f"interrupted: no results were written; the earlier results in {Path('runs') / f'{name}-calibration'} are kept"
    ), result.output


def test_an_interrupt_turned_into_another_error_while_starting_ends_with_one_line(tmp_path):
    script = [sys.executable, "-c", INTERRUPTED_IN_COMPILED_CODE, "importing", "SIGINT"]
    proc = subprocess.run([*script, "run", str(SCENARIO), "--out", str(tmp_path / "o")], capture_output=True, text=True)
    assert proc.returncode == 130 and proc.stderr == "interrupted while starting; nothing was run\n", proc.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_an_output_folder_where_nothing_can_be_written_is_refused_before_the_run():
    """/proc passes the permission bits for root but takes no folder: abm tries, and refuses."""
    result = runner.invoke(app, ["run", str(SCENARIO), "--agents", "500", "--days", "5", "--out", "/proc/abm-out"])
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "output folder '/proc/abm-out': cannot write in '/proc'" in text, text
    assert "running" not in text


def test_the_default_output_folder_in_a_folder_where_nothing_can_be_written_names_that_folder(tmp_path, monkeypatch):
    """runs/NAME under a working folder that takes nothing: the message names the working folder
    by its path (it said '.'); os.access is pretended, the tests running as root."""
    import abm.outputs.run_folder as run_folder

    monkeypatch.chdir(tmp_path)
    access = run_folder.os.access
    monkeypatch.setattr(
        run_folder.os, "access", lambda path, mode: Path(path).resolve() != tmp_path and access(path, mode)
    )
    result = runner.invoke(app, ["run", str(SCENARIO), "--agents", "500", "--days", "5"])
    text = " ".join(result.output.split())
    assert result.exit_code == 2, text
    assert f"cannot write in {str(tmp_path)!r} (no permission or not a folder)" in text, text
    assert list(tmp_path.iterdir()) == []


def test_an_interrupt_once_the_results_are_written_is_ignored(monkeypatch):
    """Ctrl-C or SIGTERM while a command prints, its output complete: no exit code 130 that
    would tell a script the results were not written."""
    import signal

    from abm import entry, interrupts

    with pytest.raises(KeyboardInterrupt):  # nothing noted before (conftest._interrupt_state_restored)
        entry._interrupt(signal.SIGTERM, None)
    assert entry._interrupted_code() == 143
    interrupts.results_written()
    assert entry._interrupt(signal.SIGINT, None) is None and interrupts._received == [signal.SIGTERM]


# Ctrl-C just after the output folder is in place, before the command returns: as a sweep removes
# the runs it kept (Journal.remove), or as `abm run` returns from RunResult.write.
INTERRUPTED_AFTER_THE_WRITE = """
import os, signal, sys

from abm import entry, runs
from abm.outputs.journal import Journal

def interrupt_after(real):
    def wrapped(*args, **kwargs):
        value = real(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)
        return value
    return wrapped

runs.RunResult.write = interrupt_after(runs.RunResult.write)
Journal.remove = interrupt_after(Journal.remove)
sys.argv = ["abm", *sys.argv[1:]]
entry.main()
"""


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_an_interrupt_once_the_folder_is_in_place_leaves_a_complete_command(tmp_path, command):
    """Ctrl-C once the new folder has been renamed into place, before the command marked its
    output complete: the command ends as if it had come later, exit code 0, the folder and nothing
    else in place. It said "interrupted: no results were written to DIR" of the new results in DIR,
    with exit code 130, and a sweep left the runs it had kept beside them."""
    out = tmp_path / "out"
    small = ["--agents", "500", "--days", "5", "--out", str(out)]
    args = ["run", str(SCENARIO), *small, "--replicates", "1"]
    if command == "sweep":
        args = ["sweep", str(SCENARIO), *small, "--replicates", "1", "--sweep", "contacts.community.weight=0.3,0.6"]
    proc = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_AFTER_THE_WRITE, *args], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert "interrupted" not in proc.stderr, proc.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["out"] and (out / MARK).is_file()


@pytest.mark.parametrize(("written", "code"), [(True, 0), (False, 2)])
def test_the_signals_stay_ignored_through_shutdown_once_the_results_are_written(monkeypatch, written, code):
    """After a command that wrote its output, the console script leaves Ctrl-C and SIGTERM
    ignored (SIG_IGN), not to its Python handler: CPython puts such a handler back to the
    default action while the interpreter shuts down, and a signal then ended a complete
    `abm learn` with 130 (2 of about 10 tries with `timeout -s INT` near its end). A command
    that wrote nothing keeps the handler."""
    import signal

    import abm.cli
    from abm import entry, interrupts, invocation

    def command() -> None:
        if written:
            interrupts.results_written()
        raise SystemExit(code)

    monkeypatch.setattr(abm.cli, "main", command)
    monkeypatch.setattr(sys, "argv", ["abm", "learn", "x.yaml"])
    monkeypatch.setattr(invocation, "_command", [])  # entry.main records its command line there
    with pytest.raises(SystemExit) as got:
        entry.main()  # its end of the process raises SystemExit here (conftest._no_fast_exit)
    handlers = {signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}  # put back after the test
    assert got.value.code == code
    assert handlers == ({signal.SIG_IGN} if written else {entry._interrupt})


def test_an_output_path_that_abm_did_not_write_is_never_replaced(tmp_path, monkeypatch):
    """`--out` on a folder of the user's, on a file, or on the working folder: one message, exit
    code 2, before anything runs, and the user's files are untouched. An empty folder, and a
    folder abm wrote, are replaced by the new run."""
    small = ["--agents", "500", "--days", "5", "--replicates", "1"]
    mine = tmp_path / "thesis"
    mine.mkdir()
    (mine / "thesis.tex").write_text("chapter 1")
    result = runner.invoke(app, ["run", str(SCENARIO), *small, "--out", str(mine)])
    assert result.exit_code == 2 and "was not written by abm" in " ".join(result.output.split())
    assert "running" not in result.output
    assert [p.name for p in mine.iterdir()] == ["thesis.tex"] and (mine / "thesis.tex").read_text() == "chapter 1"
    notes = tmp_path / "notes.txt"
    notes.write_text("keep")
    result = runner.invoke(app, ["run", str(SCENARIO), *small, "--out", str(notes)])
    assert result.exit_code == 2 and "is a file" in result.output and notes.read_text() == "keep"
    assert "running" not in result.output
    monkeypatch.chdir(mine)
    for out, why in (
        (".", "give a folder name, not '.'"),
        ("..", "give a folder name, not '..'"),
        (str(tmp_path), "is the working folder or one of its parents"),
    ):
        result = runner.invoke(app, ["run", str(SCENARIO), *small, "--out", out])
        text = " ".join(result.output.split())
        assert result.exit_code == 2 and why in text and "running" not in text, (out, result.output)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "thesis"]
    assert [p.name for p in mine.iterdir()] == ["thesis.tex"]
    # An empty folder is written into ...
    runs = tmp_path / "runs"
    (runs / "a").mkdir(parents=True)
    result = runner.invoke(app, ["run", str(SCENARIO), *small, "--seed", "1", "--out", str(runs / "a")])
    assert result.exit_code == 0, result.output
    written = sorted(p.name for p in (runs / "a").iterdir())
    assert {MARK, "summary.json", "manifest.json", "timeseries.csv", "map.html", "plots"} <= set(written)
    mark = (runs / "a" / MARK).read_text()
    listed = sorted(p.relative_to(runs / "a").as_posix() for p in (runs / "a").rglob("*") if p.name != MARK)
    assert listing(mark)[1:] == [*(f"  {name}" for name in listed), "kind: run"]
    first = (runs / "a" / "timeseries.csv").read_text()
    # ... and an abm output (its mark) is replaced: by this run's files, not added to the old ones.
    result = runner.invoke(app, ["run", str(SCENARIO), *small, "--seed", "2", "--out", str(runs / "a")])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (runs / "a").iterdir()) == written
    assert listing((runs / "a" / MARK).read_text()) == listing(mark)
    assert json.loads((runs / "a" / "summary.json").read_text())["seed"] == 2
    assert json.loads((runs / "a" / "manifest.json").read_text())["seed"] == 2
    assert load_scenario(runs / "a" / "scenario.resolved.yaml").simulation.seed == 2
    assert (runs / "a" / "timeseries.csv").read_text() != first  # another seed, another epidemic
    assert sorted(p.name for p in runs.iterdir()) == ["a"]  # no staging or old folder left behind
    # A comparison may not be written over the folder that holds its runs.
    copy_output(runs / "a", tmp_path / "b")
    result = runner.invoke(app, ["compare", str(runs / "a"), str(tmp_path / "b"), "--out", str(runs)])
    assert result.exit_code == 2 and "is one of the runs or holds one" in " ".join(result.output.split())
    assert sorted(p.name for p in (runs / "a").iterdir()) == written


def test_an_output_path_the_final_rename_could_not_replace_is_refused_before_the_run(
    tmp_path, monkeypatch, small_run_folder
):
    """A symbolic link (the rename would replace the link and leave its folder as it was; a
    dangling one failed with a traceback after the run), a mount point (the rename fails: EBUSY,
    after the run), a name too long for the staging folder beside it (ENAMETOOLONG, after the
    run), and an earlier output that may not be removed (it was left behind as a hidden folder):
    one message, exit code 2, nothing run and nothing changed."""
    from abm.outputs import run_folder

    small = ["--agents", "500", "--days", "5", "--replicates", "1"]
    earlier = copy_output(small_run_folder, tmp_path / "earlier")  # an earlier run, written once
    written = sorted(p.name for p in earlier.iterdir())
    (tmp_path / "latest").symlink_to(earlier)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "mounted").mkdir()
    real_ismount, real_access = os.path.ismount, os.access
    monkeypatch.setattr(os.path, "ismount", lambda p: Path(p) == tmp_path / "mounted" or real_ismount(p))
    (earlier / "plots").chmod(0o555)  # root may write anyway: os.access says what a user would meet
    monkeypatch.setattr(run_folder.os, "access", lambda p, mode: Path(p) != earlier / "plots" and real_access(p, mode))
    before = sorted(p.name for p in tmp_path.iterdir())
    try:
        for out, why in (
            ("latest", f"is a symbolic link (to '{earlier}'), which abm would replace with a folder"),
            ("dangling", "is a symbolic link"),
            ("mounted", "is a mount point, which cannot be replaced"),
            ("a" * 240, "the name is too long (240 characters;"),
            ("earlier", f"cannot be removed (no permission to write in '{earlier / 'plots'}')"),
        ):
            result = runner.invoke(app, ["run", str(SCENARIO), *small, "--out", str(tmp_path / out)])
            text = " ".join(result.output.split())
            assert result.exit_code == 2 and why in text and "running" not in text, (out, text)
            assert sorted(p.name for p in tmp_path.iterdir()) == before
    finally:
        (earlier / "plots").chmod(0o755)
    assert (tmp_path / "latest").is_symlink() and sorted(p.name for p in earlier.iterdir()) == written


def test_a_name_too_long_in_bytes_is_refused_before_the_run(tmp_path):
    """The file system limits a name's bytes, not its characters: 120 accented letters (240 bytes
    in UTF-8) leave no room for the staging folder's longer name beside it. The check counted 120
    characters and let the run start; its staging folder then failed with ENAMETOOLONG (exit 1
    after the run). A name of 120 plain letters still fits."""
    import re

    from abm.outputs.run_folder import OutputFolderError, check_target

    accented = tmp_path / ("é" * 120)
    with pytest.raises(OutputFolderError, match=r"the name is too long \(120 characters, 240 bytes; ") as caught:
        check_target(accented, "run")
    assert re.search(r"names here take at most \d+ bytes\); give a shorter name$", str(caught.value)), caught.value
    assert check_target(tmp_path / ("e" * 120), "run") == tmp_path / ("e" * 120)
    result = runner.invoke(app, ["run", str(SCENARIO), "--agents", "500", "--days", "5", "--out", str(accented)])
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "the name is too long" in text and "running" not in text, text
    assert list(tmp_path.iterdir()) == []


def test_a_scenario_name_must_be_a_folder_name(tmp_path):
    bad = tmp_path / "dot.yaml"
    bad.write_text(f"extends: {SCENARIO}\nname: '..'\n")
    result = runner.invoke(app, ["validate", str(bad)])
    assert result.exit_code == 2 and "name: '..' is not allowed" in result.output


@pytest.mark.parametrize(
    ("text", "sets", "message"),
    [
        ("simulation:\n  days: 30\nsimulation:\n  replicates: 3\n", [], "key 'simulation' appears twice"),
        ("", [], "the file is empty"),
        ("{}", ["simulation.days=true"], "simulation.days: true is not allowed: must be a whole number"),
        ("name: true\n", [], "name: true is not allowed: must be text"),
        ("{}", ["disease.dwell_times=true"], "disease.dwell_times: true is not allowed: must be a list"),
        ("calibration: {parameters: true}\n", [], "calibration.parameters: true is not allowed: must be a mapping"),
        (  # a true/false mixup and the schema's problems, each named once
            "simulation: {days: -3, replicatez: 2}\ndisease: {dwell_times: true}\n",
            [],
            "invalid scenario: disease.dwell_times: true is not allowed: must be a list "
            "simulation.days: -3 is not allowed: must be at least 1 "
            "simulation.replicatez: unknown key; did you mean 'replicates'? allowed keys: days, replicates, seed, "
            "device, threads",
        ),
        (
            "disease:\n  dwell_times:\n    - {from: asymptomatic, to: recovered, distribution: gamma, shape: 2, "
            "scale: 1}\n",
            ["disease.dwell_times[0].shape=true"],
            "disease.dwell_times[0].shape: true is not allowed: must be a number",
        ),
        (
            "{}",
            ["interventions.quarantine={household: 1}"],
            "quarantine.household: 1 is not allowed: write true or false",
        ),
        ("{}", ["contacts.community.mean_contacts=[-1,4,3]"], "contacts.community.mean_contacts[0]: -1 is not allowed"),
        (
            "{}",
            ["seeding.infections.asymptomatic=50000", "population.agents=2000"],
            "seeding.infections: 50000 infections",
        ),
        ("{}", ["seeding.day=90", "simulation.days=60"], "seeding.day: 90 is not within the 60 simulated days"),
        (
            "{}",
            ["interventions.contact_multipliers={closures: [{from_day: 5, settings: [SCHOOLZ]}]}"],
            "unknown settings ['SCHOOLZ']",
        ),
        (
            "{}",
            ["interventions.contact_multipliers={changes: [{from_day: 10, until_day: 5, community: 0.5}]}"],
            "until_day (5) must come after from_day (10)",
        ),
    ],
)
def test_bad_epidemic_scenarios_are_refused_by_validate_and_run(tmp_path, text, sets, message):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    args = [x for s in sets for x in ("--set", s)]
    checked = runner.invoke(app, ["validate", str(path), *args])
    ran = runner.invoke(app, ["run", str(path), *args, "--out", str(tmp_path / "out")])
    for result in (checked, ran):
        assert result.exit_code == 2 and message in " ".join(result.output.split()), result.output
    assert not (tmp_path / "out").exists()


def test_one_occupation_degree_keeps_the_other_defaults(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("contacts:\n  occupation:\n    degree: {SCHOOL: 5}\n")
    degree = load_scenario(path).contacts.occupation.degree
    assert degree["SCHOOL"] == 5 and degree["HEALTHCARE"] == 19.95


def test_errors_caused_by_options_name_the_options(tmp_path):
    result = runner.invoke(app, ["validate", str(SCENARIO), "--set", "interventions.vaccination.strat_day=3"])
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "(with --set interventions.vaccination.strat_day=3)" in text
    assert "allowed keys: enabled, start_day" in text
    result = runner.invoke(app, ["run", str(SCENARIO), "--agents", "0", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "(with --agents 0)" in " ".join(result.output.split())
    # the command line names its own options (abm.run names its arguments: tests/test_edge_cases.py)
    result = runner.invoke(
        app, ["run", str(SCENARIO), "--days", "-1", "--set", "simulation.replicates=1", "--out", str(tmp_path / "o")]
    )
    assert result.exit_code == 2 and "(with --set simulation.replicates=1 --days -1)" in " ".join(result.output.split())
    result = runner.invoke(app, ["run", str(SCENARIO), "--set", "simulation.days", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "error: --set: 'simulation.days' is not allowed" in " ".join(result.output.split())
    assert not (tmp_path / "o").exists()
    result = runner.invoke(
        app, ["sweep", str(SCENARIO), "--sweep", "contacts.community.weight=0.2,0.4", "--set", "foo.bar=1"]
    )
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "(with --set foo.bar=1)" in text and "--sweep contacts" not in text


def test_a_learning_scenario_given_to_run_points_to_learn():
    result = runner.invoke(app, ["run", str(SCENARIOS / "learning/gmm_mapl.yaml")])
    assert result.exit_code == 2 and "run it with `abm learn" in " ".join(result.output.split())


def test_ctrl_c_while_starting_ends_with_one_line(tmp_path):
    """Ctrl-C while the libraries load (or just after): exit code 130, a one-line notice, no traceback."""
    import signal
    import time

    proc = subprocess.Popen(
        [sys.executable, "-m", "abm", "run", str(SCENARIO), "--agents", "1000", "--out", str(tmp_path / "o")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    # 130 from the handler itself, which ends the process while the command line loads
    assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err, err
    assert not (tmp_path / "o").exists()


def test_agents_with_absolute_doses_gets_a_note(tmp_path):
    vacc = SCENARIOS / "reference/vacc.yaml"
    args = ["run", str(vacc), "--agents", "2000", "--days", "3", "--replicates", "1", "--out", str(tmp_path / "v")]
    result = runner.invoke(app, args)
    text = " ".join(result.output.split())
    assert result.exit_code == 0 and "300 doses a day whatever the population: 15,000 per 100,000" in text
    # Vaccination starts on day 10, after the 3 days run: the run goes without it, and says so.
    assert "note: interventions.vaccination starts on day 10, after the 3 simulated days (0..2)" in text
    # ... and it does go without: no dose is given, protects anyone or is billed.
    ts = pd.read_csv(tmp_path / "v" / "timeseries.csv")
    assert (ts[["first_doses", "second_doses", "vaccine_protected"]] == 0).all().all() and len(ts) == 3
    assert pd.read_csv(tmp_path / "v" / "costs.csv").empty
    assert json.loads((tmp_path / "v" / "summary.json").read_text())["total_cost"] == {"mean": 0.0, "sd": None}


def test_agents_with_a_count_of_initial_infections_gets_a_note(tmp_path):
    """The King County scenarios seed 5 agents (seeding.infections), 5 per 100,000 at their 100,000
    agents; --agents kept the 5, so all of the county (--agents 2252782) started from 0.22 per
    100,000 and its vacc_ct outbreak died out (37 infected), with no word on why its figures for
    the county were a thousandth of those of a run of 100,000. --agents now gets a note, as it
    does for a count of daily doses; a seeding per 100,000 keeps its share and gets none."""
    from abm.overrides import resolve
    from abm.scenario_notes import fixed_counts

    county = resolve(SCENARIOS / "king_county/vacc_ct.yaml", {"agents": 2_252_782})
    assert fixed_counts(county, 100_000) == [
        "seeding.infections seeds 5 agents whatever the population: 0.22 per 100,000 at 2,252,782 agents, against 5 "
        "at the file's 100,000 (infections_per_100k scales instead)"
    ]
    args = ["--agents", "2000", "--days", "1", "--replicates", "1"]
    result = runner.invoke(app, ["run", str(SCENARIO), *args, "--out", str(tmp_path / "a")])
    text = " ".join(result.stderr.split())
    assert result.exit_code == 0 and "note: seeding.infections seeds 5 agents whatever the population: 250 " in text
    per_100k = ["--set", "seeding.infections.asymptomatic=0", "--set", "seeding.infections.presymptomatic_mild=0"]
    per_100k += ["--set", "seeding.infections_per_100k={asymptomatic: 50}"]
    result = runner.invoke(app, ["run", str(SCENARIO), *args, *per_100k, "--out", str(tmp_path / "b")])
    assert result.exit_code == 0 and "note:" not in result.stderr, result.stderr
    days = ["--days", "1", "--replicates", "1", "--set", "simulation.threads=1"]
    own = runner.invoke(app, ["validate", str(SCENARIO), "--set", "population.agents=100000"])  # the file's own
    assert own.exit_code == 0 and "note:" not in own.stderr, own.stderr
    # --set population.agents changes the agents as --agents does, and got no note: it gets the same
    result = runner.invoke(
        app, ["run", str(SCENARIO), *days, "--set", "population.agents=4000", "--out", str(tmp_path / "c")]
    )
    assert result.exit_code == 0, result.output
    assert [line for line in result.stderr.splitlines() if line.startswith("note:")] == [
        "note: seeding.infections seeds 5 agents whatever the population: 125 per 100,000 at 4,000 agents, against "
        "5 at the file's 100,000 (infections_per_100k scales instead)"
    ]
    result = runner.invoke(app, ["validate", str(SCENARIO), "--set", "population.agents=4000"])
    assert "note: seeding.infections seeds 5 agents whatever the population: 125 per 100,000" in result.stderr
    # abm sweep --agents says it too, once for all its variants
    swept = ["sweep", str(SCENARIO), *args, "--sweep", "contacts.community.weight=0.5,1", "--out", str(tmp_path / "d")]
    result = runner.invoke(app, swept)
    text = " ".join(result.stderr.split())
    assert result.exit_code == 0, result.output
    assert text.count("note: seeding.infections seeds 5 agents whatever the population: 250 ") == 1


def test_a_setting_only_the_population_refuses_names_the_options(tmp_path):
    """An app adoption the age weights cannot reach is found once the population is built; the
    message names the file with the options that made it so, exit 2, and no folder."""
    args = ["run", str(SCENARIOS / "king_county/vacc_ct.yaml"), "--agents", "2000", "--days", "5"]
    args += ["--set", "interventions.digital_tracing.age_weights=[0,0,1,1,1,1,1,1,1]"]
    args += ["--set", "interventions.digital_tracing.app_adoption=0.95", "--out", str(tmp_path / "o")]
    result = runner.invoke(app, args)
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and not (tmp_path / "o").exists()
    assert "vacc_ct.yaml (with --set interventions.digital_tracing.age_weights=[0,0,1,1,1,1,1,1,1] --set " in text
    assert "--agents 2000 --days 5): interventions.digital_tracing.app_adoption: 0.95 cannot be reached" in text


def test_validate_refuses_an_app_adoption_the_population_cannot_reach(monkeypatch):
    """abm validate finds what the run would find once it has its population (the same message,
    named by the file and its --set options), and builds the population only when age weights
    of 0 put the adoption at stake."""
    import abm.scenario

    src = str(SCENARIOS / "king_county/vacc_ct.yaml")
    zero = "interventions.digital_tracing.age_weights=[0,0,1,1,1,1,1,1,1]"
    args = ["validate", src, "--set", "population.agents=2000", "--set", zero]
    result = runner.invoke(app, [*args, "--set", "interventions.digital_tracing.app_adoption=0.95"])
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "is valid" not in text
    assert f"vacc_ct.yaml (with --set population.agents=2000 --set {zero} --set " in text
    assert "interventions.digital_tracing.app_adoption: 0.95 cannot be reached with these age_weights" in text
    # the two youngest groups hold about a fifth of King County: 0.7 is within reach
    result = runner.invoke(app, [*args, "--set", "interventions.digital_tracing.app_adoption=0.7"])
    assert result.exit_code == 0 and "is valid" in result.output

    def no_population(*_args, **_kwargs):
        raise AssertionError("the population was built")

    monkeypatch.setattr(abm.scenario, "population_of", no_population)
    assert runner.invoke(app, ["validate", src]).exit_code == 0  # weights all above 0: nothing built
    result = runner.invoke(app, [*args, "--set", "interventions.digital_tracing.app_adoption=0.95"])
    assert isinstance(result.exception, AssertionError)  # with weights of 0 it is


def test_a_set_mapping_that_drops_the_files_keys_gets_a_note():
    """--set KEY={...} replaces the mapping (extends merges): the keys the file gave there and the
    value leaves out are named; setting one entry, or a mapping that keeps every key, gets none."""
    src = str(SCENARIOS / "reference/ct_app70.yaml")  # app_adoption 0.7, uniform, among others
    result = runner.invoke(app, ["validate", src, "--set", "interventions.digital_tracing={compliance: 0.5}"])
    text = " ".join(result.output.split())
    assert result.exit_code == 0 and "is valid" in text
    assert "note: --set interventions.digital_tracing={compliance: 0.5} replaces interventions.digital_tracing" in text
    assert "so app_adoption, age_stratified," in text and "write --set interventions.digital_tracing.NAME=VALUE" in text
    for item in ("interventions.digital_tracing.compliance=0.5", "simulation={days: 30, replicates: 10, seed: 1234}"):
        result = runner.invoke(app, ["validate", src, "--set", item])
        assert result.exit_code == 0 and "note:" not in result.output, result.output


def test_a_dose_rate_that_daily_doses_replaces_gets_a_note():
    """daily_doses replaces daily_doses_per_100k: a rate given with --set (or by a file) on a
    scenario that gives daily_doses was not used, without a word; it is named, with the way to
    use it. A scenario that gives daily_doses alone gets no such note."""
    src = str(SCENARIOS / "reference/vacc_budget.yaml")  # daily_doses: 124
    result = runner.invoke(app, ["validate", src, "--set", "interventions.vaccination.daily_doses_per_100k=500"])
    text = " ".join(result.output.split())
    assert result.exit_code == 0 and "is valid" in text
    assert (
        "note: interventions.vaccination gives daily_doses (124) and daily_doses_per_100k (500): daily_doses "
        "replaces the rate, which is not used; to use the rate, set interventions.vaccination.daily_doses=null"
    ) in text
    rate_in_use = ["--set", "interventions.vaccination.daily_doses=null"]
    rate_in_use += ["--set", "interventions.vaccination.daily_doses_per_100k=500"]
    for sets in ([], rate_in_use):
        result = runner.invoke(app, ["validate", src, *sets])
        assert result.exit_code == 0 and "note:" not in result.output, result.output


def test_a_residents_table_on_the_reference_population_gets_a_note():
    """The reference population has no long-term-care residents, so a residents' disease table
    there changes nothing: validate says so (run, sweep and calibrate print the same notes). A King
    County scenario, whose population has residents, gets no such note."""
    table = yaml.safe_dump(DiseaseConfig().branching[8], default_flow_style=True).strip()
    item = f"disease.long_term_care_branching={table}"
    result = runner.invoke(app, ["validate", str(SCENARIOS / "reference/ni.yaml"), "--set", item])
    text = " ".join(result.output.split())
    assert result.exit_code == 0 and "is valid" in text
    assert (
        "note: disease.long_term_care_branching is not used: the reference population (population.kind: reference) "
        "has no long-term-care residents"
    ) in text
    result = runner.invoke(app, ["validate", str(SCENARIOS / "king_county/ni.yaml"), "--set", item])
    assert result.exit_code == 0 and "note:" not in result.output, result.output


def test_sweep_variants_that_resolve_to_the_same_scenario_get_a_note(capsys):
    """A swept rate that daily_doses replaces gave variants with the same results, and abm sweep
    said nothing: a table that read as 'the rate changes nothing'. Variants that resolve to the
    same scenario are named; a sweep whose variants differ gets no such note."""
    from abm.cli import print_notes
    from abm.scenario_notes import same_variants
    from abm.sweep import plan

    src = SCENARIOS / "reference/vacc_budget.yaml"  # daily_doses: 124
    rates = "interventions.vaccination.daily_doses_per_100k=300,1000"
    print_notes(same_variants(plan(src, [rates], replicates=1, agents=2000, days=5)))
    text = " ".join(capsys.readouterr().err.split())
    assert (
        "note: the variants (daily_doses_per_100k=300) and (daily_doses_per_100k=1000) resolve to the same scenario"
    ) in text
    print_notes(
        same_variants(
            plan(src, [rates], replicates=1, agents=2000, days=5, sets=["interventions.vaccination.daily_doses=null"])
        )
    )
    print_notes(
        same_variants(plan(src, ["interventions.vaccination.daily_doses=100,200"], replicates=1, agents=2000, days=5))
    )
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("file", "sweep", "sets", "labels"),
    [
        (  # a setting of an intervention that is off
            "king_county/vacc.yaml",
            "interventions.vaccination.start_day=10,30",
            ["interventions.vaccination.enabled=false"],
            "(start_day=10) and (start_day=30)",
        ),
        (  # ignored by runs; its windows cover the run's 7 days, as every command checks
            "king_county/calibrate_2020.yaml",
            "calibration.trials=5,10",
            [
                "calibration.fit_window=[2020-02-01, 2020-02-07]",
                "calibration.holdout_window=null",
                "calibration.parameters={disease.transmission_rate: {low: 2.0, high: 8.0}}",
            ],
            "(trials=5) and (trials=10)",
        ),
        ("king_county/ni.yaml", "description=a,b", [], "(description=a) and (description=b)"),  # changes no result
        ("king_county/ni.yaml", "outputs.map_days=[1],[2]", [], "(map_days=[1]) and (map_days=[2])"),  # no map drawn
    ],
)
def test_sweep_variants_that_differ_only_where_runs_do_not_read_get_the_note(capsys, file, sweep, sets, labels):
    """Variants that differ only in what no sweep's run reads (a disabled intervention's settings,
    the calibration section, the description, the map's days) have the same results: they get the
    note too (they got none, and the table read as 'the value changes nothing')."""
    from abm.cli import print_notes
    from abm.scenario_notes import same_variants
    from abm.sweep import plan

    print_notes(same_variants(plan(SCENARIOS / file, [sweep], replicates=1, agents=2000, days=7, sets=sets)))
    assert (f"note: the variants {labels} resolve to the same scenario") in " ".join(capsys.readouterr().err.split())
    vacc = SCENARIOS / "king_county/vacc.yaml"
    print_notes(
        same_variants(plan(vacc, ["interventions.vaccination.start_day=10,30"], replicates=1, agents=2000, days=5))
    )
    assert capsys.readouterr().err == ""  # enabled, the start day matters


def test_a_swept_mapping_that_drops_the_files_keys_gets_the_note_set_gets(capsys):
    """--set interventions.vaccination={start_day: 10} on vacc_budget.yaml (daily_doses_per_100k:
    124) notes that the mapping replaces the section and drops the budget's rate; the same mapping
    swept dropped it without a word (every variant ran at the default 300 doses per 100,000). The
    values that drop the same keys share a note; a value that keeps them, or a key, gets none."""
    from abm.cli import note_unapplied_settings
    from abm.sweep import parse_axes, plan

    src = SCENARIOS / "king_county/vacc_budget.yaml"
    swept = "interventions.vaccination={start_day: 10},{start_day: 20},{daily_doses_per_100k: 50, start_day: 5}"
    note_unapplied_settings(src, None, parse_axes([swept]))
    text = " ".join(capsys.readouterr().err.split())
    assert text == (
        "note: --sweep interventions.vaccination={start_day: 10},{start_day: 20} replaces interventions.vaccination "
        f"as a whole in its variants, so daily_doses_per_100k given by {src} is dropped; to change one entry and "
        "keep the others, write --sweep interventions.vaccination.NAME=VALUE1,VALUE2,..."
    )
    note_unapplied_settings(src, None, parse_axes(["interventions.vaccination.start_day=10,20"]))
    note_unapplied_settings(src, None, parse_axes(["interventions.vaccination={daily_doses_per_100k: 50}"]))
    assert capsys.readouterr().err == ""
    variants = plan(src, [swept], replicates=1, agents=2000, days=5).variants  # as noted: the default rate
    assert [sc.interventions.vaccination.daily_doses_per_100k for sc in variants] == [300.0, 300.0, 50.0]


def test_a_sweep_names_the_variants_in_which_an_intervention_does_nothing(capsys):
    """A note that holds for some of a sweep's variants only names them: a swept start day after
    the run's end was noted as 'it does nothing in this run', without saying which variant; a note
    for every variant, or for a run, names none."""
    from abm.cli import print_notes
    from abm.scenario_notes import by_variant, idle
    from abm.sweep import plan

    src = SCENARIOS / "king_county/vacc.yaml"
    sp = plan(src, ["interventions.vaccination.start_day=2,8,9"], replicates=1, agents=2000, days=5)
    labels = [sp.label(v, short=True) for v in range(len(sp.variants))]
    print_notes(by_variant([idle(sc) for sc in sp.variants], labels))
    lines = capsys.readouterr().err.splitlines()
    suffix = "simulated days (0..4): it does nothing in this run"
    assert lines == [
        f"note: interventions.vaccination starts on day 8, after the 5 {suffix} (variant start_day=8)",
        f"note: interventions.vaccination starts on day 9, after the 5 {suffix} (variant start_day=9)",
    ]
    every = plan(src, ["contacts.community.weight=0.5,0.6"], replicates=1, agents=2000, days=5)
    print_notes(by_variant([idle(sc) for sc in every.variants], ["weight=0.5", "weight=0.6"]))
    print_notes(by_variant([idle(sc) for sc in every.variants[:1]]))
    assert (
        capsys.readouterr().err.splitlines()
        == [f"note: interventions.vaccination starts on day 10, after the 5 {suffix}"] * 2
    )


def test_a_seeding_per_100k_that_rounds_to_none_says_so_in_numbers():
    """infections_per_100k is rounded half up at the run's agents: 3 per 100,000 of 2,000 agents
    is 0.06, so that stage started empty without a word while another stage was seeded, and a
    seeding that rounded to none in every stage said only 'rounded half up'. Each now names the
    rate, the agents it comes to and the fewest agents that seed one (50,000 / 3 = 16,667)."""
    per_100k = ["--set", "seeding.infections.asymptomatic=0", "--set", "seeding.infections.presymptomatic_mild=0"]
    per_100k += ["--set", "population.agents=2000"]
    notes = {}
    for rates in ("{asymptomatic: 3, presymptomatic_mild: 50}", "{asymptomatic: 3, presymptomatic_mild: 5}"):
        result = runner.invoke(
            app, ["validate", str(SCENARIO), *per_100k, "--set", f"seeding.infections_per_100k={rates}"]
        )
        assert result.exit_code == 0, result.output
        notes[rates] = [line for line in result.stderr.splitlines() if line.startswith("note:")]
    assert notes["{asymptomatic: 3, presymptomatic_mild: 50}"] == [
        "note: seeding.infections_per_100k seeds no asymptomatic agent at 2,000 agents: 3 per 100,000 is 0.06 agents, "
        "rounded half up to 0; 16,667 agents or more seed one"
    ]
    assert notes["{asymptomatic: 3, presymptomatic_mild: 5}"] == [
        "note: seeding.infections_per_100k seeds no one at 2,000 agents (asymptomatic: 3 per 100,000 is 0.06 agents, "
        "rounded half up to 0; 16,667 agents or more seed one; presymptomatic_mild: 5 per 100,000 is 0.1 agents, "
        "rounded half up to 0; 10,000 agents or more seed one), so no one is infected in this run (only the "
        "interventions' own counts and costs, such as doses, are recorded)"
    ]
    three = [*per_100k[:4], "--set", "seeding.infections_per_100k={asymptomatic: 3}"]
    for agents, seeded in ((16_666, False), (16_667, True)):  # 0.49998 agents rounds to none, 0.50001 to one
        result = runner.invoke(app, ["validate", str(SCENARIO), *three, "--set", f"population.agents={agents}"])
        assert result.exit_code == 0 and ("seeds no one" not in result.stderr) == seeded, result.stderr


def test_a_run_that_seeds_no_one_gets_a_note(tmp_path):
    """No initial infections is allowed (a run of vaccination costs alone) but named; a run with
    seeds has no such note."""
    base = ["run", str(SCENARIOS / "king_county/no_intervention.yaml"), "--agents", "2000", "--days", "3"]
    base += ["--replicates", "1"]
    none = runner.invoke(app, [*base, "--set", "seeding.infections={}", "--out", str(tmp_path / "none")])
    text = " ".join(none.output.split())
    assert none.exit_code == 0 and "note: seeding.infections seeds no one, so no one is infected" in text
    summary = json.loads((tmp_path / "none" / "summary.json").read_text(encoding="utf-8"))
    assert summary["cumulative_infected"]["mean"] == 0
    seeded = runner.invoke(app, [*base, "--out", str(tmp_path / "seeded")])
    assert seeded.exit_code == 0 and "seeds no one" not in seeded.output


def test_interventions_that_could_never_act_are_named(tmp_path):
    """Tracing and quarantine act on positive tests: with testing off they do nothing, and a run
    says so (as a sweep's variant without testing may well be meant); contact changes that all
    start after the last day get a note."""
    ct = SCENARIOS / "king_county/vacc_ct.yaml"
    out = ["--agents", "1000", "--days", "20", "--replicates", "1", "--out", str(tmp_path / "ct")]
    result = runner.invoke(app, ["run", str(ct), *out, "--set", "interventions.testing=null"])
    text = " ".join(result.output.split())
    assert result.exit_code == 0 and (tmp_path / "ct" / "summary.json").is_file()
    for name in ("quarantine", "digital_tracing", "manual_tracing"):
        assert f"interventions.{name} acts on the results of testing, which is off: it does nothing" in text
    from abm.sweep import plan

    sq = SCENARIOS / "king_county/sq.yaml"
    assert len(plan(sq, ["interventions.testing.enabled=true,false"]).variants) == 2  # a sweep may turn it off
    late = "interventions.contact_multipliers.changes=[{from_day: 25, household: 0.5}, {from_day: 40}]"
    result = runner.invoke(app, ["run", str(SCENARIO), *out, "--set", late])
    text = " ".join(result.output.split())
    assert result.exit_code == 0 and "interventions.contact_multipliers starts on day 25, after the 20" in text
    result = runner.invoke(app, ["validate", str(SCENARIO), "--set", "simulation.days=20", "--set", late])
    assert result.exit_code == 0 and "contact_multipliers starts on day 25" in " ".join(result.output.split())
    early = "interventions.contact_multipliers.changes=[{from_day: 19, household: 0.5}, {from_day: 40}]"
    result = runner.invoke(app, ["run", str(SCENARIO), *out, "--set", early])
    assert result.exit_code == 0 and "contact_multipliers starts" not in result.output


def test_a_name_is_not_inherited_from_the_file_extended(tmp_path):
    base = SCENARIOS / "reference/base.yaml"
    assert load_scenario(base).name == "reference_base"  # not 'base', as the King County base.yaml is named
    child = tmp_path / "my_study.yaml"
    child.write_text(f"extends: {base}\n")
    assert load_scenario(child).name == "my_study"
    # A file name that is no folder name is refused as the name it gives, not blamed on the base
    # (which has a name of its own, not inherited).
    spaced = tmp_path / "my stüdy.yaml"
    spaced.write_text(f"extends: {base}\n")
    result = runner.invoke(app, ["validate", str(spaced)])
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "name: 'my stüdy' is not allowed" in text, text
    assert "named after its file name" in text and "set in" not in text


def test_a_killed_writers_staging_folder_is_removed_by_the_next_write(tmp_path):
    """A process killed outright (SIGKILL) leaves its hidden ``.NAME.partial-HOST-PID`` folder;
    the next write of NAME on the same machine removes it when no process PID exists, and keeps
    a live one's and any other machine's (a shared disk: its PIDs mean nothing here)."""
    import os
    import socket

    from abm.outputs.run_folder import atomic_folder

    host = socket.gethostname().replace("-", "_")
    dead = tmp_path / f".out.partial-{host}-999999999"  # above any Linux pid_max: no such process
    live = tmp_path / f".out.partial-{host}-{os.getppid()}"
    elsewhere = tmp_path / ".out.partial-othernode-999999999"
    for stale in (dead, live, elsewhere):
        stale.mkdir()
        (stale / "timeseries.csv").write_text("half")
    with atomic_folder(tmp_path / "out", "run") as tmp:
        (tmp / "summary.json").write_text("{}")
    assert not dead.exists() and live.exists() and elsewhere.exists()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [".abm-output", "summary.json"]


@pytest.mark.parametrize("delay", [1.0, 2.5])
def test_ctrl_c_at_any_moment_of_abm_learn_says_so(tmp_path, delay):
    """Ctrl-C while the learning libraries load (the moment that used to exit silently) or while
    the data are built: one line, exit code 130, no folder. Both moments once ended by the signal
    (-2) after their line: CPython marks an interrupt unhandled when it lands in code an extension
    runs through PyRun_*, even once caught, and kills itself at exit (1 of 24 tries at 0.3-2.6 s
    before abm.entry leaves with os._exit; 0 of 24 after). And once by SIGABRT (-6, in CI), when
    it landed in Python code that torch's distributed package runs from C++ as it loads; an
    interrupt during an import now waits for the import to finish (tests/test_entry.py)."""
    import signal
    import time

    scenario = SCENARIO.parents[1] / "learning/gmm_fedavg_private.yaml"
    out = tmp_path / "learn"
    proc = subprocess.Popen(
        [sys.executable, "-m", "abm", "learn", str(scenario), "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    # "running ..." once the scenario is read, a line per protocol that finished (on a fast machine
    # local-only's 15 rounds may end within 2.5 s), then the interrupt's line, and nothing else.
    lines = err.splitlines()
    # On a loaded machine the signal may come before abm has started at all (1 s of a busy CI run):
    # then the line says so, and it is the only one.
    starting = lines == ["interrupted while starting; nothing was run"]
    assert starting or lines[-1].startswith("interrupted: no results were written to"), err
    assert len(lines) == 1 or lines[0].startswith("running gmm_fedavg_private: 4 participants"), err
    assert all(re.fullmatch(r"[a-z_]+: [\d,]+ rounds, mean score [\d.]+", line) for line in lines[1:-1]), err
    assert list(tmp_path.iterdir()) == []


def test_version_names_the_installed_package_and_torch():
    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0
    assert res.output.strip() == f"abm {version('abm-epidemic')} (torch {torch.__version__})"


def test_contact_tests_that_no_test_type_takes_get_a_note():
    """``test_contacts`` asks traced contacts to test, but the default RT-PCR is given to the
    symptomatic only: without a test given to traced contacts the requests go untaken, and
    validate says so for each tracing; a test given to them silences the note."""
    ct = str(SCENARIOS / "king_county/ct.yaml")
    asks = ["--set", "interventions.digital_tracing.test_contacts=true"]
    asks += ["--set", "interventions.manual_tracing.test_contacts=true"]
    result = runner.invoke(app, ["validate", ct, *asks])
    text = " ".join(result.output.split())
    assert result.exit_code == 0
    for name in ("digital_tracing", "manual_tracing"):
        assert f"interventions.{name}.test_contacts is true, but no test in interventions.testing.tests" in text
    traced = "interventions.testing.tests=[{name: rt_pcr, sensitivity: 0.99, result_delay_days: [1], "
    traced += "result_delay_probs: [1], given_to: [symptomatic, traced]}]"
    result = runner.invoke(app, ["validate", ct, *asks, "--set", traced])
    assert result.exit_code == 0 and "test_contacts is true" not in result.output
    assert "test_contacts is true" not in runner.invoke(app, ["validate", ct]).output


def test_run_and_validate_help_say_what_file_is_how_set_reads_and_the_exit_codes():
    """The FILE argument's own help text is not shown by typer 0.20 with click 8.5 (click's
    Parameter sets help after typer does), so the commands' texts say what FILE is."""
    run_help = " ".join(runner.invoke(app, ["run", "--help"]).output.replace("│", " ").split())
    assert "FILE is a scenario YAML file" in run_help
    assert "the value read as YAML" in run_help and "disease.dwell_times[0].shape=2" in run_help
    codes = (
        "Exit code 0 when done; 2 for bad input, a run this machine's memory cannot hold included (nothing is "
        "written); 130 after Ctrl-C, 143 after SIGTERM"
    )
    assert codes in run_help
    assert "cpu, cuda or cuda:N" in run_help
    validate_help = " ".join(runner.invoke(app, ["validate", "--help"]).output.replace("│", " ").split())
    assert "FILE is an epidemic scenario" in validate_help
    assert "Exit code 0 when it is valid, 2 when it is not." in validate_help
    learn_help = " ".join(runner.invoke(app, ["learn", "--help"]).output.replace("│", " ").split())
    assert (
        "Exit code 0 when done; 2 for bad input, sizes this machine's memory cannot hold included (nothing is "
        "written); 130 after Ctrl-C, 143 after SIGTERM (nothing is written, an earlier report is kept); 1 when the "
        "run fails (a Flower client ends or fails, a secure-aggregation round cannot be summed, an installed "
        "plug-in of a private calibration's model scenario fails: one line naming it, then its traceback)"
    ) in learn_help
    # learn's --set names learning keys, not an epidemic scenario's
    assert "protocols[0].params.lr=0.1); repeatable" in learn_help and "simulation.days" not in learn_help


@pytest.mark.parametrize(
    ("command", "says"),
    [
        (
            "sweep",
            [
                "FILE is a scenario YAML file",
                "runs at once",
                "the tables do not depend on it",
                "sweep.json and report.html",
            ],
        ),
        (
            "calibrate",
            [
                "FILE is a scenario YAML file with a calibration section",
                "the trials do not depend on it",
                "calibration.json (the same values, for programs) and report.html",
            ],
        ),
        ("learn", ["FILE is a learning scenario", "or a private-calibration scenario", "report.md and report.html"]),
    ],
)
def test_sweep_calibrate_and_learn_help_say_what_file_is(command, says):
    """As for `abm run`, the text says what FILE is (typer shows only PATH [required]); --workers
    says that the results do not depend on it; sweep's and calibrate's name the report.html they write."""
    text = " ".join(runner.invoke(app, [command, "--help"]).output.replace("│", " ").split())
    for words in says:
        assert words in text, words


def test_an_interrupt_while_a_run_folder_replaces_an_earlier_one_leaves_one_or_the_other(tmp_path, monkeypatch):
    """Between the two renames (the earlier folder moved aside, the new one not yet in place) the
    earlier one is put back; while the earlier one is removed, the new one stays and the command
    goes on (it once said "no results were written" with the new results in place, and left a
    hidden .NAME.old-PID folder that nothing removed)."""
    import socket

    from abm.outputs import run_folder
    from abm.outputs.run_folder import atomic_folder

    def write(content: str) -> None:
        with atomic_folder(tmp_path / "out", "run") as tmp:
            (tmp / "summary.json").write_text(content)

    write("earlier")
    renames = []
    real_rename = Path.rename

    def interrupted_second_rename(self, target):
        renames.append(self.name)
        if len(renames) == 2:
            raise KeyboardInterrupt
        return real_rename(self, target)

    monkeypatch.setattr(Path, "rename", interrupted_second_rename)
    with pytest.raises(KeyboardInterrupt):
        write("new")
    monkeypatch.setattr(Path, "rename", real_rename)
    assert (tmp_path / "out" / "summary.json").read_text() == "earlier"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]

    real_rmtree = run_folder.shutil.rmtree

    def interrupted_removal(path, *args, **kwargs):
        if str(path).endswith("-old"):
            raise KeyboardInterrupt
        return real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(run_folder.shutil, "rmtree", interrupted_removal)
    write("new")  # no KeyboardInterrupt: the output is complete
    monkeypatch.setattr(run_folder.shutil, "rmtree", real_rmtree)
    assert (tmp_path / "out" / "summary.json").read_text() == "new"
    host = socket.gethostname().replace("-", "_")
    left = tmp_path / f".out.partial-{host}-{os.getpid()}-old"
    assert sorted(p.name for p in tmp_path.iterdir()) == [left.name, "out"]
    left.rename(tmp_path / f".out.partial-{host}-999999999-old")  # its process has ended
    write("third")
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_tracing_without_quarantine_gets_a_note():
    """Tracing's notices ask contacts to quarantine: with quarantine off they change nothing
    (unless they lead to tests), and validate says so for each tracing."""
    ct = str(SCENARIOS / "king_county/ct.yaml")
    off = ["--set", "interventions.quarantine.enabled=false"]
    text = " ".join(runner.invoke(app, ["validate", ct, *off]).output.split())
    for name in ("digital_tracing", "manual_tracing"):
        assert f"interventions.{name} notifies contacts to quarantine, but interventions.quarantine is off" in text
    assert "interventions.quarantine is off" not in runner.invoke(app, ["validate", ct]).output
    # Notices that lead to a test given to traced contacts still do something.
    traced = "interventions.testing.tests=[{name: rt_pcr, sensitivity: 0.99, result_delay_days: [1], "
    traced += "result_delay_probs: [1], given_to: [symptomatic, traced]}]"
    asks = ["--set", "interventions.digital_tracing.test_contacts=true", "--set", traced]
    text = " ".join(runner.invoke(app, ["validate", ct, *off, *asks]).output.split())
    assert "interventions.digital_tracing notifies" not in text and "interventions.manual_tracing notifies" in text


def test_the_console_summary_keeps_small_means(monkeypatch, tmp_path):
    """A mean of 0.33 deaths over 3 replicates printed as "0 ± 1", which reads as no deaths."""
    import io

    from rich.console import Console

    from abm import cli

    buffer = io.StringIO()
    monkeypatch.setattr(cli, "out_console", Console(file=buffer, width=200, markup=False))
    peak = {"value": 0.0, "day": None, "per_100k": 0.0, "at_end": False}
    summary = {
        "scenario": "sq", "agents": 10_000, "days": 120, "replicates": 3, "region_population": 2_252_782,
        "cumulative_infected": {"mean": 138.0, "sd": 111.2, "share": 0.0138},
        "peak_hospitalized": peak, "peak_hospital_occupancy": peak,
        "hospital_capacity": {"beds_per_100k": 55.0, "beds": 5.5, "days_over_capacity": 0},
        "peak_icu": {"value": 1 / 3, "day": 40, "per_100k": 3.3, "at_end": False},
        "icu_capacity": {"beds_per_100k": 6.1, "beds": 0.61, "days_over_capacity": 2, "replicates_over_capacity": 1},
        "hospitalizations": {"mean": 2 / 3, "sd": 0.5774},
        "deaths": {"mean": 1 / 3, "sd": 0.5774}, "total_cost": {"mean": 458.3, "sd": 378.9},
    }  # fmt: skip

    def rows() -> dict[str, str]:
        cli.print_summary(summary, 0.3, tmp_path)
        lines = buffer.getvalue().splitlines()
        buffer.seek(0)
        buffer.truncate()
        return {line.split("│")[1].strip(): line.split("│")[2].strip() for line in lines if line.count("│") == 3}

    shown = rows()
    assert shown["deaths"] == "0.33 ± 0.58" and shown["hospitalizations (admissions)"] == "0.67 ± 0.58"
    assert shown["total cost ($)"] == "458 ± 379" and shown["cumulative infected"] == "138 ± 111 (1.4%)"
    assert shown["hospital capacity (beds)"] == "5.5 (55/100k)" and shown["days over capacity (mean curve)"] == "0"
    assert shown["peak ICU beds"] == "0.3 on day 40 (3/100k)"
    assert shown["ICU capacity (beds)"] == "0.6 (6.1/100k)"
    assert shown["days over ICU capacity (mean curve)"] == "2 (1 of 3 replicates went over)"
    summary["deaths"] = {"mean": 0.0, "sd": 0.0}
    summary["icu_capacity"] = None  # a region without an ICU figure: no ICU capacity rows
    shown = rows()
    assert shown["deaths"] == "0 ± 0"
    assert "ICU capacity (beds)" not in shown and "days over ICU capacity (mean curve)" not in shown


@pytest.mark.parametrize("escape", ["typer_exit_130", "keyboard_interrupt", "reported"])
def test_an_interrupt_outside_a_commands_own_handling_is_said_once(monkeypatch, capsys, escape):
    """Ctrl-C 0.1-0.2 s into `abm learn` (Typer reading the options, before the command's own
    handling) ended with exit code 130 and nothing on stderr: Typer turns a KeyboardInterrupt into
    a silent exit 130 (and one while it builds the commands escaped as a traceback). Each now says
    one line; an interrupt the command reported itself is not said twice."""
    import abm.cli as cli
    from abm import interrupts

    def app() -> None:
        if escape == "keyboard_interrupt":
            raise KeyboardInterrupt
        if escape == "reported":
            interrupts.report("interrupted: no results were written to runs/x")
        raise SystemExit(130)

    monkeypatch.setattr(cli, "app", app)
    with pytest.raises(SystemExit) as exc:
        cli.main()
    assert exc.value.code == 130
    said = "interrupted: no results were written to runs/x" if escape == "reported" else interrupts.STARTING
    assert capsys.readouterr().err == said + "\n"


def test_files_are_utf8_whatever_the_locale(tmp_path):
    """Under LC_ALL=C (an ASCII locale: containers, some CI machines) a scenario with a non-ASCII
    description and a byte-order mark was refused as "not a text file", and a calibration series
    saved with a byte-order mark (as spreadsheets do) could not be read: files were read in the
    locale's encoding. Scenarios, series and outputs are UTF-8 now, and the resolved scenario
    keeps the description as written."""
    description = "Comté de King — test"
    scenario = tmp_path / "bom.yaml"
    scenario.write_bytes(
        b"\xef\xbb\xbf" + f'extends: {SCENARIO}\nname: bom_test\ndescription: "{description}"\n'.encode()
    )
    series = tmp_path / "series.csv"
    series.write_bytes(b"\xef\xbb\xbfdate,hospital_admissions\n2020-03-01,3\n2020-03-02,4\n")
    env = {**os.environ, "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    out = tmp_path / "out"
    run = [sys.executable, "-m", "abm", "run", str(scenario), "--agents", "500", "--days", "3", "--replicates", "1"]
    proc = subprocess.run([*run, "--out", str(out)], capture_output=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    resolved = (out / "scenario.resolved.yaml").read_text(encoding="utf-8")
    assert f"description: {description}\n" in resolved
    read = f"from abm.calibration.observed import read_dated_table as r; print(list(r({str(series)!r}).columns))"
    proc = subprocess.run([sys.executable, "-c", read], capture_output=True, env=env, text=True, timeout=120)
    assert proc.stdout.strip() == "['date', 'hospital_admissions']", proc.stderr


def test_a_contact_change_after_the_run_is_named(tmp_path):
    """A closure within the run and a change and a closure after it: the run notes the two that
    do nothing (it noted only a contact_multipliers whose every part started after the run)."""
    scenario = SCENARIOS / "king_county/no_intervention.yaml"
    sets = [
        "interventions.contact_multipliers.closures=[{from_day: 1}, {from_day: 40}]",
        "interventions.contact_multipliers.changes=[{from_day: 30, community: 0.5}]",
    ]
    args = ["run", str(scenario), "--agents", "2000", "--days", "5", "--replicates", "1", "--out", str(tmp_path / "r")]
    result = runner.invoke(app, [*args, *(x for s in sets for x in ("--set", s))])
    text = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    suffix = "after the 5 simulated days (0..4): it does nothing in this run"
    assert f"note: interventions.contact_multipliers.changes[0] starts on day 30, {suffix}" in text
    assert f"note: interventions.contact_multipliers.closures[1] starts on day 40, {suffix}" in text
    assert "closures[0]" not in text


def test_more_local_workers_than_cpus_gets_a_note(monkeypatch, capsys):
    """--workers above the CPUs this process may use is allowed (the results do not depend on it)
    but named; as many as the CPUs, or Ray's workers (another machine's CPUs), are not."""
    import abm.parallel
    from abm.cli import note_workers

    monkeypatch.setattr(abm.parallel, "usable_cpus", lambda: 2)
    note_workers(3, "local")
    assert "note: --workers 3 is more than the 2 CPUs this process may use" in " ".join(capsys.readouterr().err.split())
    for workers, backend in ((2, "local"), (None, "local"), (3, "ray")):
        note_workers(workers, backend)
        assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("setting", "note"),
    [
        (
            "interventions.contact_multipliers={}",
            "note: interventions.contact_multipliers has no changes, series or closures: it does nothing in this run",
        ),
        (
            "interventions.vaccination.daily_doses=0",
            "note: interventions.vaccination.daily_doses is 0: no dose is given, so it does nothing in this run",
        ),
        (
            "interventions.vaccination.daily_doses_per_100k=0",
            "note: interventions.vaccination.daily_doses_per_100k is 0: no dose is given, so it does nothing in this "
            "run",
        ),
    ],
)
def test_an_intervention_that_cannot_act_gets_a_note(setting, note):
    """An empty contact_multipliers and a vaccination without doses were accepted and did nothing
    without a word (as one that starts after the last day gets a note); validate and run say so."""
    scenario = SCENARIOS / "king_county/no_intervention.yaml"
    result = runner.invoke(app, ["validate", str(scenario), "--set", setting])
    assert result.exit_code == 0, result.output
    assert note in " ".join(result.output.split())


@pytest.mark.parametrize(
    ("setting", "note"),
    [
        (
            "interventions.testing.tests[0].daily_capacity=0",
            "note: interventions.testing: every test's daily_capacity is 0: no one is tested, so it does nothing in "
            "this run, and neither do interventions.quarantine, interventions.digital_tracing, "
            "interventions.manual_tracing, which act on its results",
        ),
        (
            "interventions.testing.tests=[{name: rt_pcr, sensitivity: 0.9, result_delay_days: [1], "
            "result_delay_probs: [1]}, {name: rapid, sensitivity: 0.8, result_delay_days: [0], "
            "result_delay_probs: [1], daily_capacity: 0}]",
            "note: interventions.testing.tests[1].daily_capacity is 0: the rapid test is given to no one",
        ),
        (
            "interventions.digital_tracing.app_adoption=0",
            "note: interventions.digital_tracing.app_adoption is 0: no one has the app, so it does nothing in this run",
        ),
        (  # it said nothing, as for app_adoption 0 before
            "interventions.manual_tracing.daily_capacity=0",
            "note: interventions.manual_tracing.daily_capacity is 0: no index case is interviewed, so it does nothing "
            "in this run",
        ),
    ],
)
def test_testing_without_capacity_and_tracing_without_app_users_get_a_note(setting, note):
    """A testing of daily capacity 0 for every test (no one tested: quarantine and tracing, which
    act on its results, do nothing either), one test type of capacity 0, and digital tracing with
    no app users were accepted without a word; validate says so, and gives no other note."""
    result = runner.invoke(app, ["validate", str(SCENARIOS / "king_county/vacc_ct.yaml"), "--set", setting])
    assert result.exit_code == 0, result.output
    notes = [line for line in result.output.splitlines() if not line.startswith(" ")]
    assert " ".join(result.output.split()).startswith(note + " ok "), result.output
    assert sum(line.startswith("note: ") for line in notes) == 1, result.output


class FakeTime:
    """A clock a test sets (``now``), and a timer that runs what is due when the clock is set."""

    def __init__(self) -> None:
        self.t = 0.0
        self.due: list[tuple[float, object]] = []

    def __call__(self) -> float:
        return self.t

    def later(self, seconds, action):
        entry = (self.t + seconds, action)
        self.due.append(entry)
        return lambda: self.due.remove(entry) if entry in self.due else None

    def set(self, t: float) -> None:
        for entry in sorted((e for e in self.due if e[0] <= t), key=lambda e: e[0]):
            self.due.remove(entry)
            self.t = entry[0]
            entry[1]()
        self.t = t


def test_progress_off_a_terminal_is_a_line_a_tenth_and_at_most_one_in_30_s(monkeypatch, capsys):
    """Where stderr is no terminal (a log file), a loop (a run's days, a sweep's runs) gets a line
    when another tenth of it is done and 30 s have passed since its last line (or its first step),
    with the time so far and about how long is left from the pace of the last 10 steps; none in
    the command's first 5 s; one at the end once it said any; a step told twice (a continued
    sweep) is said once. It used to be a line every tenth, a run of a second included."""
    from abm.progress_lines import LogLines

    said: list[str] = []
    clock = FakeTime()
    lines = LogLines(said.append, now=clock, later=clock.later)
    show = lines.counter("days")
    for day in range(1, 31):  # 4 s a day from day 1 (at 4 s): a line every 9 days (36 s)
        clock.set(4.0 * day)
        show(day, 30)
    show(30, 30)
    assert said == [
        "days: 9 of 30 done (36 s, about 1 min 24 s left)",  # 4 s a day, 21 left
        "days: 17 of 30 done (1 min 8 s, about 52 s left)",
        "days: 25 of 30 done (1 min 40 s, about 20 s left)",
        "days: 30 of 30 done (2 min 0 s)",
    ]
    said.clear()
    show = lines.counter("runs")
    for done, t in ((1, 200.0), (2, 300.0), (2, 300.0), (3, 400.0)):  # 100 s a run
        clock.set(t)
        show(done, 3)
    assert [line.split(" (")[0] for line in said] == ["runs: 2 of 3 done", "runs: 3 of 3 done"]


def test_a_short_loop_or_command_says_nothing_off_a_terminal():
    """A loop shorter than 30 s has no line, not even at its end; a loop in the first 5 s of the
    command none however slow; and a stage begun and ended in those 5 s none either."""
    from abm.progress_lines import LogLines

    said: list[str] = []
    clock = FakeTime()
    lines = LogLines(said.append, now=clock, later=clock.later)
    lines.stage("building the population")
    clock.set(1.0)
    lines.stage("simulating the days")
    show = lines.counter("days")
    for day in range(1, 11):
        clock.set(1.0 + 2.9 * day)  # 29 s of days
        show(day, 10)
    assert said == ["simulating the days (5 s so far)"]  # the stage under way as the 5 s end
    said.clear()
    clock = FakeTime()
    lines = LogLines(said.append, now=clock, later=clock.later)
    lines.stage("building the population")
    show = lines.counter("days")
    clock.set(4.9)
    show(5, 10)
    lines.close()
    clock.set(60.0)
    show(10, 10)
    assert said == [] and clock.due == []


def test_stages_are_said_as_they_start_once_the_quiet_seconds_are_over():
    """Off a terminal, a stage is named as it starts with the time so far; the stage under way
    when the first 5 s end is named then (the timer), one that ended before not at all."""
    from abm.progress_lines import LogLines

    said: list[str] = []
    clock = FakeTime()
    lines = LogLines(said.append, now=clock, later=clock.later)
    lines.stage("building the population")
    clock.set(2.0)
    lines.stage("building contacts and interventions")
    clock.set(4.0)
    assert said == []
    clock.set(5.0)
    assert said == ["building contacts and interventions (5 s so far)"]
    clock.set(17.2)
    lines.stage("simulating the days")
    clock.set(80.0)
    lines.stage("writing files")
    assert said[1:] == ["simulating the days (17 s so far)", "writing files (1 min 20 s so far)"]


def test_the_time_left_of_slowing_days_is_a_lower_bound(monkeypatch):
    """A run's days take longer as infections grow, so their recent pace gives too short a time
    left (a 100,000-agent no_intervention run: 1 s left said at 10%, 9 s left in fact). Where the
    last 10 days took at least 10% longer each than the 10 before them, the line says "at least";
    days at a steady pace still get "about", as do runs or trials that slow."""
    from abm.progress_lines import Pace

    clock = FakeTime()
    pace = Pace("days", now=clock)
    t = 0.0
    for day in range(1, 21):  # days 1-10 take 1 s each, days 11-20 1.2 s: 20% slower
        t += 1.0 if day <= 10 else 1.2
        clock.set(t)
        pace.mark(day)
    clock.set(t + 1.2)
    assert pace(21, 100) == "23 s, at least 1 min 35 s left: days slowing down"  # 1.2 s a day, 79 left
    clock = FakeTime()
    steady = Pace("days", now=clock)
    for day in range(1, 23):
        clock.set(1.05 * day)  # 5% slower than 1 s a day, at a steady pace: about
        text = steady(day, 100)
    assert text == "23 s, about 1 min 22 s left"  # 1.05 s a day, 78 left
    clock = FakeTime()
    runs = Pace(now=clock)  # not slowing: runs or trials slower than the 10 before are told "about"
    t = 0.0
    for done in range(1, 22):
        t += 1.0 if done <= 10 else 2.0
        clock.set(t)
        text = runs(done, 100)
    assert text == "32 s, about 2 min 38 s left"
    clock = FakeTime()
    early = Pace("days", now=clock)  # 12 days: no 10 days before the last 10 to compare with
    for day in range(1, 13):
        clock.set(day * day)
        text = early(day, 100)
    assert text == "2 min 24 s, about 20 min 32 s left"  # 14 s a day over days 3-12, 88 left


def test_a_run_logged_to_a_file_tells_its_stages_and_days_in_lines(tmp_path, monkeypatch):
    """abm run with stderr to a file (CliRunner's is no terminal): a line per stage as it starts
    and lines of days with the time left, where the run is long enough (here the rules' 5 s and
    30 s are set to 0); stdout is the same table as without them."""
    from abm import progress_lines

    args = ["run", str(SCENARIO), "--agents", "300", "--days", "20", "--replicates", "1"]
    quiet = runner.invoke(app, [*args, "--out", str(tmp_path / "q")])
    monkeypatch.setattr(progress_lines, "QUIET_S", 0.0)
    monkeypatch.setattr(progress_lines, "EVERY_S", 0.0)
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    err = [line for line in result.stderr.splitlines() if not line.startswith("note: ")]  # the seeds' count
    assert err[0].startswith("running no_intervention: 300 agents")
    stages = [line.split(" (")[0] for line in err if not line.startswith(("days: ", "running "))]
    assert stages == [
        "building the population",
        "building contacts and interventions",
        "simulating the days",
        "writing files",
    ]
    told = [line for line in err if line.startswith("days: ")]
    assert [line.split(" (")[0] for line in told] == [f"days: {d} of 20 done" for d in range(2, 21, 2)]
    assert re.fullmatch(r"days: 4 of 20 done \(\d+ s, (about|at least) \d+ s left.*\)", told[1]), told
    assert err[err.index(told[0]) - 1].startswith("simulating the days (")
    assert "days: " not in result.stdout and "so far" not in result.stdout
    assert quiet.stdout.splitlines()[0] == result.stdout.splitlines()[0]  # the table's title


def test_a_short_run_logged_to_a_file_says_only_what_it_runs(tmp_path, monkeypatch):
    """A run that ends within the quiet period: no stage and no day lines (they were ten day lines).
    The period is set to 60 s here so that a loaded machine, where this second-long run may take
    more than the default 5 s, tests the same thing."""
    import abm.progress_lines

    monkeypatch.setattr(abm.progress_lines, "QUIET_S", 60.0)
    result = runner.invoke(
        app,
        ["run", str(SCENARIO), "--agents", "300", "--days", "20", "--replicates", "1", "--out", str(tmp_path / "r")],
    )
    assert result.exit_code == 0, result.output
    running = f"running no_intervention: 300 agents x 1 replicate, 20 days -> {tmp_path / 'r'}"
    assert [line for line in result.stderr.splitlines() if not line.startswith("note: ")] == [running]


def test_a_sweep_logged_to_a_file_tells_its_runs_in_lines(tmp_path, monkeypatch):
    """abm sweep with stderr to a file: a line per finished run here (the rules' 5 s and 30 s set
    to 0), none with the defaults (a sweep of a few seconds)."""
    from abm import progress_lines

    args = ["sweep", str(SCENARIO), "--agents", "300", "--days", "10", "--replicates", "1"]
    args += ["--sweep", "contacts.community.weight=0.3,0.6"]
    short = runner.invoke(app, [*args, "--out", str(tmp_path / "q")])
    assert short.exit_code == 0, short.output
    assert not any(line.startswith("runs: ") for line in short.stderr.splitlines()), short.stderr
    monkeypatch.setattr(progress_lines, "QUIET_S", 0.0)
    monkeypatch.setattr(progress_lines, "EVERY_S", 0.0)
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    told = [line.split(" (")[0] for line in result.stderr.splitlines() if line.startswith("runs: ")]
    assert told == ["runs: 1 of 2 done", "runs: 2 of 2 done"]


def test_a_protocol_logged_to_a_file_ends_with_its_own_line(monkeypatch, capsys):
    """abm learn off a terminal: a protocol's rounds get lines as a run's days do, but the last
    round's line is the protocol's own line (with its note), as on a terminal, not "3 of 3 done"
    (docs/outputs.md, Progress in a log file)."""
    import abm.cli as cli
    from abm import progress_lines

    monkeypatch.setattr(progress_lines, "QUIET_S", 0.0)
    monkeypatch.setattr(progress_lines, "EVERY_S", 0.0)
    with cli.progress_bar("") as bar:
        listen = cli.learning_progress(bar)
        for done in (1, 2, 3):
            listen("mapl", done, 3, "3 rounds, mean score 0.791")
    told = [line.split(" (")[0] for line in capsys.readouterr().err.splitlines()]
    assert told == ["mapl: 1 of 3 done", "mapl: 2 of 3 done", "mapl: 3 rounds, mean score 0.791"]


def test_calibration_progress_says_the_time_so_far_and_about_how_long_is_left(monkeypatch, capsys):
    """From the pace of the last 10 trials (a continued calibration tells its kept ones at once)."""
    import abm.cli as cli
    from abm import progress_lines

    assert [progress_lines.clock(x) for x in (0.4, 45, 185, 7800)] == ["0 s", "45 s", "3 min 5 s", "2 h 10 min"]
    now = iter([0.0, 10.0, 20.0, 30.0, 40.0, 400.0])
    monkeypatch.setattr(progress_lines.time, "monotonic", lambda: next(now))
    show = cli.step_lines("trial")
    for done, loss in [(1, 1.0), (2, 0.5), (3, 0.25), (4, 0.125), (200, 0.1)]:
        show(done, 200, loss)
    assert capsys.readouterr().err.splitlines() == [
        "trial 1 of 200 done: loss 1.000 (10 s)",
        "trial 2 of 200 done: loss 0.500 (20 s)",
        "trial 3 of 200 done: loss 0.250 (30 s, about 32 min 50 s left)",  # 10 s a trial, 197 left
        "trial 4 of 200 done: loss 0.125 (40 s, about 32 min 40 s left)",
        "trial 200 of 200 done: loss 0.100 (6 min 40 s)",
    ]


def test_a_continued_calibration_takes_the_time_left_from_the_trials_run_afresh(monkeypatch, capsys):
    """Kept trials are told at once: their pace (none) used to make the time left about 0 s until
    10 trials had run afresh. Told that they were reused, the lines say how many and take the
    pace from the trials run afresh only."""
    import abm.cli as cli
    from abm import progress_lines

    now = iter([0.0, 0.01, 0.02, 0.03, 1.0, 11.0, 21.0, 31.0])  # Pace's start, 3 kept trials, then 10 s a trial
    monkeypatch.setattr(progress_lines.time, "monotonic", lambda: next(now))
    show = cli.step_lines("trial", best=True)
    for done in (1, 2, 3):
        show(done, 20, 0.5)
    show.reused(3)
    for done in (4, 5, 6):
        show(done, 20, 0.25)
    assert capsys.readouterr().err.splitlines() == [
        "trial 1 of 20 done: loss 0.500, best so far 0.500 (0 s)",
        "trial 2 of 20 done: loss 0.500, best so far 0.500 (0 s)",
        "trial 3 of 20 done: loss 0.500, best so far 0.500 (0 s, about 0 s left)",  # kept: no pace yet
        "trial 4 of 20 done: loss 0.250, best so far 0.250 (3 kept trials reused; 11 s)",
        "trial 5 of 20 done: loss 0.250, best so far 0.250 (3 kept trials reused; 21 s, about 2 min 30 s left)",
        "trial 6 of 20 done: loss 0.250, best so far 0.250 (3 kept trials reused; 31 s, about 2 min 20 s left)",
    ]


def test_calibration_progress_can_say_the_lowest_loss_so_far(monkeypatch, capsys):
    """Optuna's trials and their re-runs: the lowest loss so far beside each trial's (a NaN loss
    is never the lowest, and before any number there is none to say)."""
    import abm.cli as cli
    from abm import progress_lines

    now = iter([0.0, 1.0, 2.0, 3.0, 4.0])
    monkeypatch.setattr(progress_lines.time, "monotonic", lambda: next(now))
    show = cli.step_lines("re-run", best=True)
    for done, loss in [(1, float("nan")), (2, 0.5), (3, 0.75), (4, 0.25)]:
        show(done, 4, loss)
    assert capsys.readouterr().err.splitlines() == [
        "re-run 1 of 4 done: loss nan (1 s)",
        "re-run 2 of 4 done: loss 0.500, best so far 0.500 (2 s)",
        "re-run 3 of 4 done: loss 0.750, best so far 0.500 (3 s, about 1 s left)",
        "re-run 4 of 4 done: loss 0.250, best so far 0.250 (4 s)",
    ]


def test_an_interrupt_while_the_folder_is_probed_leaves_no_probe(tmp_path, monkeypatch):
    """check_target makes and removes a folder to learn that it can write beside the output. A
    Ctrl-C that lands between the two (as abm learn's interrupt test once caught it) used to leave
    a `.abm-probe-...` folder behind; the probe's name is now known before it is made, and it is
    removed on the way out."""
    import os

    from abm.outputs import run_folder

    real_rmdir = os.rmdir
    calls = []

    def interrupted_rmdir(path):
        calls.append(path)
        if len(calls) == 1:
            raise KeyboardInterrupt
        real_rmdir(path)

    monkeypatch.setattr(run_folder.os, "rmdir", interrupted_rmdir)
    with pytest.raises(KeyboardInterrupt):
        run_folder.check_target(tmp_path / "out")
    assert len(calls) == 2 and list(tmp_path.iterdir()) == []


def test_a_line_interrupted_as_it_is_written_does_not_come_out_twice():
    """Ctrl-C as a progress line is flushed (a calibration's ``trial 2 of 12 done``, right before
    the interrupt's note of the kept trials): rich emptied its buffer only after the flush, so the
    next line printed the interrupted one again; 3 of 30 interrupts sent as a line came."""
    import io

    from abm.cli import err_console

    class InterruptedFlush(io.StringIO):
        flushes = 0

        def flush(self) -> None:
            self.flushes += 1
            if self.flushes == 1:
                raise KeyboardInterrupt

    out = InterruptedFlush()
    console = type(err_console)(file=out, markup=False)
    with pytest.raises(KeyboardInterrupt):
        console.print("trial 2 of 12 done", highlight=False)
    console.print("note: 2 finished trials are kept", highlight=False)
    assert out.getvalue() == "trial 2 of 12 done\nnote: 2 finished trials are kept\n"
