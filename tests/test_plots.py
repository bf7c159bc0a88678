"""The run and comparison plots on hand-built runs (no simulation): what each axes draws and
how it is labelled."""

from __future__ import annotations

from datetime import date

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from abm.outputs import plots


def hand_run(
    label: str, days: int = 5, replicates: int = 2, beds_per_100k: float = 55.0, icu_beds_per_100k: float | None = 6.1
) -> plots.RunTables:
    """A run of 1,000 agents (100 an age group, 9 groups): every count is day + replicate (ICU
    beds in use: half of it)."""
    agents = 1000
    day = np.tile(np.arange(days), replicates)
    rep = np.repeat(np.arange(replicates), days)
    value = (day + rep).astype(float)
    ts = pd.DataFrame(
        {
            "day": day,
            "replicate": rep,
            "hospital_occupancy": value,
            "icu": value / 2,
            "new_infections": value,
            "cumulative_infected": value,
            "secondary_infections": value,
            "reproduction_number": np.where(value > 0, 1.0, np.nan),
        }
    )
    by_age = pd.concat(
        [
            ts.assign(age_group=group, agents=100)[["day", "replicate", "age_group", "agents", "cumulative_infected"]]
            for group in plots.AGE_GROUP_LABELS
        ]
    )
    costs = pd.DataFrame({"item": [], "day": [], "replicate": [], "count": [], "unit_cost": []})
    summary = {
        "scenario": label,
        "agents": agents,
        "days": days,
        "replicates": replicates,
        "hospital_capacity": {"beds_per_100k": beds_per_100k},
        "icu_capacity": None if icu_beds_per_100k is None else {"beds_per_100k": icu_beds_per_100k},
    }
    return plots.RunTables(label, ts, by_age, costs, summary)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def notes(fig: matplotlib.figure.Figure) -> list[str]:
    """The figure's texts and its axes' (the band's note is the first axes' own, under its x label)."""
    return [t.get_text() for t in [*fig.texts, *(t for ax in fig.axes for t in ax.texts)]]


def capacity_labels(fig: matplotlib.figure.Figure) -> list[str]:
    return [line.get_label() for line in fig.axes[0].lines if line.get_label().startswith("capacity")]


def test_one_capacity_is_labelled_by_its_value():
    fig = plots.hospital_occupancy([hand_run("ni"), hand_run("vacc")])
    assert capacity_labels(fig) == ["capacity: 55 beds per 100k"]


def test_capacities_that_differ_name_their_runs_and_differ_in_style():
    """Two runs of different capacities: each dashed line says whose capacity it is (two lines
    both labelled 'capacity' read as if both applied to every run)."""
    runs = [hand_run("ni", beds_per_100k=55), hand_run("low", beds_per_100k=30), hand_run("sq", beds_per_100k=55)]
    fig = plots.hospital_occupancy(runs)
    assert capacity_labels(fig) == ["capacity of low: 30 beds per 100k", "capacity of ni, sq: 55 beds per 100k"]
    lines = [line for line in fig.axes[0].lines if line.get_label().startswith("capacity")]
    assert [line.get_ydata()[0] for line in lines] == [30, 55]
    assert lines[0].get_linestyle() != lines[1].get_linestyle()


def test_the_icu_plot_draws_icu_beds_per_100k_against_each_runs_icu_capacity():
    """ICU beds in use per 100,000 (the ``icu`` column: day + replicate, halved, of 1,000 agents)
    and a line per ICU capacity; a run without one (a region without an ICU figure, an earlier
    version's folder) is named as having none."""
    fig = plots.icu_occupancy([hand_run("ni"), hand_run("vacc")])
    assert capacity_labels(fig) == ["capacity: 6.1 beds per 100k"]
    mean = fig.axes[0].lines[0].get_ydata()  # mean over replicates 0 and 1 of (day + replicate) / 2, per 100k
    assert list(mean) == [(d + 0.5) / 2 * 100 for d in range(5)]
    runs = [hand_run("ni"), hand_run("old", icu_beds_per_100k=None), hand_run("low", icu_beds_per_100k=3)]
    fig = plots.icu_occupancy(runs)
    assert capacity_labels(fig) == ["capacity of low: 3 beds per 100k", "capacity of ni: 6.1 beds per 100k"]
    assert "no capacity given for old" in [line.get_label() for line in fig.axes[0].lines]
    assert fig.axes[0].get_title() == "ICU occupancy against ICU capacity"
    fig = plots.icu_occupancy([hand_run("old", icu_beds_per_100k=None)])
    assert capacity_labels(fig) == [] and not any("no capacity" in x.get_label() for x in fig.axes[0].lines)


