"""Observed series, the observation model from simulated to observed counts, and the losses."""

from __future__ import annotations

import datetime as dt
from importlib.resources import files
from pathlib import Path

import numpy as np
import pandas as pd

from abm.calibration.config import CalibrationConfig, Observation
from abm.runs import RunResult

BUNDLED = {"king_county_2020": "king_county_2020.csv"}


class CalibrationError(ValueError):
    """Bad calibration data or windows; the message is meant for the user as is."""


def load_observed(cfg: CalibrationConfig, scenario: str = "") -> pd.DataFrame:
    """Daily observed counts indexed by date, one column per target, checked over the windows;
    errors name the ``scenario`` file when given."""
    source = cfg.data
    at = f"{scenario}: " if scenario else ""
    path = files("abm.calibration") / "data" / BUNDLED[source] if source in BUNDLED else Path(source)
    if source not in BUNDLED and not Path(source).is_file():
        raise CalibrationError(
            f"{at}calibration.data: {source!r} is neither a bundled series ({', '.join(BUNDLED)}) nor a file"
        )
    try:
        with path.open() as fh:
            frame = pd.read_csv(fh, parse_dates=["date"])
    except (OSError, ValueError) as exc:
        raise CalibrationError(f"{at}calibration.data: cannot read {source!r} ({exc})") from exc
    if frame.empty:
        raise CalibrationError(f"{at}calibration.data: {source!r} has no rows; it needs one row per date")
    if not pd.api.types.is_datetime64_any_dtype(frame["date"]):
        bad = pd.to_datetime(frame["date"], errors="coerce").isna()
        value = frame["date"][bad].iloc[0] if bad.any() else frame["date"].iloc[0]
        raise CalibrationError(f"{at}calibration.data: {source!r}: date {value!r} is not a date; write YYYY-MM-DD")
    twice = frame["date"][frame["date"].duplicated()]
    if len(twice):
        raise CalibrationError(
            f"{at}calibration.data: {source!r}: date {twice.iloc[0].date()} appears more than once; "
            "give one row per date"
        )
    frame = frame.set_index("date").sort_index()
    for target in cfg.targets:
        if target not in frame.columns:
            raise CalibrationError(
                f"{at}calibration.targets: {target!r} is not a column of {source!r} "
                f"(columns: {', '.join(frame.columns)})"
            )
        numbers = pd.to_numeric(frame[target], errors="coerce")
        text = numbers.isna() & frame[target].notna()
        if text.any():
            raise CalibrationError(
                f"{at}calibration.data: {source!r}, column {target!r}: {frame[target][text].iloc[0]!r} on "
                f"{frame.index[text][0].date()} is not a number; counts must be numbers >= 0"
            )
        frame[target] = numbers
    windows = [("fit_window", cfg.fit_window)] + (
        [("holdout_window", cfg.holdout_window)] if cfg.holdout_window else []
    )
    for name, (a, b) in windows:
        days = pd.date_range(a, b, freq="D")
        if days[0] < frame.index.min() or days[-1] > frame.index.max():
            raise CalibrationError(
                f"{at}calibration.{name}: {a} to {b} lies outside the data of {source!r} "
                f"({frame.index.min().date()} to {frame.index.max().date()})"
            )
        part = frame.reindex(days)[cfg.targets]
        missing = part.index[part.isna().any(axis=1)]
        if len(missing):
            raise CalibrationError(
                f"{at}calibration.{name}: {source!r} has no value on {missing[0].date()} ({len(missing)} days missing)"
            )
        negative = part.index[(part < 0).any(axis=1)]
        if len(negative):
            raise CalibrationError(
                f"{at}calibration.{name}: {source!r} has a negative count on {negative[0].date()}; counts must be >= 0"
            )
        endless = part.index[np.isinf(part.to_numpy()).any(axis=1)]
        if len(endless):
            raise CalibrationError(
                f"{at}calibration.{name}: {source!r} has an infinite count on {endless[0].date()}; counts must be "
                "finite numbers >= 0"
            )
    return frame[cfg.targets].astype(float)


def delay_weights(mean: float, days: int) -> np.ndarray:
    """Weights of a geometric reporting delay with mean ``mean`` days over lags 0..days-1:
    (1 - q) q^k with q = mean / (1 + mean); [1, 0, 0, ...] for mean 0."""
    if days <= 0:
        return np.zeros(0)
    q = mean / (1.0 + mean)
    return (1.0 - q) * q ** np.arange(days, dtype=float)


