"""Interventions on tiny hand-built populations, with exact or binomial expectations."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.stats
import torch
from conftest import NO_SEEDS, make_population, quiet_contacts, sim_of

import abm
from abm.engine import DiseaseConfig, Simulation, Stage
from abm.interventions.contact_multipliers import ContactMultipliers, ContactMultipliersConfig
from abm.interventions.digital_tracing import DigitalTracing, DigitalTracingConfig, ownership_probabilities
from abm.interventions.manual_tracing import ManualTracing, ManualTracingConfig
from abm.interventions.quarantine import Quarantine, QuarantineConfig
from abm.interventions.testing import Testing as InterventionTesting  # a name pytest does not collect
from abm.interventions.testing import TestingConfig
from abm.interventions.vaccination import RESIDENTS, Vaccination, VaccinationConfig, priority_classes
from abm.outputs.tables import timeseries
from abm.scenario import ScenarioError, load_scenario, validate

KC_CALIBRATION = Path(__file__).resolve().parents[1] / "scenarios/king_county/calibrate_2020.yaml"


def within(got: float, p: float, n: int, k: float = 4.0) -> bool:
    return abs(got - p) <= k * math.sqrt(max(p * (1 - p), 1e-12) / n)


# ----------------------------------------------------------------------------- vaccination
def test_daily_doses_replaces_the_rate_per_100k_in_the_resolved_scenario():
    """daily_doses replaces daily_doses_per_100k (default 300): the resolved scenario shows the
    rule in use only (it listed both, and a reader could not tell which one ran), and it runs the
    same doses when read back."""
    cfg = VaccinationConfig(daily_doses=50)
    assert (cfg.daily_doses, cfg.daily_doses_per_100k) == (50, None)
    assert VaccinationConfig(**cfg.model_dump()) == cfg
    assert VaccinationConfig(daily_doses_per_100k=124).daily_doses_per_100k == 124
    vaccination = {"daily_doses": 50, "daily_doses_per_100k": 900}
    resolved = validate({"name": "x", "interventions": {"vaccination": vaccination}}, "x.yaml")
    assert resolved.model_dump()["interventions"]["vaccination"]["daily_doses_per_100k"] is None


def test_a_priority_list_vaccinates_only_the_groups_it_names():
    """docs/scenarios.md says an age group left out of a priority list gets no dose (it did not
    say, and an author could read the list as an order with the rest after it)."""
    from abm.outputs.schema_doc import scenario_reference

    assert "or a list of them (groups not listed get no dose;" in scenario_reference()
    n = 900
    pop = make_population([[i] for i in range(n)], ages=[i % 90 for i in range(n)])  # 100 per age group
    vacc = Vaccination(VaccinationConfig(start_day=0, daily_doses=50, priority=[8, 3], dose2_dropout=1.0))
    sim_of(pop, [vacc], days=30).run()
    dosed = vacc.doses[:n] > 0
    assert sorted(set(pop.age_group[dosed.numpy()].tolist())) == [3, 8]
    assert int(dosed.sum()) == 200  # both groups whole (50 a day for 30 days), no one else


def priority_population():
    """300 agents: 0-49 long-term care residents aged 85 and 50-59 their staff aged 40 (one
    LONG_TERM_CARE facility), 60-109 office workers aged 30 (one OFFICE workplace), 110-149
    aged 85 at home, 150-299 aged 50 at home."""
    ages = [85] * 50 + [40] * 10 + [30] * 50 + [85] * 40 + [50] * 150
    pop = make_population([[i] for i in range(300)], groups=[list(range(60, 110)), list(range(60))], ages=ages)
    pop.group_category = np.array([0, pop.categories.index("LONG_TERM_CARE")], dtype=np.int16)
    pop.long_term_care[:50] = True
    return pop


def test_priority_classes_put_each_agent_in_its_first_entry():
    pop = priority_population()
    rank = priority_classes(pop, [RESIDENTS, "OFFICE", 8])
    assert rank[:50].tolist() == [0] * 50  # residents, though also 80+
    assert rank[50:60].tolist() == [-1] * 10  # staff: in no entry
    assert rank[60:110].tolist() == [1] * 50 and rank[110:150].tolist() == [2] * 40
    assert rank[150:].tolist() == [-1] * 150
    both = priority_classes(pop, ["LONG_TERM_CARE", 8])  # the setting: staff and residents alike
    assert both[:60].tolist() == [0] * 60 and both[110:150].tolist() == [1] * 40
    with pytest.raises(ValueError, match="'SCHOOLS' is no occupation setting of the population"):
        priority_classes(pop, ["SCHOOLS"])


def test_a_priority_list_of_residents_and_a_setting_doses_them_first_class_by_class():
    """[long_term_care_residents, OFFICE, 8] at 10 first doses a day: residents on days 0-4, the
    office workers on days 5-9, the other 80+ on days 10-13, no one else (no second doses)."""
    pop = priority_population()
    cfg = VaccinationConfig(start_day=0, daily_doses=10, priority=[RESIDENTS, "OFFICE", 8], dose2_dropout=1.0)
    vacc = Vaccination(cfg)
    sim_of(pop, [vacc], days=20).run()
    day = vacc.dose1_day[:300].numpy()
    assert sorted(set(day[:50].tolist())) == [0, 1, 2, 3, 4]
    assert sorted(set(day[60:110].tolist())) == [5, 6, 7, 8, 9]
    assert sorted(set(day[110:150].tolist())) == [10, 11, 12, 13]
    assert (vacc.doses[50:60] == 0).all() and (vacc.doses[150:300] == 0).all()


def test_a_priority_setting_the_scenario_does_not_have_is_refused():
    with pytest.raises(ScenarioError, match=r"interventions.vaccination.priority: unknown settings \['HEALTHCAR'\]"):
        validate({"name": "x", "interventions": {"vaccination": {"priority": [RESIDENTS, "HEALTHCAR"]}}}, "x.yaml")
    ok = validate({"name": "x", "interventions": {"vaccination": {"priority": [RESIDENTS, "HEALTHCARE", 8]}}}, "x.yaml")
    assert ok.interventions.vaccination.priority == [RESIDENTS, "HEALTHCARE", 8]


def test_vaccination_supply_binding_gives_exactly_51000_doses_and_1020000_dollars():
    n = 100_000
    pop = make_population([[i] for i in range(n)], ages=[i % 95 for i in range(n)])
    vacc = Vaccination(VaccinationConfig())
    res = sim_of(pop, [vacc], days=180).run()
    assert int(vacc.given.sum()) == 51_000  # 300 a day from day 10 to day 179
    assert res.cost_totals.tolist() == [1_020_000.0]
    costs = res.costs
    assert set(costs.item) == {"vaccine_dose"} and costs.day.min() == 10 and costs.day.max() == 179
    assert (costs["count"] == 300).all()


def test_a_fractional_dose_rate_is_kept_over_time_and_doses_and_protection_are_counted_daily():
    # 150 agents at 124 per 100,000 a day: 0.186 doses a day (rounding gave 0, no vaccination).
    n, days = 150, 100
    pop = make_population([[i] for i in range(n)], ages=[85] * n)
    cfg = VaccinationConfig(start_day=0, daily_doses_per_100k=124, dose1_efficacy=1.0, shelf_life_days=0)
    res = sim_of(pop, [Vaccination(cfg)], days=days).run()
    first = res.activity["first_doses"][:, 0]
    expected = [math.floor((k + 1) * 0.186 + 1e-9) - math.floor(k * 0.186 + 1e-9) for k in range(days)]
    assert first.tolist() == expected and first.sum() == 18
    assert res.activity["second_doses"].sum() == 0, "no one is due a second dose while first doses last"
    # Protection from 14 days after dose 1 (efficacy 1): the protected on day d got dose 1 by d - 14.
    protected = res.activity["vaccine_protected"][:, 0]
    assert protected.tolist() == [0] * 14 + np.cumsum(first)[: days - 14].tolist()
    # The table carries the counts as columns.
    table = timeseries(res)
    assert table["first_doses"].sum() == 18 and table["vaccine_protected"].iloc[-1] == protected[-1]


def test_an_agent_protected_by_both_doses_on_one_day_is_counted_once():
    # dose 1 on day 0 protects from day 30; dose 2 on day 21 protects from day 21 + 9 = 30 too
    n = 4
    pop = make_population([[i] for i in range(n)], ages=[85] * n)
    cfg = VaccinationConfig(
        start_day=0, daily_doses=n, dose1_efficacy=1.0, dose1_delay_days=30, dose2_gap_days=21, dose2_delay_days=9
    )
    res = sim_of(pop, [Vaccination(cfg)], days=35).run()
    assert res.activity["vaccine_protected"][:, 0].tolist() == [0] * 30 + [n] * 5


@pytest.mark.parametrize(
    ("first_doses_first", "first", "second", "dose_1_days"),
    [
        (True, [1, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 1], [0, 1, 2]),  # every first dose, then the second doses
        (False, [1, 0, 1, 0, 1, 0], [0, 1, 0, 1, 0, 1], [0, 2, 4]),  # 80+ whole (second doses due first), then 70-79
    ],
)
def test_the_order_of_first_and_second_doses(first_doses_first, first, second, dose_1_days):
    """One dose a day, a gap of 1 day, everyone returns: agents 0 and 1 are 80+, agent 2 is 70-79.
    first_doses_first: the three first doses (80+ before 70-79), then the second doses. Otherwise
    age group by age group, and within a group the second doses due before the first doses: day 0
    an 80+ agent's dose 1, day 1 its dose 2 (due, so before the other 80+ agent's dose 1), day 2
    the other's dose 1, day 3 its dose 2, and only then 70-79: dose 1 on day 4, dose 2 on day 5."""
    pop = make_population([[0], [1], [2]], ages=[85, 85, 75])
    cfg = VaccinationConfig(
        start_day=0, daily_doses=1, dose2_gap_days=1, dose2_dropout=0.0, first_doses_first=first_doses_first
    )
    vacc = Vaccination(cfg)
    res = sim_of(pop, [vacc], days=6).run()
    assert res.activity["first_doses"][:, 0].tolist() == first
    assert res.activity["second_doses"][:, 0].tolist() == second
    # the two 80+ agents (in their random order within the group), then the 70-79 agent
    assert [*sorted(vacc.dose1_day[:2].tolist()), vacc.dose1_day[2].item()] == dose_1_days


