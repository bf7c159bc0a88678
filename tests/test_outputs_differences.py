"""The comparison's averted counts and their intervals over replicates (abm/outputs/differences.py)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import fixed_seeds_note
from scipy import stats

import abm
from abm.outputs.compare import comparison_table, hospitalizations, markdown, table_note
from abm.outputs.differences import paired_interval, replicate_totals, welch_interval
from abm.outputs.plots import RunTables

SCENARIOS = Path("scenarios/king_county").resolve()
FAST = ["disease.transmission_rate=5.02"]  # the thesis's rate: 40 days at 3,000 agents fill hospitals


def test_paired_interval_by_hand():
    # d = 1, 2, 3, 4: mean 2.5, sd sqrt(5/3); t(0.975, 3) = 3.18245 (tables)
    iv = paired_interval(np.array([11.0, 12, 13, 14]), np.array([10.0, 10, 10, 10]))
    half = 3.182446305 * math.sqrt(5 / 3) / 2
    assert iv.mean == pytest.approx(2.5)
    assert (iv.low, iv.high) == pytest.approx((2.5 - half, 2.5 + half))
    one = paired_interval(np.array([3.0]), np.array([1.0]))
    assert one.mean == 2.0 and math.isnan(one.low) and math.isnan(one.high)


def test_welch_interval_equals_scipys():
    a, b = np.array([1.0, 2.0, 3.5]), np.array([4.0, 6.5, 8.0, 10.0, 9.0])
    ci = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    iv = welch_interval(a, b)
    assert iv.mean == pytest.approx(a.mean() - b.mean())
    assert (iv.low, iv.high) == pytest.approx((ci.low, ci.high))
    same = welch_interval(np.array([2.0, 2.0]), np.array([1.0, 1.0]))
    assert (same.mean, same.low, same.high) == (1.0, 1.0, 1.0)


def test_paired_interval_covers_the_true_difference_95_percent_of_the_time():
    # Correlated pairs of 4 replicates with a true difference of 3: the t interval is exact for
    # normal differences, so its coverage over 4,000 draws is 0.95 within 3 binomial sds (0.010).
    rng = np.random.default_rng(7)
    n, draws = 4, 4000
    shared = rng.normal(0, 10, (draws, n))
    base = 50 + shared + rng.normal(0, 2, (draws, n))
    other = 47 + shared + rng.normal(0, 2, (draws, n))
    covered = [(iv.low <= 3 <= iv.high) for iv in (paired_interval(b, o) for b, o in zip(base, other, strict=True))]
    assert abs(np.mean(covered) - 0.95) < 3 * math.sqrt(0.95 * 0.05 / draws)


@pytest.fixture(scope="module")
def results():
    def run(name: str, seed: int, replicates: int = 4):
        with fixed_seeds_note():
            return abm.run(
                SCENARIOS / f"{name}.yaml", agents=3000, days=40, replicates=replicates, seed=seed, sets=FAST
            )

    return {"ni": run("ni", 3), "ni again": run("ni", 3), "sq": run("sq", 3), "sq seed 4": run("sq", 4)}


def test_replicate_totals_are_each_replicates_admissions_and_deaths_per_100k(results):
    r = results["sq"]
    totals = replicate_totals(RunTables.from_result(r))
    ts = r.timeseries
    for rep in range(4):
        one = ts[ts.replicate == rep].sort_values("day")
        assert totals["hospitalizations"][rep] == pytest.approx(one.new_hospitalizations.sum() * 1e5 / 3000)
        assert totals["deaths"][rep] == pytest.approx(one.deaths.iloc[-1] * 1e5 / 3000)
    assert totals["deaths"].mean() * 3000 / 1e5 == pytest.approx(r.summary["deaths"]["mean"])
    assert totals["hospitalizations"].mean() * 3000 / 1e5 == pytest.approx(hospitalizations(RunTables.from_result(r)))


def test_comparison_pairs_runs_that_share_their_draws(results):
    table = abm.compare([results["ni"], results["ni again"], results["sq"], results["sq seed 4"]]).table
    assert list(table.averted_by) == ["", "paired replicates", "paired replicates", "independent runs"]
    # The same scenario and seed: every replicate is the same epidemic, so nothing is averted, exactly.
    same = table.iloc[1]
    assert (same.hospitalizations_averted_per_100k, same.hospitalizations_averted_low) == (0.0, 0.0)
    assert (same.deaths_averted_per_100k, same.deaths_averted_high) == (0.0, 0.0)
    assert table.iloc[0][["hospitalizations_averted_per_100k", "deaths_averted_low"]].isna().all()
    base = replicate_totals(RunTables.from_result(results["ni"]))
    for i, name, interval in ((2, "sq", paired_interval), (3, "sq seed 4", welch_interval)):
        other = replicate_totals(RunTables.from_result(results[name]))
        for m in ("hospitalizations", "deaths"):
            iv = interval(base[m], other[m])
            row = table.iloc[i]
            assert (row[f"{m}_averted_per_100k"], row[f"{m}_averted_low"], row[f"{m}_averted_high"]) == pytest.approx(
                (iv.mean, iv.low, iv.high)
            )
    # Hospitalizations averted per 100k are the difference of the table's means, per agent.
    row = table.iloc[2]
    assert row.hospitalizations_averted_per_100k == pytest.approx(
        (table.hospitalizations.iloc[0] - row.hospitalizations) * 1e5 / 3000
    )


def test_report_shows_intervals_and_names_costs_resting_on_noise(results):
    comp = abm.compare([results["ni"], results["sq"]])
    table = comp.table
    row = table.iloc[1]
    md = markdown(table, table_note(comp.runs, table))
    cell = f"{row.hospitalizations_averted_per_100k:,.1f} ({row.hospitalizations_averted_low:,.1f} to "
    assert cell in md and "hospitalizations averted per 100k (95% interval)" in md
    assert "low end" not in md  # the ends are folded into the mean's cell
    noisy = "The hospitalizations averted by sq are not beyond noise"
    assert (noisy in md) == (row.hospitalizations_averted_low <= 0)
    # One replicate each: no interval, said in the cell, and the cost per averted hospitalization is flagged.
    with fixed_seeds_note():
        one = [
            abm.run(SCENARIOS / f"{n}.yaml", agents=3000, days=40, replicates=1, seed=10, sets=FAST)
            for n in ("ni", "sq")
        ]
    comp = abm.compare(one)
    md = markdown(comp.table, table_note(comp.runs, comp.table))
    assert "(one replicate: no interval)" in md
    assert comp.table.cost_per_averted_hospitalization.iloc[1] > 0  # seed 10: sq averts 3 of 5, at a cost
    assert "The hospitalizations averted by sq cannot be told from noise with one replicate (no interval)" in md
    assert "are not beyond noise" not in md  # with one replicate there is no interval to be beyond


def test_fieller_interval_is_the_set_of_ratios_a_paired_t_test_keeps():
    """For paired replicates, Fieller's interval for mean(extra cost) / mean(averted) is the set of
    ratios R for which the paired t statistic of extra - R averted stays within t(0.975, n - 1):
    at its ends it equals that quantile; unbounded when the averted count is within noise."""
    from abm.outputs.differences import ratio_interval

    extra = np.array([120.0, 150.0, 90.0, 140.0, 110.0])
    averted = np.array([10.0, 14.0, 7.0, 12.0, 9.0])
    pairs = np.stack([extra, averted])
    iv = ratio_interval(pairs.mean(axis=1), np.cov(pairs) / 5, 4)
    assert iv.mean == pytest.approx(extra.mean() / averted.mean())
    t_crit = stats.t.ppf(0.975, 4)

    def t_of(r: float) -> float:
        d = extra - r * averted
        return abs(d.mean()) / (d.std(ddof=1) / np.sqrt(5))

    assert t_of(iv.low) == pytest.approx(t_crit) and t_of(iv.high) == pytest.approx(t_crit)
    assert iv.low < iv.mean < iv.high and t_of(iv.mean) < t_crit and t_of(iv.high * 1.05) > t_crit
    noisy = np.stack([extra, np.array([10.0, -12.0, 7.0, -9.0, 5.0])])
    unbounded = ratio_interval(noisy.mean(axis=1), np.cov(noisy) / 5, 4)
    assert (unbounded.low, unbounded.high) == (-np.inf, np.inf)


def test_comparison_gives_the_cost_per_averted_hospitalization_an_interval(results):
    table = abm.compare([results["ni"], results["sq"], results["sq seed 4"]]).table
    assert table.iloc[0][["cost_per_averted_low", "cost_per_averted_high"]].isna().all()
    for i in (1, 2):
        row = table.iloc[i]
        if np.isnan(row.cost_per_averted_hospitalization):  # nothing averted: no ratio, no interval
            assert np.isnan(row.cost_per_averted_low) and np.isnan(row.cost_per_averted_high)
        else:
            assert row.cost_per_averted_low <= row.cost_per_averted_hospitalization <= row.cost_per_averted_high
    assert not np.isnan(table.iloc[1].cost_per_averted_hospitalization)  # sq averts some on seed 3


def _tiny_run(label: str, hospitalizations: list[float], costs: list[float], agents: int = 1000) -> RunTables:
    """A one-day run whose replicates admit ``hospitalizations`` and spend ``costs`` (no seed:
    compared as independent runs)."""
    reps = range(len(hospitalizations))
    ts = pd.DataFrame({"day": 0, "replicate": list(reps), "new_hospitalizations": hospitalizations, "deaths": 0.0})
    costs_table = pd.DataFrame({"item": "x", "day": 0, "replicate": list(reps), "count": 1.0, "unit_cost": costs})
    summary = {
        "agents": agents,
        "days": 1,
        "replicates": len(hospitalizations),
        "peak_hospital_occupancy": {"value": 1.0, "day": 0, "per_100k": 1e5 / agents, "at_end": False},
        "peak_icu": {"value": 0.0, "day": None, "per_100k": 0.0, "at_end": False},
        "hospital_capacity": {"beds_per_100k": 55.0, "beds": 55.0 * agents / 1e5, "days_over_capacity": 0},
        "cumulative_infected": {"share": 0.1},
        "deaths": {"mean": 0.0},
        "total_cost": {"mean": float(np.mean(costs))},
    }
    return RunTables(label, ts, pd.DataFrame(), costs_table, summary)


def test_note_names_an_unbounded_cost_interval_even_where_the_averted_interval_excludes_0():
    """Independent runs: Welch's interval for the hospitalizations averted takes Welch's degrees of
    freedom (about 3 here: 70.25 averted, low end about 10), Fieller's for the cost per averted
    hospitalization the smaller run's replicates less one (1: t = 12.7, unbounded since 70.25 is
    3.7 sds from 0). The table shows '(unbounded)'; the note must say why, not only for averted
    counts within noise."""
    base = _tiny_run("base", [60.0, 140.0, 80.0, 125.0], [0.0] * 4)
    other = _tiny_run("other", [30.0, 32.0], [1000.0, 1200.0])
    table = comparison_table([base, other])
    row = table.iloc[1]
    assert row.averted_by == "independent runs"
    assert row.hospitalizations_averted_low > 0  # beyond noise by Welch's interval
    assert (row.cost_per_averted_low, row.cost_per_averted_high) == (-math.inf, math.inf)
    note = table_note([base, other], table)
    assert "The cost per averted hospitalization of other has an unbounded 95% interval" in note
    assert "The hospitalizations averted by other are not beyond noise" not in note  # they are, by their interval


@pytest.mark.parametrize("admitted", [1.0, 2.0])
@pytest.mark.parametrize("cost", [20.0, 163.0, 5400.0])
def test_a_cost_per_averted_hospitalization_without_noise_has_the_ratio_at_both_ends(admitted, cost):
    """Every replicate spends the same (vaccination's doses are the same each replicate: $5,400 in
    each of 3 replicates at 3,000 agents, 40 days) and averts the same: the interval is the ratio
    itself. Fieller's discriminant, b^2 - 4ac, was left a rounding error below 0 about a third of
    the time (in each of these cases) and the interval read as unbounded, named in the note as too
    few replicates, though the averted count's own interval is a point above 0."""
    base = _tiny_run("base", [3.0] * 3, [0.0] * 3, agents=3000)
    other = _tiny_run("other", [admitted] * 3, [cost] * 3, agents=3000)
    table = comparison_table([base, other])
    row = table.iloc[1]
    ratio = cost / (3.0 - admitted)
    assert row.cost_per_averted_hospitalization == pytest.approx(ratio)
    assert (row.cost_per_averted_low, row.cost_per_averted_high) == pytest.approx((ratio, ratio))
    assert "has an unbounded 95% interval" not in table_note([base, other], table)
    assert "(unbounded)" not in markdown(table)


