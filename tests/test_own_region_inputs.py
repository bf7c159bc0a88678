"""A region of one's own and a scenario written from scratch, as a newcomer writes them from the
docs (session 38's walk): inputs that were accepted without a word though they could not be
right are refused with one line naming the file, the key and the value, what is allowed, exit
code 2 and nothing written; the notes and docs say what the settings count."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from abm.cli import app
from abm.engine.config import DiseaseConfig
from abm.interventions.config.testing import TestType
from abm.interventions.config.vaccination import VaccinationConfig
from abm.overrides import resolve
from abm.scenario_notes import fixed_counts

runner = CliRunner()

FIGURES = """\
name: Pinecrest County, OR
fips: "41099"
population: 9000
age_bands:
  age_0_19: [0, 19]
  age_20_49: [20, 49]
  age_50_79: [50, 79]
  age_80_plus: [80, 94]
school_enrollment:
  - [5, 17, 0.95]
school_types:
  elementary: [5, 11]
  high: [12, 17]
school_size_brackets: [[20, 200], [201, 600]]
school_size_shares:
  elementary: [0.6, 0.4]
  high: [0.3, 0.7]
pupils_per_staff: 15
employment_rate:
  - [18, 64, 0.75]
sectors:
  LOGGING: 600
  TOURISM: 900
  EDUCATION: 300
  HEALTHCARE: 400
workplace_sizes:
  - [1, 9, 200]
  - [10, 99, 40]
long_term_care:
  residence_rate:
    - [80, 100, 0.08]
  sizes:
    - [20, 60, 1]
  residents_per_staff: 8
