"""The engine's work lists stay equal to what a scan of every agent would find: the infected
agents, the day's transitions, the exposure of agents to the infectious, and the vaccination
queue's daily choice against a brute-force ranking of all agents."""

from __future__ import annotations

import torch

from abm.engine import Phase, SeedingConfig, Simulation, Stage
from abm.engine.disease import ABSORBING, NEVER
from abm.populations import build_population
from abm.runs import resolve

VACC_CT = "scenarios/king_county/vacc_ct.yaml"


def simulation(king_county, sets: list[str], agents: int = 4_000, replicates: int = 3, days: int = 60) -> Simulation:
    sc = resolve(VACC_CT, {"agents": agents, "replicates": replicates, "days": days, "seed": 11}, sets)
    pop = build_population(king_county, agents, seed=11)
    return Simulation(
        pop, sc.disease, sc.contacts, sc.seeding, days, replicates, 11, interventions=sc.interventions.build()
    )


HOT = ["disease.transmission_rate=8.0", "seeding.infections={asymptomatic: 20}"]


def test_infected_list_and_due_transitions_match_a_full_scan(king_county):
    sim = simulation(king_county, HOT)
    due_seen = []
    original_due = sim._due

    def due(day: int) -> torch.Tensor:
        expected = (sim.state.next_day == day).nonzero().squeeze(1)
        got = original_due(day)
        due_seen.append(got.numel())
        assert torch.equal(got, expected), f"day {day}: due transitions differ from a scan"
        return got

    sim._due = due
    for day in range(sim.days):
        sim.step(day)
        stage = sim.state.stage
        scan = ((stage != Stage.SUSCEPTIBLE) & (stage != ABSORBING[0]) & (stage != ABSORBING[1])).nonzero()
        assert torch.equal(sim.infected(), scan.squeeze(1)), f"day {day}: infected list differs from a scan"
    assert sum(due_seen) > 1000, "the epidemic must make many transitions for the check to mean anything"


def test_exposure_equals_the_sum_over_every_contact_of_the_day(king_county):
    sim = simulation(king_county, HOT, days=40)
    for day in range(30):
        sim.step(day)
    day = 30
    src, w = sim.infectiousness(day)
    assert 50 < src.numel() < sim.total // 8, "a mid-sized epidemic: exposure takes the sparse path"
    x = torch.zeros(sim.total, dtype=torch.float64)
    x[src] = w.double()
    full = torch.zeros(sim.total, dtype=torch.float64)
    for layer in sim.layers:
        e = layer.edges(day)
        raw = torch.zeros(sim.total, dtype=torch.float64)
        raw.index_add_(0, e.dst, x[e.src]).index_add_(0, e.src, x[e.dst])
        full += raw * layer.coef.double() * sim.layer_scale[layer.name]
    target, force = sim.exposure(day)
    got = torch.zeros(sim.total, dtype=torch.float64)
    got[target] = force.double()
    others = torch.ones(sim.total, dtype=torch.bool)
    others[src] = False  # a source's own entry may count contacts that landed on itself
    assert torch.allclose(got[others], full[others], rtol=1e-5, atol=1e-7)
    assert (full[others] > 0).sum() > 200
    assert torch.equal(target, torch.unique(target)), "exposed agents come ascending and distinct"


def test_the_force_summed_per_agent_and_over_the_exposed_agents_is_the_same_to_the_bit(king_county):
    """The day's force is summed into per-agent vectors when contacts are many, else over the
    distinct exposed agents: both add the same values in the same order, so the engine may take
    either way on any day; here each day's sum is done both ways and compared bit for bit."""
    sim = simulation(king_county, HOT, agents=8_000, replicates=2, days=60)
    original = sim._sum_force
    taken, compared = [], []

    def both(parts: list[tuple], dense: bool) -> tuple[torch.Tensor, torch.Tensor]:
        taken.append(dense)
        if any(t is None for *_, t, _ in parts):  # every agent's sum at once: per-agent vectors only
            return original(parts, dense)
        (t1, f1), (t2, f2) = original(parts, True), original(parts, False)
        assert torch.equal(t1, t2) and torch.equal(f1.view(torch.int32), f2.view(torch.int32))
        compared.append(f1.numel())
        return (t1, f1) if dense else (t2, f2)

    sim._sum_force = both
    for day in range(sim.days):
        sim.step(day)
    assert taken.count(True) > 5 and taken.count(False) > 5, "the epidemic must take both ways"
    assert sum(n > 1_000 for n in compared) > 10, "many days with many exposed agents compared"


def brute_force_choice(sim: Simulation, vacc, day: int) -> torch.Tensor:
    """Today's doses by ranking every agent: eligible agents by priority key, the first
    ``available`` of each replicate (the rule the queue implements)."""
    c, st = vacc.cfg, sim.state
    stock = torch.roll(vacc.stock, 1, dims=1)
    stock[:, 0] = vacc.production(day)
    available = stock.sum(1)
    can = (st.stage < Stage.HOSPITALIZED) & ~st.isolated & vacc.in_program
    first = can & (vacc.doses == 0)
    second = can & (vacc.doses == 1) & vacc.returns & (day - vacc.dose1_day >= c.dose2_gap_days)
    key = torch.where(first, vacc.first_key, torch.where(second, vacc.second_key, torch.inf)).view(sim.replicates, -1)
    order = torch.argsort(key, dim=1, stable=True)
    chosen = []
    for r in range(sim.replicates):
        ranked = order[r][key[r, order[r]] < torch.inf][: int(available[r])]
        chosen.append(ranked + r * sim.n)
    return torch.sort(torch.cat(chosen)).values


