"""Seeding: the day, the stages and the counts of the initial infections (found by a hand-made
mutation audit)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import fixed_seeds_note, make_population, quiet_contacts

from abm.engine import DiseaseConfig, SeedingConfig, Simulation, Stage
from abm.scenario_notes import ScenarioNote


def seeded(infections: dict[str, int], n: int = 10, day: int = 3, replicates: int = 4) -> Simulation:
    pop = make_population([[i] for i in range(n)])
    seeding = SeedingConfig(day=day, infections=infections)
    return Simulation(pop, DiseaseConfig(), quiet_contacts(), seeding, days=6, replicates=replicates, seed=2)


def test_seeding_puts_the_given_counts_in_the_given_stages_on_its_day():
    """seeding.day 3, 2 asymptomatic and 1 mild-symptomatic per replicate (docs: "number of
    agents put in each stage on that day"), no contacts: nobody is infected before day 3; on
    day 3 each replicate has exactly those, infected that day, and counted as introduced."""
    sim = seeded({"asymptomatic": 2, "mild_symptoms": 1})
    for day in range(3):
        sim.step(day)
        assert (sim.state.stage == Stage.SUSCEPTIBLE).all(), day
    sim.step(3)
    stage = sim.state.stage.view(4, 10)
    assert ((stage == Stage.ASYMPTOMATIC).sum(1) == 2).all()
    assert ((stage == Stage.MILD_SYMPTOMS).sum(1) == 1).all()
    assert ((stage != Stage.SUSCEPTIBLE).sum(1) == 3).all()
    assert (sim.state.infected_day.view(4, 10)[stage != Stage.SUSCEPTIBLE] == 3).all()
    for day in (4, 5):
        sim.step(day)
    res = sim.recorder.result(0.0, sim.ledger)
    assert res.new_infections.tolist() == [[0] * 4] * 3 + [[3] * 4] + [[0] * 4] * 2
    assert res.introduced.tolist() == res.new_infections.tolist()


def test_the_order_of_the_seeding_counts_does_not_change_the_draw():
    """The same counts written in another order (a file's keys, --set seeding.infections={...})
    are the same scenario: the seeded agents and their stages were drawn in the mapping's order,
    so {mild_symptoms: 1, asymptomatic: 2} put other agents in each stage than
    {asymptomatic: 2, mild_symptoms: 1}, and the whole epidemic differed from the same seed."""
    one = seeded({"asymptomatic": 2, "mild_symptoms": 1})
    other = seeded({"mild_symptoms": 1, "asymptomatic": 2})
    for day in range(4):
        one.step(day)
        other.step(day)
    assert (one.state.stage != Stage.SUSCEPTIBLE).sum() == 12
    assert one.state.stage.tolist() == other.state.stage.tolist()


def test_seeding_may_infect_every_agent_but_not_more():
    """As many initial infections as agents infect them all; one more is refused."""
    sim = seeded({"asymptomatic": 10}, day=0, replicates=2)
    sim.step(0)
    assert (sim.state.stage == Stage.ASYMPTOMATIC).all()
    with pytest.raises(ValueError, match="seeding asks for 11 infections but there are 10 agents"):
        seeded({"asymptomatic": 11}, day=0, replicates=1).step(0)


def test_infecting_an_agent_that_is_not_susceptible_is_refused():
    """``Simulation.infect`` (the call a hook uses to introduce infections) takes susceptible
    agents, each once. An agent given again, or one already infected, was counted as a new
    infection a second time and taken out of the susceptible count once more: two agents gave
    4 new infections and -1 susceptible agents. Now the call is refused and the state is left
    as it was."""
    import torch

    sim = seeded({}, n=3, replicates=1)
    sim.infect(torch.tensor([0]), torch.tensor([int(Stage.MILD_SYMPTOMS)]), 0)
    with pytest.raises(ValueError, match=r"infect: 1 of the agents are not susceptible \(e\.g\. \[0\]\)"):
        sim.infect(torch.tensor([2, 0]), None, 0)
    with pytest.raises(ValueError, match="infect: an agent is given more than once"):
        sim.infect(torch.tensor([2, 2]), None, 0)
    assert sim.state.stage.tolist() == [int(Stage.MILD_SYMPTOMS), 0, 0]
    sim.recorder.record(0)
    res = sim.recorder.result(0.0, sim.ledger)
    assert res.new_infections[0].tolist() == [1]
    assert res.stages[0, 0, Stage.SUSCEPTIBLE] == 2 and res.stages[0, 0].sum() == 3


def test_infections_per_100k_scale_with_the_agents_rounded_half_up():
    """infections_per_100k: 25 asymptomatic and 10 mild per 100,000 are 5 and 2 at 20,000 agents,
    and at 10 agents 0.0025 and 0.001: none (and 50 per 100,000 of 1,000 agents, 0.5, is 1)."""
    cfg = SeedingConfig(infections_per_100k={"asymptomatic": 25, "mild_symptoms": 10})
    assert cfg.counts(20_000) == {"asymptomatic": 5, "mild_symptoms": 2}
    assert cfg.counts(10) == {"asymptomatic": 0, "mild_symptoms": 0}
    assert SeedingConfig(infections_per_100k={"asymptomatic": 50}).counts(1000) == {"asymptomatic": 1}
    assert SeedingConfig(infections={"asymptomatic": 7}).counts(20_000) == {"asymptomatic": 7}
    pop = make_population([[i] for i in range(400)])
    seeding = SeedingConfig(day=0, infections_per_100k={"asymptomatic": 1000, "mild_symptoms": 500})
    sim = Simulation(pop, DiseaseConfig(), quiet_contacts(), seeding, days=1, replicates=3, seed=2)
    sim.step(0)
    stage = sim.state.stage.view(3, 400)
    assert ((stage == Stage.ASYMPTOMATIC).sum(1) == 4).all() and ((stage == Stage.MILD_SYMPTOMS).sum(1) == 2).all()


def test_infections_and_infections_per_100k_are_not_both_given():
    """Counts and a rate per 100,000 are not both given; counts of 0 (a base file's, set to 0 by
    the file that extends it) or none give way to the rate."""
    with pytest.raises(ValueError, match="as infections \\(counts\\) or as infections_per_100k, not both"):
        SeedingConfig(infections={"asymptomatic": 1}, infections_per_100k={"asymptomatic": 1})
    for none in ({}, {"asymptomatic": 0, "presymptomatic_mild": 0}):
        cfg = SeedingConfig(infections=none, infections_per_100k={"asymptomatic": 10})
        assert cfg.counts(100_000) == {"asymptomatic": 10}


def test_a_run_seeded_per_100k_keeps_its_share_at_other_agents():
    """King County with 50 asymptomatic per 100,000: 10 seeds at 20,000 agents and 1 at 2,000, as
    the run's day-0 infections say; the scenario's 5 absolute seeds stay 5 at both."""
    import abm

    for agents, seeds in ((20_000, 10), (2_000, 1)):
        replaced = (
            r"^sets item 'seeding=\{day: 0, infections_per_100k: \{asymptomatic: 50\}\}' replaces seeding as a whole"
        )
        with pytest.warns(ScenarioNote, match=replaced):  # the file's seeding.infections dropped, as meant
            run = abm.run(
                "scenarios/king_county/no_intervention.yaml",
                sets=["seeding={day: 0, infections_per_100k: {asymptomatic: 50}}"],
                agents=agents,
                days=1,
                replicates=2,
            )
        assert run.result.introduced[0].tolist() == [seeds, seeds]
        with fixed_seeds_note():
            plain = abm.run("scenarios/king_county/no_intervention.yaml", agents=agents, days=1, replicates=2)
        assert plain.result.introduced[0].tolist() == [5, 5]


def test_infections_per_100k_round_half_up_exactly_as_written():
    """16.4 per 100,000 of 125,000 agents is 20.5: 21, although 16.4 * 125000 / 1e5 is 20.4999...
    in floating point, which gave 20."""
    assert SeedingConfig(infections_per_100k={"asymptomatic": 16.4}).counts(125_000) == {"asymptomatic": 21}


def test_the_advice_for_a_base_files_counts_works_in_a_file_that_extends_it(tmp_path):
    """A file that extends one with counts and gives infections_per_100k is refused; the message
    named infections: {}, which a file merges into the base's counts (only --set replaces a
    mapping), so following it was refused again. It names the counts to set to 0, and they work."""
    from abm.scenario import ScenarioError, load_scenario

    base = Path("scenarios/king_county/no_intervention.yaml").resolve()
    child = tmp_path / "child.yaml"
    child.write_text(f"extends: {base}\nseeding:\n  infections_per_100k: {{asymptomatic: 50}}\n")
    with pytest.raises(ScenarioError, match=r"set infections: \{asymptomatic: 0, presymptomatic_mild: 0\}"):
        load_scenario(child)
    child.write_text(
        f"extends: {base}\nseeding:\n  infections: {{asymptomatic: 0, presymptomatic_mild: 0}}\n"
        "  infections_per_100k: {asymptomatic: 50}\n"
    )
    assert load_scenario(child).seeding.counts(20_000) == {"asymptomatic": 10}
