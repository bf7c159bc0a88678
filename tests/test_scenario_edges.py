"""Edges of what turns a user's file and options into a scenario, where a slip would run a
different scenario than the one written, or blame the wrong thing: each test pins one boundary
or one direction exactly, on tiny inputs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from abm.scenario import (
    ScenarioError,
    apply_set,
    load_scenario,
    overlaps,
    read_scenario_data,
    replaced_keys,
    validate,
)
from abm.sweep import SweepPlan, parse_axes, parse_axis


def small(**sections: Any) -> dict[str, Any]:
    """A scenario of 50 agents over 10 days with ``sections`` merged in."""
    data: dict[str, Any] = {"name": "t", "population": {"agents": 50}, "simulation": {"days": 10}}
    for key, value in sections.items():
        data[key] = {**data.get(key, {}), **value}
    return data


def test_seeding_every_agent_is_allowed_but_not_one_more() -> None:
    """Initial infections equal to the agents are a valid (if extreme) start; one more is refused."""
    assert validate(small(seeding={"infections": {"asymptomatic": 50}}), "s").seeding.infections == {"asymptomatic": 50}
    with pytest.raises(ScenarioError, match=r"seeding\.infections: 51 infections but population\.agents is 50"):
        validate(small(seeding={"infections": {"asymptomatic": 51}}), "s")


def test_the_last_simulated_day_is_the_last_allowed_for_maps_and_seeding() -> None:
    """Ten simulated days are days 0..9: a map or the seeding on day 9 is allowed, on day 10 refused
    (it would never happen)."""
    assert validate(small(outputs={"map_days": [9]}), "s").outputs.map_days == [9]
    with pytest.raises(ScenarioError, match=r"outputs\.map_days: \[10\] not allowed; .*\(0\.\.9\)"):
        validate(small(outputs={"map_days": [10]}), "s")
    assert validate(small(seeding={"day": 9}), "s").seeding.day == 9
    with pytest.raises(ScenarioError, match=r"seeding\.day: 10 is not within the 10 simulated days \(0\.\.9\)"):
        validate(small(seeding={"day": 10}), "s")


def test_an_option_cannot_set_a_key_inside_extends() -> None:
    """``--set extends.x=...`` is refused with the message that says why (the base is read before
    the options), as ``--set extends=...`` is."""
    for key in ("extends", "extends.path"):
        with pytest.raises(ScenarioError, match=rf"^--set: {key}: not allowed; a scenario's base is read"):
            apply_set({"name": "t"}, f"{key}=base.yaml")


def test_a_mapping_given_to_an_option_names_the_keys_it_drops() -> None:
    """``seeding={day: 4}`` replaces the file's seeding section: the keys dropped are the file's
    keys the value leaves out, not the value's keys the file lacks."""
    data = {"seeding": {"day": 1, "infections": {"asymptomatic": 5}}}
    assert replaced_keys(data, "seeding={day: 4, infections_per_100k: {asymptomatic: 1}}") == ["infections"]


def test_key_paths_overlap_only_at_a_whole_component() -> None:
    """A key path holds another only up to a dot: ``seeding`` holds ``seeding.day``, but
    ``a.day`` does not hold ``a.days``."""
    assert overlaps("seeding", "seeding.day") and overlaps("seeding.day", "seeding")
    assert overlaps("changes[0]", "changes.0.household")
    assert not overlaps("a.day", "a.days") and not overlaps("a.days", "a.day")


def test_sweeping_a_section_and_a_key_within_it_is_refused_in_either_order() -> None:
    """One of two sweeps that set the same value would silently override the other."""
    for first, second in (
        ("seeding.day=1,2", "seeding={day: 3},{day: 4}"),
        ("seeding={day: 3},{day: 4}", "seeding.day=1,2"),
    ):
        with pytest.raises(ScenarioError, match=r"set the same values; sweep one of them"):
            parse_axes([first, second])


def test_a_variants_label_shows_the_values_as_the_user_wrote_them() -> None:
    """The label names each value as typed (``0.50``, ``0.250``), not as YAML reads it (0.5, 0.25)."""
    axis = parse_axis("contacts.community.weight=0.50,0.250")
    plan = SweepPlan(
        "s", [axis], 1, [], [{"values": [v], "texts": [t]} for v, t in zip(axis.values, axis.texts, strict=True)]
    )
    assert [plan.label(0), plan.label(1)] == ["contacts.community.weight=0.50", "contacts.community.weight=0.250"]
    assert plan.label(0, short=True) == "weight=0.50"


