"""Transmission: the force of infection on a hand-built graph, infection probabilities, and
the final size of a fully mixed epidemic against theory."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np
import pytest
import torch
from conftest import make_population, quiet_contacts
from scipy.optimize import brentq
from torch.overrides import TorchFunctionMode

from abm.engine import ContactConfig, DiseaseConfig, SeedingConfig, Simulation, Stage
from abm.engine.contacts import default_degrees
from abm.populations import Population, build_population

NO_SEEDS = SeedingConfig(infections={})


def five_agents() -> Population:
    # Households {0, 1}, {2}, {3, 4}; one workplace {1, 2, 3} (a ring of 3 = a triangle).
    return make_population([[0, 1], [2], [3, 4]], groups=[[1, 2, 3]])


def infect(sim: Simulation, agent: int, stage: Stage, infected_day: int) -> None:
    for r in range(sim.replicates):
        i = r * sim.n + agent
        sim.state.stage[i] = int(stage)
        sim.state.infected_day[i] = infected_day
        sim.state.next_day[i] = 10_000


@pytest.mark.parametrize(("home", "work"), [(2.0, 1.0), (0.5, 3.0)])
def test_force_on_a_five_agent_graph_equals_the_formula(home, work):
    """Each layer's weight multiplies its own contacts' force (weight / normaliser: household
    size 2, mean degree 2); the second pair, away from the default occupation weight 1, shows a
    layer's weight dropped or taken from another layer. Agent 1 meets infectious 0 at home and
    2 at work; agent 3 meets 2 at work."""
    contacts = quiet_contacts(household={"weight": home}, occupation={"weight": work})
    sim = Simulation(five_agents(), DiseaseConfig(), contacts, NO_SEEDS, days=20, replicates=1, seed=1)
    day = 10
    infect(sim, 0, Stage.MILD_SYMPTOMS, day - 4)
    infect(sim, 2, Stage.ASYMPTOMATIC, day - 6)
    g = sim.disease.profile
    x0 = 0.72 * g[4].item()
    x2 = 0.33 * g[6].item()
    force = sim.force_of_infection(day).tolist()
    # Household: weight / household size 2; workplace: weight / mean degree 2.
    expected = [0.0, home * x0 / 2 + work * x2 / 2, 0.0, work * x2 / 2, 0.0]
    expected[2] = 0.0  # agent 2's workplace mates 1 and 3 are not infectious
    assert np.allclose(force, expected, rtol=1e-6, atol=0)
    # An isolated source contributes nothing, to anyone.
    sim.state.isolated[2] = True
    force = sim.force_of_infection(day).tolist()
    assert np.allclose(force, [0.0, home * x0 / 2, 0.0, 0.0, 0.0], rtol=1e-6, atol=0)


@pytest.mark.parametrize("households", [2, 40])  # few households: the dense sum; many: the sparse one
def test_a_setting_of_degree_0_gives_no_work_contacts_and_keeps_the_household_ones(households):
    """A setting with mean degree 0 (a closed sector) has no contacts and adds no force; its
    members are still infected at home (the normaliser 0 made the force NaN, so they never were)."""
    pop = make_population([[2 * h, 2 * h + 1] for h in range(households)], groups=[[0, 1, 2, 3]])
    forces = {}
    for degree in (0, 2):
        occupation = {"weight": 1.0, "degree": {**default_degrees(), "OFFICE": degree}}
        contacts = quiet_contacts(household={"weight": 2.0}, occupation=occupation)
        sim = Simulation(pop, DiseaseConfig(), contacts, NO_SEEDS, days=20)
        infect(sim, 0, Stage.MILD_SYMPTOMS, 5)
        sim.rescan()
        forces[degree] = sim.force_of_infection(10)
    home = 2.0 * 0.72 * sim.disease.profile[5].item() / 2  # agent 0's household mate, agent 1
    assert torch.isfinite(forces[0]).all()
    assert forces[0][1].item() == pytest.approx(home, rel=1e-6)
    assert forces[0][2:].abs().sum().item() == 0  # no work contacts at degree 0
    assert forces[2][1].item() > home  # at degree 2, agent 1 also meets agent 0 at work


@pytest.mark.parametrize(
    ("seasonality", "factor"),
    [
        ({}, 1.0),
        # day 10, peak on day 40: 1 + g cos(2 pi (10 - 40) / 365), g = 0.5 / (2 - 0.5)
        ({"reduction": 0.5, "peak_day": 40}, 1 + math.cos(2 * math.pi * 30 / 365) / 3),
        # half a year from the peak: the trough, 1 - g = 0.6 of the mean rate
        ({"reduction": 0.75, "peak_day": 10 - 365 // 2}, 1 - 0.75 / 1.25 * math.cos(math.pi / 365)),
    ],
)
def test_infection_probability_is_one_minus_exp_of_minus_lambda(seasonality, factor):
    """lambda as the formula gives it on day 10 (docs/model.md), with the day's seasonal factor
    of the rate where disease.seasonality sets one."""
    reps = 40_000
    contacts = quiet_contacts(household={"weight": 2.0}, occupation={"weight": 1.0})
    disease = DiseaseConfig(transmission_rate=5.02, seasonality=seasonality)
    sim = Simulation(five_agents(), disease, contacts, NO_SEEDS, days=20, replicates=reps, seed=3)
    day = 10
    infect(sim, 0, Stage.MILD_SYMPTOMS, day - 4)
    infect(sim, 2, Stage.ASYMPTOMATIC, day - 6)
    g = sim.disease.profile
    x0, x2 = 0.72 * g[4].item(), 0.33 * g[6].item()
    s30 = DiseaseConfig().susceptibility_by_age[3]
    rate = 5.02 * factor
    lam = {1: rate * s30 * (x0 + x2 / 2), 3: rate * s30 * x2 / 2}
    sim._transmit(day)
    stage = sim.state.stage.view(reps, 5)
    for agent, rate in lam.items():
        p = 1 - math.exp(-rate)
        got = (stage[:, agent] != Stage.SUSCEPTIBLE).double().mean().item()
        assert abs(got - p) < 4 * math.sqrt(p * (1 - p) / reps), (agent, got, p)
    assert (stage[:, 4] == Stage.SUSCEPTIBLE).all()


def test_the_seasonal_factor_is_that_of_the_day_of_transmission():
    """The rate on day 10 is the transmission rate times day 10's seasonal factor: the same
    draws infect exactly the same agents as a constant rate of that product, not of day 9's
    (the cycle's steepest stretch, a quarter year after the peak: day 9's factor is 1.4% higher,
    which a comparison of infection shares could not tell apart)."""
    from abm.engine.disease import Seasonality

    day, reps = 10, 10_000
    season = {"reduction": 0.9, "peak_day": day - 91}
    factors = Seasonality(**season).factors(20)
    contacts = quiet_contacts(household={"weight": 2.0}, occupation={"weight": 1.0})

    def infected(disease: DiseaseConfig) -> torch.Tensor:
        sim = Simulation(five_agents(), disease, contacts, NO_SEEDS, days=20, replicates=reps, seed=3)
        infect(sim, 0, Stage.MILD_SYMPTOMS, day - 4)
        infect(sim, 2, Stage.ASYMPTOMATIC, day - 6)
        sim._transmit(day)
        return sim.state.stage != Stage.SUSCEPTIBLE

    seasonal = infected(DiseaseConfig(transmission_rate=5.02, seasonality=season))
    assert torch.equal(seasonal, infected(DiseaseConfig(transmission_rate=5.02 * factors[day])))
    assert not torch.equal(seasonal, infected(DiseaseConfig(transmission_rate=5.02 * factors[day - 1])))


@pytest.mark.parametrize("reduction", [0.0, 0.421, 0.9])
def test_the_seasonal_cycle_falls_by_its_reduction_and_averages_1_over_a_year(reduction):
    from abm.engine.disease import Seasonality

    f = Seasonality(reduction=reduction, peak_day=-31).factors(365 * 2)
    assert sum(f[:365]) / 365 == pytest.approx(1.0, abs=1e-12)
    assert f[334] == pytest.approx(max(f)) and f[334 + 365] == pytest.approx(f[334])  # 1 January comes back
    peak, trough = 1 + reduction / (2 - reduction), 1 - reduction / (2 - reduction)
    assert max(f) == pytest.approx(peak, abs=1e-12) and min(f) == pytest.approx(trough, rel=1e-3)
    assert trough / peak == pytest.approx(1 - reduction, abs=1e-12)


def test_final_size_of_a_fully_mixed_epidemic_matches_theory():
    """One fully mixed layer (community contacts with global partners, redrawn daily), a fixed
    infectious course (asymptomatic for 31 days, beyond the profile's support), no age effects.

    R0 = sum_k c (1 - exp(-beta w g(k) / c)) with c = 4 contacts a day. The final size solves
    z = 1 - (1 - eps) exp(-R0 z), eps = seeds / N. For a large outbreak of fixed-duration SIR
    with N = 100,000 the sd of z is sqrt(z (1 - z)) / (1 - R0 (1 - z)) / sqrt(N) = 0.0021
    (Andersson and Britton, 2000, ch. 4); daily Poisson partners add a little, so we allow
    0.01, about 4.5 sd.
    """
    n, seeds, c, beta = 100_000, 50, 4, 2.0
    branching = DiseaseConfig().branching
    for a in range(9):
        branching[a][0] = [0.0, 1.0] + [0.0] * 9
    disease = DiseaseConfig(
        transmission_rate=beta,
        susceptibility_by_age=[1.0] * 9,
        infectiousness_by_stage={"asymptomatic": 1.0},
        branching=branching,
        dwell_times=[
            {"from": "asymptomatic", "to": "recovered", "distribution": "two_point", "mean": 30},
            *[d.model_dump(by_alias=True) for d in DiseaseConfig().dwell_times if d.from_stage != "asymptomatic"],
        ],
    )
    contacts = quiet_contacts(
        community={"weight": 1.0, "mean_contacts": (c, c, c), "sd_contacts": (0, 0, 0), "local_share": 0.0}
    )
    pop = make_population([[i] for i in range(n)])
    sim = Simulation(
        pop, disease, contacts, SeedingConfig(infections={"asymptomatic": seeds}), days=240, replicates=1, seed=11
    )
    res = sim.run()
    g = sim.disease.profile.double().numpy()
    r0 = float(sum(c * (1 - math.exp(-beta * g[k] / c)) for k in range(1, 32)))
    eps = seeds / n
    z = brentq(lambda z: z - 1 + (1 - eps) * math.exp(-r0 * z), 0.05, 1.0)
    final = 1 - res.stages[-1, 0, Stage.SUSCEPTIBLE] / n
    assert res.stages[-1, 0, Stage.ASYMPTOMATIC] == 0, "the epidemic is over"
    assert 1.9 < r0 < 2.0
    assert abs(final - z) < 0.01, (final, z, r0)


def test_community_degree_matches_the_configured_mean(kc_100k):
    contacts = quiet_contacts(community={"weight": 1.0, "mean_contacts": (2, 4, 3), "sd_contacts": (2, 4, 3)})
    sim = Simulation(kc_100k, DiseaseConfig(), contacts, NO_SEEDS, days=3, replicates=2, seed=5)
    e = sim.community.edges(1)
    n = sim.total
    deg = np.bincount(np.concatenate([e.src.numpy(), e.dst.numpy()]), minlength=n)
    stubs = np.bincount(sim.community.stubs.numpy(), minlength=n)
    # Each agent's expected degree equals its daily contact number k_i.
    assert abs(deg.mean() - stubs.mean()) < 0.01 * stubs.mean()
    adults = np.tile((kc_100k.age >= 20) & (kc_100k.age < 70), 2)
    assert abs(stubs[adults].mean() - 4) < 0.05
    assert abs(deg[adults].mean() - stubs[adults].mean()) < 0.05
    # Contacts never cross replicates; most local contacts stay within a few tracts.
    assert ((e.src // kc_100k.size) == (e.dst // kc_100k.size)).all()
    tract = np.tile(kc_100k.tract, 2)
    assert np.median(np.abs(tract[e.src.numpy()] - tract[e.dst.numpy()])) <= 3


def test_occupation_layer_is_a_small_world_per_group(kc_100k):
    contacts = quiet_contacts(
        occupation={"weight": 1.0, "rewire_probability": 0.1, "degree": {c: 4 for c in kc_100k.categories}}
    )
    sim = Simulation(kc_100k, DiseaseConfig(), contacts, NO_SEEDS, days=3, replicates=1, seed=5)
    a, b = sim.occupation.edges(0), sim.occupation.edges(1)
    group = torch.as_tensor(kc_100k.group)
    assert (group[a.src] == group[a.dst]).all(), "contacts stay within a school, workplace or facility"
    changed = (a.dst != b.dst).double().mean().item()
    # Each day independently keeps a ring contact's partner (probability 1 - p) or redraws it
    # uniformly over all g members of its group (the agent itself and the old partner
    # included). Two days' ends then agree with probability (1 - p)^2 + (1 - (1 - p)^2) / g, so
    # a contact differs with q_g = (1 - (1 - p)^2) (1 - 1/g). A group of g members has a ring
    # of g * (min(4, g - 1) // 2) contacts (degree 4; none in groups of 1 or 2). The share is
    # a mean of independent Bernoullis: sd = sqrt(sum q(1 - q)) / E, about 0.001 here, and the
    # mean is about 0.1854 (p = 0.11 would move it by 18 sd, p = 0.09 by 17).
    p = contacts.occupation.rewire_probability
    g = np.bincount(kc_100k.group[kc_100k.group >= 0]).astype(np.float64)
    g = g[g > 0]
    per_group = g * (np.minimum(4, g - 1) // 2)
    q = (1 - (1 - p) ** 2) * (1 - 1 / g)
    edges = per_group.sum()
    assert a.dst.shape[0] == edges
    mean = (per_group * q).sum() / edges
    sd = math.sqrt((per_group * q * (1 - q)).sum()) / edges
    assert abs(changed - mean) < 4 * sd, (changed, mean, sd)
    again = sim.occupation.edges(1)
    assert torch.equal(again.dst, b.dst), "a past day is re-created exactly"


def test_pushing_from_the_infectious_equals_summing_over_all_edges(kc_100k):
    """Each layer pushes from the infectious (the ring contacts plus today's rewired ones; the
    community contacts of today's day of the cycle); the result must equal the plain sum over
    the day's full edge list."""
    sim = Simulation(kc_100k, DiseaseConfig(), ContactConfig(), NO_SEEDS, days=5, replicates=2, seed=8)
    gen = torch.Generator().manual_seed(0)
    src = torch.randperm(sim.total, generator=gen)[:5000]
    x = torch.zeros(sim.total)
    x[src] = torch.rand(5000, generator=gen)
    for layer in (sim.occupation, sim.household, sim.community):
        for day in (1, 2):
            e = layer.edges(day)
            full = torch.zeros(sim.total, dtype=torch.float64)
            full.index_add_(0, e.dst, x[e.src].double())
            full.index_add_(0, e.src, x[e.dst].double())
            # Compared where it matters, at agents that are not sources (a contact that lands
            # on its own agent carries nothing, and layers may count it or not).
            others = torch.ones(sim.total, dtype=torch.bool)
            others[src] = False
            got = layer.pressure(day, src, x[src], x).double()
            assert torch.allclose(got[others], full[others], atol=1e-5)
            assert full[others].count_nonzero() > 1000


def test_community_contacts_are_symmetric_and_recur_on_their_cycle(kc_100k):
    contacts = quiet_contacts(community={"weight": 1.0, "mean_contacts": (2, 4, 3), "sd_contacts": (2, 4, 3)})
    sim = Simulation(kc_100k, DiseaseConfig(), contacts, NO_SEEDS, days=30, replicates=2, seed=5)
    layer, n = sim.community, sim.total
    everyone = torch.arange(n)

    def pairs(day: int) -> torch.Tensor:
        owner, partner = layer.contacts_of(everyone, day)
        return torch.sort(owner * n + partner).values

    e = layer.edges(3)
    keep = e.src != e.dst
    both = torch.cat([e.src[keep] * n + e.dst[keep], e.dst[keep] * n + e.src[keep]])
    # Looked up agent by agent, a day's contacts are exactly the day's edges seen from both ends.
    assert torch.equal(pairs(3), torch.sort(both).values)
    assert torch.equal(pairs(3), pairs(3 + contacts.community.cycle_days)), "the cycle repeats"
    assert not torch.equal(pairs(3), pairs(4))
    # Over a cycle an agent meets about cycle_days * k_i contacts, most of them different people.
    week = torch.cat([pairs(d) for d in range(contacts.community.cycle_days)])
    assert torch.unique(week).shape[0] > 0.9 * week.shape[0]


def test_occupation_contacts_of_agents_are_the_days_edges_seen_from_them(kc_100k):
    sim = Simulation(kc_100k, DiseaseConfig(), ContactConfig(), NO_SEEDS, days=5, replicates=2, seed=3)
    layer, n = sim.occupation, sim.total
    agents = torch.randperm(n, generator=torch.Generator().manual_seed(0))[:20_000]
    mine = torch.zeros(n, dtype=torch.bool)
    mine[agents] = True
    for day in (0, 3):
        owner, partner = layer.contacts_of(agents, day)
        e = layer.edges(day)
        keep = e.src != e.dst
        a, b = torch.cat([e.src[keep], e.dst[keep]]), torch.cat([e.dst[keep], e.src[keep]])
        assert torch.equal(
            torch.sort(agents[owner] * n + partner).values, torch.sort(a[mine[a]] * n + b[mine[a]]).values
        )


def assert_agent_days_meet_each_days_edges(layer, agents: torch.Tensor, days: torch.Tensor, n: int) -> int:
    """``contacts_of`` for (agent, day) pairs equals, pair by pair, the agent's contacts in that
    day's edges; returns the number of contacts compared."""
    owner, partner = layer.contacts_of(agents, days)
    got = torch.sort(owner.long() * n + partner).values
    want = []
    for day in range(int(days.min()), int(days.max()) + 1):
        e = layer.edges(day)
        keep = e.src != e.dst
        a, b = torch.cat([e.src[keep], e.dst[keep]]), torch.cat([e.dst[keep], e.src[keep]])
        at = torch.full((n,), -1, dtype=torch.int64)
        sel = (days == day).nonzero().squeeze(1)
        at[agents[sel]] = sel
        mine = at[a] >= 0
        want.append(at[a[mine]] * n + b[mine])
    want = torch.sort(torch.cat(want)).values
    assert torch.equal(got, want)
    return int(want.shape[0])


def test_occupation_contacts_of_agent_days_are_each_days_edges(kc_100k):
    """Tracing looks up (agent, day) pairs over a window in one call: each pair gets exactly
    the contacts of that agent in that day's edges, whatever other days the call holds."""
    sim = Simulation(kc_100k, DiseaseConfig(), ContactConfig(), NO_SEEDS, days=12, replicates=2, seed=8)
    gen = torch.Generator().manual_seed(1)
    agents = torch.randperm(sim.total, generator=gen)[:6_000]
    days = torch.randint(2, 9, (agents.shape[0],), generator=gen)
    # An agent may appear once per day: add the first 500 agents again on another day.
    agents = torch.cat([agents, agents[:500]])
    days = torch.cat([days, days[:500] + 1])
    assert assert_agent_days_meet_each_days_edges(sim.occupation, agents, days, sim.total) > 20_000


class LargestTensor(TorchFunctionMode):
    """Records the most elements of any tensor that a torch function returns while active."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0

    def __torch_function__(self, func: Callable, types: tuple, args: tuple = (), kwargs: dict | None = None) -> object:
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


def test_occupation_contacts_of_a_few_agents_does_not_touch_the_whole_window(kc_100k):
    """Tracing looks up a few index cases over a 7-day window: the look-up works on their
    groups' rewired contacts, not on the window's whole rewiring (laying every day's rewiring
    end to end made each look-up cost 7 days of rewiring of all replicates, which made tracing
    the larger part of a 10-replicate vacc_ct run)."""
    sim = Simulation(kc_100k, DiseaseConfig(), ContactConfig(), NO_SEEDS, days=10, replicates=2, seed=4)
    layer = sim.occupation
    day_size = min(layer.rewired_ids(d).shape[0] for d in range(1, 8))  # drawn (and kept) beforehand
    gen = torch.Generator().manual_seed(2)
    members = (layer.agent_group >= 0).nonzero().squeeze(1)
    agents = members[torch.randperm(members.shape[0], generator=gen)[:40]]
    days = torch.randint(1, 8, (agents.shape[0],), generator=gen)
    with LargestTensor() as mode:
        layer.contacts_of(agents, days)
    assert mode.largest < day_size / 4, (mode.largest, day_size)
    assert assert_agent_days_meet_each_days_edges(layer, agents, days, sim.total) > 100


@pytest.mark.parametrize("shared", [False, True])
def test_occupation_contacts_of_a_tiny_population_over_a_long_window(shared):
    """The reference population has 21 occupation groups whatever its size, so with 20 agents in
    2 replicates there are more groups than agents; and a window longer than the 16 days of
    rewiring kept."""
    from abm.populations.reference import build_reference_population
    from abm.scenario import load_scenario

    contacts = load_scenario("scenarios/reference/ni.yaml").contacts
    contacts = contacts.model_copy(update={"same_in_every_replicate": shared})
    pop = build_reference_population(20, seed=3)
    sim = Simulation(pop, DiseaseConfig(), contacts, NO_SEEDS, days=30, replicates=2, seed=6)
    everyone = torch.arange(sim.total)
    agents = everyone.repeat(25)
    days = torch.arange(25).repeat_interleave(sim.total)
    assert sim.occupation.group_edges.shape[0] > sim.total
    assert assert_agent_days_meet_each_days_edges(sim.occupation, agents, days, sim.total) > 500


def test_same_in_every_replicate_may_name_the_layers_it_shares(king_county):
    """The reference code re-used its occupation network files in every run but drew each run's
    community contacts: ``[occupation]`` shares the occupation rewiring only."""
    pop = build_population(king_county, 4_000, seed=2)
    layers = {
        "occupation": {"weight": 1.0, "rewire_probability": 0.1},
        "community": {"weight": 1.0, "mean_contacts": (2, 4, 3), "sd_contacts": (2, 4, 3)},
    }
    cfg = quiet_contacts(**layers).model_copy(update={"same_in_every_replicate": ["occupation"]})
    sim = Simulation(pop, DiseaseConfig(), cfg, NO_SEEDS, days=10, replicates=3, seed=4)
    n = pop.size
    for day in (0, 6):
        occupation, community = sim.layer_edges("occupation", day), sim.layer_edges("community", day)
        first = replicate_pairs(occupation, n, 0)
        assert first.shape[0] > 1000, "the check needs contacts"
        for r in (1, 2):
            assert torch.equal(replicate_pairs(occupation, n, r), first), f"occupation, day {day}, replicate {r}"
        assert not torch.equal(replicate_pairs(community, n, 1), replicate_pairs(community, n, 0))


def replicate_pairs(edges, n: int, r: int) -> torch.Tensor:
    """Replicate r's contacts of a day as sorted pair codes of agent ids within the replicate."""
    sel = (edges.src // n) == r
    a, b = edges.src[sel] - r * n, edges.dst[sel] - r * n
    assert ((b >= 0) & (b < n)).all(), "contacts never cross replicates"
    return torch.sort(torch.minimum(a, b) * n + torch.maximum(a, b)).values


@pytest.mark.parametrize("construction", ["local_mix", "stub_path"])
def test_same_in_every_replicate_shares_one_draw_of_the_daily_contacts(king_county, construction):
    """The reference code re-used one set of daily network files in every run: with
    ``same_in_every_replicate`` every replicate meets exactly replicate 0's contacts each day;
    by default each replicate draws its own."""
    pop = build_population(king_county, 4_000, seed=2)
    layers = {
        "occupation": {"weight": 1.0, "rewire_probability": 0.1},
        "community": {
            "weight": 1.0,
            "mean_contacts": (2, 4, 3),
            "sd_contacts": (2, 4, 3),
            "construction": construction,
        },
    }
    shared_cfg = quiet_contacts(**layers).model_copy(update={"same_in_every_replicate": True})
    own_cfg = quiet_contacts(**layers)
    shared = Simulation(pop, DiseaseConfig(), shared_cfg, NO_SEEDS, days=10, replicates=3, seed=4)
    own = Simulation(pop, DiseaseConfig(), own_cfg, NO_SEEDS, days=10, replicates=3, seed=4)
    n = pop.size
    for day in (0, 6):
        for layer in ("occupation", "community"):
            s, o = shared.layer_edges(layer, day), own.layer_edges(layer, day)
            first = replicate_pairs(s, n, 0)
            assert first.shape[0] > 1000, "the check needs contacts"
            for r in (1, 2):
                assert torch.equal(replicate_pairs(s, n, r), first), f"{layer}, day {day}, replicate {r}"
            assert not torch.equal(replicate_pairs(o, n, 1), replicate_pairs(o, n, 0)), "default: own draws"
    # Tracing's per-agent look-ups follow the shared draw too.
    some = torch.arange(0, n, 7)
    for layer in (shared.occupation, shared.community):
        seen = []
        for r in range(3):
            owner, partner = layer.contacts_of(some + r * n, 6)
            seen.append(sorted(zip(owner.tolist(), (partner - r * n).tolist(), strict=True)))
        assert len(seen[0]) > 100 and seen[0] == seen[1] == seen[2]


@pytest.mark.parametrize("share", [0.0, 0.7, 1.0])
def test_community_other_ends_follow_the_formula(kc_100k, share):
    """A community contact's other end, for the stub at position f of a replicate of c stubs
    and its uniform u: f + round((u / s - 0.5) * 2 sqrt(3) spread) when u < s (local share s),
    reflected at the ends (-1 -> 0, c -> c - 1), else floor((u - s) / (1 - s) * (c - 1))."""
    from abm.engine.contacts import CommunityContacts, PooledCommunityLayer

    cfg = CommunityContacts(local_share=share)
    layer = PooledCommunityLayer(kc_100k, cfg, 1, torch.device("cpu"), 3)
    count = int(layer.counts[0])
    gen = torch.Generator().manual_seed(5)
    first = torch.randint(0, count, (20_000,), generator=gen)
    first[:4] = torch.tensor([0, 1, count - 2, count - 1])  # near both ends: reflected
    u = torch.rand(first.shape[0], generator=gen, dtype=torch.float64)
    got = layer.other_ends(first, count, u)
    want = []
    for f, x in zip(first.tolist(), u.tolist(), strict=True):
        if x < share:
            end = f + round((x / share - 0.5) * (2 * math.sqrt(3) * layer.spread))
            end = -1 - end if end < 0 else (2 * count - 1 - end if end >= count else end)
        else:
            end = math.floor((x - share) / max(1 - share, 1e-12) * (count - 1))
        want.append(end)
    assert got.tolist() == want


@pytest.mark.parametrize("limit", [None, 0])
def test_community_contacts_ending_at_an_agent_are_one_stable_sort(king_county, monkeypatch, limit):
    """The contacts ending at each (agent, day of the cycle) are sorted replicate by replicate
    (torch sorts at most INT_MAX elements at once); that must equal one stable sort of all of
    them, their starting agents (``rev_from``) read in that order, and int64 agent ids (beyond
    2^31 agents; forced here) must give the same."""
    from abm.engine import contacts

    if limit is not None:
        monkeypatch.setattr(contacts, "INDEX_LIMIT", limit)
    pop = build_population(king_county, 3_000, seed=4)
    community = {"weight": 1.0, "mean_contacts": (2, 4, 3), "sd_contacts": (2, 4, 3)}
    sim = Simulation(pop, DiseaseConfig(), quiet_contacts(community=community), NO_SEEDS, days=3, replicates=3, seed=2)
    layer = sim.community
    h, m = layer.per_stub, layer.cycle
    phase = layer.parity.long().repeat_interleave(h) + (2 * torch.arange(h)).repeat(layer.stubs.shape[0])
    key = layer.partner.long() * m + phase
    assert layer.rev_from.dtype == (torch.int64 if limit == 0 else torch.int32)
    assert key.shape[0] > 3 * 3_000 * h, "the check needs contacts in every replicate"
    starts = layer.stubs.index_select(0, torch.sort(key, stable=True).indices // h)
    assert torch.equal(layer.rev_from.long(), starts)


def test_community_pointers_widen_with_the_contacts_not_only_the_rows(king_county, monkeypatch):
    """The pointers into the contacts ending at each (agent, day) run to the number of contacts,
    more than the rows (agents x replicates x cycle days): with a limit between the two (as
    between 2^31 rows and contacts for the whole county at 56-95 replicates) they are int64 and
    reach the last contact, while agent ids stay int32."""
    from abm.engine import contacts

    pop = build_population(king_county, 3_000, seed=4)
    layers = quiet_contacts(community={"weight": 1.0, "mean_contacts": (2, 4, 3), "sd_contacts": (2, 4, 3)})
    sim = Simulation(pop, DiseaseConfig(), layers, NO_SEEDS, days=3, replicates=3, seed=2)
    rows, n = 3_000 * 3 * sim.community.cycle, sim.community.rev_from.shape[0]
    assert rows < n, "the check needs more contacts than rows"
    monkeypatch.setattr(contacts, "INDEX_LIMIT", (rows + n) // 2)
    layer = Simulation(pop, DiseaseConfig(), layers, NO_SEEDS, days=3, replicates=3, seed=2).community
    assert layer.rev_ptr.dtype == torch.int64 and int(layer.rev_ptr[-1]) == n
    assert layer.rev_from.dtype == torch.int32 and torch.equal(layer.rev_from, sim.community.rev_from)
    agents = torch.arange(0, 9_000, 7)
    for day in range(3):
        (o1, c1), (o2, c2) = layer.contacts_of(agents, day), sim.community.contacts_of(agents, day)
        assert torch.equal(o1, o2) and torch.equal(c1, c2)


OCCUPATION_IDS = ("inc_edge", "inc_nbr", "inc_ptr", "members", "group_start", "group_size")


@pytest.mark.parametrize("limit", [None, 0])
def test_occupation_tables_are_int32_below_the_index_limit_and_give_the_same_contacts(king_county, monkeypatch, limit):
    """The occupation layer's tables read for every infectious agent hold ids as int32 (half
    the memory and the bytes read) below the index limit, int64 at it (forced here); both give
    the same pushes from the infectious, the same day's contacts of agents and the same
    contacts over a tracing window, to the bit and as int64."""
    from abm.engine import contacts

    pop = build_population(king_county, 3_000, seed=4)
    base = Simulation(pop, DiseaseConfig(), ContactConfig(), NO_SEEDS, days=9, replicates=3, seed=2).occupation
    if limit is not None:
        monkeypatch.setattr(contacts, "INDEX_LIMIT", limit)
    layer = Simulation(pop, DiseaseConfig(), ContactConfig(), NO_SEEDS, days=9, replicates=3, seed=2).occupation
    assert {getattr(layer, name).dtype for name in OCCUPATION_IDS} == {torch.int64 if limit == 0 else torch.int32}
    gen = torch.Generator().manual_seed(5)
    for size in (40, 4_000):  # few sources (their groups' rewired contacts) and many (every rewired one)
        src = torch.sort(torch.randperm(9_000, generator=gen)[:size]).values
        w = torch.rand(size, generator=gen)
        x = torch.zeros(9_000).index_copy_(0, src, w)
        for day in (1, 2):
            (t1, v1), (t2, v2) = layer.contributions(day, src, w, x), base.contributions(day, src, w, x)
            assert t1.dtype == torch.int64 and torch.equal(t1, t2) and torch.equal(v1, v2)
            assert int((v1 > 0).sum()) > size
            (o1, c1), (o2, c2) = layer.contacts_on(src, day), base.contacts_on(src, day)
            assert c1.dtype == torch.int64 and torch.equal(o1, o2) and torch.equal(c1, c2)
    days = torch.randint(1, 8, (500,), generator=gen)
    agents = torch.randperm(9_000, generator=gen)[:500]
    (o1, c1), (o2, c2) = layer.contacts_of(agents, days), base.contacts_of(agents, days)
    assert c1.dtype == torch.int64 and torch.equal(o1, o2) and torch.equal(c1, c2) and c1.shape[0] > 1_000


def test_rewired_contacts_are_the_same_by_binary_search_and_by_the_days_mask(kc_100k):
    """Whether ring contacts are rewired on a day: a few are looked up by binary search in the
    day's rewiring, many through a mask over all contacts kept for the day; both must be the
    day's rewiring, on whichever day is asked, in any order."""
    sim = Simulation(kc_100k, DiseaseConfig(), ContactConfig(), NO_SEEDS, days=5, replicates=2, seed=3)
    layer = sim.occupation
    edges = layer.src.shape[0]
    gen = torch.Generator().manual_seed(9)
    every = torch.randperm(edges, generator=gen)
    few = every[: edges // 512]  # below 1/256 of the contacts: a binary search
    for day in (1, 3, 1, 2):
        want = torch.isin(every, layer.rewired_ids(day))
        assert torch.equal(layer.rewired(day, every), want)
        assert torch.equal(layer.rewired(day, few), want[: few.shape[0]])
        assert 0 < int(want[: few.shape[0]].sum()) < few.shape[0]


@pytest.mark.parametrize(("households", "sources"), [(40, 60), (800, 10)])  # many sources / few: both sums
def test_force_with_every_layer_uses_each_targets_normalisers(households, sources):
    """Default layers (weights 2 / 1 / 0.25) on a small population of mixed ages, household sizes
    and settings: the force on each agent is sum_layers w_layer * sum_contacts A g / norm(target),
    the normaliser of the agent receiving it: household size, mu of its setting, mean community
    contacts of its age class (2 / 4 / 3), read off the day's explicit contacts (docs/model.md,
    "Transmission")."""
    from abm.engine.contacts import default_degrees

    rng = np.random.default_rng(households)
    sizes = rng.integers(1, 6, households)
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    n = int(bounds[-1])
    ages = rng.integers(0, 95, n)
    perm = rng.permutation(n)
    groups = [sorted(perm[i : i + 25].tolist()) for i in range(0, n // 2, 25)]
    pop = make_population([list(range(a, b)) for a, b in itertools.pairwise(bounds)], groups, ages.tolist())
    pop.categories = ["HEALTHCARE", "SCHOOL", "LONG_TERM_CARE", "WHOLESALETRADE"]
    pop.group_category = (np.arange(len(groups)) % 4).astype(np.int16)
    sim = Simulation(pop, DiseaseConfig(), ContactConfig(), NO_SEEDS, days=30, replicates=2, seed=3)
    day = 12
    src = rng.choice(sim.total, sources, replace=False)
    stage = rng.choice([1, 2, 3, 4, 5, 6], sources)
    when = rng.integers(0, day + 1, sources)
    sim.state.stage[src] = torch.as_tensor(stage, dtype=torch.int8)
    sim.state.infected_day[src] = torch.as_tensor(when, dtype=torch.int16)
    sim.state.next_day[src] = 10_000
    sim.rescan()
    a_stage = {1: 0.33, 2: 0.05, 3: 0.05, 4: 0.72, 5: 1.0, 6: 0.0}
    g = sim.disease.profile.double().numpy()
    x = np.zeros(sim.total)
    x[src] = [a_stage[int(s)] * g[day - t] for s, t in zip(stage, when, strict=True)]
    age_class = np.array([0, 0, 1, 1, 1, 1, 1, 2, 2])[np.minimum(ages // 10, 8)]
    degree = default_degrees()
    mu = np.ones(n)
    member = pop.group >= 0
    mu[member] = [degree[pop.categories[c]] for c in pop.group_category[pop.group[member]]]
    norms = {
        "household": (2.0, pop.household_size[pop.household]),
        "occupation": (1.0, mu),
        "community": (0.25, np.array([2.0, 4.0, 3.0])[age_class]),
    }
    want = np.zeros(sim.total)
    for layer, (weight, norm) in norms.items():
        e = sim.layer_edges(layer, day)
        a, b = e.src.numpy(), e.dst.numpy()
        raw = np.zeros(sim.total)
        np.add.at(raw, b, x[a])
        np.add.at(raw, a, x[b])
        want += weight * raw / np.tile(norm, 2)
        # The layer reaches agents of every normaliser class here (else the test would not tell).
        if layer == "community":
            assert len(set(np.tile(age_class, 2)[(raw > 0)].tolist())) == 3
    others = np.ones(sim.total, dtype=bool)
    others[src] = False  # an infected agent's own force does not matter
    got = sim.force_of_infection(day).double().numpy()
    assert np.allclose(got[others], want[others], rtol=1e-5, atol=1e-9)
    assert (want[others] > 0).sum() > 40


def test_susceptibility_is_that_of_the_exposed_agents_own_age_group():
    """Nine households of two: an infectious agent aged 30 and a susceptible one of age group g
    (ages 5, 15, ..., 85). Each susceptible meets the same force x (household weight 2 / size 2),
    so it is infected with P = 1 - exp(-beta s_g x), s_g its age group's susceptibility (0.35 for
    0-9 .. 1.52 for 80+): an age index read backwards or shifted by one changes P of some group
    by 0.17 or more (0-9: 0.22, 10-19: 0.39, 80+: 0.66), against 4 binomial sd of at most 0.045
    at 2,000 replicates."""
    reps = 2_000
    ages = [a for g in range(9) for a in (30, 10 * g + 5)]
    pop = make_population([[2 * g, 2 * g + 1] for g in range(9)], ages=ages)
    contacts = quiet_contacts(household={"weight": 2.0})
    sim = Simulation(pop, DiseaseConfig(), contacts, NO_SEEDS, days=20, replicates=reps, seed=4)
    day = 10
    for g in range(9):
        infect(sim, 2 * g, Stage.MILD_SYMPTOMS, day - 5)
    x = 0.72 * sim.disease.profile[5].item()
    sim._transmit(day)
    stage = sim.state.stage.view(reps, 18)
    susceptibility = [0.35, 0.69, 1.03, 1.03, 1.03, 1.03, 1.27, 1.52, 1.52]  # specs: epidemic model section 5
    for g, s in enumerate(susceptibility):
        p = 1 - math.exp(-5.02 * s * x)
        got = (stage[:, 2 * g + 1] != Stage.SUSCEPTIBLE).double().mean().item()
        assert abs(got - p) < 4 * math.sqrt(p * (1 - p) / reps), (g, got, p)


@pytest.mark.parametrize("degree", [4.0, 1.0e19, 1.0e30])
def test_an_occupation_degree_beyond_the_group_joins_the_whole_group(degree):
    """A degree at or beyond a group's size joins everyone in the group (a ring of 5 has each agent
    meet the 2 on each side: 10 edges); a degree beyond int64 (1e19) wrapped negative when cast
    and ended the run with 'repeats may not contain negative values'."""
    from abm.engine.contacts import OccupationContacts, OccupationLayer

    pop = make_population([[0], [1], [2], [3], [4]], groups=[[0, 1, 2, 3, 4]])
    cfg = OccupationContacts(degree={"OFFICE": degree})
    layer = OccupationLayer(pop, cfg, 1, torch.device("cpu"), seed=0)
    pairs = {tuple(sorted(e)) for e in zip(layer.src.tolist(), layer.dst.tolist(), strict=True)}
    assert pairs == set(itertools.combinations(range(5), 2))


@pytest.mark.parametrize("size", [0, 1, 7, 1000, 100_003])
def test_flat_nonzero_gives_the_positions_nonzero_gives(size):
    """The engine's numpy-backed positions of true entries (on the CPU) are torch's, dtype
    included: for empty, all-false, all-true and random masks, and for a row of a 2-D mask."""
    from abm.engine.contacts import flat_nonzero

    gen = torch.Generator().manual_seed(size)
    masks = [
        torch.zeros(size, dtype=torch.bool),
        torch.ones(size, dtype=torch.bool),
        torch.rand(size, generator=gen) < 0.3,
        (torch.rand(3, size, generator=gen) < 0.5)[1],
        (torch.rand(2 * size, generator=gen) > 0.9)[::2],  # a strided view
    ]
    for mask in masks:
        got, want = flat_nonzero(mask), mask.nonzero().squeeze(1)
        assert got.dtype == torch.int64 and got.shape == want.shape
        assert torch.equal(got, want)


def test_expand_ranges_lists_every_position_with_its_range():
    """Empty ranges (first, inner, last) own no position; the rest own theirs, in order, int64."""
    from abm.engine.contacts import expand_ranges

    begin = torch.tensor([5, 9, 2, 7, 7, 0, 3])
    end = torch.tensor([5, 12, 4, 7, 8, 1, 3])
    pos, owner = expand_ranges(begin, end)
    assert pos.tolist() == [9, 10, 11, 2, 3, 7, 0]
    assert owner.tolist() == [1, 1, 1, 2, 2, 4, 5]
    assert owner.dtype == torch.int64 and pos.dtype == torch.int64
    none = expand_ranges(begin[:0], end[:0])
    assert none[0].shape == (0,) and none[1].shape == (0,)


@pytest.mark.parametrize("construction", ["local_mix", "stub_path"])
def test_a_community_mean_of_zero_with_a_positive_sd_gives_no_contacts(construction):
    """mean_contacts 0 with sd_contacts above 0 (both allowed) gives that age class no community
    contacts; it ended the run with numpy's 'n <= 0' from the negative binomial."""
    from abm.engine.contacts import negative_binomial

    rng = np.random.default_rng(0)
    k = negative_binomial(rng, np.array([0.0, 0.0, 4.0]), np.array([2.0, 0.0, 4.0]))
    assert k[:2].tolist() == [0, 0]
    ages = [5, 5, 40, 40, 40, 40]  # two children (class mean 0, sd 2), four adults
    pop = make_population([[0, 1], [2, 3], [4, 5]], ages=ages)
    contacts = quiet_contacts(
        community={"weight": 1.0, "mean_contacts": (0, 6, 6), "sd_contacts": (2, 6, 6), "construction": construction}
    )
    sim = Simulation(pop, DiseaseConfig(), contacts, NO_SEEDS, days=4, replicates=2, seed=3)
    layer = sim.layers[-1]
    assert layer.name == "community"
    for day in range(4):
        owner, partner = layer.contacts_of(torch.arange(2 * len(ages)), day)
        met = set(owner.tolist()) | set(partner.tolist())
        assert not met & {0, 1, 6, 7}, (day, met)  # the children of both replicates meet no one


def test_local_community_contacts_do_not_pile_up_at_the_ends_of_the_stubs():
    """Every stub starts h = cycle_days / 2 potential contacts; with local_share 1 each ends at
    a stub uniformly within +-W = sqrt(3) spread of its own. Reflected at the ends, every stub
    receives h of them in expectation, the first and the last too. Clamped, as they were, the
    draws beyond an end all fell on its end stub: at W = 346 stubs the agent at either end
    received about h W / 4 = 430 of them (the agents of the first and last stubs of a King
    County replicate of 100,000 met about 260 people a day, against their 2-4). One stub per
    agent here, so the 20 agents at each end receive 200 in all, within 4 Poisson sd (57)."""
    from abm.engine.contacts import PooledCommunityLayer

    n = 4000
    pop = make_population([[i] for i in range(n)])
    cfg = quiet_contacts(
        community={"weight": 1.0, "mean_contacts": (1, 1, 1), "sd_contacts": (0, 0, 0), "local_share": 1.0,
                   "local_spread_tracts": 0.05}
    ).community  # fmt: skip
    layer = PooledCommunityLayer(pop, cfg, 1, torch.device("cpu"), 7)
    h = cfg.cycle_days // 2
    assert int(layer.counts[0]) == n and math.sqrt(3) * layer.spread == pytest.approx(346.4, abs=0.1)
    received = torch.bincount(layer.partner.long(), minlength=n).double()
    ends = torch.cat([received[:20], received[-20:]])
    assert abs(ends.sum().item() - 40 * h) < 4 * math.sqrt(40 * h), ends.tolist()
    assert ends.max().item() < 20 and received.mean().item() == h
