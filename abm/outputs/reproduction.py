"""The reproduction number from who infected whom (:mod:`abm.engine.infectors`): for the agents
infected on a day, the infections they caused, on average (the case reproduction number by day of
infection). A day's figure is final once none of its agents may still infect anyone; until then it is
left out. Works on plain arrays [day, replicate] and on a run's ``timeseries`` table, without torch.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# Days in the windows that pool a replicate's days (the first week; the plotted curve, centred).
WEEK = 7

# The fewest infections a week must hold for the plot to draw its reproduction number. A week's
# figure is a mean over its infections of the infections each caused: were those Poisson with mean
# R (no overdispersion, which the model's households and settings add), its standard error would be
# sqrt(R / n), 0.2 at R = 1 and n = 25; fewer infections give a line that wanders across 1 by
# chance alone (a tracing run's tail of a handful of infections a week).
PLOTTED_LEAST = 25


def arrays(ts: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """[day, replicate] new infections, the infections they caused and whether that count is final,
    from a ``timeseries`` table; None for a table without the reproduction number's columns (a run
    with ``outputs.reproduction_number: false``, or one written before abm had them)."""
    if "secondary_infections" not in ts.columns or "reproduction_number" not in ts.columns:
        return None

    def wide(column: str) -> np.ndarray:
        return ts.pivot(index="day", columns="replicate", values=column).to_numpy(dtype=np.float64)

    new, r = wide("new_infections"), wide("reproduction_number")
    return new, wide("secondary_infections"), (new == 0) | ~np.isnan(r)


def pooled(new: np.ndarray, caused: np.ndarray, final: np.ndarray) -> float:
    """Infections caused per infection over the given cells; NaN without infections or with a cell
    whose count is not final."""
    total = float(new.sum())
    return float(caused.sum()) / total if total > 0 and bool(final.all()) else float("nan")


def first_week(new: np.ndarray, caused: np.ndarray, final: np.ndarray) -> np.ndarray:
    """Per replicate, the reproduction number of the infections of its first week (the day of its
    first infection and the six after it); NaN for a replicate without infections or whose first
    week's count is not final."""
    out = np.full(new.shape[1], np.nan)
    for r, w in enumerate(_first_weeks(new)):
        if w is not None:
            out[r] = pooled(new[w, r], caused[w, r], final[w, r])
    return out


def first_week_infections(new: np.ndarray) -> np.ndarray:
    """Per replicate, the infections of its first week, on which :func:`first_week`'s figure
    rests (0 for a replicate without infections)."""
    return np.array([0.0 if w is None else float(new[w, r].sum()) for r, w in enumerate(_first_weeks(new))])


def _first_weeks(new: np.ndarray) -> list[slice | None]:
    """Per replicate, the days of its first week ([day, replicate] ``new`` infections): the day of
    its first infection and the six after it; None for a replicate without infections."""
    out: list[slice | None] = []
    for r in range(new.shape[1]):
        days = np.flatnonzero(new[:, r] > 0)
        out.append(slice(days[0], days[0] + WEEK) if days.size else None)
    return out


def _weeks(new: np.ndarray, caused: np.ndarray, final: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """[day, replicate] sums over the week centred on each day (three days each side, fewer at
    the run's ends) of the infections, those they caused, and the days whose count is not final."""
    days, half = new.shape[0], WEEK // 2

    def window_sums(x: np.ndarray) -> np.ndarray:
        c = np.concatenate([np.zeros((1, x.shape[1])), np.cumsum(x, axis=0, dtype=np.float64)])
        d = np.arange(days)
        return c[np.minimum(days, d + half + 1)] - c[np.maximum(0, d - half)]

    return window_sums(new), window_sums(caused), window_sums(~final)


def weekly(new: np.ndarray, caused: np.ndarray, final: np.ndarray, least: int = 1) -> np.ndarray:
    """[day, replicate] the reproduction number of the infections of the week centred on each day;
    NaN where that week has fewer than ``least`` infections (at least one) or a count that is not
    final."""
    n, k, open_ = _weeks(new, caused, final)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((n >= max(1, least)) & (open_ == 0), k / n, np.nan)


def weekly_pooled(new: np.ndarray, caused: np.ndarray, final: np.ndarray, least: int = 1) -> np.ndarray:
    """[day] the same over the replicates together: the infections that the week's infections of
    every replicate whose week is final caused, per infection (a replicate with few infections
    counts for few); NaN where those replicates' weeks hold fewer than ``least`` infections (at
    least one)."""
    n, k, open_ = _weeks(new, caused, final)
    done = open_ == 0
    total = np.where(done, n, 0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total >= max(1, least), np.where(done, k, 0).sum(axis=1) / total, np.nan)
