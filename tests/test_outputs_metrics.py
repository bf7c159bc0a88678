"""The run's figures on a tiny hand-built result: summary.json (peaks, days and replicates over
capacity, second difference), the reference metrics (the reference's row shift, peak of the mean
HOSPITALIZED curve, rate, cumulative infected at given rows, tests, doses and cost), the result
tables (timeseries, by_age, by_tract per 100,000) and the console summary.

Every expectation below is worked out by hand from the counts in :func:`tiny_result`, not copied
from the code's output."""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from abm.engine.disease import AGE_GROUP_LABELS, NUM_AGE_GROUPS, Stage
from abm.engine.recorder import SimulationResult
from abm.outputs import tables
from abm.outputs.compare import comparison_table, markdown, table_note
from abm.outputs.peaks import peak, peak_at_end
from abm.outputs.plots import RunTables
from abm.outputs.reference_results import ReferenceMetrics, qualitative_claims, reference_metrics
from abm.outputs.summary import summarize
from abm.outputs.summary_table import by_age_table
from abm.plurals import counted

H, ICU, HR, D, A, S, R = (
    Stage.HOSPITALIZED,
    Stage.CRITICAL_ICU,
    Stage.HOSPITALIZED_RECOVERING,
    Stage.DEATH,
    Stage.ASYMPTOMATIC,
    Stage.SUSCEPTIBLE,
    Stage.RECOVERED,
)

# 10 agents, 2 replicates, 5 days. Age group 0 (8 agents, tract 0) and age group 8 (2 agents,
# tract 1); tract 2 has no agent. Counts at the end of each day, [replicate][day]:
#   replicate 0, all ages: S 9 7 4 3 3; H 0 0 2 1 0; ICU 0 0 1 1 0; HR 0 0 0 1 1; D 0 0 0 0 1
#   replicate 1, all ages: S 9 8 6 5 5; H 0 0 0 1 1
# (the rest asymptomatic or recovered). Age group 8 of replicate 0: S 2 2 1 1 1, and its other
# agent is the one in ICU on days 2-3 who dies on day 4; age group 8 of replicate 1: S 2 throughout.
ALL = {
    0: [
        {S: 9, A: 1},
        {S: 7, A: 3},
        {S: 4, H: 2, ICU: 1, A: 3},
        {S: 3, H: 1, ICU: 1, HR: 1, A: 1, R: 3},
        {S: 3, HR: 1, D: 1, R: 5},
    ],
    1: [{S: 9, A: 1}, {S: 8, A: 2}, {S: 6, A: 4}, {S: 5, H: 1, A: 4}, {S: 5, H: 1, R: 4}],
}
OLD = {
    0: [{S: 2}, {S: 2}, {S: 1, ICU: 1}, {S: 1, ICU: 1}, {S: 1, D: 1}],
    1: [{S: 2}] * 5,
}
# New infections per day: replicate 0: 1 2 3 1 0 (the 80+ agent on day 2), replicate 1: 1 1 2 1 0;
# introduced (not by transmission): the seed on day 0, and in replicate 0 a hook's 3 on day 2.
NEW = {0: [1, 2, 3, 1, 0], 1: [1, 1, 2, 1, 0]}
NEW_OLD = {0: [0, 0, 1, 0, 0], 1: [0] * 5}
INTRODUCED = np.array([[1, 1], [0, 0], [3, 0], [0, 0], [0, 0]])
# Entries: admissions r0 day 2 (2), r1 day 3 (1); ICU r0 day 2; death r0 day 4.
ENTRIES = {(2, 0, H): 2, (3, 1, H): 1, (2, 0, ICU): 1, (4, 0, D): 1}
# Costs: r0: 4 PCR tests on day 1 ($5) and 3 doses on day 1 ($20); r1: 2 PCR tests on day 2,
# 1 antigen test on day 3 ($5): totals r0 $80, r1 $15.
COSTS = pd.DataFrame(
    {
        "item": ["test_pcr", "vaccine_dose", "test_pcr", "test_antigen"],
        "day": [1, 1, 2, 3],
        "replicate": [0, 0, 1, 1],
        "count": [4.0, 3.0, 2.0, 1.0],
        "unit_cost": [5.0, 20.0, 5.0, 5.0],
        "cost": [20.0, 60.0, 10.0, 5.0],
    }
)
BEDS_PER_100K = 15_000.0  # 1.5 beds for the 10 agents
# A region of 1,000 residents: the 10 agents stand for 100 residents each.
REGION_META = {"scenario": "tiny", "region": "Tiny County", "region_population": 1000}


def tiny_result() -> SimulationResult:
    """The hand-built result described above."""
    days, reps = 5, 2
    by_age = np.zeros((days, reps, NUM_AGE_GROUPS, len(Stage)), dtype=np.int64)
    new_by_age = np.zeros((days, reps, NUM_AGE_GROUPS), dtype=np.int64)
    entries = np.zeros((days, reps, len(Stage)), dtype=np.int64)
    for r in range(reps):
        for d in range(days):
            for stage, n in ALL[r][d].items():
                by_age[d, r, 0, stage] += n
            for stage, n in OLD[r][d].items():
                by_age[d, r, 8, stage] += n
                by_age[d, r, 0, stage] -= n
            new_by_age[d, r, 8] = NEW_OLD[r][d]
            new_by_age[d, r, 0] = NEW[r][d] - NEW_OLD[r][d]
    assert (by_age >= 0).all() and (by_age.sum(axis=(2, 3)) == 10).all()
    for (d, r, stage), n in ENTRIES.items():
        entries[d, r, stage] = n
    by_tract = np.zeros((days, reps, 3, len(Stage)), dtype=np.int64)
    by_tract[:, :, 0], by_tract[:, :, 1] = by_age[:, :, 0], by_age[:, :, 8]
    new_by_tract = np.zeros((days, reps, 3), dtype=np.int64)
    new_by_tract[:, :, 0], new_by_tract[:, :, 1] = new_by_age[:, :, 0], new_by_age[:, :, 8]
    return SimulationResult(
        agents=10,
        replicates=reps,
        stages_by_tract=by_tract,
        new_by_tract=new_by_tract,
        stages_by_age=by_age,
        new_by_age=new_by_age,
        entries=entries,
        costs=COSTS,
        cost_totals=np.array([80.0, 15.0]),
        engine_seconds=0.0,
        introduced=INTRODUCED,
    )


