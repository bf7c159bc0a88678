"""The sweep plot: each point is a variant's mean over its replicates of the panel's outcome (per
100,000 agents where the panel says so), its bar the lowest to the highest replicate; one line per
combination of the other swept values; the capacity line where the variants share one."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from abm.outputs.sweep_plot import PANELS, sweep_figure, x_key

START, WEIGHT = "interventions.vaccination.start_day", "contacts.community.weight"


def hand_sweep(beds: tuple[float, ...] = (55.0,) * 4, agents: tuple[int, ...] = (2000,) * 4):
    """Four variants (start day 30 and 10 by weight 0.2 and 0.4, in that order), two replicates
    each, with outcomes chosen by hand."""
    sweeps = {START: [30, 10], WEIGHT: [0.2, 0.4]}
    values = [(30, 0.2), (30, 0.4), (10, 0.2), (10, 0.4)]
    rows = []
    for v, (start, weight) in enumerate(values):
        for r in range(2):
            rows.append(
                {
                    "variant": v,
                    START: start,
                    WEIGHT: weight,
                    "replicate": r,
                    "agents": agents[v],
                    "cumulative_infected_share": 0.1 * (v + 1) + 0.02 * r,
                    "peak_hospital_occupancy_per_100k": 10.0 * (v + 1) + 4 * r,
                    "deaths": float(v + r),
                    "total_cost": 1000.0 * (v + 1) * (r + 1),
                    # variant 1's replicate 0 has no final first week; variant 3 has none at all
                    "reproduction_number_initial": np.nan if (v, r) == (1, 0) or v == 3 else 1.0 + 0.1 * v + 0.2 * r,
                    "generation_interval": 6.0 + v,
                }
            )
    variants = [
        {
            "variant": v,
            "sweep": {START: start, WEIGHT: weight},
            "scenario": {"outputs": {"hospital_beds_per_100k": beds[v]}},
        }
        for v, (start, weight) in enumerate(values)
    ]
    return pd.DataFrame(rows), variants, sweeps


def plotted(ax) -> dict[str, dict[str, np.ndarray]]:
    """Per line label: the points' x and y, and each bar's low and high end."""
    out = {}
    for container in ax.containers:
        x, y = container.lines[0].get_data()
        segments = container.lines[2][0].get_segments()
        out[container.get_label()] = {
            "x": np.asarray(x, dtype=float),
            "y": np.asarray(y, dtype=float),
            "low": np.array([seg[:, 1].min() for seg in segments]),
            "high": np.array([seg[:, 1].max() for seg in segments]),
        }
    return out


def test_points_are_means_and_bars_the_replicates_range_per_line():
    table, variants, sweeps = hand_sweep(agents=(2000, 2000, 2000, 4000))
    fig = sweep_figure("s", table, variants, sweeps)
    try:
        panels = {ax.get_title(): plotted(ax) for ax in fig.axes}
        assert [ax.get_xlabel() for ax in fig.axes] == [START] * 6  # the first numeric key
        infected = panels["infected (% of agents)"]
        assert sorted(infected) == ["weight=0.2", "weight=0.4"]
        # weight 0.2: variants 2 (start 10) and 0 (start 30), in the order of the x values
        line = infected["weight=0.2"]
        assert line["x"].tolist() == [10.0, 30.0]
        assert line["y"] == pytest.approx([31.0, 11.0])  # percent: (0.3 + 0.32) / 2, (0.1 + 0.12) / 2
        assert line["low"] == pytest.approx([30.0, 10.0]) and line["high"] == pytest.approx([32.0, 12.0])
        # deaths per 100,000 agents: variant 3 has 4,000 agents, deaths 3 and 4
        deaths = panels["deaths per 100,000 agents"]["weight=0.4"]
        assert deaths["y"] == pytest.approx([3.5 * 1e5 / 4000, 1.5 * 1e5 / 2000])
        cost = panels["total cost per 100,000 agents ($)"]["weight=0.4"]
        assert cost["low"] == pytest.approx([4000 * 25, 2000 * 50])
        assert cost["high"] == pytest.approx([8000 * 25, 4000 * 50])
        # the reproduction number: over the replicates that have one; a variant with none has no point
        r0 = panels["reproduction number, first week"]
        assert r0["weight=0.2"]["y"] == pytest.approx([1.3, 1.1])  # variants 2 and 0: (1.2 + 1.4) / 2, (1.0 + 1.2) / 2
        assert r0["weight=0.4"]["x"].tolist() == [30.0] and r0["weight=0.4"]["y"] == pytest.approx(
            [1.3]
        )  # variant 1, r 1
        one = [ln for ln in fig.axes[4].lines if ln.get_linestyle() == "--"]
        assert len(one) == 1 and one[0].get_ydata()[0] == 1.0
        assert panels["generation interval (days)"]["weight=0.4"]["y"] == pytest.approx([9.0, 7.0])
        beds = panels["peak hospital beds in use per 100,000 agents"]["weight=0.2"]
        assert beds["y"] == pytest.approx([32.0, 12.0])  # already per 100,000: not scaled again
        capacity = [ln for ln in fig.axes[1].lines if ln.get_label().startswith("capacity")]
        assert len(capacity) == 1 and capacity[0].get_ydata()[0] == 55.0
        assert capacity[0].get_label() == "capacity: 55 beds per 100k"  # as the run plots name it
        assert "2 replicates" in fig._suptitle.get_text() and "4 variants" in fig._suptitle.get_text()
    finally:
        plt.close(fig)


def test_no_capacity_line_where_variants_differ_and_categories_keep_their_order():
    table, variants, sweeps = hand_sweep(beds=(55.0, 30.0, 55.0, 30.0))
    # no key of numbers: the first key's values on the x axis as given, evenly spaced
    sweeps = {START: ["late", "early"], WEIGHT: ["low", "high"]}
    for var in variants:
        var["sweep"][START] = "late" if var["sweep"][START] == 30 else "early"
        var["sweep"][WEIGHT] = "low" if var["sweep"][WEIGHT] == 0.2 else "high"
    fig = sweep_figure("s", table, variants, sweeps)
    try:
        assert not [ln for ln in fig.axes[1].lines if ln.get_label().startswith("capacity")]
        ax = fig.axes[0]
        assert ax.get_xlabel() == START
        assert [t.get_text() for t in ax.get_xticklabels()] == ["late", "early"]
        line = plotted(ax)["weight=low"]  # variants 0 (late) and 2 (early)
        assert line["x"].tolist() == [0.0, 1.0] and line["y"] == pytest.approx([11.0, 31.0])
    finally:
        plt.close(fig)


def test_the_x_key_is_the_first_all_numeric_one_else_the_first():
    assert x_key({"a.b": ["x", "y"], "c": [1, 2.5]}) == "c"
    assert x_key({"a": [True, False], "b": [None, 3]}) == "a"  # bools and null are categories
    assert x_key({"a": [[1], [2]]}) == "a"
    assert len(PANELS) == 6


def test_a_key_swept_over_one_value_is_not_the_x_axis_where_another_varies():
    # seeding.day=0 was the x axis (every point at x=0, the varied keys in the legend alone)
    assert x_key({"seeding.day": [0], "a": [True, False], "b": [None, {}]}) == "a"
    assert x_key({"seeding.day": [0], "a": ["x", "y"], "c": [1, 2]}) == "c"
    assert x_key({"seeding.day": [0], "a": [[1], [1]]}) == "seeding.day"  # nothing varies
    assert x_key({"a": [[10], [20]], "seeding.day": [0]}) == "a"


def test_a_key_swept_over_one_value_is_named_in_the_title_not_in_every_label():
    table, variants, sweeps = hand_sweep()
    sweeps = {**sweeps, "seeding.day": [0]}
    for var in variants:
        var["sweep"]["seeding.day"] = 0
    fig = sweep_figure("s", table, variants, sweeps)
    try:
        assert sorted(plotted(fig.axes[0])) == ["weight=0.2", "weight=0.4"]  # was "weight=0.2, day=0"
        assert fig._suptitle.get_text().startswith("sweep of s, day=0: 4 variants;")
    finally:
        plt.close(fig)


def test_a_day_swept_as_dates_is_spaced_by_day():
    """A day setting swept as dates (start_day=2020-03-01,2020-03-15,2020-05-01) is placed on the
    x axis by its day, as numbers are (it was placed in the order given, evenly: 14 days apart
    looked as far apart as 47), each tick labelled with its date as given."""
    dates = ["2020-03-01", "2020-03-15", "2020-05-01"]
    rows = [
        {"variant": v, START: d, "replicate": 0, "agents": 1000, "cumulative_infected_share": 0.1 * (v + 1),
         "peak_hospital_occupancy_per_100k": 10.0, "deaths": 1.0, "total_cost": 100.0}
        for v, d in enumerate(dates)
    ]  # fmt: skip
    variants = [
        {"variant": v, "sweep": {START: d}, "scenario": {"outputs": {"hospital_beds_per_100k": 55.0}}}
        for v, d in enumerate(dates)
    ]
    fig = sweep_figure("s", pd.DataFrame(rows), variants, {START: dates})
    try:
        ax = fig.axes[0]
        (line,) = plotted(ax).values()
        first = pd.Timestamp(dates[0]).toordinal()
        assert list(line["x"] - first) == [0, 14, 61] and np.allclose(line["y"], [10, 20, 30])
        assert list(ax.get_xticks() - first) == [0, 14, 61]
        assert [t.get_text() for t in ax.get_xticklabels()] == dates
    finally:
        plt.close(fig)


def test_a_variant_of_equal_replicates_has_bars_of_0_not_below():
    """Every replicate of variant 0 infects 0.1% of its agents: the float mean of the percentages
    (0.1 each) is 0.10000000000000002, above their maximum, and the bar up to the maximum was
    negative, which matplotlib refuses (``abm sweep --days 1 --replicates 3`` failed with "'yerr'
    must not contain negative values"). The bar is 0.1 to 0.1."""
    table, variants, sweeps = hand_sweep()
    table = pd.concat([table, table[table["replicate"] == 0].assign(replicate=2)], ignore_index=True)
    table.loc[table["variant"] == 0, "cumulative_infected_share"] = 0.001
    fig = sweep_figure("s", table, variants, sweeps)
    try:
        line = plotted(fig.axes[0])["weight=0.2"]
        assert line["low"][1] == pytest.approx(0.1) and line["high"][1] == pytest.approx(0.1)  # variant 0: start 30
    finally:
        plt.close(fig)


def test_a_panel_no_run_has_says_so():
    """A table without the reproduction number (outputs.reproduction_number: false gives empty
    cells; a sweep.csv of an earlier version has no column) draws no point there and says so."""
    table, variants, sweeps = hand_sweep()
    table = table.drop(columns=["reproduction_number_initial"])  # an earlier version's sweep.csv
    table["generation_interval"] = np.nan  # every cell empty
    fig = sweep_figure("s", table, variants, sweeps)
    try:
        texts = {ax.get_title(): [t.get_text() for t in ax.texts] for ax in fig.axes}
        assert texts["reproduction number, first week"] == ["no run has it"]
        assert texts["generation interval (days)"] == ["no run has it"] and texts["infected (% of agents)"] == []
    finally:
        plt.close(fig)


def test_list_and_mapping_values_are_written_with_one_space_after_commas_and_colons():
    """A swept list or mapping (``outputs.map_days=[10,20],[30]``, ``seeding.infections={asymptomatic:
    10},...``) was labelled ``[10,  20]`` and ``{"asymptomatic":  10}``: JSON's own ", " and ": "
    got a second space. The x ticks and the legend now write each value as JSON does."""
    days, seeds = "outputs.map_days", "seeding.infections"
    sweeps = {days: [[10, 20], [30]], seeds: [{"asymptomatic": 10}, {"asymptomatic": 20}]}
    combos = [(d, s) for d in sweeps[days] for s in sweeps[seeds]]
    rows = [
        {"variant": v, "replicate": 0, "agents": 1000, "cumulative_infected_share": 0.1, "deaths": 1.0,
         "peak_hospital_occupancy_per_100k": 10.0, "total_cost": 100.0}
        for v in range(len(combos))
    ]  # fmt: skip
    variants = [
        {"variant": v, "sweep": {days: d, seeds: s}, "scenario": {"outputs": {"hospital_beds_per_100k": 55.0}}}
        for v, (d, s) in enumerate(combos)
    ]
    fig = sweep_figure("s", pd.DataFrame(rows), variants, sweeps)
    try:
        ax = fig.axes[0]
        assert [t.get_text() for t in ax.get_xticklabels()] == ["[10, 20]", "[30]"]
        assert sorted(plotted(ax)) == ['infections={"asymptomatic": 10}', 'infections={"asymptomatic": 20}']
    finally:
        plt.close(fig)


def test_a_legend_that_would_cover_the_lines_goes_under_the_panels():
    """Six lines (three start days by two adoptions) of rising peaks: the legend, inside the peak
    beds panel where matplotlib found best, lay over two lines and the capacity line; it now goes
    under the panels. Two lines leave a corner free, and the legend stays in it."""
    adopt = "interventions.digital_tracing.app_adoption"
    sweeps = {WEIGHT: [0.2, 0.6], START: [10, 30, 60], adopt: [0.2, 0.6]}
    rows, variants = [], []
    for v, (w, start, adoption) in enumerate(
        (w, s, a) for w in sweeps[WEIGHT] for s in sweeps[START] for a in sweeps[adopt]
    ):
        swept = {WEIGHT: w, START: start, adopt: adoption}
        variants.append({"variant": v, "sweep": swept, "scenario": {"outputs": {"hospital_beds_per_100k": 55.0}}})
        for r in range(2):  # peaks from 30 at weight 0.2 to 20-135 at 0.6, every line through the panel
            peak = 30.0 if w == 0.2 else 20.0 + 23 * (v - 6)
            rows.append({"variant": v, "replicate": r, "agents": 1500, "peak_hospital_occupancy_per_100k": peak + r})
    fig = sweep_figure("s", pd.DataFrame(rows), variants, sweeps)
    try:
        assert fig.axes[1].get_legend() is None and len(fig.legends) == 1
        assert len(fig.legends[0].get_texts()) == 7  # six lines and the capacity
        fig.draw_without_rendering()
        box = fig.legends[0].get_window_extent()
        assert not any(box.overlaps(ax.get_window_extent()) for ax in fig.axes)
    finally:
        plt.close(fig)
    from abm.outputs.figure_parts import covers_data

    table, variants, sweeps = hand_sweep()
    fig = sweep_figure("s", table, variants, sweeps)
    try:
        legend = fig.axes[1].get_legend()
        assert legend is not None and not fig.legends and not covers_data(fig.axes[1], legend)
    finally:
        plt.close(fig)