def test_without_first_doses_first_a_groups_due_second_doses_come_before_the_next_groups_first_doses():
    """first_doses_first: false, oldest first: agent 0 (70-79) has dose 1 on day 0 and, due a
    day later, dose 2 on day 1, before any of the 20 agents of 60-69 has dose 1 (day 2), in
    every replicate: the classes are 70-79's second doses, then 70-79's first, then 60-69's
    second, then 60-69's first, whatever the random order within a class. (A class that mixed
    70-79's second doses with 60-69's first doses by that random order would give agent 0 its
    dose 2 first with probability 1/21 in a replicate, in all 50 with (1/21)^50.)"""
    reps, n = 50, 21
    pop = make_population([[i] for i in range(n)], ages=[75] + [65] * (n - 1))
    cfg = VaccinationConfig(start_day=0, daily_doses=1, dose2_gap_days=1, dose2_dropout=0.0, first_doses_first=False)
    res = sim_of(pop, [Vaccination(cfg)], replicates=reps, days=3).run()
    assert (res.activity["first_doses"] == np.array([[1], [0], [1]])).all()
    assert (res.activity["second_doses"] == np.array([[0], [1], [0]])).all()


def test_vaccine_protected_counts_only_agents_still_susceptible_when_protection_starts():
    """Two 80+ agents have dose 1 on day 0 (efficacy 1, protection from day 3); agent 0 is already
    infected (asymptomatic, not in hospital nor isolated, so it gets its dose). vaccine_protected
    counts the susceptible agents whose protection is in effect: agent 1 only, from day 3."""
    pop = make_population([[0], [1]], ages=[85, 85])
    cfg = VaccinationConfig(start_day=0, daily_doses=2, dose1_efficacy=1.0, dose1_delay_days=3, dose2_dropout=1.0)
    sim = sim_of(pop, [Vaccination(cfg)], days=6)
    sim.state.stage[0] = int(Stage.ASYMPTOMATIC)
    sim.state.infected_day[0] = 0
    sim.state.next_day[0] = 10_000
    res = sim.run()
    assert res.activity["first_doses"][:, 0].tolist() == [2, 0, 0, 0, 0, 0]
    assert res.activity["vaccine_protected"][:, 0].tolist() == [0, 0, 0, 1, 1, 1]


def test_agents_in_hospital_or_intensive_care_get_no_dose():
    """Three 80+ agents and three doses on day 0: agent 0 is in hospital and agent 1 in intensive
    care, so agent 2 alone has a first dose."""
    pop = make_population([[0], [1], [2]], ages=[85, 85, 85])
    cfg = VaccinationConfig(start_day=0, daily_doses=3, dose2_dropout=1.0)
    vacc = Vaccination(cfg)
    sim = sim_of(pop, [vacc], days=2)
    for agent, stage in ((0, Stage.HOSPITALIZED), (1, Stage.CRITICAL_ICU)):
        sim.state.stage[agent] = int(stage)
        sim.state.infected_day[agent] = 0
        sim.state.next_day[agent] = 10_000
    res = sim.run()
    assert res.activity["first_doses"][:, 0].tolist() == [1, 0]
    assert vacc.doses.tolist() == [0, 0, 1]


def test_a_replicate_gives_no_more_doses_than_its_own_stock():
    """One dose a day with a shelf life: in replicate 0 every agent is in hospital, so its doses
    pile up (2 available on day 1, 3 on day 2), while replicate 1 uses its one dose a day. The
    day's candidates are read for the largest stock, and in replicate 1 both a second dose (due a
    day after the first) and a first dose are candidates from day 1, but it still gives one dose
    a day."""
    pop = make_population([[i] for i in range(5)], ages=[85] * 5)
    cfg = VaccinationConfig(
        start_day=0, daily_doses=1, shelf_life_days=10, dose2_gap_days=1, dose2_dropout=0.0, first_doses_first=False
    )
    sim = sim_of(pop, [Vaccination(cfg)], replicates=2, days=4)
    sim.state.stage[:5] = int(Stage.HOSPITALIZED)
    sim.state.infected_day[:5] = 0
    sim.state.next_day[:5] = 10_000
    res = sim.run()
    given = res.activity["first_doses"] + res.activity["second_doses"]
    assert given.tolist() == [[0, 1]] * 4
    assert res.activity["second_doses"][:, 1].tolist() == [0, 1, 0, 1]


def test_tests_positives_and_quarantine_are_counted_daily():
    pop = make_population([[0], [1]])
    test = {"name": "rt_pcr", "sensitivity": 1.0, "result_delay_days": [2], "result_delay_probs": [1.0]}
    ivs = [InterventionTesting(TestingConfig(tests=[test])), Quarantine(QuarantineConfig(days=5, daily_dropout=0.0))]
    sim = sim_of(pop, ivs, days=10)
    sim.state.stage[0] = int(Stage.MILD_SYMPTOMS)
    sim.state.next_day[0] = 10_000
    res = sim.run()
    assert res.activity["tests"][:, 0].tolist() == [1] + [0] * 9
    assert res.activity["positive_results"][:, 0].tolist() == [0, 0, 1] + [0] * 7
    assert res.activity["in_quarantine"][:, 0].tolist() == [0, 0, 1, 1, 1, 1, 1, 0, 0, 0]


def test_vaccination_goes_oldest_first_with_first_doses_first():
    n = 10_000
    ages = [i % 95 for i in range(n)]
    pop = make_population([[i] for i in range(n)], ages=ages)
    vacc = Vaccination(VaccinationConfig(daily_doses=100, start_day=0))
    sim = sim_of(pop, [vacc], days=40)
    sim.run()
    doses = vacc.doses.numpy()
    assert doses.sum() == 4000 and doses.max() == 1, "first doses before any second dose"
    group = pop.age_group
    per_group = np.array([(doses[group == g] > 0).sum() for g in range(9)])
    sizes = np.bincount(group, minlength=9)
    left, want = 4000, np.zeros(9, dtype=int)
    for g in range(8, -1, -1):
        want[g] = min(sizes[g], left)
        left -= want[g]
    assert np.array_equal(per_group, want), "whole age groups, oldest first"
    assert 0 < want[5] < sizes[5]


def test_second_doses_follow_the_gap_for_those_who_return():
    reps = 4000
    pop = make_population([[0]], ages=[50])
    cfg = VaccinationConfig(daily_doses=5, start_day=0, dose2_gap_days=21, dose2_dropout=0.3)
    vacc = Vaccination(cfg)
    sim = sim_of(pop, [vacc], replicates=reps, days=40)
    sim.run()
    doses = vacc.doses.numpy()
    assert (vacc.dose1_day.numpy() == 0).all(), "everyone gets dose 1 on day 0"
    assert np.array_equal(doses == 2, vacc.returns.numpy()), "dose 2 exactly for those who return"
    assert within((doses == 2).mean(), 0.7, reps)
    # All-or-nothing protection: 90% after dose 1 (from day 14), either dose protects.
    immune = sim.state.immune.numpy()
    p = 0.9 + 0.1 * 0.7 * 0.95
    assert within(immune.mean(), p, reps)


@pytest.mark.parametrize(
    ("gap", "dose2", "protected_from"),
    [
        (7, {"dose2_efficacy": 0.0}, 14),  # a dose 2 that does not protect leaves dose 1's day
        (10, {"dose2_delay_days": 10}, 14),  # dose 2's later protection does not delay dose 1's
        (10, {"dose2_delay_days": 2}, 12),  # dose 2 protecting sooner brings it forward
    ],
)
def test_a_second_dose_before_the_first_protects_keeps_the_earlier_protection(gap, dose2, protected_from):
    """Dose 1 on day 0 protects (efficacy 1) from day 14; dose 2 comes after a gap shorter than
    that. All-or-nothing, either dose's draw: protected from the first day a protecting draw
    takes effect."""
    pop = make_population([[0]], ages=[85])
    cfg = VaccinationConfig(
        start_day=0, daily_doses=1, dose1_efficacy=1.0, dose1_delay_days=14, dose2_gap_days=gap, dose2_dropout=0.0
    )
    res = sim_of(pop, [Vaccination(cfg.model_copy(update=dose2))], days=25).run()
    assert res.activity["second_doses"][:, 0].tolist() == [0] * gap + [1] + [0] * (24 - gap)
    assert res.activity["vaccine_protected"][:, 0].tolist() == [0] * protected_from + [1] * (25 - protected_from)


@pytest.mark.parametrize(
    ("dose2", "scale"),
    [
        ({"dose2_delay_days": 14}, [1.0] * 14 + [0.4] * 7 + [0.1] * 9),  # dose 1's protection, then dose 2's
        ({"dose2_delay_days": 2}, [1.0] * 9 + [0.1] * 21),  # dose 2 protects sooner; dose 1's start changes nothing
        # dose 2 of efficacy 0 is the latest dose in effect from its start: no protection left
        ({"dose2_delay_days": 14, "dose2_efficacy": 0.0}, [1.0] * 14 + [0.4] * 7 + [1.0] * 9),
    ],
)
def test_leaky_protection_of_dose_1_is_kept_when_dose_2_comes_before_it_starts(dose2, scale):
    """Leaky protection, dose 1 (efficacy 0.6) on day 0 protects from day 14; dose 2 (efficacy
    0.9) comes on day 7, before that. Each dose's protection multiplies susceptibility by 1 - e
    from its own start: dose 1's from day 14, until dose 2's takes over (a dose-2 start later
    than day 14 left the agent unprotected from day 14 until then)."""
    days = 30
    pop = make_population([[0]], ages=[85])
    cfg = VaccinationConfig(
        start_day=0,
        daily_doses=1,
        protection="leaky",
        dose1_efficacy=0.6,
        dose2_efficacy=0.9,
        dose1_delay_days=14,
        dose2_gap_days=7,
        dose2_dropout=0.0,
    )
    sim = sim_of(pop, [Vaccination(cfg.model_copy(update=dose2))], days=days)
    got = []
    for day in range(days):
        sim.step(day)
        got.append(float(sim.state.susceptibility_scale[0]))
    assert sim.activity["second_doses"][:, 0].tolist() == [0] * 7 + [1] + [0] * (days - 8)
    assert np.allclose(got, scale, rtol=0, atol=1e-6), got
    assert sim.activity["vaccine_protected"][:, 0].tolist() == [int(x < 1) for x in scale]


