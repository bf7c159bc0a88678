"""``fit.png``: a calibration's weekly data against its best fit, with the band of the best
trials and the held-out window shaded; the weeks and numbers of ``fit_weekly.csv``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from abm.calibration.config import CalibrationConfig
from abm.calibration.observed import weekly_fit_table
from abm.outputs.figure_parts import date_ticks, legend_clear_of_data
from abm.outputs.plots import new_figure
from abm.plurals import counted


def fit_figure(
    observed: pd.DataFrame, sim: pd.DataFrame, band: list[pd.DataFrame], cfg: CalibrationConfig, replicates: int
) -> Figure:
    """Weekly data, the best fit (``sim``: the mean of ``replicates`` replicates) and the lowest
    to highest of the best trials' curves (``band``; with ``rerank_trials``, of their re-runs),
    fit and held-out windows: the weeks of :func:`abm.calibration.observed.weekly_fit_table`.
    Drawn without pyplot (a notebook's backend and figures stay as they were)."""
    table = weekly_fit_table(observed, sim, band, cfg)
    rerun = f", re-run with {counted(cfg.rerank_replicates, 'replicate')}" if cfg.rerank_trials else ""
    fitted = "one replicate" if replicates == 1 else f"mean of {replicates} replicates"
    fig = new_figure(False, figsize=(8, 3.2 * len(cfg.targets)), layout="tight")
    axes = fig.subplots(len(cfg.targets), 1, squeeze=False)
    for ax, t in zip(axes[:, 0], cfg.targets, strict=True):
        rows = table[table["target"] == t]
        weeks = pd.to_datetime(rows["week_start"])
        if cfg.holdout_window:
            ax.axvspan(
                pd.Timestamp(cfg.holdout_window[0]),
                pd.Timestamp(cfg.holdout_window[1]),
                color="0.92",
                zorder=0,
                label="held out",
            )
        if band:
            ax.fill_between(
                weeks,
                rows["band_low"],
                rows["band_high"],
                color="C0",
                alpha=0.25,
                label=f"lowest to highest of the best {counted(len(band), 'trial')}{rerun}",
            )
        ax.plot(weeks, rows["observed"], "ko", ms=4, label="observed")
        ax.plot(weeks, rows["simulated"], "C0-", label=f"best fit ({fitted})")
        ax.set_title(f"{t.replace('_', ' ')} per week (scaled to the region)")
        ax.set_ylabel("count per week")
        last = max([weeks.max(), *([pd.Timestamp(cfg.holdout_window[1])] if cfg.holdout_window else [])])
        date_ticks(ax.xaxis, (last - weeks.min()).days, maxticks=8)  # "Mar 01" named no year
        legend_clear_of_data(ax, fontsize=8)
    axes[-1, 0].set_xlabel("week starting (7-day blocks from each window's first day)")
    return fig


def plot_fit(
    observed: pd.DataFrame,
    sim: pd.DataFrame,
    band: list[pd.DataFrame],
    cfg: CalibrationConfig,
    file: Path,
    replicates: int,
) -> None:
    """Write :func:`fit_figure` to ``file``."""
    fit_figure(observed, sim, band, cfg, replicates).savefig(file, dpi=110)
