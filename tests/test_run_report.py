"""report.html of a run folder: what was run, the main results, plots and links."""

import html
import json
import re
from pathlib import Path

import yaml
from conftest import fixed_seeds_note

import abm
from abm.outputs.severity_table import scenario_severity_table
from abm.outputs.summary_table import by_age_table, summary_table
from abm.scenario import load_scenario

VACC_CT = Path(__file__).resolve().parents[1] / "scenarios/king_county/vacc_ct.yaml"


def _sections(page: str) -> dict[str, str]:
    """Each intervention's name -> its settings as the page shows them (unescaped YAML)."""
    found = re.findall(r"<details><summary>(.*?)</summary><pre>(.*?)</pre></details>", page, re.S)
    return {html.unescape(name): html.unescape(text) for name, text in found}


def _table_rows(page: str) -> list[list[list[str]]]:
    """Each table's body rows on the page, as unescaped cell texts."""
    return [
        [[html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", r)] for r in re.findall(r"<tr>(.*?)</tr>", body)]
        for body in re.findall(r"<tbody>(.*?)</tbody>", page, re.S)
    ]


def test_report_lists_each_intervention_that_is_on_with_its_resolved_settings(tmp_path):
    with fixed_seeds_note():
        result = abm.run(
            VACC_CT,
            agents=2000,
            days=12,
            replicates=1,
            sets=["interventions.manual_tracing.enabled=false", "simulation.start_date=2021-01-04"],
        )
    out = result.write(tmp_path / "run", figures=False)
    page = (out / "report.html").read_text()
    resolved = yaml.safe_load((out / "scenario.resolved.yaml").read_text())["interventions"]
    shown = _sections(page)
    # manual tracing is in the resolved scenario, switched off: not listed as run
    assert resolved["manual_tracing"]["enabled"] is False
    assert sorted(shown) == ["digital_tracing", "quarantine", "testing", "vaccination"]
    for name, text in shown.items():
        assert yaml.safe_load(text) == resolved[name], name
    assert "12 days from 2021-01-04 (day 0), 1 replicate, seed 1234, device cpu." in page
    # One replicate: no sd in either column; the table is summary_table's, less the engine's seconds.
    rows = _table_rows(page)[0]
    assert rows == summary_table(result.summary).rows
    assert not any("±" in cell for row in rows for cell in row)
    assert "± is the sd" not in page
    # Without figures: no plots section and no map link; the tables are linked.
    assert "<h2>Plots</h2>" not in page and "map.html" not in page
    assert '<a href="costs.csv">' in page and '<a href="scenario.resolved.yaml">' in page


def test_report_says_when_no_intervention_runs(tmp_path):
    ni = VACC_CT.parent / "no_intervention.yaml"
    with fixed_seeds_note():
        out = abm.run(ni, agents=1000, days=3, replicates=2).write(tmp_path / "ni", figures=False)
    page = (out / "report.html").read_text()
    assert "None: the epidemic runs without interventions." in page and _sections(page) == {}
    assert "<h1>no_intervention</h1>" in page
    # Who was infected and died by age (summary.json's by_age), then the disease settings'
    # chances by age, as `abm validate --severity` prints them.
    summary = json.loads((out / "summary.json").read_text())
    assert "<h2>Who was infected and who died, by age</h2>" in page
    assert _table_rows(page)[1] == by_age_table(summary).rows
    care = summary["long_term_care_residents"]  # the last row, after the age groups
    assert [row[1] for row in _table_rows(page)[1]] == [f"{g['agents']:,}" for g in [*summary["by_age"], care]]
    assert _table_rows(page)[1][-1][0] == "long-term-care residents"
    assert sum(g["agents"] for g in summary["by_age"]) == 1000
    assert "<h2>What an infection leads to, by age (disease.branching)</h2>" in page
    severity = _table_rows(page)[2]
    assert severity == scenario_severity_table(load_scenario(ni)).rows
    assert severity[8][0] == "80+" and severity[8][4] == "9.32%" and severity[9][0] == "all ages"


def test_report_links_and_images_name_files_of_the_folder_and_show_commands_as_code(tmp_path):
    """Every link and image of report.html names a file the run folder holds, and a link's words
    show a command as code: the resolved scenario's line read "`abm run` on it re-creates the run",
    backticks and all, as plain text."""
    ni = VACC_CT.parent / "no_intervention.yaml"
    with fixed_seeds_note():
        out = abm.run(ni, agents=1000, days=3, replicates=1).write(tmp_path / "ni")
    page = (out / "report.html").read_text()
    targets = re.findall(r'(?:href|src)="([^"]+)"', page)
    assert "map.html" in targets and "plots/map_day002.png" in targets
    assert [t for t in targets if not (out / html.unescape(t)).is_file()] == []
    files = page[page.index("<h2>Files</h2>") :]
    assert "<code>abm run</code> on it re-creates the run" in files and "`" not in files