@pytest.mark.parametrize("dose2_efficacy", [0.0, 0.001, 0.3])
def test_a_leaky_dose_2_less_effective_than_dose_1_lowers_the_protection_down_to_none(dose2_efficacy):
    """Leaky protection: dose 1 (efficacy 0.6, no delay) on day 0, dose 2 (no delay) on day 7.
    From day 7 the susceptibility is 1 - dose2_efficacy, the latest dose's, as
    ``vaccination.protection`` says: a dose 2 of efficacy 0 leaves none (it once kept dose 1's
    0.6, while 0.001 left 0.001: a jump at 0), and the agent leaves the protected count."""
    days = 12
    pop = make_population([[0]], ages=[85])
    cfg = VaccinationConfig(
        start_day=0,
        daily_doses=1,
        protection="leaky",
        dose1_efficacy=0.6,
        dose2_efficacy=dose2_efficacy,
        dose1_delay_days=0,
        dose2_delay_days=0,
        dose2_gap_days=7,
        dose2_dropout=0.0,
    )
    sim = sim_of(pop, [Vaccination(cfg)], days=days)
    got = []
    for day in range(days):
        sim.step(day)
        got.append(float(sim.state.susceptibility_scale[0]))
    assert sim.activity["second_doses"][:, 0].tolist() == [0] * 7 + [1] + [0] * (days - 8)
    assert np.allclose(got, [0.4] * 7 + [1 - dose2_efficacy] * (days - 7), rtol=0, atol=1e-6), got
    protected = [1] * 7 + [int(dose2_efficacy > 0)] * (days - 7)
    assert sim.activity["vaccine_protected"][:, 0].tolist() == protected


def test_leaky_protection_scales_susceptibility_and_the_infected_leave_the_protected_count():
    """Leaky protection sets a vaccinated agent's susceptibility_scale to 1 - e (vaccination.py,
    ``protect``), which multiplies its daily hazard λ_t (simulator ``_transmit``). Over a run its
    risk is 1 - exp(-(1 - e) Λ) = 1 - (1 - p_u)^(1 - e), p_u = 1 - exp(-Λ) the risk of an
    unvaccinated agent with the same contacts (all-or-nothing would give (1 - e) p_u instead)."""
    reps, days, e, w = 2000, 16, 0.7, 1.0
    # Households {0, 1} and {2, 3}: index cases 0 and 2 (age 30), kept in mild symptoms from day 0;
    # agent 1 (age 50, age group 5) is the only one in the programme (priority [5]) and has its
    # dose on day 0 with no delay; agent 3 (age 40) is the unvaccinated control. Both have S = 1.03.
    pop = make_population([[0, 1], [2, 3]], ages=[30, 50, 30, 40])
    cfg = VaccinationConfig(
        start_day=0,
        daily_doses=1,
        priority=[5],
        protection="leaky",
        dose1_efficacy=e,
        dose1_delay_days=0,
        dose2_dropout=1.0,  # no second dose
    )
    sim = sim_of(pop, [Vaccination(cfg)], replicates=reps, days=days, contacts=quiet_contacts(household={"weight": w}))
    for field, value in ((sim.state.stage, int(Stage.MILD_SYMPTOMS)), (sim.state.infected_day, 0)):
        field.view(reps, 4)[:, [0, 2]] = value
    sim.state.next_day.view(reps, 4)[:, [0, 2]] = 10_000
    res = sim.run()
    assert (sim.state.susceptibility_scale.view(reps, 4)[:, 1] == torch.tensor(1 - e)).all()
    assert not sim.state.immune.any(), "leaky protection does not make anyone immune"
    # Λ = Σ_t β S A_mild (w / 2) g(t) over days 0..15 (docs/model.md: household normaliser the
    # household size, g(k) = F(k) - F(k - 1) with F the gamma CDF of mean 5.5 and sd 2.14), so
    # Σ_t g(t) = F(15).
    d = DiseaseConfig()
    shape, scale = (5.5 / 2.14) ** 2, 2.14**2 / 5.5
    big_lambda = d.transmission_rate * 1.03 * 0.72 * (w / 2) * scipy.stats.gamma(shape, scale=scale).cdf(days - 1)
    p_u = 1 - math.exp(-big_lambda)
    p_v = 1 - (1 - p_u) ** (1 - e)
    infected_day = sim.state.infected_day.view(reps, 4).numpy()
    assert within((infected_day[:, 3] >= 0).mean(), p_u, reps), "the control"
    assert within((infected_day[:, 1] >= 0).mean(), p_v, reps), "the vaccinated contact"
    # vaccine_protected counts, at the day's vaccination (before its transmission), the protected
    # agents still susceptible: agent 1 until the day it is infected, that day included.
    inf1 = infected_day[:, 1]
    want = (inf1[None, :] < 0) | (inf1[None, :] >= np.arange(days)[:, None])
    assert np.array_equal(res.activity["vaccine_protected"], want.astype(np.int64))
    assert res.activity["vaccine_protected"][0].sum() == reps > res.activity["vaccine_protected"][-1].sum()


def test_all_or_nothing_protection_makes_a_share_e_immune_who_are_never_infected():
    """All-or-nothing protection with efficacy e: a share e of the vaccinated is immune and never
    infected, the others carry the full risk, so the vaccinated contact's risk is (1 - e) p_u
    (leaky protection gives 1 - (1 - p_u)^(1 - e), the test above). Same households as there."""
    reps, days, e = 4000, 16, 0.7
    pop = make_population([[0, 1], [2, 3]], ages=[30, 50, 30, 40])
    cfg = VaccinationConfig(
        start_day=0, daily_doses=1, priority=[5], dose1_efficacy=e, dose1_delay_days=0, dose2_dropout=1.0
    )
    sim = sim_of(
        pop, [Vaccination(cfg)], replicates=reps, days=days, contacts=quiet_contacts(household={"weight": 1.0})
    )
    for field, value in ((sim.state.stage, int(Stage.MILD_SYMPTOMS)), (sim.state.infected_day, 0)):
        field.view(reps, 4)[:, [0, 2]] = value
    sim.state.next_day.view(reps, 4)[:, [0, 2]] = 10_000
    sim.run()
    d = DiseaseConfig()
    shape, scale = (5.5 / 2.14) ** 2, 2.14**2 / 5.5
    big_lambda = d.transmission_rate * 1.03 * 0.72 * 0.5 * scipy.stats.gamma(shape, scale=scale).cdf(days - 1)
    p_u = 1 - math.exp(-big_lambda)
    infected = sim.state.infected_day.view(reps, 4).numpy() >= 0
    immune = sim.state.immune.view(reps, 4).numpy()
    assert within(immune[:, 1].mean(), e, reps) and not immune[:, 3].any()
    assert not (infected & immune).any(), "an immune agent is never infected"
    assert within(infected[:, 3].mean(), p_u, reps), "the control"
    assert within(infected[:, 1].mean(), (1 - e) * p_u, reps), "the vaccinated contact"
    assert (sim.state.susceptibility_scale == 1).all(), "all-or-nothing leaves susceptibility as it is"


@pytest.mark.parametrize(
    ("shelf_life", "expected"),
    [
        (3, [0] * 6 + [5, 5, 2, 2]),
        (0, [0] * 6 + [2, 2, 2, 2]),
        (10, [0] * 6 + [5, 11, 2, 2]),
    ],
)
def test_unused_doses_wait_up_to_their_shelf_life_and_the_oldest_are_used_first(shelf_life, expected):
    """Two doses a day from day 0; every agent isolated (no dose) on days 0-5, agents 0-4 free
    from day 6, the other 15 from day 7. A dose made on day d can be given on days d..d +
    shelf_life (vaccination.py ``_restock``), and the oldest stock is used first.
    Shelf life 3: day 6 has the doses of days 3-6 (8), gives 5 and keeps 1 of day 5 and 2 of day
    6; day 7 has those 3 and its own 2: 5 doses (had the newest been used first, 1 of day 4 would
    be left and day 7 would have 3). Shelf life 0: only the day's 2. Shelf life 10: nothing
    expires, day 7 has 14 - 5 + 2 = 11."""
    n, reps = 20, 3
    pop = make_population([[i] for i in range(n)], ages=[85] * n)
    vacc = Vaccination(VaccinationConfig(start_day=0, daily_doses=2, shelf_life_days=shelf_life))
    sim = sim_of(pop, [vacc], replicates=reps, days=10)
    isolated = sim.state.isolated.view(reps, n)
    isolated[:] = True
    for day in range(10):
        if day == 6:
            isolated[:, :5] = False
        if day == 7:
            isolated[:] = False
        sim.step(day)
    for r in range(reps):
        assert sim.activity["first_doses"][:, r].tolist() == expected
    assert vacc.given.tolist() == [sum(expected)] * reps


def test_youngest_first_vaccinates_whole_age_groups_from_the_youngest():
    n = 1000
    ages = [i % 95 for i in range(n)]  # ages 0-49 eleven times, 50-94 ten times
    pop = make_population([[i] for i in range(n)], ages=ages)
    vacc = Vaccination(VaccinationConfig(daily_doses=20, start_day=0, priority="youngest_first"))
    sim_of(pop, [vacc], days=20).run()
    doses = vacc.doses.numpy()
    assert doses.sum() == 400 and doses.max() == 1  # 20 a day for 20 days, before any dose 2 is due
    per_group = np.bincount(pop.age_group, weights=doses, minlength=9).astype(int)
    # groups 0-2 (110 each) whole, then 70 of group 3
    assert per_group.tolist() == [110, 110, 110, 70, 0, 0, 0, 0, 0]


def test_vaccination_parameters_are_checked():
    with pytest.raises(ScenarioError, match=r"interventions\.vaccination\.dose1_efficacy: 1\.2 is not allowed"):
        validate({"name": "x", "interventions": {"vaccination": {"dose1_efficacy": 1.2}}}, "x.yaml")
    with pytest.raises(ScenarioError, match="daily_doses: -5 is not allowed"):
        validate({"name": "x", "interventions": {"vaccination": {"daily_doses": -5}}}, "x.yaml")


# ----------------------------------------------------------------------------- testing
def test_testing_sensitivity_delays_and_cost():
    reps = 20_000
    pop = make_population([[0]], ages=[40])
    testing = InterventionTesting(TestingConfig())
    sim = sim_of(pop, [testing], replicates=reps, days=5)
    sim.state.stage[:] = int(Stage.MILD_SYMPTOMS)
    sim.state.next_day[:] = 10_000
    sim.step(0)
    delay = testing.result_day.numpy()
    assert set(np.unique(delay)) == {1, 2, 3}
    for d, p in zip([1, 2, 3], [0.3, 0.4, 0.3], strict=True):
        assert within((delay == d).mean(), p, reps)
    assert within(testing.result_positive.double().mean().item(), 0.99, reps)
    assert sim.ledger.totals().sum() == 5.0 * reps
    first_positive = testing.result_positive.numpy().copy()
    for day in (1, 2, 3):
        sim.step(day)
        due = first_positive & (delay == day)
        assert (sim.fields["positive_day"].numpy()[due] == day).all(), "positives learn it on the result day"


