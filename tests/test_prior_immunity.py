"""``seeding.prior_immunity``: agents immune from an earlier infection before day 0, in exact
numbers per age group, never infected in the run, and not counted as infected."""

from __future__ import annotations

import re

import pytest
import torch
from conftest import fixed_seeds_note, make_population, quiet_contacts

import abm
from abm.engine import DiseaseConfig, SeedingConfig, Simulation, Stage
from abm.interventions.vaccination import Vaccination, VaccinationConfig
from abm.scenario import ScenarioError

# 9 age groups of 10 agents each (ages 5, 15, ..., 85), in one household: everyone meets everyone.
AGES = [10 * (i // 10) + 5 for i in range(90)]


def simulation(prior: float | list[float], replicates: int = 3, resample: bool = True, **kw) -> Simulation:
    pop = make_population([list(range(90))], ages=AGES)
    seeding = SeedingConfig(infections=kw.pop("infections", {}), prior_immunity=prior, resample_per_replicate=resample)
    contacts = kw.pop("contacts", quiet_contacts())
    return Simulation(pop, DiseaseConfig(), contacts, seeding, days=30, replicates=replicates, seed=7, **kw)


def test_the_share_of_each_age_group_rounded_half_up_is_immune_in_each_replicate():
    """Shares 0.25 of 10 agents (2.5: 3), 0.04 (0.4: none), 0.5 (5), 1 (all 10), 0 elsewhere:
    exactly those counts in every replicate, other agents in each (the choice is per replicate),
    all of them still in the susceptible stage."""
    shares = [0.25, 0.04, 0.5, 1.0, 0, 0, 0, 0, 0]
    sim = simulation(shares)
    immune = sim.state.immune.view(3, 9, 10)
    assert immune.sum(2).tolist() == [[3, 0, 5, 10, 0, 0, 0, 0, 0]] * 3
    assert not torch.equal(immune[0], immune[1]) or not torch.equal(immune[1], immune[2])
    assert (sim.state.stage == Stage.SUSCEPTIBLE).all()
    assert torch.equal(sim.prior_immune, sim.state.immune)


def test_one_choice_for_every_replicate_without_resampling():
    sim = simulation(0.3, resample=False)
    immune = sim.state.immune.view(3, 90)
    assert immune.sum(1).tolist() == [27, 27, 27]
    assert torch.equal(immune[0], immune[1]) and torch.equal(immune[1], immune[2])


def test_none_is_drawn_when_no_share_rounds_to_an_agent():
    """0.04 of each group of 10 rounds to none: no one is immune and nothing is drawn."""
    sim = simulation(0.04)
    assert sim.prior_immune is None and not sim.state.immune.any()


def test_the_immune_are_never_infected_nor_counted_as_infected():
    """Everyone meets everyone every day at a very high rate: the 45 agents (of 90) who are not
    immune are all infected, none of the 45 immune; the cumulative infected count (agents no
    longer susceptible) is the infected only."""
    contacts = quiet_contacts(household={"weight": 1.0})
    sim = simulation([0.5] * 9, replicates=2, infections={"mild_symptoms": 5}, contacts=contacts)
    sim.disease_cfg.transmission_rate = 500.0  # an infectious housemate infects at once
    res = sim.run()
    immune = sim.prior_immune
    assert int(immune.sum()) == 2 * 45
    assert (sim.state.infected_day[immune] == -1).all()
    assert (sim.state.infected_day[~immune] >= 0).all()
    assert res.new_infections.sum(0).tolist() == [45, 45]
    assert (90 - res.stages[-1, :, Stage.SUSCEPTIBLE]).tolist() == [45, 45]


def test_a_failed_second_dose_does_not_take_away_an_earlier_infections_immunity():
    """dose2_combine overwrite: a second dose whose draw fails ends the first dose's protection
    (test_reference.py); an agent immune from an earlier infection stays immune."""
    cfg = VaccinationConfig(
        start_day=0, daily_doses=90, dose1_efficacy=1.0, dose1_delay_days=0, dose2_efficacy=0.0,
        dose2_gap_days=2, dose2_dropout=0.0, dose2_combine="overwrite",
    )  # fmt: skip
    vacc = Vaccination(cfg)
    sim = simulation(0.5, replicates=1, interventions=[vacc])
    prior = sim.prior_immune.clone()
    for day in range(2):
        sim.step(day)
    assert sim.state.immune.all()  # every agent's first dose protects
    sim.step(2)
    assert (vacc.doses == 2).all()
    assert torch.equal(sim.state.immune, prior)


def test_a_run_with_prior_immunity_infects_fewer_and_the_scenario_keeps_it(tmp_path):
    """King County, 3,000 agents: half immune before day 0 leaves fewer infected than none, in
    each of the same seeds' replicates; the resolved scenario keeps the share."""
    common = {"agents": 3000, "days": 60, "replicates": 3}
    with fixed_seeds_note():
        base = abm.run("scenarios/king_county/no_intervention.yaml", **common)
    with fixed_seeds_note():
        half = abm.run("scenarios/king_county/no_intervention.yaml", sets=["seeding.prior_immunity=0.5"], **common)
    ts0, ts1 = (r.timeseries[r.timeseries.day == 59].set_index("replicate") for r in (base, half))
    assert (ts1.cumulative_infected < ts0.cumulative_infected).all()
    half.write(tmp_path / "run")
    assert "prior_immunity: 0.5" in (tmp_path / "run" / "scenario.resolved.yaml").read_text()


ALLOWED = "give one share between 0 and 1, or a list of 9 \\(the age groups 0-9 \\.\\. 80\\+\\)$"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("1.5", r"1\.5 is not allowed: 1\.5 outside 0\.\.1; " + ALLOWED),
        ("[0.1, 0.2]", r"\[0\.1, 0\.2\] is not allowed: " + ALLOWED),
        ("[0.1, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, -0.1]", r"-0\.1 outside 0\.\.1; " + ALLOWED),
        ("abc", r"'abc' is not allowed: " + ALLOWED),
    ],
)
def test_a_share_outside_0_to_1_or_a_list_of_other_than_9_is_refused(value, message):
    """One line naming the key, the value and what is allowed (not one line per kind of value)."""
    with pytest.raises(ScenarioError, match=r"invalid scenario: seeding\.prior_immunity: ") as caught:
        abm.run("scenarios/king_county/no_intervention.yaml", sets=[f"seeding.prior_immunity={value}"], agents=1000)
    assert "\n" not in str(caught.value)
    assert re.search(message, str(caught.value)), str(caught.value)


