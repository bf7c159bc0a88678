"""Age ranges in a vaccination priority list ("65+", "65-74"): who is vaccinated first, in what
order, with a fixed dose budget; exact where the population's ages allow, refused where they do
not (the reference population knows ten-year groups only)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import make_population, sim_of
from typer.testing import CliRunner

from abm.cli import app
from abm.interventions.vaccination import Vaccination, VaccinationConfig, priority_classes
from abm.scenario import ScenarioError, validate

ROOT = Path(__file__).resolve().parents[1]
VACC = ROOT / "scenarios/king_county/vacc.yaml"
REFERENCE_VACC = ROOT / "scenarios/reference/vacc.yaml"
runner = CliRunner()


def text(result) -> str:
    return " ".join(result.output.split())


def one_agent_per_year():
    """40 agents, one of each age 55..94 (agent i is 55 + i), each in a household of their own;
    ages exact to the year (no age bands)."""
    return make_population([[i] for i in range(40)], ages=list(range(55, 95)))


def test_75_and_over_then_65_and_over_doses_them_class_by_class_with_a_fixed_budget():
    """[75+, 65+] at 4 first doses a day, kept no longer than their day: the 20 agents of 75-94 on
    days 0-4 (4 a day), the 10 of 65-74 on days 5-7 (4, 4, then the last 2), the 10 of 55-64
    never. No second doses (no one returns)."""
    pop = one_agent_per_year()
    cfg = VaccinationConfig(start_day=0, daily_doses=4, priority=["75+", "65+"], dose2_dropout=1.0, shelf_life_days=0)
    vacc = Vaccination(cfg)
    sim_of(pop, [vacc], days=12).run()
    day = vacc.dose1_day[:40].numpy()
    age = pop.age
    assert np.bincount(day[age >= 75], minlength=5).tolist() == [4, 4, 4, 4, 4]
    assert np.bincount(day[(age >= 65) & (age < 75)] - 5).tolist() == [4, 4, 2]
    assert (vacc.doses[:40][age < 65] == 0).all()
    assert int(vacc.given.sum()) == 30  # 12 days x 4 doses: 30 taken, the rest expired unused


def test_a_closed_range_and_a_group_mix_in_one_list():
    """[65-69, 8, 6]: ages 65-69 first, then 80+, then the rest of 60-69 (60-64); 70-79 and
    under 60 in no entry."""
    pop = one_agent_per_year()
    rank = priority_classes(pop, ["65-69", 8, 6])
    by_age = dict(zip(pop.age.tolist(), rank.tolist(), strict=True))
    assert [by_age[a] for a in (65, 69, 80, 94, 60, 64, 70, 79, 55, 59)] == [0, 0, 1, 1, 2, 2, -1, -1, -1, -1]


def test_a_range_that_cuts_a_band_of_the_population_is_refused_where_classes_are_drawn():
    """A population built in five-year bands cannot tell 67 from 65: '67+' is refused (the
    Python route, for a population built by hand), '65+' is exact."""
    pop = one_agent_per_year()
    pop.age_bands = (*((lo, lo + 4) for lo in range(0, 90, 5)), (90, 94))
    assert (priority_classes(pop, ["65+"]) == np.where(pop.age >= 65, 0, -1)).all()
    with pytest.raises(ValueError, match=r"'67\+' is not allowed: .* 67 falls inside its band 65-69 .* 65 or 70$"):
        priority_classes(pop, ["67+"])


@pytest.mark.parametrize(
    ("priority", "message"),
    [
        (["65+", "75+"], "'75+' comes after '65+', which takes all its ages"),
        ([8, "80+"], "'80+' comes after 8, which takes all its ages"),
        (["70-74", "75-79", 7], "7 comes after '70-74', '75-79', which take all its ages"),
        (["74-65"], "'74-65' is an empty range: its first age is past its last (write 65-74)"),
        (["200+"], "'200+' names ages past 120"),
        (["65 +"], "an age range in years ('65+': 65 and over; '65-74': 65 to 74), long_term_care_residents"),
    ],
)
def test_a_malformed_or_empty_age_entry_is_refused(priority, message):
    with pytest.raises(ScenarioError, match=r"interventions\.vaccination\.priority") as err:
        validate({"name": "x", "interventions": {"vaccination": {"priority": priority}}}, "x.yaml")
    assert message in " ".join(str(err.value).split())


def test_king_county_takes_75_and_over_then_65_and_over_and_shows_it(tmp_path):
    """King County's five-year bands start at 65 and 75: the list validates, --show prints it as
    written and reads back the same; 67+ cuts its band 65-69 and is refused, as is 95+ (its oldest
    band ends at 94), with exit code 2 and nothing written."""
    setting = "interventions.vaccination.priority=[75+, 65+, 6]"
    shown = runner.invoke(app, ["validate", str(VACC), "--set", setting, "--show"])
    assert shown.exit_code == 0, shown.output
    assert "priority: [75+, 65+, 6]" in shown.stdout
    assert yaml.safe_load(shown.stdout)["interventions"]["vaccination"]["priority"] == ["75+", "65+", 6]
    for entry, why in [
        ("67+", "67 falls inside its band 65-69"),
        ("90-94", "90 falls inside its band 85-94"),
        ("95+", "has no agent that old (its oldest age band is 85-94)"),
    ]:
        out = tmp_path / entry
        result = runner.invoke(
            app, ["run", str(VACC), "--set", f"interventions.vaccination.priority=[{entry}]", "--out", str(out)]
        )
        assert result.exit_code == 2 and f"interventions.vaccination.priority: '{entry}' is not allowed" in text(result)
        assert why in text(result) and not out.exists()


def test_the_reference_population_refuses_a_range_inside_its_ten_year_groups(tmp_path):
    """The reference population knows ten-year groups only (an agent's age is its group's first
    year): 65+ would be rounded to 70+ without a word; it is refused in one line naming the
    group it cuts, while 70+ and 60-69 are whole groups."""
    setting = "interventions.vaccination.priority=[75+, 65+]"
    result = runner.invoke(app, ["validate", str(REFERENCE_VACC), "--set", setting])
    assert result.exit_code == 2
    assert text(result).endswith(
        "interventions.vaccination.priority: '75+' is not allowed: the reference population (population.kind: "
        "reference) knows its agents' ages only by age band, and 75 falls inside its band 70-79 (an agent's year "
        "there tells no more than the band), so the range would be rounded to bands; start and end it where a band "
        "starts: 70 or 80"
    )
    assert result.output.count("error:") == 1
    ok = runner.invoke(
        app, ["validate", str(REFERENCE_VACC), "--set", "interventions.vaccination.priority=[70+, 60-69]"]
    )
    assert ok.exit_code == 0, ok.output


def test_the_schema_reference_documents_age_ranges():
    from abm.outputs.schema_doc import scenario_reference

    doc = " ".join(scenario_reference().split())
    assert "a list may also name age ranges in years, 65+ (65 and over) or 65-74 (65 to 74)" in doc
    assert "[75+, 65+, 6] those of 75 and over, then of 65-74, then of 60-64" in doc


def test_the_documented_example_runs_as_documented():
    """README and docs/model.md give [75+, 65+, 6, 5, 4, 3, 2, 1, 0] as "75 and over, then 65-74,
    then 60-64 and the younger groups": on a King County population every agent 60 and over is
    in the class the text says."""
    from abm.populations import build_population, load_region

    example = "priority: [75+, 65+, 6, 5, 4, 3, 2, 1, 0]"
    for doc in ("README.md", "docs/model.md"):
        assert example in " ".join((ROOT / doc).read_text().split()), doc
    priority = yaml.safe_load(example)["priority"]
    sc = validate({"name": "x", "interventions": {"vaccination": {"priority": priority}}}, "x.yaml")
    pop = build_population(load_region("king_county"), 3000, seed=1)
    rank = priority_classes(pop, sc.interventions.vaccination.priority)
    expected = np.select([pop.age >= 75, pop.age >= 65, pop.age >= 60], [0, 1, 2], 9 - pop.age_group.astype(int) - 1)
    assert (rank == expected).all()