def test_replicates_whose_epidemic_is_over():
    """On the last day replicate 0 has one agent in step-down care and replicate 1 one in
    hospital: neither epidemic is over. Sent home (recovered), replicate 0's is over, then both."""
    res = tiny_result()
    assert summarize(res, {"scenario": "tiny"}, BEDS_PER_100K)["replicates_epidemic_over"] == 0
    for replicate, stage in ((0, Stage.HOSPITALIZED_RECOVERING), (1, Stage.HOSPITALIZED)):
        res.stages_by_age[-1, replicate, 0, stage] -= 1
        res.stages_by_age[-1, replicate, 0, Stage.RECOVERED] += 1
        over = summarize(res, {"scenario": "tiny"}, BEDS_PER_100K)["replicates_epidemic_over"]
        assert over == replicate + 1


@pytest.mark.parametrize("stage", [Stage.ASYMPTOMATIC, Stage.PRESYMPTOMATIC_MILD, Stage.MILD_SYMPTOMS])
def test_an_epidemic_with_someone_infected_outside_hospital_is_not_over(stage):
    """Over means no one infected on the last day, in hospital or not: with every hospital stage
    emptied (both replicates over, as above), one agent of replicate 1 still ``stage`` leaves
    only replicate 0's epidemic over."""
    res = tiny_result()
    for replicate, hospital in ((0, Stage.HOSPITALIZED_RECOVERING), (1, Stage.HOSPITALIZED)):
        res.stages_by_age[-1, replicate, 0, hospital] -= 1
        res.stages_by_age[-1, replicate, 0, Stage.RECOVERED] += 1
    res.stages_by_age[-1, 1, 0, Stage.RECOVERED] -= 1
    res.stages_by_age[-1, 1, 0, stage] += 1
    assert summarize(res, {"scenario": "tiny"}, BEDS_PER_100K)["replicates_epidemic_over"] == 1


def test_summary_by_age_of_a_hand_built_result():
    """Age group 0 (8 agents): susceptible at the end r0 3 - 1 = 2, r1 5 - 2 = 3, so 6 and 5
    infected; no deaths (replicate 0's death is the 80+ agent's). 80+ (2 agents): 1 and 0
    infected, 1 and 0 dead: 100 deaths per 100 infected. Empty groups: no share, no ratio.
    The report's table shows the same, in words."""
    s = summarize(tiny_result(), {"scenario": "tiny"}, BEDS_PER_100K)
    young, old = s["by_age"][0], s["by_age"][8]
    assert [g["age_group"] for g in s["by_age"]] == AGE_GROUP_LABELS
    assert young == {
        "age_group": "0-9",
        "agents": 8,
        "infected": pytest.approx({"mean": 5.5, "sd": math.sqrt(0.5), "share": 5.5 / 8}),
        "deaths": {"mean": 0.0, "sd": 0.0},
        "deaths_per_100_infected": 0.0,
    }
    assert old["agents"] == 2 and old["infected"] == pytest.approx({"mean": 0.5, "sd": math.sqrt(0.5), "share": 0.25})
    assert old["deaths"] == pytest.approx({"mean": 0.5, "sd": math.sqrt(0.5)})
    assert old["deaths_per_100_infected"] == 100.0
    empty = s["by_age"][4]
    assert empty["agents"] == 0 and empty["infected"]["share"] is None and empty["deaths_per_100_infected"] is None
    table = by_age_table(s)
    assert table.rows[0] == ["0-9", "8", "5.5 ± 0.71", "68.8%", "0 ± 0", "0"]
    assert table.rows[8] == ["80+", "2", "0.5 ± 0.71", "25.0%", "0.5 ± 0.71", "100.0"]
    assert table.rows[4] == ["40-49", "0", "0 ± 0", "", "0 ± 0", ""]


def test_summary_of_a_hand_built_result():
    s = summarize(tiny_result(), {"scenario": "tiny"}, BEDS_PER_100K)
    # Mean HOSPITALIZED: 0 0 1 1 0.5: the peak is 1, first on day 2, not held to the end.
    assert s["peak_hospitalized"] == {"value": 1.0, "day": 2, "per_100k": 10_000.0, "at_end": False}
    # Mean beds in use (HOSPITALIZED + ICU + step-down): r0 0 0 3 3 1, r1 0 0 0 1 1: 0 0 1.5 2 1.
    assert s["peak_hospital_occupancy"] == {"value": 2.0, "day": 3, "per_100k": 20_000.0, "at_end": False}
    assert s["peak_icu"] == {"value": 0.5, "day": 2, "per_100k": 5_000.0, "at_end": False}
    # Transmitted (new less introduced): r0 0 2 0 1 0, r1 0 1 2 1 0: mean 0 1.5 1 1 0 (all new
    # infections would peak at 2.5 on day 2).
    assert s["peak_new_infections"] == {"value": 1.5, "day": 1, "per_100k": 15_000.0, "at_end": False}
    # Capacity 1.5 beds: the mean curve is over it (strictly) on day 3 only (it equals it on
    # day 2); replicate 0 goes over (3 beds), replicate 1 never (at most 1).
    assert s["hospital_capacity"] == {
        "beds_per_100k": BEDS_PER_100K,
        "beds": 1.5,
        "days_over_capacity": 1,
        "replicates_over_capacity": 1,
    }
    # ICU r0 0 0 1 1 0, r1 0: mean 0 0 0.5 0.5 0. Without an ICU capacity, none; with 4,000
    # ICU beds per 100,000 (0.4 beds for 10 agents) the mean is over it on days 2 and 3, and
    # replicate 0 alone ever is.
    assert s["icu_capacity"] is None
    icu = summarize(tiny_result(), {"scenario": "tiny"}, BEDS_PER_100K, None, 4000.0)["icu_capacity"]
    assert icu == {"beds_per_100k": 4000.0, "beds": 0.4, "days_over_capacity": 2, "replicates_over_capacity": 1}
    # Cumulative infected r0 1 3 6 7 7, r1 1 2 4 5 5 (mean 1 2.5 5 6 6: second differences 1
    # -1.5 -1), but r0's 3 introduced on day 2 are no rise in the rate: by transmission the mean
    # cumulative is 0 1.5 2.5 3.5 3.5, first differences 1.5 1 1 0, second -0.5 0 -1.
    assert s["peak_infection_rate_2nd_difference"] == 0.0
    assert s["cumulative_infected"] == pytest.approx({"mean": 6.0, "sd": math.sqrt(2), "share": 0.6})
    assert s["deaths"] == pytest.approx({"mean": 0.5, "sd": math.sqrt(0.5)})
    assert s["total_cost"] == pytest.approx({"mean": 47.5, "sd": 65 / math.sqrt(2)})
    assert s["scenario"] == "tiny" and (s["agents"], s["days"], s["replicates"]) == (10, 5, 2)
    assert s["region_scaled"] is None  # no region_population in the meta