def test_the_icu_plot_without_any_icu_capacity_is_not_titled_against_it():
    """No run has an ICU capacity (a region without an ICU figure): no line is drawn, so the title
    says ICU occupancy only; one run with a capacity keeps the title, and names the others."""
    runs = [hand_run("old", icu_beds_per_100k=None), hand_run("older", icu_beds_per_100k=None)]
    assert plots.icu_occupancy(runs).axes[0].get_title() == "ICU occupancy"
    fig = plots.icu_occupancy([*runs, hand_run("ni")])
    assert fig.axes[0].get_title() == "ICU occupancy against ICU capacity"
    assert "no capacity given for old, older" in [line.get_label() for line in fig.axes[0].lines]


@pytest.mark.parametrize("name", list(plots.FIGURES))
def test_a_one_day_run_shows_day_0_inside_every_axes_and_no_later_day(name):
    """Day 0 lies inside the x axis of every panel (the age panels share their x axis: it was
    widened once, then cut back to start at 0, leaving the day's marker half outside), and no
    tick names a day the run did not simulate."""
    fig = plots.FIGURES[name]([hand_run("ni", days=1)])
    for ax in fig.axes:
        left, right = ax.get_xlim()
        assert left < 0 < right < 1, (name, ax.get_title(), (left, right))
        assert [t for t in ax.get_xticks() if left <= t <= right] == [0], (name, ax.get_title())


@pytest.mark.parametrize("name", list(plots.FIGURES))
def test_a_one_day_run_of_equal_replicates_draws_its_marker_without_a_negative_bar(name):
    """Three replicates of one day with 1 case each (0.1% of 1,000 agents, 1% of 100): the float
    mean of three 0.1s is 0.10000000000000002, above their maximum, and the bar from the mean to
    the maximum was negative, which matplotlib refuses (``abm run --days 1`` failed with "'yerr'
    must not contain negative values"). The bar is 0 on both sides."""
    run = hand_run("ni", days=1, replicates=3)
    for table in (run.timeseries, run.by_age):
        table[table.columns.difference(["day", "replicate", "age_group", "agents"])] = 1.0
    if name == "reproduction_number":  # a week of one infection has no figure to draw
        run.timeseries[["new_infections", "secondary_infections"]] = float(plots.reproduction.PLOTTED_LEAST)
    fig = plots.FIGURES[name]([run])
    for ax in fig.axes:
        for bars in ax.containers:  # the marker's error bar: no length either way
            for segment in bars.lines[2][0].get_segments():
                assert segment[0][1] == pytest.approx(segment[1][1])


@pytest.mark.parametrize("name", list(plots.FIGURES))
def test_a_longer_run_starts_at_day_0_and_shows_its_last_day(name):
    fig = plots.FIGURES[name]([hand_run("ni", days=5)])
    for ax in fig.axes:
        left, right = ax.get_xlim()
        assert left == 0 and right >= 4, (name, ax.get_title(), (left, right))


def test_lines_are_the_means_over_replicates_per_100k_and_in_percent():
    run = hand_run("ni", days=3, replicates=2)  # day d: replicates d and d + 1, mean d + 0.5
    mean = np.arange(3) + 0.5
    hosp = plots.hospital_occupancy([run]).axes[0].lines[0].get_ydata()
    assert hosp == pytest.approx(mean * 100)  # per 100,000 of 1,000 agents
    cum = plots.cumulative_infections([run]).axes[0].lines[0].get_ydata()
    assert cum == pytest.approx(mean / 10)  # percent of 1,000 agents
    by_age = plots.cumulative_by_age([run])
    for ax in by_age.axes:
        assert ax.lines[0].get_ydata() == pytest.approx(mean)  # percent of 100 agents


