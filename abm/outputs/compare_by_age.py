"""Deaths by age in a comparison: per run and ten-year age group, the share of the group infected
and its deaths per 100,000 of the group, and for every run after the first the deaths it averts
in each group with a 95% interval over replicates (paired where the runs share their draws, as
the main table's; :mod:`abm.outputs.differences`). Read from each run's ``by_age.csv`` on its
last day; written as ``comparison_by_age.csv`` and shown in ``comparison.md`` and ``report.html``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from abm.outputs.differences import LEVEL, NO_INTERVAL, paired, paired_interval, welch_interval
from abm.outputs.plots import RunTables
from abm.outputs.summary_table import RESIDENTS, SummaryTable, fixed, without_minus_zero

# comparison_by_age.csv's columns, in order.
COLUMNS = [
    "run", "age_group", "agents", "infected_share", "deaths_per_100k",
    "deaths_averted_per_100k", "deaths_averted_low", "deaths_averted_high", "averted_by",
]  # fmt: skip


def last_day_by_age(run: RunTables) -> tuple[pd.Series, pd.DataFrame, pd.DataFrame]:
    """A run's agents per age group, and per replicate (rows, in order) and age group (columns,
    in the order of ``by_age.csv``) those infected and dead by its last day."""
    t = run.by_age
    last = t[t["day"] == t["day"].max()]
    groups = list(dict.fromkeys(t["age_group"]))
    agents = last.groupby("age_group", sort=False)["agents"].first().reindex(groups)
    infected = last.pivot(index="replicate", columns="age_group", values="cumulative_infected")[groups]
    deaths = last.pivot(index="replicate", columns="age_group", values="deaths")[groups]
    return agents, infected.sort_index(), deaths.sort_index()


def residents_by_replicate(run: RunTables) -> tuple[float, np.ndarray, np.ndarray] | None:
    """A run's long-term-care residents, and per replicate those infected and dead by its last
    day (its summary's ``long_term_care_residents``); None for a run without residents, or one
    written before abm kept them per replicate."""
    care = run.summary.get("long_term_care_residents")
    if not isinstance(care, dict) or "by_replicate" not in care:
        return None
    each = care["by_replicate"]
    return float(care["agents"]), np.asarray(each["infected"], dtype=float), np.asarray(each["deaths"], dtype=float)


def groups_of(run: RunTables, residents: bool) -> dict[str, tuple[float, np.ndarray, np.ndarray]]:
    """A run's groups (the age groups, then :data:`RESIDENTS` with ``residents``): each one's
    agents and, per replicate, those infected and dead by the last day."""
    agents, infected, deaths = last_day_by_age(run)
    out = {
        str(g): (float(agents[g]), infected[g].to_numpy(dtype=float), deaths[g].to_numpy(dtype=float))
        for g in agents.index
    }
    care = residents_by_replicate(run) if residents else None
    if care is not None:
        out[RESIDENTS] = care
    return out


def by_age_table(runs: list[RunTables], level: float = LEVEL) -> pd.DataFrame:
    """One row per run and age group (:data:`COLUMNS`): the share of the group infected and its
    deaths per 100,000 of the group (means over replicates), and the deaths per 100,000 of the
    group the run averts against the first run, with its interval (empty for the first run).
    Where every run has long-term-care residents, a row for them follows the age groups (they are
    in their age groups too)."""
    residents = all(residents_by_replicate(run) is not None for run in runs)
    first = groups_of(runs[0], residents)
    rows = []
    for i, run in enumerate(runs):
        same = i > 0 and paired(runs[0], run)
        for group, (n, infected, deaths) in groups_of(run, residents).items():
            per_100k = deaths * 1e5 / n if n else np.full(len(deaths), math.nan)
            row = {
                "run": run.label,
                "age_group": group,
                "agents": int(n),
                "infected_share": float(infected.mean() / n) if n else math.nan,
                "deaths_per_100k": float(per_100k.mean()),
                "deaths_averted_per_100k": math.nan,
                "deaths_averted_low": math.nan,
                "deaths_averted_high": math.nan,
                "averted_by": "",
            }
            base_n, _, base_deaths = first.get(group, (0.0, None, None))
            if i > 0 and n and base_n and base_deaths is not None:
                iv = (paired_interval if same else welch_interval)(base_deaths * 1e5 / base_n, per_100k, level)
                row |= dict(zip(COLUMNS[5:8], (iv.mean, iv.low, iv.high), strict=True))
                row["averted_by"] = "paired replicates" if same else "independent runs"
            rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)


def _averted(row: pd.Series) -> str:
    """``12 (3 to 21)``: deaths averted per 100,000 of the group with its interval, or, where there
    is none (a run of one replicate), the mean with the main table's words for that:
    ``12 (one replicate: no interval)``; the mean alone read as an interval left out."""
    mean = without_minus_zero(fixed(row["deaths_averted_per_100k"], 0))
    if math.isnan(row["deaths_averted_low"]):
        return f"{mean} ({NO_INTERVAL})"
    low, high = (without_minus_zero(fixed(row[k], 0)) for k in ("deaths_averted_low", "deaths_averted_high"))
    return f"{mean} ({low} to {high})"


def _rate(v: float) -> str:
    """Deaths per 100,000 of a group, whole; empty for a group without agents (NaN)."""
    return "" if math.isnan(v) else fixed(v, 0)


def by_age_summary(table: pd.DataFrame) -> SummaryTable:
    """The table as text, one row per age group: each run's deaths per 100,000 of the group
    and, after the first run, the deaths it averts there with their 95% interval."""
    labels = list(dict.fromkeys(table["run"]))
    columns = ["age group", f"{labels[0]}: deaths /100k"]
    for label in labels[1:]:
        columns += [f"{label}: deaths /100k", f"{label}: averted /100k (95%)"]
    rows = []
    for group, part in table.groupby("age_group", sort=False):
        by_run = {r["run"]: r for _, r in part.iterrows()}
        cells = [str(group), _rate(by_run[labels[0]]["deaths_per_100k"])]
        for label in labels[1:]:
            r = by_run[label]
            cells += [_rate(r["deaths_per_100k"]), "" if math.isnan(r["deaths_averted_per_100k"]) else _averted(r)]
        rows.append(cells)
    caption = (
        f"deaths by the last day per 100,000 agents of each age group (means over replicates); averted: against "
        f"{labels[0]} (a negative number: that many more deaths than {labels[0]}), with its 95% interval over "
        "replicates, paired where the runs share their draws "
        "(comparison_by_age.csv says which); an interval that includes 0 is within the replicates' noise; empty "
        "where a run has no agents of the group"
        + ("; long-term-care residents are in their age groups too" if (table["age_group"] == RESIDENTS).any() else "")
    )
    return SummaryTable("Deaths by age", columns, rows, caption)
