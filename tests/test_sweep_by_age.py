"""Infections and deaths by age group in ``abm sweep``'s tables: taken from each run's summary
(``by_age``, as ``abm run`` gives it), adding up to the totals, and as ``abm run`` of the same
variant and seed gives them."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import fixed_seeds_note
from scipy import stats

import abm
from abm.engine.disease import AGE_GROUP_LABELS
from abm.outputs.sweep_by_age import AGE_COLUMNS, WHERE_BY_AGE, age_column, age_outcomes
from abm.sweep import run_sweep

SCENARIO = Path("scenarios/king_county/no_intervention.yaml").resolve()
# Long enough, and fast enough a spread, for some deaths: a check of deaths by age that all read 0 proves little.
SETTINGS = {"agents": 1500, "days": 60}
SWEPT = "disease.transmission_rate"


@pytest.fixture(scope="module")
def sweep():
    with fixed_seeds_note():
        return run_sweep(SCENARIO, [f"{SWEPT}=3,4"], replicates=2, **SETTINGS)


def infected_columns() -> list[str]:
    return [age_column("cumulative_infected", g) for g in AGE_GROUP_LABELS]


def death_columns() -> list[str]:
    return [age_column("deaths", g) for g in AGE_GROUP_LABELS]


def test_column_names_are_stable_identifiers_one_per_outcome_and_age_group():
    assert age_column("cumulative_infected", "0-9") == "cumulative_infected_age_0_9"
    assert age_column("deaths", "80+") == "deaths_age_80_plus"
    assert len(set(AGE_COLUMNS)) == len(AGE_COLUMNS) == 2 * len(AGE_GROUP_LABELS)
    assert all(re.fullmatch(r"[a-z0-9_]+", c) for c in AGE_COLUMNS)
    assert list(AGE_COLUMNS) == infected_columns() + death_columns()
    assert len(WHERE_BY_AGE) <= 120 and "sweep.csv" in WHERE_BY_AGE


def test_age_outcomes_are_a_single_replicates_counts_and_refuse_several():
    rows = [
        {"age_group": g, "infected": {"mean": float(10 + i), "sd": float("nan")}, "deaths": {"mean": float(i % 2)}}
        for i, g in enumerate(AGE_GROUP_LABELS)
    ]
    got = age_outcomes({"replicates": 1, "by_age": rows[::-1]})  # matched by label, not by position
    assert got["cumulative_infected_age_0_9"] == 10 and got["cumulative_infected_age_80_plus"] == 18
    assert [got[c] for c in death_columns()] == [i % 2 for i in range(len(AGE_GROUP_LABELS))]
    assert all(type(v) is int for v in got.values())
    with pytest.raises(ValueError, match="one replicate, not 2"):
        age_outcomes({"replicates": 2, "by_age": rows})


def test_by_age_columns_add_up_to_the_totals_in_every_row(sweep):
    t = sweep.table
    assert list(t.columns[-len(AGE_COLUMNS) :]) == list(AGE_COLUMNS)  # last, after every other column
    assert (t[infected_columns()].sum(axis=1) == t["cumulative_infected"]).all()
    assert (t[death_columns()].sum(axis=1) == t["deaths"]).all()
    assert t["deaths"].sum() > 0 and (t[infected_columns()] > 0).sum(axis=1).min() > 1  # not all in one group


def test_a_rows_counts_by_age_are_abm_runs_of_the_same_variant_and_seed(sweep):
    t = sweep.table
    row = t[t["deaths"] > 0].iloc[-1]
    with fixed_seeds_note():
        again = abm.run(SCENARIO, sets=[f"{SWEPT}={row[SWEPT]}"], seed=int(row["seed"]), replicates=1, **SETTINGS)
    by_age = {r["age_group"]: r for r in again.summary["by_age"]}
    for group in AGE_GROUP_LABELS:
        assert row[age_column("cumulative_infected", group)] == by_age[group]["infected"]["mean"]
        assert row[age_column("deaths", group)] == by_age[group]["deaths"]["mean"]


def age_changes() -> list[str]:
    """sweep_summary.csv's columns of the changes by age group, in order: each column's change per
    100,000 agents and its interval, then each one's for the region."""
    per_100k = [f"{c}_change_{k}" for c in AGE_COLUMNS for k in ("per_100k", "low", "high")]
    return per_100k + [f"{c}_change_{k}" for c in AGE_COLUMNS for k in ("region", "region_low", "region_high")]


def test_summary_gives_mean_and_sd_over_replicates_of_each_by_age_column(sweep):
    t, s = sweep.table, sweep.summary
    stats = [f"{c}_{k}" for c in AGE_COLUMNS for k in ("mean", "sd")]
    assert list(s.columns[-len(stats) - len(age_changes()) :]) == stats + age_changes()
    for v, group in t.groupby("variant"):
        for c in AGE_COLUMNS:
            assert s.loc[v, f"{c}_mean"] == pytest.approx(group[c].mean())
            assert s.loc[v, f"{c}_sd"] == pytest.approx(group[c].std(ddof=1))
        means = s.loc[v, [f"{c}_mean" for c in infected_columns()]].to_numpy(dtype=float)
        assert means.sum() == pytest.approx(s.loc[v, "cumulative_infected_mean"])


