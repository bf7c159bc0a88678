"""Run plots (PNG, matplotlib Agg): hospital and ICU occupancy against capacity, daily new infections,
cumulative infections, cumulative infections by age group, cumulative cost and the reproduction number. Each draws the
mean over replicates with a band from the lowest to the highest replicate, and several runs
overlay in the same axes (``abm compare``).

Infections and hospital occupancy are shown per 100,000 people (agents scaled), so runs of
different sizes compare and the capacity lines are the scenario's beds per 100,000; costs are in
dollars as booked for the run's agents.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import yaml
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator
from numpy.typing import ArrayLike

from abm.outputs import reproduction
from abm.outputs.figure_parts import covers_data, date_axis, legend_clear_of_data, save_png
from abm.populations.population import AGE_GROUP_LABELS  # not abm.engine's: that loads torch
from abm.yaml_loader import yaml_error_text

PLOT_FILES = {
    "hospital_occupancy": "hospital_occupancy.png",
    "icu_occupancy": "icu_occupancy.png",
    "new_infections": "new_infections.png",
    "cumulative_infections": "cumulative_infections.png",
    "cumulative_by_age": "cumulative_by_age.png",
    "cumulative_cost": "cumulative_cost.png",
    "reproduction_number": "reproduction_number.png",
}


@dataclass
class RunTables:
    """What the plots and comparisons need of one run."""

    label: str
    timeseries: pd.DataFrame
    by_age: pd.DataFrame
    costs: pd.DataFrame
    summary: dict[str, Any]
    scenario: dict[str, Any] | None = None  # the resolved scenario, where known

    @property
    def agents(self) -> int:
        """Agents simulated."""
        return int(self.summary["agents"])

    @property
    def days(self) -> int:
        """Days simulated."""
        return int(self.summary["days"])

    @property
    def replicates(self) -> int:
        """Replicates run."""
        return int(self.summary["replicates"])

    @property
    def beds_per_100k(self) -> float:
        """The run's hospital capacity per 100,000."""
        return float(self.summary["hospital_capacity"]["beds_per_100k"])

    @property
    def icu_beds_per_100k(self) -> float | None:
        """The run's ICU capacity per 100,000; None where it has none (a region without an ICU
        figure, or a run folder written before abm had one)."""
        icu = self.summary.get("icu_capacity")
        return float(icu["beds_per_100k"]) if isinstance(icu, dict) else None

    @classmethod
    def from_result(cls, result: Any, label: str | None = None) -> RunTables:
        """From a :class:`abm.RunResult`."""
        return cls(
            label or result.summary["scenario"],
            result.timeseries,
            result.by_age,
            result.costs,
            result.summary,
            result.scenario.model_dump(mode="json", by_alias=True),
        )

    @classmethod
    def from_folder(cls, folder: str | Path, label: str | None = None) -> RunTables:
        """From a run folder written by ``abm run``."""
        folder = Path(folder)

        def read(name: str, reader: Any) -> Any:  # a read error names the file
            try:
                return reader(folder / name)
            except (ValueError, OSError, yaml.YAMLError) as exc:
                raise ValueError(f"{name}: {exc}") from exc

        summary = read("summary.json", lambda p: json.loads(p.read_text(encoding="utf-8")))
        parquet = (folder / "timeseries.parquet").is_file()
        ts = read("timeseries.parquet", pd.read_parquet) if parquet else read("timeseries.csv", pd.read_csv)
        by_age = read("by_age.csv", lambda p: pd.read_csv(p, dtype={"age_group": str}))
        costs = read("costs.csv", pd.read_csv)
        resolved = folder / "scenario.resolved.yaml"
        scenario = read(resolved.name, _resolved_scenario) if resolved.is_file() else None
        name = summary.get("scenario") if isinstance(summary, dict) else None  # compare checks the summary
        return cls(label or str(name or folder.name), ts, by_age, costs, summary, scenario)