def test_region_scaled_figures_of_a_hand_built_result():
    """Each count x 1,000 residents / 10 agents = 100, worked out from the counts above."""
    s = summarize(tiny_result(), REGION_META, BEDS_PER_100K, None, 4000.0)
    scaled = s["region_scaled"]
    assert scaled.keys() == {
        "factor", "cumulative_infected", "hospitalizations", "deaths", "total_cost", "peak_hospitalized",
        "peak_hospital_occupancy", "peak_icu", "hospital_capacity_beds", "icu_capacity_beds",
    }  # fmt: skip
    assert scaled["factor"] == 100.0
    assert scaled["cumulative_infected"] == pytest.approx({"mean": 600.0, "sd": 100 * math.sqrt(2)})  # 7 and 5
    assert scaled["hospitalizations"] == pytest.approx({"mean": 150.0, "sd": 100 * math.sqrt(0.5)})  # 2 and 1
    assert scaled["deaths"] == pytest.approx({"mean": 50.0, "sd": 100 * math.sqrt(0.5)})
    assert scaled["total_cost"] == pytest.approx({"mean": 4750.0, "sd": 6500 / math.sqrt(2)})  # $80 and $15
    # Peaks of the mean curves (1 hospitalized, 2 beds, 0.5 in ICU), and the beds: 15,000 and
    # 4,000 per 100,000 of the 1,000 residents.
    assert [scaled[k] for k in ("peak_hospitalized", "peak_hospital_occupancy", "peak_icu")] == pytest.approx(
        [100.0, 200.0, 50.0]
    )
    assert (scaled["hospital_capacity_beds"], scaled["icu_capacity_beds"]) == pytest.approx((150.0, 40.0))
    # The unscaled keys are as they were; without an ICU figure, no ICU beds.
    assert s["cumulative_infected"] == pytest.approx({"mean": 6.0, "sd": math.sqrt(2), "share": 0.6})
    assert summarize(tiny_result(), REGION_META, BEDS_PER_100K)["region_scaled"]["icu_capacity_beds"] is None


def test_a_curve_that_stays_at_zero_has_no_peak_day():
    assert peak(np.zeros((4, 2)), 10) == {"value": 0.0, "day": None, "per_100k": 0.0, "at_end": False}


@pytest.mark.parametrize(
    ("curves", "expected", "end"),
    [
        # [day, replicate]; the mean curve in the comment. Rising to the last day: first reached then.
        ([[0, 0], [1, 1], [2, 2], [3, 5]], {"value": 4.0, "day": 3, "per_100k": 4000.0, "at_end": True}, "rising"),
        # A flat top from day 1 to the last day (0.5, 2, 2, 2): the day is the top's first, not rising.
        ([[0, 1], [2, 2], [1, 3], [3, 1]], {"value": 2.0, "day": 1, "per_100k": 2000.0, "at_end": True}, "again"),
        # Up to the maximum, down, and back to it on the last day (1, 3, 2, 3): the first day again.
        ([[1, 1], [3, 3], [2, 2], [4, 2]], {"value": 3.0, "day": 1, "per_100k": 3000.0, "at_end": True}, "again"),
        # A peak in the middle, lower on the last day (1, 2.5, 1): not at the end.
        ([[1, 1], [2, 3], [1, 1]], {"value": 2.5, "day": 1, "per_100k": 2500.0, "at_end": False}, None),
        # A noisy mean of replicates reaching 1.5 on days 1 and 3 (0, 1.5, 1, 1.5, 0.5): the first.
        ([[0, 0], [3, 0], [1, 1], [0, 3], [1, 0]], {"value": 1.5, "day": 1, "per_100k": 1500.0, "at_end": False}, None),
        # No one: no peak day, nothing at the end.
        ([[0, 0], [0, 0]], {"value": 0.0, "day": None, "per_100k": 0.0, "at_end": False}, None),
    ],
)
def test_the_peak_day_is_the_first_day_of_the_maximum_and_at_end_says_how_the_curve_ends(curves, expected, end):
    """A mean curve flat at its maximum to the last day was said to be "still rising"; it reaches
    its maximum again there: the peak may come later, but the curve need not be rising."""
    p = peak(np.array(curves, dtype=np.float64), 100)
    assert p == expected
    assert peak_at_end(p, len(curves)) == end


def test_a_summary_without_at_end_is_at_its_end_when_its_peak_day_is_the_last():
    assert peak_at_end({"value": 2.0, "day": 3, "per_100k": 1.0}, 4) == "rising"
    assert peak_at_end({"value": 2.0, "day": 2, "per_100k": 1.0}, 4) is None


def test_counted_says_one_replicate_and_more_replicates():
    assert [counted(n, "replicate") for n in (0, 1, 2, 1000)] == [
        "0 replicates",
        "1 replicate",
        "2 replicates",
        "1,000 replicates",
    ]


def test_reference_metrics_of_a_hand_built_result():
    """The reference code's row t is the end of day t - 1 (row 0: the initial state, here the end
    of day 0): rows 0-4 are the ends of days 0, 0, 1, 2, 3."""
    m = reference_metrics(tiny_result(), at_days=(2, 3, 9))
    # Mean HOSPITALIZED by row: 0 0 0 1 1: the peak is 1, first on row 3 (the end of day 2).
    assert (m.peak_hospitalized, m.peak_day, m.near_peak_days) == (1.0, 3, (3, 4))
    # Mean cumulative infected by row: 1 1 2.5 5 6; first differences 0 1.5 2.5 1, second 1.5 1 -1.5.
    assert m.rate == 1.5
    # The last row is the end of day 3: r0 7, r1 5.
    assert (m.cumulative, m.cumulative_sd) == (6.0, pytest.approx(math.sqrt(2)))
    # Rows 2 and 3 (ends of days 1 and 2): r0 3 and 6, r1 2 and 4; row 9 is past the run.
    assert m.cumulative_at == {2: 2.5, 3: 5.0}
    assert m.cumulative_at_sd == pytest.approx({2: math.sqrt(0.5), 3: math.sqrt(2)})
    # By age at the last row: 80+: r0 1 (the ICU case), r1 0; ages 0-9: r0 6, r1 5.
    assert m.cumulative_by_age.tolist() == [5.5, 0, 0, 0, 0, 0, 0, 0, 0.5]
    # Per replicate on average: tests (4 + 2 + 1) / 2 = 3.5, doses 3 / 2 = 1.5; cost (80 + 15) / 2.
    assert (m.tests, m.doses, m.cost) == (3.5, 1.5, 47.5)
    assert (m.agents, m.replicates) == (10, 2)


