"""The reference profile: its population, each switch that reproduces the authors' code (exact
expectations on tiny populations), the reference scenarios, and that the King County scenarios
leave every switch at its intended default."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import fixed_seeds_note, make_population, quiet_contacts, sim_of

from abm.engine import ContactConfig, DiseaseConfig, SeedingConfig, Simulation, Stage
from abm.engine.contacts import HouseholdContacts, HouseholdLayer, OccupationLayer, member_list_string_length
from abm.engine.disease import DwellTime
from abm.engine.reference_contacts import StubPathCommunityLayer
from abm.interventions.digital_tracing import DigitalTracing, DigitalTracingConfig
from abm.interventions.manual_tracing import ManualTracing, ManualTracingConfig
from abm.interventions.quarantine import Quarantine, QuarantineConfig
from abm.interventions.testing import Testing as SymptomTesting
from abm.interventions.testing import TestingConfig
from abm.interventions.vaccination import Vaccination, VaccinationConfig
from abm.outputs.reference_results import TARGETS, reference_metrics, reference_rows
from abm.populations.reference import (
    AGE_GROUP_COUNTS,
    CATEGORIES,
    HOUSEHOLD_SIZE_COUNTS,
    INDUSTRY_COUNTS,
    build_reference_population,
)
from abm.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]


def chi2_ok(counts: np.ndarray, weights: np.ndarray) -> bool:
    """Pearson's statistic below its 0.999 quantile (Wilson-Hilferty approximation)."""
    p = np.asarray(weights, dtype=np.float64) / np.sum(weights)
    expected = p * counts.sum()
    stat = float(((counts - expected) ** 2 / expected).sum())
    k = len(p) - 1
    q = k * (1 - 2 / (9 * k) + 3.09 * math.sqrt(2 / (9 * k))) ** 3
    return stat < q


# ----------------------------------------------------------------------------- population
@pytest.fixture(scope="module")
def ref_pop():
    return build_reference_population(100_000, 1234)


def test_reference_population_draws_ages_households_and_industries_from_the_figures(ref_pop):
    pop = ref_pop
    assert pop.size == 100_000
    assert chi2_ok(np.bincount(pop.age_group, minlength=9), np.array(AGE_GROUP_COUNTS))
    # Households: consecutive ids, sizes 1-6 from the weights (the last one may be cut).
    assert (pop.household_start == np.cumsum(pop.household_size) - pop.household_size).all()
    assert (pop.household == np.repeat(np.arange(pop.num_households), pop.household_size)).all()
    assert pop.household_size.min() >= 1 and pop.household_size.max() <= 6
    assert chi2_ok(np.bincount(pop.household_size[:-1], minlength=7)[1:], np.array(HOUSEHOLD_SIZE_COUNTS))
    # Ages are independent of the household: housemates' age groups are uncorrelated.
    pairs = pop.household_size[pop.household] > 1
    first = pop.household_start[pop.household[pairs]]
    a, b = pop.age_group[pairs].astype(float), pop.age_group[first].astype(float)
    keep = np.flatnonzero(pairs) != first
    r = np.corrcoef(a[keep], b[keep])[0, 1]
    assert abs(r) < 4 / math.sqrt(keep.sum())
    # Occupation groups: one per industry for ages 20-69, CHILD for 0-19, ELDERLY for 70+.
    cat = np.array(pop.categories)[pop.group_category[pop.group]]
    assert (cat[pop.age_group <= 1] == "CHILD").all() and (cat[pop.age_group >= 7] == "ELDERLY").all()
    adult = (pop.age_group >= 2) & (pop.age_group <= 6)
    assert set(cat[adult]) <= set(INDUSTRY_COUNTS)
    counts = np.bincount(pop.group[adult], minlength=len(INDUSTRY_COUNTS))[: len(INDUSTRY_COUNTS)]
    assert chi2_ok(counts, np.array(list(INDUSTRY_COUNTS.values())))
    # Same seed, same population; another seed, another.
    again = build_reference_population(100_000, 1234)
    assert (again.age_group == pop.age_group).all() and (again.household_size == pop.household_size).all()
    assert (build_reference_population(100_000, 1).age_group != pop.age_group).any()