def test_the_reproduction_number_plot_names_a_run_without_it_and_is_left_out_when_none_has_it(tmp_path):
    """A run written with ``outputs.reproduction_number: false`` (or before abm had it) has no
    line and is named so; with no such run at all, no reproduction_number.png is written. The
    line pools the replicates' centred weeks: 1.0 wherever the week had infections, as every count
    here equals its new infections."""
    with_it = hand_run("with", days=10)
    without = hand_run("without", days=10)
    without.timeseries = without.timeseries.drop(columns=["secondary_infections", "reproduction_number"])
    fig = plots.FIGURES["reproduction_number"]([with_it, without])
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert "without: no reproduction number recorded" in labels and "with" in labels
    line = next(ln for ln in fig.axes[0].get_lines() if ln.get_label() == "with")
    # day 0's week (days 0-3) holds 6 + 10 infections, under PLOTTED_LEAST (25): no figure; day 1's 10 + 15
    assert plots.reproduction.PLOTTED_LEAST == 25
    np.testing.assert_allclose(np.asarray(line.get_ydata(), dtype=float), [np.nan] + [1.0] * 9)
    assert "line: the replicates pooled; band: lowest to highest of 2 replicates" in notes(fig)
    assert "weeks of fewer than 25 infections\n(the band: in the replicate): not drawn" in labels
    written = plots.write_plots([without], tmp_path / "a")
    assert "reproduction_number.png" not in {p.name for p in written}
    assert "reproduction_number.png" in {p.name for p in plots.write_plots([with_it, without], tmp_path / "b")}


@pytest.mark.parametrize(
    ("value", "label"),
    [(0, "$0"), (950, "$950"), (1000, "$1k"), (12_500, "$12.5k"), (250_000, "$250k"), (1_000_000, "$1M"),
     (1_020_000, "$1.02M"), (1_500_000, "$1.5M"), (23_000_000, "$23M"), (230_000_000, "$230M"),
     (4_500_000_000, "$4.5B"), (999.5, "$1k"), (999_999, "$1M"), (-2_500, "-$2.5k")],
)  # fmt: skip
def test_cost_ticks_read_in_dollars(value, label):
    assert plots.dollars(value) == label


def test_the_cost_plot_labels_its_axis_in_dollars_without_an_offset():
    """Costs of millions, where matplotlib's own labels read 0.5 ... 3.0 under a "1e6" offset (a
    run that booked nothing draws an axis of cents, which has no offset either way)."""
    run = hand_run("ni", days=5)
    run.costs = pd.DataFrame({"item": "vaccine_dose", "day": [1, 3], "replicate": 0, "count": [1, 2],
                              "unit_cost": 1_000_000.0})  # fmt: skip
    fig = plots.cumulative_cost([run])
    ax = fig.axes[0]
    assert ax.get_ylabel() == "cost for the run's agents"
    assert ax.yaxis.get_major_formatter()(2_000_000, 0) == "$2M"
    fig.canvas.draw()
    assert ax.yaxis.get_offset_text().get_text() == ""
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert "$0" in labels and "$3M" in labels and all(t.startswith("$") for t in labels), labels


def test_a_run_keeps_its_colour_whatever_the_number_of_runs_compared():
    """The k-th run is drawn in one colour in a comparison of 4 runs and in one of 11 (tab20 in its
    own order gave 11 runs five pairs of one hue: the second run, orange among 4, turned light blue),
    and 20 runs get 20 colours."""
    assert plots.colors(11)[:4] == plots.colors(4) and plots.colors(11)[:10] == plots.colors(10)
    assert plots.colors(4)[1] == plt.get_cmap("tab10")(1)  # orange, as before among 10 runs or fewer
    assert len(set(plots.colors(20))) == 20


def spread_run(label: str, days: int = 30) -> plots.RunTables:
    """A run of two replicates, one at 0 and one at 900 per 1,000 agents every day: its band spans
    the whole axes, wherever a legend goes inside them."""
    run = hand_run(label, days=days)
    high = run.timeseries["replicate"] == 1
    for column in ("hospital_occupancy", "icu", "new_infections", "cumulative_infected"):
        run.timeseries[column] = np.where(high, 900.0, 0.0)
    return run


def inside(fig: matplotlib.figure.Figure, ax: matplotlib.axes.Axes) -> bool:
    """Whether the axes' legend lies within the axes."""
    fig.draw_without_rendering()
    legend, box = ax.get_legend().get_window_extent(), ax.get_window_extent()
    return box.x0 <= legend.x0 and legend.x1 <= box.x1 and box.y0 <= legend.y0 and legend.y1 <= box.y1