def test_qualitative_claim_q7_reads_shares_of_the_run_s_own_agents():
    """Q-7 compares the share infected at t = 120 (81% for NI, about 36% with every
    intervention): a share of each run's agents, as Q-2 and Q-4 scale theirs, not of 100,000."""

    def metrics(agents: int, at_120: float) -> ReferenceMetrics:
        return ReferenceMetrics(
            agents=agents, replicates=3, peak_hospitalized=10.0, peak_day=60, rate=1.0, cumulative=at_120,
            cumulative_sd=0.0, cumulative_at={120: at_120}, cumulative_at_sd={120: 0.0},
            cumulative_by_age=np.ones(NUM_AGE_GROUPS), cost=0.0, tests=0.0, doses=0.0,
        )  # fmt: skip

    names = ["ni", "sq", "vacc", "ct_app70", "vacc_budget", "vacc_t30", "vacc_t60", "vacc_t30_ct", "vacc_t60_ct"]
    for agents in (100_000, 20_000):
        m = {k: metrics(agents, 0.5 * agents) for k in names}
        m["ni"], m["vacc_ct"] = metrics(agents, 0.81 * agents), metrics(agents, 0.36 * agents)
        text, holds = {cid: (text, holds) for cid, text, holds in qualitative_claims(m)}["Q-7"]
        assert holds and text.endswith("at t = 120 from 81% (81%) to 36% (about 36%)")


def test_result_tables_of_a_hand_built_result():
    res = tiny_result()
    ts = tables.timeseries(res).set_index(["day", "replicate"])
    assert ts.loc[(3, 0), ["hospitalized", "icu", "hospital_occupancy", "deaths"]].tolist() == [1, 1, 3, 0]
    # Active: every stage but susceptible, recovered and dead: r0 day 4 has only the step-down agent.
    assert ts.loc[(4, 0), "active"] == 1 and ts.loc[(3, 0), "active"] == 4
    assert ts["new_hospitalizations"].groupby("replicate").sum().tolist() == [2, 1]
    assert ts["new_icu"].groupby("replicate").sum().tolist() == [1, 0]
    assert ts["new_deaths"].groupby("replicate").sum().tolist() == [1, 0]
    assert ts.loc[(2, 1), "cumulative_infected"] == 4 and ts.loc[(2, 0), "new_infections"] == 3

    by_age = tables.by_age(res).set_index(["day", "replicate", "age_group"])
    cols = ["agents", "cumulative_infected", "icu", "new_infections"]
    assert by_age.loc[(2, 0, "80+"), cols].tolist() == [2, 1, 1, 1]
    assert by_age.loc[(2, 1, "80+"), ["agents", "cumulative_infected", "icu"]].tolist() == [2, 0, 0]
    assert by_age.loc[(4, 1, "0-9"), ["agents", "cumulative_infected"]].tolist() == [8, 5]
    assert by_age.xs("10-19", level="age_group")["agents"].eq(0).all()

    by_tract = tables.by_tract(res, pd.DataFrame({"geoid": ["a", "b", "c"]})).set_index(["day", "geoid"])
    # Means over the two replicates, per 100,000 of the tract's agents (none in tract c).
    # Day 4: tract a (8 agents) cumulative r0 6, r1 5; tract b (2 agents) r0 1, r1 0.
    day4 = by_tract.loc[4]
    assert day4["agents"].tolist() == [8, 2, 0]
    assert day4["cumulative_infected"].tolist() == [5.5, 0.5, 0.0]
    assert day4["cumulative_per_100k"].iloc[:2].tolist() == [5.5 / 8 * 1e5, 0.5 / 2 * 1e5]
    assert math.isnan(day4["cumulative_per_100k"].iloc[2])
    # Day 2: new infections a: r0 2, r1 2; b: r0 1, r1 0; beds in use a: r0 2, r1 0; b: r0 1.
    assert by_tract.loc[2, "new_infections"].tolist() == [2.0, 0.5, 0.0]
    assert by_tract.loc[2, "hospital_occupancy"].tolist() == [1.0, 0.5, 0.0]
    assert by_tract.loc[4, "deaths"].tolist() == [0.0, 0.5, 0.0]


def test_by_tract_means_are_written_without_float_noise():
    """A tract of 3 agents, one of them infected in 1 of 10 replicates: its mean cumulative infected
    is written as 0.1 (3 - 2.9 in floats is 0.10000000000000009)."""
    reps = 10
    stages = np.zeros((1, reps, 1, len(Stage)), dtype=np.int64)
    stages[0, :, 0, S] = 3
    stages[0, 0, 0, S], stages[0, 0, 0, A] = 2, 1
    new = np.zeros((1, reps, 1), dtype=np.int64)
    new[0, 0, 0] = 1
    res = SimulationResult(
        agents=3,
        replicates=reps,
        stages_by_tract=stages,
        new_by_tract=new,
        stages_by_age=stages,
        new_by_age=new,
        entries=np.zeros((1, reps, len(Stage)), dtype=np.int64),
        costs=COSTS.iloc[:0],
        cost_totals=np.zeros(reps),
        engine_seconds=0.0,
    )
    text = tables.by_tract(res, pd.DataFrame({"geoid": ["a"]})).to_csv(index=False)
    fields = text.splitlines()[1].split(",")
    assert fields[:8] == ["0", "a", "3", "0.1", "0.1", "0.1", "0.0", "0.0"]
    assert float(fields[8]) == pytest.approx(1e4 / 3, rel=1e-12)