def test_note_names_hospital_capacities_that_differ():
    """Runs of one region with different outputs.hospital_beds_per_100k: each run's peak /
    capacity and days over capacity are against its own line, so a run with more beds read as
    having averted its days over capacity, and the note said nothing (outputs.* differences were
    left out as changing no result)."""
    base = _tiny_run("base", [60.0, 140.0], [0.0, 0.0])
    other = _tiny_run("other", [30.0, 32.0], [1000.0, 1200.0])
    other.summary["hospital_capacity"] = {"beds_per_100k": 300.0, "beds": 3.0, "days_over_capacity": 0}
    note = table_note([base, other])
    assert (
        " The runs are measured against different hospital capacities (base: 55, other: 300 beds per 100,000): "
        "each run's peak / capacity and days over capacity are against its own capacity, so they differ by more "
        "than the interventions' effect." in note
    )
    assert "different hospital capacities" not in table_note([base, _tiny_run("same", [30.0, 32.0], [0.0, 0.0])])


def test_note_gives_the_county_factors_in_the_runs_order():
    """The factors to the region's residents came out of a set, in hash order: a first run of
    5,000 agents was listed after a second of 4,000."""
    runs = [_tiny_run("base", [60.0, 140.0], [0.0, 0.0], agents=5000), _tiny_run("other", [30.0], [9.0], agents=4000)]
    for run in runs:
        run.summary["region_population"] = 2252782
    factors = "(2,252,782 residents / 5,000 agents = x 450.6; 2,252,782 residents / 4,000 agents = x 563.2)"
    assert factors in table_note(runs)


