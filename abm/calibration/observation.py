"""The observation model: simulated daily counts to observed-like daily counts.

One implementation serves every caller. Its operations take numpy arrays or torch tensors and
give back the same kind, so the Optuna path runs them on numpy arrays (float64, fast enough for
the per-trial grid search) and the gradient path on the weighted entries of a differentiable run
(float32 tensors, differentiable in the counts); private calibration delays its own (Binomially
thinned) cases with :func:`shifted`.

Inputs (:data:`RAW`) are daily hospital admissions, deaths, onsets of symptoms and positive test
results (of the testing intervention; zeros without it), day 0 being the calibration's
``start_date``; each operation works along the first (day) dimension of a
``[days]`` or ``[days, n]`` series (:func:`observe_arrays`):

* admissions are observed as simulated;
* deaths are multiplied by the severity multiplier of their day (:func:`severity_multipliers`),
  then reported after a geometric delay of mean ``death_delay_days`` (:func:`reported`);
* cases are onsets of symptoms times the ascertainment, ``case_delay_days`` later (:func:`shifted`):
  calibration.md's "new symptomatic infections times an ascertainment rate with a reporting delay";
  or, with ``cases: positive_tests``, the positive results, ``case_delay_days`` later
  (calibration.md's "new positive tests").

Both delays are one operation, :func:`delayed`: the product with a lower-triangular Toeplitz
matrix of weights over lags (geometric for deaths, all at one lag for cases, which moves each
count exactly). The constants (severity multipliers, delay matrices) are numpy float64, cast to
a tensor's dtype. Losses compare sums over 7-day blocks of a window (:func:`weekly_sums`).

torch is not imported here: a tensor's library is the loaded torch (none exists without it), so
that observed data are read and checked (``abm validate`` of a private calibration) without it.
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from types import ModuleType
from typing import TYPE_CHECKING, TypeVar

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from abm.calibration.config import Observation, whole_weeks

if TYPE_CHECKING:
    import torch

RAW = ("hospital_admissions", "deaths", "symptomatic_onsets", "positive_tests")

Series = TypeVar("Series", np.ndarray, "torch.Tensor")


def _torch_of(x: object) -> ModuleType | None:
    """torch when ``x`` is a tensor, else None."""
    loaded = sys.modules.get("torch")
    return loaded if loaded is not None and isinstance(x, loaded.Tensor) else None


def array_module(x: np.ndarray | torch.Tensor) -> ModuleType:
    """The library of ``x``: torch for a tensor, numpy otherwise."""
    return _torch_of(x) or np


def _like(constant: np.ndarray, series: Series) -> Series:
    """A numpy constant as the kind of ``series`` (a tensor takes its dtype and device)."""
    tensors = _torch_of(series)
    if tensors is not None:
        return tensors.tensor(constant, dtype=series.dtype, device=series.device)
    return constant


def severity_multipliers(obs: Observation, start_date: dt.date, days: int) -> np.ndarray:
    """The severity multiplier of each simulated day (day 0 is ``start_date``), by date of death:
    ``death_multiplier``, or with ``death_multiplier_change`` [first, last] a linear move from it
    on ``first`` to ``death_multiplier_after`` on ``last``, held after (``death_multiplier_after``
    from ``last`` on, so a change whose first and last days are one day is a step on that day)."""
    if obs.death_multiplier_change is None or obs.death_multiplier_after is None:
        return np.full(days, obs.death_multiplier)
    first, last = ((d - start_date).days for d in obs.death_multiplier_change)
    day = np.arange(days)
    share = np.clip((day - first) / (last - first), 0.0, 1.0) if last > first else (day >= last).astype(float)
    return obs.death_multiplier + share * (obs.death_multiplier_after - obs.death_multiplier)


def delay_weights(mean: float, days: int) -> np.ndarray:
    """Weights of a geometric reporting delay with mean ``mean`` days over lags 0..days-1:
    (1 - q) q^k with q = mean / (1 + mean); [1, 0, 0, ...] for mean 0."""
    q = mean / (1.0 + mean)
    return (1.0 - q) * q ** np.arange(days, dtype=float)


def shift_weights(lag: float, days: int) -> np.ndarray:
    """Weights over lags 0..days-1 that put everything at ``lag`` (none when it is past the last)."""
    w = np.zeros(days)
    w[int(lag) : int(lag) + 1] = 1.0
    return w


def delay_matrix(weights: np.ndarray) -> np.ndarray:
    """The [days, days] matrix of a delay with ``weights`` over lags 0..days-1:
    matrix[report day, event day] = weights[report day - event day], 0 before the event."""
    n = len(weights)
    # row i of the windows of [0]*(n-1) + w, reversed, is w[i], w[i-1], ..., w[0], 0, ..., 0
    return np.ascontiguousarray(sliding_window_view(np.concatenate([np.zeros(n - 1), weights]), n)[:, ::-1])


@lru_cache(maxsize=64)
def _delay_matrix(weights: Callable[[float, int], np.ndarray], value: float, days: int) -> np.ndarray:
    # Cached, read-only: the grid search reads one simulation through many observation values,
    # each delay many times.
    matrix = delay_matrix(weights(value, days))
    matrix.flags.writeable = False
    return matrix


def delayed(daily: Series, weights: Callable[[float, int], np.ndarray], value: float) -> Series:
    """Each day's counts spread over that day and the following ones with ``weights(value,
    days)`` over lags 0..days-1 (:func:`delay_matrix`); what falls after the last day is lost.
    Differentiable in a tensor ``daily``."""
    n = daily.shape[0]
    return daily if n == 0 else _like(_delay_matrix(weights, value, n), daily) @ daily


def reported(daily: Series, mean: float) -> Series:
    """Counts reported per day when each day's events are reported after a geometric delay of
    mean ``mean`` days (:func:`delay_weights`); what is reported after the last day is lost."""
    return daily if mean == 0 else delayed(daily, delay_weights, mean)


def shifted(daily: Series, days: int) -> Series:
    """``daily`` moved ``days`` days later (the case reporting delay): zeros on the first days,
    and what would fall after the last day is lost."""
    return delayed(daily, shift_weights, days)


def observe_arrays(
    raw: Mapping[str, Series], obs: Observation, targets: Iterable[str], start_date: dt.date
) -> dict[str, Series]:
    """The observation model on daily series (``raw``: the :data:`RAW` series as numpy arrays or
    torch tensors, day 0 is ``start_date``): the observed-like daily series of each target, of
    the same kind."""
    out = {}
    for t in targets:
        if t == "hospital_admissions":
            out[t] = raw[t]
        elif t == "deaths":
            deaths = raw["deaths"]
            m = _like(severity_multipliers(obs, start_date, deaths.shape[0]), deaths)
            out[t] = reported(deaths * m.reshape(-1, *[1] * (deaths.ndim - 1)), obs.death_delay_days)
        elif t == "cases" and obs.cases == "positive_tests":
            out[t] = shifted(raw["positive_tests"], obs.case_delay_days)
        elif t == "cases":
            out[t] = shifted(raw["symptomatic_onsets"] * obs.ascertainment, obs.case_delay_days)
        else:
            raise ValueError(f"unknown target {t!r}")
    return out


def weekly_sums(daily: Series, start_date: dt.date, window: tuple[dt.date, dt.date]) -> Series:
    """Sums over consecutive 7-day blocks of ``window`` (a last partial block is dropped) of a
    daily series whose day 0 is ``start_date`` and that covers the window; [weeks] or
    [weeks, n]."""
    first = (window[0] - start_date).days
    n = whole_weeks(window) * 7
    return daily[first : first + n].reshape(-1, 7, *daily.shape[1:]).sum(axis=1)
