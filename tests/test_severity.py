"""What an infection leads to by age (abm.engine.severity): exact chances from the branching
table, a looping table, the simulation against them, and `abm validate --severity`."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import fixed_seeds_note

from abm.engine.config import AGE_GROUP_LABELS, DiseaseConfig, Stage, default_branching
from abm.engine.severity import hitting_probability, severity_by_age, weighted_severity
from abm.outputs.severity_table import percent, residents_by_age_group
from abm.populations import load_region

KC = "scenarios/king_county/no_intervention.yaml"


def test_default_chances_are_the_products_along_the_paths():
    """80+: symptoms 1 - 0.192 (the asymptomatic share); hospital 0.347 (severe) x 0.379; ICU
    that x 0.03545; death that hospital chance x (0.67355 + 0.03545 x 1.0, ICU's death). 30-39:
    0.054 x 0.069 x (0.005 + 0.045 x 0.5)."""
    rows = {r.age_group: r for r in severity_by_age(DiseaseConfig())}
    old = rows["80+"]
    assert old.symptoms == pytest.approx(0.808, abs=1e-12)
    assert old.hospital == pytest.approx(0.347 * 0.379, abs=1e-12)
    assert old.icu == pytest.approx(0.347 * 0.379 * 0.03545, abs=1e-12)
    assert old.death == pytest.approx(0.347 * 0.379 * (0.67355 + 0.03545), abs=1e-12)
    assert rows["30-39"].death == pytest.approx(0.054 * 0.069 * (0.005 + 0.045 * 0.5), abs=1e-15)
    assert [r.age_group for r in rows.values()] == AGE_GROUP_LABELS


def test_a_table_that_loops_counts_each_path_once():
    """Hospital -> ICU 0.4 (else recovered), ICU -> hospital 0.5 (else death): from hospital,
    death = 0.4 x (0.5 + 0.5 x death), so 0.25; ICU is entered at least once with chance 0.4 (not
    the expected 0.5 visits); from infection everything goes through hospital."""
    table = np.zeros((11, 11))
    table[Stage.SUSCEPTIBLE, Stage.SEVERE_SYMPTOMS] = 1.0
    table[Stage.SEVERE_SYMPTOMS, Stage.HOSPITALIZED] = 1.0
    table[Stage.HOSPITALIZED, [Stage.CRITICAL_ICU, Stage.RECOVERED]] = [0.4, 0.6]
    table[Stage.CRITICAL_ICU, [Stage.HOSPITALIZED, Stage.DEATH]] = [0.5, 0.5]
    assert hitting_probability(table, (int(Stage.DEATH),)) == pytest.approx(0.25, abs=1e-12)
    assert hitting_probability(table, (int(Stage.CRITICAL_ICU),)) == pytest.approx(0.4, abs=1e-12)
    assert hitting_probability(table, (int(Stage.HOSPITALIZED),)) == 1.0
    assert hitting_probability(table, (int(Stage.MILD_SYMPTOMS), int(Stage.SEVERE_SYMPTOMS))) == 1.0


def test_a_loop_left_rarely_is_counted_to_its_limit():
    """Hospital -> ICU 0.99999 (else recovered), ICU -> hospital 0.99999 (else death): from
    hospital, death = p (1 - p) / (1 - p^2) = 0.4999975. Iterating the chain 10,000 steps from 0
    gave 0.048 here (the loop is left once in 100,000 passes)."""
    p = 0.99999
    table = np.zeros((11, 11))
    table[Stage.SUSCEPTIBLE, Stage.SEVERE_SYMPTOMS] = 1.0
    table[Stage.SEVERE_SYMPTOMS, Stage.HOSPITALIZED] = 1.0
    table[Stage.HOSPITALIZED, [Stage.CRITICAL_ICU, Stage.RECOVERED]] = [p, 1 - p]
    table[Stage.CRITICAL_ICU, [Stage.HOSPITALIZED, Stage.DEATH]] = [p, 1 - p]
    assert hitting_probability(table, (int(Stage.DEATH),)) == pytest.approx(p * (1 - p) / (1 - p * p), rel=1e-9)
    assert hitting_probability(table, (int(Stage.CRITICAL_ICU),)) == pytest.approx(p, rel=1e-12)
    # a stage that loops on itself and is left only to death: everyone entering it dies
    table[Stage.HOSPITALIZED] = 0.0
    table[Stage.HOSPITALIZED, [Stage.HOSPITALIZED, Stage.DEATH]] = [0.99999, 0.00001]
    assert hitting_probability(table, (int(Stage.DEATH),)) == pytest.approx(1.0, abs=1e-9)
    assert hitting_probability(table, (int(Stage.CRITICAL_ICU),)) == 0.0


def test_weighted_chances_and_percentages():
    rows = severity_by_age(DiseaseConfig())
    weights = np.zeros(9)
    weights[[0, 8]] = [3.0, 1.0]
    everyone = weighted_severity(rows, weights, "all ages")
    assert everyone.death == pytest.approx(0.75 * rows[0].death + 0.25 * rows[8].death, rel=1e-12)
    assert [percent(p) for p in (0.0, 0.093243, 0.63, 1.82e-7)] == ["0", "9.32%", "63%", "0.0000182%"]


def test_the_simulation_dies_and_is_admitted_as_the_table_says():
    """20,000 agents x 2 replicates at a transmission rate that infects nearly everyone, 200
    days (every infection resolved): deaths and admissions equal the infections by age times the
    table's chances, within 4 sd of the binomial sum (the 5 seeded infections, started past the
    branching of infection, are among the infections)."""
    import abm

    with fixed_seeds_note():
        run = abm.run(KC, agents=20_000, days=200, replicates=2, seed=3, sets=["disease.transmission_rate=20"])
    res = run.result
    infected = res.new_by_age.sum(axis=0)  # [replicate, age group]
    assert infected.sum() > 0.9 * 40_000
    ongoing = [s for s in Stage if s not in (Stage.SUSCEPTIBLE, Stage.DEATH, Stage.RECOVERED)]
    assert res.stages_by_age[-1][:, :, ongoing].sum() == 0
    rows = severity_by_age(DiseaseConfig())
    for observed, chance in (
        (res.stages_by_age[-1][:, :, Stage.DEATH].sum(), np.array([r.death for r in rows])),
        (res.admissions.sum(), np.array([r.hospital for r in rows])),
    ):
        expected = (infected * chance).sum()
        sd = np.sqrt((infected * chance * (1 - chance)).sum())
        assert abs(observed - expected) < 4 * sd, (observed, expected, sd)


def validate(*args: str) -> subprocess.CompletedProcess:
    """`abm validate ARGS` as a process, 150 columns wide."""
    env = {**os.environ, "COLUMNS": "150"}
    return subprocess.run([sys.executable, "-m", "abm", "validate", *args], capture_output=True, text=True, env=env)


def table_cells(stdout: str) -> dict[str, list[str]]:
    """The severity table's rows on ``stdout``: age group -> its four cells."""
    rows = (line.split("│") for line in stdout.splitlines())
    return {c[1].strip(): [x.strip() for x in c[2:6]] for c in rows if len(c) == 7}