def test_testing_capacity_and_specificity():
    reps = 50
    pop = make_population([[i] for i in range(100)])
    test = {
        "name": "rapid",
        "sensitivity": 0.85,
        "specificity": 0.9,
        "result_delay_days": [0],
        "result_delay_probs": [1.0],
        "daily_capacity": 7,
    }
    testing = InterventionTesting(TestingConfig(tests=[test]))
    sim = sim_of(pop, [testing], replicates=reps, days=3)
    sim.state.stage[:] = int(Stage.MILD_SYMPTOMS)
    sim.state.next_day[:] = 10_000
    sim.step(0)
    assert sim.ledger.table()["count"].tolist() == [7.0] * reps, "capacity per replicate"
    # Recovered agents with symptoms cannot exist; test specificity on susceptibles instead.
    sim2 = sim_of(
        pop,
        [InterventionTesting(TestingConfig(tests=[{**test, "daily_capacity": None, "given_to": ["traced"]}]))],
        replicates=reps,
        days=3,
    )
    sim2.field("test_request", torch.bool)[:] = True
    sim2.step(0)
    false_pos = (sim2.fields["positive_day"] == 0).double().mean().item()
    assert within(false_pos, 0.1, reps * 100)


def _days_tested(days: int, isolate_first: bool = False, **testing) -> tuple[list[int], list[int]]:
    """Tests a day for two symptomatic agents whose results are always negative and arrive after
    exactly 1 day (agent 0 isolated throughout when ``isolate_first``): the sum over agents of
    the ``tests`` count, and each agent's ``last_test_day``."""
    pop = make_population([[0], [1]])
    test = {"name": "rt_pcr", "sensitivity": 0.0, "result_delay_days": [1], "result_delay_probs": [1.0]}
    sim = sim_of(pop, [InterventionTesting(TestingConfig(tests=[test], **testing))], days=days)
    sim.state.stage[:] = int(Stage.MILD_SYMPTOMS)
    sim.state.next_day[:] = 10_000
    sim.state.isolated[0] = isolate_first  # no quarantine intervention: it stays so
    res = sim.run()
    return res.activity["tests"][:, 0].tolist(), sim.fields["last_test_day"].tolist()


def test_a_negative_result_is_valid_for_validity_days():
    # Without validity_days a negative is tested again on the day its result is in: every day.
    assert _days_tested(12)[0] == [2] * 12
    # validity_days 2: tested on day 0, result on day 1; no retest on the result day nor on the 2
    # days after it (testing.py: retest once day - result day > validity_days): again on day 4, 8.
    # (So validity_days 0 retests the day after the result, not on its day as None does.)
    assert _days_tested(12, validity_days=2)[0] == [2, 0, 0, 0] * 3


@pytest.mark.parametrize("test_quarantined", [False, True])
def test_quarantined_agents_are_tested_only_when_asked(test_quarantined):
    tests, last = _days_tested(4, isolate_first=True, test_quarantined=test_quarantined)
    assert tests == [2 if test_quarantined else 1] * 4
    assert last == [3 if test_quarantined else -1, 3]


def test_testing_starts_on_its_start_day():
    tests, last = _days_tested(6, start_day=3)
    assert tests == [0, 0, 0, 2, 2, 2] and last == [5, 5]


def _tests_taken(retest: bool, sensitivity: float, enter: float, days: int = 6) -> int:
    """Tests one symptomatic agent takes over ``days`` days (results after exactly 1 day)."""
    pop = make_population([[0]])
    test = {"name": "rt_pcr", "sensitivity": sensitivity, "result_delay_days": [1], "result_delay_probs": [1.0]}
    testing = InterventionTesting(TestingConfig(tests=[test], retest_positives=retest))
    quarantine = Quarantine(QuarantineConfig(enter_probability=enter, daily_dropout=0.0))
    sim = sim_of(pop, [testing, quarantine], days=days)
    sim.state.stage[:] = int(Stage.MILD_SYMPTOMS)
    sim.state.next_day[:] = 10_000
    for day in range(days):
        sim.step(day)
    table = sim.ledger.table()
    return int(table.loc[table["item"] == "test_rt_pcr", "count"].sum())


def test_a_positive_is_not_tested_again_unless_the_reference_behaviour_is_asked_for():
    # Intended: one test, positive on day 1, never repeated (in or out of quarantine).
    assert _tests_taken(retest=False, sensitivity=1.0, enter=1.0) == 1
    assert _tests_taken(retest=False, sensitivity=1.0, enter=0.0) == 1
    # Negative results are followed by a new test as soon as they are in (days 0-5).
    assert _tests_taken(retest=False, sensitivity=0.0, enter=1.0) == 6
    # Reference (specs 7.1): the positive is tested again on the day its result arrives, before
    # that day's quarantine; outside quarantine, every day its previous result is in.
    assert _tests_taken(retest=True, sensitivity=1.0, enter=1.0) == 2
    assert _tests_taken(retest=True, sensitivity=1.0, enter=0.0) == 6


def test_an_agent_infected_on_the_day_of_its_positive_result_is_tested_again():
    """Without ``retest_positives``, a positive is tested again only once infected since its
    result; an infection on the result's own day counts as since (the result arrives before
    that day's transmission, so it was a false positive). Agent 0 was infected on day 3, the day
    its positive arrived; agent 1 on day 2, before it: only agent 0 is tested on day 4."""
    pop = make_population([[0], [1]])
    testing = InterventionTesting(TestingConfig(retest_positives=False))
    sim = sim_of(pop, [testing], days=6)
    sim.state.stage[:] = int(Stage.MILD_SYMPTOMS)
    sim.state.next_day[:] = 10_000
    sim.state.infected_day[:] = torch.tensor([3, 2], dtype=torch.int16)
    sim.fields["positive_day"][:] = 3
    sim.rescan()
    testing.test(sim, 4)
    assert sim.activity["tests"][4, 0] == 1
    assert testing.last_test_day.tolist() == [4, testing.cfg.never_tested_day]


def same_day_case(tracer: str, cuts: ContactMultipliersConfig | None = None) -> Simulation:
    """Agent 0 symptomatic, a rapid test (result the same day), every tracer certain, everyone
    with the app: its household and workmates are agents 1-4 (``cuts``: contact reductions)."""
    pop = tracing_population()
    contacts = quiet_contacts(household={"weight": 1.0}, occupation={"weight": 1.0})
    rapid = {"name": "rapid", "sensitivity": 1.0, "result_delay_days": [0], "result_delay_probs": [1.0]}
    if tracer == "digital":
        trace = DigitalTracing(DigitalTracingConfig(compliance=1.0))
    else:
        trace = ManualTracing(ManualTracingConfig(recall=1.0, reachable=1.0, compliance=1.0, mode="parallel"))
    extra = [] if cuts is None else [ContactMultipliers(cuts)]
    sim = sim_of(pop, [InterventionTesting(TestingConfig(tests=[rapid])), trace, *extra], days=5, contacts=contacts)
    sim.fields["has_app"][:] = True
    sim.state.stage[0] = int(Stage.MILD_SYMPTOMS)
    sim.state.next_day[0] = 10_000
    return sim


@pytest.mark.parametrize("tracer", ["digital", "manual"])
def test_a_same_day_positive_is_traced_the_next_day(tracer):
    sim = same_day_case(tracer)
    for day in range(2):  # agent 0 is tested and positive on day 0, after that day's tracing
        sim.step(day)
    assert sim.fields["positive_day"].tolist()[0] == 0
    request = sim.fields["quarantine_request"]
    assert request.tolist() == [False, True, True, True, True, False], "its household and workmates, traced on day 1"
    request[:] = False
    sim.step(2)
    assert not request.any(), "traced once"
    counts = {"digital": {"app_notifications": 4}, "manual": {"interviews": 1, "manual_notifications": 4}}[tracer]
    for name, total in counts.items():
        assert sim.activity[name][:, 0].tolist() == [0, total, 0, 0, 0], name


@pytest.mark.parametrize("tracer", ["digital", "manual"])
@pytest.mark.parametrize("shields", [True, False])
def test_a_contact_isolated_on_the_day_it_would_have_met_the_case_is_not_traced(tracer, shields):
    """Agent 1 was isolated on day 0, the only day of agent 0's window: where isolation shields
    both ends (quarantine.blocks: both) they did not meet and agent 1 is not traced; where only
    the infector's isolation counts (the reference code) it is."""
    sim = same_day_case(tracer)
    sim.step(0)
    sim.field("isolated_history", torch.int32, 0)[1] = 1  # bit 0 on day 1: isolated on day 0
    sim.isolation_shields = shields
    sim.step(1)
    assert sim.fields["quarantine_request"].tolist() == [False, not shields, True, True, True, False]


@pytest.mark.parametrize("tracer", ["digital", "manual"])
def test_a_contact_who_has_died_is_neither_notified_nor_counted(tracer):
    """Agent 0 (positive on day 0, traced on day 1) met housemates 1 and 2 and workmates 3 and
    4 on day 0; housemate 1 died before day 1's tracing. The dead get no notice: they are not
    asked to quarantine nor counted in app_notifications / manual_notifications."""
    sim = same_day_case(tracer)
    sim.step(0)
    sim.state.stage[1] = int(Stage.DEATH)
    sim.state.next_day[1] = 10_000
    sim.step(1)
    assert sim.fields["quarantine_request"].tolist() == [False, False, True, True, True, False]
    name = "app_notifications" if tracer == "digital" else "manual_notifications"
    assert sim.activity[name][:2, 0].tolist() == [0, 3]


@pytest.mark.parametrize("tracer", ["digital", "manual"])
def test_contacts_that_a_closure_or_a_zero_multiplier_removed_are_not_traced(tracer):
    """Day 0 is agent 0's whole window. With its workplace (an OFFICE) closed that day, its
    workmates 3 and 4 did not meet it and are not traced; with the household multiplier at 0,
    its housemates 1 and 2 are not; a multiplier between 0 and 1 keeps the contacts; a closure
    from day 1 on leaves day 0's contacts traced."""
    cases = {
        "closed office": ({"closures": [{"from_day": 0, "settings": ["OFFICE"]}]}, [1, 2]),
        "closed school": ({"closures": [{"from_day": 0, "settings": ["SCHOOL"]}]}, [1, 2, 3, 4]),
        "closed later": ({"closures": [{"from_day": 1, "settings": ["OFFICE"]}]}, [1, 2, 3, 4]),
        "no household": ({"changes": [{"from_day": 0, "household": 0.0}]}, [3, 4]),
        "half household": ({"changes": [{"from_day": 0, "household": 0.5}]}, [1, 2, 3, 4]),
        "no occupation": ({"changes": [{"from_day": 0, "until_day": 1, "occupation": 0.0}]}, [1, 2]),
    }
    for name, (cuts, traced) in cases.items():
        sim = same_day_case(tracer, ContactMultipliersConfig(**cuts))
        sim.step(0)
        sim.step(1)
        got = sim.fields["quarantine_request"].nonzero().squeeze(1).tolist()
        assert got == traced, name


