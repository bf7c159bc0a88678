"""Scenario loading on tiny hand-written files: ``extends:`` chains (mappings merge key by key,
lists are replaced, a circular chain is refused) and ``--set`` key paths and values."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from abm.scenario import ScenarioError, apply_set, load_raw


def test_extends_merges_mappings_key_by_key_and_replaces_lists(tmp_path: Path) -> None:
    """A file that extends another changes only the keys it names within a section; a list it
    gives replaces the base's list as a whole (map days [3] are [3], not [10, 20, 3]); the base's
    name is not inherited."""
    (tmp_path / "base.yaml").write_text(
        "name: base\nsimulation: {days: 30, seed: 5}\noutputs: {map_days: [10, 20]}\n"
        "contacts: {community: {mean_contacts: [1, 2, 3], weight: 0.4}}\n"
    )
    (tmp_path / "child.yaml").write_text(
        "extends: base.yaml\nsimulation: {days: 8}\noutputs: {map_days: [3]}\n"
        "contacts: {community: {mean_contacts: [4]}}\n"
    )
    assert load_raw(tmp_path / "child.yaml") == {
        "simulation": {"days": 8, "seed": 5},
        "outputs": {"map_days": [3]},
        "contacts": {"community": {"mean_contacts": [4], "weight": 0.4}},
    }


def test_a_circular_extends_chain_is_refused_naming_the_chain(tmp_path: Path) -> None:
    """a.yaml extends b.yaml, which extends a.yaml: one message naming the chain (not Python's
    recursion error); a file that extends itself likewise."""
    a, b, itself = tmp_path / "a.yaml", tmp_path / "b.yaml", tmp_path / "self.yaml"
    a.write_text("extends: b.yaml\nname: a\n")
    b.write_text("extends: a.yaml\n")
    itself.write_text("extends: self.yaml\n")
    with pytest.raises(ScenarioError) as caught:
        load_raw(a)
    assert str(caught.value) == f"{a}: extends: circular chain {a} -> {b} -> {a}"
    with pytest.raises(ScenarioError, match=r"self\.yaml: extends: circular chain .*self\.yaml -> .*self\.yaml$"):
        load_raw(itself)


def test_a_set_value_may_hold_an_equals_sign() -> None:
    """--set splits at the first '=': the key is before it, everything after is the value."""
    assert apply_set({}, "description=R=1.5 with masks") == {"description": "R=1.5 with masks"}
    assert apply_set({}, "simulation.days=9") == {"simulation": {"days": 9}}


def test_a_set_list_index_may_have_several_digits() -> None:
    """A list item is reached by any whole-number index, in brackets or dotted: item 11 of a
    list of 12 (a long list of contact changes), not a refusal of '[11]'."""
    changes = [{"community": 1.0} for _ in range(12)]
    data = {"interventions": {"contact_multipliers": {"changes": changes}}}
    for key in ("changes[11]", "changes.11"):
        out = apply_set(data, f"interventions.contact_multipliers.{key}.community=0.5")
        got = out["interventions"]["contact_multipliers"]["changes"]
        assert got == [*changes[:11], {"community": 0.5}]
    assert changes[11] == {"community": 1.0}  # the input is untouched


NI = Path(__file__).resolve().parents[1] / "scenarios/king_county/no_intervention.yaml"


def test_the_scenarios_seed_draws_both_the_population_and_the_epidemic() -> None:
    """simulation.seed is the seed of the population and of the runs: the same seed gives the same
    agents and the same epidemic, another seed other agents, and on the same agents another
    epidemic; the replicates of one run differ from each other."""
    from abm.populations import load_region
    from abm.runs import population_of, resolve, simulation_of

    def scenario(seed: int):
        return resolve(NI, {"agents": 800, "days": 12, "replicates": 2, "seed": seed})

    three, four = scenario(3), scenario(4)
    region = load_region(three.population.region)
    agents = population_of(three, region)
    assert (population_of(three, region).age == agents.age).all()
    assert (population_of(four, region).age != agents.age).any()

    def epidemic(sc) -> np.ndarray:
        return simulation_of(sc, agents).run().new_by_tract.sum(axis=2)  # [day, replicate]

    same, again, other = epidemic(three), epidemic(three), epidemic(four)
    assert (same == again).all()
    assert (same != other).any()
    assert (same[:, 0] != same[:, 1]).any()  # replicates differ


def test_the_resolved_scenario_names_only_the_interventions_that_are_on(tmp_path: Path) -> None:
    """scenario.resolved.yaml leaves out an intervention that is off (as absent it stays off):
    written as `testing: null` it re-created the run but `abm validate` and `abm run` of it said
    "has no value, so testing is off" for every intervention the scenario does not use."""
    from typer.testing import CliRunner

    from abm.cli import app
    from abm.scenario import load_scenario

    sc = load_scenario(Path(__file__).resolve().parents[1] / "scenarios/king_county/vacc.yaml")
    written = yaml.safe_load(sc.resolved_yaml())
    assert list(written["interventions"]) == ["vaccination"]
    (tmp_path / "resolved.yaml").write_text(sc.resolved_yaml())
    assert load_scenario(tmp_path / "resolved.yaml") == sc
    result = CliRunner().invoke(app, ["validate", str(tmp_path / "resolved.yaml")])
    assert result.exit_code == 0 and "has no value" not in result.output, result.output


def test_each_reader_of_a_region_gets_its_own_tract_table() -> None:
    """A region folder is read once while unchanged (load_region caches it); a caller that changes
    its tract table does not change what the next caller reads."""
    from abm.populations import load_region

    first = load_region("king_county")
    lat = float(first.tracts.loc[0, "lat"])
    first.tracts.loc[0, "lat"] = 0.0
    first.tracts.loc[len(first.tracts)] = first.tracts.iloc[0]  # a row more, in place
    assert len(first.tracts) == 398
    again = load_region("king_county")
    assert float(again.tracts.loc[0, "lat"]) == lat and len(again.tracts) == 397


def test_the_capacities_a_run_uses_are_the_regions_unless_given() -> None:
    """with_capacity fills each of the hospital and ICU capacities the scenario leaves out with
    the region's figure (King County: 55 and 6.1 per 100,000) and keeps a value it gives."""
    from abm.scenario import validate

    both = validate({"name": "x"}, "x.yaml").with_capacity().outputs
    assert (both.hospital_beds_per_100k, both.icu_beds_per_100k) == (55.0, 6.1)
    given = validate({"name": "x", "outputs": {"icu_beds_per_100k": 3.5}}, "x.yaml").with_capacity().outputs
    assert (given.hospital_beds_per_100k, given.icu_beds_per_100k) == (55.0, 3.5)
    with pytest.raises(ScenarioError, match=r"outputs\.icu_beds_per_100k: 0 is not allowed"):
        validate({"name": "x", "outputs": {"icu_beds_per_100k": 0}}, "x.yaml")


def test_vacc_budgets_description_gives_the_budget_for_the_agents_it_was_set_for_and_for_the_county() -> None:
    """vacc_budget's 124 doses per 100,000 a day cost the thesis's $0.42M over 170 days for its
    100,000 agents; for King County's residents the same rate costs about $9.5M. The description,
    shown in the comparison's report beside the runs' costs in the region, said only "(the $0.42M
    budget)", which read as the county's budget next to a county cost of $9.5M."""
    from abm.populations import load_region
    from abm.scenario import load_scenario

    sc = load_scenario(Path(__file__).resolve().parents[1] / "scenarios/king_county/vacc_budget.yaml")
    vacc = sc.interventions.vaccination
    per_100k = vacc.daily_doses_per_100k * (sc.simulation.days - vacc.start_day) * vacc.price_per_dose
    county = per_100k * load_region(sc.population.region).figures.population / 1e5
    assert (round(per_100k), round(county, -5)) == (421_600, 9_500_000)
    assert f"${per_100k / 1e6:.2f}M for its 100,000 agents" in sc.description
    assert f"about ${county / 1e6:.1f}M for King County" in sc.description