def test_fieller_interval_of_independent_runs_counts_each_runs_cost_and_admissions_covariance():
    """Independent runs (no seed): the extra cost per agent is E = C1 - C0 and the averted
    admissions per agent A = H0 - H1, from the runs' replicate means. The runs are independent,
    so Var(E) = var(c0)/n0 + var(c1)/n1 and Var(A) likewise, and within a run cost and admissions
    enter with opposite signs: Cov(E, A) = -cov(c0, h0)/n0 - cov(c1, h1)/n1. Fieller's ends are
    the ratios R at which (E - R A) / sqrt(Var(E) + R^2 Var(A) - 2 R Cov(E, A)) reaches the t
    quantile of the smaller run's replicates less one (here t(0.975, 4)). Cost and admissions move
    together within each run here, so a covariance taken with the wrong sign moves both ends."""
    base = _tiny_run("base", [100.0, 110.0, 95.0, 105.0, 102.0], [10.0, 14.0, 8.0, 12.0, 11.0])
    other = _tiny_run("other", [50.0, 58.0, 47.0, 55.0, 52.0], [1000.0, 1100.0, 950.0, 1080.0, 1020.0])
    row = comparison_table([base, other]).iloc[1]
    assert row.averted_by == "independent runs"
    n, agents = 5, 1000
    h0, h1 = (np.array(r.timeseries.new_hospitalizations) / agents for r in (base, other))
    c0, c1 = (np.array(r.costs.unit_cost) / agents for r in (base, other))
    extra, avert = c1.mean() - c0.mean(), h0.mean() - h1.mean()
    var_e = (np.var(c0, ddof=1) + np.var(c1, ddof=1)) / n
    var_a = (np.var(h0, ddof=1) + np.var(h1, ddof=1)) / n
    cov_ea = -(np.cov(c0, h0)[0, 1] + np.cov(c1, h1)[0, 1]) / n
    assert cov_ea < 0  # the term under test is not 0

    def t_of(r: float) -> float:
        return abs(extra - r * avert) / math.sqrt(var_e + r**2 * var_a - 2 * r * cov_ea)

    low, high = row.cost_per_averted_low, row.cost_per_averted_high
    assert row.cost_per_averted_hospitalization == pytest.approx(extra / avert)
    assert low < extra / avert < high
    t_crit = stats.t.ppf(0.975, n - 1)
    assert (t_of(low), t_of(high)) == pytest.approx((t_crit, t_crit), rel=1e-9)


