"""Long-term-care residents: their own disease course (``disease.long_term_care_branching``), their
outcomes in the summary, and where their facility's staff stand on its contact ring."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from conftest import make_population, quiet_contacts, sim_of

from abm.engine import DiseaseConfig, SeedingConfig, Simulation, SimulationResult, Stage
from abm.engine.severity import resident_severity
from abm.scenario import ScenarioError, validate

ROOT = Path(__file__).resolve().parents[1]
S, A, PSEV, SEV = (int(s) for s in (Stage.SUSCEPTIBLE, Stage.ASYMPTOMATIC, Stage.PRESYMPTOMATIC_SEVERE,
                                     Stage.SEVERE_SYMPTOMS))  # fmt: skip
H, D, R = (int(s) for s in (Stage.HOSPITALIZED, Stage.DEATH, Stage.RECOVERED))


def tables() -> tuple[list[list[list[float]]], list[list[float]]]:
    """An 80+ row that sends every infection to asymptomatic and every severe case home, and a
    residents' table that sends every infection to the severe course, hospital and death."""
    branching = DiseaseConfig().branching
    rows = branching[8]
    rows[S][A : PSEV + 1] = [1.0, 0.0, 0.0]
    rows[SEV][H], rows[SEV][R] = 0.0, 1.0
    residents = [row[:] for row in DiseaseConfig().branching[8]]
    residents[S][A : PSEV + 1] = [0.0, 0.0, 1.0]
    residents[SEV][H], residents[SEV][R] = 1.0, 0.0
    residents[H] = [0.0] * 11
    residents[H][D] = 1.0
    return branching, residents


def six_at_85(residents: list[int]):
    pop = make_population([[i] for i in range(6)], ages=[85] * 6)
    pop.long_term_care[residents] = True
    return pop


def severe_run(pop, branching, residents) -> tuple[Simulation, SimulationResult]:
    """60 days of ``pop`` (2 replicates, no contacts) with everyone seeded in severe symptoms."""
    sim = Simulation(
        pop,
        DiseaseConfig(branching=branching, long_term_care_branching=residents),
        quiet_contacts(),
        SeedingConfig(infections={"severe_symptoms": pop.size}),
        days=60,
        replicates=2,
        seed=3,
    )
    return sim, sim.run()


def test_residents_draw_their_course_from_their_own_table_and_others_from_their_age():
    """Six agents aged 85, three of them residents, no contacts: the first stage drawn for an
    infection and the stage after severe symptoms are exact under the two tables; without a
    residents' table, residents follow the 80+ rows like everyone else."""
    branching, residents = tables()
    pop = six_at_85([0, 2, 4])
    everyone = torch.arange(6)
    own = DiseaseConfig(branching=branching, long_term_care_branching=residents)
    sim = sim_of(pop, [], days=5, disease=own)
    sim.infect(everyone, None, 0)
    assert sim.state.stage.tolist() == [PSEV, A, PSEV, A, PSEV, A]
    sim = sim_of(pop, [], days=5, disease=own)
    sim.infect(everyone, torch.full((6,), SEV), 0)
    assert sim.state.next_stage.tolist() == [H, R, H, R, H, R]
    sim = sim_of(pop, [], days=5, disease=DiseaseConfig(branching=branching))
    sim.infect(everyone, None, 0)
    assert sim.state.stage.tolist() == [A] * 6


def test_a_whole_run_kills_the_residents_alone_in_every_replicate():
    """Seeded in severe symptoms, the three residents go to hospital and die, the others recover,
    in each of two replicates; the run's counts say so (3 deaths a replicate, 3 admissions)."""
    sim, result = severe_run(six_at_85([1, 3, 5]), *tables())
    assert sim.state.stage.view(2, 6).tolist() == [[R, D, R, D, R, D]] * 2
    assert result.stages[-1, :, D].tolist() == [3, 3]
    assert result.stages[-1, :, R].tolist() == [3, 3]
    assert result.admissions.sum(axis=0).tolist() == [3, 3]


def test_a_bad_residents_table_is_named_in_one_line():
    _, residents = tables()
    ragged = [row[:] for row in residents]
    ragged[5] = ragged[5][:10]
    with pytest.raises(ScenarioError) as exc:
        validate({"name": "x", "disease": {"long_term_care_branching": ragged}}, "x.yaml")
    assert str(exc.value) == (
        "x.yaml: invalid scenario: disease.long_term_care_branching: long_term_care_branching must be an 11 x 11 "
        "table; long_term_care_branching[5] has 10 entries, not 11"
    )
    over = [row[:] for row in residents]
    over[SEV][R] = 0.1
    with pytest.raises(
        ScenarioError,
        match=r"long_term_care_branching\[5\] \(long-term-care residents, from severe_symptoms\) sums to 1\.1$",
    ):
        validate({"name": "x", "disease": {"long_term_care_branching": over}}, "x.yaml")
    # Severe symptoms straight to death: a move no age group's rows take, so no dwell time is given.
    home = [row[:] for row in residents]
    home[SEV][H], home[SEV][D] = 0.5, 0.5
    with pytest.raises(ScenarioError, match=r"dwell_times has no entry from severe_symptoms to death$"):
        validate({"name": "x", "disease": {"long_term_care_branching": home}}, "x.yaml")


