"""Interventions on tiny hand-built populations, with exact or binomial expectations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from conftest import make_population, quiet_contacts

from abm.engine import DiseaseConfig, SeedingConfig, Simulation, Stage
from abm.interventions.contact_multipliers import ContactMultipliers, ContactMultipliersConfig
from abm.interventions.digital_tracing import DigitalTracing, DigitalTracingConfig, ownership_probabilities
from abm.interventions.manual_tracing import ManualTracing, ManualTracingConfig
from abm.interventions.quarantine import Quarantine, QuarantineConfig
from abm.interventions.testing import Testing, TestingConfig
from abm.interventions.vaccination import Vaccination, VaccinationConfig
from abm.outputs.tables import timeseries
from abm.scenario import ScenarioError, validate

NO_SEEDS = SeedingConfig(infections={})


def sim_of(pop, interventions, replicates=1, days=30, contacts=None, seed=1) -> Simulation:
    return Simulation(
        pop,
        DiseaseConfig(),
        contacts or quiet_contacts(),
        NO_SEEDS,
        days=days,
        replicates=replicates,
        seed=seed,
        interventions=interventions,
    )


def within(got: float, p: float, n: int, k: float = 4.0) -> bool:
    return abs(got - p) <= k * math.sqrt(max(p * (1 - p), 1e-12) / n)


# ----------------------------------------------------------------------------- vaccination
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


def test_tests_positives_and_quarantine_are_counted_daily():
    pop = make_population([[0], [1]])
    test = {"name": "rt_pcr", "sensitivity": 1.0, "result_delay_days": [2], "result_delay_probs": [1.0]}
    ivs = [Testing(TestingConfig(tests=[test])), Quarantine(QuarantineConfig(days=5, daily_dropout=0.0))]
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


def test_vaccination_parameters_are_checked():
    with pytest.raises(ScenarioError, match=r"interventions\.vaccination\.dose1_efficacy: 1\.2 is not allowed"):
        validate({"name": "x", "interventions": {"vaccination": {"dose1_efficacy": 1.2}}}, "x.yaml")
    with pytest.raises(ScenarioError, match="daily_doses: -5 is not allowed"):
        validate({"name": "x", "interventions": {"vaccination": {"daily_doses": -5}}}, "x.yaml")


# ----------------------------------------------------------------------------- testing
def test_testing_sensitivity_delays_and_cost():
    reps = 20_000
    pop = make_population([[0]], ages=[40])
    testing = Testing(TestingConfig())
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
    testing = Testing(TestingConfig(tests=[test]))
    sim = sim_of(pop, [testing], replicates=reps, days=3)
    sim.state.stage[:] = int(Stage.MILD_SYMPTOMS)
    sim.state.next_day[:] = 10_000
    sim.step(0)
    assert sim.ledger.table()["count"].tolist() == [7.0] * reps, "capacity per replicate"
    # Recovered agents with symptoms cannot exist; test specificity on susceptibles instead.
    sim2 = sim_of(
        pop,
        [Testing(TestingConfig(tests=[{**test, "daily_capacity": None, "given_to": ["traced"]}]))],
        replicates=reps,
        days=3,
    )
    sim2.field("test_request", torch.bool)[:] = True
    sim2.step(0)
    false_pos = (sim2.fields["positive_day"] == 0).double().mean().item()
    assert within(false_pos, 0.1, reps * 100)


def _tests_taken(retest: bool, sensitivity: float, enter: float, days: int = 6) -> int:
    """Tests one symptomatic agent takes over ``days`` days (results after exactly 1 day)."""
    pop = make_population([[0]])
    test = {"name": "rt_pcr", "sensitivity": sensitivity, "result_delay_days": [1], "result_delay_probs": [1.0]}
    testing = Testing(TestingConfig(tests=[test], retest_positives=retest))
    quarantine = Quarantine(QuarantineConfig(enter_probability=enter, daily_dropout=0.0))
    sim = sim_of(pop, [testing, quarantine], days=days)
    sim.state.stage[:] = int(Stage.MILD_SYMPTOMS)
    sim.state.next_day[:] = 10_000
    for day in range(days):
        sim.step(day)
    return int(sim.ledger.table()["count"].sum())


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


def same_day_case(tracer: str) -> Simulation:
    """Agent 0 symptomatic, a rapid test (result the same day), every tracer certain, everyone
    with the app: its household and workmates are agents 1-4."""
    pop = tracing_population()
    contacts = quiet_contacts(household={"weight": 1.0}, occupation={"weight": 1.0})
    rapid = {"name": "rapid", "sensitivity": 1.0, "result_delay_days": [0], "result_delay_probs": [1.0]}
    if tracer == "digital":
        trace = DigitalTracing(DigitalTracingConfig(compliance=1.0))
    else:
        trace = ManualTracing(ManualTracingConfig(recall=1.0, reachable=1.0, compliance=1.0, mode="parallel"))
    sim = sim_of(pop, [Testing(TestingConfig(tests=[rapid])), trace], days=5, contacts=contacts)
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


def test_app_ownership_hits_the_target_mean():
    w = torch.tensor([0.09, 0.80, 0.97, 0.96, 0.94, 0.86, 0.70, 0.48, 0.32])[torch.arange(9).repeat(100)]
    for target in (0.2, 0.4, 0.7, 0.95):
        p = ownership_probabilities(w, target)
        assert abs(float(p.mean()) - target) < 1e-6 and float(p.max()) <= 1


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
            "summing to 1",
        ),
        (
            {"digital_tracing": {"app_adoption": -0.1}},
            "interventions.digital_tracing.app_adoption: -0.1 is not allowed",
        ),
        ({"manual_tracing": {"mode": "sequential"}}, "interventions.manual_tracing.mode: 'sequential' is not allowed"),
        (
            {"contact_multipliers": {"changes": [{"from_day": -2}]}},
            "interventions.contact_multipliers.changes[0].from_day: -2 is not allowed",
        ),
        ({"lockdown": {}}, "interventions.lockdown: unknown key; allowed keys: contact_multipliers, digital_tracing"),
    ]
    for interventions, message in bad:
        with pytest.raises(ScenarioError) as err:
            validate({"name": "x", "interventions": interventions}, "x.yaml")
        assert message in str(err.value), str(err.value)