def test_summary_gives_each_by_age_columns_change_from_the_first_variant(sweep):
    """sweep_summary.csv gave the changes from the first variant, with 95% intervals, of the
    totals only (hospitalizations, deaths, cost), not of the infections and deaths by age it
    gives the means of. Now each by-age column's too, as the totals' (per 100,000 agents, paired
    replicate by replicate: the variants share their draws; and for the region), last; so the
    changes of deaths by age add up to the change of deaths."""
    t, s = sweep.table, sweep.summary
    assert list(s.columns[-len(age_changes()) :]) == age_changes()
    assert s.loc[0, age_changes()].isna().all()  # the first variant is the reference
    assert s.loc[1, "changes_by"] == "paired replicates"
    first, other = (t[t["variant"] == v].sort_values("replicate") for v in (0, 1))
    agents, residents = SETTINGS["agents"], sweep.info["region_population"][0]
    half_width = stats.t.ppf(0.975, len(first) - 1) / np.sqrt(len(first))  # a t interval over paired replicates
    for c in AGE_COLUMNS:
        d = (other[c].to_numpy(dtype=float) - first[c].to_numpy(dtype=float)) * 1e5 / agents
        half = half_width * d.std(ddof=1)
        got = s.loc[1, [f"{c}_change_per_100k", f"{c}_change_low", f"{c}_change_high"]].to_numpy(dtype=float)
        assert got == pytest.approx([d.mean(), d.mean() - half, d.mean() + half]), c
        region = s.loc[1, [f"{c}_change_{k}" for k in ("region", "region_low", "region_high")]].to_numpy(dtype=float)
        assert region == pytest.approx(got * residents / 1e5), c
    assert (s.loc[1, [f"{c}_change_per_100k" for c in death_columns()]] != 0).any()  # deaths changed somewhere
    assert s.loc[1, [f"{c}_change_per_100k" for c in death_columns()]].sum() == pytest.approx(
        s.loc[1, "deaths_change_per_100k"]
    )
    # Those of infections by age add up to the change of infections, which the summary gives too
    # (it gave the changes of hospitalizations, deaths and cost only: the sum had no column to match).
    infected = s.loc[1, [f"{c}_change_per_100k" for c in infected_columns()]].sum()
    assert infected == pytest.approx(
        (other["cumulative_infected"].mean() - first["cumulative_infected"].mean()) * 1e5 / agents
    )
    assert infected == pytest.approx(s.loc[1, "cumulative_infected_change_per_100k"])
    infected_region = s.loc[1, [f"{c}_change_region" for c in infected_columns()]].sum()
    assert infected_region == pytest.approx(s.loc[1, "cumulative_infected_change_region"])


def test_sweep_csv_writes_counts_by_age_as_whole_numbers(tmp_path, sweep):
    sweep.kept_in = None  # a fixture's result: no kept runs to remove
    sweep.write(tmp_path / "sw")
    text = (tmp_path / "sw" / "sweep.csv").read_text().splitlines()
    header, first = text[0].split(","), text[1].split(",")
    cells = [first[header.index(c)] for c in AGE_COLUMNS]
    assert all(re.fullmatch(r"\d+", c) for c in cells), cells
    back = pd.read_csv(tmp_path / "sw" / "sweep.csv")
    assert np.array_equal(back[list(AGE_COLUMNS)].to_numpy(), sweep.table[list(AGE_COLUMNS)].to_numpy())


def test_a_variant_some_of_whose_runs_lack_counts_by_age_gets_no_means_by_age():
    """A sweep resumed from a journal whose runs an older abm kept (no counts by age) beside runs
    of this one: the variant's means by age would be over other replicates than its totals' and
    not add up to them, so they are left empty; a variant whose runs all have them keeps them."""
    from types import SimpleNamespace

    from abm.sweep import OUTCOMES, SweepAxis, SweepPlan, combine

    data = {"simulation": {"seed": 10, "device": "cpu"}, "population": {"agents": 1000, "region": "x"}}
    variant = SimpleNamespace(
        simulation=SimpleNamespace(seed=10, start_date=None),
        population=SimpleNamespace(agents=1000),
        model_dump=lambda **_: data,
    )
    sweep_plan = SweepPlan(
        "x.yaml",
        [SweepAxis("disease.transmission_rate", (3, 4), ("3", "4"))],
        2,
        [variant, variant],
        [{"values": [3], "texts": ["3"]}, {"values": [4], "texts": ["4"]}],
    )
    by_age = {c: 1 for c in infected_columns()} | {c: 0 for c in death_columns()}

    def result(v: int, r: int, ages: bool) -> dict:
        outcomes = dict.fromkeys(OUTCOMES, 1.0) | {"cumulative_infected": 9.0, "deaths": 0.0, "peak_hospital_day": 3}
        at_end = {"peak_hospital_at_end": False, "peak_new_infections_at_end": False}
        return {"variant": v, "replicate": r, "outcomes": outcomes | at_end | (by_age if ages else {})}

    # variant 0: replicate 0 kept by an older abm, replicate 1 run now; variant 1: both run now
    results = [result(0, 0, False), result(0, 1, True), result(1, 0, True), result(1, 1, True)]
    table, summary = combine(sweep_plan, results)
    assert table.loc[0, list(AGE_COLUMNS)].isna().all() and table.loc[1, list(AGE_COLUMNS)].notna().all()
    stats = [f"{c}_{k}" for c in AGE_COLUMNS for k in ("mean", "sd")]
    assert summary.loc[0, stats].isna().all()
    means = summary.loc[1, [f"{c}_mean" for c in infected_columns()]].to_numpy(dtype=float)
    assert means.sum() == summary.loc[1, "cumulative_infected_mean"] == 9.0
    # nor a change by age against a first variant that lacks them in a replicate
    assert summary.loc[1, age_changes()].isna().all() and summary.loc[1, "deaths_change_per_100k"] == 0
