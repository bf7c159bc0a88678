"""The scenario reference is generated from the schema and kept in docs/scenarios.md."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from conftest import fixed_seeds_note

from abm.outputs.schema_doc import scenario_reference
from abm.scenario import Scenario
from abm.scenario_notes import ScenarioNote


def leaf_paths(model, prefix=""):
    for name, field in model.model_fields.items():
        yield (f"{prefix}.{field.alias or name}" if prefix else field.alias or name), field


def test_reference_lists_every_section_and_field_with_default():
    text = scenario_reference()
    for section in ("population", "simulation", "disease", "contacts", "seeding", "interventions", "outputs"):
        assert f"## `{section}`" in text
    sim = Scenario.model_fields["simulation"].annotation
    for _key, field in leaf_paths(sim):
        assert f"| `{field.alias or _key}` |" in text
    assert "| `days` | int | `180` | >= 1, <= 10000 | days simulated |" in text
    assert "## `interventions.vaccination`" in text and "## `interventions.testing.tests[]`" in text


def test_population_help_is_region_neutral():
    """A region of one's own is read with the same keys: the help of population.agents names the
    region's population, not King County's figure (it said "the full county: 2252782")."""
    population = Scenario.model_fields["population"].annotation
    help_text = population.model_fields["agents"].description
    assert "2252782" not in help_text and "county" not in help_text.lower()
    assert "`population` in region.yaml" in help_text


def test_docs_scenarios_md_is_up_to_date():
    doc = Path(__file__).resolve().parents[1] / "docs" / "scenarios.md"
    assert doc.read_text() == scenario_reference(), (
        "docs/scenarios.md is stale: run `python -m abm.outputs.schema_doc > docs/scenarios.md`"
    )


def test_readme_names_every_data_sources_file():
    """Every SOURCES.md shipped in the package (sources, licences and attributions, e.g. the
    CC BY 4.0 attribution of the JHU CSSE series) is named where the README points readers for
    data sources and licences (before, it named only the region's)."""
    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text()
    notes = sorted(str(p.relative_to(root)) for p in (root / "abm").rglob("SOURCES.md"))
    assert len(notes) >= 4
    start = readme.index("Data sources and licences:")
    end = readme.find("\n\n", start)
    section = readme[start : end if end >= 0 else len(readme)]
    assert [n for n in notes if f"`{n}`" not in section] == []


def test_the_python_api_has_docstrings_and_type_hints():
    """What ``abm`` exports (README, docs/tutorial.md: From Python), and each public method and
    property of its classes, says what it does and is annotated."""
    import inspect

    import abm

    missing = []
    for name in abm.__all__:
        if name.startswith("__"):
            continue
        obj = getattr(abm, name)
        members = [(name, obj)]
        if inspect.isclass(obj):
            members += [(f"{name}.{m}", v) for m, v in vars(obj).items() if not m.startswith("_")]
        for label, member in members:
            func = member.fget if isinstance(member, property) else member
            if not callable(func):
                continue
            if not inspect.getdoc(func):
                missing.append(f"{label}: no docstring")
            if inspect.isclass(func):
                continue
            sig = inspect.signature(func)
            empty = inspect.Parameter.empty
            bare = [p for p, param in sig.parameters.items() if p != "self" and param.annotation is empty]
            if bare or sig.return_annotation is inspect.Signature.empty:
                missing.append(f"{label}: parameters {bare} or the return not annotated")
    assert not missing, missing


def test_the_scenario_reference_gives_the_bounds_of_each_item_of_a_list():
    """contacts.community.mean_contacts takes three numbers of 0 to 1,000: the reference said nothing
    of their bounds (only a field's own bounds were read, not those of its items)."""
    from abm.engine.contacts import CommunityContacts
    from abm.outputs.schema_doc import bounds

    assert bounds(CommunityContacts.model_fields["mean_contacts"]) == "each >= 0, <= 1000"
    assert bounds(CommunityContacts.model_fields["weight"]) == ">= 0"


def test_the_scenario_reference_says_what_each_contact_multiplier_key_means():
    """Distancing and closures are a documented use case: every key of contact_multipliers'
    changes, series and closures has a meaning in docs/scenarios.md (from_day, until_day and the
    layers' multipliers of a change, and a closure's days, had an empty one), and the two-point
    dwell time says what its Bernoulli draw's probability is (it said 'frac', defined nowhere)."""
    sections = scenario_reference().split("\n## ")
    for name in ("changes[]", "series", "closures[]"):
        (section,) = [s for s in sections if s.startswith(f"`interventions.contact_multipliers.{name}`")]
        rows = [line for line in section.splitlines() if line.startswith("| `")]
        assert rows, name
        cells = [re.split(r"(?<!\\)\|", row)[1:-1] for row in rows]  # key, type, default, allowed, meaning
        assert all(len(c) == 5 for c in cells), name
        empty = [c[0].strip() for c in cells if not c[4].strip()]
        assert not empty, f"{name}: no meaning for {empty}"
    assert "floor(mean) + Bernoulli(mean - floor(mean))" in scenario_reference()


def test_every_key_of_the_scenario_reference_has_a_meaning():
    """Every row of docs/scenarios.md says what its key does: 35 had an empty meaning (the top-level
    description, every intervention's enabled, the calibration windows and targets, a free
    parameter's low and high, the dwell time's from, to and distribution) or, for a section, only
    the link to it."""
    section, empty, rows = "Top level", [], 0
    for line in scenario_reference().splitlines():
        if line.startswith("## "):
            section = line[3:]
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]  # key, type, default, allowed, meaning
        assert len(cells) == 5, line
        rows += 1
        meaning = re.sub(r"\(see \[`[^`]+`\]\(#[^)]*\)\)$", "", cells[4]).strip()
        if not meaning:
            empty.append(f"{section} {cells[0]}")
    assert rows > 150 and empty == []