def test_a_bad_value_from_an_option_is_not_blamed_on_the_base_file(tmp_path: Path) -> None:
    """A file whose base sets simulation.days: a bad ``--set simulation.days`` is the option's,
    so the message names no file of the chain as where it was set; without the option, a bad value
    in the base is named as set there."""
    (tmp_path / "base.yaml").write_text("simulation: {days: 10}\npopulation: {agents: 50}\n")
    (tmp_path / "child.yaml").write_text("extends: base.yaml\nname: child\n")
    with pytest.raises(ScenarioError) as caught:
        load_scenario(tmp_path / "child.yaml", ["simulation.days=0"])
    assert "simulation.days: 0 is not allowed" in str(caught.value) and "set in" not in str(caught.value)
    (tmp_path / "base.yaml").write_text("simulation: {days: 0}\npopulation: {agents: 50}\n")
    with pytest.raises(ScenarioError, match=r"simulation\.days: 0 is not allowed.*\(set in .*base\.yaml\)"):
        load_scenario(tmp_path / "child.yaml")


def test_a_name_taken_from_the_file_name_is_not_blamed_on_the_base(tmp_path: Path) -> None:
    """A base's name is not inherited, so a file without a name is named after itself: a file
    name that cannot name the run is the file's, not the base's (which has a name of its own)."""
    (tmp_path / "base.yaml").write_text("name: base\nsimulation: {days: 10}\npopulation: {agents: 50}\n")
    (tmp_path / "my study.yaml").write_text("extends: base.yaml\n")
    with pytest.raises(ScenarioError) as caught:
        load_scenario(tmp_path / "my study.yaml")
    assert "name: 'my study' is not allowed" in str(caught.value) and "set in" not in str(caught.value)


def test_a_mean_peak_day_half_way_between_two_days_is_dated_by_the_later() -> None:
    """The date of a mean peak day is the day rounded half up (2.5: day 3), as the sweep's table
    says, not to the even day (Python's round gives day 2)."""
    from datetime import date

    from abm.sweep import _date_of_day

    start = date(2020, 3, 1)
    assert [_date_of_day(start, d, rounded=True) for d in (2.5, 3.5, 2.49)] == [
        "2020-03-04",
        "2020-03-05",
        "2020-03-03",
    ]
    assert _date_of_day(start, 2.9) == "2020-03-03"


def test_a_data_file_a_base_names_is_found_beside_the_file_that_extends_it(tmp_path: Path) -> None:
    """A base in another folder names an observed-data file by a relative path that is not beside
    the base but beside the file that extends it: the file there is the one read, by its full path
    (so the run finds it from any working folder)."""
    (tmp_path / "bases").mkdir()
    (tmp_path / "bases" / "base.yaml").write_text("calibration: {data: observed.csv}\n")
    (tmp_path / "observed.csv").write_text("date,deaths\n")
    (tmp_path / "child.yaml").write_text("extends: bases/base.yaml\n")
    data = read_scenario_data(tmp_path / "child.yaml")
    assert data == {"calibration": {"data": str((tmp_path / "observed.csv").resolve())}, "name": "child"}


def test_an_override_of_zero_is_applied() -> None:
    """``--seed 0`` is a seed like any other (simulation.seed allows 0): it replaces the file's
    seed rather than being taken for an option not given."""
    from abm.overrides import resolve

    sc = resolve(small(simulation={"seed": 5}), {"seed": 0, "agents": None})
    assert (sc.simulation.seed, sc.population.agents) == (0, 50)


def test_a_device_override_is_read_as_text() -> None:
    """``--device on`` is named as given, not as YAML's true."""
    from abm.overrides import resolve

    with pytest.raises(ScenarioError, match=r"simulation\.device: 'on' is not allowed: write cpu, cuda or cuda:N"):
        resolve(small(), {"device": "on"})