def test_reference_work_rings_have_the_published_degrees(ref_pop):
    scenario = load_scenario(ROOT / "scenarios/reference/base.yaml")
    cfg = scenario.contacts.occupation.model_copy(update={"rewire_probability": 0.0})
    layer = OccupationLayer(ref_pop, cfg, 1, torch.device("cpu"), seed=0)
    e = layer.edges(0)
    degree = np.bincount(np.concatenate([e.src.numpy(), e.dst.numpy()]), minlength=ref_pop.size)
    for g, name in enumerate(CATEGORIES):
        mu = cfg.degree[name]
        members = ref_pop.group == g
        k = min(round(mu), int(members.sum()) - 1)
        assert (degree[members] == 2 * (k // 2)).all(), name  # k // 2 on each side; odd k acts as k - 1
    # The ring follows agent ids: each ring contact joins neighbours in the group's id order.
    order = np.flatnonzero(ref_pop.group == CATEGORIES.index("HEALTHCARE"))
    rank = np.full(ref_pop.size, -1)
    rank[order] = np.arange(order.shape[0])
    hc = ref_pop.group[e.src.numpy()] == CATEGORIES.index("HEALTHCARE")
    gap = (rank[e.dst.numpy()[hc]] - rank[e.src.numpy()[hc]]) % order.shape[0]
    assert set(gap.tolist()) == set(range(1, 11))


def test_member_list_string_length_is_the_length_of_the_list_text():
    assert member_list_string_length(np.array([0, 1, 12345]), np.array([1, 2, 2])).tolist() == [3, 6, 14]
    rng = np.random.default_rng(0)
    size = rng.integers(1, 7, 500)
    start = np.cumsum(size) - size + 9_990  # ids crossing 10,000
    got = member_list_string_length(start, size)
    want = [len(str(list(range(s, s + k)))) for s, k in zip(start, size, strict=True)]
    assert got.tolist() == want


# ----------------------------------------------------------------------------- contact switches
def test_household_normalizer_member_list_string_divides_by_the_list_text_length():
    pop = make_population([[0], [1, 2], [3, 4, 5]])
    dev = torch.device("cpu")
    size = HouseholdLayer(pop, HouseholdContacts(weight=2.0), 1, dev)
    text = HouseholdLayer(pop, HouseholdContacts(weight=2.0, normalizer="member_list_string"), 1, dev)
    assert size.coef.tolist() == pytest.approx([2 / 1, 2 / 2, 2 / 2, 2 / 3, 2 / 3, 2 / 3])
    # "[0]", "[1, 2]", "[3, 4, 5]"
    assert text.coef.tolist() == pytest.approx([2 / 3, 2 / 6, 2 / 6, 2 / 9, 2 / 9, 2 / 9])


def stub_path_layer(n: int, reps: int, mean: tuple, seed: int) -> StubPathCommunityLayer:
    """The reference community layer on n single-person homes of 25-year-olds (sd = mean)."""
    pop = make_population([[i] for i in range(n)], ages=[25] * n)
    cfg = ContactConfig.model_validate(
        {"community": {"mean_contacts": mean, "sd_contacts": mean, "construction": "stub_path"}}
    ).community
    return StubPathCommunityLayer(pop, cfg, reps, torch.device("cpu"), seed=seed)


def test_stub_path_joins_consecutive_shuffled_stubs():
    n, reps = 300, 3
    layer = stub_path_layer(n, reps, (2, 4, 3), seed=5)
    e = layer.edges(7)
    k = torch.bincount(layer.stubs, minlength=n * reps)
    for r in range(reps):
        sel = (e.src // n == r).nonzero().squeeze(1)
        assert (e.dst[sel] // n == r).all(), "contacts never cross replicates"
        assert sel.shape[0] == int(layer.counts[r]) - 1, "a path through S stubs has S - 1 contacts"
    # Every stub has two path neighbours except the two ends: degree = 2 k_i - (ends at i).
    ends = torch.zeros(n * reps, dtype=torch.int64)
    deg = torch.bincount(torch.cat([e.src, e.dst]), minlength=n * reps)
    for r in range(reps):
        rows = (e.src // n == r).nonzero().squeeze(1)
        ends[e.src[rows[0]]] += 1
        ends[e.dst[rows[-1]]] += 1
    assert (deg == 2 * k - ends).all()
    # The mean degree is about 2 k (about twice the local_mix construction's k).
    assert abs(float(deg.double().mean()) / float(k.double().mean()) - 2) < 0.01
    again = stub_path_layer(n, reps, (2, 4, 3), seed=5).edges(7)
    assert torch.equal(again.src, e.src) and torch.equal(again.dst, e.dst), "a day is re-created exactly"
    assert not torch.equal(layer.edges(8).src, e.src), "another day, another shuffle"


def test_stub_path_lookups_equal_scans_of_the_days_edges():
    """Tracing's contacts_of and transmission's contributions read the path directly; they must
    give what a scan of the day's edges gives (contributions in the same order, so sums agree)."""
    n, reps = 400, 2
    layer = stub_path_layer(n, reps, (1, 3, 2), seed=3)
    gen = torch.Generator().manual_seed(0)
    for day in (0, 5, 9):
        e = layer.edges(day)
        agents = torch.randperm(n * reps, generator=gen)[:150]
        owner, partner = layer.contacts_of(agents, day)
        chosen = set(agents.tolist())
        expected = [
            (x, y)
            for a, b in zip(e.src.tolist(), e.dst.tolist(), strict=True)
            for x, y in ((a, b), (b, a))
            if x != y and x in chosen
        ]
        assert expected, "the check needs contacts to compare"
        assert sorted(zip(agents[owner].tolist(), partner.tolist(), strict=True)) == sorted(expected)
        x = torch.where(torch.rand(n * reps, generator=gen) < 0.1, torch.rand(n * reps, generator=gen), 0.0)
        target, value = layer.contributions(day, torch.empty(0, dtype=torch.long), torch.empty(0), x)
        keep = (torch.cat([x[e.src], x[e.dst]]) != 0).nonzero().squeeze(1)
        assert torch.equal(target, torch.cat([e.dst, e.src])[keep])
        assert torch.equal(value, torch.cat([x[e.src], x[e.dst]])[keep])


# ----------------------------------------------------------------------------- quarantine switches
class Probe:
    """Records who is isolated when transmission runs."""

    name = "probe"
    order = 99

    def __init__(self) -> None:
        self.seen: dict[int, list[bool]] = {}

    def attach(self, sim) -> None:
        pass

    def hooks(self) -> dict:
        from abm.engine import Phase

        return {Phase.TRANSMISSION: lambda sim, day: self.seen.__setitem__(day, sim.state.isolated.tolist())}


@pytest.mark.parametrize("persistence", ["full", "entry_day"])
def test_quarantine_persistence_entry_day_isolates_on_the_first_day_only(persistence):
    pop = make_population([[0], [1]])
    probe = Probe()
    q = Quarantine(QuarantineConfig(days=14, daily_dropout=0.0, persistence=persistence))
    sim = sim_of(pop, [q, probe], days=10)
    sim.fields["positive_day"][0] = 2
    for day in range(6):
        sim.step(day)
    want_later = [False, False] if persistence == "entry_day" else [True, False]
    assert probe.seen[1] == [False, False] and probe.seen[2] == [True, False]
    assert probe.seen[3] == want_later and probe.seen[5] == want_later
    # The next day's testing finds nobody isolated under entry_day (so nobody is kept from a test).
    assert sim.state.isolated.tolist() == want_later


@pytest.mark.parametrize("persistence", ["full", "entry_day"])
def test_entry_day_quarantine_applies_the_dropout_on_its_first_day(persistence):
    pop = make_population([[0]])
    probe = Probe()
    sim = sim_of(pop, [Quarantine(QuarantineConfig(daily_dropout=1.0, persistence=persistence)), probe], days=5)
    sim.fields["positive_day"][0] = 1
    sim.step(0)
    sim.step(1)
    assert probe.seen[1] == ([False] if persistence == "entry_day" else [True])


@pytest.mark.parametrize("blocks", ["both", "infector"])
def test_quarantine_blocks_infector_leaves_a_quarantined_susceptible_exposed(blocks):
    reps = 200
    pop = make_population([[0, 1]])
    contacts = quiet_contacts(household={"weight": 50.0})
    sim = sim_of(pop, [Quarantine(QuarantineConfig(blocks=blocks, daily_dropout=0.0))], reps, 10, contacts)
    view = sim.state.stage.view(reps, 2)
    view[:, 0] = int(Stage.SEVERE_SYMPTOMS)
    sim.state.infected_day.view(reps, 2)[:, 0] = 0
    sim.state.next_day.view(reps, 2)[:, 0] = 10_000
    sim.fields["positive_day"].view(reps, 2)[:, 1] = 5  # the susceptible housemate quarantines on day 5
    for day in range(5, 6):
        sim.step(day)
    assert sim.state.isolated.view(reps, 2)[:, 1].all()
    infected = (view[:, 1] != Stage.SUSCEPTIBLE).double().mean().item()
    # Force 50 x 1.0 x g(5) / 2 x R x S(30) is about 15: infection is certain when exposed.
    assert infected == (1.0 if blocks == "infector" else 0.0)


# ----------------------------------------------------------------------------- tracing switches
def tracing_sim(dct_cfg: dict, testing: dict | None = None, day0: int = 4):
    # Household {0, 1, 2}; 3 alone.
    pop = make_population([[0, 1, 2], [3]])
    contacts = quiet_contacts(household={"weight": 1.0})
    ivs = [DigitalTracing(DigitalTracingConfig(compliance=1.0, **dct_cfg))]
    if testing is not None:
        ivs.insert(0, SymptomTesting(TestingConfig(**testing)))
    sim = sim_of(pop, ivs, days=20, contacts=contacts)
    sim.fields["has_app"][:] = torch.tensor([False, True, False, True])
    for day in range(day0):
        sim.step(day)
    return sim, ivs[-1]


@pytest.mark.parametrize("require_app", ["both", "recipient"])
def test_digital_tracing_require_app_recipient_lets_a_positive_without_the_app_notify(require_app):
    sim, dct = tracing_sim({"require_app": require_app})
    sim.fields["positive_day"][0] = 4  # agent 0 has no app
    dct.trace(sim, 4)
    want = [-1, 4, -1, -1] if require_app == "recipient" else [-1, -1, -1, -1]
    assert sim.fields["dct_notified_day"].tolist() == want  # 2 has no app; 3 is no contact


@pytest.mark.parametrize(("skip", "tested_on", "notified"), [(False, 3, True), (True, 3, False), (True, 2, True)])
def test_tracing_skip_tested_contacts_skips_contacts_tested_since_the_contact(skip, tested_on, notified):
    sim, dct = tracing_sim({"require_app": "recipient", "skip_tested_contacts": skip}, testing={})
    sim.fields["last_test_day"][1] = tested_on  # contacts of days 0-3; day 3 counts if tested before it
    sim.fields["positive_day"][0] = 4
    dct.trace(sim, 4)
    assert (sim.fields["dct_notified_day"][1].item() == 4) == notified


@pytest.mark.parametrize(("skip", "tested_on", "traced"), [(False, 3, True), (True, 3, False), (True, 2, True)])
def test_manual_tracing_skip_tested_contacts(skip, tested_on, traced):
    pop = make_population([[0, 1, 2], [3]])
    cfg = ManualTracingConfig(recall=1.0, reachable=1.0, compliance=1.0, mode="parallel", skip_tested_contacts=skip)
    mct = ManualTracing(cfg)
    sim = sim_of(
        pop, [SymptomTesting(TestingConfig()), mct], days=20, contacts=quiet_contacts(household={"weight": 1.0})
    )
    for day in range(4):
        sim.step(day)
    sim.fields["last_test_day"][1] = tested_on
    sim.fields["positive_day"][0] = 4
    mct.trace(sim, 4)
    assert sim.fields["quarantine_request"].tolist() == [False, traced, True, False]


@pytest.mark.parametrize(("never", "notified"), [(-1, True), (0, False)])
def test_never_tested_day_0_keeps_contacts_of_day_0_from_being_traced(never, notified):
    sim, dct = tracing_sim({"require_app": "recipient", "skip_tested_contacts": True}, {"never_tested_day": never}, 1)
    assert sim.fields["last_test_day"].tolist() == [never] * 4
    sim.fields["positive_day"][0] = 1
    dct.trace(sim, 1)  # the window holds day 0 only
    assert (sim.fields["dct_notified_day"][1].item() == 1) == notified


def test_tracing_skips_the_days_an_index_case_was_isolated():
    pop = make_population([[0, 1, 2], [3]])
    contacts = quiet_contacts(household={"weight": 1.0})
    dct = DigitalTracing(DigitalTracingConfig(compliance=1.0, require_app="recipient", window_days=1))
    mct = ManualTracing(ManualTracingConfig(recall=1.0, reachable=1.0, compliance=1.0, mode="parallel", window_days=1))
    q = Quarantine(QuarantineConfig(persistence="entry_day", daily_dropout=0.0))
    sim = sim_of(pop, [dct, mct, q], days=20, contacts=contacts)
    sim.fields["has_app"][:] = True
    positive = sim.fields["positive_day"]
    positive[0] = 1  # agent 0 is isolated on day 1 (one day)
    sim.step(0)
    sim.step(1)
    # Bit 0: day 1, bit 1: day 0. Agent 0 tested positive on day 1, its housemates were traced that day.
    assert sim.fields["isolated_history"].tolist() == [0b01, 0b01, 0b01, 0]
    sim.fields["quarantine_request"].zero_()
    positive[0] = 2  # positive again on day 2, tracing back 1 day: the index met nobody on day 1
    dct.trace(sim, 2)
    mct.trace(sim, 2)
    assert not sim.fields["quarantine_request"].any()
    for iv in (dct, mct):  # tracing back 2 days: day 0 counts
        iv.cfg = iv.cfg.model_copy(update={"window_days": 2})
        iv.trace(sim, 2)
        assert sim.fields["quarantine_request"].tolist() == [False, True, True, False]
        sim.fields["quarantine_request"].zero_()


@pytest.mark.parametrize("channel", ["digital", "manual"])
def test_ct_app70_traces_whom_the_reference_step_traces(channel):
    """ct_app70's tracing, day by day, against the reference code's step redone by brute force
    from the days' edges (specs section 7.4): the contacts on days t-7..t-1 (every layer for the
    app, household and occupation for manual tracing) of today's positives not isolated that day,
    whose last test was before that day; for the app, those who own it (any positive notifies).
    Compliance, recall and reachability set to 1 so that the sets are exact."""
    from abm.engine.simulator import Phase
    from abm.runs import population_of, resolve, simulation_of

    off = "manual_tracing" if channel == "digital" else "digital_tracing"
    sets = ["population.agents=2000", "simulation.replicates=2", "simulation.days=45", "simulation.seed=7"]
    sets += [f"interventions.{off}.enabled=false", f"interventions.{channel}_tracing.compliance=1.0"]
    if channel == "manual":
        sets += ["interventions.manual_tracing.recall=1.0", "interventions.manual_tracing.reachable=1.0"]
    sc = resolve(ROOT / "scenarios/reference/ct_app70.yaml", sets=sets)
    sim = simulation_of(sc, population_of(sc, None))
    isolated, last_test, edges, checked = {}, {}, {}, []

    def before(s: Simulation, day: int) -> None:
        last_test[day] = s.fields["last_test_day"].clone()
        s.fields["quarantine_request"].zero_()

    def after(s: Simulation, day: int) -> None:
        positive = s.fields["positive_day"] == day
        want = torch.zeros(s.total, dtype=torch.bool)
        layers = [x.name for x in s.layers] if channel == "digital" else ["household", "occupation"]
        for d in range(max(0, day - 7), day):
            index = positive & ~isolated[d]
            for name in layers:
                if (name, d) not in edges:
                    edges[name, d] = s.layer_edges(name, d)
                e = edges[name, d]
                for a, b in ((e.src, e.dst), (e.dst, e.src)):
                    want[b[index[a] & (last_test[day][b] < d) & (a != b)]] = True
        if channel == "digital":
            want &= s.fields["has_app"]
            got = s.fields["dct_notified_day"] == day
        else:
            got = s.fields["quarantine_request"]
        want &= s.state.stage != Stage.DEATH
        assert torch.equal(got, want), f"day {day}"
        checked.append(int(want.sum()))

    sim._hooks[Phase.TRACING].insert(0, before)
    sim._hooks[Phase.TRACING].append(after)
    sim._hooks[Phase.VACCINATION].insert(0, lambda s, day: isolated.__setitem__(day, s.state.isolated.clone()))
    for day in range(sc.simulation.days):
        sim.step(day)
    assert sum(checked) > 5000  # thousands of notices compared, on most days
    assert sum(n > 0 for n in checked) > 25


def test_manual_tracing_per_agent_reachability_reaches_the_same_agents_every_time():
    n = 400  # households of two
    pop = make_population([[i, i + 1] for i in range(0, n, 2)])
    contacts = quiet_contacts(household={"weight": 1.0})
    cfg = ManualTracingConfig(recall=1.0, reachable=0.5, compliance=1.0, mode="parallel", reachability="per_agent")
    mct = ManualTracing(cfg)
    sim = sim_of(pop, [mct], days=20, contacts=contacts)
    for day in range(3):
        sim.step(day)
    reach = mct.reachable.clone()
    mate = torch.arange(n) ^ 1
    want = reach & reach[mate]  # the index case (the housemate) and the contact are both reachable
    for day in (3, 6):
        sim.field("quarantine_request", torch.bool, False).zero_()
        sim.fields["positive_day"][:] = day
        mct.trace(sim, day)
        assert torch.equal(sim.fields["quarantine_request"], want)
    assert 0.15 < want.double().mean().item() < 0.35


@pytest.mark.parametrize(("unit", "p"), [("pair", 0.75), ("contact", 0.5)])
def test_manual_tracing_recall_unit_contact_draws_once_per_contact(unit, p):
    n = 3 * 2000  # households {a, b, c}: a and b test positive, c is recalled by either
    pop = make_population([[i, i + 1, i + 2] for i in range(0, n, 3)])
    contacts = quiet_contacts(household={"weight": 1.0})
    cfg = ManualTracingConfig(recall=0.5, reachable=1.0, compliance=1.0, mode="parallel", recall_unit=unit)
    mct = ManualTracing(cfg)
    sim = sim_of(pop, [mct], days=20, contacts=contacts)
    for day in range(3):
        sim.step(day)
    positive = sim.fields["positive_day"].view(-1, 3)
    positive[:, :2] = 3
    mct.trace(sim, 3)
    got = sim.fields["quarantine_request"].view(-1, 3)[:, 2].double().mean().item()
    assert abs(got - p) < 5 * math.sqrt(p * (1 - p) / 2000)


# ----------------------------------------------------------------------------- vaccination switches
@pytest.mark.parametrize(("combine", "immune_after"), [("either", True), ("overwrite", False)])
def test_vaccination_dose2_combine_overwrite_replaces_the_dose1_draw(combine, immune_after):
    pop = make_population([[0]], ages=[85])
    cfg = VaccinationConfig(
        start_day=0, daily_doses=1, dose1_efficacy=1.0, dose1_delay_days=0, dose2_efficacy=0.0,
        dose2_gap_days=2, dose2_dropout=0.0, dose2_combine=combine,
    )  # fmt: skip
    vacc = Vaccination(cfg)
    sim = sim_of(pop, [vacc], days=5)
    for day in range(2):
        sim.step(day)
    assert sim.state.immune.tolist() == [True] and int(vacc.doses[0]) == 1
    sim.step(2)
    assert int(vacc.doses[0]) == 2 and sim.state.immune.tolist() == [immune_after]


@pytest.mark.parametrize(("draw", "returned"), [("once", 0.5), ("daily", 1 - 0.5**11)])
def test_vaccination_dose2_dropout_daily_redraws_the_return_every_day(draw, returned):
    n = 4000
    pop = make_population([[i] for i in range(n)], ages=[50] * n)
    cfg = VaccinationConfig(
        start_day=0, daily_doses=10 * n, dose2_gap_days=1, dose2_dropout=0.5, dose2_dropout_draw=draw
    )
    vacc = Vaccination(cfg)
    sim = sim_of(pop, [vacc], days=12)
    sim.run()
    # Everyone gets dose 1 on day 0 and may return on days 1-11. once: each agent returns with
    # probability 0.5, drawn once; daily: a fresh draw each of the 11 days, so all but 0.5^11
    # return. The share with two doses is binomial over n agents: within 4 sd, sqrt(p(1 - p)/n)
    # (0.8% for once; for daily about 5.6 of the expected 2 agents who never return).
    two = (vacc.doses == 2).double().mean().item()
    assert abs(two - returned) < 4 * math.sqrt(returned * (1 - returned) / n), two


# ----------------------------------------------------------------------------- seeding
def seeded(resample: bool, replicates: int, seed: int = 5, day: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Per replicate, the sorted infected agent ids and their stages after the seeding day."""
    n = 1000
    pop = make_population([[i] for i in range(n)])
    seeding = SeedingConfig(
        day=day, infections={"asymptomatic": 3, "presymptomatic_mild": 2}, resample_per_replicate=resample
    )
    sim = Simulation(pop, DiseaseConfig(), quiet_contacts(), seeding, days=day + 1, replicates=replicates, seed=seed)
    sim.run()
    stage = sim.state.stage.view(replicates, n).numpy()
    ids = np.stack([np.flatnonzero(row) for row in stage])
    return ids, np.take_along_axis(stage, ids, axis=1)


def test_seeding_without_resampling_infects_the_same_agents_in_every_replicate():
    ids, stages = seeded(resample=False, replicates=4)
    assert ids.shape == (4, 5)
    assert (ids == ids[0]).all() and (stages == stages[0]).all()
    assert sorted(stages[0].tolist()) == [Stage.ASYMPTOMATIC] * 3 + [Stage.PRESYMPTOMATIC_MILD] * 2
    # One draw from the simulation seed: the same agents whatever the number of replicates;
    # another seed draws others.
    assert (seeded(resample=False, replicates=1)[0][0] == ids[0]).all()
    later, _ = seeded(resample=False, replicates=2, day=3)
    assert (later == later[0]).all() and later.shape == (2, 5)
    assert set(seeded(resample=False, replicates=1, seed=6)[0][0]) != set(ids[0])


def test_seeding_with_resampling_draws_other_agents_in_each_replicate():
    ids, stages = seeded(resample=True, replicates=4)
    assert ids.shape == (4, 5)
    assert len({tuple(row) for row in ids}) == 4
    assert all(sorted(row.tolist()) == [Stage.ASYMPTOMATIC] * 3 + [Stage.PRESYMPTOMATIC_MILD] * 2 for row in stages)
    assert SeedingConfig().resample_per_replicate is True


def test_reference_design_shares_every_contact_layer_and_the_initial_agents():
    """The reference's 10 runs re-use its population file and all its pre-generated daily network
    files, community ones included (specs section 1 num_runs, section 2; its model.py reads
    ``Random/<t>.csv`` each step): the benchmark's ``--reference-design`` shares them all."""
    import importlib.util

    path = ROOT / "benchmarks" / "reference_replicates.py"
    spec = importlib.util.spec_from_file_location("reference_replicates", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sc = load_scenario(ROOT / "scenarios/reference/ct_app70.yaml")
    assert not sc.contacts.shares("occupation") and not sc.contacts.shares("community")
    design = module.reference_design_scenario(sc)
    assert design.contacts.shares("occupation") and design.contacts.shares("community")
    assert design.seeding.resample_per_replicate is False
    assert design.interventions == sc.interventions and design.disease == sc.disease


def test_reference_scenarios_draw_their_initial_infections_per_replicate():
    """The reference's own 5 fixed agents are unknown, so the profile averages over draws."""
    from abm.runs import resolve

    n, r = 2000, 3
    pop = build_reference_population(n, 1234)
    sc = resolve(ROOT / "scenarios/reference/ni.yaml")
    assert sc.seeding.resample_per_replicate is True
    sim = Simulation(pop, sc.disease, sc.contacts, sc.seeding, days=2, replicates=r, seed=sc.simulation.seed)
    sim.step(0)
    stage = sim.state.stage.view(r, n)
    assert ((stage > 0).sum(1) == 5).all()
    assert not (stage == stage[0]).all(), "each replicate has its own initially infected agents"


# ----------------------------------------------------------------------------- scenarios
SWITCH_DEFAULTS = {  # every switch of docs/reference.md's table of reference behaviours
    "seeding.resample_per_replicate": True,
    "contacts.same_in_every_replicate": False,
    "population.kind": "region",
    "contacts.household.normalizer": "size",
    "contacts.community.construction": "local_mix",
    "interventions.testing.never_tested_day": -1,
    "interventions.testing.retest_positives": False,
    "interventions.quarantine.persistence": "full",
    "interventions.quarantine.reset_infectiousness": True,
    "interventions.quarantine.blocks": "both",
    "interventions.digital_tracing.require_app": "both",
    "interventions.digital_tracing.skip_tested_contacts": False,
    "interventions.manual_tracing.recall_unit": "pair",
    "interventions.manual_tracing.reachability": "daily",
    "interventions.manual_tracing.skip_tested_contacts": False,
    "interventions.vaccination.dose2_combine": "either",
    "interventions.vaccination.dose2_dropout_draw": "once",
}


def switch_values(scenario) -> dict[str, object]:
    out = {}
    for key in SWITCH_DEFAULTS:
        node = scenario
        for part in key.split("."):
            node = getattr(node, part)
            if node is None:
                break
        if node is not None:
            out[key] = node
    return out


@pytest.mark.parametrize("path", sorted((ROOT / "scenarios/king_county").glob("*.yaml")), ids=lambda p: p.name)
def test_king_county_scenarios_leave_every_reference_switch_at_its_default(path):
    got = switch_values(load_scenario(path))
    assert got == {k: v for k, v in SWITCH_DEFAULTS.items() if k in got}
    assert "population.kind" in got and "contacts.household.normalizer" in got


def test_reference_scenarios_set_the_reference_behaviours():
    base = load_scenario(ROOT / "scenarios/reference/ni.yaml")
    assert base.population.kind == "reference" and base.interventions.testing is None
    dwell = {(d.from_stage, d.to_stage): d for d in base.disease.dwell_times}
    a = dwell[("asymptomatic", "recovered")]
    assert a.shape * a.scale == pytest.approx(15**3 / 5**4)  # mean mu^3 / sigma^4 (rate read as scale)
    ct = load_scenario(ROOT / "scenarios/reference/vacc_t60_ct.yaml")
    values = switch_values(ct)
    assert values == {
        "seeding.resample_per_replicate": True,
        "contacts.same_in_every_replicate": False,
        "population.kind": "reference",
        "contacts.household.normalizer": "member_list_string",
        "contacts.community.construction": "stub_path",
        "interventions.testing.never_tested_day": 0,
        "interventions.testing.retest_positives": True,
        "interventions.quarantine.persistence": "entry_day",
        "interventions.quarantine.reset_infectiousness": False,
        "interventions.quarantine.blocks": "infector",
        "interventions.digital_tracing.require_app": "recipient",
        "interventions.digital_tracing.skip_tested_contacts": True,
        "interventions.manual_tracing.recall_unit": "contact",
        "interventions.manual_tracing.reachability": "per_agent",
        "interventions.manual_tracing.skip_tested_contacts": True,
        "interventions.vaccination.dose2_combine": "overwrite",
        "interventions.vaccination.dose2_dropout_draw": "daily",
    }
    v = ct.interventions
    assert (v.vaccination.start_day, v.vaccination.daily_doses) == (60, 300)
    assert (v.digital_tracing.app_adoption, v.digital_tracing.age_stratified) == (0.7, False)
    assert load_scenario(ROOT / "scenarios/reference/ct.yaml").interventions.digital_tracing.app_adoption == 0.4
    assert load_scenario(ROOT / "scenarios/reference/vacc_budget.yaml").interventions.vaccination.daily_doses == 124
    names = {t.scenario for t in TARGETS}
    assert all((ROOT / "scenarios/reference" / f"{n}.yaml").is_file() for n in names)


def test_population_kind_reference_runs_on_the_reference_population():
    import abm

    with fixed_seeds_note():
        res = abm.run(ROOT / "scenarios/reference/ni.yaml", agents=3000, replicates=1, days=3)
    assert res.population.categories == CATEGORIES and res.population.size == 3000
    assert (res.population.age_group == build_reference_population(3000, 1234).age_group).all()
    with fixed_seeds_note():
        kc = abm.run(ROOT / "scenarios/king_county/ni.yaml", agents=3000, replicates=1, days=3)
    assert "CHILD" not in kc.population.categories


def test_the_reference_map_tract_has_the_county_residents():
    """The reference population's one pseudo-tract gave its residents as the agents, so the map's
    tooltip read "Residents: 3,000 (3,000 agents)" for a population that stands for King County."""
    import abm
    from abm.outputs import maps

    with fixed_seeds_note():
        res = abm.run(ROOT / "scenarios/reference/ni.yaml", agents=3000, replicates=1, days=2)
    tract = res.population.tracts.iloc[0]
    assert len(res.population.tracts) == 1 and tract.agents == 3000
    assert tract.residents == res.summary["region_population"] == 2_252_782
    data = maps.map_data(res.by_tract, res.population.tracts, snapshot_days=())
    assert data.tracts.residents.tolist() == [2_252_782] and data.tracts.agents.tolist() == [3000]


def test_the_reference_map_tract_lies_at_the_countys_resident_weighted_centre():
    """The pseudo-tract's centroid is the King County tracts' centroids weighted by their
    residents (where people live, not the plain mean of the tracts, which differs by more than the
    tolerance), and its area is the tracts' total."""

    from abm.populations import load_region
    from abm.populations.reference import county_tract

    region = load_region("king_county")
    t, residents = region.tracts, region.band_counts().sum(axis=1)
    row = county_tract(100).iloc[0]
    for axis in ("lat", "lon"):
        centre = float((t[axis] * residents).sum() / residents.sum())
        assert abs(row[axis] - centre) < 1e-9 and abs(float(t[axis].mean()) - centre) > 1e-4
    assert row.land_km2 == pytest.approx(float(t["land_km2"].sum()))


def test_reference_rows_shift_the_records_to_the_start_of_each_day():
    stages = np.arange(5)[:, None] * np.ones((1, 2))
    assert reference_rows(stages)[:, 0].tolist() == [0, 0, 1, 2, 3]


# ----------------------------------------------------------------------------- slow: published NI
@pytest.mark.slow
def test_reference_ni_reproduces_the_published_final_size_and_peak():
    import abm

    res = abm.run(ROOT / "scenarios/reference/ni.yaml", replicates=10)
    m = reference_metrics(res.result)
    # Published (10 runs): 81,318.1 infected by t = 179, HOSPITALIZED peak 174.6 on day 65;
    # tolerances of the published results: +-3% of N, +-15%, +-5 days.
    assert abs(m.cumulative - 81_318.1) <= 3_000
    assert abs(m.peak_hospitalized - 174.6) <= 0.15 * 174.6
    assert abs(m.peak_day - 65) <= 5


# ----------------------------------------------------------------------------- day order
def test_day_order_matches_the_reference_step():
    """Specs sections 2.7, 3.3, 5.1, 5.3 and 6, as the reference code's step() runs them: the
    initial infections are in their stage from row 0 with infection day 0 and leave it on day
    1 + D (seen from row 2 + D); a case infected on day t shows from row t + 1 and infects from
    day t + 1 with g(1) (g(0) = 0: nobody infects on the day of their own infection); rows are
    the start of each day (our end of day t - 1)."""
    reps, days = 60, 16
    pop = make_population([[0, 1]])
    disease = load_scenario(ROOT / "scenarios/reference/ni.yaml").disease
    dwell = [d for d in disease.dwell_times if d.from_stage != "asymptomatic"]
    asymptomatic = {"from": "asymptomatic", "to": "recovered", "distribution": "two_point", "mean": 4.0}  # D = 4
    disease = disease.model_copy(update={"dwell_times": [*dwell, DwellTime.model_validate(asymptomatic)]})
    seeding = SeedingConfig(infections={"asymptomatic": 1})
    sim = Simulation(
        pop, disease, quiet_contacts(household={"weight": 200.0}), seeding, days=days, replicates=reps, seed=3
    )
    g, a = sim.disease.profile, sim.disease.infectiousness
    ends, weights = [], []  # stage at the end of each day; each agent's infectiousness when transmission runs
    for day in range(days):
        src, w = sim.infectiousness(day)
        weights.append(torch.zeros(2 * reps).index_put_((src,), w))
        sim.step(day)
        ends.append(sim.state.stage.clone())
        if day == 0:
            first_change = sim.state.next_day.clone()
    rows = reference_rows(torch.stack(ends).numpy())
    seeds = np.flatnonzero(rows[0] == Stage.ASYMPTOMATIC)
    assert seeds.shape[0] == reps and (rows[0] > 0).sum() == reps, "one seed per replicate, in row 0"
    assert (sim.state.infected_day[seeds] == 0).all()
    assert (weights[0] == 0).all(), "day 0: nobody infects (the seeds' g(0) = 0)"
    assert (first_change[seeds] == 1 + 4).all(), "a seed leaves its stage on day 1 + D"
    assert (rows[:6, seeds] == Stage.ASYMPTOMATIC).all() and (rows[6, seeds] == Stage.RECOVERED).all()
    for day in range(1, 6):
        assert torch.allclose(weights[day][seeds], a[Stage.ASYMPTOMATIC] * g[day]), "seeds infect with g(t)"
    caught = 0
    for m in [s + 1 if s % 2 == 0 else s - 1 for s in seeds.tolist()]:  # the seed's housemate
        t = int(sim.state.infected_day[m])
        if t < 0 or t + 1 >= days:
            continue
        caught += 1
        assert t >= 1 and rows[t, m] == Stage.SUSCEPTIBLE and rows[t + 1, m] != Stage.SUSCEPTIBLE
        assert weights[t][m] == 0, "not infectious on the day of its own infection"
        assert float(weights[t + 1][m]) == pytest.approx(float(a[int(rows[t + 1, m])] * g[1]), rel=1e-6)
    assert caught > reps // 2
