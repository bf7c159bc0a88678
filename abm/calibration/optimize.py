"""Fitting a scenario's free parameters to observed series with Optuna (TPE, seeded)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates
import matplotlib.pyplot as plt
import optuna
import pandas as pd

from abm.calibration.config import CalibrationConfig
from abm.calibration.observed import CalibrationError, load_observed, losses, simulated, weekly
from abm.outputs.run_folder import atomic_folder
from abm.runs import run
from abm.scenario import Scenario, apply_set, read_scenario_data, validate


def with_values(data: dict[str, Any], values: dict[str, float]) -> dict[str, Any]:
    """Scenario data with each ``key.path`` set to its value."""
    for key, value in values.items():
        data = apply_set(data, f"{key}={json.dumps(value)}")
    return data


def check_horizon(sc: Scenario, cfg: CalibrationConfig, source: str) -> None:
    """The simulation must cover every window."""
    last = max(w[1] for w in (cfg.fit_window, cfg.holdout_window) if w is not None)
    need = (last - cfg.start_date).days + 1
    if sc.simulation.days < need:
        raise CalibrationError(
            f"{source}: simulation.days: {sc.simulation.days} is too short; "
            f"the windows need {need} days from {cfg.start_date}"
        )


def calibrate(
    path: str | Path,
    out: str | Path | None = None,
    trials: int | None = None,
    sets: list[str] | None = None,
    progress: Callable[[int, int, float], None] | None = None,
) -> dict[str, Any]:
    """Fit the scenario's ``calibration.parameters``; write the calibrated scenario, the
    trials, a fit plot and ``calibration.json`` to ``out``; return the calibration summary."""
    path = Path(path)
    data = read_scenario_data(path)
    for item in sets or []:
        data = apply_set(data, item)
    sc = validate(data, str(path))
    if sc.calibration is None:
        raise CalibrationError(f"{path}: calibration: the scenario has no calibration section")
    cfg = sc.calibration
    check_horizon(sc, cfg, str(path))
    observed = load_observed(cfg)
    n_trials = trials or cfg.trials
    curves: dict[int, pd.DataFrame] = {}

    def objective(trial: optuna.Trial) -> float:
        values: dict[str, float] = {}
        for key, rng in cfg.parameters.items():
            if rng.integer:
                values[key] = trial.suggest_int(key, int(rng.low), int(rng.high))
            else:
                values[key] = trial.suggest_float(key, rng.low, rng.high)
        trial_sc = validate(with_values(data, values), str(path))
        sim = simulated(run(trial_sc), trial_sc.calibration)
        curves[trial.number] = sim
        fit = losses(sim, observed, cfg.fit_window)
        loss = float(sum(v["rmse_log1p_weekly"] for v in fit.values()) / len(fit))
        if progress is not None:
            progress(trial.number + 1, n_trials, loss)
        return loss

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="minimize", sampler=optuna.samplers.TPESampler(seed=cfg.seed))
    study.optimize(objective, n_trials=n_trials)
    best = study.best_trial
    calibrated = validate(with_values(data, best.params), str(path))
    sim = curves[best.number]
    ranked = sorted((t for t in study.trials if t.value is not None and math.isfinite(t.value)), key=lambda t: t.value)
    band = [curves[t.number] for t in ranked[: cfg.band_trials]]
    summary = {
        "scenario": sc.name,
        "targets": cfg.targets,
        "trials": n_trials,
        "seed": cfg.seed,
        "best_trial": best.number,
        "best_parameters": best.params,
        "loss_fit": best.value,
        "fit_window": [str(d) for d in cfg.fit_window],
        "holdout_window": [str(d) for d in cfg.holdout_window] if cfg.holdout_window else None,
        "fit": losses(sim, observed, cfg.fit_window),
        "holdout": losses(sim, observed, cfg.holdout_window) if cfg.holdout_window else None,
    }
    target = Path(out) if out is not None else Path("runs") / f"{sc.name}-calibration"
    with atomic_folder(target) as tmp:
        (tmp / "calibrated.yaml").write_text(calibrated.resolved_yaml())
        study.trials_dataframe().to_csv(tmp / "trials.csv", index=False)
        (tmp / "calibration.json").write_text(json.dumps(summary, indent=2) + "\n")
        plot_fit(observed, sim, band, cfg, tmp / "fit.png")
    return summary


def plot_fit(
    observed: pd.DataFrame, sim: pd.DataFrame, band: list[pd.DataFrame], cfg: CalibrationConfig, file: Path
) -> None:
    """Weekly data, the best fit and the band of the best trials, fit and held-out windows."""
    span = (cfg.fit_window[0], (cfg.holdout_window or cfg.fit_window)[1])
    fig, axes = plt.subplots(len(cfg.targets), 1, figsize=(8, 3.2 * len(cfg.targets)), squeeze=False)
    start = pd.Timestamp(span[0])
    for ax, t in zip(axes[:, 0], cfg.targets, strict=True):
        o = weekly(observed, span)[t]
        weeks = [start + pd.Timedelta(days=7 * i) for i in range(len(o))]
        ax.plot(weeks, o.to_numpy(), "ko", ms=4, label="observed")
        ax.plot(weeks, weekly(sim, span)[t].to_numpy(), "C0-", label="best fit")
        if band:
            stack = pd.concat([weekly(b, span)[t] for b in band], axis=1)
            ax.fill_between(
                weeks, stack.min(axis=1), stack.max(axis=1), color="C0", alpha=0.2, label=f"best {len(band)} trials"
            )
        if cfg.holdout_window:
            ax.axvspan(
                pd.Timestamp(cfg.holdout_window[0]), pd.Timestamp(cfg.holdout_window[1]), color="0.9", label="held out"
            )
        ax.set_title(f"{t.replace('_', ' ')} per week (scaled to the region)")
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%b %d"))
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(file, dpi=110)
    plt.close(fig)
