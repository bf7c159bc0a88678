"""The first week's reproduction number and the generation interval in `abm compare`'s table
(abm/outputs/compare_reproduction.py): the summaries' figures, their changes against the first run
with Welch's intervals, and "n/a" with a note for the runs without them."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import fixed_seeds_note
from scipy import stats

import abm
from abm.outputs.compare import COLUMNS, CompareError, comparison_table, markdown, table_note
from abm.outputs.differences import welch_interval, welch_of_moments
from abm.outputs.plots import RunTables

# Per replicate, as summary.json's reproduction_number sums them up (mean, sd, replicates).
BASE_R, BASE_GI = [1.3, 1.5, 1.8], [5.0, 5.4, 5.5]
OTHER_R, OTHER_GI = [1.0, 1.25], [6.0, 6.3, 5.8]  # one replicate's first week is not final


def figure(values: list[float]) -> dict[str, float]:
    v = np.array(values)
    return {"mean": float(v.mean()), "sd": float(v.std(ddof=1)) if v.size > 1 else None, "replicates": v.size}


def hand_run(label: str, **summary: object) -> RunTables:
    """A run of 2 days and 3 replicates, admitting no one; its summary's reproduction_number as
    given (left out where not given: a run folder written before abm recorded it)."""
    ts = pd.DataFrame({"day": [0, 1] * 3, "replicate": np.repeat([0, 1, 2], 2), "new_hospitalizations": 0, "deaths": 0})
    costs = pd.DataFrame({"item": [], "day": [], "replicate": [], "count": [], "unit_cost": []})
    s = {
        "scenario": label,
        "agents": 1000,
        "days": 2,
        "replicates": 3,
        "peak_hospital_occupancy": {"value": 0.0, "day": None, "per_100k": 0.0, "at_end": False},
        "peak_icu": {"value": 0.0, "day": None, "per_100k": 0.0, "at_end": False},
        "hospital_capacity": {"beds": 0.55, "beds_per_100k": 55.0, "days_over_capacity": 0},
        "cumulative_infected": {"share": 0.1},
        "deaths": {"mean": 0.0},
        "total_cost": {"mean": 0.0},
    } | summary
    return RunTables(label, ts, pd.DataFrame(), costs, s)


def cells(md: str, header: str) -> list[str]:
    """The cells of the column headed ``header`` in the first table of ``md``."""
    head, _, *rows = md.split("\n\n")[0].splitlines()
    at = [c.strip() for c in head.split("|")].index(header)
    return [row.split("|")[at].strip() for row in rows]


def test_welch_of_moments_is_welchs_interval_of_the_samples():
    """The interval from means, variances and sizes is the one from the samples (scipy's too)."""
    a, b = np.array([1.0, 2.0, 3.5]), np.array([4.0, 6.5, 8.0, 10.0, 9.0])
    got = welch_of_moments((a.mean(), a.var(ddof=1), 3), (b.mean(), b.var(ddof=1), 5))
    ci = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert (got.mean, got.low, got.high) == pytest.approx((a.mean() - b.mean(), ci.low, ci.high), rel=1e-12)
    assert welch_interval(a, b) == got
    one = welch_of_moments((2.0, math.nan, 1), (1.0, 0.5, 4))
    assert one.mean == 1.0 and math.isnan(one.low) and math.isnan(one.high)


def test_the_table_gives_each_runs_figures_and_their_change_against_the_first_run():
    """The means are the summaries' (the CSV's columns); the change is other minus first, with
    Welch's interval of the replicates; a first week final in 2 of 3 replicates reads "(2 of 3)";
    runs without the figures read n/a, not 0, and the note names them and why."""
    record = {"initial": figure(BASE_R), "generation_interval_days": figure(BASE_GI)}
    runs = [
        hand_run("base", reproduction_number=record),
        hand_run(
            "other", reproduction_number={"initial": figure(OTHER_R), "generation_interval_days": figure(OTHER_GI)}
        ),
        hand_run("off", reproduction_number=None),  # outputs.reproduction_number: false
        hand_run("old"),  # an earlier version's run folder
        hand_run("open", reproduction_number={"initial": None, "generation_interval_days": figure([7.0, 7.5, 8.0])}),
    ]
    table = comparison_table(runs).set_index("run")
    assert table["reproduction_number_initial"].iloc[:2].tolist() == [np.mean(BASE_R), np.mean(OTHER_R)]
    assert table["reproduction_number_initial"].iloc[2:].isna().all()
    assert table["generation_interval"].tolist()[:2] == [np.mean(BASE_GI), np.mean(OTHER_GI)]
    assert table.loc["open", "generation_interval"] == 7.5 and math.isnan(table.loc["off", "generation_interval"])
    assert table["reproduction_number_initial_replicates"].tolist()[:2] == [3, 2]
    for column, base, other, changed in (
        ("reproduction_number_initial", BASE_R, OTHER_R, ["other"]),
        ("generation_interval", BASE_GI, OTHER_GI, ["other", "open"]),
    ):
        ci = stats.ttest_ind(other, base, equal_var=False).confidence_interval(0.95)
        row = table.loc["other"]
        assert row[f"{column}_change"] == pytest.approx(np.mean(other) - np.mean(base), rel=1e-12)
        assert (row[f"{column}_change_low"], row[f"{column}_change_high"]) == pytest.approx((ci.low, ci.high))
        assert table[f"{column}_change"].drop(changed).isna().all()  # the first run, and runs without it
    gi_open = stats.ttest_ind([7.0, 7.5, 8.0], BASE_GI, equal_var=False).confidence_interval(0.95)
    assert table.loc["open", "generation_interval_change_low"] == pytest.approx(gi_open.low)

    note = table_note(runs)
    md = markdown(table.reset_index(), note)
    r = [f"{v:.2f}" for v in table.loc["other"].filter(like="reproduction_number_initial_change")]
    assert cells(md, "reproduction number, first week (mean)") == [
        f"{np.mean(BASE_R):.2f}",
        f"{np.mean(OTHER_R):.2f} (2 of 3)",
        "n/a",
        "n/a",
        "n/a",
    ]
    assert cells(md, "change in reproduction number, first week, vs first run (95% interval)") == [
        "",
        f"{r[0]} ({r[1]} to {r[2]})",
        "n/a",
        "n/a",
        "n/a",
    ]
    assert cells(md, "generation interval, days (mean)") == ["5.3", "6.0", "n/a", "n/a", "7.5"]
    assert cells(md, "change in generation interval, days, vs first run (95% interval)")[2:4] == ["n/a", "n/a"]
    assert "replicates with" not in md.splitlines()[0]  # folded into the mean's cell
    assert (
        " The first week's reproduction number and the generation interval: n/a for off, run with "
        "outputs.reproduction_number: false (infections not put down to infectors). The first week's reproduction "
        "number and the generation interval: n/a for old, written before abm recorded them (summary.json has no "
        "reproduction_number). The first week's reproduction number: n/a for open, no replicate's first week of "
        "infections was final by the last simulated day." in note
    )
    assert "Welch's 95% interval from each run's mean, sd and replicates" in note
    assert "The first run lacks" not in note
    assert all(len(COLUMNS[c]) < 120 for c in table.columns if c != "run")  # a header fits a console line


def test_a_first_run_without_the_figures_leaves_every_change_n_a():
    """The first run lacks both figures: no change can be taken, and the note says why; where no
    run has them, the note does not explain figures that are not there."""
    record = {"initial": figure(BASE_R), "generation_interval_days": figure(BASE_GI)}
    runs = [hand_run("old"), hand_run("new", reproduction_number=record)]
    table = comparison_table(runs)
    assert table.filter(like="_change").isna().all().all()
    note = table_note(runs, table)
    md = markdown(table, note)
    assert cells(md, "change in reproduction number, first week, vs first run (95% interval)") == ["", "n/a"]
    assert cells(md, "reproduction number, first week (mean)") == ["n/a", f"{np.mean(BASE_R):.2f}"]
    assert "The first run lacks the first week's reproduction number, so no run's change in it is shown." in note
    assert "The first run lacks the generation interval, so no run's change in it is shown." in note
    neither = table_note([hand_run("old"), hand_run("off", reproduction_number=None)])
    assert "Welch's 95% interval from each run's mean" not in neither and "n/a for old" in neither


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    """Run folders of ni (1,000 agents, 30 days, 2 replicates): ``base``; ``slow``, at a lower
    transmission rate; ``off``, without the reproduction number; ``old``, base's copy whose
    summary.json lacks it, as an earlier version wrote it."""
    root = tmp_path_factory.mktemp("r_runs")
    out = {}
    for name, sets in (
        ("base", []),
        ("slow", ["disease.transmission_rate=2"]),
        ("off", ["outputs.reproduction_number=false"]),
    ):
        with fixed_seeds_note():
            result = abm.run("scenarios/king_county/ni.yaml", agents=1000, days=30, replicates=2, seed=1, sets=sets)
        out[name] = result.write(root / name, figures=False)
    out["old"] = root / "old"
    shutil.copytree(out["base"], out["old"])
    summary = json.loads((out["old"] / "summary.json").read_text())
    del summary["reproduction_number"]
    (out["old"] / "summary.json").write_text(json.dumps(summary))
    return out


def test_abm_compare_shows_the_summaries_figures_and_n_a_for_runs_without(folders, tmp_path):
    """`abm compare` (a process): comparison.csv holds the summaries' figures as they are and the
    change of slow against base; the console, comparison.md and report.html show them rounded,
    n/a for off and old, and the note names both."""
    out = tmp_path / "cmp"
    runs = [str(folders[k]) for k in ("base", "slow", "off", "old")]
    proc = subprocess.run(
        [sys.executable, "-m", "abm", "compare", *runs, "--out", str(out)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    table = pd.read_csv(out / "comparison.csv")
    s = {k: json.loads((folders[k] / "summary.json").read_text())["reproduction_number"] for k in ("base", "slow")}
    for row, name in ((0, "base"), (1, "slow")):
        assert table.reproduction_number_initial[row] == s[name]["initial"]["mean"]
        assert table.generation_interval[row] == s[name]["generation_interval_days"]["mean"]
        assert table.reproduction_number_initial_replicates[row] == s[name]["initial"]["replicates"] == 2
    change = s["slow"]["initial"]["mean"] - s["base"]["initial"]["mean"]
    assert table.reproduction_number_initial_change[1] == change
    assert table.reproduction_number_initial_change_low[1] < change < table.reproduction_number_initial_change_high[1]
    assert table.filter(like="reproduction_number_initial").iloc[2:].isna().all().all()
    assert "3.0" not in (out / "comparison.csv").read_text().splitlines()[1].split(",")  # replicates read 2
    md = (out / "comparison.md").read_text()
    assert proc.stdout.startswith(md)  # the console prints comparison.md
    shown = [f"{s[k]['initial']['mean']:.2f}" for k in ("base", "slow")]
    assert cells(md, "reproduction number, first week (mean)") == [*shown, "n/a", "n/a"]
    gi = cells(md, "generation interval, days (mean)")
    assert gi == [f"{s[k]['generation_interval_days']['mean']:.1f}" for k in ("base", "slow")] + ["n/a", "n/a"]
    flat = " ".join(md.split())
    labels = {k: f"ni ({k})" for k in folders}
    assert f"the generation interval: n/a for {labels['off']}, run with outputs.reproduction_number: false" in flat
    assert f"the generation interval: n/a for {labels['old']}, written before abm recorded them" in flat
    report = (out / "report.html").read_text()
    assert "<th>reproduction number, first week (mean)</th>" in report and f"<td>{shown[1]}</td>" in report


def test_abm_compare_refuses_a_malformed_reproduction_number(folders, tmp_path):
    """An edited summary.json whose reproduction_number is not as abm writes it is refused with
    the entries named, as other edited entries are; nothing is written."""
    bad = tmp_path / "bad"
    shutil.copytree(folders["slow"], bad)
    summary = json.loads((bad / "summary.json").read_text())
    summary["reproduction_number"]["initial"] = {"mean": "high", "sd": 0.1, "replicates": 5}
    (bad / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(
        CompareError,
        match=r"lacks the numbers reproduction_number\.initial\.replicates \(a whole "
        r"number from 1 to the run's replicates\), reproduction_number\.initial"
        r"\.mean;",
    ):
        abm.compare([folders["base"], bad], out=tmp_path / "cmp")
    assert not (tmp_path / "cmp").exists()


def test_the_note_names_the_items_booked_at_a_price_not_those_booked_at_0():
    """costs.csv books unpriced items at a cost of 0 (quarantine days by default): the note's list
    of what the costs count names only the items with a price."""
    priced = hand_run("sq")
    priced.costs = pd.DataFrame(
        {"item": ["test_rt_pcr", "quarantine_day"], "day": [0, 0], "replicate": [0, 0], "count": [2, 5]}
        | {"unit_cost": [5.0, 0.0]}
    )
    note = " ".join(table_note([hand_run("ni"), priced]).split())
    assert "Costs are the items each run booked at a price in its costs.csv (test_rt_pcr)." in note
    assert "(none)" in " ".join(table_note([hand_run("ni")]).split())
