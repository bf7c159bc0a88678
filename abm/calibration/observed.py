"""Observed series, simulated series read through the observation model
(:mod:`abm.calibration.observation`) as frames by date, weekly sums and the losses."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from abm.calibration.config import BUNDLED, CalibrationConfig
from abm.calibration.errors import CalibrationError
from abm.calibration.observation import RAW, Series, array_module, observe_arrays, weekly_sums

if TYPE_CHECKING:
    from abm.runs import RunResult


def read_dated_table(source: str, at: str = "") -> pd.DataFrame:
    """The series file ``source`` (a bundled series' name or a CSV path) with its ``date``
    column read as dates; errors name ``calibration.data`` after ``at`` (the scenario's name)."""
    path = files("abm.calibration") / "data" / BUNDLED[source] if source in BUNDLED else Path(source)
    if source not in BUNDLED and not Path(source).is_file():
        raise CalibrationError(
            f"{at}calibration.data: {source!r} is neither a bundled series ({', '.join(BUNDLED)}) nor a file"
        )
    try:
        with path.open(encoding="utf-8-sig") as fh:
            frame = pd.read_csv(fh, dtype={"date": str})
    except pd.errors.EmptyDataError:
        raise CalibrationError(
            f"{at}calibration.data: {source!r} is empty; it needs a header line (date and a column per target) "
            "and one row per date"
        ) from None
    except pd.errors.ParserError as exc:  # "Error tokenizing data. C error: Expected 2 fields in line 7, saw 3\n"
        shape = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", str(exc))
        problem = (
            f"line {shape[2]} has {shape[3]} values, the header {shape[1]}" if shape else " ".join(str(exc).split())
        )
        raise CalibrationError(
            f"{at}calibration.data: cannot read {source!r} ({problem}); give each line as many comma-separated "
            "values as the header has columns"
        ) from None
    except (OSError, ValueError) as exc:
        raise CalibrationError(f"{at}calibration.data: cannot read {source!r} ({exc})") from exc
    if "date" not in frame.columns:
        columns = [str(c) for c in frame.columns]
        other = next((sep for sep in (";", "\t") if len(columns) == 1 and sep in columns[0]), None)
        hint = f"; separate the columns with commas, not {other!r}" if other else ""
        raise CalibrationError(
            f"{at}calibration.data: {source!r} has no 'date' column (columns: {', '.join(columns)}); "
            f"it needs a date column (YYYY-MM-DD) and a column per target{hint}"
        )
    if frame.empty:
        raise CalibrationError(f"{at}calibration.data: {source!r} has no rows; it needs one row per date")
    raw = frame["date"]
    if raw.isna().any():  # read as NaN, which would pass for a date with a time
        row = int(np.flatnonzero(raw.isna().to_numpy())[0])
        where = f"the row after date {raw.iloc[row - 1]!r}" if row and pd.notna(raw.iloc[row - 1]) else "the first row"
        raise CalibrationError(
            f"{at}calibration.data: {source!r}: {where} has no date; give every row a date written YYYY-MM-DD"
        )
    try:  # ISO dates only: 03/01/2020 is 1 March to some and 3 January to others
        frame["date"] = pd.to_datetime(frame["date"], format="ISO8601")
    except (ValueError, TypeError):
        bad = pd.to_datetime(frame["date"], format="ISO8601", errors="coerce").isna() & frame["date"].notna()
        value = frame["date"][bad].iloc[0] if bad.any() else frame["date"].iloc[0]
        raise CalibrationError(
            f"{at}calibration.data: {source!r}: date {value!r} is not a date written YYYY-MM-DD; write "
            "YYYY-MM-DD (day-first and month-first dates cannot be told apart)"
        ) from None
    dates = frame["date"]
    timed = (dates != dates.dt.normalize()) | (dates.dt.tz is not None)
    if timed.any():  # counts are per day: a time or a time zone would shift them between days
        raise CalibrationError(
            f"{at}calibration.data: {source!r}: date {raw[timed].iloc[0]!r} has a time or a time zone; "
            "the counts are per day, so write plain dates (YYYY-MM-DD)"
        )
    return frame


def load_observed(cfg: CalibrationConfig, scenario: str = "") -> pd.DataFrame:
    """Daily observed counts indexed by date, one column per target, checked over the windows;
    errors name the ``scenario`` file when given."""
    source = cfg.data
    at = f"{scenario}: " if scenario else ""
    frame = read_dated_table(source, at)
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
        first, last = frame.index.min(), frame.index.max()
        if days[0] < first or days[-1] > last:
            raise CalibrationError(
                f"{at}calibration.{name}: {a} to {b} {beyond(days[0], days[-1], first, last)} the data of "
                f"{source!r} ({first.date()} to {last.date()}); give a window within the data's dates"
            )
        absent = days[~days.isin(frame.index)]
        if len(absent):
            raise CalibrationError(
                f"{at}calibration.{name}: {source!r} has no value on {absent[0].date()}: the date has no row "
                f"({len(absent)} of the window's dates missing); give one row per date, with a count >= 0 per target"
            )
        part = frame.reindex(days)[cfg.targets]
        for bad, problem, allowed in (
            (part.isna(), "has no value", "counts must be numbers >= 0"),
            (part < 0, "has a negative count", "counts must be >= 0"),
            (np.isinf(part), "has an infinite count", "counts must be finite numbers >= 0"),
        ):
            if bad.to_numpy().any():
                day, column = first_cell(bad)
                value = float(part.at[day, column])
                shown = " (empty or NaN)" if np.isnan(value) else "" if np.isinf(value) else f" ({value:g})"
                raise CalibrationError(
                    f"{at}calibration.{name}: {source!r}, column {column!r}, {problem} on {day.date()}{shown}; "
                    f"{allowed}"
                )
    return frame[cfg.targets].astype(float)


def beyond(start: pd.Timestamp, end: pd.Timestamp, first: pd.Timestamp, last: pd.Timestamp) -> str:
    """How a window from ``start`` to ``end`` leaves the data's dates, ``first`` to ``last``:
    wholly (``lies outside``) or at one end or both (``starts before``, ``ends after``)."""
    if end < first or start > last:
        return "lies outside"
    ends = [text for text, out in (("starts before", start < first), ("ends after", end > last)) if out]
    return " and ".join(ends)


def first_cell(flags: pd.DataFrame) -> tuple[pd.Timestamp, str]:
    """The date and column of the first True of ``flags`` (by date, then by column)."""
    row = int(np.flatnonzero(flags.to_numpy().any(axis=1))[0])
    return flags.index[row], str(flags.columns[int(np.flatnonzero(flags.iloc[row].to_numpy())[0])])


def raw_series(result: RunResult, cfg: CalibrationConfig) -> pd.DataFrame:
    """Daily simulated admissions, deaths, onsets of symptoms and positive test results (zeros
    without testing) (mean over replicates) scaled to the region, by calendar date: what the
    observation model (:func:`observe`) reads."""
    res = result.result
    scale = result.summary["region_population"] / res.agents
    dates = pd.date_range(cfg.start_date, periods=res.days, freq="D")
    positives = res.activity.get("positive_results", np.zeros((res.days, res.replicates)))
    return pd.DataFrame(
        {
            "hospital_admissions": res.admissions.mean(axis=1) * scale,
            "deaths": res.entries[:, :, 8].mean(axis=1) * scale,
            "symptomatic_onsets": res.symptomatic_onsets.mean(axis=1) * scale,
            "positive_tests": positives.mean(axis=1) * scale,
        },
        index=dates,
    )


def observe(raw: pd.DataFrame, cfg: CalibrationConfig) -> pd.DataFrame:
    """Observed-like daily counts of the targets from :func:`raw_series`
    (:func:`abm.calibration.observation.observe_arrays`)."""
    arrays = observe_arrays({c: raw[c].to_numpy() for c in RAW}, cfg.observation, list(cfg.targets), cfg.start_date)
    return pd.DataFrame(arrays, index=raw.index)


def simulated(result: RunResult, cfg: CalibrationConfig) -> pd.DataFrame:
    """Daily simulated counts of the targets (mean over replicates) scaled to the region, by
    calendar date, through the observation model (:func:`observe`)."""
    return observe(raw_series(result, cfg), cfg)


def weekly(frame: pd.DataFrame, window: tuple[dt.date, dt.date]) -> pd.DataFrame:
    """Sums over consecutive 7-day blocks of the window (a last partial block is dropped; days
    the frame lacks count 0), one row per block (:func:`abm.calibration.observation.weekly_sums`)."""
    days = pd.date_range(window[0], window[1], freq="D")
    part = frame.reindex(days).fillna(0.0)
    return pd.DataFrame(weekly_sums(part.to_numpy(dtype=float), days[0], (days[0], days[-1])), columns=part.columns)


def weekly_fit_table(
    observed: pd.DataFrame, sim: pd.DataFrame, band: list[pd.DataFrame], cfg: CalibrationConfig
) -> pd.DataFrame:
    """The weeks the losses score (:func:`weekly`), target by target and window by window (fit,
    then held out): each week's first and last dates, the observed count, the best fit's
    simulated count (``sim``: daily, through the observation model, scaled to the region) and,
    with ``band`` curves, their lowest and highest counts (``band_low``, ``band_high``). What
    ``fit_weekly.csv`` holds and the fit plot draws."""
    windows = [("fit", cfg.fit_window)] + ([("holdout", cfg.holdout_window)] if cfg.holdout_window else [])
    parts = []
    for target in cfg.targets:
        for name, window in windows:
            obs, fit = weekly(observed, window)[target], weekly(sim, window)[target]
            starts = pd.date_range(window[0], periods=len(obs), freq="7D")
            part = pd.DataFrame(
                {
                    "target": target,
                    "window": name,
                    "week_start": starts.strftime("%Y-%m-%d"),
                    "week_end": (starts + pd.Timedelta(days=6)).strftime("%Y-%m-%d"),
                    "observed": obs.to_numpy(),
                    "simulated": fit.to_numpy(),
                }
            )
            if band:
                curves = np.stack([weekly(b, window)[target].to_numpy() for b in band])
                part["band_low"], part["band_high"] = curves.min(axis=0), curves.max(axis=0)
            parts.append(part)
    return pd.concat(parts, ignore_index=True)


def rmse_log1p(sim: Series, obs: Series) -> Series:
    """Root mean squared difference of log1p counts (numpy arrays or tensors, differentiable in
    a tensor ``sim``)."""
    xp = array_module(sim)
    return xp.sqrt(((xp.log1p(sim) - xp.log1p(obs)) ** 2).mean())


def fit_loss(series: Mapping[str, Series], observed_weekly: Mapping[str, Series], cfg: CalibrationConfig) -> Series:
    """The fit objective: the mean over targets, weighted by ``target_weights``, of the RMSE of
    log1p weekly counts on the fit window, from daily simulated series (day 0 is ``start_date``)
    and the observed weekly sums (numpy arrays or tensors, differentiable in tensor series)."""
    weeks = {t: weekly_sums(series[t], cfg.start_date, cfg.fit_window) for t in cfg.targets}
    weights = [cfg.target_weights.get(t, 1.0) for t in cfg.targets]
    parts = [w * rmse_log1p(weeks[t], observed_weekly[t]) for t, w in zip(cfg.targets, weights, strict=True)]
    return array_module(parts[0]).stack(parts).sum() / sum(weights)


def losses(sim: pd.DataFrame, obs: pd.DataFrame, window: tuple[dt.date, dt.date]) -> dict[str, dict[str, float]]:
    """Per target: RMSE of log1p weekly counts and ND = sum |sim - obs| / sum obs."""
    s, o = weekly(sim, window), weekly(obs, window)
    out = {}
    for t in obs.columns:
        rmse = rmse_log1p(s[t].to_numpy(), o[t].to_numpy()) if len(s) else float("nan")
        total = float(o[t].sum())
        out[t] = {
            "rmse_log1p_weekly": float(rmse),
            "nd_weekly": float(np.abs(s[t] - o[t]).sum() / total) if total > 0 else float("nan"),
        }
    return out