def test_a_run_that_averts_exactly_no_hospitalization_has_no_cost_per_averted_hospitalization():
    """The same admissions as the first run at a higher cost: nothing averted, so the cost per
    averted hospitalization is blank, as for a run that averts fewer than none (not an infinite
    cost from dividing by 0), and so are its interval's ends."""
    base = _tiny_run("base", [60.0, 140.0], [0.0, 0.0])
    same = _tiny_run("same", [100.0, 100.0], [500.0, 700.0])  # mean 100 admissions, as the base's
    row = comparison_table([base, same]).iloc[1]
    assert row.hospitalizations == base.timeseries.new_hospitalizations.mean() == 100.0
    assert math.isnan(row.cost_per_averted_hospitalization)
    assert math.isnan(row.cost_per_averted_low) and math.isnan(row.cost_per_averted_high)


def test_note_says_what_a_negative_number_averted_is_and_names_the_runs():
    """A run with more admissions than the first averts a negative number (worse: 120.5 a run of
    1,000 agents against the base's 101, -1,950 per 100,000). The table showed it as '-1,950.0
    hospitalizations averted' and the region's table as a negative count averted, and the note
    said only that the cost per averted hospitalization is blank 'for a run that averts none'."""
    base = _tiny_run("base", [100.0, 104.0, 98.0, 102.0], [0.0] * 4)
    worse = _tiny_run("worse", [120.0, 118.0, 123.0, 121.0], [50.0] * 4)
    fewer = _tiny_run("fewer", [10.0, 12.0, 11.0, 9.0], [300.0] * 4)
    for run in (base, worse, fewer):
        run.summary |= {"region": "King County, WA", "region_population": 2252782}
    table = comparison_table([base, worse, fewer])
    assert table.hospitalizations_averted_per_100k.tolist()[1:] == pytest.approx([-1950.0, 9050.0])
    assert table.loc[1].filter(like="cost_per_averted").isna().all()
    note = table_note([base, worse, fewer], table)
    negative = "A negative number averted is that many more than the first run, base: more hospitalizations in worse."
    assert negative in note
    assert "blank for the first run and for a run that averts none (or has more than the first run)" in note
    assert "A negative number averted" not in table_note([base, fewer])
    assert "A negative number averted is that many more than the first run." in markdown(table)  # the region's table


