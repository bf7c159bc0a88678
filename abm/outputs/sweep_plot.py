"""The plot of a sweep (``sweep.png``): six outcomes against a swept value, one line per
combination of the other swept values.

The outcomes are those of ``abm sweep``'s console table, per 100,000 agents so that variants of
different sizes compare: the share infected, the peak of hospital beds in use (against the
capacity line, where the variants share one), deaths and total cost; then the first week's
reproduction number (against 1) and the generation interval, over the replicates that have one
(a panel no run has says so). Each point is the mean over a variant's replicates, with a bar
from the lowest to the highest replicate (as the run plots' band). The x axis is the first
swept key whose values are all numbers (spaced by value), else the first swept key: its values
spaced by day where they are dates (a day setting written as dates), else in the order given; a
key swept over one value comes only where every key is, and is otherwise named in the title
rather than in every line's label.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from abm.key_paths import short_keys
from abm.outputs.figure_parts import covers_data
from abm.outputs.plots import colors, range_bars
from abm.outputs.sweep_report import value_text
from abm.plurals import counted

# (column of sweep.csv, panel title, scale: "share" to percent, "per_100k" per 100,000 agents, or none)
PANELS = (
    ("cumulative_infected_share", "infected (% of agents)", "percent"),
    ("peak_hospital_occupancy_per_100k", "peak hospital beds in use per 100,000 agents", None),
    ("deaths", "deaths per 100,000 agents", "per_100k"),
    ("total_cost", "total cost per 100,000 agents ($)", "per_100k"),
    ("reproduction_number_initial", "reproduction number, first week", None),
    ("generation_interval", "generation interval (days)", None),
)


def is_number(value: Any) -> bool:
    """A number the x axis can place by value (not a bool, which is categorical)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def as_date(value: Any) -> date | None:
    """A day setting swept as dates (``2020-03-01``, as the sweep keeps it: its text) as a date the
    x axis can place by its day; None for any other value."""
    if not isinstance(value, str):
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        return None


def x_key(sweeps: dict[str, list[Any]]) -> str:
    """The swept key on the x axis: the first whose values are all numbers, else the first; a key
    swept over one value only where every key is (it would put every point at one x, its other
    keys' values in the legend alone)."""
    varied = [k for k, values in sweeps.items() if len({value_text(v) for v in values}) > 1] or list(sweeps)
    return next((k for k in varied if all(is_number(v) for v in sweeps[k])), varied[0])


def sweep_figure(
    name: str, table: pd.DataFrame, variants: Sequence[dict[str, Any]], sweeps: dict[str, list[Any]]
) -> Figure:
    """The figure of the sweep of scenario ``name`` from its per-run table (``sweep.csv``'s
    rows), its variants (``sweep.json``'s: each with ``variant``, ``sweep``, the swept values,
    and ``scenario``, as it ran) and its swept keys and values in the order given."""
    key = x_key(sweeps)
    numeric = all(is_number(v) for v in sweeps[key])
    dates = [as_date(v) for v in sweeps[key]]
    dated = None not in dates
    places: dict[str, float] = {}  # each value's place on the x axis
    for i, (v, d) in enumerate(zip(sweeps[key], dates, strict=True)):
        if numeric:
            places[value_text(v)] = float(v)
        elif dated and d is not None:  # days written as dates: spaced as the days are
            places[value_text(v)] = float(d.toordinal())
        else:  # in the order given
            places[value_text(v)] = float(i)
    short = dict(zip(sweeps, short_keys(list(sweeps)), strict=True))  # as the console's labels
    fixed = [k for k in sweeps if k != key and len({value_text(v) for v in sweeps[k]}) == 1]  # in the title
    others = [k for k in sweeps if k != key and k not in fixed]

    def position(var: dict[str, Any]) -> float:  # on the x axis
        return places[value_text(var["sweep"][key])]

    lines: dict[str, list[dict[str, Any]]] = {}
    for var in variants:
        label = ", ".join(f"{short[k]}={value_text(var['sweep'][k])}" for k in others)
        lines.setdefault(label, []).append(var)
    beds = {var["scenario"]["outputs"]["hospital_beds_per_100k"] for var in variants}
    agents = {int(v): a for v, a in table.groupby("variant")["agents"].first().items()}
    replicates = sorted(set(table.groupby("variant").size()))

    # Not pyplot's: drawing it neither needs nor changes pyplot's backend (a notebook's stays inline),
    # and no figure is left open in pyplot once it is written.
    fig = Figure(figsize=(10, 10), layout="constrained")
    axes = fig.subplots(3, 2)
    for ax, (column, title, scale) in zip(axes.flat, PANELS, strict=True):
        for (label, members), color in zip(lines.items(), colors(len(lines)), strict=True):
            xs, mean, low, high = [], [], [], []
            for var in sorted(members, key=position):  # a line from left to right
                v = int(var["variant"])
                if column not in table:  # a table written before sweeps had the column
                    continue
                values = table.loc[table["variant"] == v, column].to_numpy(dtype=float)
                values = values[~np.isnan(values)]  # the replicates that have one (a first week not final...)
                if values.size == 0:
                    continue
                if scale == "percent":
                    values = values * 100
                elif scale == "per_100k":
                    values = values * 1e5 / agents[v]
                xs.append(position(var))
                mean.append(values.mean())
                low.append(values.min())
                high.append(values.max())
            if not xs:
                continue
            yerr = range_bars(mean, low, high)
            ax.errorbar(xs, mean, yerr=yerr, color=color, marker="o", capsize=3, linewidth=1.6, label=label or None)
        if not ax.lines and not ax.collections:  # e.g. outputs.reproduction_number: false, or no first week final
            ax.text(0.5, 0.5, "no run has it", transform=ax.transAxes, ha="center", va="center", color="#777777")
        if column == "reproduction_number_initial":
            ax.axhline(1.0, color="black", linestyle="--", linewidth=1.0)
        if column == "peak_hospital_occupancy_per_100k" and len(beds) == 1:
            bed = next(iter(beds))
            ax.axhline(bed, color="#b22222", linestyle="--", linewidth=1.2, label=f"capacity: {bed:g} beds per 100k")
        ax.set_title(title, fontsize=11)
        ax.set_xlabel(key)
        if not numeric:
            ax.set_xticks(list(places.values()), list(places))
        if dated:  # dates a week apart would overlap
            ax.tick_params(axis="x", labelrotation=30)
        ax.set_ylim(bottom=0)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:,.0f}" if abs(y) >= 1000 else f"{y:g}"))
        ax.grid(alpha=0.3)
    handles, names = axes.flat[1].get_legend_handles_labels()
    if handles:
        legend = axes.flat[1].legend(handles, names, fontsize=8, loc="best")
        if covers_data(axes.flat[1], legend):  # many lines: under the panels, for all of them
            legend.remove()
            fig.legend(handles, names, fontsize=8, loc="outside lower center", ncols=min(3, len(handles)))
    reps = "/".join(str(r) for r in replicates)
    note = (
        "one replicate: no bars" if replicates == [1] else f"point: mean; bar: lowest to highest of {reps} replicates"
    )
    held = "".join(f", {short[k]}={value_text(sweeps[k][0])}" for k in fixed)
    fig.suptitle(f"sweep of {name}{held}: {counted(len(variants), 'variant')}; {note}", fontsize=10)
    return fig
