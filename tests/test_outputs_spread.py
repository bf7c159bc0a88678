"""The spread over replicates (abm.outputs.spread): replicates of one value have an sd of exactly
0 in summary.json, on the console, in sweep_summary.csv and in the intervals of abm compare."""

from __future__ import annotations

import math

import numpy as np
import pytest

from abm.outputs.differences import paired_interval, welch_interval
from abm.outputs.spread import sample_covariance, sample_sd, sample_variance
from abm.outputs.summary import mean_sd, summarize
from abm.outputs.summary_table import summary_table
from tests.test_outputs_metrics import BEDS_PER_100K, REGION_META, tiny_result

# Ten replicates that each spent 180 doses at $19.70 (a fixed daily supply): numpy's mean of the
# ten is 3,545.999999999999, one step below the value, and its sd about that mean was 4.8e-13.
SPENT = 3545.9999999999995


def test_replicates_of_one_value_have_an_sd_of_zero():
    """abm run of vacc.yaml with 10 replicates and price_per_dose 19.7 wrote summary.json's
    total_cost sd 4.793e-13 and printed "3,546 ± 4.8e-13" (the same for 19.99 and 20.01); three
    replicates of 0.1 gave 1.7e-17."""
    assert np.full(10, SPENT).std(ddof=1) > 0  # numpy's sd, taken about the inexact mean
    assert mean_sd(np.full(10, SPENT)) == {"mean": pytest.approx(SPENT), "sd": 0.0}
    assert mean_sd(np.full(3, 0.1))["sd"] == 0.0
    assert sample_variance(np.full(10, 7 / 6)) == 0.0
    assert math.isnan(mean_sd(np.array([SPENT]))["sd"])  # one replicate: no spread to measure
    assert math.isnan(sample_sd([]))
    # other values: the usual sample sd, whatever point it is taken about
    assert sample_sd([1.0, 2.0, 3.0, 6.0]) == pytest.approx(np.std([1.0, 2.0, 3.0, 6.0], ddof=1), rel=1e-15)
    cov = sample_covariance([[1.0, 2.0, 4.0], [3.0, 1.0, 2.0]])
    assert cov == pytest.approx(np.cov([[1.0, 2.0, 4.0], [3.0, 1.0, 2.0]]), rel=1e-15)
    assert (sample_covariance(np.full((2, 10), SPENT)) == 0).all()


def test_the_console_says_no_spread_for_replicates_that_spent_the_same():
    """The run's table as abm run prints it (and report.html shows it): "3,546 ± 0", not
    "3,546 ± 4.8e-13", and the region's sd 0."""
    s = summarize(tiny_result(), REGION_META, BEDS_PER_100K)
    s["replicates"] = 10
    s["total_cost"] = mean_sd(np.full(10, SPENT))
    row = next(r for r in summary_table(s).rows if r[0] == "total cost ($)")
    assert row[1] == "3,546 ± 0"


def test_a_difference_the_same_in_every_replicate_has_an_interval_of_no_width():
    """Ten paired replicates that differ by the same amount: the interval is that amount at both
    ends (it was 3.4e-13 wide); two runs without spread compared as independent runs likewise."""
    paired = paired_interval(np.full(10, SPENT), np.zeros(10))
    assert paired.low == paired.mean == paired.high
    welch = welch_interval(np.full(10, SPENT), np.full(10, 0.1))
    assert welch.low == welch.mean == welch.high