def test_shares_round_half_up_exactly_as_written():
    """0.35 of 90 agents is 31.5: 32 (rounded half up), although 0.35 * 90 is 31.4999... in
    floating point, which gave 31; 0.29 of 50 (14.5) is 15, 0.25 of 90 (22.5) is 23."""
    cfg = SeedingConfig(prior_immunity=[0.35, 0.29, 0.25, 0, 0, 0, 0, 0, 0])
    assert cfg.immune_counts([90, 50, 90, 0, 0, 0, 0, 0, 0]) == [32, 15, 23, 0, 0, 0, 0, 0, 0]
    pop = make_population([list(range(810))], ages=[10 * (i // 90) + 5 for i in range(810)])
    seeding = SeedingConfig(infections={}, prior_immunity=0.35)
    sim = Simulation(pop, DiseaseConfig(), quiet_contacts(), seeding, days=1, replicates=2, seed=7)
    assert sim.state.immune.view(2, 9, 90).sum(2).tolist() == [[32] * 9] * 2


def test_a_seeding_larger_than_the_agents_left_not_immune_is_refused():
    """Everyone immune before day 0 and 5 initial infections: no agent is left to seed, which ran
    without a word and infected no one; now refused, naming both settings. As many infections as
    agents left is fine."""
    refused = pytest.raises(
        ScenarioError, match=r"5 initial infections a replicate, but seeding\.prior_immunity leaves 0"
    )
    with refused, fixed_seeds_note():
        abm.run("scenarios/king_county/no_intervention.yaml", sets=["seeding.prior_immunity=1"], agents=1000, days=2)
    with pytest.raises(ScenarioError, match="leaves 45 of the 90 agents"):
        simulation(0.5, infections={"asymptomatic": 46})
    sim = simulation(0.5, infections={"asymptomatic": 45})
    sim.step(0)
    assert ((sim.state.stage != Stage.SUSCEPTIBLE) == ~sim.prior_immune).all()
