"""Comparing runs: overlay plots and one table (CSV, Markdown, HTML report).

Per run: peak hospital occupancy of the mean curve, its day (and date, for dated runs), that
peak as a share of capacity, days (and share of days) over capacity, peak ICU beds and days over
ICU capacity, cumulative infected share, deaths, hospitalizations (admissions), total cost, and
the cost per averted hospitalization against the first run: (cost - cost of the first run) /
(hospitalizations of the first run - hospitalizations), both per agent, so runs of different
sizes compare. It is empty for the first run and where no hospitalization is averted; the cost
per averted death likewise. And the hospitalizations and deaths averted per 100,000 against the
first run, with their 95% intervals over replicates (:mod:`abm.outputs.differences`), so that a
reader sees which differences are beyond noise. Deaths by age, with what each run averts in each
age group, are in :mod:`abm.outputs.compare_by_age` (``comparison_by_age.csv``). The first week's
reproduction number and the generation interval, with their changes against the first run, are
read from the runs' summaries by :mod:`abm.outputs.compare_reproduction` ("n/a" for a run without
them).
"""

from __future__ import annotations

import html
import itertools
import json
import math
import numbers
import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from abm.outputs import compare_reproduction, differences, html_pages
from abm.outputs.compare_by_age import by_age_summary, by_age_table
from abm.outputs.html_pages import REPORT_CSS
from abm.outputs.peaks import peak_at_end
from abm.outputs.plots import PLOT_FILES, RunTables, write_plots
from abm.outputs.run_folder import (
    KINDS,
    atomic_folder,
    folder_kind,
    is_output_folder,
    output_path,
    unfinished_write,
    written_entries,
)
from abm.outputs.summary_table import SummaryTable, without_minus_zero
from abm.plurals import counted, plural
from abm.result_notes import ResultNote, compared_peaks_at_end

COLUMNS = {
    "run": "run",
    "agents": "agents",
    "replicates": "replicates",
    "peak_hospital_occupancy": "peak hospital beds in use (mean curve, of the agents)",
    "peak_hospital_occupancy_per_100k": "peak beds per 100k",
    "peak_hospital_day": "day of peak",
    "peak_hospital_date": "date of peak",
    "peak_share_of_capacity": "peak / capacity",
    "days_over_capacity": "days over capacity",
    "share_of_days_over_capacity": "share of days over capacity",
    "peak_icu_per_100k": "peak ICU beds per 100k",
    "days_over_icu_capacity": "days over ICU capacity",
    "cumulative_infected_share": "cumulative infected share",
    "deaths": "deaths (mean, of the agents)",
    "hospitalizations": "hospitalizations (mean, of the agents)",
    "total_cost": "total cost $ (mean, for the agents)",
    "cost_per_averted_hospitalization": "cost per averted hospitalization $ (vs first run, 95% interval)",
    "cost_per_averted_death": "cost per averted death $ (vs first run, 95% interval)",
    "hospitalizations_averted_per_100k": "hospitalizations averted per 100k (95% interval)",
    "hospitalizations_averted_low": "low end of that interval",
    "hospitalizations_averted_high": "high end of that interval",
    "deaths_averted_per_100k": "deaths averted per 100k (95% interval)",
    "deaths_averted_low": "low end of that interval",
    "deaths_averted_high": "high end of that interval",
    "cost_per_averted_low": "low end of the cost per averted hospitalization's interval",
    "cost_per_averted_high": "high end of the cost per averted hospitalization's interval",
    "cost_per_averted_death_low": "low end of the cost per averted death's interval",
    "cost_per_averted_death_high": "high end of the cost per averted death's interval",
    "averted_by": "averted by",
    **compare_reproduction.LABELS,
    "region": "region",
    "total_cost_region": "total cost $ in the region",
    "hospitalizations_averted_region": "hospitalizations averted in the region (95% interval)",
    "hospitalizations_averted_region_low": "low end of that interval",
    "hospitalizations_averted_region_high": "high end of that interval",
    "deaths_averted_region": "deaths averted in the region (95% interval)",
    "deaths_averted_region_low": "low end of that interval",
    "deaths_averted_region_high": "high end of that interval",
}
# The columns scaled to each run's region (its summary's region_population): shown in a table of
# their own, after the run's name and region.
REGION_COLUMNS = ("total_cost_region", "hospitalizations_averted_region", "deaths_averted_region")
# Shown in the Markdown and HTML tables as one cell "mean (low to high)".
AVERTED = ("hospitalizations", "deaths")
INTERVALS = {f"{m}_averted_per_100k": (f"{m}_averted_low", f"{m}_averted_high") for m in AVERTED}
INTERVALS |= {f"{m}_averted_region": (f"{m}_averted_region_low", f"{m}_averted_region_high") for m in AVERTED}
# The cost per averted hospitalization and per averted death: (measure averted, its column, its interval's ends).
COST_PER_AVERTED = (
    ("hospitalizations", "cost_per_averted_hospitalization", differences.COST_ENDS["hospitalizations"]),
    ("deaths", "cost_per_averted_death", differences.COST_ENDS["deaths"]),
)
INTERVALS |= {column: ends for _, column, ends in COST_PER_AVERTED}
INTERVALS |= compare_reproduction.ENDS


class CompareError(ValueError):
    """A run folder cannot be compared. The message is for the user."""


def hospitalizations(run: RunTables) -> float:
    """Mean hospital admissions over the run: the timeseries' ``new_hospitalizations`` summed per
    replicate, averaged over the replicates (a run's timeseries has the column; a folder without
    it is refused by :func:`run_problems`)."""
    return float(run.timeseries.groupby("replicate")["new_hospitalizations"].sum().mean())


