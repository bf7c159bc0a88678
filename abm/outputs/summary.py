"""The run summary: peaks of the mean curves, final shares, totals, mean and sd over
replicates."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from abm.engine.disease import Stage
from abm.engine.recorder import SimulationResult
from abm.outputs.tables import HOSPITAL_STAGES


def mean_sd(values: np.ndarray) -> dict[str, float]:
    """Mean and sample sd; the sd is NaN (null in summary.json, empty in a CSV) for a single
    replicate, which has no spread to measure (an sd of 0 would read as no variation)."""
    v = np.asarray(values, dtype=np.float64)
    return {"mean": float(v.mean()), "sd": float(v.std(ddof=1)) if v.size > 1 else math.nan}


def peak(curve_by_replicate: np.ndarray, agents: int) -> dict[str, float | int | bool | None]:
    """Peak of the mean curve over replicates ([day, replicate]).

    ``value``: the mean curve's maximum; ``day``: the first day the mean curve reaches it (a
    mean of few replicates is a noisy step curve that often reaches its maximum on several days:
    the first of them is taken), None for a curve that stays at zero (it has no peak);
    ``per_100k``: the value per 100,000 agents; ``at_end``: the mean curve is at its maximum on
    the last day too (whether it first reached it then or earlier), so the true peak may come
    after the run and ``value`` is a lower bound. :func:`peak_at_end` says which of the two it is.
    """
    mean = curve_by_replicate.mean(axis=1)
    day = int(mean.argmax())
    value = float(mean[day])
    return {
        "value": value,
        "day": day if value > 0 else None,
        "per_100k": value * 1e5 / agents,
        "at_end": bool(value > 0 and mean[-1] == value),
    }


# How a curve at its maximum on the last day (a peak's ``at_end``) is said, by :func:`peak_at_end`:
# "still rising on the last day", "maximum reached again on the last day".
AT_END_WORDS = {"rising": "still rising", "again": "maximum reached again"}
PEAK_MAY_COME_LATER = "the peak may come later"


def peak_at_end(summary_peak: dict[str, Any], days: int) -> str | None:
    """How a run's mean curve ends against its peak (``summary_peak``, of :func:`peak`, for a run of
    ``days`` days): ``"rising"`` when it first reaches its maximum on the last day (it was lower
    the day before: it may still be rising), ``"again"`` when it reaches its maximum earlier, on
    the peak's day, and again on the last day (a flat top, or a return to it: the peak may come
    later, but the curve need not be rising), None when it ends below its maximum or has no peak.
    A summary without ``at_end`` (written before it was added) is at its end when its peak's day
    is the last."""
    if summary_peak.get("day") is None or not summary_peak.get("at_end", summary_peak["day"] == days - 1):
        return None
    return "rising" if summary_peak["day"] == days - 1 else "again"


def plural(noun: str, n: int) -> str:
    """``noun`` for a count of ``n``: singular for 1, plural (an added s) otherwise."""
    return noun if n == 1 else f"{noun}s"


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun`` in the right number: ``1 replicate``, ``1,000 replicates``."""
    return f"{n:,} {plural(noun, n)}"


def summarize(res: SimulationResult, meta: dict[str, Any], beds_per_100k: float) -> dict[str, Any]:
    """The summary.json contents."""
    n = res.agents
    st = res.stages.astype(np.float64)  # [day, replicate, stage]
    final = st[-1]
    cumulative = n - final[:, Stage.SUSCEPTIBLE]
    hosp = st[:, :, Stage.HOSPITALIZED]
    occupancy = st[:, :, HOSPITAL_STAGES].sum(-1)
    capacity = beds_per_100k * n / 1e5
    mean_occ = occupancy.mean(axis=1)
    # Cumulative infections by transmission (mean over replicates): seeded infections are left
    # out, so that seeding after day 0 is not read as a jump in the infection rate.
    cum_transmitted = np.cumsum(res.transmitted.astype(np.float64).mean(axis=1))
    out = {
        **meta,
        "agents": n,
        "days": res.days,
        "replicates": res.replicates,
        "cumulative_infected": {**mean_sd(cumulative), "share": float(cumulative.mean() / n)},
        "peak_hospitalized": peak(hosp, n),
        "peak_hospital_occupancy": peak(occupancy, n),
        "peak_icu": peak(st[:, :, Stage.CRITICAL_ICU], n),
        # Infections by transmission: the initial (seeded) infections are not an epidemic's peak.
        "peak_new_infections": peak(res.transmitted.astype(np.float64), n),
        # The thesis's "peak daily infection rate": max second difference of the mean
        # cumulative-infected curve, by transmission (none for a run of 1 or 2 days). With every
        # seed on day 0, as in the thesis, this is the second difference of all cumulative infections.
        "peak_infection_rate_2nd_difference": float(np.diff(cum_transmitted, n=2).max()) if res.days > 2 else None,
        "hospital_capacity": {
            "beds_per_100k": beds_per_100k,
            "beds": capacity,
            "days_over_capacity": int((mean_occ > capacity).sum()),
            # the mean curve can stay under a line that some replicates cross
            "replicates_over_capacity": int((occupancy > capacity).any(axis=0).sum()),
        },
        "deaths": mean_sd(final[:, Stage.DEATH]),
        "total_cost": mean_sd(res.cost_totals),
    }
    return out
