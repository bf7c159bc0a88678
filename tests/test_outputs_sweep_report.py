"""The sweep's report page: what was swept, written as the sweep's plot writes the values."""

from __future__ import annotations

from abm.outputs.sweep_report import sweep_report_html


def test_the_swept_values_are_written_as_the_plot_writes_them_not_as_python_does():
    """report.html's "Swept:" list wrote a mapping as Python's repr ({'asymptomatic': 10}), and
    true and null as True and None, unlike the plot, the console and the scenario's YAML."""
    sweeps = {"seeding.infections": [{"asymptomatic": 10}, {"asymptomatic": 20}], "x.flag": [True, None]}
    page = sweep_report_html("s", sweeps, [], ["sweep.csv"])
    assert "<li>seeding.infections: {&quot;asymptomatic&quot;: 10}, {&quot;asymptomatic&quot;: 20}</li>" in page
    assert "<li>x.flag: true, null</li>" in page
    assert "True" not in page and "&#x27;" not in page


def test_the_changes_table_says_which_way_a_change_goes():
    """The changes table gave -5,069 deaths with no word on the sign, where abm compare's averted
    counts are the other way round (the first run's minus the run's: 5,069). Its caption now
    says a change is the variant's minus the first's, below 0 fewer than in the first."""
    import pandas as pd

    from abm.outputs.sweep_report import sweep_tables

    nan = float("nan")
    means = {
        "replicates": 2,
        "cumulative_infected_share_mean": 0.5,
        "peak_hospital_occupancy_mean": 9.5,
        "deaths_mean": 13.0,
        "total_cost_mean": 0.0,
        "reproduction_number_initial_mean": 1.5,
        "reproduction_number_initial_n": 2,
    }
    ends = ("per_100k", "low", "high", "region", "region_low", "region_high")
    first = {f"{n}_change_{e}": nan for n in ("hospitalizations", "deaths", "total_cost") for e in ends}
    deaths = dict(zip((f"deaths_change_{e}" for e in ends[3:]), (-50, -80, -20), strict=True))  # region
    second = dict.fromkeys(first, 10.0) | deaths
    summary = pd.DataFrame([means | first, means | second])
    _, changes = sweep_tables(summary, ["doses=0", "doses=300"], [5000], [2252782])
    assert changes.rows[1][2] == "-50 (-80 to -20)"
    assert "a change is the variant's figure minus the first's: below 0, fewer" in changes.caption


def test_a_change_without_spread_says_so_instead_of_an_interval_of_no_width():
    """A cost fixed by the scenario (doses at a set rate) changed by the same amount in every
    replicate, and the table read "22,978,376 (22,978,376 to 22,978,376)"."""
    import pandas as pd

    from abm.outputs.sweep_report import _change

    ends = ("per_100k", "low", "high", "region", "region_low", "region_high")
    row = pd.Series(
        dict(
            zip(
                (f"total_cost_change_{e}" for e in ends),
                (1.0, 1.0, 1.0, 22978376.0, 22978376.0, 22978376.2),
                strict=True,
            )
        )
    )
    assert _change(row, "total_cost", "region", 0) == "22,978,376 (the same in every replicate)"
    row["total_cost_change_region_high"] = 22978377.0
    assert _change(row, "total_cost", "region", 0) == "22,978,376 (22,978,376 to 22,978,377)"
    row["total_cost_change_region_low"] = float("nan")
    assert _change(row, "total_cost", "region", 0) == "22,978,376"
