"""The tables of a finished sweep, as `abm sweep` prints them and its ``report.html`` shows them:
the variants' means over replicates, and each variant's changes from the first with their 95%
intervals for the region (per 100,000 agents where the region's residents are not known).
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from abm.outputs.html_pages import REPORT_CSS, html_table
from abm.outputs.summary_table import SummaryTable, fixed, without_minus_zero
from abm.plurals import counted

# How a change reads, first in the changes table's caption: abm compare's averted counts are the
# other way round (the first run's minus the run's), so the sign is said where the numbers are.
SIGN = "a change is the variant's figure minus the first's: below 0, fewer (or less spent) than in the first; "

# The changes shown, with their words: sweep_summary.csv's <outcome>_change_... columns.
CHANGE_WORDS = {"hospitalizations": "hospitalizations", "deaths": "deaths", "total_cost": "cost $"}

SWEEP_FILES = {
    "sweep.csv": "one row per variant and replicate; infections and deaths by age group in its last columns",
    "sweep_summary.csv": "one row per variant: means, sds and the changes from the first variant (by age group last)",
    "sweep.json": "the swept keys and values, each variant's resolved scenario, timings",
    "sweep.png": "the outcomes against a swept key (the first whose values are numbers, else the first), one line "
    "per combination of the other keys' values",
}
"""The sweep folder's files the report links to, with what each holds."""


def value_text(value: Any) -> str:
    """A swept value as sweep.png and report.html write it (sweep.json keeps the values, not the
    texts given): text as it is, anything else as YAML flow in JSON's spelling (null, true, 0.2,
    [10, 20], {"asymptomatic": 10})."""
    return value if isinstance(value, str) else json.dumps(value)


# The columns of a change and its interval's ends: per 100,000 agents, and for the region.
ENDS = {"per_100k": ("per_100k", "low", "high"), "region": ("region", "region_low", "region_high")}


def _change(row: pd.Series, name: str, unit: str, places: int) -> str:
    """A change and its 95% interval, "mean (low to high)", or "mean (the same in every
    replicate)" where the interval has no width at the places shown; blank for the first variant."""
    mean, low, high = (float(row[f"{name}_change_{end}"]) for end in ENDS[unit])
    if math.isnan(mean):
        return ""
    shown = [without_minus_zero(f"{v:,.{places}f}") for v in (mean, low, high)]  # -0.3 deaths: 0, not -0
    if math.isnan(low) or math.isnan(high):  # one replicate: no interval
        return shown[0]
    if shown[1] == shown[0] == shown[2]:  # a fixed cost (doses at a set rate): no spread to show
        return f"{shown[0]} (the same in every replicate)"
    return f"{shown[0]} ({shown[1]} to {shown[2]})"


def _initial_r(row: pd.Series) -> str:
    """The mean reproduction number of the replicates' first week, and over how many when not all
    have one (not final by the run's end); empty where none has (or an older sweep's table)."""
    n = row.get("reproduction_number_initial_n")
    if n is None or pd.isna(n) or int(n) == 0:
        return ""
    some = "" if int(n) == int(row["replicates"]) else f" ({int(n)} of {int(row['replicates'])})"
    return f"{row['reproduction_number_initial_mean']:.2f}{some}"


def sweep_tables(summary: pd.DataFrame, labels: list[str], agents: list[int], people: list[int]) -> list[SummaryTable]:
    """The means table and the changes table of a sweep: ``summary`` (sweep_summary.csv), the
    variants' ``labels`` (``start_day=10``), the agents of its runs and its regions' residents
    (sweep.json's ``agents`` and ``region_population``). A sweep of one variant has no change
    from its first: the means table alone."""
    runs = int(summary["replicates"].sum())
    per_variant = summary["replicates"].iloc[0]
    means = SummaryTable(
        title=f"{counted(runs, 'run')} ({per_variant} per variant); means over replicates",
        columns=["variant", "infected", "peak beds", "deaths", "cost $", "R first week"],
        rows=[
            [
                label,
                f"{fixed(100 * row['cumulative_infected_share_mean'], 1)}%",  # 0.03%, not 0.0%
                fixed(row["peak_hospital_occupancy_mean"], 1),
                fixed(row["deaths_mean"], 1),
                f"{row['total_cost_mean']:,.0f}",
                _initial_r(row),
            ]
            for label, (_, row) in zip(labels, summary.iterrows(), strict=True)
        ],
        caption=(
            f"deaths, beds and costs are for the {' or '.join(f'{a:,}' for a in agents)} simulated agents of a run; "
            f"the region has {' or '.join(f'{p:,}' for p in people)} residents"
        ),
    )
    if len(summary) < 2:
        return [means]
    region = summary.get("hospitalizations_change_region")
    unit = "region" if region is not None and bool(region.notna().any()) else "per_100k"
    rows = []
    for label, (_, row) in zip(labels, summary.iterrows(), strict=True):
        rows.append([label, *(_change(row, name, unit, 0 if unit == "region" else 1) for name in CHANGE_WORDS)])
    where = "in the region" if unit == "region" else "per 100,000 agents"
    changes = SummaryTable(
        title=f"changes {where} from the first variant ({labels[0]})"
        + (", with 95% intervals over replicates" if per_variant > 1 else "; one replicate, so no intervals"),
        columns=["variant", *CHANGE_WORDS.values()],
        rows=rows,
        caption=(
            SIGN
            + (
                "the changes per 100,000 agents times the region's residents / 100,000 (sweep_summary.csv has both); "
                if unit == "region"
                else ""
            )
            + "taken replicate by replicate where a variant shares the first's agents, region and kind of device, "
            "else as independent runs (changes_by in sweep_summary.csv)"
            + ("; an interval that includes 0 is a change within the replicates' noise" if per_variant > 1 else "")
        ),
    )
    return [means, changes]


def sweep_report_html(
    name: str, sweeps: dict[str, list], tables: list[SummaryTable], files: list[str], notes: Sequence[object] = ()
) -> str:
    """The page of a sweep of scenario ``name``: what was swept (``sweeps``: key -> values), its
    ``tables`` (:func:`sweep_tables`), the notes on its results that ``abm sweep`` prints after
    them (``notes``: :func:`abm.result_notes.sweep_notes`), the plot, and links to those of
    :data:`SWEEP_FILES` among ``files``."""
    said = "".join(f"<p>Note: {html.escape(str(note))}.</p>" for note in notes)
    swept = "".join(
        f"<li>{html.escape(k)}: {html.escape(', '.join(map(value_text, v)))}</li>" for k, v in sweeps.items()
    )
    links = "".join(
        f'<li><a href="{html.escape(f)}">{html.escape(f)}</a>: {html.escape(what)}</li>'
        for f, what in SWEEP_FILES.items()
        if f in files
    )
    figure = '<h2>Plot</h2><img src="sweep.png" alt="sweep.png">' if "sweep.png" in files else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(name)}: abm sweep</title>
<style>
{REPORT_CSS}
</style></head><body>
<h1>Sweep of {html.escape(name)}</h1>
<p>Swept:</p><ul>{swept}</ul>
{"".join(html_table(t) for t in tables)}{said}
{figure}
<h2>Files</h2><ul>{links}</ul>
</body></html>
"""