def test_note_names_a_cost_per_averted_interval_that_includes_0():
    """Admissions fall far beyond noise (about 9,000 per 100,000, low end above 0), but the extra
    cost varies from $0 to $900 between replicates (mean $302.5, sd $415: within t(3) sds of 0),
    so Fieller's interval runs from below 0 to above the ratio. The table read '3.34 (-4.13 to
    10.65)' and the note, which says a negative cost per averted hospitalization means fewer
    hospitalizations for less money, said nothing: a reader took the low end for a possible
    saving. A bounded Fieller interval includes 0 exactly when the extra cost's own t interval
    does; with steady costs it excludes 0 and the note is silent."""
    base = _tiny_run("base", [100.0, 104.0, 98.0, 102.0], [0.0] * 4)
    noisy = _tiny_run("noisy", [10.0, 12.0, 11.0, 9.0], [0.0, 300.0, 10.0, 900.0])
    table = comparison_table([base, noisy])
    row = table.iloc[1]
    assert row.hospitalizations_averted_low > 0
    assert row.cost_per_averted_low < 0 < row.cost_per_averted_hospitalization < row.cost_per_averted_high
    costs = np.array([0.0, 300.0, 10.0, 900.0])
    assert abs(costs.mean()) <= stats.t.ppf(0.975, 3) * costs.std(ddof=1) / 2  # the extra cost within noise
    expected = (
        "The 95% interval of the cost per averted hospitalization includes 0 for noisy: the cost differs from "
        "base's by less than the replicates' noise, so an end below 0 is not a saving the runs show; run more"
    )
    assert expected in table_note([base, noisy], table)
    steady = _tiny_run("steady", [10.0, 12.0, 11.0, 9.0], [290.0, 300.0, 310.0, 300.0])
    table = comparison_table([base, steady])
    assert table.iloc[1].cost_per_averted_low > 0
    assert "includes 0 for" not in table_note([base, steady], table)