@pytest.mark.parametrize("name", ["hospital_occupancy", "icu_occupancy", "new_infections", "cumulative_infections"])
def test_a_legend_that_would_cover_the_data_goes_beside_the_axes(name):
    """Eleven runs whose bands fill the axes: the legend, placed inside wherever matplotlib found
    best, lay over the bands (matplotlib's choice sees lines, not bands); it now goes to the
    right of the axes. A run whose data leave a corner free keeps its legend inside."""
    fig = plots.FIGURES[name]([spread_run(f"run {k}") for k in range(11)])
    ax = fig.axes[0]
    assert not inside(fig, ax) and ax.get_legend().get_window_extent().x0 >= ax.get_window_extent().x1
    from abm.outputs.figure_parts import covers_data

    assert not covers_data(ax, ax.get_legend())
    fig = plots.FIGURES[name]([hand_run("ni", days=30)])  # a line rising from 0: the top left is free
    assert inside(fig, fig.axes[0]) and not covers_data(fig.axes[0], fig.axes[0].get_legend())


def test_the_age_panels_legend_goes_beside_them_where_it_would_cover_the_first_panels_data():
    fig = plots.cumulative_by_age([spread_run(f"run {k}") for k in range(11)])
    assert fig.axes[0].get_legend() is None
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [f"run {k}" for k in range(11)]
    fig = plots.cumulative_by_age([hand_run("ni", days=30)])
    assert inside(fig, fig.axes[0]) and not fig.legends


def dated(run: plots.RunTables, start: str = "2020-03-01") -> plots.RunTables:
    run.summary["start_date"] = start
    return run


@pytest.mark.parametrize("name", list(plots.FIGURES))
def test_a_dated_run_gives_the_calendar_dates_of_its_days_on_top(name):
    """A run with simulation.start_date named only day 0's date under its axis ("day (day 0 =
    2020-03-01)"): when day 120 was meant the reader counted. An axis on top gives the dates
    (months here, the year once), each tick over its day; the day numbers stay below."""
    import matplotlib.dates as mdates

    fig = plots.FIGURES[name]([dated(hand_run("ni", days=180))])
    fig.draw_without_rendering()
    ax = fig.axes[0]
    assert ax.get_xlabel() in ("day (day 0 = 2020-03-01)", "")  # the age panels name it on the bottom row
    (top,) = ax.child_axes
    shown = [mdates.num2date(t).date() for t in top.get_xticks()]
    left, right = (mdates.num2date(x).date() for x in top.get_xlim())
    within = [d for d in shown if left <= d <= right]
    assert within and all(d.day == 1 for d in within), within  # month starts
    labels = dict(zip(shown, [t.get_text() for t in top.get_xticklabels()], strict=True))
    assert [labels[d] for d in within[1:]] == [d.strftime("%b") for d in within[1:]]  # "Apr" or "May"...
    assert top.xaxis.get_major_formatter().get_offset() == "2020"
    # each tick stands over its day: 2020-04-01 over day 31
    for d in within:
        x = top.transData.transform((mdates.date2num(d), 0))[0]
        assert x == pytest.approx(ax.transData.transform(((d - date(2020, 3, 1)).days, 0))[0])


def test_undated_runs_and_runs_of_different_start_dates_have_no_date_axis():
    for runs in ([hand_run("ni")], [dated(hand_run("a")), dated(hand_run("b"), "2021-01-01")]):
        for name, make in plots.FIGURES.items():
            assert all(not ax.child_axes for ax in make(runs).axes), name


def test_a_one_day_dated_run_ticks_its_one_date():
    import matplotlib.dates as mdates

    fig = plots.hospital_occupancy([dated(hand_run("ni", days=1))])
    fig.draw_without_rendering()
    (top,) = fig.axes[0].child_axes
    left, right = top.get_xlim()
    assert [mdates.num2date(t).date() for t in top.get_xticks() if left <= t <= right] == [date(2020, 3, 1)]


@pytest.mark.parametrize("name", [n for n in plots.FIGURES if n != "cumulative_by_age"])
def test_the_band_note_keeps_clear_of_a_dated_runs_x_label(name):
    """The note on the line and band sat in the figure's bottom right corner, where a dated run's
    longer x label ran under it (the reproduction number's note over "day (day 0 = 2020-03-01)")."""
    run = dated(hand_run("ni", days=30))
    run.timeseries["new_infections"] = run.timeseries["secondary_infections"] = 30.0  # R figures to draw
    fig = plots.FIGURES[name]([run])
    fig.draw_without_rendering()
    ax = fig.axes[0]
    note = next(t for t in [*fig.texts, *ax.texts] if t.get_text().startswith("line: "))
    assert not note.get_window_extent().overlaps(ax.xaxis.label.get_window_extent())
    figure = fig.bbox
    box = note.get_window_extent()
    assert figure.x0 <= box.x0 and box.x1 <= figure.x1 and figure.y0 <= box.y0  # within the figure
