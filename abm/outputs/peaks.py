"""The peak of a mean curve over replicates, and how a curve that is at its maximum on the last
simulated day is said (its peak may come after the run). numpy only: ``abm compare`` reads these
without loading torch."""

from __future__ import annotations

from typing import Any

import numpy as np


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
