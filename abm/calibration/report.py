"""The tables of a finished calibration, as `abm calibrate` prints them and its ``report.html``
shows them: the fitted parameters (value, bounds, whether at a bound) and, per target, each loss
on the fit and held-out windows, with plain labels (``calibration.json`` holds the same values
under its keys).
"""

from __future__ import annotations

import datetime as dt
import html
import math
from typing import Any

from abm.calibration.config import whole_weeks
from abm.outputs.html_pages import REPORT_CSS, as_code, html_table
from abm.outputs.summary_table import SummaryTable
from abm.plurals import counted

# Plain names of the losses in calibration.json (docs/calibration.md, calibration.json).
LOSS_LABELS = {
    "nd_weekly": "normalized deviation of weekly counts (ND)",
    "rmse_log1p_weekly": "RMSE of log(1 + weekly count)",
}

CALIBRATION_FILES = {
    "calibrated.yaml": "the scenario with the fitted values: `abm run` on it re-creates the fit",
    "trials.csv": "every Optuna trial: its values and fit loss",
    "steps.csv": "every gradient step: its seed, fit loss, beta and seconds",
    "calibration.json": "the method, the fitted values and the losses, with more decimals",
    "fit_weekly.csv": "the weekly counts the losses compare: observed, the fit and the band, by target and window",
}
"""The calibration folder's files the report links to, with what each holds."""


def window_span(window: list[str]) -> str:
    """A window's dates as a loss table names them, "first to last", with the last day the
    losses score where the window does not end on a whole week (they sum whole 7-day weeks from
    its first day and drop a last partial week): "2020-05-01 to 2020-06-30 (8 whole weeks
    scored, to 2020-06-25)"."""
    first, last = (dt.date.fromisoformat(d) for d in window)
    weeks = whole_weeks((first, last))
    scored = first + dt.timedelta(days=7 * weeks - 1)
    text = f"{first} to {last}"
    return text if scored == last else f"{text} ({counted(weeks, 'whole week')} scored, to {scored})"


def number(value: float) -> str:
    """A fitted value or a bound: whole numbers as they are, others to 4 significant digits."""
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.0f}"
    return f"{value:.4g}"


def loss(value: float) -> str:
    """A loss to 3 decimals; "n/a" for NaN (a window without data)."""
    return "n/a" if math.isnan(value) else f"{value:.3f}"


def chosen_trial(summary: dict) -> str | None:
    """Which Optuna trial the fitted values are, as the progress lines count trials (from 1) and
    by its ``number`` in trials.csv (from 0), and, where trials were re-ranked, that it is the
    best re-run, with its loss re-run and as it ran (the progress lines showed the latter); None
    for the gradient method."""
    number_ = summary.get("best_trial")
    if number_ is None:
        return None
    which = (
        f"the fit is trial {number_ + 1} of {summary['trials']} (number {number_} in trials.csv, which counts from 0)"
    )
    reranked = summary.get("reranked")
    if not reranked:
        return f"{which}: the trial of lowest fit loss"
    best = reranked[0]
    replicates = counted(summary["rerank_replicates"], "replicate")
    rerun = (
        f"the trial of lowest loss, re-run with {replicates}"
        if len(reranked) == 1
        else f"the best of the {len(reranked)} trials of lowest loss, re-run with {replicates} each"
    )
    return f"{which}: {rerun} (fit loss {loss(best['loss_fit'])} re-run, {loss(best['loss_as_run'])} as it ran)"


def calibration_tables(summary: dict[str, Any]) -> list[SummaryTable]:
    """The fitted parameters and the losses of ``summary`` (calibration.json's content with
    ``bounds``: each free parameter's ``[low, high]``). In the losses table a target's own row
    has empty cells; its losses follow, indented."""
    n, unit = (summary["steps"], "step") if summary["method"] == "gradient" else (summary["trials"], "trial")
    rows = []
    for key, value in summary["best_parameters"].items():
        low, high = summary.get("bounds", {}).get(key, (None, None))
        if isinstance(value, list):  # the gradient method's weekly multipliers (in calibrated.yaml)
            shown = f"{len(value)} weekly values, {min(value):.3g} to {max(value):.3g}" if value else "none"
        else:
            shown = number(value)
        bound = ""
        if key in summary["at_bounds"] and low is not None:
            bound = "low" if abs(value - low) <= abs(high - value) else "high"
        rows.append([key, shown, f"{number(low)} to {number(high)}" if low is not None else "", bound])
    params = SummaryTable(
        title=f"{summary['scenario']}: fitted parameters ({summary['method']}, {counted(n, unit)})",
        columns=["parameter", "value", "bounds", "at a bound"],
        rows=rows,
        caption=chosen_trial(summary) or "",
    )
    windows = [("fit", "fit window"), ("holdout", "held-out window")]
    windows = [(key, label) for key, label in windows if summary.get(key) is not None]
    spans = ", ".join(f"{label} {window_span(summary[f'{key}_window'])}" for key, label in windows)
    loss_rows = []
    for target in summary["fit"]:
        loss_rows.append([target.replace("_", " "), *["" for _ in windows]])
        for name, label in LOSS_LABELS.items():
            loss_rows.append([f"  {label}", *[loss(summary[key][target][name]) for key, _ in windows]])
    losses = SummaryTable(
        title=f"losses per target, lower is better ({spans})",
        columns=["target / loss", *(label for _, label in windows)],
        rows=loss_rows,
        caption=(
            "ND = sum |simulated - observed| / sum observed: 0 is exact, and a forecast of zero scores 1. "
            "The fit minimized the mean RMSE over targets (weighted by calibration.target_weights) on the fit "
            f"window: {loss(summary['loss_fit'])}"
        ),
    )
    return [params, losses]


def calibration_report_html(summary: dict[str, Any], files: list[str]) -> str:
    """The page of a calibration: its tables (:func:`calibration_tables`), the fit plot, and
    links to those of :data:`CALIBRATION_FILES` among the folder's ``files``."""

    links = "".join(
        f'<li><a href="{html.escape(f)}">{html.escape(f)}</a>: {as_code(what)}</li>'
        for f, what in CALIBRATION_FILES.items()
        if f in files
    )
    forecast = " and the held-out forecast" if summary.get("holdout_window") else ""
    band = ", with the band of the best trials" if summary.get("band_trials") else ""  # none from the gradient method
    figure = (
        f'<h2>Fit</h2><p>Weekly data, the fit{forecast}{band}.</p><img src="fit.png" alt="fit.png">'
        if "fit.png" in files
        else ""
    )
    name = html.escape(summary["scenario"])
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{name}: abm calibrate</title>
<style>
{REPORT_CSS}
</style></head><body>
<h1>Calibration of {name}</h1>
<p>Targets: {html.escape(", ".join(t.replace("_", " ") for t in summary["targets"]))}; seed {summary["seed"]}.</p>
{"".join(html_table(t) for t in calibration_tables(summary))}
{figure}
<h2>Files</h2><ul>{links}</ul>
</body></html>
"""