# ----------------------------------------------------------------------------- quarantine
def test_a_quarantined_agent_gets_and_gives_no_infection():
    reps = 2000
    pop = make_population([[0, 1, 2]])
    contacts = quiet_contacts(household={"weight": 50.0})
    sim = sim_of(pop, [], replicates=reps, days=20, contacts=contacts)
    view = sim.state.stage.view(reps, 3)
    view[:, 0] = int(Stage.MILD_SYMPTOMS)
    sim.state.infected_day.view(reps, 3)[:, 0] = 0
    sim.state.next_day.view(reps, 3)[:, 0] = 10_000
    sim.state.isolated.view(reps, 3)[:, 1] = True  # a quarantined susceptible
    for day in range(1, 12):
        sim._transmit(day)
    assert (view[:, 1] == Stage.SUSCEPTIBLE).all(), "a quarantined agent gets no infection"
    assert (view[:, 2] != Stage.SUSCEPTIBLE).float().mean() > 0.99, "its unquarantined housemate does"
    sim2 = sim_of(pop, [], replicates=reps, days=20, contacts=contacts)
    v2 = sim2.state.stage.view(reps, 3)
    v2[:, 0] = int(Stage.MILD_SYMPTOMS)
    sim2.state.infected_day.view(reps, 3)[:, 0] = 0
    sim2.state.next_day.view(reps, 3)[:, 0] = 10_000
    sim2.state.isolated.view(reps, 3)[:, 0] = True  # a quarantined infectious agent
    for day in range(1, 12):
        sim2._transmit(day)
    assert (v2[:, 1:] == Stage.SUSCEPTIBLE).all(), "a quarantined agent gives no infection"


def test_quarantine_lasts_its_days_with_daily_dropout():
    reps = 20_000
    pop = make_population([[0]])
    q = Quarantine(QuarantineConfig(days=14, daily_dropout=0.01))
    sim = sim_of(pop, [q], replicates=reps, days=30)
    sim.field("positive_day", torch.int16)[:] = 2
    for day in range(0, 16):
        sim.step(day)
        iso = sim.state.isolated.double().mean().item()
        if day < 2:
            assert iso == 0
        elif day < 16:
            # Entered on day 2 (no dropout that day); ends on day 16.
            assert within(iso, 0.99 ** (day - 2), reps), (day, iso)
    sim.step(16)
    assert not sim.state.isolated.any()


def test_household_quarantine_draws_each_housemate_with_the_entry_probability():
    reps = 20_000
    pop = make_population([[0, 1]])
    q = Quarantine(QuarantineConfig(enter_probability=0.7, household=True, daily_dropout=0.0))
    sim = sim_of(pop, [q], replicates=reps, days=5)
    sim.fields["positive_day"].view(reps, 2)[:, 0] = 2
    for day in range(3):
        sim.step(day)
    iso = sim.state.isolated.view(reps, 2).double()
    assert within(iso[:, 0].mean().item(), 0.7, reps)
    assert within(iso[:, 1].mean().item(), 0.7, reps), "the housemate decides for itself, not after the index"
    assert within((iso[:, 0] * iso[:, 1]).mean().item(), 0.49, reps), "independently of the index case"


@pytest.mark.parametrize("reset", [True, False])
def test_completing_quarantine_resets_infectiousness_unless_switched_off(reset):
    pop = make_population([[0], [1]])
    q = Quarantine(QuarantineConfig(days=3, daily_dropout=0.0, reset_infectiousness=reset))
    sim = sim_of(pop, [q], days=10)
    sim.state.stage[0] = int(Stage.MILD_SYMPTOMS)  # infected; agent 1 stays susceptible
    sim.state.next_day[0] = 10_000
    sim.fields["positive_day"][:] = 1
    for day in range(4):
        sim.step(day)
    assert sim.state.isolated.tolist() == [True, True]
    sim.step(4)  # entered on day 1 for 3 days: ends on day 4
    assert sim.state.isolated.tolist() == [False, False]
    assert sim.state.infectiousness_scale.tolist() == ([0.0, 1.0] if reset else [1.0, 1.0])


def test_quarantine_is_billed_per_agent_and_day_spent_in_it():
    """``cost_per_day`` is booked for each day an agent is in quarantine (the ``in_quarantine``
    count), not once when it enters: two positives on day 1 for 3 days, no dropout, are billed
    2 agent-days on each of days 1-3."""
    pop = make_population([[0], [1]])
    q = Quarantine(QuarantineConfig(days=3, daily_dropout=0.0, cost_per_day=7.0))
    sim = sim_of(pop, [q], days=6)
    sim.fields["positive_day"][:] = 1
    res = sim.run()
    assert res.activity["in_quarantine"][:, 0].tolist() == [0, 2, 2, 2, 0, 0]
    assert res.costs[["item", "day", "count", "cost"]].values.tolist() == [
        ["quarantine_day", day, 2, 14.0] for day in (1, 2, 3)
    ]
    assert res.cost_totals.tolist() == [42.0]


def test_a_positive_result_during_quarantine_starts_its_days_again():
    """Agents 0 and 1 are asked to quarantine (tracing) on day 1 for 4 days. Agent 0's positive
    result arrives on day 3: its quarantine now ends on day 7. Agent 1 is asked again on day 3
    and keeps its end, day 5 (its contact came before its quarantine)."""
    pop = make_population([[0], [1]])
    q = Quarantine(QuarantineConfig(days=4, daily_dropout=0.0, reset_infectiousness=False))
    sim = sim_of(pop, [q], days=10)
    request = sim.field("quarantine_request", torch.bool, False)
    isolated = []
    for day in range(9):
        if day in (1, 3):
            request[:] = True
        if day == 3:
            sim.fields["positive_day"][0] = 3
        sim.step(day)
        isolated.append(sim.state.isolated.tolist())
    assert [a for a, _ in isolated] == [False] + [True] * 6 + [False] * 2
    assert [b for _, b in isolated] == [False] + [True] * 4 + [False] * 4


@pytest.mark.parametrize("persistence", ["full", "entry_day"])
def test_agents_in_hospital_are_not_in_quarantine_and_meet_nobody(persistence):
    """A positive in hospital does not enter quarantine, a quarantined agent leaves it on
    admission, and neither is counted in ``in_quarantine``; their days in hospital are days
    isolated, for tracing. The reference code (``entry_day``) quarantines them like anyone."""
    pop = make_population([[0], [1], [2]])
    q = Quarantine(QuarantineConfig(days=10, daily_dropout=0.0, persistence=persistence))
    sim = sim_of(pop, [q], days=10)
    sim.state.stage[:] = torch.tensor([int(Stage.HOSPITALIZED), int(Stage.SEVERE_SYMPTOMS), int(Stage.RECOVERED)])
    sim.state.next_day[:] = 10_000
    sim.fields["positive_day"][:] = 1  # all three positive on day 1
    sim.step(0)
    sim.step(1)
    full = persistence == "full"
    if full:
        assert sim.state.isolated.tolist() == [False, True, True]
    sim.state.stage[1] = int(Stage.CRITICAL_ICU)  # agent 1 is admitted
    sim.step(2)
    if full:
        assert sim.state.isolated.tolist() == [False, False, True]
        assert sim.activity["in_quarantine"][:3, 0].tolist() == [0, 2, 1]
        history = sim.fields["isolated_history"].tolist()
        assert history == [0b111, 0b11, 0b11]  # agent 0 in hospital on days 0-2, agent 1 admitted day 2
    else:  # one-day quarantines: each day's positives only, whatever their stage
        assert sim.activity["in_quarantine"][:3, 0].tolist() == [0, 3, 0]


# ----------------------------------------------------------------------------- tracing
def tracing_population():
    # Household {0, 1, 2}; workplace {0, 3, 4} (a triangle); 5 alone.
    return make_population([[0, 1, 2], [3], [4], [5]], groups=[[0, 3, 4]])


def test_digital_tracing_reaches_only_app_owners_whose_contact_has_the_app():
    pop = tracing_population()
    contacts = quiet_contacts(household={"weight": 1.0}, occupation={"weight": 1.0})
    dct = DigitalTracing(DigitalTracingConfig(compliance=1.0))
    sim = sim_of(pop, [dct], days=10, contacts=contacts)
    app = sim.fields["has_app"]
    app[:] = torch.tensor([True, True, False, True, False, True])
    positive = sim.fields["positive_day"]
    for day in range(4):
        sim.step(day)
    positive[0] = 4
    sim.step(4)
    assert sim.fields["dct_notified_day"].tolist() == [-1, 4, -1, 4, -1, -1]
    # The index case without the app notifies no one.
    sim2 = sim_of(pop, [DigitalTracing(DigitalTracingConfig(compliance=1.0))], days=10, contacts=contacts)
    sim2.fields["has_app"][:] = torch.tensor([False, True, True, True, True, True])
    for day in range(4):
        sim2.step(day)
    sim2.fields["positive_day"][0] = 4
    sim2.step(4)
    assert (sim2.fields["dct_notified_day"] == -1).all()


def test_digital_tracing_bills_every_notification_whether_or_not_it_is_heeded():
    """``cost_per_notification`` is paid for each contact notified (the ``app_notifications``
    count), heeded or not: at compliance 0 index case 0 notifies its app-owning contacts 1 and 3
    on day 4, none of whom quarantines, and the two notifications are billed."""
    pop = tracing_population()
    contacts = quiet_contacts(household={"weight": 1.0}, occupation={"weight": 1.0})
    dct = DigitalTracing(DigitalTracingConfig(compliance=0.0, cost_per_notification=3.0))
    sim = sim_of(pop, [dct], days=10, contacts=contacts)
    sim.fields["has_app"][:] = torch.tensor([True, True, False, True, False, True])
    for day in range(4):
        sim.step(day)
    sim.fields["positive_day"][0] = 4
    sim.step(4)
    assert sim.fields["dct_notified_day"].tolist() == [-1, 4, -1, 4, -1, -1]
    assert not sim.fields["quarantine_request"].any() and sim.activity["app_notifications"][4, 0] == 2
    assert sim.ledger.table()[["item", "day", "count", "cost"]].values.tolist() == [["dct_notification", 4, 2, 6.0]]


def test_app_ownership_hits_the_target_mean():
    w = torch.tensor([0.09, 0.80, 0.97, 0.96, 0.94, 0.86, 0.70, 0.48, 0.32])[torch.arange(9).repeat(100)]
    for target in (0.2, 0.4, 0.7, 0.95):
        p = ownership_probabilities(w, target)
        assert abs(float(p.mean()) - target) < 1e-6 and float(p.max()) <= 1