def test_the_console_summary_of_a_hand_built_summary(monkeypatch, tmp_path: Path):
    """The console table says the summary's figures: the hospital peak per 100,000, a peak held
    to the last day (each curve its own), the replicates that went over capacity, the share."""
    from rich.console import Console

    from abm import cli

    buffer = io.StringIO()
    monkeypatch.setattr(cli, "out_console", Console(file=buffer, width=200, markup=False))
    s = summarize(tiny_result(), REGION_META, BEDS_PER_100K)
    s["peak_hospital_occupancy"]["at_end"] = True  # only this curve is at its peak on the last day
    s["hospital_capacity"]["days_over_capacity"] = 3  # edited so that days and replicates differ
    cli.print_summary(s, 0.25, tmp_path)
    text = buffer.getvalue()
    cells = [line.split("│") for line in text.splitlines() if line.count("│") == 4]
    rows = {c[1].strip(): c[2].strip() for c in cells}
    assert rows["cumulative infected"] == "6 ± 1.4 (60.0%)"
    assert rows["epidemic over by the last day"] == "0 of 2 replicates"
    assert rows["peak hospitalized (mean curve)"] == "1.0 on day 2 (10,000/100k)"
    assert rows["peak hospital beds incl. ICU"] == (
        "2.0 on day 3 (20,000/100k) (maximum reached again on the last day: the peak may come later)"
    )
    # The line that days over capacity are counted against, in beds of the agents and per 100,000.
    assert rows["hospital capacity (beds)"] == "1.5 (15,000/100k)"
    assert rows["days over capacity (mean curve)"] == "3 (1 of 2 replicates went over)"
    assert rows["deaths"] == "0.5 ± 0.71"
    assert rows["total cost ($)"] == "48 ± 46"
    # The region's column: each count x 100 (1,000 residents / 10 agents) in whole numbers, by
    # the figures worked out in test_region_scaled_figures_of_a_hand_built_result; none for the
    # rows that are no counts.
    head = next(line for line in text.splitlines() if "measure" in line).split("┃")
    assert [h.strip() for h in head[1:4]] == ["measure", "simulated agents", "Tiny County (x 100.0)"]
    region = {c[1].strip(): c[3].strip() for c in cells}
    assert region == {
        "cumulative infected": "600 ± 141",
        "epidemic over by the last day": "",
        "peak hospitalized (mean curve)": "100",
        "peak hospital beds incl. ICU": "200",
        "hospital capacity (beds)": "150",
        "days over capacity (mean curve)": "",
        "peak ICU beds": "50",
        "hospitalizations (admissions)": "150 ± 71",
        "deaths": "50 ± 71",
        "total cost ($)": "4,750 ± 4,596",
        "engine seconds": "",
    }
    assert (
        "simulated agents: counts and costs of the 10 agents simulated; Tiny County (x 100.0): each count and "
        "cost multiplied by the region's 1,000 residents / 10 agents, which assumes the agents are a "
        "representative sample of the residents, rounded to whole numbers; ± is the sd over replicates"
    ) in " ".join(text.split())


def test_the_console_summary_without_region_scaled_figures(monkeypatch, tmp_path: Path):
    """A summary without region_population (summarize's meta without it) has no region column,
    and the footer says the counts are the agents'."""
    from rich.console import Console

    from abm import cli

    buffer = io.StringIO()
    monkeypatch.setattr(cli, "out_console", Console(file=buffer, width=200, markup=False))
    cli.print_summary(summarize(tiny_result(), {"scenario": "tiny"}, BEDS_PER_100K), 0.25, tmp_path)
    text = buffer.getvalue()
    rows = {c[1].strip(): c[2].strip() for c in (line.split("│") for line in text.splitlines() if line.count("│") == 3)}
    assert rows["cumulative infected"] == "6 ± 1.4 (60.0%)" and "(x " not in text
    assert "counts and costs are for the 10 simulated agents; ± is the sd over replicates" in " ".join(text.split())


def test_the_console_summary_says_how_a_peak_curve_ends_and_counts_replicates(monkeypatch, tmp_path: Path):
    """A curve flat at its maximum to the last day read "(last day: still rising?)", and the title
    "1 replicate(s)": a curve first at its maximum on the last day is still rising, one at it
    again there may peak later; one replicate is singular."""
    from rich.console import Console

    from abm import cli

    buffer = io.StringIO()
    monkeypatch.setattr(cli, "out_console", Console(file=buffer, width=200, markup=False))
    s = summarize(tiny_result(), REGION_META, BEDS_PER_100K)
    s["peak_hospitalized"] = {"value": 1.0, "day": 4, "per_100k": 1e4, "at_end": True}  # day 4 is the last
    s["peak_hospital_occupancy"] = {"value": 2.0, "day": 2, "per_100k": 2e4, "at_end": True}
    s["replicates"] = 1
    cli.print_summary(s, 0.25, tmp_path)
    text = buffer.getvalue()
    rows = {c[1].strip(): c[2].strip() for c in (line.split("│") for line in text.splitlines() if line.count("│") == 4)}
    assert rows["peak hospitalized (mean curve)"] == (
        "1.0 on day 4 (10,000/100k) (still rising on the last day: the peak may come later)"
    )
    assert rows["peak hospital beds incl. ICU"] == (
        "2.0 on day 2 (20,000/100k) (maximum reached again on the last day: the peak may come later)"
    )
    assert rows["days over capacity (mean curve)"] == "1 (1 of 1 replicate went over)"
    assert text.splitlines()[0].strip() == "tiny: 10 agents, 5 days, 1 replicate"
    assert "replicate(s)" not in text and "?" not in text


def test_the_console_summary_of_a_run_with_no_one_in_hospital(monkeypatch, tmp_path: Path):
    """Both hospital rows say why they are 0 (the beds row said a bare 0.0 under "(no one
    hospitalized)")."""
    from rich.console import Console

    from abm import cli

    buffer = io.StringIO()
    monkeypatch.setattr(cli, "out_console", Console(file=buffer, width=200, markup=False))
    s = summarize(tiny_result(), REGION_META, BEDS_PER_100K)
    for key in ("peak_hospitalized", "peak_hospital_occupancy"):
        s[key] = {"value": 0.0, "day": 0, "per_100k": 0.0, "at_end": False}
    cli.print_summary(s, 0.25, tmp_path)
    lines = buffer.getvalue().splitlines()
    rows = {c[1].strip(): c[2].strip() for c in (line.split("│") for line in lines if line.count("│") == 4)}
    assert rows["peak hospitalized (mean curve)"] == "0.0 (no one hospitalized)"
    assert rows["peak hospital beds incl. ICU"] == "0.0 (no one in hospital)"