# What the table and the plots read of a run's summary.json: top-level numbers, and the numbers
# read inside its sections (a peak's day may be null: a curve that stays at zero).
SUMMARY_NUMBERS = ("agents", "days", "replicates")
SUMMARY_SECTIONS = {
    "peak_hospital_occupancy": ("value", "day", "per_100k"),
    "peak_icu": ("per_100k",),
    "hospital_capacity": ("beds", "beds_per_100k", "days_over_capacity"),
    "cumulative_infected": ("share",),
    "deaths": ("mean",),
    "total_cost": ("mean",),
}
# The columns the plots and the averted counts (abm.outputs.differences) read of a run's tables.
TIMESERIES = "timeseries.parquet (or .csv)"
TABLE_COLUMNS = {
    TIMESERIES: (
        "day",
        "replicate",
        "hospital_occupancy",
        "icu",
        "new_infections",
        "cumulative_infected",
        "new_hospitalizations",
        "deaths",
    ),
    "by_age.csv": ("day", "replicate", "age_group", "agents", "cumulative_infected", "deaths"),  # deaths by age
    "costs.csv": ("item", "day", "replicate", "count", "unit_cost"),
}
# The tables with one row per replicate, day and these columns' values (costs.csv has rows for
# the booked items only).
TABLE_GROUPS = {TIMESERIES: (), "by_age.csv": ("age_group",)}
# The columns of TABLE_COLUMNS that hold text, not numbers.
TEXT_COLUMNS = ("age_group", "item")
# Columns compare reads where a run has them (the reproduction number's plot): checked as above,
# and a run without them is compared without that plot's line. reproduction_number and
# generation_interval may be empty by design, so a cut row shows in secondary_infections.
OPTIONAL_COLUMNS = {TIMESERIES: ("secondary_infections",)}


def _is_number(v: Any) -> bool:
    """Whether a JSON or table value is a number (numpy's too; true and false are not)."""
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def run_problems(run: RunTables) -> list[str]:
    """What a run read from a folder lacks for the table and the plots (summary.json entries
    missing or not numbers, table columns missing); empty when it can be compared."""
    s = run.summary
    if not isinstance(s, dict):
        return [f"summary.json holds a JSON {type(s).__name__}, not an object"]
    problems = [] if isinstance(s.get("scenario"), str) else ["summary.json lacks the scenario's name (scenario)"]
    lacking = [f"{k} (above 0)" for k in SUMMARY_NUMBERS if not _is_number(s.get(k)) or s[k] <= 0]
    lacking += [f"{k} (a whole number)" for k in SUMMARY_NUMBERS if _is_number(s.get(k)) and s[k] % 1]
    for section, keys in SUMMARY_SECTIONS.items():
        entries = s.get(section) if isinstance(s.get(section), dict) else {}
        no_peak = {"day"} if "day" in entries and entries["day"] is None else set()
        lacking += [f"{section}.{k}" for k in keys if k not in no_peak and not _is_number(entries.get(k))]
    lacking += compare_reproduction.summary_problems(s)
    problems += [f"summary.json lacks the numbers {', '.join(lacking)}"] if lacking else []
    tables = {TIMESERIES: run.timeseries, "by_age.csv": run.by_age, "costs.csv": run.costs}
    for name, columns in TABLE_COLUMNS.items():
        missing = [c for c in columns if c not in tables[name]]
        problems += [f"{name} lacks the columns {', '.join(missing)}"] if missing else []
    if problems:
        return problems
    for name, table in tables.items():
        optional = tuple(c for c in OPTIONAL_COLUMNS.get(name, ()) if c in table)
        problems += cell_problems(name, table, TABLE_COLUMNS[name] + optional)
    if problems:
        return problems
    counts = {"replicates": s["replicates"], "days": s["days"]}
    for name, table in tables.items():
        problems += grid_problems(name, table, counts, TABLE_GROUPS.get(name))
    return problems


def cell_problems(name: str, table: pd.DataFrame, columns: tuple[str, ...]) -> list[str]:
    """What is wrong with the cells of a run's table (``name``) in the ``columns`` compare reads:
    empty cells (a table cut short, as a copy that stopped half-way leaves it) and, outside
    :data:`TEXT_COLUMNS`, cells that are not numbers. Empty when every cell holds a value."""
    bad = pd.DataFrame(
        {c: table[c].isna() if c in TEXT_COLUMNS else pd.to_numeric(table[c], errors="coerce").isna() for c in columns}
    )
    rows = bad.any(axis=1).to_numpy()
    if not rows.any():
        return []
    listed = ", ".join(c for c in columns if bad[c].any())
    first = int(rows.argmax())
    return [
        f"{name} holds {counted(int(bad.to_numpy().sum()), 'empty or non-number cell')} in {listed}, the first "
        f"in row {first + 1:,} of its {len(table):,} rows"
    ]


def _listed(values: Iterable[Any]) -> str:
    """Values as a message lists them, in order (mixed types by their text)."""
    return ", ".join(str(v) for v in sorted(values, key=lambda v: (not _is_number(v), v if _is_number(v) else str(v))))


def grid_problems(name: str, table: pd.DataFrame, counts: dict[str, int], groups: tuple[str, ...] | None) -> list[str]:
    """What is wrong with the replicates and days of a run's table (``name``) against its
    summary.json's ``counts`` (``replicates``, ``days``): a replicate or day beyond them; and for a
    table with a row per replicate, day and ``groups`` (``None``: one with the rows of booked items
    only, costs.csv), a replicate without rows, rows missing or a row twice. Empty when it agrees:
    the averted counts pair replicate r of two runs and sum each replicate's days."""
    ranges = {"replicate": range(int(counts["replicates"])), "day": range(int(counts["days"]))}
    said = {c: f"summary.json's {counted(len(r), c)} (0 to {len(r) - 1})" for c, r in ranges.items()}
    problems = []
    for column, allowed in ranges.items():
        beyond = {v for v in table[column].tolist() if v not in allowed}
        if beyond:
            problems.append(f"{name} holds {plural(column, len(beyond))} {_listed(beyond)} beyond {said[column]}")
    if problems or groups is None:
        return problems
    lacking = set(ranges["replicate"]) - set(table["replicate"].tolist())
    if lacking:
        return [f"{name} lacks {plural('replicate', len(lacking))} {_listed(lacking)} of {said['replicate']}"]
    keys = ["replicate", *groups, "day"]
    rows = pd.MultiIndex.from_frame(table[keys])
    if rows.has_duplicates:
        first = rows[rows.duplicated()][0]
        return [f"{name} holds the row of {_row(keys, first)} more than once"]
    expected = pd.MultiIndex.from_product(
        [ranges["replicate"], *(sorted(set(table[g].tolist()), key=str) for g in groups), ranges["day"]], names=keys
    )
    missing = expected.difference(rows, sort=False)
    if len(missing):
        each = "".join(f" (and each {g})" for g in groups)
        return [
            f"{name} lacks {counted(len(missing), 'row')}, the first of {_row(keys, missing[0])}: every replicate "
            f"needs one row for each day 0 to {len(ranges['day']) - 1}{each}"
        ]
    return []