def test_an_adoption_the_age_weights_cannot_reach_is_refused(tmp_path):
    """With weight 0 for ages 0-9 (about 11% of King County's agents), at most 89% can own the
    app: 0.95 is refused with the reachable share (the solver gave a lower adoption silently),
    by `abm run` with the file named, exit code 2 and nothing written; 0.85 runs."""
    import yaml
    from typer.testing import CliRunner

    from abm.cli import app

    weights = [0.0, 1, 1, 1, 1, 1, 1, 1, 1]
    sc = {"name": "apps", "population": {"agents": 5000}, "simulation": {"days": 2, "replicates": 1}}
    tracing = {"age_weights": weights, "app_adoption": 0.95}  # quarantine on: notices that act (no note)
    sc["interventions"] = {"testing": {}, "quarantine": {}, "digital_tracing": tracing}
    with pytest.raises(ScenarioError, match=r"app_adoption: 0.95 cannot be reached .* at most 8\d\.\d% can own"):
        abm.run(sc)
    path, out = tmp_path / "apps.yaml", tmp_path / "out"
    path.write_text(yaml.safe_dump(sc))
    result = CliRunner().invoke(app, ["run", str(path), "--out", str(out)])
    message = " ".join(result.output.split())
    assert result.exit_code == 2 and f"error: {path}: interventions.digital_tracing.app_adoption: 0.95" in message
    assert "Traceback" not in result.output and not out.exists()
    sc["interventions"]["digital_tracing"]["app_adoption"] = 0.85
    abm.run(sc)  # reachable: not refused


def test_manual_tracing_never_reaches_community_contacts():
    n = 200
    pop = make_population([[i] for i in range(n)])
    contacts = quiet_contacts(community={"weight": 1.0, "mean_contacts": (20, 20, 20), "sd_contacts": (0, 0, 0)})
    mct = ManualTracing(ManualTracingConfig(recall=1.0, reachable=1.0, compliance=1.0))
    sim = sim_of(pop, [mct], days=10, contacts=contacts)
    sim.fields["positive_day"][:] = 5
    for day in range(6):
        sim.step(day)
    # Every positive was interviewed (on day 5), and none of its community contacts was traced.
    assert sim.activity["interviews"][:, 0].tolist() == [0] * 5 + [n] + [0] * 4
    assert sim.activity["manual_notifications"].sum() == 0
    assert not sim.fields["quarantine_request"].any() and not sim.state.isolated.any()


def test_manual_tracing_recall_reach_and_compliance_rates():
    reps = 3000
    pop = make_population([list(range(11))])  # an index case and 10 household contacts
    contacts = quiet_contacts(household={"weight": 1.0})
    cfg = ManualTracingConfig(recall=0.7, reachable=0.8, compliance=0.9, mode="parallel")
    sim = sim_of(pop, [ManualTracing(cfg), Quarantine(QuarantineConfig())], replicates=reps, days=10, contacts=contacts)
    for day in range(5):
        sim.step(day)
    sim.fields["positive_day"].view(reps, 11)[:, 0] = 5
    sim.step(5)
    iso = sim.state.isolated.view(reps, 11)
    # Contacts quarantine with P = reach(index) x recall x reach(contact) x comply.
    p = 0.8 * 0.7 * 0.8 * 0.9
    # A replicate's share is R x B / 10, R ~ Bernoulli(0.8) (the index reached), B ~ Bin(10, 0.504):
    # variance 0.8 x 0.504 x 0.496 / 10 + 0.16 x 0.504^2 = 0.0606 per replicate.
    share_var = 0.8 * 0.504 * 0.496 / 10 + 0.8 * 0.2 * 0.504**2
    assert abs(iso[:, 1:].double().mean().item() - p) < 4 * math.sqrt(share_var / reps)
    # Reaching the index case is one draw per case, all-or-none across its contacts: some contact
    # quarantines with P = 0.8 x (1 - (1 - 0.504)^10) = 0.799 (a reach drawn per contact would
    # give 1 - (1 - 0.403)^10 = 0.994).
    any_traced = iso[:, 1:].any(1).double().mean().item()
    assert within(any_traced, 0.8 * (1 - (1 - 0.504) ** 10), reps)


def test_two_step_tracing_skips_contacts_who_heeded_the_app():
    pop = tracing_population()
    contacts = quiet_contacts(household={"weight": 1.0}, occupation={"weight": 1.0})
    dct = DigitalTracing(DigitalTracingConfig(compliance=1.0))
    mct = ManualTracing(ManualTracingConfig(recall=1.0, reachable=1.0, compliance=1.0, mode="two_step"))
    sim = sim_of(pop, [dct, mct, Quarantine(QuarantineConfig(daily_dropout=0.0))], days=10, contacts=contacts)
    sim.fields["has_app"][:] = torch.tensor([True, True, False, True, False, False])
    for day in range(4):
        sim.step(day)
    sim.fields["positive_day"][0] = 4
    sim.step(4)
    # 1 and 3 heeded the app; manual tracing adds 2 and 4 (no app); 5 is no contact.
    assert sim.state.isolated.tolist() == [True, True, True, True, True, False]
    assert sim.fields["dct_complied_day"].tolist() == [-1, 4, -1, 4, -1, -1]


def test_manual_tracing_interviews_at_most_its_daily_capacity():
    """Capacity 3 with 10 positives on each of days 5, 6 and 7: exactly 3 interviews per replicate
    on each of those days, the 3 chosen at random among the 10 (selection.py: a uniform key)."""
    reps = 1000
    # Households {2i, 2i + 1}: index case 2i and a housemate; 10 index cases a day.
    pop = make_population([[2 * i, 2 * i + 1] for i in range(30)])
    cfg = ManualTracingConfig(
        recall=1.0, reachable=1.0, compliance=1.0, mode="parallel", daily_capacity=3, cost_per_interview=10.0
    )
    sim = sim_of(pop, [ManualTracing(cfg)], replicates=reps, days=9, contacts=quiet_contacts(household={"weight": 1.0}))
    positive = sim.fields["positive_day"].view(reps, 60)
    for k, day in enumerate((5, 6, 7)):
        positive[:, 20 * k : 20 * (k + 1) : 2] = day
    res = sim.run()
    want = np.array([0] * 5 + [3, 3, 3] + [0])[:, None]
    assert np.array_equal(res.activity["interviews"], np.repeat(want, reps, 1))
    assert np.array_equal(res.activity["manual_notifications"], np.repeat(want, reps, 1)), "one housemate each"
    assert res.cost_totals.tolist() == [90.0] * reps  # 9 interviews at $10
    traced = sim.fields["quarantine_request"].view(reps, 60)
    assert not traced[:, 0::2].any()
    for mate in range(1, 60, 2):  # each housemate traced when its index case is one of the 3 of 10
        assert within(traced[:, mate].double().mean().item(), 0.3, reps), mate


@pytest.mark.parametrize("tracer", ["manual", "digital"])
@pytest.mark.parametrize("test_contacts", [True, False])
def test_traced_contacts_who_comply_ask_for_a_test_when_test_contacts(tracer, test_contacts):
    """Index case 0, symptomatic and kept non-infectious, tested on day 0 and positive on day 3,
    with 10 household contacts; compliance 0.6; a same-day test for the traced. With
    test_contacts, the contacts who comply (asked to quarantine) also ask for a test (tracing.py
    ``notify``) and take it that day (testing comes after tracing); those who do not comply, or
    everyone without test_contacts, are not tested."""
    reps = 400
    pop = make_population([list(range(11))])
    pcr = {"name": "rt_pcr", "sensitivity": 1.0, "result_delay_days": [3], "result_delay_probs": [1.0]}
    rapid = {
        "name": "rapid",
        "sensitivity": 1.0,
        "result_delay_days": [0],
        "result_delay_probs": [1.0],
        "given_to": ["traced"],
    }
    if tracer == "manual":
        cfg = ManualTracingConfig(recall=1.0, reachable=1.0, compliance=0.6, test_contacts=test_contacts)
        trace = ManualTracing(cfg)
    else:
        trace = DigitalTracing(DigitalTracingConfig(compliance=0.6, test_contacts=test_contacts))
    sim = sim_of(
        pop,
        [InterventionTesting(TestingConfig(tests=[pcr, rapid])), trace],
        replicates=reps,
        days=5,
        contacts=quiet_contacts(household={"weight": 1.0}),
    )
    sim.fields["has_app"][:] = True
    index = torch.arange(reps) * 11
    sim.state.stage[index] = int(Stage.MILD_SYMPTOMS)
    sim.state.next_day[index] = 10_000
    sim.state.infectiousness_scale[index] = 0.0  # its contacts stay susceptible (and untested)
    res = sim.run()
    assert (sim.fields["positive_day"][index] == 3).all()
    complied = sim.fields["quarantine_request"].view(reps, 11)
    assert not complied[:, 0].any()
    assert within(complied[:, 1:].double().mean().item(), 0.6, reps * 10)
    tested = sim.fields["last_test_day"].view(reps, 11)[:, 1:] == 3
    tests = res.activity["tests"]
    assert tests[0].tolist() == [1] * reps, "the index case"
    if test_contacts:
        assert torch.equal(tested, complied[:, 1:])
        assert tests[3].tolist() == complied.sum(1).tolist()
        assert tests.sum() == reps + complied.sum()
    else:
        assert tests.sum() == reps and not tested.any()


def dct_household(reps: int, **cfg) -> Simulation:
    """Index case 0 (with the app) positive on day 3, 10 household contacts with the app; digital
    tracing run to day 3."""
    pop = make_population([list(range(11))])
    sim = sim_of(
        pop,
        [DigitalTracing(DigitalTracingConfig(**cfg))],
        replicates=reps,
        days=4,
        contacts=quiet_contacts(household={"weight": 1.0}),
    )
    sim.fields["has_app"][:] = True
    sim.fields["positive_day"].view(reps, 11)[:, 0] = 3
    for day in range(4):
        sim.step(day)
    return sim


def test_digital_tracing_notified_contacts_comply_with_the_compliance_probability():
    reps = 500
    sim = dct_household(reps, compliance=0.6)
    notified = sim.fields["dct_notified_day"].view(reps, 11)[:, 1:] == 3
    assert notified.all(), "notify_probability 1: every contact is notified"
    assert sim.activity["app_notifications"][3].tolist() == [10] * reps
    complied = sim.fields["dct_complied_day"].view(reps, 11) == 3
    assert torch.equal(complied, sim.fields["quarantine_request"].view(reps, 11))
    # one independent draw per notified contact: Bin(5000, 0.6)
    assert not complied[:, 0].any() and within(complied[:, 1:].double().mean().item(), 0.6, reps * 10)