def test_validate_prints_the_severity_table():
    """`abm validate --severity`: the verdict, then a row per age group and one for all ages,
    weighted by King County's residents; with --show, or for a learning scenario, one message and
    exit code 2."""
    proc = validate(KC, "--severity")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"ok {KC}: scenario 'no_intervention' is valid")
    cells = table_cells(proc.stdout)
    rows = severity_by_age(DiseaseConfig())
    for r in rows:
        assert cells[r.age_group] == [percent(r.symptoms), percent(r.hospital), percent(r.icu), percent(r.death)]
    region = load_region("king_county")
    residents = residents_by_age_group(region.band_counts(), region.figures.age_bands)
    assert residents.sum() == pytest.approx(region.band_counts().sum())
    everyone = weighted_severity(rows, residents, "all ages")
    assert cells["all ages"][3] == percent(everyone.death) == "0.734%"
    both = validate(KC, "--severity", "--show")
    assert both.returncode == 2 and both.stdout == ""
    assert both.stderr.strip() == "error: --severity and --show both write to standard output; give one of them"
    other = validate("scenarios/learning/gmm_mapl.yaml", "--severity")
    assert other.returncode == 2 and other.stdout == ""
    assert "--severity is for epidemic scenarios, and this is a learning scenario" in other.stderr


def test_the_table_follows_the_scenario_settings():
    """Halving the 80+ chance of death in hospital (the rest to recovery) with --set halves that
    part of the 80+ death chance in the printed table: 0.347 x 0.379 x (0.67355 / 2 + 0.03545)."""
    death = default_branching()[8][Stage.HOSPITALIZED][Stage.DEATH]
    recovered = default_branching()[8][Stage.HOSPITALIZED][Stage.RECOVERED]
    key = f"disease.branching[8][{int(Stage.HOSPITALIZED)}]"
    proc = validate(
        KC, "--severity", "--set", f"{key}[{int(Stage.DEATH)}]={death / 2}",
        "--set", f"{key}[{int(Stage.RECOVERED)}]={recovered + death / 2}",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert table_cells(proc.stdout)["80+"][3] == percent(0.347 * 0.379 * (0.67355 / 2 + 0.03545)) == "4.9%"


def test_residents_of_a_band_that_spans_two_groups_are_shared_by_their_years():
    """A region's own bands 0-14 (30 residents), 15-24 (100) and 25-100 (76): agents' ages are
    drawn evenly over a band's years, so 0-9 gets 20, 10-19 10 + 50, 20-29 50 + 5, 30-39 .. 70-79
    10 each and 80+ its 21 years of the last band (the band's first year took it all before: 0-9
    30, 10-19 100, 20-29 76)."""
    bands = {"a": (0, 14), "b": (15, 24), "c": (25, 100)}
    counts = np.array([[10.0, 60.0, 76.0], [20.0, 40.0, 0.0]])  # two tracts
    got = residents_by_age_group(counts, bands)
    assert got.tolist() == pytest.approx([20, 60, 55, 10, 10, 10, 10, 10, 21], abs=1e-12)


def test_the_reference_population_is_weighted_as_its_agents_are_drawn():
    """population.kind: reference draws agents' age groups from the thesis's census counts
    (AGE_GROUP_COUNTS), not from the bundled tracts: the all-ages row uses those weights and says
    so (0.722% against the tracts' 0.734%)."""
    from abm.outputs.severity_table import scenario_severity_table
    from abm.populations.reference import AGE_GROUP_COUNTS
    from abm.scenario import load_scenario

    table = scenario_severity_table(load_scenario("scenarios/reference/ni.yaml"))
    everyone = weighted_severity(severity_by_age(DiseaseConfig()), np.array(AGE_GROUP_COUNTS, float), "all ages")
    assert table.rows[-1] == ["all ages", percent(everyone.symptoms), percent(everyone.hospital),
                              percent(everyone.icu), percent(everyone.death)]  # fmt: skip
    assert table.rows[-1][4] == "0.722%" and "thesis reference population" in table.caption
    assert "the residents of King County, WA" in scenario_severity_table(load_scenario(KC)).caption