def test_the_scenario_reference_states_the_default_test_in_full():
    """`testing: {}` tests with the default test type, whose settings the default column cuts off
    after 60 characters (`[{"name": "rt_pcr", "sensitivity": 0.99, "specificity": 1...`): its
    meaning states every value of it, so an author can tell what `testing: {}` does."""
    from abm.interventions.testing import rt_pcr

    row = next(line for line in scenario_reference().splitlines() if line.startswith("| `tests` |"))
    meaning = row.rsplit("|", 2)[-2]
    test = rt_pcr()
    days = ", ".join(str(d) for d in test.result_delay_days[:-1]) + f" or {test.result_delay_days[-1]}"
    probs = ", ".join(f"{p:g}" for p in test.result_delay_probs)
    for part in (
        f"default: one, {test.name}",
        f"sensitivity {test.sensitivity:g}",
        f"specificity {test.specificity:g}",
        f"after {days} days with probabilities {probs}",
        f"cost {test.cost:g}",
        "no daily capacity" if test.daily_capacity is None else f"daily capacity {test.daily_capacity}",
        f"given to {' and '.join(test.given_to)}",
    ):
        assert part in meaning, (part, meaning)


def test_the_plot_methods_name_every_figure_they_draw():
    """RunResult.plot's docstring listed five figures after icu_occupancy and reproduction_number
    were added: help() names every figure that ``which`` takes."""
    import inspect

    from abm.outputs.plots import FIGURES
    from abm.runs import RunResult

    doc = inspect.getdoc(RunResult.plot)
    assert [name for name in FIGURES if f"``{name}``" not in doc] == []