def test_digital_tracing_sends_the_notice_with_notify_probability():
    """One draw per positive app owner (digital_tracing.py ``trace``): all of its contacts are
    notified, or none."""
    reps = 2000
    sim = dct_household(reps, compliance=1.0, notify_probability=0.5)
    notified = sim.fields["dct_notified_day"].view(reps, 11)[:, 1:] == 3
    sent = notified[:, 0]
    assert torch.equal(notified, sent[:, None].expand(-1, 10)), "all of the index case's contacts, or none"
    assert within(sent.double().mean().item(), 0.5, reps)
    assert sim.activity["app_notifications"][3].tolist() == (10 * sent.long()).tolist()


APP_W = [0.09, 0.80, 0.97, 0.96, 0.94, 0.86, 0.70, 0.48, 0.32]  # the default age weights
C_90 = 1.1 / 0.41  # adoption 0.9: groups 1-7 capped at 1, 7 + C (0.09 + 0.32) = 9 x 0.9


@pytest.mark.parametrize(
    ("adoption", "stratified", "expected"),
    [
        # p_g = min(1, c w_g) with mean 0.4 over equal groups (digital_tracing.py
        # ownership_probabilities); c = 0.4 / mean(w) = 0.4 / (6.12 / 9), c w_g <= 0.571: no cap
        (0.4, True, [0.4 * w / 0.68 for w in APP_W]),
        (0.4, False, [0.4] * 9),
        # 0.32 C = 0.859 < 1 <= 0.48 C = 1.29: exactly groups 1-7 capped
        (0.9, True, [0.09 * C_90] + [1.0] * 7 + [0.32 * C_90]),
    ],
)
def test_app_ownership_is_drawn_by_age_group(adoption, stratified, expected):
    per_group, reps = 200, 10
    pop = make_population([[i] for i in range(9 * per_group)], ages=[10 * g + 5 for g in range(9)] * per_group)
    cfg = DigitalTracingConfig(app_adoption=adoption, age_stratified=stratified)
    sim = sim_of(pop, [DigitalTracing(cfg)], replicates=reps, days=1)
    has_app = sim.fields["has_app"].view(reps, -1).numpy()
    assert sum(expected) / 9 == pytest.approx(adoption)
    for g, p in enumerate(expected):
        share = has_app[:, pop.age_group == g].mean()
        assert within(share, p, reps * per_group), (g, share, p)  # p = 1: every agent


# ----------------------------------------------------------------------------- contact changes
def test_series_recovery_scales_rises_above_the_running_minimum(tmp_path):
    src = tmp_path / "m.csv"
    src.write_text("multiplier\n1.0\n0.5\n0.3\n0.6\n0.4\n0.9\n")
    levels = {}
    for recovery in (1.0, 0.5, 0.0):
        cm = ContactMultipliers(
            ContactMultipliersConfig(series={"source": str(src), "start_day": 2, "recovery": recovery})
        )
        levels[recovery] = [cm.multipliers(d)["community"] for d in range(10)]
        assert [cm.multipliers(d)["household"] for d in range(10)] == [1.0] * 10
    assert levels[1.0] == pytest.approx([1, 1, 1.0, 0.5, 0.3, 0.6, 0.4, 0.9, 0.9, 0.9])
    # min so far 0.3 from day 4: 0.3 + 0.5 (0.6 - 0.3), 0.3 + 0.5 (0.4 - 0.3), 0.3 + 0.5 (0.9 - 0.3)
    assert levels[0.5] == pytest.approx([1, 1, 1.0, 0.5, 0.3, 0.45, 0.35, 0.6, 0.6, 0.6])
    assert levels[0.0] == pytest.approx([1, 1, 1.0, 0.5, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3])
    with pytest.raises(ValueError, match="recovery"):
        ContactMultipliersConfig(series={"source": str(src), "recovery": 1.5})


def test_a_series_that_does_not_hold_its_last_value_uses_it_on_its_last_day(tmp_path):
    """``hold_last: false``: each day of the series uses its value, the last one included, and
    the days after the series end have multiplier 1."""
    src = tmp_path / "m.csv"
    src.write_text("multiplier\n0.8\n0.5\n0.4\n")
    cm = ContactMultipliers(ContactMultipliersConfig(series={"source": str(src), "start_day": 1, "hold_last": False}))
    assert [cm.multipliers(d)["community"] for d in range(6)] == pytest.approx([1.0, 0.8, 0.5, 0.4, 1.0, 1.0])


def test_a_change_or_closure_must_last_at_least_a_day():
    """until_day is the first day without the change: until_day equal to from_day would be a
    change of no day, which is refused as one that ends before it starts is."""
    from pydantic import ValidationError

    from abm.interventions.contact_multipliers import Change, Closure

    for model in (Change, Closure):
        with pytest.raises(ValidationError, match=r"until_day \(5\) must come after from_day \(5\)"):
            model(from_day=5, until_day=5)
        assert model(from_day=5, until_day=6).until_day == 6


def test_a_series_file_with_dates_must_run_day_by_day(tmp_path):
    """The multipliers are used one a day from start_day in file order; a 'date' column that
    skips, repeats or reorders a day would move every later value to another day, so it is
    refused (before the check, the gap below was accepted and 2020-03-04's 0.5 used on 03-03)."""
    src = tmp_path / "m.csv"
    src.write_text("date,multiplier\n2020-03-01,1.0\n2020-03-02,0.9\n2020-03-04,0.5\n")
    with pytest.raises(ValueError) as info:
        ContactMultipliersConfig(series={"source": str(src)})
    assert f"{src}: date '2020-03-04' on line 4 is not allowed; expected 2020-03-03" in str(info.value)
    src.write_text("date,multiplier\n2020-03-02,0.9\n2020-03-01,1.0\n")
    with pytest.raises(ValueError, match="date '2020-03-01' on line 3 is not allowed; expected 2020-03-03"):
        ContactMultipliersConfig(series={"source": str(src)})
    src.write_text("date,multiplier\n03/01/2020,1.0\n03/02/2020,0.9\n")  # 1 March or 3 January?
    with pytest.raises(ValueError, match="date '03/01/2020' on line 2 is not allowed; expected a date"):
        ContactMultipliersConfig(series={"source": str(src)})
    src.write_text("date,multiplier\n2020-03-01,1.0\n2020-03-02,0.9\n2020-03-03,0.5\n")
    cm = ContactMultipliers(ContactMultipliersConfig(series={"source": str(src), "start_day": 1}))
    assert [cm.multipliers(d)["community"] for d in range(6)] == [1.0, 1.0, 0.9, 0.5, 0.5, 0.5]


def test_the_bundled_mobility_series_falls_on_its_dates_in_the_2020_calibration():
    """calibrate_2020.yaml (day 0 = 2020-02-01) starts the series on day 29, 2020-03-01 (2020 is
    a leap year): each day uses the value the bundled file dates to that day, and after its last
    date (2020-07-10, day 160) the last value is held."""
    sc = load_scenario(KC_CALIBRATION)
    cfg = sc.interventions.contact_multipliers
    cm = ContactMultipliers(cfg)
    table = pd.read_csv(Path(abm.__file__).parent / "interventions/data/king_county_mobility_2020.csv")
    day0 = pd.Timestamp(sc.calibration.start_date)
    strength = cfg.series.strength
    for date, value in zip(pd.to_datetime(table["date"]), table["multiplier"], strict=True):
        day = (date - day0).days
        assert cm.multipliers(day)["community"] == pytest.approx(1 - strength * (1 - value))
    assert (pd.Timestamp("2020-03-01") - day0).days == cfg.series.start_day == 29
    assert cm.multipliers(28)["community"] == 1.0
    last = 1 - strength * (1 - table["multiplier"].iloc[-1])
    assert (pd.Timestamp(table["date"].iloc[-1]) - day0).days == 160
    assert cm.multipliers(161)["community"] == cm.multipliers(400)["community"] == pytest.approx(last)


def test_series_household_share_and_floor(tmp_path):
    src = tmp_path / "m.csv"
    src.write_text("multiplier\n0.3\n0.0\n")
    cm = ContactMultipliers(ContactMultipliersConfig(series={"source": str(src), "household_share": 0.5}))
    assert cm.multipliers(0) == pytest.approx({"household": 1 - 0.5 * 0.7, "occupation": 0.3, "community": 0.3})
    # strength 1.5 would make 1 - 1.5 (1 - 0) negative: multipliers stop at 0
    cm = ContactMultipliers(
        ContactMultipliersConfig(series={"source": str(src), "strength": 1.5, "household_share": 0.5})
    )
    assert cm.multipliers(1) == pytest.approx({"household": 0.25, "occupation": 0.0, "community": 0.0})
    # household listed among the layers takes the full reduction; the share adds nothing more
    cm = ContactMultipliers(
        ContactMultipliersConfig(series={"source": str(src), "layers": ["household"], "household_share": 0.5})
    )
    assert cm.multipliers(0) == pytest.approx({"household": 0.3, "occupation": 1.0, "community": 1.0})


def test_a_series_layer_named_twice_or_no_layer_at_all_is_refused(tmp_path):
    """A layer named twice took the series' multiplier twice (0.5 became 0.25 on community
    contacts, silently); no layer and no household share changed no contact. Both are refused;
    no layer with a household share still reduces household contacts only."""
    src = tmp_path / "m.csv"
    src.write_text("multiplier\n0.5\n")
    with pytest.raises(ValueError, match="each layer may be named once"):
        ContactMultipliersConfig(series={"source": str(src), "layers": ["community", "community"]})
    with pytest.raises(ValueError, match=r"layers: \[\] is not allowed with household_share 0"):
        ContactMultipliersConfig(series={"source": str(src), "layers": []})
    cm = ContactMultipliers(ContactMultipliersConfig(series={"source": str(src), "layers": ["community"]}))
    assert cm.multipliers(0) == {"household": 1.0, "occupation": 1.0, "community": 0.5}
    cm = ContactMultipliers(ContactMultipliersConfig(series={"source": str(src), "layers": [], "household_share": 0.4}))
    assert cm.multipliers(0) == pytest.approx({"household": 0.8, "occupation": 1.0, "community": 1.0})