def test_vaccination_queue_gives_the_doses_a_full_ranking_gives(king_county):
    # Interleaved first and second doses, a short gap, a custom priority list that leaves some
    # ages out, quarantines that hold agents back, and supply that runs the first doses out.
    sets = [
        *HOT,
        "interventions.vaccination.daily_doses_per_100k=3000",
        "interventions.vaccination.first_doses_first=false",
        "interventions.vaccination.dose2_gap_days=7",
        "interventions.vaccination.priority=[8, 7, 3, 4]",
        "interventions.vaccination.start_day=5",
    ]
    sim = simulation(king_county, sets, days=70)
    vacc = next(iv for iv in sim.interventions if iv.name == "vaccination")
    expected: dict[int, torch.Tensor] = {}
    before: dict[int, torch.Tensor] = {}

    def record(s: Simulation, day: int) -> None:
        if day >= vacc.cfg.start_day:
            expected[day] = brute_force_choice(s, vacc, day)
        before[day] = vacc.doses.clone()

    sim._hooks[Phase.VACCINATION].insert(0, record)
    second_doses = 0
    isolated_days = 0
    for day in range(sim.days):
        sim.step(day)
        given = (vacc.doses != before[day]).nonzero().squeeze(1)
        if day in expected:
            assert torch.equal(given, expected[day]), f"day {day}: the queue chose other agents"
        second_doses += int((vacc.doses.index_select(0, given) == 2).sum())
        isolated_days += int(sim.state.isolated.sum())
    in_program = int(vacc.in_program.sum())
    assert int((vacc.doses > 0).sum()) > 0.8 * in_program, "first doses ran through the programme"
    assert second_doses > 500 and isolated_days > 1000, "second doses and quarantines were exercised"


def test_rescan_picks_up_state_written_by_hand(king_county):
    sim = simulation(king_county, [], days=10)
    sim.step(0)
    agent = int((sim.state.stage == Stage.SUSCEPTIBLE).nonzero()[0])
    sim.state.stage[agent] = int(Stage.MILD_SYMPTOMS)
    sim.state.infected_day[agent] = 0
    sim.state.next_day[agent] = 3
    sim.state.next_stage[agent] = int(Stage.RECOVERED)
    sim.rescan()
    assert agent in sim.infected().tolist()
    for day in range(1, 4):
        sim.step(day)
    assert sim.state.stage[agent] == Stage.RECOVERED and sim.state.next_day[agent] == NEVER
    assert agent not in sim.infected().tolist()


def test_seeding_that_is_not_resampled_still_fills_the_lists(king_county):
    sim = simulation(king_county, [], days=5)
    sim.seeding = SeedingConfig(infections={"asymptomatic": 4}, resample_per_replicate=False)
    sim.step(0)
    assert sim.infected().numel() == 4 * sim.replicates


def test_an_agent_passed_while_isolated_gets_both_doses(king_county):
    """The last agent of the queue is isolated when the head passes it, gets its first dose from
    the passed list once out, and must still be scanned for its second dose (the queue's front
    has to cover its entry)."""
    sets = [
        "interventions.vaccination.start_day=0",
        "interventions.vaccination.priority=[8]",  # 80+ only: a short queue, done on day 0
        "interventions.vaccination.daily_doses=1000",
        "interventions.vaccination.dose2_gap_days=3",
        "interventions.vaccination.dose2_dropout=0",
    ]
    sc = resolve("scenarios/king_county/vacc.yaml", {"agents": 2000, "replicates": 1, "days": 12, "seed": 5}, sets)
    pop = build_population(king_county, 2000, seed=5)
    sim = Simulation(pop, sc.disease, sc.contacts, sc.seeding, 12, 1, 5, interventions=sc.interventions.build())
    vacc = next(iv for iv in sim.interventions if iv.name == "vaccination")
    last = int(vacc.queue[0, -1])

    def isolate(s: Simulation, day: int) -> None:
        s.state.isolated[last] = day < 2  # isolated on days 0 and 1, out from day 2

    sim._hooks[Phase.VACCINATION].insert(0, isolate)
    for day in range(12):
        sim.step(day)
        if day == 1:
            assert int(vacc.doses[last]) == 0 and int((vacc.doses > 0).sum()) == vacc.queued - 1
        if day == 2:
            assert int(vacc.doses[last]) == 1, "first dose from the passed list once out"
    assert int(vacc.dose1_day[last]) == 2
    assert int(vacc.doses[last]) == 2, "second dose after the gap"
    assert (vacc.doses.index_select(0, vacc.queue[0]) == 2).all()