def _row(keys: list[str], values: tuple[Any, ...]) -> str:
    """A table's row by its key columns: ``replicate 0, day 5``."""
    return ", ".join(f"{k} {v}" for k, v in zip(keys, values, strict=True))


def comparison_table(runs: list[RunTables]) -> pd.DataFrame:
    """One row per run with the measures of :data:`COLUMNS` (machine names); the peak's date only
    where a run has dates (``simulation.start_date``; empty for a run without, or without a peak)."""
    dated = any(run.summary.get("start_date") for run in runs)
    rows = []
    for run in runs:
        s = run.summary
        n = run.agents
        occ, cap = s["peak_hospital_occupancy"], s["hospital_capacity"]
        hosp = hospitalizations(run)
        peak_date = occ.get("date") if isinstance(occ.get("date"), str) else None
        icu = s.get("icu_capacity")  # none: a region without an ICU figure, or an earlier version's run
        icu_days = icu.get("days_over_capacity") if isinstance(icu, dict) else None
        rows.append(
            {
                "run": run.label,
                "agents": n,
                "replicates": run.replicates,
                "peak_hospital_occupancy": occ["value"],
                "peak_hospital_occupancy_per_100k": occ["per_100k"],
                "peak_hospital_day": math.nan if occ["day"] is None else occ["day"],  # no peak: empty
                **({"peak_hospital_date": peak_date} if dated else {}),
                "peak_share_of_capacity": occ["value"] / cap["beds"] if cap["beds"] else math.nan,
                "days_over_capacity": cap["days_over_capacity"],
                "share_of_days_over_capacity": cap["days_over_capacity"] / s["days"],
                "peak_icu_per_100k": s["peak_icu"]["per_100k"],
                "days_over_icu_capacity": icu_days if _is_number(icu_days) else math.nan,
                "cumulative_infected_share": s["cumulative_infected"]["share"],
                "deaths": s["deaths"]["mean"],
                "hospitalizations": hosp,
                "total_cost": s["total_cost"]["mean"],
            }
        )
    table = pd.DataFrame(rows)
    base = table.iloc[0]
    extra = table["total_cost"] / table["agents"] - base["total_cost"] / base["agents"]
    for measure, column, _ in COST_PER_AVERTED:  # per agent, so that runs of different sizes compare
        averted = base[measure] / base["agents"] - table[measure] / table["agents"]
        ratio = (extra / averted).where(averted > 0)
        ratio.iloc[0] = math.nan
        table[column] = ratio
    table = pd.concat([table, pd.DataFrame(differences.averted(runs))], axis=1)
    table = pd.concat([table, compare_reproduction.columns([run.summary for run in runs])], axis=1)
    for _, column, ends in COST_PER_AVERTED:
        table.loc[table[column].isna(), list(ends)] = math.nan  # no ratio (nothing averted): no interval either
    return with_region_figures(table, runs)


def with_region_figures(table: pd.DataFrame, runs: list[RunTables]) -> pd.DataFrame:
    """``table`` with the columns of :data:`REGION_COLUMNS` (and their intervals' ends): each
    run's total cost times its region's residents over its agents, and its hospitalizations and
    deaths averted per 100,000 times its residents over 100,000; blank for a run whose summary
    has no region population. Taking the agents for a representative sample of the residents is
    the same assumption as summary.json's ``region_scaled``."""
    table["region"] = [str(run.summary.get("region") or "") for run in runs]
    people = [run.summary.get("region_population") for run in runs]
    residents = pd.Series([float(p) if _is_number(p) and p > 0 else math.nan for p in people], index=table.index)
    table["total_cost_region"] = table["total_cost"] * residents / table["agents"]
    for m in AVERTED:
        for per_100k, region in (
            (f"{m}_averted_per_100k", f"{m}_averted_region"),
            *zip(INTERVALS[f"{m}_averted_per_100k"], INTERVALS[f"{m}_averted_region"], strict=True),
        ):
            table[region] = table[per_100k] * residents / 1e5
    return table


# How the Markdown and HTML tables show a column's numbers (:func:`column_places`): shares in %,
# whole counts, and money in dollars; any other column is a mean count or a figure per 100,000.
SHARES = ("peak_share_of_capacity", "share_of_days_over_capacity", "cumulative_infected_share")
COUNTS = ("agents", "replicates", "peak_hospital_day", "days_over_capacity", "days_over_icu_capacity")
MONEY = ("total_cost", "cost_per_averted_hospitalization", "cost_per_averted_death", "total_cost_region")
# Region figures are estimates of whole people: shown without decimals, as counts are.
WHOLE = ("hospitalizations_averted_region", "deaths_averted_region")