def test_contact_multipliers_changes_series_and_closures(kc_100k):
    cfg = ContactMultipliersConfig(
        changes=[{"from_day": 10, "until_day": 20, "occupation": 0.5}, {"from_day": 15, "community": 0.4}],
        series={"start_day": 30, "strength": 0.5, "layers": ["community"]},
        closures=[{"from_day": 5, "until_day": 8}],
    )
    cm = ContactMultipliers(cfg)
    assert cm.multipliers(0) == {"household": 1.0, "occupation": 1.0, "community": 1.0}
    assert cm.multipliers(12) == {"household": 1.0, "occupation": 0.5, "community": 1.0}
    assert cm.multipliers(16) == {"household": 1.0, "occupation": 0.5, "community": 0.4}
    first = cm.series[0]
    assert first == 1.0 and len(cm.series) == 132 and min(cm.series) < 0.3
    assert cm.multipliers(31)["community"] == pytest.approx(0.4 * (1 - 0.5 * (1 - cm.series[1])))
    assert cm.multipliers(500)["community"] == pytest.approx(0.4 * (1 - 0.5 * (1 - cm.series[-1])))
    sim = Simulation(
        kc_100k, DiseaseConfig(), quiet_contacts(occupation={"weight": 1.0}), NO_SEEDS, days=10, interventions=[cm]
    )
    school = torch.as_tensor(
        np.where(kc_100k.group >= 0, kc_100k.group_category[np.maximum(kc_100k.group, 0)], -1)
        == kc_100k.categories.index("SCHOOL")
    )
    before = sim.occupation.coef.clone()
    sim.step(5)
    assert (sim.occupation.coef[school] == 0).all() and torch.equal(sim.occupation.coef[~school], before[~school])
    sim.step(8)
    assert torch.equal(sim.occupation.coef, before)


def test_out_of_range_intervention_parameters_are_rejected():
    bad = [
        ({"quarantine": {"daily_dropout": 1.5}}, "interventions.quarantine.daily_dropout: 1.5 is not allowed"),
        (
            {
                "testing": {
                    "tests": [{"name": "x", "sensitivity": 2, "result_delay_days": [1], "result_delay_probs": [1]}]
                }
            },
            "interventions.testing.tests[0].sensitivity: 2 is not allowed",
        ),
        (
            {
                "testing": {
                    "tests": [
                        {"name": "x", "sensitivity": 0.9, "result_delay_days": [1, 2], "result_delay_probs": [0.5, 0.6]}
                    ]
                }
            },
            "result_delay_probs [0.5, 0.6] must be probabilities summing to 1 (they sum to 1.1)",
        ),
        (
            {"digital_tracing": {"app_adoption": -0.1}},
            "interventions.digital_tracing.app_adoption: -0.1 is not allowed",
        ),
        (
            {"digital_tracing": {"age_weights": [0.1, -0.5, 1, 1, 1, 1, 1, 1, 1]}},
            "interventions.digital_tracing.age_weights[1]: -0.5 is not allowed",
        ),
        ({"manual_tracing": {"mode": "sequential"}}, "interventions.manual_tracing.mode: 'sequential' is not allowed"),
        (
            {"contact_multipliers": {"changes": [{"from_day": -2}]}},
            "interventions.contact_multipliers.changes[0].from_day: -2 is not allowed",
        ),
        ({"lockdown": {}}, "interventions.lockdown: unknown key; allowed keys: contact_multipliers, digital_tracing"),
        # Days past the longest simulation would overflow the int16 day fields (a crash, or a
        # protection that silently starts 65,536 days early).
        ({"quarantine": {"days": 40000}}, "interventions.quarantine.days: 40000 is not allowed: must be at most 10000"),
        (
            {"vaccination": {"dose1_delay_days": 65541}},
            "interventions.vaccination.dose1_delay_days: 65541 is not allowed: must be at most 10000",
        ),
        (
            {
                "testing": {
                    "tests": [
                        {"name": "x", "sensitivity": 0.9, "result_delay_days": [40000], "result_delay_probs": [1]}
                    ]
                }
            },
            "result delays must be 0 to 10000 days",
        ),
        ({"vaccination": {"priority": []}}, "a priority list holds one or more distinct entries, each an age group"),
    ]
    for interventions, message in bad:
        with pytest.raises(ScenarioError) as err:
            validate({"name": "x", "interventions": interventions}, "x.yaml")
        assert message in str(err.value), str(err.value)


def test_seeding_after_vaccination_does_not_infect_the_immune():
    """Every agent vaccinated on day 0 with efficacy 1 and protection the same day: a seeding on
    day 4 finds no one it can infect (it infected 30 immune agents a replicate)."""
    sc = {
        "name": "immune",
        "population": {"agents": 400},
        "simulation": {"days": 8, "replicates": 2, "seed": 3},
        "seeding": {"day": 4, "infections": {"asymptomatic": 30}},
        "interventions": {
            "vaccination": {"start_day": 0, "daily_doses": 100_000, "dose1_efficacy": 1.0, "dose1_delay_days": 0}
        },
    }
    result = abm.run(sc)
    assert result.timeseries.groupby("replicate").first_doses.sum().tolist() == [400, 400]
    assert result.result.introduced.sum(axis=0).tolist() == [0, 0]
    assert (result.timeseries.susceptible == 400).all()


def test_tracing_with_a_30_day_window_draws_each_days_occupation_rewiring_once(kc_100k, monkeypatch):
    """The occupation layer keeps the rewiring of the tracers' window (and today): with 16 days
    kept, a 30-day window drew most of its days again every day (same contacts, 12x the draws
    and 2.5x the time of a 100,000-agent vacc_ct run)."""
    import abm.engine.contacts as contacts
    from abm.runs import resolve

    drawn: list[int] = []
    real = contacts.generator

    def counting(seed: int, stream: str, day: int, device: torch.device) -> torch.Generator:
        if stream == "occupation":
            drawn.append(day)
        return real(seed, stream, day, device)

    monkeypatch.setattr(contacts, "generator", counting)
    sets = [f"interventions.{t}.window_days=30" for t in ("digital_tracing", "manual_tracing")]
    sc = resolve(Path(__file__).resolve().parents[1] / "scenarios/king_county/ct.yaml", {}, sets)
    sim = Simulation(
        kc_100k,
        sc.disease.model_copy(update={"transmission_rate": 4.567}),
        sc.contacts,
        sc.seeding,
        days=60,
        replicates=1,
        seed=2,
        interventions=sc.interventions.build(),
    )
    res = sim.run()
    traced_late = res.activity["app_notifications"][20:].sum() + res.activity["manual_notifications"][20:].sum()
    assert traced_late > 0, "tracing over windows longer than 16 days happened"
    assert len(drawn) == len(set(drawn)), sorted(drawn)


def test_only_agents_with_an_ongoing_infection_test_positive():
    """A perfect test (sensitivity 1, specificity 1) asked for by six traced agents: those infected
    and not over it (asymptomatic, presymptomatic, mild) are positive, the susceptible negative;
    the recovered and the dead are not tested (only stages up to severe symptoms are, specs:
    epidemic model section 6 step 3), so a recovered agent is neither billed nor sent, with its
    contacts, into quarantine by a positive result."""
    pop = make_population([[i] for i in range(6)])
    test = {"name": "rapid", "sensitivity": 1.0, "result_delay_days": [0], "result_delay_probs": [1.0]}
    sim = sim_of(pop, [InterventionTesting(TestingConfig(tests=[{**test, "given_to": ["traced"]}]))], days=2)
    stages = [Stage.SUSCEPTIBLE, Stage.ASYMPTOMATIC, Stage.PRESYMPTOMATIC_MILD, Stage.MILD_SYMPTOMS]
    stages += [Stage.RECOVERED, Stage.DEATH]
    sim.state.stage[:] = torch.tensor([int(s) for s in stages], dtype=torch.int8)
    sim.state.next_day[:] = 10_000
    sim.field("test_request", torch.bool)[:] = True
    sim.step(0)
    assert sim.fields["positive_day"].tolist() == [-1, 0, 0, 0, -1, -1]
    assert sim.fields["last_test_day"].tolist() == [0, 0, 0, 0, -1, -1], "the recovered and the dead are not tested"


def test_each_test_type_is_billed_under_its_own_name_and_price():
    """Symptomatic agents take RT-PCR ($5), traced contacts the rapid test ($3): costs.csv
    books test_rt_pcr and test_rapid apart, each at its own price and count."""
    pop = make_population([[i] for i in range(5)])
    pcr = {"name": "rt_pcr", "sensitivity": 0.0, "result_delay_days": [1], "result_delay_probs": [1.0], "cost": 5.0}
    rapid = {**pcr, "name": "rapid", "cost": 3.0, "given_to": ["traced"]}
    sim = sim_of(pop, [InterventionTesting(TestingConfig(tests=[pcr, rapid]))], days=1)
    sim.state.stage[:2] = int(Stage.MILD_SYMPTOMS)  # agents 0, 1 symptomatic; 2-4 traced
    sim.state.next_day[:] = 10_000
    sim.field("test_request", torch.bool)[2:] = True
    res = sim.run()
    booked = res.costs.set_index("item")[["count", "unit_cost", "cost"]]
    assert booked.to_dict("index") == {
        "test_rt_pcr": {"count": 2, "unit_cost": 5.0, "cost": 10.0},
        "test_rapid": {"count": 3, "unit_cost": 3.0, "cost": 9.0},
    }


def test_last_free_day_of_an_isolation_history():
    """The last day of [first, day) an agent was not isolated (bit k of its history: isolated on
    day day - 1 - k), -1 when isolated on every day of the window; worked by hand for day 10."""
    from abm.interventions.tracing import last_free_day

    # Agent 0: never isolated -> day 9. Agent 1: isolated on days 9 and 8 (bits 0, 1) -> day 7.
    # Agent 2: isolated on days 3-9 (bits 0-6) -> none in [3, 10): -1. Agent 3: isolated on day 7
    # only (bit 2) -> day 9. Agent 4: isolated on days 4-9 (bits 0-5), free on day 3 -> day 3.
    # Agent 5: every one of 30 days (bits 0-29) isolated -> -1.
    bits = torch.tensor([0, 0b11, 0b1111111, 0b100, 0b111111, (1 << 30) - 1], dtype=torch.int32)
    like = torch.zeros(6, dtype=torch.int64)
    assert last_free_day(bits, 3, 10, like).tolist() == [9, 7, -1, 9, 3, -1]
    assert last_free_day(None, 3, 10, like).tolist() == [9] * 6
    assert last_free_day(bits, 10, 10, like).tolist() == [-1] * 6  # an empty window
    # A 30-day window (the longest): isolated on days 23-29 -> day 22; isolated throughout -> -1.
    history = torch.tensor([0b1111111, (1 << 30) - 1], dtype=torch.int32)
    assert last_free_day(history, 0, 30, torch.zeros(2, dtype=torch.int32)).tolist() == [22, -1]
