"""``report.html``: one page of a run folder to read or share, with what was run (the run's
facts and the settings of each intervention), its main results (the table `abm run` prints), its
plots and map snapshots, and links to the map and the tables.

The page holds no timing, so a run repeated with the same seed writes the same bytes.
"""

from __future__ import annotations

import html
from pathlib import Path

import yaml

from abm.outputs.html_pages import REPORT_CSS, as_code, html_table
from abm.outputs.plots import PLOT_FILES
from abm.outputs.summary_table import SummaryTable, by_age_table, summary_table
from abm.plurals import counted

RUN_FILES = {
    "scenario.resolved.yaml": "every value the run used: `abm run` on it re-creates the run",
    "summary.json": "the main results, with more decimals",
    "timeseries.csv": "one row per day and replicate",
    "by_age.csv": "per day, replicate and age group",
    "by_tract.csv": "per day and census tract",
    "costs.csv": "spending booked by the interventions",
    "map.html": "tract map with a day slider",
}
"""The run folder's files the report links to, with what each holds."""


def _facts(summary: dict) -> str:
    """One sentence of what was run: region, agents, days (from which date), replicates, seed."""
    start = f" from {summary['start_date']} (day 0)" if summary.get("start_date") else ""
    return (
        f"{summary['region']} ({summary['region_population']:,} residents), {summary['agents']:,} agents, "
        f"{counted(summary['days'], 'day')}{start}, {counted(summary['replicates'], 'replicate')}, "
        f"seed {summary['seed']}, device {summary['device']}."
    )


def _interventions(scenario_data: dict) -> str:
    """Each intervention that is on, with its settings as the resolved scenario writes them."""
    on = {
        name: cfg
        for name, cfg in (scenario_data.get("interventions") or {}).items()
        if cfg is not None and cfg.get("enabled", True)
    }
    if not on:
        return "<p>None: the epidemic runs without interventions.</p>"
    items = []
    for name, cfg in on.items():
        settings = yaml.safe_dump(cfg, sort_keys=False, default_flow_style=False, allow_unicode=True)
        items.append(f"<details><summary>{html.escape(name)}</summary><pre>{html.escape(settings)}</pre></details>")
    return "".join(items)


def _figures(plots: list[str]) -> str:
    """The run's plots in PLOT_FILES order, then the other images of ``plots/`` (the map
    snapshots) by name."""
    known = [name for name in PLOT_FILES.values() if name in plots]
    others = sorted(name for name in plots if name not in known)
    return "".join(
        f'<figure><img src="plots/{html.escape(name)}" alt="{html.escape(name)}">'
        f"<figcaption>{html.escape(Path(name).stem.replace('_', ' '))}</figcaption></figure>"
        for name in known + others
    )


def run_report_html(
    summary: dict, scenario_data: dict, files: list[str], plots: list[str], severity: SummaryTable | None = None
) -> str:
    """The page of a run: ``summary`` (summary.json's content), ``scenario_data`` (the resolved
    scenario as plain data), the names of the run folder's ``files`` (links are given to those of
    :data:`RUN_FILES` that are there) and of the images in its ``plots/`` folder; ``severity``,
    when given, the disease settings' chances by age (:mod:`abm.outputs.severity_table`)."""
    name = html.escape(summary["scenario"])
    links = "".join(
        f'<li><a href="{html.escape(f)}">{html.escape(f)}</a>: {as_code(what)}</li>'
        for f, what in RUN_FILES.items()
        if f in files
    )
    map_line = (
        '<p>The tract map: <a href="map.html">map.html</a> (layers for cumulative infections, active infections '
        "and hospital occupancy per 100,000, with a day slider).</p>"
        if "map.html" in files
        else ""
    )
    plot_section = f"<h2>Plots</h2>{_figures(plots)}" if plots else ""
    ages = by_age_table(summary)
    severity_section = (html_table(ages) if ages else "") + (html_table(severity) if severity else "")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{name}: abm run</title>
<style>
{REPORT_CSS}
</style></head><body>
<h1>{name}</h1>
<p>{html.escape(_facts(summary))}</p>
<h2>Interventions</h2>{_interventions(scenario_data)}
<h2>Main results</h2>{html_table(summary_table(summary), title=False)}
{map_line}{plot_section}{severity_section}
<h2>Files</h2><ul>{links}</ul>
</body></html>
"""