def test_a_bundled_data_name_stays_bundled_beside_a_file_of_that_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """calibration.data: king_county_2020 names the bundled series even where the working folder
    holds a file called king_county_2020: it is not taken for that file."""
    from abm.scenario import with_full_data_paths

    monkeypatch.chdir(tmp_path)
    (tmp_path / "king_county_2020").write_text("date,deaths\n")
    (tmp_path / "mine.csv").write_text("date,deaths\n")
    assert with_full_data_paths({"calibration": {"data": "king_county_2020"}}) == {
        "calibration": {"data": "king_county_2020"}
    }
    assert with_full_data_paths({"calibration": {"data": "mine.csv"}}) == {
        "calibration": {"data": str(tmp_path / "mine.csv")}
    }


def test_a_number_too_large_for_32_bit_floats_is_refused_either_side_of_0() -> None:
    """-1e39 is as far beyond a 32-bit float as 1e39."""
    from abm.key_paths import not_finite

    assert [m.split(":")[0] for m in not_finite({"a": {"b": -1e39, "c": 1e39, "d": -3e38}})] == ["a.b", "a.c"]


def test_a_priority_group_that_shares_one_age_with_a_band_cuts_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Group 6 (ages 60-69) shares age 60 with the band 50-60 and age 69 with 69+: both are cut
    (the note names them); with bands 60-69, none."""
    from types import SimpleNamespace

    import abm.named_settings as named

    monkeypatch.setattr(named, "population_settings", lambda scenario, region: ([], False, "Testland"))
    scenario = SimpleNamespace(interventions=SimpleNamespace(vaccination=SimpleNamespace(enabled=True, priority=[6])))
    monkeypatch.setattr(
        named, "population_age_bands", lambda scenario, region: ((0, 49), (50, 60), (61, 68), (69, None))
    )
    notes = named.priority_group_notes(scenario, None)  # type: ignore[arg-type]
    assert len(notes) == 1 and "6 (ages 60-69) cuts the age bands 50-60, 69+ of Testland" in notes[0]
    monkeypatch.setattr(named, "population_age_bands", lambda scenario, region: ((0, 59), (60, 69), (70, None)))
    assert named.priority_group_notes(scenario, None) == []  # type: ignore[arg-type]


def test_options_apply_in_the_order_given(tmp_path: Path) -> None:
    """A section given whole and then a key within it: the later option wins, as written (the
    other order gives the section's value)."""
    from abm.overrides import resolve

    path = tmp_path / "s.yaml"
    path.write_text("name: s\npopulation: {agents: 50}\nsimulation: {days: 10}\n")
    assert load_scenario(path, ["seeding={day: 2}", "seeding.day=3"]).seeding.day == 3
    assert load_scenario(path, ["seeding.day=3", "seeding={day: 2}"]).seeding.day == 2
    assert resolve(path, sets=["seeding={day: 2}", "seeding.day=3"]).seeding.day == 3


def test_a_key_path_that_is_not_there_has_no_value() -> None:
    """lookup gives None for a path that leaves the data at any step, not what lies around it."""
    from abm.key_paths import lookup

    data = {"a": {"b": 1}, "l": [10, 20]}
    assert (lookup(data, ("a", "b")), lookup(data, ("l", 1))) == (1, 20)
    assert [lookup(data, p) for p in (("x", "b"), ("a", "x"), ("l", 2), ("a", "b", "c"))] == [None] * 4


def test_a_day_written_as_the_start_date_is_day_0_and_the_day_before_is_refused() -> None:
    """simulation.start_date itself is day 0; a date before it has no day."""
    start = {"start_date": "2020-03-01"}
    assert validate(small(simulation=start, seeding={"day": "2020-03-01"}), "s").seeding.day == 0
    with pytest.raises(ScenarioError, match=r"seeding\.day: 2020-02-29 is not allowed: it is before simulation"):
        validate(small(simulation=start, seeding={"day": "2020-02-29"}), "s")


def test_a_swept_list_of_dates_keeps_each_date_as_text() -> None:
    """``--sweep outputs.map_days=[2020-03-05],[2020-03-09]``: dates within a list are kept as
    their text (as a date alone is), for the tables and for reading as days."""
    axis = parse_axis("outputs.map_days=[2020-03-05],[2020-03-09]")
    assert axis.values == (["2020-03-05"], ["2020-03-09"])