hospital_beds_per_100k: 40
"""
COLUMNS = "geoid,name,lat,lon,land_km2,age_0_19,age_20_49,age_50_79,age_80_plus,hh_1,hh_2,hh_3,hh_4,hh_5,hh_6,hh_7up"
TRACTS = [
    "41099000100,Pinecrest,44.45,-123.55,12.5,1500,1900,1400,200,700,900,400,300,120,40,10",
    "41099000200,Riverbend,44.52,-123.40,85.0,900,1100,1000,150,400,600,250,180,70,20,5",
    "41099000300,Summit Ridge,44.62,-123.30,340.0,300,250,200,100,150,200,60,40,15,5,2",
]
SCENARIO = """\
name: pinecrest
population: {region: pinecrest, agents: 600}
simulation: {days: 4, replicates: 1}
contacts: {occupation: {degree: {LOGGING: 6, TOURISM: 8}}}
"""


def county(tmp_path: Path, figures: str = FIGURES, header: str = COLUMNS, rows: list[str] = TRACTS) -> Path:
    """A made-up county of three tracts at ``tmp_path/pinecrest`` and a scenario on it beside it,
    whose path comes back."""
    folder = tmp_path / "pinecrest"
    folder.mkdir()
    (folder / "region.yaml").write_text(figures)
    (folder / "tracts.csv").write_text("\n".join([header, *rows]) + "\n")
    scenario = tmp_path / "pinecrest.yaml"
    scenario.write_text(SCENARIO)
    return scenario


def refused(scenario: Path, tmp_path: Path, *sets: str) -> str:
    """The one line ``abm validate`` and ``abm run`` give ``scenario`` (with ``--set sets``),
    both refusing it with exit code 2, the run writing nothing."""
    options = [x for s in sets for x in ("--set", s)]
    out = tmp_path / "out"
    lines = []
    for command in (["validate"], ["run", "--out", str(out)]):
        result = runner.invoke(app, [command[0], str(scenario), *options, *command[1:]])
        assert result.exit_code == 2, result.output
        lines.append(" ".join(result.output.split()))
    assert not out.exists()
    assert lines[0] == lines[1] and lines[0].startswith("error: ")
    return lines[0]


def test_the_made_up_county_runs(tmp_path):
    """The county the tests below break is a valid one: it validates and runs."""
    scenario = county(tmp_path)
    result = runner.invoke(app, ["run", str(scenario), "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "run" / "summary.json").is_file()


def test_a_tract_column_the_table_does_not_have_is_refused(tmp_path):
    """A column beside the table's own went unread: an age band of tracts.csv that region.yaml's
    age_bands does not name (age_95_plus beside bands ending at 94) left its people out of the
    region without a word."""
    rows = [f"{row},40" for row in TRACTS]
    scenario = county(tmp_path, header=f"{COLUMNS},age_95_plus", rows=rows)
    line = refused(scenario, tmp_path)
    assert line.endswith(
        f"{tmp_path / 'pinecrest' / 'tracts.csv'}: column 'age_95_plus' is not allowed; it would not be read: a "
        "tract table has the columns geoid, name, lat, lon, land_km2, one per age band of region.yaml (age_0_19, "
        "age_20_49, age_50_79, age_80_plus), hh_1, hh_2, hh_3, hh_4, hh_5, hh_6, hh_7up and, optionally, "
        "households; an age band's column needs its entry in region.yaml's age_bands, [first age, last age]"
    ), line


def test_a_misspelt_households_column_is_given_the_name_it_meant(tmp_path):
    rows = [f"{row},2000" for row in TRACTS]
    scenario = county(tmp_path, header=f"{COLUMNS},houshold", rows=rows)
    assert "column 'houshold' is not allowed (did you mean 'households'?); it would not" in refused(scenario, tmp_path)


def test_a_tract_with_households_but_no_residents_is_refused(tmp_path):
    """A tract whose age band columns are all 0 is left out as one without people: with households
    by size its people were lost without a word. A tract with neither is still left out."""
    empty = "41099000400,Lakeside,44.40,-123.45,30.0,0,0,0,0"
    scenario = county(tmp_path, rows=[*TRACTS, f"{empty},120,80,0,0,0,0,0"])
    line = refused(scenario, tmp_path)
    assert line.endswith(
        f"{tmp_path / 'pinecrest' / 'tracts.csv'}: row 5 (tract 41099000400): households (hh_1 120, hh_2 80) with "
        "no residents in the age band columns (age_0_19, age_20_49, age_50_79, age_80_plus, all 0) is not allowed; "
        "give the tract's people by age band, or 0 households for a tract without residents (such a tract is left "
        "out)"
    ), line
    (tmp_path / "pinecrest" / "tracts.csv").write_text("\n".join([COLUMNS, *TRACTS, f"{empty},0,0,0,0,0,0,0"]) + "\n")
    assert runner.invoke(app, ["validate", str(scenario)]).exit_code == 0


def test_school_size_shares_of_no_school_type_are_refused(tmp_path):
    """An entry of school_size_shares whose name is no school type (a misspelt one beside the
    right one, or a type left out of school_types) was never read."""
    figures = FIGURES.replace("  high: [0.3, 0.7]\n", "  high: [0.3, 0.7]\n  hihg_school: [0.5, 0.5]\n")
    line = refused(county(tmp_path, figures=figures), tmp_path)
    assert line.endswith(
        f"{tmp_path / 'pinecrest' / 'region.yaml'}: school_size_shares.hihg_school: [0.5, 0.5] is not allowed; "
        "'hihg_school' is no type of school_types, so its shares would not be read: the entries are the school "
        "types (elementary, high)"
    ), line
    figures = FIGURES.replace("  high: [0.3, 0.7]\n", "  high: [0.3, 0.7]\n  elementry: [0.5, 0.5]\n")
    (tmp_path / "pinecrest" / "region.yaml").write_text(figures)
    assert "elementry: [0.5, 0.5] is not allowed (did you mean 'elementary'?)" in refused(
        tmp_path / "pinecrest.yaml", tmp_path
    )


@pytest.mark.parametrize(
    ("option", "line"),
    [
        (
            "interventions.contact_multipliers.closures=[{from_day: 1, settings: [SCHOOL, AGRICULTURE, MINING]}]",
            "interventions.contact_multipliers.closures[0].settings: ['AGRICULTURE', 'MINING'] not allowed; "
            "Pinecrest County, OR ({region}) has no such settings, so they would close nothing; allowed: SCHOOL, "
            "LONG_TERM_CARE, LOGGING, TOURISM, EDUCATION, HEALTHCARE",
        ),
        (
            "interventions.vaccination.priority=[long_term_care_residents, FOOD, 8, 7]",
            "interventions.vaccination.priority: ['FOOD'] not allowed; Pinecrest County, OR ({region}) has no such "
            "setting, so it would vaccinate no one; allowed: SCHOOL, LONG_TERM_CARE, LOGGING, TOURISM, EDUCATION, "
            "HEALTHCARE, long_term_care_residents",
        ),
    ],
)
def test_a_king_county_sector_the_region_lacks_is_refused_in_closures_and_priority(tmp_path, option, line):
    """contacts.occupation.degree keeps King County's sectors as defaults, so a closure of FOOD or a
    priority entry AGRICULTURE passed on a region without them, and closed or vaccinated no one."""
    scenario = county(tmp_path)
    assert refused(scenario, tmp_path, option).endswith(line.format(region=tmp_path / "pinecrest" / "region.yaml"))


def test_the_regions_own_settings_and_care_homes_are_allowed_where_it_has_them(tmp_path):
    scenario = county(tmp_path)
    sets = [
        "interventions.contact_multipliers.closures=[{from_day: 1, settings: [SCHOOL, TOURISM, LONG_TERM_CARE]}]",
        "interventions.vaccination.priority=[long_term_care_residents, HEALTHCARE, LOGGING, 8, 7]",
    ]
    result = runner.invoke(app, ["validate", str(scenario), *[x for s in sets for x in ("--set", s)]])
    assert result.exit_code == 0, result.output
    # a region without care homes has neither the facilities nor their residents
    no_care = FIGURES.replace("    - [80, 100, 0.08]\n", "").replace("residence_rate:\n", "residence_rate: []\n")
    (tmp_path / "pinecrest" / "region.yaml").write_text(no_care)
    line = refused(scenario, tmp_path, sets[1])
    assert line.endswith(
        "interventions.vaccination.priority: ['long_term_care_residents'] not allowed; Pinecrest County, OR "
        f"({tmp_path / 'pinecrest' / 'region.yaml'}) has no such setting, so it would vaccinate no one; allowed: "
        "SCHOOL, LOGGING, TOURISM, EDUCATION, HEALTHCARE"
    ), line


def test_a_misspelt_sector_in_the_contact_degrees_is_given_the_one_it_meant(tmp_path):
    scenario = county(tmp_path)
    line = refused(scenario, tmp_path, "contacts.occupation.degree={LOGING: 6, TOURISM: 8}")
    assert "contacts.occupation.degree: ['LOGING'] not allowed ('LOGING': did you mean 'LOGGING'?); the" in line


def test_caching_a_boundary_file_that_is_no_census_zip_is_refused(tmp_path, monkeypatch):
    """`abm data boundaries --from` a GeoJSON of one's own tracts: it was copied and read as a zip
    ('not a readable zip file'), without saying where such a file goes."""
    county(tmp_path)
    own = tmp_path / "tracts.geojson"
    own.write_text('{"type": "FeatureCollection", "features": []}')
    monkeypatch.setenv("ABM_CACHE_DIR", str(tmp_path / "cache"))
    result = runner.invoke(app, ["data", "boundaries", "--region", str(tmp_path / "pinecrest"), "--from", str(own)])
    assert result.exit_code == 2
    assert " ".join(result.output.split()) == (
        f"error: {own}: a .geojson file is not allowed; the cache takes a Census tract boundary zip "
        "(cb_2019_41_tract_500k.zip); a boundary file of your own tracts (.geojson, .json, .shp or .zip, with a "
        "GEOID for each tract) goes in the scenario's outputs.boundaries"
    )
    assert not (tmp_path / "cache").exists()


def test_agents_with_test_and_interview_capacities_gets_a_note(tmp_path):
    """Capacities are counts for the simulated agents, as daily_doses is: with --agents, a note
    gives their share (2% of 100,000 agents a day is 20% of 10,000)."""
    scenario = tmp_path / "capacity.yaml"
    scenario.write_text(
        "name: capacity\nseeding: {infections_per_100k: {asymptomatic: 50}}\ninterventions:\n  testing:\n"
        "    tests:\n      - {name: rt_pcr, sensitivity: 0.99, result_delay_days: [1], result_delay_probs: [1],\n"
        "         daily_capacity: 2000}\n  manual_tracing: {daily_capacity: 30}\n"
    )
    assert fixed_counts(resolve(scenario, {"agents": 10_000}), 100_000) == [
        "interventions.testing.tests[0].daily_capacity gives 2000 rt_pcr tests a day whatever the population: "
        "20,000 per 100,000 at 10,000 agents, against 2,000 at the file's 100,000",
        "interventions.manual_tracing.daily_capacity gives 30 interviews a day whatever the population: 300 per "
        "100,000 at 10,000 agents, against 30 at the file's 100,000",
    ]


def test_the_docs_say_what_a_scenario_from_scratch_runs_with_and_counts():
    """A scenario written from scratch runs at the thesis's rate, not the King County scenarios';
    testing screens no one; daily_doses and test capacities count for the simulated agents."""
    rate = DiseaseConfig.model_fields["transmission_rate"].description
    assert "King County scenarios set 3.137" in rate and "runs at the thesis's 5.02" in rate
    assert "no screening" in TestType.model_fields["given_to"].description
    assert "for the simulated agents" in TestType.model_fields["daily_capacity"].description
    doses = VaccinationConfig.model_fields["daily_doses"].description
    assert "not the region's residents" in doses and "daily_doses_per_100k 222" in doses
    assert round(5000 / 2_252_782 * 1e5) == 222


def test_more_agents_than_the_regions_residents_gets_a_note_in_numbers(tmp_path):
    """More agents than the region's 9,000 residents ran at a scale below 1 without a word (the
    region's figures a fraction of the agents'); abm validate, run and sweep now say so in
    numbers, a sweep naming the variants it holds for, and the run's scaled figures use that factor."""
    scenario = county(tmp_path)
    note = (
        "note: population.agents: 15,000 agents is more than the 9,000 residents of Pinecrest County, OR: each "
        "agent stands for 0.6 residents, and figures for the region scale down (x 0.6) from the agents' own"
    )
    checked = runner.invoke(app, ["validate", str(scenario), "--set", "population.agents=15000"])
    assert checked.exit_code == 0 and note in " ".join(checked.stderr.split()), checked.output
    assert "residents" not in runner.invoke(app, ["validate", str(scenario)]).stderr  # 600 agents: no note
    ran = runner.invoke(app, ["run", str(scenario), "--agents", "15000", "--days", "1", "--out", str(tmp_path / "r")])
    assert ran.exit_code == 0 and note in " ".join(ran.stderr.split()), ran.output
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["region_scaled"]["factor"] == 0.6
    swept = runner.invoke(
        app,
        ["sweep", str(scenario), "--sweep", "population.agents=600,15000", "--days", "1", "--out", str(tmp_path / "s")],
    )
    assert swept.exit_code == 0, swept.output
    assert f"{note} (variant agents=15000)" in " ".join(swept.stderr.split())
    assert "600 agents is more" not in swept.stderr


