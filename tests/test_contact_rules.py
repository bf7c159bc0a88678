"""Contact layers and contact multipliers: the community normaliser, and the day's multipliers
on the right layers from the right day (found by a hand-made mutation audit)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import NO_SEEDS, make_population, quiet_contacts

from abm.engine import DiseaseConfig, Phase, Simulation, Stage
from abm.interventions.contact_multipliers import ContactMultipliers, ContactMultipliersConfig


def infectious(sim: Simulation, agent: int, infected_day: int, day: int) -> float:
    """Make ``agent`` mild-symptomatic since ``infected_day``; its infectiousness on ``day`` from
    the spec's A (0.72 for mild symptoms) and the profile g."""
    sim.state.stage[agent] = int(Stage.MILD_SYMPTOMS)
    sim.state.infected_day[agent] = infected_day
    sim.state.next_day[agent] = 10_000
    sim.rescan()
    return 0.72 * sim.disease.profile[day - infected_day].item()


def test_community_contacts_are_divided_by_the_mean_not_the_sd():
    """docs/model.md, Transmission: a community contact's force is weight x infectiousness /
    the mean community contacts of the receiving agent's age class. Adults here have mean 5 and
    sd 3 (the default has mean = sd, which hides a normaliser read from the sd): the force on
    each agent is 0.5 x (its contacts with infectious agent 0 that day) x x0 / 5."""
    n = 40
    pop = make_population([[i] for i in range(n)])
    contacts = quiet_contacts(community={"weight": 0.5, "mean_contacts": (2, 5, 3), "sd_contacts": (2, 3, 3)})
    sim = Simulation(pop, DiseaseConfig(), contacts, NO_SEEDS, days=20, seed=4)
    x0 = infectious(sim, 0, 6, 10)
    e = sim.layer_edges("community", 10)
    meets = np.zeros(n)
    src, dst = e.src.numpy(), e.dst.numpy()
    np.add.at(meets, dst[src == 0], 1)
    np.add.at(meets, src[dst == 0], 1)
    meets[0] = 0
    assert meets.sum() > 0
    force = sim.force_of_infection(10).double().numpy()
    assert np.allclose(force[1:], 0.5 * meets[1:] * x0 / 5, rtol=1e-6, atol=0)


@pytest.mark.parametrize("others", [0, 60])  # few agents: the dense sum of the force; many: the sparse one
def test_each_layers_multiplier_scales_its_own_contacts_from_its_first_day(others):
    """Changes from day 10 (until day 12): household contacts x 0.5, occupation x 0.25. Agent 0
    (infectious) meets housemate 1 (household size 2, weight 2) and workmates 2 and 3 (an office
    ring of 3, mean degree 2, weight 1). Day 9: force 2 x0 / 2 on agent 1 and 1 x0 / 2 on 2 and
    3; days 10 and 11: times 0.5 and 0.25; day 12 (until_day, the first day without the
    change): as on day 9. The multipliers are set by the intervention's transmission hook."""
    pop = make_population([[0, 1], [2], [3], *[[4 + i] for i in range(others)]], groups=[[0, 2, 3]])
    contacts = quiet_contacts(household={"weight": 2.0}, occupation={"weight": 1.0})
    cuts = ContactMultipliers(
        ContactMultipliersConfig(changes=[{"from_day": 10, "until_day": 12, "household": 0.5, "occupation": 0.25}])
    )
    sim = Simulation(pop, DiseaseConfig(), contacts, NO_SEEDS, days=20, seed=1, interventions=[cuts])
    hook = cuts.hooks()[Phase.TRANSMISSION]
    for day, home, work in [(9, 1.0, 1.0), (10, 0.5, 0.25), (11, 0.5, 0.25), (12, 1.0, 1.0)]:
        x0 = infectious(sim, 0, day - 4, day)
        hook(sim, day)
        force = sim.force_of_infection(day).double().numpy()
        want = np.zeros(pop.size)
        want[1] = home * 2.0 * x0 / 2
        want[2] = want[3] = work * 1.0 * x0 / 2
        assert np.allclose(force[1:], want[1:], rtol=1e-6, atol=0), day


def test_a_change_is_in_effect_from_its_first_day_until_the_day_before_until_day():
    """Change: from from_day, until until_day exclusive ("first day without it")."""
    cm = ContactMultipliers(ContactMultipliersConfig(changes=[{"from_day": 3, "until_day": 5, "community": 0.5}]))
    assert [cm.multipliers(d)["community"] for d in range(7)] == [1.0, 1.0, 1.0, 0.5, 0.5, 1.0, 1.0]
    assert {cm.multipliers(d)["household"] for d in range(7)} == {1.0}