def column_places(key: str, values: Iterable[Any]) -> int:
    """The decimal places of every number in column ``key`` of the Markdown and HTML tables, from
    the column's ``values`` (an interval's ends too), so that a column's numbers line up: none
    for counts; for money whole dollars when every value but 0 is at least $100, else cents for
    all; for the first week's reproduction number and its change two
    (:data:`abm.outputs.compare_reproduction.PLACES`); one place for the others (shares in %). More
    only where the smallest value but 0 would read as 0, to show its first significant digit: 0.04
    deaths, not 0.0; 0.04%, not 0.0%; $0.004, not $0.00 (an interval's end of -$0.007 reads -0.01 in
    cents, so its column keeps cents, not $1,058.366). Blank and infinite values do not count."""
    if key in COUNTS or key in WHOLE:
        return 0
    scale = 100 if key in SHARES else 1
    sizes = [abs(scale * float(v)) for v in values if _is_number(v) and math.isfinite(v) and v != 0]
    if key in MONEY and all(size >= 100 for size in sizes):
        return 0
    places = 2 if key in MONEY else compare_reproduction.PLACES.get(key, 1)
    smallest = min(sizes, default=0.0)
    if smallest and float(f"{smallest:.{places}f}") == 0:  # it would read as 0
        places = -math.floor(math.log10(smallest))
    return places


def format_cell(key: str, v: Any, places: int | None = None) -> str:
    """A table value as shown in the Markdown and HTML tables, with thousands separators (shares
    in %, money in dollars): with ``places`` decimal places (the column's, of
    :func:`column_places`), or, not given, as many as the value alone needs."""
    if isinstance(v, str):
        return v
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    places = column_places(key, [v]) if places is None else places
    if key in SHARES:
        return without_minus_zero(f"{100 * v:,.{places}f}%")
    return without_minus_zero(f"{v:,.{places}f}")


def shown(table: pd.DataFrame, region: bool = False) -> tuple[list[str], list[list[str]]]:
    """The table as the Markdown and HTML reports show it: its columns (an interval's ends folded
    into its mean's cell, "mean (low to high)") and each row's cells as text, each column's
    numbers with the same decimal places (:func:`column_places`); the reproduction number's and
    generation interval's cells as :func:`abm.outputs.compare_reproduction.cell` gives them ("n/a"
    for a run without them, their replicates folded into the mean's cell). The main table leaves
    out the region's figures, which ``region`` shows instead, after each run's name and region."""
    folded = {end for pair in INTERVALS.values() for end in pair} | set(compare_reproduction.REPLICATES.values())
    if region:
        keys = ["run", "region", *REGION_COLUMNS]
    else:
        keys = [c for c in table.columns if c not in folded and c not in REGION_COLUMNS and c != "region"]
    places = {
        key: column_places(key, [v for c in (key, *INTERVALS.get(key, ())) for v in table[c].tolist()]) for key in keys
    }

    def cell(row: pd.Series, key: str, first: bool) -> str:
        text = format_cell(key, row[key], places[key])
        if key in INTERVALS and text:
            ends = [row[end] for end in INTERVALS[key]]
            low, high = (format_cell(key, v, places[key]) for v in ends)
            if all(math.isinf(v) for v in ends):
                text += " (unbounded)"
            else:
                text += f" ({low} to {high})" if low and high else f" ({differences.NO_INTERVAL})"
        return compare_reproduction.cell(key, text, row, first)

    return keys, [[cell(row, k, i == 0) for k in keys] for i, (_, row) in enumerate(table.iterrows())]


# Scenario keys that may differ between compared runs without a word: what a comparison is of
# (interventions), names, outputs, and settings that change no result's meaning (a seed changes
# the draws, whose noise the averted counts' intervals show; a start date only names the days).
EXPECTED_DIFFERENCES = ("name", "description", "interventions", "outputs", "calibration", "simulation.device",
                        "simulation.threads", "simulation.replicates", "simulation.seed",
                        "simulation.start_date")  # fmt: skip