def _resolved_scenario(path: Path) -> dict[str, Any]:
    """A run folder's ``scenario.resolved.yaml`` as a mapping; ValueError (on one line) where it is
    no YAML or no mapping of keys (a file edited since abm wrote it)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ValueError(yaml_error_text(exc)) from None
    if not isinstance(data, dict):
        what = "nothing" if data is None else "a list" if isinstance(data, list) else f"the single value {data!r}"
        raise ValueError(f"holds {what}, not the mapping of keys `abm run` writes")
    return data


def band(table: pd.DataFrame, column: str, scale: float = 1.0, by: str = "day") -> pd.DataFrame:
    """Per ``by`` value: mean, min and max over replicates of ``column`` times ``scale``."""
    wide = table.pivot(index=by, columns="replicate", values=column).astype(float) * scale
    return pd.DataFrame({"mean": wide.mean(axis=1), "low": wide.min(axis=1), "high": wide.max(axis=1)})


def cumulative_cost_table(run: RunTables) -> pd.DataFrame:
    """[day x replicate] cumulative spending, zeros where nothing was booked."""
    days, reps = np.arange(run.days), np.arange(run.replicates)
    if run.costs.empty:
        daily = pd.DataFrame(0.0, index=days, columns=reps)
    else:
        cost = run.costs.assign(cost=run.costs["count"] * run.costs["unit_cost"])
        daily = cost.pivot_table(index="day", columns="replicate", values="cost", aggfunc="sum")
        daily = daily.reindex(index=days, columns=reps).fillna(0.0)
    cum = daily.cumsum()
    cum.index.name, cum.columns.name = "day", "replicate"
    return cum


def range_bars(mean: ArrayLike, low: ArrayLike, high: ArrayLike) -> np.ndarray:
    """Error bars from each ``mean`` down to ``low`` and up to ``high`` (matplotlib's ``yerr``,
    [2, n]). The float mean of equal replicates can lie a rounding error outside their range
    (three 0.1s average 0.10000000000000002, above their maximum), and matplotlib refuses a
    negative bar: such a bar is 0."""
    mean, low, high = (np.asarray(v, dtype=float) for v in (mean, low, high))
    return np.clip(np.stack([mean - low, high - mean]), 0.0, None)


def _draw(ax: Any, b: pd.DataFrame, label: str, color: Any) -> None:
    ax.fill_between(b.index, b["low"], b["high"], color=color, alpha=0.2, linewidth=0)
    single = len(b) == 1  # a one-day run: a line of one point draws nothing, so mark it
    ax.plot(b.index, b["mean"], color=color, label=label, linewidth=1.8, marker="o" if single else None)
    if single:
        ax.errorbar(b.index, b["mean"], yerr=range_bars(b["mean"], b["low"], b["high"]), color=color, alpha=0.4)


def _days_axis(ax: Any, nbins: int | str = 10) -> None:
    """Whole days on the x axis, from day 0, at most ``nbins`` intervals ("auto": as many as the
    axes' width holds, for narrow panels); a one-day run's day 0 in the middle of an axis with no
    other day. The same whether called once or again (panels that share the axis)."""
    right = ax.get_xlim()[1]
    ax.set_xlim(*((0, right) if right >= 1 else (-0.5, 0.5)))
    ax.xaxis.set_major_locator(MaxNLocator(nbins=nbins, integer=True, min_n_ticks=1))


def colors(n: int) -> list[Any]:
    """``n`` distinct colours: tab10's for the first 10 runs, then tab20's light shades of them up
    to 20, then spread over turbo (tab10 repeated itself from the 11th run: the thesis's ten
    scenarios and one more shared a colour). The k-th run keeps its colour whatever the number of
    runs up to 20, so that it reads the same in a comparison of 4 runs and in one of 11 (tab20 in
    its own order had given 11 runs five pairs of one hue, the second run a light blue)."""
    if n > 20:
        return [plt.get_cmap("turbo")(x) for x in np.linspace(0.05, 0.95, n)]
    cmap = plt.get_cmap("tab20")  # its even entries are tab10's colours, its odd ones their light shades
    return [cmap(k) for k in [*range(0, 20, 2), *range(1, 20, 2)][:n]]


def start_date(runs: list[RunTables]) -> date | None:
    """The date of day 0 where every run gives the same (``simulation.start_date``), else None."""
    starts = {r.summary.get("start_date") for r in runs}
    return date.fromisoformat(starts.pop()) if len(starts) == 1 and None not in starts else None


def day_label(runs: list[RunTables]) -> str:
    """The x axis's label: "day", with the date of day 0 where every run gives the same
    (``simulation.start_date``)."""
    start = start_date(runs)
    return "day" if start is None else f"day (day 0 = {start.isoformat()})"


def _dates_on_top(ax: Any, runs: list[RunTables], maxticks: int = 7) -> None:
    """Where the runs give one date of day 0, the days' calendar dates on an axis on top (below,
    the day numbers stay: the scenario's day settings are written in them)."""
    start = start_date(runs)
    if start is not None:
        date_axis(ax, start, max(r.days for r in runs), maxticks)


def _finish(fig: Figure, ax: Any, title: str, ylabel: str, runs: list[RunTables], line: str = "mean") -> Figure:
    """Title, axis labels (and dates on top, for dated runs), grid, the axes from day 0 and from 0
    up, the legend clear of the data and the band's note. Call it once the data are drawn and
    any other limits set."""
    ax.set_title(title, fontsize=11)
    ax.set_xlabel(day_label(runs))
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    _days_axis(ax)
    ax.set_ylim(bottom=0)
    _dates_on_top(ax, runs)
    legend_clear_of_data(ax, fontsize=8)
    # under the x label, flush right, and laid out with the axes: in the figure's corner it ran
    # into a dated run's longer label ("day (day 0 = 2020-03-01)")
    ax.annotate(
        band_note(runs, line), xy=(1.0, 0.0), xycoords=(ax.transAxes, ax.xaxis.label), xytext=(0, -3),
        textcoords="offset points", ha="right", va="top", fontsize=7, color="#555555",
    )  # fmt: skip
    return fig


def band_note(runs: list[RunTables], line: str = "mean") -> str:
    """The note that tells what the line and the band are."""
    counts = sorted({r.replicates for r in runs})
    reps = "/".join(str(r) for r in counts)
    return "one replicate: no band" if counts == [1] else f"line: {line}; band: lowest to highest of {reps} replicates"


def _capacity_lines(ax: Any, runs: list[RunTables], beds: list[float | None]) -> bool:
    """A horizontal line per capacity (``beds`` per 100,000: each run's, None where it has none);
    where the runs' differ each line names its runs (else it would read as every run's), and runs
    without one are named too. Returns whether any line was drawn (for the title)."""
    capacities = sorted({b for b in beds if b is not None})
    for line, style in zip(capacities, ["--", ":", "-."] * len(capacities), strict=False):
        whose = (
            ""
            if len(set(beds)) == 1
            else " of " + ", ".join(r.label for r, b in zip(runs, beds, strict=True) if b == line)
        )
        ax.axhline(
            line, color="black", linestyle=style, linewidth=1.2, label=f"capacity{whose}: {line:g} beds per 100k"
        )
    without = [r.label for r, b in zip(runs, beds, strict=True) if b is None]
    if without and capacities:  # with no line at all, no line says as much
        ax.plot([], [], " ", label=f"no capacity given for {', '.join(without)}")
    return bool(capacities)


def new_figure(pyplot: bool, **kwargs: Any) -> Figure:
    """An empty figure (``kwargs``: :class:`~matplotlib.figure.Figure`'s). With ``pyplot`` it is
    pyplot's, as one drawn for the user (``RunResult.plot()``: a notebook shows it, ``plt.show()``
    too); without, one drawn for a file: drawing and saving it neither needs nor changes pyplot's
    backend (a notebook's stays inline, its open figures stay open) and leaves no figure open."""
    return plt.figure(**kwargs) if pyplot else Figure(**kwargs)


def hospital_occupancy(runs: list[RunTables], *, pyplot: bool = True) -> Figure:
    """Hospital beds in use (hospitalized, ICU, step-down) per 100,000 against capacity."""
    fig = new_figure(pyplot, figsize=(8, 4.8), layout="constrained")
    ax = fig.subplots()
    for run, color in zip(runs, colors(len(runs)), strict=True):
        _draw(ax, band(run.timeseries, "hospital_occupancy", 1e5 / run.agents), run.label, color)
    _capacity_lines(ax, runs, [r.beds_per_100k for r in runs])
    return _finish(fig, ax, "Hospital occupancy against capacity", "beds in use per 100,000", runs)


def icu_occupancy(runs: list[RunTables], *, pyplot: bool = True) -> Figure:
    """ICU beds in use (agents in the critical, ICU stage) per 100,000 against the ICU capacity
    (none drawn for a run without one; with none at all, the title does not name it)."""
    fig = new_figure(pyplot, figsize=(8, 4.8), layout="constrained")
    ax = fig.subplots()
    for run, color in zip(runs, colors(len(runs)), strict=True):
        _draw(ax, band(run.timeseries, "icu", 1e5 / run.agents), run.label, color)
    drawn = _capacity_lines(ax, runs, [r.icu_beds_per_100k for r in runs])
    title = "ICU occupancy against ICU capacity" if drawn else "ICU occupancy"
    return _finish(fig, ax, title, "ICU beds in use per 100,000", runs)


def new_infections(runs: list[RunTables], *, pyplot: bool = True) -> Figure:
    """Daily new infections per 100,000, the seeded ones on their seeding day (summary.json's
    ``peak_new_infections`` counts infections by transmission only, so the title says so)."""
    fig = new_figure(pyplot, figsize=(8, 4.8), layout="constrained")
    ax = fig.subplots()
    for run, color in zip(runs, colors(len(runs)), strict=True):
        _draw(ax, band(run.timeseries, "new_infections", 1e5 / run.agents), run.label, color)
    title = "Daily new infections (seeded ones on their seeding day)"
    return _finish(fig, ax, title, "new infections per 100,000", runs)


def cumulative_infections(runs: list[RunTables], *, pyplot: bool = True) -> Figure:
    """Share of the population ever infected, in percent."""
    fig = new_figure(pyplot, figsize=(8, 4.8), layout="constrained")
    ax = fig.subplots()
    for run, color in zip(runs, colors(len(runs)), strict=True):
        _draw(ax, band(run.timeseries, "cumulative_infected", 100 / run.agents), run.label, color)
    return _finish(fig, ax, "Cumulative infections", "% of population ever infected", runs)


def cumulative_by_age(runs: list[RunTables], *, pyplot: bool = True) -> Figure:
    """Share of each age group ever infected, in percent: one panel per age group."""
    fig = new_figure(pyplot, figsize=(10, 7.5), layout="constrained")
    axes = fig.subplots(3, 3, sharex=True, sharey=True)
    palette = colors(len(runs))
    top = 0.0
    for ax, group in zip(axes.flat, AGE_GROUP_LABELS, strict=True):
        for run, color in zip(runs, palette, strict=True):
            agents = _group_agents(run, group)
            if agents == 0:  # no one of this age: no line (a 0% line would read as no one infected)
                ax.plot([], [], color=color, label=run.label)
                continue
            b = band(run.by_age[run.by_age["age_group"].astype(str) == group], "cumulative_infected", 100 / agents)
            _draw(ax, b, run.label, color)
            top = max(top, float(b["high"].max()) if len(b) else 0.0)
        if not any(_group_agents(run, group) for run in runs):
            note = "no agents of this age"
            ax.text(0.5, 0.5, note, transform=ax.transAxes, ha="center", va="center", fontsize=8, color="#777777")
        ax.set_title(f"age {group}", fontsize=9)
        ax.grid(alpha=0.3)
        _days_axis(ax, "auto")  # ten to a panel ran together ("100120140") once a legend took room beside them
    axes.flat[0].set_ylim(0, max(1.0, min(100.0, top) * 1.05))
    for ax in axes[-1]:
        ax.set_xlabel(day_label(runs))
    for ax in axes[:, 0]:
        ax.set_ylabel("% ever infected")
    for ax in axes[0]:
        _dates_on_top(ax, runs, maxticks=4)
    fig.suptitle("Cumulative infections by age group", fontsize=11)
    legend = axes.flat[0].legend(fontsize=7, loc="upper left")
    if covers_data(axes.flat[0], legend):  # many runs: beside the panels (below the note, top right)
        legend.remove()
        fig.legend(*axes.flat[0].get_legend_handles_labels(), fontsize=7, loc="outside right center")
    fig.text(0.99, 0.995, band_note(runs), ha="right", va="top", fontsize=7, color="#555555")  # beside the title
    return fig


def _group_agents(run: RunTables, group: str) -> float:
    table = run.by_age[run.by_age["age_group"].astype(str) == group]
    return float(table["agents"].iloc[0]) if len(table) else 0.0


def dollars(value: float, _position: object = None) -> str:
    """A tick label in dollars to three significant digits: $950, $12.5k, $1.02M (matplotlib's
    default wrote 1.0 under a "1e6")."""
    sign, size = "-" if value < 0 else "", float(f"{abs(value):.3g}")  # rounded first: 999,999 is $1M
    for scale, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if size >= scale:
            return f"{sign}${size / scale:.3g}{suffix}"
    return f"{sign}${size:.3g}"


def cumulative_cost(runs: list[RunTables], *, pyplot: bool = True) -> Figure:
    """Cumulative spending booked by interventions, in dollars."""
    fig = new_figure(pyplot, figsize=(8, 4.8), layout="constrained")
    ax = fig.subplots()
    for run, color in zip(runs, colors(len(runs)), strict=True):
        cum = cumulative_cost_table(run)
        b = pd.DataFrame({"mean": cum.mean(axis=1), "low": cum.min(axis=1), "high": cum.max(axis=1)})
        _draw(ax, b, f"{run.label} ({run.agents:,} agents)", color)
    ax.yaxis.set_major_formatter(FuncFormatter(dollars))
    return _finish(fig, ax, "Cumulative cost of interventions", "cost for the run's agents", runs)


def reproduction_number(runs: list[RunTables], *, pyplot: bool = True) -> Figure:
    """The reproduction number by day of infection over the week centred on each day, against 1:
    the line pools the replicates (:func:`abm.outputs.reproduction.weekly_pooled`: the infections
    caused per infection, so that a replicate with a handful of infections weighs a handful), the
    band spans the replicates' own figures (:func:`~abm.outputs.reproduction.weekly`); weeks whose
    count is not final, and weeks of fewer than :data:`~abm.outputs.reproduction.PLOTTED_LEAST`
    infections (the line: over the replicates pooled; the band: in the replicate), are left out.
    A run without the figures is named so."""
    fig = new_figure(pyplot, figsize=(8, 4.8), layout="constrained")
    ax = fig.subplots()
    top, least = 2.0, reproduction.PLOTTED_LEAST
    for run, color in zip(runs, colors(len(runs)), strict=True):
        got = reproduction.arrays(run.timeseries)
        if got is None:
            ax.plot([], [], " ", label=f"{run.label}: no reproduction number recorded")
            continue
        weeks = reproduction.weekly(*got, least=least)
        with warnings.catch_warnings():  # a day no replicate has a final figure for stays empty
            warnings.simplefilter("ignore", RuntimeWarning)
            b = pd.DataFrame(
                {
                    "mean": reproduction.weekly_pooled(*got, least=least),
                    "low": np.nanmin(weeks, axis=1),
                    "high": np.nanmax(weeks, axis=1),
                }
            )
        _draw(ax, b, run.label, color)
        if b["mean"].notna().any():
            top = max(top, 1.25 * float(b["mean"].max()))
    ax.axhline(1.0, color="black", linestyle="--", linewidth=1.2, label="1: each infection passed on once")
    # the band's weeks are a replicate's own, so where few replicates have enough it may miss the line
    ax.plot([], [], " ", label=f"weeks of fewer than {least} infections\n(the band: in the replicate): not drawn")
    last = max(r.days for r in runs) - 1
    ax.set_xlim(*((0, last) if last >= 1 else (-0.5, 0.5)))  # the runs' days, where some have no figure
    ax.set_ylim(0, top)  # before _finish places the legend
    return _finish(
        fig,
        ax,
        "Reproduction number by day of infection (weeks centred on each day)",
        "infections caused per infection",
        runs,
        line="the replicates pooled",  # their infections together, not a mean of their figures
    )


FIGURES = {
    "hospital_occupancy": hospital_occupancy,
    "icu_occupancy": icu_occupancy,
    "new_infections": new_infections,
    "cumulative_infections": cumulative_infections,
    "cumulative_by_age": cumulative_by_age,
    "cumulative_cost": cumulative_cost,
    "reproduction_number": reproduction_number,
}


def write_plots(runs: list[RunTables], folder: str | Path, dpi: int = 100) -> list[Path]:
    """Write every plot as PNG into ``folder``; return the paths. The figures are not pyplot's
    (:func:`new_figure`), so that writing from a notebook leaves its backend and figures alone."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for key, make in FIGURES.items():
        if key == "reproduction_number" and all(reproduction.arrays(r.timeseries) is None for r in runs):
            continue  # no run put its infections down to infectors
        fig = make(runs, pyplot=False)
        path = folder / PLOT_FILES[key]
        save_png(fig, path, dpi)
        out.append(path)
    return out