def test_the_console_summary_of_a_small_outbreak_reads_as_no_zero(monkeypatch, tmp_path: Path):
    """A peak, a share or a rate above 0 is not shown as 0: vacc_ct at its 100,000 agents and 10
    replicates printed "40 ± 24 (0.0%)", "0.3 on day 36 (0/100k)" and "0.1 on day 27 (0/100k)".
    Such a figure gets its first significant digit; larger ones keep their whole numbers."""
    from rich.console import Console

    from abm import cli

    buffer = io.StringIO()
    monkeypatch.setattr(cli, "out_console", Console(file=buffer, width=200, markup=False))
    s = summarize(tiny_result(), REGION_META, BEDS_PER_100K)
    s["cumulative_infected"] = {"mean": 40.0, "sd": 24.0, "share": 0.0004}
    s["peak_hospitalized"] = {"value": 0.3, "day": 36, "per_100k": 0.3, "at_end": False}
    s["peak_hospital_occupancy"] = {"value": 1 / 30, "day": 36, "per_100k": 0.0333, "at_end": False}
    s["peak_icu"] = {"value": 0.1, "day": 27, "per_100k": 0.000049, "at_end": False}
    s["hospital_capacity"] |= {"beds_per_100k": 55.0, "beds": 0.011}
    cli.print_summary(s, 0.25, tmp_path)
    lines = buffer.getvalue().splitlines()
    rows = {c[1].strip(): c[2].strip() for c in (line.split("│") for line in lines if line.count("│") == 4)}
    assert rows["cumulative infected"] == "40 ± 24 (0.04%)"
    assert rows["peak hospitalized (mean curve)"] == "0.3 on day 36 (0.3/100k)"
    assert rows["peak hospital beds incl. ICU"] == "0.03 on day 36 (0.03/100k)"
    assert rows["peak ICU beds"] == "0.1 on day 27 (0.00005/100k)"  # never in powers of ten
    assert rows["hospital capacity (beds)"] == "0.01 (55/100k)"  # 20 agents' share of 55 beds


def hand_run(
    label: str,
    agents: int,
    admissions: list[list[int]],
    cost: list[float],
    seed: int | None = None,
    deaths: list[int] | None = None,
    **summary: object,
) -> RunTables:
    """A run of 4 days: ``admissions[r]`` per day of replicate r, ``deaths[r]`` deaths of
    replicate r on day 2 (default 1 each), ``cost[r]`` booked on day 1 (nothing where 0); the
    summary's other entries from ``summary``; ``seed``: its scenario's (runs of one seed, agents
    and replicates are paired)."""
    reps = len(admissions)
    died = np.array(deaths if deaths is not None else [1] * reps)
    ts = pd.DataFrame(
        {
            "day": np.tile(np.arange(4), reps),
            "replicate": np.repeat(np.arange(reps), 4),
            "new_hospitalizations": np.concatenate(admissions),
            "deaths": np.outer(died, [0, 0, 1, 1]).reshape(-1),
        }
    )
    booked = [(r, c) for r, c in enumerate(cost) if c]
    costs = pd.DataFrame(
        {
            "item": ["vaccine_dose"] * len(booked),
            "day": [1] * len(booked),
            "replicate": [r for r, _ in booked],
            "count": [c / 20 for _, c in booked],
            "unit_cost": [20.0] * len(booked),
        }
    )
    s = {
        "scenario": label,
        "agents": agents,
        "days": 4,
        "replicates": reps,
        "peak_hospital_occupancy": {"value": 3.0, "day": 2, "per_100k": 3e5 / agents, "at_end": False},
        "peak_icu": {"value": 1.0, "day": 2, "per_100k": 1e5 / agents, "at_end": False},
        "hospital_capacity": {"beds": 2.0, "beds_per_100k": 2e5 / agents, "days_over_capacity": 1},
        "cumulative_infected": {"share": 0.5},
        "deaths": {"mean": float(died.mean())},
        "total_cost": {"mean": float(np.mean(cost))},
    } | summary
    return RunTables(label, ts, pd.DataFrame(), costs, s, None if seed is None else {"simulation": {"seed": seed}})


def test_comparison_table_of_hand_built_runs():
    """Admissions are the timeseries' sums per replicate, averaged; the cost per averted
    hospitalization is per agent, against the first run; blank, without an interval, where the
    run averts none; the note names costs resting on noise and a peak held to the last day."""
    base = hand_run("base", 1000, [[0, 4, 6, 0], [0, 6, 8, 0]], [0.0, 0.0], peak_hospital_occupancy={
        "value": 3.0, "day": 2, "per_100k": 300.0, "at_end": True})  # fmt: skip
    # 2,000 agents, admissions 12 and 16 (7 per 1,000 agents against the base's 12), costs $100 and $140.
    cheaper = hand_run("cheaper", 2000, [[0, 6, 6, 0], [0, 8, 8, 0]], [100.0, 140.0])
    # More admissions than the base (13 per 1,000): nothing averted.
    worse = hand_run("worse", 1000, [[0, 6, 7, 0], [0, 7, 6, 0]], [50.0, 50.0])
    # One replicate: 8 admissions, $40.
    single = hand_run("single", 1000, [[0, 4, 4, 0]], [40.0])
    table = comparison_table([base, cheaper, worse, single]).set_index("run")
    assert table["hospitalizations"].tolist() == [12.0, 14.0, 13.0, 8.0]
    assert table.loc["base", ["peak_share_of_capacity", "share_of_days_over_capacity"]].tolist() == [1.5, 0.25]
    # cheaper: $120 / 2,000 agents = 0.06 a head for 0.012 - 0.007 = 0.005 hospitalizations averted a head.
    assert table.loc["cheaper", "cost_per_averted_hospitalization"] == pytest.approx(12.0)
    assert table.loc["single", "cost_per_averted_hospitalization"] == pytest.approx(0.04 / 0.004)
    assert math.isnan(table.loc["base", "cost_per_averted_hospitalization"])
    assert table.loc["worse"].filter(like="cost_per_averted").isna().all()
    # Per 100,000 agents: base 1,000 and 1,400, cheaper 600 and 800 (Welch: independent runs).
    cheaper_row = table.loc["cheaper"]
    assert cheaper_row["hospitalizations_averted_per_100k"] == pytest.approx(500.0)
    assert cheaper_row["hospitalizations_averted_low"] < 500 < cheaper_row["hospitalizations_averted_high"]
    assert cheaper_row["averted_by"] == "independent runs"
    assert table.loc["worse", "hospitalizations_averted_per_100k"] == pytest.approx(-100.0)
    note = table_note([base, cheaper, worse, single])
    # cheaper's interval (1.5 degrees of freedom) includes 0; single's has no interval at all.
    assert (
        "The hospitalizations averted by cheaper are not beyond noise, so their cost per averted hospitalization "
        "is not reliable: run more replicates. The hospitalizations averted by single cannot be told from noise "
        "with one replicate (no interval), so their cost per averted hospitalization is not reliable: run more "
        "replicates." in note
    )
    assert "On the last simulated day the hospital curve of base is at its maximum again: the peak may" in note