def test_the_documented_table_gives_the_published_outbreak_figures():
    """docs/model.md's residents' table (from the 2020 outbreak at a King County nursing facility:
    McMichael et al., NEJM 2020; 101 residents' cases, 7 without symptoms, 55 hospitalized, 34
    deaths) is a valid scenario entry whose chances per infection are those figures."""
    text = (ROOT / "docs/model.md").read_text()
    block = re.search(r"```yaml\n(disease:\n  long_term_care_branching:.*?)```", text, re.S)
    assert block is not None, "docs/model.md has no residents' table"
    sc = validate({"name": "x", **yaml.safe_load(block.group(1))}, "x.yaml")
    got = resident_severity(sc.disease)
    assert got is not None
    assert got.symptoms == pytest.approx(94 / 101, abs=5e-4)
    assert got.hospital == pytest.approx(55 / 101, abs=5e-4)
    assert got.death == pytest.approx(34 / 101, abs=5e-4)
    assert resident_severity(DiseaseConfig()) is None


def test_the_summary_counts_the_residents_outcomes_and_their_share_of_deaths():
    """The whole run above, summarized: 3 residents, all infected and dead in both replicates, the
    only deaths (share 1). With two residents, and a 65-year-old whose age group's rows are the
    residents' table, the residents are 2 of 3 deaths. A population without residents has none
    (null), and the by-age table no row for them."""
    from abm.outputs.summary import summarize
    from abm.outputs.summary_table import by_age_table

    branching, residents = tables()

    def summary(pop):
        return summarize(severe_run(pop, branching, residents)[1], {"scenario": "x"}, 100.0)

    s = summary(six_at_85([1, 3, 5]))
    assert s["long_term_care_residents"] == {
        "agents": 3,
        "infected": {"mean": 3.0, "sd": 0.0, "share": 1.0},
        "deaths": {"mean": 3.0, "sd": 0.0},
        "deaths_per_100_infected": 100.0,
        "share_of_deaths": 1.0,
        "by_replicate": {"infected": [3, 3], "deaths": [3, 3]},
    }
    table = by_age_table(s)
    assert table is not None
    assert table.rows[-1] == ["long-term-care residents", "3", "3 ± 0", "100.0%", "3 ± 0", "100.0"]
    assert table.caption.endswith("residents are counted in their age groups too, and are 100.0% of the deaths")
    branching[6] = residents
    pop = make_population([[i] for i in range(6)], ages=[85, 85, 85, 65, 85, 85])
    pop.long_term_care[[1, 5]] = True
    s = summary(pop)
    assert s["long_term_care_residents"]["deaths"] == {"mean": 2.0, "sd": 0.0}
    assert s["long_term_care_residents"]["share_of_deaths"] == 2 / 3
    s = summary(make_population([[i] for i in range(6)], ages=[85] * 6))
    assert s["long_term_care_residents"] is None
    assert [r[0] for r in by_age_table(s).rows][-1] == "80+"


def test_a_facilitys_staff_stand_between_its_residents_on_the_ring():
    """A facility of 2 staff (ids 0, 1) and 8 residents (2-9, whose ids come last, as in a drawn
    population): each kind is spread evenly over the ring, in home order (staff at 1/4 and 3/4,
    residents at 1/16, 3/16, ...), where home order put the 2 staff side by side. A group without
    residents keeps home order."""
    from abm.engine.contacts import ring_order

    pop = make_population([[i] for i in range(10)], groups=[list(range(10))])
    assert ring_order(pop).tolist() == list(range(10))
    pop.long_term_care[2:] = True
    assert ring_order(pop).tolist() == [2, 3, 0, 4, 5, 6, 7, 1, 8, 9]


def test_in_king_county_every_staff_member_has_residents_for_ring_neighbours(king_county):
    """On a drawn population (20,000 agents), every facility's staff are fewer than its residents
    (9 residents a staff member), so spread evenly each staff member has residents on both sides;
    in home order the staff stood in one arc and only its two ends touched a resident."""
    from abm.engine.contacts import ring_order
    from abm.populations import build_population

    pop = build_population(king_county, 20_000, seed=1)
    order = ring_order(pop)
    group = pop.group[order]
    care = pop.categories.index("LONG_TERM_CARE")
    facilities = np.flatnonzero(pop.group_category == care)
    assert facilities.size > 0
    for f in facilities:
        ring = order[group == f]
        resident = pop.long_term_care[ring]
        staff = np.flatnonzero(~resident)
        assert 0 < staff.size < resident.sum()
        assert resident[(staff - 1) % ring.size].all() and resident[(staff + 1) % ring.size].all()