def _keys(value: object) -> set[str]:
    """Every key of a JSON value, at any depth (the keys of a list's mappings too)."""
    if isinstance(value, dict):
        return set(value).union(*(_keys(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(_keys(v) for v in value))
    return set()


def _section(text: str, start: str, end: str) -> str:
    return text[text.index(start) : text.index(end)]


def _listed(section: str) -> set[str]:
    """The names a section's tables list in their first column, in backticks (`plots/` as `plots`;
    `.parquet`, a suffix of the name before it, and `<column>`, a placeholder, left out)."""
    names = set()
    for line in section.splitlines():
        if line.startswith("| ") and not line.startswith("| ---"):
            first = line.split(" | ")[0]
            names |= {n.rstrip("/") for n in re.findall(r"`([^`]+)`", first)}
    return {n for n in names if not n.startswith((".", "<"))}


def test_the_output_reference_names_every_column_and_key_of_a_run_folder(tmp_path):
    """docs/outputs.md's run-folder section (the README's table, before it moved there) names, in
    backticks, each column of the run's tables and each key of its summary.json and manifest.json:
    the README named manifest.json's fields by what they hold ("version", "torch version") and not
    at all its `files`, `created_utc` or `python`, the costs' columns as "unit cost", not the 11
    stages' columns, and not summary.json's `per_100k` of a peak or `hospital_capacity` and its keys.
    The README names each file of the folder and links to the reference."""
    import json

    import pandas as pd

    import abm

    root = Path(__file__).resolve().parents[1]
    doc = (root / "docs" / "outputs.md").read_text()
    section = _section(doc, "## The run folder", "## The comparison folder")
    readme = (root / "README.md").read_text()
    readme_files = _section(readme, "### What a run writes", "### How output folders are written")
    assert "(docs/outputs.md#the-run-folder)" in readme_files
    scenario = root / "scenarios/king_county/vacc_ct.yaml"
    with (
        fixed_seeds_note(),
        pytest.warns(ScenarioNote, match=r"^interventions\.vaccination starts on day 10 \(2021-01-14\), after the 3"),
    ):
        result = abm.run(scenario, agents=1000, days=3, replicates=2, sets=["simulation.start_date=2021-01-04"])
    out = result.write(tmp_path / "run")
    files = {p.name for p in out.iterdir() if p.name != ".abm-output"}
    assert sorted(f for f in files if f"`{f}" not in readme_files) == []
    names = {"timeseries.csv", "by_age.csv", "by_tract.csv", "costs.csv", "summary.json", "manifest.json"}
    names |= files - {"plots", "timeseries.parquet"}
    for table in ("timeseries", "by_age", "by_tract", "costs"):
        names |= set(pd.read_csv(out / f"{table}.csv", nrows=0).columns)
    for meta in ("summary", "manifest"):
        names |= _keys(json.loads((out / f"{meta}.json").read_text()))
    assert sorted(n for n in names if f"`{n}`" not in section) == []
    assert sorted(_listed(section) - names - files) == []  # and every name its tables list is written


def test_the_output_reference_names_every_column_of_a_comparison_and_a_sweep(tmp_path):
    """docs/outputs.md names, in backticks, each column of comparison.csv and comparison_by_age.csv
    in its comparison section, and each column of sweep.csv and sweep_summary.csv in its sweep
    section (but the swept key's; the age groups between the first and the last, which it gives as
    a series; and sweep_summary.csv's X_mean and X_sd of a column X of sweep.csv, which it names as
    the mean and sd of each, and the changes of each by-age column X, which it names once, as
    ``<column>_change_per_100k`` and so on), and each key of sweep.json, of its timings and of a
    variant's entry (the docs named 5 of its 17 keys, and called a variant's entry its scenario).
    One of the compared runs is dated: comparison.csv's peak_hospital_date, which only a comparison
    with a dated run has, was not named."""
    import json

    import pandas as pd

    import abm

    root = Path(__file__).resolve().parents[1]
    doc = (root / "docs" / "outputs.md").read_text()
    compared = _section(doc, "## The comparison folder", "## The sweep folder")
    swept = doc[doc.index("## The sweep folder") :]
    scenarios = root / "scenarios/king_county"
    dated = ["simulation.start_date=2021-01-04"]  # a dated run adds peak_hospital_date (it was not named)
    with (
        fixed_seeds_note(),
        pytest.warns(ScenarioNote, match=r"^interventions\.vaccination starts on day 10 \(2021-01-14\), after the 3"),
    ):
        runs = [
            abm.run(scenarios / f"{name}.yaml", agents=500, days=3, replicates=2, sets=sets)
            for name, sets in (("ni", None), ("vacc", dated))
        ]
    out = abm.compare(runs).write(tmp_path / "comparison")
    names = {"comparison.csv", "comparison.md", "comparison_by_age.csv", "report.html"}
    for table in ("comparison", "comparison_by_age"):
        names |= set(pd.read_csv(out / f"{table}.csv", nrows=0).columns)
    assert sorted(n for n in names if f"`{n}`" not in compared) == []
    assert sorted(_listed(compared) - names - {"plots"}) == []

    key = "interventions.vaccination.start_day"
    with fixed_seeds_note():
        sweep = abm.run_sweep(
            scenarios / "vacc.yaml",
            [f"{key}=1,2"],
            replicates=2,
            agents=500,
            days=3,
            sets=["simulation.start_date=2021-01-04"],
        )
    out = sweep.write(tmp_path / "sweep")
    table = set(pd.read_csv(out / "sweep.csv", nrows=0).columns) - {key}
    summary = set(pd.read_csv(out / "sweep_summary.csv", nrows=0).columns) - {key}
    summary -= {f"{c}_{s}" for c in table for s in ("mean", "sd")}
    ages = {c for c in table if "_age_" in c} - {
        f"{m}_age_{g}" for m in ("cumulative_infected", "deaths") for g in ("0_9", "80_plus")
    }
    changes = ("per_100k", "low", "high", "region", "region_low", "region_high")
    summary -= {f"{c}_change_{s}" for c in table if "_age_" in c for s in changes}
    summary |= {f"<column>_change_{s}" for s in changes}
    names = {p.name for p in out.iterdir() if p.name != ".abm-output"} | (table - ages) | summary
    info = json.loads((out / "sweep.json").read_text())  # its keys, its timings' and a variant's
    names |= set(info) | set(info["timings"]) | set(info["variants"][0])
    assert sorted(n for n in names if f"`{n}`" not in swept) == []
    written = names | ages | set(pd.read_csv(out / "sweep_summary.csv", nrows=0).columns)
    assert sorted(_listed(swept) - written - {"ray_cpus", "ray_gpus"}) == []  # those two on Ray only


def test_the_output_reference_gives_the_folder_each_command_writes_by_default():
    """docs/outputs.md's first table gives each command's folder as its --help does: it said that
    `abm compare` writes "the `--out` folder", while without --out it writes runs/comparison/."""
    from typer.testing import CliRunner

    from abm.cli import app

    doc = (Path(__file__).resolve().parents[1] / "docs" / "outputs.md").read_text()
    rows = {m[1]: m[2] for m in re.finditer(r"^\| `abm (\w+)[^|]*\| `([^`]+)` \|", doc, re.M)}
    assert set(rows) == {"run", "compare", "sweep"}
    for command, folder in rows.items():
        text = " ".join(CliRunner().invoke(app, [command, "--help"]).output.replace("│", " ").split())
        default = re.search(r"--out PATH .*?(?:\(default |\[default: )(runs/[^)\]]+)", text)
        assert default, command
        assert folder.replace("<scenario name>", "<name>") == f"{default[1]}/".replace("<scenario name>", "<name>")


def test_the_readme_says_which_warnings_fail_a_test():
    """The README's Testing notes said nothing of pyproject.toml's warning filters, under which a
    new test of a King County file at a few thousand agents failed on the seeding note."""
    root = Path(__file__).resolve().parents[1]
    filters = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["filterwarnings"]
    assert "error::abm.scenario_notes.ScenarioNote" in filters and "ignore::abm.result_notes.ResultNote" in filters
    readme = " ".join((root / "README.md").read_text().split())
    assert "A warning of abm's own fails the test that gives it (`filterwarnings` in `pyproject.toml`)" in readme
    assert "its notes on a scenario (`abm.ScenarioNote`) included" in readme
    assert "Notes on results (`abm.ResultNote`) are ignored there" in readme