def test_the_comparison_table_gives_peak_icu_beds_and_days_over_each_runs_icu_capacity():
    """Peak ICU beds per 100,000 and the days over ICU capacity from each summary; empty where a
    run has no ICU capacity (a region without an ICU figure, an earlier version's folder), and
    the note names ICU capacities that differ."""
    icu = {"beds_per_100k": 6.1, "beds": 0.061, "days_over_capacity": 3, "replicates_over_capacity": 2}
    base = hand_run("base", 1000, [[0, 4, 6, 0]], [0.0], icu_capacity=icu)
    other = hand_run("other", 2000, [[0, 4, 6, 0]], [0.0], icu_capacity=icu | {"days_over_capacity": 0})
    old = hand_run("old", 1000, [[0, 4, 6, 0]], [0.0])  # no icu_capacity at all
    table = comparison_table([base, other, old]).set_index("run")
    assert table["peak_icu_per_100k"].tolist() == [100.0, 50.0, 100.0]  # 1 ICU bed of 1,000 and of 2,000 agents
    assert table.loc[["base", "other"], "days_over_icu_capacity"].tolist() == [3, 0]
    assert math.isnan(table.loc["old", "days_over_icu_capacity"])
    head, _, *rows = markdown(table.reset_index()).splitlines()[:5]
    at = [c.strip() for c in head.split("|")].index("days over ICU capacity")
    assert [row.split("|")[at].strip() for row in rows] == ["3", "0", ""]
    note = " ".join(table_note([base, other, old]).split())
    assert (
        "different ICU capacities (base: 6.1, other: 6.1 ICU beds per 100,000; none for old): each run's days" in note
    )
    assert "ICU capacities" not in table_note([base, other])


def test_cost_per_averted_death_of_hand_built_runs():
    """As for hospitalizations, with deaths: paired runs whose deaths per agent fall by 0.003,
    0.004 and 0.002 for an extra $0.060, $0.075 and $0.065 a head cost 0.0667 / 0.003 = $22.2 per
    averted death (the ratio of means); Fieller's ends reach t(0.975, 2); a run that averts no
    death has none, and the note names deaths averted within noise."""
    from scipy import stats

    base = hand_run("base", 1000, [[0, 9, 0, 0]] * 3, [0.0] * 3, seed=1, deaths=[5, 6, 4])
    other = hand_run("other", 1000, [[0, 9, 0, 0]] * 3, [60.0, 75.0, 65.0], seed=1, deaths=[2, 2, 2])
    same = hand_run("same", 1000, [[0, 9, 0, 0]] * 3, [10.0] * 3, seed=1, deaths=[5, 6, 4])
    table = comparison_table([base, other, same]).set_index("run")
    extra, averted = np.array([0.060, 0.075, 0.065]), np.array([0.003, 0.004, 0.002])
    assert table.loc["other", "deaths_averted_per_100k"] == pytest.approx(300.0)
    assert table.loc["other", "cost_per_averted_death"] == pytest.approx(extra.mean() / averted.mean())

    def t_of(r: float) -> float:
        d = extra - r * averted
        return abs(d.mean()) / (d.std(ddof=1) / np.sqrt(3))

    low, high = table.loc["other", ["cost_per_averted_death_low", "cost_per_averted_death_high"]]
    assert low < extra.mean() / averted.mean() < high
    assert t_of(low) == pytest.approx(stats.t.ppf(0.975, 2)) and t_of(high) == pytest.approx(stats.t.ppf(0.975, 2))
    assert table.loc["same"].filter(like="cost_per_averted_death").isna().all()  # no death averted
    assert math.isnan(table.loc["other", "cost_per_averted_hospitalization"])  # no admission averted
    head, _, *rows = markdown(table.reset_index()).splitlines()[:5]
    at = [c.strip() for c in head.split("|")].index("cost per averted death $ (vs first run, 95% interval)")
    assert rows[1].split("|")[at].strip() == f"{extra.mean() / averted.mean():,.2f} ({low:,.2f} to {high:,.2f})"
    wobbly = hand_run("wobbly", 1000, [[0, 9, 0, 0]] * 3, [30.0] * 3, seed=1, deaths=[2, 7, 3])
    note = " ".join(table_note([base, wobbly]).split())
    assert "The deaths averted by wobbly are not beyond noise, so their cost per averted death is not reliable" in note


def test_paired_cost_per_averted_hospitalization_of_hand_built_runs():
    """Runs of one seed, agents and replicates are paired replicate by replicate. Per agent, the
    extra cost is 0.060 0.075 0.065 and the averted admissions 0.006 0.007 0.007: the ratio of
    means is 10, and Fieller's ends are the ratios R at which the paired t statistic of
    extra - R averted reaches t(0.975, 2)."""
    from scipy import stats

    base = hand_run("base", 1000, [[0, 10, 0, 0], [0, 14, 0, 0], [0, 12, 0, 0]], [0.0] * 3, seed=1)
    other = hand_run("other", 1000, [[0, 4, 0, 0], [0, 7, 0, 0], [0, 5, 0, 0]], [60.0, 75.0, 65.0], seed=1)
    row = comparison_table([base, other]).iloc[1]
    assert row.averted_by == "paired replicates"
    assert row.hospitalizations_averted_per_100k == pytest.approx(2000 / 3)
    assert row.cost_per_averted_hospitalization == pytest.approx(10.0)
    extra, averted = np.array([0.060, 0.075, 0.065]), np.array([0.006, 0.007, 0.007])

    def t_of(r: float) -> float:
        d = extra - r * averted
        return abs(d.mean()) / (d.std(ddof=1) / np.sqrt(3))

    low, high = row.cost_per_averted_low, row.cost_per_averted_high
    assert low < 10 < high
    assert t_of(low) == pytest.approx(stats.t.ppf(0.975, 2)) and t_of(high) == pytest.approx(stats.t.ppf(0.975, 2))
    # Another number of replicates: not paired, though of the same seed and agents.
    fewer = hand_run("fewer", 1000, [[0, 4, 0, 0], [0, 7, 0, 0]], [60.0, 75.0], seed=1)
    assert comparison_table([base, fewer]).iloc[1].averted_by == "independent runs"
    # The same seed on a GPU draws other random streams (and another region, another population):
    # not paired; cuda:0 and cuda:1 are one kind of device.
    for section, key, value, same in [
        ("simulation", "device", "cuda", False),
        ("population", "region", "elsewhere", False),
        ("simulation", "device", "cpu", True),
    ]:
        moved = hand_run("moved", 1000, [[0, 4, 0, 0], [0, 7, 0, 0], [0, 5, 0, 0]], [60.0, 75.0, 65.0], seed=1)
        moved.scenario.setdefault(section, {})[key] = value
        expected = "paired replicates" if same else "independent runs"
        assert comparison_table([base, moved]).iloc[1].averted_by == expected, (section, value)
    on_gpu = [hand_run(n, 1000, [[0, 4, 0, 0]] * 3, [60.0] * 3, seed=1) for n in ("gpu0", "gpu1")]
    on_gpu[0].scenario["simulation"]["device"], on_gpu[1].scenario["simulation"]["device"] = "cuda:0", "cuda:1"
    assert comparison_table(on_gpu).iloc[1].averted_by == "paired replicates"


