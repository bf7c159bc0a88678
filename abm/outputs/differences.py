"""How sure a comparison is: hospitalizations and deaths averted against the first run, with
95% intervals over replicates.

Each replicate of a run is one draw of its epidemic, so the mean over replicates is an estimate
with an error, and a difference between two runs may be noise. Per replicate, the totals over
the run (admissions, deaths by the last day) are taken per 100,000 agents, so that runs of
different sizes compare; the averted count of a run is the first run's mean minus its own.

Runs with the same seed, agents, number of replicates, region and kind of device share their
population and their random streams (keyed by seed, stream and day): replicate r of one meets
the same draws as replicate r of the other until their interventions make them differ. Their difference is then taken
replicate by replicate (common random numbers), with a paired t interval, which removes the noise
the two runs share. Other runs are independent draws, compared with Welch's t interval. Either
interval is over the replicates of the runs' population draw(s): the population itself is not
redrawn between replicates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from abm.outputs.plots import RunTables
from abm.outputs.spread import sample_covariance, sample_sd, sample_variance

LEVEL = 0.95
# How a table cell says that a difference has no interval: a run of one replicate has no spread.
NO_INTERVAL = "one replicate: no interval"
MEASURES = ("hospitalizations", "deaths")
# The columns of the ends of the cost per averted hospitalization's and death's intervals.
COST_ENDS = {
    "hospitalizations": ("cost_per_averted_low", "cost_per_averted_high"),
    "deaths": ("cost_per_averted_death_low", "cost_per_averted_death_high"),
}


def replicate_totals(run: RunTables) -> dict[str, np.ndarray]:
    """Per replicate (in replicate order), per 100,000 agents: hospital admissions over the run
    (the sum of ``new_hospitalizations``) and deaths by its last day."""
    ts = run.timeseries.sort_values(["replicate", "day"])
    by_rep = ts.groupby("replicate")
    scale = 1e5 / run.agents
    return {
        "hospitalizations": by_rep["new_hospitalizations"].sum().to_numpy(dtype=float) * scale,
        "deaths": by_rep["deaths"].last().to_numpy(dtype=float) * scale,
    }


@dataclass(frozen=True)
class Interval:
    """A mean difference and its two-sided interval (NaN bounds where there is none: fewer
    than two replicates)."""

    mean: float
    low: float
    high: float


def paired_interval(base: np.ndarray, other: np.ndarray, level: float = LEVEL) -> Interval:
    """Mean of ``base - other`` over paired replicates with a t interval (n - 1 degrees of
    freedom)."""
    d = np.asarray(base, dtype=float) - np.asarray(other, dtype=float)
    mean = float(d.mean())
    if len(d) < 2:
        return Interval(mean, math.nan, math.nan)
    half = float(stats.t.ppf(0.5 + level / 2, len(d) - 1)) * sample_sd(d) / math.sqrt(len(d))
    return Interval(mean, mean - half, mean + half)


def welch_interval(base: np.ndarray, other: np.ndarray, level: float = LEVEL) -> Interval:
    """Difference of the means of two independent samples with Welch's t interval
    (Welch-Satterthwaite degrees of freedom)."""
    a, b = np.asarray(base, dtype=float), np.asarray(other, dtype=float)

    def moments(x: np.ndarray) -> tuple[float, float, int]:
        return x.mean(), sample_variance(x), len(x)

    return welch_of_moments(moments(a), moments(b), level)


def welch_of_moments(base: tuple[float, float, int], other: tuple[float, float, int], level: float = LEVEL) -> Interval:
    """:func:`welch_interval` from each sample's mean, variance (n - 1 in its denominator) and
    size, for figures whose replicates' own values are not kept (summary.json's mean and sd):
    ``base``'s mean minus ``other``'s, with NaN bounds where a sample has fewer than two values."""
    (mean_a, var_a, n_a), (mean_b, var_b, n_b) = base, other
    mean = float(mean_a - mean_b)
    if n_a < 2 or n_b < 2:
        return Interval(mean, math.nan, math.nan)
    va, vb = var_a / n_a, var_b / n_b
    se = math.sqrt(va + vb)
    if se == 0:
        return Interval(mean, mean, mean)
    df = (va + vb) ** 2 / (va**2 / (n_a - 1) + vb**2 / (n_b - 1))
    half = float(stats.t.ppf(0.5 + level / 2, df)) * se
    return Interval(mean, mean - half, mean + half)


def replicate_costs(run: RunTables) -> np.ndarray:
    """Per replicate (in replicate order): the run's total cost (count x unit cost of every
    booked item; 0 for a replicate that booked nothing)."""
    c = run.costs
    by_rep = (c["count"] * c["unit_cost"]).groupby(c["replicate"]).sum() if len(c) else pd.Series(dtype=float)
    return by_rep.reindex(range(run.replicates), fill_value=0.0).to_numpy(dtype=float)


def ratio_interval(means: np.ndarray, cov: np.ndarray, df: float, level: float = LEVEL) -> Interval:
    """Fieller's interval for the ratio of two means, ``means[0] / means[1]``, given the 2 x 2
    covariance of those means and the t degrees of freedom: the ratios R for which
    ``means[0] - R means[1]`` is within t sds of 0. Unbounded (-inf, inf) when the denominator is
    not beyond noise (the set is then no interval); NaN ends with no degrees of freedom. Means
    without noise (every replicate spends and averts the same) give the ratio itself at both ends.

    The ratios solve a R^2 - 2 h R + c <= 0, with a = mh^2 - t^2 v11 > 0 (else unbounded), h =
    mc mh - t^2 v01 and c = mc^2 - t^2 v00. The quarter discriminant h^2 - a c is taken in its
    expanded form, t^2 (mh^2 v00 - 2 mc mh v01 + mc^2 v11 - t^2 (v00 v11 - v01^2)), in which the
    terms mc^2 mh^2 cancel exactly: computed as h^2 - a c, they leave a rounding error that is
    negative about a third of the time when the covariance is 0, which read as no interval. It is
    never below 0 in exact arithmetic (the ratio mc / mh lies in the set), so a rounding error
    below 0 is taken as 0."""
    (mc, mh), t = means, float(stats.t.ppf(0.5 + level / 2, df)) if df > 0 else math.nan
    ratio = mc / mh if mh != 0 else math.nan
    if math.isnan(t):
        return Interval(ratio, math.nan, math.nan)
    v00, v01, v11 = float(cov[0, 0]), float(cov[0, 1]), float(cov[1, 1])
    a = mh**2 - t**2 * v11
    if a <= 0:
        return Interval(ratio, -math.inf, math.inf)
    h = mc * mh - t**2 * v01
    quarter = t**2 * (mh**2 * v00 - 2 * mc * mh * v01 + mc**2 * v11 - t**2 * (v00 * v11 - v01**2))
    half = math.sqrt(max(quarter, 0.0))
    return Interval(ratio, (h - half) / a, (h + half) / a)


def cost_per_averted(
    base: RunTables, other: RunTables, outcomes: tuple[np.ndarray, np.ndarray], same: bool, level: float = LEVEL
) -> Interval:
    """The extra cost per averted outcome (hospitalization, death) of ``other`` against ``base``
    (per agent, so runs of different sizes compare) with Fieller's interval: from
    replicate-by-replicate differences when ``same`` (paired), else from the two runs' own
    (co)variances (t on the smaller run's degrees of freedom). ``outcomes``: the two runs' counts
    per replicate, per 100,000 agents (:func:`replicate_totals`)."""
    cost = [replicate_costs(r) / r.agents for r in (base, other)]
    hosp = [h / 1e5 for h in outcomes]
    if same:
        pairs = np.stack([cost[1] - cost[0], hosp[0] - hosp[1]])  # extra cost, averted
        n = pairs.shape[1]
        cov = sample_covariance(pairs) / n if n > 1 else np.full((2, 2), math.nan)
        return ratio_interval(pairs.mean(axis=1), cov, n - 1, level)
    means = np.array([cost[1].mean() - cost[0].mean(), hosp[0].mean() - hosp[1].mean()])
    cov = np.zeros((2, 2))
    for c, h in zip(cost, hosp, strict=True):
        # extra cost = C(other) - C(base) and averted = H(base) - H(other): within either run, cost
        # and hospitalizations enter with opposite signs, so their covariance enters negated.
        if len(c) < 2:
            return ratio_interval(means, cov, 0, level)
        m = sample_covariance(np.stack([c, h])) / len(c)
        cov += np.array([[m[0, 0], -m[0, 1]], [-m[0, 1], m[1, 1]]])
    return ratio_interval(means, cov, min(len(cost[0]), len(cost[1])) - 1, level)


def _setting(scenario: dict[str, Any] | None, section: str, key: str, default: Any = None) -> Any:
    """A value of a resolved scenario (``default`` where there is no scenario or it leaves the
    key out)."""
    part = (scenario or {}).get(section)
    return part.get(key, default) if isinstance(part, dict) else default


def same_draws(base: dict[str, Any] | None, other: dict[str, Any] | None) -> bool:
    """Whether two resolved scenarios (plain data) draw the same population and random streams:
    the same seed (known), agents, region and kind of device (the CPU and a GPU draw different
    random streams from one seed)."""

    def device(scenario: dict[str, Any] | None) -> str:
        return str(_setting(scenario, "simulation", "device", "cpu")).split(":")[0]

    return (
        _setting(base, "simulation", "seed") is not None
        and _setting(base, "simulation", "seed") == _setting(other, "simulation", "seed")
        and _setting(base, "population", "agents") == _setting(other, "population", "agents")
        and device(base) == device(other)
        and _setting(base, "population", "region") == _setting(other, "population", "region")
    )


def paired(base: RunTables, other: RunTables) -> bool:
    """Whether two runs share their draws replicate by replicate: :func:`same_draws` of their
    scenarios, with the same agents and number of replicates."""
    return (
        same_draws(base.scenario, other.scenario)
        and base.agents == other.agents
        and base.replicates == other.replicates
    )


def averted(runs: list[RunTables], level: float = LEVEL) -> list[dict[str, Any]]:
    """Per run: hospitalizations and deaths averted per 100,000 against the first run, each a
    mean with its interval (``{measure}_averted_per_100k``, ``_low``, ``_high``), and how the
    difference was taken (``averted_by``: ``paired replicates`` or ``independent runs``; empty for
    the first run)."""
    first = replicate_totals(runs[0])
    rows: list[dict[str, Any]] = []
    for i, run in enumerate(runs):
        row: dict[str, Any] = {}
        if i == 0:
            for m in MEASURES:
                row |= {f"{m}_averted_per_100k": math.nan, f"{m}_averted_low": math.nan, f"{m}_averted_high": math.nan}
            rows.append(
                row | dict.fromkeys((e for ends in COST_ENDS.values() for e in ends), math.nan) | {"averted_by": ""}
            )
            continue
        same = paired(runs[0], run)
        interval = paired_interval if same else welch_interval
        totals = replicate_totals(run)
        for m in MEASURES:
            iv = interval(first[m], totals[m], level)
            row |= {f"{m}_averted_per_100k": iv.mean, f"{m}_averted_low": iv.low, f"{m}_averted_high": iv.high}
        for m in MEASURES:
            cpa = cost_per_averted(runs[0], run, (first[m], totals[m]), same, level)
            row |= dict(zip(COST_ENDS[m], (cpa.low, cpa.high), strict=True))
        row["averted_by"] = "paired replicates" if same else "independent runs"
        rows.append(row)
    return rows
