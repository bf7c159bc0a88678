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