def test_the_comparison_note_tells_a_rising_curve_from_one_at_its_maximum_again():
    """The note said of every curve at its peak on the last day that it "may still be rising",
    also of one flat at its maximum for days; it names each kind of end (runs of 4 days)."""
    flat = {"value": 3.0, "day": 1, "per_100k": 300.0, "at_end": True}
    rising = {"value": 3.0, "day": 3, "per_100k": 300.0, "at_end": True}
    runs = [
        hand_run("base", 1000, [[0, 4, 6, 0]], [0.0], peak_hospital_occupancy=flat),
        hand_run("late", 1000, [[0, 4, 6, 0]], [0.0], peak_hospital_occupancy=rising),
        hand_run("early", 1000, [[0, 4, 6, 0]], [0.0]),  # its peak on day 2 of 4, not at the end
    ]
    tail = (
        ": the peak may come later, after the run, so the peak shown is a lower bound; run more days. The day "
        "of peak is the first day the mean curve reaches its maximum."
    )
    assert (
        " On the last simulated day the hospital curve of late is still rising and that of base is at its "
        "maximum again" + tail
    ) in table_note(runs)
    assert " On the last simulated day the hospital curve of base is at its maximum again" + tail in table_note(
        runs[::2]
    )
    assert "last simulated day" not in table_note(runs[2:])


def test_each_column_of_the_markdown_table_shows_its_numbers_alike():
    """comparison.md showed "90.00" and "9.00" beside "647" and "5,250" in the same columns: money
    took cents below $100 value by value. A column takes one rule for all its numbers (intervals'
    ends too): whole dollars where every cost but 0 is at least $100, else cents; one decimal
    (more where its smallest number but 0 would read as 0) for the others; comparison.csv keeps
    the full numbers."""
    from abm.outputs.compare import format_cell, shown

    nan, inf = math.nan, math.inf
    table = pd.DataFrame(
        {
            "run": ["a", "b", "c"],
            "agents": [5000, 5000, 12000],
            "total_cost": [0.0, 90.0, 5250.4],
            "cost_per_averted_hospitalization": [nan, 9.004, 647.0],
            "cost_per_averted_low": [nan, -inf, 120.4],
            "cost_per_averted_high": [nan, inf, 1300.0],
            "deaths": [12.34, 0.04, 1.0],
            "cumulative_infected_share": [0.17886, 0.0004, 0.0],
            "hospitalizations_averted_per_100k": [nan, 200.0, 1234.56],
            "hospitalizations_averted_low": [nan, -110.26, 1000.0],
            "hospitalizations_averted_high": [nan, 510.26, 1469.12],
        }
    )
    keys, rows = shown(table)
    assert keys == [
        "run",
        "agents",
        "total_cost",
        "cost_per_averted_hospitalization",
        "deaths",
        "cumulative_infected_share",
        "hospitalizations_averted_per_100k",
    ]
    assert rows == [
        ["a", "5,000", "0.00", "", "12.34", "17.89%", ""],
        ["b", "5,000", "90.00", "9.00 (unbounded)", "0.04", "0.04%", "200.0 (-110.3 to 510.3)"],
        ["c", "12,000", "5,250.40", "647.00 (120.40 to 1,300.00)", "1.00", "0.00%", "1,234.6 (1,000.0 to 1,469.1)"],
    ]
    # Every cost but 0 at least $100: whole dollars, the interval's ends too.
    costly = table.iloc[[0, 2]].assign(total_cost=[0.0, 5250.4])
    assert [row[2:4] for row in shown(costly)[1]] == [["0", ""], ["5,250", "647 (120 to 1,300)"]]
    assert "| c | 12,000 | 5,250.40 | 647.00 (120.40 to 1,300.00) |" in markdown(table)
    # A lone value takes the rule by itself.
    assert format_cell("total_cost", 5250.4) == "5,250" and format_cell("total_cost", 90.0) == "90.00"


def test_a_column_takes_more_decimals_only_where_its_smallest_number_would_read_as_0():
    """The tutorial's comparison showed "$1,058.366 (791.210 to 1,597.908)" per averted
    hospitalization: one interval's end of -$0.007 gave its whole column a third decimal, though
    in cents it reads -0.01, not 0. A column keeps its places unless its smallest number but 0
    would read as 0 there."""
    from abm.outputs.compare import column_places, shown

    nan = math.nan
    table = pd.DataFrame(
        {
            "run": ["ni", "vacc", "ct"],
            "cost_per_averted_hospitalization": [nan, 1058.366, 0.885],
            "cost_per_averted_low": [nan, 791.21, -0.007],
            "cost_per_averted_high": [nan, 1597.908, 1.914],
            "deaths": [59.5, 5.5, 0.07],
        }
    )
    keys, rows = shown(table)
    assert keys == ["run", "cost_per_averted_hospitalization", "deaths"]
    assert rows == [
        ["ni", "", "59.5"],
        ["vacc", "1,058.37 (791.21 to 1,597.91)", "5.5"],
        ["ct", "0.89 (-0.01 to 1.91)", "0.1"],
    ]
    # Where the smallest would read as 0, the column goes down to its first significant digit.
    assert column_places("cost_per_averted_hospitalization", [1058.366, -0.004]) == 3
    assert column_places("deaths", [59.5, 0.04]) == 2
    assert column_places("cumulative_infected_share", [0.5, 0.0004]) == 2
