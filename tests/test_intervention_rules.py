"""Rules of testing, quarantine and tracing that the other intervention tests left open
(found by a hand-made mutation audit): exact on tiny populations, or binomial with fixed seeds."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from conftest import make_population, quiet_contacts, sim_of

from abm.engine import Stage
from abm.interventions.contact_multipliers import ContactMultipliers, ContactMultipliersConfig
from abm.interventions.digital_tracing import DigitalTracing, DigitalTracingConfig
from abm.interventions.manual_tracing import ManualTracing, ManualTracingConfig
from abm.interventions.testing import Testing as InterventionTesting  # a name pytest does not collect (Test...)
from abm.interventions.testing import TestingConfig


def within(got: float, p: float, n: int, k: float = 4.0) -> bool:
    """``got``, a share of ``n`` independent Bernoulli(p) draws, within k binomial sd of p."""
    return abs(got - p) <= k * math.sqrt(max(p * (1 - p), 1e-12) / n)


# ----------------------------------------------------------------------------- testing
def test_agents_in_hospital_are_not_tested_even_on_request():
    """docs/model.md, "Who each intervention reaches": testing takes agents not recovered, dead
    or in hospital, on request too (specs section 6 step 3: stage <= 5, severe symptoms). Agents
    in HOSPITALIZED, CRITICAL_ICU and HOSPITALIZED_RECOVERING who ask for a test (traced) take
    none; a severe-symptoms agent beside them does."""
    pop = make_population([[i] for i in range(4)])
    test = {"name": "rapid", "sensitivity": 1.0, "result_delay_days": [0], "result_delay_probs": [1.0]}
    sim = sim_of(pop, [InterventionTesting(TestingConfig(tests=[{**test, "given_to": ["traced"]}]))], days=2)
    stages = [Stage.HOSPITALIZED, Stage.CRITICAL_ICU, Stage.HOSPITALIZED_RECOVERING, Stage.SEVERE_SYMPTOMS]
    sim.state.stage[:] = torch.tensor([int(s) for s in stages], dtype=torch.int8)
    sim.state.next_day[:] = 10_000
    sim.field("test_request", torch.bool)[:] = True
    sim.step(0)
    assert sim.fields["last_test_day"].tolist() == [-1, -1, -1, 0]
    assert sim.activity["tests"][0, 0] == 1


def test_recovered_and_dead_agents_are_not_tested_or_billed_even_on_request():
    """The same rule for the recovered and the dead: of four agents asked to test (a test given
    to traced contacts, sensitivity and specificity 1), only the asymptomatic and the
    susceptible one are tested and billed, and only the first is positive."""
    stages = [Stage.ASYMPTOMATIC, Stage.SUSCEPTIBLE, Stage.RECOVERED, Stage.DEATH]
    pop = make_population([[i] for i in range(len(stages))])
    test = {"name": "rt_pcr", "sensitivity": 1.0, "specificity": 1.0, "result_delay_days": [1]}
    testing = InterventionTesting(TestingConfig(tests=[{**test, "result_delay_probs": [1.0], "given_to": ["traced"]}]))
    sim = sim_of(pop, [testing], days=4)
    sim.state.stage[:] = torch.tensor([int(s) for s in stages], dtype=torch.int8)
    sim.state.next_day[:] = 10_000
    sim.state.infected_day[:] = torch.tensor([0, -1, 0, 0], dtype=torch.int16)
    sim.field("test_request", torch.bool)[:] = True
    sim.step(1)
    never = testing.cfg.never_tested_day
    assert sim.fields["last_test_day"].tolist() == [1, 1, never, never]
    assert sim.ledger.table()[["item", "day", "count"]].values.tolist() == [["test_rt_pcr", 1, 2]]
    sim.step(2)
    assert sim.fields["positive_day"].tolist() == [2, -1, -1, -1]


def test_a_tests_result_and_its_delay_are_drawn_independently():
    """Sensitivity 0.5 and a delay of 1 or 2 days with probabilities 0.5 each: the result and
    its delay are independent draws, so each of the four (result, delay) pairs has P = 0.25 (a
    delay read off the result's uniform would pair every positive with the 1-day delay)."""
    reps = 4000
    pop = make_population([[0]])
    test = {"name": "t", "sensitivity": 0.5, "result_delay_days": [1, 2], "result_delay_probs": [0.5, 0.5]}
    testing = InterventionTesting(TestingConfig(tests=[test]))
    sim = sim_of(pop, [testing], replicates=reps, days=3)
    sim.state.stage[:] = int(Stage.MILD_SYMPTOMS)
    sim.state.next_day[:] = 10_000
    sim.step(0)
    positive = testing.result_positive.numpy()
    delay = testing.result_day.numpy()
    assert set(np.unique(delay)) == {1, 2}
    for result in (True, False):
        for d in (1, 2):
            assert within(((positive == result) & (delay == d)).mean(), 0.25, reps), (result, d)


def test_a_positive_is_tested_again_once_infected_after_a_false_positive():
    """docs/model.md: a positive is tested again only if it is infected after a false positive.
    A susceptible agent asks for a test (specificity 0, same-day result) on day 0: a false
    positive. Asked again on day 1, it takes no test. Infected on day 2 (mild symptoms), it is
    tested that day."""
    pop = make_population([[0]])
    test = {
        "name": "rapid",
        "sensitivity": 1.0,
        "specificity": 0.0,
        "result_delay_days": [0],
        "result_delay_probs": [1.0],
    }
    testing = InterventionTesting(TestingConfig(tests=[{**test, "given_to": ["symptomatic", "traced"]}]))
    sim = sim_of(pop, [testing], days=3)
    request = sim.field("test_request", torch.bool)
    for day in (0, 1):
        request[:] = True
        sim.step(day)
    assert sim.fields["positive_day"].tolist() == [0] and sim.fields["last_test_day"].tolist() == [0]
    sim.state.stage[0] = int(Stage.MILD_SYMPTOMS)
    sim.state.infected_day[0] = 2
    sim.state.next_day[0] = 10_000
    sim.rescan()
    sim.step(2)
    assert sim.fields["last_test_day"].tolist() == [2]
    assert sim.activity["tests"][:3, 0].tolist() == [1, 0, 1]


@pytest.mark.parametrize(("infection_day", "retested"), [(3, True), (2, False)])
def test_an_infection_on_the_day_of_a_false_positive_result_is_after_it(infection_day, retested):
    """docs/model.md: a positive is tested again only if it is infected after a false positive.
    Agent 0, susceptible, asks for a test on day 2 (specificity 0, result after 1 day): a false
    positive, arriving on day 3 at the start of the day (phase TEST_RESULTS). Its housemate 1
    turns infectious (mild, infected on day 0) before that day's transmission, with a household
    weight so large that agent 0 is infected that day for certain. Infected on day 3, after the
    result (transmission comes later in the day), agent 0 is tested again when it asks on day 4;
    infected on day 2, before the result arrived, it is a positive who is not."""
    pop = make_population([[0, 1]])
    test = {
        "name": "pcr",
        "sensitivity": 1.0,
        "specificity": 0.0,
        "result_delay_days": [1],
        "result_delay_probs": [1.0],
        "given_to": ["traced"],
    }
    testing = InterventionTesting(TestingConfig(tests=[test]))
    sim = sim_of(pop, [testing], days=6, contacts=quiet_contacts(household={"weight": 1e6}))
    request = sim.field("test_request", torch.bool)
    for day in range(5):
        if day == infection_day:  # housemate 1 infectious from today's transmission on
            sim.state.stage[1] = int(Stage.MILD_SYMPTOMS)
            sim.state.infected_day[1] = 0
            sim.state.next_day[1] = 10_000
            sim.rescan()
        request[0] = day in (2, 4)
        sim.step(day)
    assert sim.fields["positive_day"].tolist() == [3, -1]
    assert sim.state.infected_day.tolist() == [infection_day, 0]
    assert sim.activity["tests"][:5, 0].tolist() == [0, 0, 1, 0, int(retested)]
    assert sim.fields["last_test_day"].tolist() == [4 if retested else 2, -1]


# ----------------------------------------------------------------------------- tracing
def tracer_of(kind: str, **cfg) -> DigitalTracing | ManualTracing:
    """A tracer whose every draw succeeds (``cfg`` overrides)."""
    if kind == "digital":
        return DigitalTracing(DigitalTracingConfig(**{"compliance": 1.0, **cfg}))
    certain = {"recall": 1.0, "reachable": 1.0, "compliance": 1.0, "mode": "parallel"}
    return ManualTracing(ManualTracingConfig(**{**certain, **cfg}))


@pytest.mark.parametrize("tracer", ["digital", "manual"])
@pytest.mark.parametrize("window", [7, 3])
def test_tracing_looks_back_exactly_window_days(tracer, window):
    """Index case 0, positive on day 10, traced that day over the days [10 - window, 10) (docs:
    "the contacts of the last 7 days"; tracing.py window_contacts). Its housemates 1, 2 and
    workmates 3, 4 were each isolated on every day but one (isolated_history, bit k: day
    10 - 1 - k; isolation shields both ends, so they met only then): 1 and 3 on the window's
    first day, 10 - window, so they are traced; 2 and 4 on the day before it, so they are not.
    Both the static household layer and the daily occupation layer are looked up."""
    pop = make_population([[0, 1, 2], [3], [4], [5]], groups=[[0, 3, 4]])
    contacts = quiet_contacts(household={"weight": 1.0}, occupation={"weight": 1.0})
    sim = sim_of(pop, [tracer_of(tracer, window_days=window)], days=12, contacts=contacts)
    sim.fields["has_app"][:] = True
    assert sim.isolation_shields
    everything = (1 << 30) - 1
    first_day_only = everything & ~(1 << (window - 1))  # free on day 10 - window
    day_before_only = everything & ~(1 << window)  # free on day 10 - window - 1
    history = sim.field("isolated_history", torch.int32, 0)
    history[:] = torch.tensor([0, first_day_only, day_before_only, first_day_only, day_before_only, 0])
    sim.fields["positive_day"][0] = 10
    sim.step(10)
    assert sim.fields["quarantine_request"].tolist() == [False, True, False, True, False, False]


@pytest.mark.parametrize("tracer", ["digital", "manual"])
@pytest.mark.parametrize(("tested_on", "traced"), [(9, False), (8, True)])
def test_a_workmate_tested_on_the_day_of_its_last_contact_is_skipped(tracer, tested_on, traced):
    """``skip_tested_contacts`` on the daily occupation layer: a contact of day d who has taken a
    test on day d or later is skipped. Workmates 1 and 2 met index case 0 on every day of the
    window, days 3-9 (0 positive on day 10): 1, tested on day 9, is skipped for all of them;
    tested on day 8, it is traced for its contact of day 9. 2, never tested, is traced."""
    pop = make_population([[0], [1], [2]], groups=[[0, 1, 2]])
    contacts = quiet_contacts(occupation={"weight": 1.0})
    sim = sim_of(pop, [tracer_of(tracer, window_days=7, skip_tested_contacts=True)], days=12, contacts=contacts)
    sim.fields["has_app"][:] = True
    sim.field("last_test_day", torch.int16, -1)[:] = torch.tensor([-1, tested_on, -1], dtype=torch.int16)
    sim.fields["positive_day"][0] = 10
    sim.step(10)
    assert sim.fields["quarantine_request"].tolist() == [False, traced, True]


def test_the_app_follows_the_configured_age_weights():
    """age_weights [0, 1, ..., 1] at adoption 0.4 over nine equal age groups: p_g = min(1, c w_g)
    with mean 0.4 (docs: ownership by age weights with the target mean), so c = 0.4 * 9 / 8 =
    0.45: nobody aged 0-9 owns the app, 45% of every other group do (not the default weights)."""
    per_group, reps = 200, 10
    pop = make_population([[i] for i in range(9 * per_group)], ages=[10 * g + 5 for g in range(9)] * per_group)
    cfg = DigitalTracingConfig(app_adoption=0.4, age_weights=[0.0] + [1.0] * 8)
    sim = sim_of(pop, [DigitalTracing(cfg)], replicates=reps, days=1)
    has_app = sim.fields["has_app"].view(reps, -1).numpy()
    assert not has_app[:, pop.age_group == 0].any()
    for g in range(1, 9):
        assert within(has_app[:, pop.age_group == g].mean(), 0.45, reps * per_group), g


def test_digital_tracing_notifies_community_contacts():
    """The app logs contacts on every layer (digital_tracing.py; manual tracing follows household
    and occupation contacts only): with community contacts alone, index case 0, positive on day
    7, notifies exactly the agents it met in the community on days 0-6, read off each day's
    community edges."""
    n = 30
    pop = make_population([[i] for i in range(n)])
    contacts = quiet_contacts(community={"weight": 1.0, "mean_contacts": (3, 3, 3), "sd_contacts": (0, 0, 0)})
    sim = sim_of(pop, [tracer_of("digital")], days=9, contacts=contacts)
    sim.fields["has_app"][:] = True
    met = set()
    for d in range(7):
        e = sim.layer_edges("community", d)
        src, dst = e.src.tolist(), e.dst.tolist()
        pairs = list(zip(src, dst, strict=True))
        met |= {b for a, b in pairs if a == 0} | {a for a, b in pairs if b == 0}
    met.discard(0)
    assert met, "agent 0 met someone in the community"
    sim.fields["positive_day"][0] = 7
    sim.step(7)
    assert set(sim.fields["quarantine_request"].nonzero().squeeze(1).tolist()) == met
    assert sim.activity["app_notifications"][7, 0] == len(met)


def test_two_step_manual_tracing_follows_up_app_owners_who_ignored_the_notice():
    """docs: in two_step mode tracers follow up contacts without the app or who ignored the
    app's notice. Every contact of index case 0 owns the app and is notified, none complies
    (compliance 0): manual tracing reaches all four (1, 2 at home; 3, 4 at work)."""
    pop = make_population([[0, 1, 2], [3], [4], [5]], groups=[[0, 3, 4]])
    contacts = quiet_contacts(household={"weight": 1.0}, occupation={"weight": 1.0})
    dct = tracer_of("digital", compliance=0.0)
    mct = tracer_of("manual", mode="two_step")
    sim = sim_of(pop, [dct, mct], days=6, contacts=contacts)
    sim.fields["has_app"][:] = True
    sim.fields["positive_day"][0] = 4
    for day in range(5):
        sim.step(day)
    assert sim.fields["dct_notified_day"].tolist() == [-1, 4, 4, 4, 4, -1]
    assert sim.fields["dct_complied_day"].tolist() == [-1] * 6
    assert sim.fields["quarantine_request"].tolist() == [False, True, True, True, True, False]
    assert sim.activity["manual_notifications"][4, 0] == 4


def test_the_interview_capacity_is_drawn_among_the_reachable_positives():
    """manual_tracing daily_capacity: index cases interviewed per day, drawn among the day's
    reachable positives. 10 positives on day 0, each reached with P 0.5, capacity 3: a
    replicate interviews min(3, B), B ~ Bin(10, 0.5); mean 3 - (3 P0 + 2 P1 + P2) = 3 - 68/1024
    = 2.934 (a capacity filled before the reach would give Bin(3, 0.5), mean 1.5)."""
    import scipy.stats

    reps = 500
    pop = make_population([[2 * i, 2 * i + 1] for i in range(10)])
    cfg = ManualTracingConfig(recall=1.0, reachable=0.5, compliance=1.0, mode="parallel", daily_capacity=3)
    sim = sim_of(pop, [ManualTracing(cfg)], replicates=reps, days=1, contacts=quiet_contacts(household={"weight": 1.0}))
    sim.fields["positive_day"].view(reps, 20)[:, 0::2] = 0
    res = sim.run()
    interviews = res.activity["interviews"][0]
    k = np.arange(11)
    pmf = scipy.stats.binom.pmf(k, 10, 0.5)
    capped = np.minimum(k, 3)
    mean, var = (pmf * capped).sum(), (pmf * capped**2).sum() - (pmf * capped).sum() ** 2
    assert mean == pytest.approx(3 - 68 / 1024)
    assert interviews.max() == 3
    assert abs(interviews.mean() - mean) < 4 * math.sqrt(var / reps)


@pytest.mark.parametrize("tracer", ["digital", "manual"])
def test_a_contact_already_in_quarantine_is_neither_notified_nor_counted(tracer):
    """docs/model.md: contacts already in quarantine (who keep their end) are not notified nor
    counted. Index case 0, positive on day 1, met housemates 1, 2 and workmates 3, 4 on day 0;
    housemate 1 is in quarantine on day 1: only 2, 3 and 4 are asked and counted."""
    pop = make_population([[0, 1, 2], [3], [4], [5]], groups=[[0, 3, 4]])
    contacts = quiet_contacts(household={"weight": 1.0}, occupation={"weight": 1.0})
    sim = sim_of(pop, [tracer_of(tracer)], days=3, contacts=contacts)
    sim.fields["has_app"][:] = True
    sim.fields["positive_day"][0] = 1
    sim.step(0)
    sim.state.isolated[1] = True
    sim.step(1)
    assert sim.fields["quarantine_request"].tolist() == [False, False, True, True, True, False]
    name = "app_notifications" if tracer == "digital" else "manual_notifications"
    assert sim.activity[name][:2, 0].tolist() == [0, 3]


# ----------------------------------------------------------------------------- contact multipliers
def test_a_closure_closes_its_settings_in_every_simulation_the_same_object_serves():
    """An intervention keeps its state per simulation (docs/plugins.md: ``attach`` creates it).
    One ContactMultipliers object closes the OFFICE on days 0 and 1 and serves two simulations
    in turn: a 2-day run, which ends with the office closed, then a 3-day run. Agent 0 is
    infectious (mild) at a work weight that makes any contact infect for certain: its workmates
    1 and 2 stay susceptible in the first run and are infected on day 2, the day the office opens
    again, in the second. (The object remembered the first run's closure and never closed the
    office in the second, whose workmates were infected on day 1.)"""
    pop = make_population([[0], [1], [2]], groups=[[0, 1, 2]])
    closure = ContactMultipliersConfig(closures=[{"from_day": 0, "until_day": 2, "settings": ["OFFICE"]}])
    multipliers = ContactMultipliers(closure)
    for days, infected in ((2, [0, -1, -1]), (3, [0, 2, 2])):
        sim = sim_of(pop, [multipliers], days=days, contacts=quiet_contacts(occupation={"weight": 1e6}))
        sim.state.stage[0] = int(Stage.MILD_SYMPTOMS)
        sim.state.infected_day[0] = 0
        sim.state.next_day[0] = 10_000
        sim.run()
        assert sim.state.infected_day.tolist() == infected, f"the {days}-day run"