def flat(tree: Any, prefix: str = "") -> dict[str, Any]:
    """A nested mapping as {key path: leaf value}: mappings' keys dotted, the items of a list of
    mappings by their index as ``--set`` takes them (``disease.dwell_times[3].scale``), so that a
    difference names the entry that differs; any other list is a leaf (``[2.0, 4.0, 3.0]``)."""
    if isinstance(tree, list) and tree and all(isinstance(item, dict) for item in tree):
        return {k: v for i, item in enumerate(tree) for k, v in flat(item, f"{prefix}[{i}]").items()}
    if not isinstance(tree, dict):
        return {prefix: tree}
    out: dict[str, Any] = {}
    for key, value in tree.items():
        out.update(flat(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def _path_order(key: str) -> list[tuple[int, Any]]:
    """A key path's sort key: its names in order, and list indices as numbers (``[2]`` before
    ``[10]``)."""
    return [(0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"[.\[\]]+", key) if part]


def scenario_differences(runs: list[RunTables]) -> dict[str, list[Any]]:
    """The scenario values, run by run, of each key that differs between the runs outside
    :data:`EXPECTED_DIFFERENCES` (runs whose scenario is not known are left out), by key path
    (:func:`flat`)."""
    known = [flat(run.scenario) for run in runs if run.scenario is not None]
    keys = sorted({k for f in known for k in f}, key=_path_order)
    expected = tuple(f"{e}." for e in EXPECTED_DIFFERENCES)
    return {
        k: [f.get(k) for f in known]
        for k in keys
        if k not in EXPECTED_DIFFERENCES
        and not k.startswith(expected)
        and len({json.dumps(f.get(k), sort_keys=True) for f in known}) > 1
    }


def cost_per_averted_notes(table: pd.DataFrame, measure: str, column: str, ends: tuple[str, str]) -> list[str]:
    """The notes (each a sentence without its full stop) naming the runs whose cost per averted
    ``measure`` (``column``, its
    interval's ends ``ends``) is not reliable: what they avert is within noise, or cannot be
    told from it (one replicate), or the ratio's interval is unbounded though it is not, or the
    interval includes 0. A bounded Fieller interval includes 0 exactly when the extra cost's own t
    interval does (at a ratio of 0 Fieller's condition reads |mean extra cost| <= t sd), so its
    end below 0 is the noise of the cost, not a saving the runs show."""
    low, high = ends
    one = {"hospitalizations": "hospitalization", "deaths": "death"}[measure]
    costed = [row for _, row in table.iloc[1:].iterrows() if not math.isnan(row[column])]
    within = [str(row.run) for row in costed if row[f"{measure}_averted_low"] <= 0]
    single = [str(row.run) for row in costed if math.isnan(row[f"{measure}_averted_low"])]  # one replicate
    notes = []
    for runs_, why in (
        (within, "are not beyond noise"),
        (single, "cannot be told from noise with one replicate (no interval)"),
    ):
        if runs_:
            notes.append(
                f"The {measure} averted by {', '.join(runs_)} {why}, so their cost per averted {one} is not "
                "reliable: run more replicates"
            )
    # Fieller's t for independent runs (the smaller run's degrees of freedom) is wider than Welch's for
    # the averted count, so a cost interval can be unbounded though the averted interval excludes 0.
    wide = [
        str(row.run)
        for _, row in table.iloc[1:].iterrows()
        if str(row.run) not in within + single and math.isinf(row[low])
    ]
    if wide:
        notes.append(
            f"The cost per averted {one} of {', '.join(wide)} has an unbounded 95% interval although the "
            f"{measure} averted are beyond noise: compared as independent runs, too few replicates for the ratio; "
            "run more replicates"
        )
    crossing = [
        str(row.run)
        for row in costed
        if str(row.run) not in within + single
        and math.isfinite(row[low])
        and math.isfinite(row[high])
        and row[low] <= 0 <= row[high]
        and row[low] < row[high]
    ]
    if crossing:
        base = table.iloc[0]["run"]
        notes.append(
            f"The 95% interval of the cost per averted {one} includes 0 for {', '.join(crossing)}: the cost "
            f"differs from {base}'s by less than the replicates' noise, so an end below 0 is not a saving the runs "
            "show; run more replicates"
        )
    return notes


# How a negative number averted reads, in the note under the table and the region's table.
NEGATIVE_AVERTED = "A negative number averted is that many more than the first run"


def _negative_averted_note(table: pd.DataFrame) -> str:
    """The sentence naming the runs that avert fewer than none (hospitalizations or deaths averted
    below 0 on average): their negative count averted is that many more than the first run."""
    rest = table.iloc[1:]
    more = []
    for measure in AVERTED:
        runs_ = rest.loc[rest[f"{measure}_averted_per_100k"] < 0, "run"].astype(str).tolist()
        more += [f"{measure} in {', '.join(runs_)}"] if runs_ else []
    if not more:
        return ""
    return f" {NEGATIVE_AVERTED}, {table.iloc[0]['run']}: more {'; more '.join(more)}."


def note_parts(runs: list[RunTables], table: pd.DataFrame | None = None) -> list[str | ResultNote]:
    """The note under the table (``table``: theirs, made here when not given), in its parts:
    explanations (text, each but the first with its leading space, with its full stops) and the
    notes on the results (:class:`abm.result_notes.ResultNote`, each a sentence without its full
    stop, which :func:`abm.compare` gives as warnings): what the costs
    count (the items the runs booked at a price in costs.csv; unpriced work is free), how to read a negative
    cost per averted hospitalization and the averted counts' intervals (naming the runs that avert
    a negative number, that is have more than the first run, and those whose cost per averted
    hospitalization rests on a difference within noise or has an interval that includes 0), each run's hospital
    capacity and region where they differ, the scenario values other than interventions that differ
    (a different epidemic, not only a different intervention), and how the reproduction number and
    generation interval are taken, naming the runs without them
    (:func:`abm.outputs.compare_reproduction.lacking_notes`), and the runs whose hospital curve
    is at its maximum on the last day (:func:`abm.result_notes.compared_peaks_at_end`)."""
    priced = sorted(
        {str(item) for run in runs if len(run.costs) for item in run.costs.loc[run.costs["unit_cost"] > 0, "item"]}
    )
    items = ", ".join(priced) if priced else "none"
    scales = dict.fromkeys(  # in the runs' order
        (run.agents, run.summary.get("region_population")) for run in runs if run.summary.get("region_population")
    )
    county = "; ".join(
        f"{people:,} residents / {agents:,} agents = x {people / agents:,.1f}" for agents, people in scales
    )
    note = (
        "Beds, deaths, hospitalizations and costs are of each run's simulated agents (the agents column), not of "
        f"the region: multiply by its residents over the agents for the region's figures ({county or 'unknown'}); "
        "shares and figures per 100,000 compare as they are. "
        f"Costs are the items each run booked at a price in its costs.csv ({items}). An intervention's work without a "
        "price in the scenario costs nothing: by default tracing notifications, interviews and quarantine days "
        "(digital_tracing.cost_per_notification, manual_tracing.cost_per_interview, quarantine.cost_per_day). "
        "A negative cost per averted hospitalization (or death) means fewer hospitalizations (or deaths) for less "
        "money than the first run; each is blank for the first run and for a run that averts none (or has more "
        "than the first run). "
        f"The first run, the baseline of every comparison here, is {runs[0].label}."
    )
    note += (
        " Hospitalizations and deaths averted are per 100,000 agents against the first run, with 95% intervals "
        "over replicates: taken replicate by replicate where a run shares the first run's seed, agents, number "
        "of replicates, region and kind of device (common random numbers), else as independent runs (Welch); "
        "an interval that includes 0 is a difference within the replicates' noise. The cost per averted "
        "hospitalization's (and death's) 95% interval is Fieller's for a ratio of means (for independent runs, "
        "with the t quantile of the smaller run's replicates less one); it is unbounded when the hospitalizations "
        "(deaths) averted are within noise."
    )
    table = comparison_table(runs) if table is None else table
    parts: list[str | ResultNote] = [note, _negative_averted_note(table)]
    for measure, column, ends in COST_PER_AVERTED:
        parts += map(ResultNote, cost_per_averted_notes(table, measure, column, ends))
    labels, summaries = [run.label for run in runs], [run.summary for run in runs]
    parts.append(compare_reproduction.explained(labels, summaries))
    parts += map(ResultNote, compare_reproduction.lacking_notes(labels, summaries))
    # at_end: the hospital curve is at its maximum on the last day, the peak may come after the run
    ends = {run.label: peak_at_end(run.summary["peak_hospital_occupancy"], run.days) for run in runs}
    peaks = compared_peaks_at_end(ends)
    parts += peaks
    if peaks:
        parts.append(" The day of peak is the first day the mean curve reaches its maximum.")
    return parts + list(map(ResultNote, difference_notes(runs)))


def table_note(runs: list[RunTables], table: pd.DataFrame | None = None) -> str:
    """The note under the table (``table``: theirs, made here when not given), as comparison.md,
    report.html and ``abm compare`` give it: the parts of :func:`note_parts` in one paragraph."""
    return "".join(f" {part}." if isinstance(part, ResultNote) else part for part in note_parts(runs, table))


def difference_notes(runs: list[RunTables]) -> list[str]:
    """The notes (each a sentence without its full stop) on what differs between the runs besides
    their interventions: their hospital or ICU capacities, regions, dates of day 0, and scenario
    values (:func:`scenario_differences`; a different epidemic, not only a different
    intervention)."""
    notes = []
    if len({run.beds_per_100k for run in runs}) > 1:  # outputs.hospital_beds_per_100k, or the regions' own
        listed = ", ".join(f"{run.label}: {run.beds_per_100k:g}" for run in runs)
        notes.append(
            f"The runs are measured against different hospital capacities ({listed} beds per 100,000): each "
            "run's peak / capacity and days over capacity are against its own capacity, so they differ by more "
            "than the interventions' effect"
        )
    icu = [run.icu_beds_per_100k for run in runs]
    if len(set(icu)) > 1:  # outputs.icu_beds_per_100k, or the regions' own (or none)
        pairs = list(zip(runs, icu, strict=True))
        listed = ", ".join(f"{run.label}: {b:g}" for run, b in pairs if b is not None)
        none = [run.label for run, b in pairs if b is None]
        listed = "; ".join(
            ([f"{listed} ICU beds per 100,000"] if listed else []) + ([f"none for {', '.join(none)}"] if none else [])
        )
        notes.append(
            f"The runs are measured against different ICU capacities ({listed}): each run's days over ICU "
            "capacity are against its own"
        )
    regions = {run.summary.get("region") for run in runs}
    if len(regions) > 1:
        listed = ", ".join(f"{run.label}: {run.summary.get('region')}" for run in runs)
        notes.append(
            f"The runs are of different regions ({listed}): shares and figures per agent or per 100,000 "
            "compare, capacities and county totals differ"
        )
    starts = {run.summary.get("start_date") for run in runs}
    if len(starts) > 1:  # simulation.start_date: it changes no result, but the days are other dates
        listed = ", ".join(f"{run.label}: {run.summary.get('start_date') or 'none'}" for run in runs)
        notes.append(
            f"The runs give different dates for day 0 ({listed}): they are compared day by day, so the same "
            "day is not the same date in each"
        )
    differ = scenario_differences(runs)
    if differ:
        labels = [run.label for run in runs if run.scenario is not None]
        shown = [
            f"{key} ({', '.join(f'{label}: {json.dumps(v)}' for label, v in zip(labels, values, strict=True))})"
            for key, values in list(differ.items())[:5]
        ]
        more = f" and {len(differ) - 5} more" if len(differ) > 5 else ""
        notes.append(
            f"The runs differ in more than their interventions: {'; '.join(shown)}{more}; their differences "
            "are not the interventions' effect alone"
        )
    return notes


REGION_NOTE = (
    "Scaled to each run's region: its total cost times the region's residents over its agents, and the "
    "hospitalizations and deaths it averts per 100,000 (with their 95% intervals) times the residents over "
    f"100,000, which takes the agents for a representative sample of the residents. {NEGATIVE_AVERTED}."
)


def has_region_figures(table: pd.DataFrame) -> bool:
    """Whether some run of ``table`` has figures scaled to its region (its summary gives the
    region's residents)."""
    return "total_cost_region" in table and bool(table["total_cost_region"].notna().any())


def markdown(table: pd.DataFrame, note: str = "") -> str:
    """The table in Markdown, with readable headers and numbers (and ``note`` below it), then the
    figures scaled to the runs' regions (:data:`REGION_COLUMNS`) in a table of their own."""

    def block(region: bool) -> list[str]:
        keys, rows = shown(table, region)
        head = "| " + " | ".join(COLUMNS[c] for c in keys) + " |"
        rule = "|" + "|".join("---" if c in ("run", "averted_by", "region") else "---:" for c in keys) + "|"
        return [head, rule, *("| " + " | ".join(row) + " |" for row in rows)]

    text = "\n".join(block(False)) + "\n" + (f"\n{note}\n" if note else "")
    if has_region_figures(table):
        text += "\n" + "\n".join(block(True)) + f"\n\n{REGION_NOTE}\n"
    return text


def run_facts(run: RunTables) -> str:
    """What a run simulated, in words, for the report: its scenario's description, days,
    agents (with the factor to the region's residents), replicates and seed."""
    s = run.summary
    description = (run.scenario or {}).get("description")
    agents = f"{run.agents:,} agents"
    people = s.get("region_population")
    if _is_number(people) and people > 0:
        agents += f" (x {people / run.agents:,.1f} for the region's {int(people):,} residents)"
    facts = [f"{counted(run.days, 'day')} (day 0 to {run.days - 1})", agents, counted(run.replicates, "replicate")]
    if _is_number(s.get("seed")):
        facts.append(f"seed {s['seed']}")
    text = ", ".join(facts)
    return f"{description.rstrip('.')}; {text}" if isinstance(description, str) and description else text


def _html_report(
    table: pd.DataFrame,
    runs: list[RunTables],
    folders: list[Path | None],
    out: Path,
    ages: SummaryTable,
    drawn: set[str] | None = None,
) -> str:
    """The comparison's report.html; ``drawn``: the plot files written (all of PLOT_FILES when
    None): a plot not drawn (the reproduction number where no run has it) is not shown."""

    def link(target: Path, text: str) -> str:
        rel = os.path.relpath(target.resolve(), out.resolve())
        return f'<a href="{html.escape(rel)}">{html.escape(text)}</a>'

    def html_table(region: bool) -> str:
        keys, rows = shown(table, region)
        head = "".join(f"<th>{html.escape(COLUMNS[c])}</th>" for c in keys)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>" for row in rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    region_section = ""
    if has_region_figures(table):
        region_section = f"<h2>In the region</h2>{html_table(True)}<p>{html.escape(REGION_NOTE)}</p>"
    items = []
    for run, folder in zip(runs, folders, strict=True):
        facts = html.escape(run_facts(run))
        if folder is None:
            items.append(f"<li><b>{html.escape(run.label)}</b>: {facts}</li>")
            continue
        links = [link(folder, "folder")]
        for name, text in (
            ("scenario.resolved.yaml", "scenario"),
            ("map.html", "map"),
            ("summary.json", "summary"),
            ("timeseries.csv", "timeseries"),
        ):
            if (folder / name).exists():
                links.append(link(folder / name, text))
        plots = folder / "plots"
        if plots.is_dir():
            links += [link(p, p.stem) for p in sorted(plots.glob("*.png"))]
        items.append(f"<li><b>{html.escape(run.label)}</b>: {facts}. {', '.join(links)}</li>")
    figures = "".join(
        f'<figure><img src="plots/{name}" alt="{key}"><figcaption>{key.replace("_", " ")}</figcaption></figure>'
        for key, name in PLOT_FILES.items()
        if drawn is None or name in drawn
    )
    base = html.escape(runs[0].label)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Comparison: {", ".join(html.escape(r.label) for r in runs)}</title>
<style>
{REPORT_CSS}
</style></head><body>
<h1>Comparison of {len(runs)} runs</h1>
<p>Cost per averted hospitalization is against the first run, <b>{base}</b>. Files:
<a href="comparison.csv">comparison.csv</a>, <a href="comparison_by_age.csv">comparison_by_age.csv</a>,
<a href="comparison.md">comparison.md</a>.</p>
{html_table(False)}
<p>{html.escape(table_note(runs, table))}</p>
{region_section}
{html_pages.html_table(ages)}
<h2>Runs</h2><ul>{"".join(items)}</ul>
<h2>Plots</h2>{figures}
</body></html>
"""


@dataclass
class Comparison:
    """Runs side by side: ``table`` (one row per run), overlay ``plot()``, ``write(out)``."""

    runs: list[RunTables]
    folders: list[Path | None]

    def __repr__(self) -> str:
        """The runs compared, by label, in one line (their tables would fill a notebook's cell)."""
        return f"<Comparison of {counted(len(self.runs), 'run')}: {', '.join(repr(r.label) for r in self.runs)}>"

    @property
    def table(self) -> pd.DataFrame:
        """One row per run, in the order given: the measures of :data:`COLUMNS` (machine names;
        the first run is the reference for what the others avert), as comparison.csv holds them."""
        return comparison_table(self.runs)

    @property
    def notes(self) -> list[str]:
        """The notes on the runs compared that the paragraph under comparison.md's table gives, as
        :func:`compare` gives them (warnings of class :class:`abm.ResultNote`): costs per averted
        hospitalization or death that are not reliable, runs without the reproduction number,
        hospital curves at their maximum on the last day, runs that differ in more than their
        interventions (:func:`abm.result_notes.comparison_notes`); empty where there are none."""
        from abm.result_notes import comparison_notes

        return [str(note) for note in comparison_notes(self)]

    def plot(self, which: str = "hospital_occupancy") -> Any:
        """One overlay figure (see :data:`abm.outputs.plots.FIGURES`)."""
        from abm.outputs.plots import FIGURES

        if which not in FIGURES:
            raise ValueError(f"unknown plot {which!r}; choose from {', '.join(FIGURES)}")
        return FIGURES[which](self.runs)

    def write(self, out: str | Path) -> Path:
        """Write comparison.csv, comparison_by_age.csv, comparison.md, report.html and plots/
        (atomically). A report needs at least two runs (a :class:`CompareError` for one: nothing to
        compare; nothing is written)."""
        if len(self.runs) < 2:
            only = self.folders[0] if self.folders[0] is not None else self.runs[0].label
            raise CompareError(
                f"only one run given ({only}): a comparison needs at least two runs, the first the reference "
                "the others are compared with; give the runs to compare it with too"
            )
        out = output_path(out, "out")
        table = self.table
        with atomic_folder(out, "comparison") as tmp:
            # a day reads 54, not 54.0, and replicates 3, not 3.0 (NaN: no peak, no ICU capacity, no R)
            whole = ["peak_hospital_day", "days_over_icu_capacity", *compare_reproduction.REPLICATES.values()]
            days = table.astype(dict.fromkeys(whole, "Int64"))
            days.to_csv(tmp / "comparison.csv", index=False)
            ages = by_age_table(self.runs)
            ages.to_csv(tmp / "comparison_by_age.csv", index=False)
            ages_text = by_age_summary(ages)
            text = markdown(table, table_note(self.runs, table)) + "\n" + ages_text.markdown()
            (tmp / "comparison.md").write_text(text, encoding="utf-8")
            drawn = {p.name for p in write_plots(self.runs, tmp / "plots")}
            page = _html_report(table, self.runs, self.folders, out, ages_text, drawn)
            (tmp / "report.html").write_text(page, encoding="utf-8")
        return out


def not_a_run(folder: Path, missing: list[str]) -> str:
    """The message for a ``folder`` that lacks a run's files (``missing``): an output folder of
    another kind abm wrote (a comparison, a sweep...: its mark's kind; a comparison marked before
    marks had kinds: its comparison.csv) is named as such, and a run folder that abm wrote with
    them (its mark lists them) as one they were removed from."""
    kind = folder_kind(folder) if is_output_folder(folder) else None
    if kind is None and (folder / "comparison.csv").is_file():
        kind = "comparison"
    if kind == "run" and not set(missing) - set(written_entries(folder)):
        return (
            f"{folder}: is a run folder that lacks {', '.join(missing)}, removed since `abm run` wrote it; run it again"
        )
    if kind is not None and kind != "run":
        what = KINDS.get(kind, f"an abm {kind}")
        return f"{folder}: is {what} folder, not a run folder; compare takes run folders, written by `abm run`"
    return f"{folder}: not a run folder (missing {', '.join(missing)}); give folders written by `abm run`"


def run_result_type() -> tuple[type, ...]:
    """:class:`abm.RunResult` where :mod:`abm.runs` is loaded, else none: a result of ``abm.run``
    exists only once that module is, and importing it for a comparison of run folders would load
    torch (a second or more at every `abm compare`)."""
    module = sys.modules.get("abm.runs")
    return (module.RunResult,) if module is not None else ()


def load_runs(items: list[Any]) -> Comparison:
    """Runs from run folders and/or :class:`abm.RunResult` objects; labels made unique: runs of
    one scenario name are each labelled with their folder's name (or path)."""
    result_type = run_result_type()
    runs, folders = [], []
    given: dict[Path, Any] = {}
    for item in items:
        if isinstance(item, result_type):
            if sum(other is item for other in items) > 1:
                raise CompareError(f"the result of {item.summary['scenario']!r} is given twice; give each run once")
            runs.append(RunTables.from_result(item))
            folders.append(None)
            continue
        if not isinstance(item, (str, Path)):
            raise CompareError(f"{item!r}: not a run; give run folders or results of abm.run")
        folder = Path(item)
        if folder.resolve() in given:
            raise CompareError(f"{folder}: given twice (as {given[folder.resolve()]}); give each run once")
        given[folder.resolve()] = item
        if folder.is_file():
            raise CompareError(f"{folder}: is a file, not a run folder; give the folder written by `abm run`")
        if not folder.is_dir():
            raise CompareError(f"{folder}: no such run folder")
        unfinished = unfinished_write(folder)
        if unfinished is not None:
            raise CompareError(f"{folder}: {unfinished}")
        missing = [n for n in ("summary.json", "by_age.csv", "costs.csv") if not (folder / n).is_file()]
        if missing or not any((folder / n).is_file() for n in ("timeseries.parquet", "timeseries.csv")):
            raise CompareError(not_a_run(folder, missing or ["timeseries.parquet", "timeseries.csv"]))
        try:
            run = RunTables.from_folder(folder)
        except (ValueError, KeyError, OSError, yaml.YAMLError) as exc:
            raise CompareError(f"{folder}: cannot read the run ({exc})") from exc
        problems = run_problems(run)
        if problems:
            raise CompareError(
                f"{folder}: cannot be compared: {'; '.join(problems)}; it was not written by this version of "
                "`abm run`, or was edited since: run it again"
            )
        runs.append(run)
        folders.append(folder)
    if not runs:
        raise CompareError("give at least one run")
    used: set[str] = set()
    folder_names = [f.resolve().name for f in folders if f is not None]  # "." has a name too
    shared = {label for label in (r.label for r in runs) if [r.label for r in runs].count(label) > 1}
    for run, folder in zip(runs, folders, strict=True):  # a shared name: the folder's name, then its path
        names = [] if run.label in shared and folder is not None else [run.label]
        if folder is not None:  # the folder's name where it tells this run apart, else its path
            name = folder.resolve().name
            names += [f"{run.label} ({name})"] if folder_names.count(name) == 1 else []
            names += [f"{run.label} ({folder.resolve()})"]
        numbered = (f"{run.label} #{k}" for k in itertools.count(2))  # results of abm.run with one name
        label = next(name for name in itertools.chain(names, numbered) if name not in used)
        run.label = label
        used.add(label)
    horizons = {run.days for run in runs}
    if len(horizons) > 1:  # after the labels, so that results of one scenario are told apart
        listed = ", ".join(f"{f or r.label}: {r.days}" for r, f in zip(runs, folders, strict=True))
        raise CompareError(
            f"the runs simulate different numbers of days ({listed}); totals, costs and days over capacity "
            "compare only over the same horizon: re-run them with the same number of days (`abm run --days`, "
            "`abm.run(days=...)`)"
        )
    return Comparison(runs, folders)


def compare(items: list[Any] | Any, out: str | Path | None = None) -> Comparison:
    """Compare runs side by side, as ``abm compare`` does; return the :class:`Comparison` (its
    ``table`` a DataFrame, one row per run; ``plot()``; ``write(out)``).

    Arguments:
        items: the runs, in order: :class:`abm.RunResult` objects or run folders (paths), or one
            alone (one run). The first is the reference for what the others avert and their cost
            per averted hospitalization and death.
        out: a report folder to write (comparison.csv, comparison_by_age.csv, comparison.md,
            report.html, plots/), which needs at least two runs; None: nothing is written.

    Once the comparison is made (and ``out`` written), each note the paragraph under its table
    gives on the runs (:attr:`Comparison.notes`: a cost per averted hospitalization or death that
    is not reliable, runs without the reproduction number, hospital curves at their maximum on the
    last day, runs that differ in more than their interventions) is given, with its text, as a
    warning of class :class:`abm.ResultNote` that holds the comparison as ``note.result``.

    Raises :class:`CompareError` (a ``ValueError``) for runs that cannot be compared, and
    :class:`abm.outputs.run_folder.OutputFolderError` (a ``ValueError``) for an ``out`` that
    cannot be written without losing something; nothing is written then. Nothing is printed."""
    from abm import result_notes, scenario_notes

    one = isinstance(items, (str, Path, *run_result_type())) or not isinstance(items, Iterable)
    comp = load_runs([items] if one else list(items))
    if out is not None:
        comp.write(out)
    # the comparison complete: a filter that makes a note an error still hands it over (note.result)
    scenario_notes.warn(result_notes.with_result(result_notes.comparison_notes(comp), comp))
    return comp