def reported(daily: np.ndarray, mean: float) -> np.ndarray:
    """Counts reported per day when each day's events are reported after a geometric delay of
    mean ``mean`` days (:func:`delay_weights`); what is reported after the last day is lost."""
    daily = np.asarray(daily, dtype=float)
    if mean == 0:
        return daily.copy()
    return np.convolve(daily, delay_weights(mean, len(daily)))[: len(daily)]


RAW = ("hospital_admissions", "deaths", "infections")


def raw_series(result: RunResult, cfg: CalibrationConfig) -> pd.DataFrame:
    """Daily simulated admissions, deaths and new infections (mean over replicates) scaled to
    the region, by calendar date: what the observation model (:func:`observe`) reads."""
    res = result.result
    scale = result.summary["region_population"] / res.agents
    dates = pd.date_range(cfg.start_date, periods=res.days, freq="D")
    return pd.DataFrame(
        {
            "hospital_admissions": res.admissions.mean(axis=1) * scale,
            "deaths": res.entries[:, :, 8].mean(axis=1) * scale,
            "infections": res.new_infections.mean(axis=1) * scale,
        },
        index=dates,
    )


def observe_arrays(
    raw: dict[str, np.ndarray], obs: Observation, targets: list[str], start_date: dt.date
) -> dict[str, np.ndarray]:
    """The observation model on daily arrays (day 0 is ``start_date``): admissions as simulated;
    deaths times the severity multiplier of their day (``death_multiplier``, or its change to
    ``death_multiplier_after``), reported after the geometric delay ``death_delay_days``; cases:
    new infections times the ascertainment, ``case_delay_days`` later."""
    out = {}
    for t in targets:
        if t == "hospital_admissions":
            out[t] = np.asarray(raw[t], dtype=float)
        elif t == "deaths":
            deaths = np.asarray(raw["deaths"], dtype=float)
            out[t] = reported(deaths * obs.death_multipliers(start_date, len(deaths)), obs.death_delay_days)
        else:
            days = len(raw["infections"])
            cases = np.asarray(raw["infections"], dtype=float) * obs.ascertainment
            out[t] = np.concatenate([np.zeros(obs.case_delay_days), cases])[:days]
    return out


def observe(raw: pd.DataFrame, cfg: CalibrationConfig) -> pd.DataFrame:
    """Observed-like daily counts of the targets from :func:`raw_series`."""
    arrays = observe_arrays({c: raw[c].to_numpy() for c in RAW}, cfg.observation, list(cfg.targets), cfg.start_date)
    return pd.DataFrame(arrays, index=raw.index)


def simulated(result: RunResult, cfg: CalibrationConfig) -> pd.DataFrame:
    """Daily simulated counts of the targets (mean over replicates) scaled to the region, by
    calendar date, through the observation model (:func:`observe_arrays`)."""
    return observe(raw_series(result, cfg), cfg)


def weekly(frame: pd.DataFrame, window: tuple[dt.date, dt.date]) -> pd.DataFrame:
    """Sums over consecutive 7-day blocks of the window (a last partial block is dropped)."""
    days = pd.date_range(window[0], window[1], freq="D")
    part = frame.reindex(days).fillna(0.0)
    n = len(days) // 7 * 7
    if n == 0:
        return part.iloc[:0]
    block = np.repeat(np.arange(n // 7), 7)
    return part.iloc[:n].groupby(block).sum()


def losses(sim: pd.DataFrame, obs: pd.DataFrame, window: tuple[dt.date, dt.date]) -> dict[str, dict[str, float]]:
    """Per target: RMSE of log1p weekly counts and ND = sum |sim - obs| / sum obs."""
    s, o = weekly(sim, window), weekly(obs, window)
    out = {}
    for t in obs.columns:
        diff = np.log1p(s[t].to_numpy()) - np.log1p(o[t].to_numpy())
        total = float(o[t].sum())
        out[t] = {
            "rmse_log1p_weekly": float(np.sqrt(np.mean(diff**2))) if len(diff) else float("nan"),
            "nd_weekly": float(np.abs(s[t] - o[t]).sum() / total) if total > 0 else float("nan"),
        }
    return out