def test_a_priority_age_group_that_cuts_the_regions_age_bands_gets_a_note(tmp_path):
    """Pinecrest counts its residents in bands 0-19, 20-49, 50-79 and 80-94. A priority list's
    '65+' that cuts a band is refused; its plain groups 6 (60-69) and 5 (50-59), which cut the
    band 50-79 alike, were split by the agents' drawn ages without a word. `abm validate`, `abm run`
    and `abm sweep` now note each, naming the entry and the band; group 8 (80+, the whole band
    80-94) and a range of whole bands ('50-79') get none, nor does King County's [8, 7, 6]."""
    scenario = county(tmp_path)
    setting = "interventions.vaccination.priority=[8, 6, 5, 50-79]"
    notes = [
        f"note: interventions.vaccination.priority: {group} (ages {ages}) cuts the age band 50-79 of Pinecrest "
        f"County, OR ({tmp_path / 'pinecrest' / 'region.yaml'}), which counts residents by band only: the class "
        f"holds the agents whose age, drawn uniformly within the band, falls in {ages}; for a class of whole bands, "
        "give an age range that starts and ends where the bands do"
        for group, ages in ((6, "60-69"), (5, "50-59"))
    ]
    swept = ["--sweep", "disease.transmission_rate=3,4"]
    for args in (
        ["validate", str(scenario), "--set", setting],
        ["run", str(scenario), "--set", setting, "--out", str(tmp_path / "run")],
        ["sweep", str(scenario), "--set", setting, *swept, "--out", str(tmp_path / "sw")],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        said = " ".join(result.stderr.split())
        assert all(note in said for note in notes), said
        assert said.count("interventions.vaccination.priority:") == 2  # none for 8 or '50-79'
    whole = runner.invoke(app, ["validate", str(scenario), "--set", "interventions.vaccination.priority=[8, 50-79]"])
    assert whole.exit_code == 0 and "cuts the age" not in whole.stderr, whole.output
    kc = runner.invoke(
        app, ["validate", "scenarios/king_county/vacc.yaml", "--set", "interventions.vaccination.priority=[8, 7, 6]"]
    )
    assert kc.exit_code == 0 and "cuts the age" not in kc.stderr, kc.output


def test_as_many_agents_as_the_regions_residents_get_no_note(tmp_path):
    """9,000 agents for the 9,000 residents: each agent stands for one resident and nothing scales
    down, so no note says there are more agents than residents."""
    checked = runner.invoke(app, ["validate", str(county(tmp_path)), "--set", "population.agents=9000"])
    assert checked.exit_code == 0 and "residents" not in checked.stderr, checked.output


def test_more_agents_than_residents_is_noted_by_calibrate_and_warned_of_by_the_python_api(tmp_path):
    """`abm calibrate` and `abm.run` gave no word where `abm run` notes more agents than the
    region's residents (the figures for the region scale down): the calibration now gives the
    same note before it runs, and `abm.run` a MoreAgentsThanResidents warning with its text;
    `abm run` still notes it once and does not warn besides, and 600 agents of 9,000 residents
    get neither."""
    import warnings

    import yaml

    import abm
    from abm.residents_per_agent import MoreAgentsThanResidents

    scenario = county(tmp_path, figures=FIGURES.replace("population: 9000", "population: 500"))
    note = (
        "population.agents: 600 agents is more than the 500 residents of Pinecrest County, OR: each agent stands for "
        "0.83 residents, and figures for the region scale down (x 0.83) from the agents' own"
    )
    (tmp_path / "observed.csv").write_text("date,cases\n" + "".join(f"2020-02-{d:02d},{d % 3}\n" for d in range(1, 8)))
    calibration = {
        "data": str(tmp_path / "observed.csv"),
        "targets": ["cases"],
        "fit_window": ["2020-02-01", "2020-02-07"],
        "holdout_window": None,
        "parameters": {"disease.transmission_rate": {"low": 1.0, "high": 6.0}},
    }
    data = {**yaml.safe_load(scenario.read_text()), "simulation": {"days": 7, "replicates": 1}}
    calibrated = tmp_path / "calibrated.yaml"
    calibrated.write_text(yaml.safe_dump({**data, "calibration": calibration}))
    options = ["--trials", "1", "--workers", "1", "--out", str(tmp_path / "cal")]
    result = runner.invoke(app, ["calibrate", str(calibrated), *options])
    assert result.exit_code == 0, result.output
    assert f"note: {note}" in " ".join(result.stderr.split())

    with pytest.warns(MoreAgentsThanResidents) as caught:
        abm.run(scenario, days=1)
    assert [str(w.message) for w in caught] == [note]
    assert caught[0].filename == __file__  # it points at the call
    with warnings.catch_warnings():
        warnings.simplefilter("error", MoreAgentsThanResidents)
        ran = runner.invoke(app, ["run", str(scenario), "--days", "1", "--out", str(tmp_path / "r")])
        assert ran.exit_code == 0, ran.output
        assert " ".join(ran.stderr.split()).count(note) == 1
        (tmp_path / "big").mkdir()
        abm.run(county(tmp_path / "big"), days=1)  # 600 agents, 9,000 residents
