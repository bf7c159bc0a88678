"""Evaluation: recovery on held-out simulations, end-to-end fits at the estimates, gains.

End to end, each institution feeds its own observed window to its final calibrator, takes the
marginal posterior means as the estimate, simulates its own population at the estimate
(``estimate_replicates`` replicates, expected reported cases) and reports, per observed
channel, the normalized deviation ND = sum |sim - obs| / sum obs and the RMSE of log1p weekly
rates per 100,000 residents over the window (:func:`abm.calibration.observed.losses`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from abm.calibration.observed import losses
from abm.learning.metrics import cgs, gains, mcg
from abm.learning.training import predict
from abm.private_calibration.federation import ProtocolRun
from abm.private_calibration.institutions import FIXED_ASCERTAINMENT, Institution, daily_frame
from abm.private_calibration.parameters import BinGrid, whole_infections
from abm.private_calibration.scenario import PrivateCalibrationScenario
from abm.private_calibration.simulate import simulate
from abm.scenario import Scenario


def mean_of_known(values: Iterable[float]) -> float:
    """The mean of the values that are not NaN (an ND is NaN where the observed series is all
    zero); NaN where none is, without numpy's "Mean of empty slice" warning on the user's screen."""
    known = [v for v in values if not math.isnan(v)]
    return float(np.mean(known)) if known else math.nan


def estimates(run: ProtocolRun, institutions: list[Institution], grid: BinGrid) -> list[dict[str, Any]]:
    """Each institution's estimate from its own observed window with its final calibrator."""
    out = []
    for p, inst in zip(run.participants, institutions, strict=True):
        logits = predict(p.model, inst.observed_x)
        est = grid.estimate(logits)[0]
        row: dict[str, Any] = {"estimate": est}
        if inst.truth_class is not None:
            truth_bins = grid.bins_of(np.array([inst.truth_class]))[0]
            marg = grid.marginals(logits)
            row["truth_bin_hit"] = {
                prm.name: bool(marg[i][0].argmax() == truth_bins[i]) for i, prm in enumerate(grid.params)
            }
        out.append(row)
    return out


def estimate_is_finite(estimate: dict[str, float | None]) -> bool:
    """Whether every value of an institution's estimate is finite: not where its calibrator's
    output is NaN (its training diverged; null in report.json), which no simulation can run at."""
    return all(v is not None and math.isfinite(v) for v in estimate.values())


def end_to_end(
    scenario: PrivateCalibrationScenario,
    model: Scenario,
    institutions: list[Institution],
    per_protocol: dict[str, list[dict[str, Any]]],
) -> dict[str, list[dict[str, Any]]]:
    """Simulate each institution at every protocol's estimate and score the fit against its
    observed series. Adds ``fit`` and ``curve`` to each row. Every protocol's estimate runs with
    the same seed (common random numbers), so protocols differ in ND by their estimates, not by
    simulation noise: equal estimates give equal ND. An estimate that is not finite
    (:func:`estimate_is_finite`) is not simulated: its ``fit`` is NaN for every channel and its
    ``curve`` None."""
    section = scenario.model
    reps = scenario.evaluation.estimate_replicates
    for inst in institutions:
        seed = scenario.seed * 100_003 + inst.index * 1009 + 5
        for rows in per_protocol.values():
            row = rows[inst.index]
            e = row["estimate"]
            if not estimate_is_finite(e):
                row["fit"] = {
                    t: {"rmse_log1p_weekly": math.nan, "nd_weekly": math.nan} for t in inst.observed_daily.columns
                }
                row["curve"] = None
                continue
            mult = np.full(reps, e["transmission"])
            seeds = np.full(reps, whole_infections(e["seeding"]))
            asc = np.full(reps, e.get("ascertainment", FIXED_ASCERTAINMENT))
            series = simulate(inst.population, model, section, mult, seeds, seed)
            frame = daily_frame(series, asc, section, None)
            row["fit"] = losses(frame, inst.observed_daily, section.window)
            row["curve"] = frame
    return per_protocol


def protocol_table(
    runs: list[ProtocolRun], per_protocol: dict[str, list[dict[str, Any]]], institutions: list[Institution]
) -> dict[str, Any]:
    """The report's per-protocol block: scores, gains against local-only, MCG, CGS, bytes.

    Recovery is reported twice: on held-out simulations over the full parameter range
    (``recovery``, ``gain``, ``mcg``, ...: the headline, since each prior covers only part of the
    range and collaboration must fix the rest), and on held-out simulations under each
    institution's own prior (``recovery_own``, ``gain_own``, ``mcg_own``, ...: the institution's own
    distribution, where CYCle's and MAPL's papers measure their gains); ``nan`` when the scenario
    draws no own-prior held-out set.
    """
    base = next(r for r in runs if r.key == "local")
    base_scores = [p.score() for p in base.participants]
    base_own = [p.own_score() for p in base.participants]
    out: dict[str, Any] = {}
    for r in runs:
        scores = [p.score() for p in r.participants]
        g = gains(scores, base_scores)
        own = [p.own_score() for p in r.participants]
        g_own = gains(own, base_own)
        net = r.network
        rows = []
        for i, (p, inst) in enumerate(zip(r.participants, institutions, strict=True)):
            e2e = per_protocol[r.key][i]
            nd = {t: v["nd_weekly"] for t, v in e2e["fit"].items()}
            rows.append(
                {
                    "institution": inst.name,
                    "recovery": scores[i],
                    "recovery_by_parameter": p.recovery(),
                    "standalone": base_scores[i],
                    "gain": float(g[i]),
                    "recovery_own": own[i],
                    "standalone_own": base_own[i],
                    "gain_own": float(g_own[i]),
                    "estimate": e2e["estimate"],
                    "truth": inst.truth,
                    "truth_bin_hit": e2e.get("truth_bin_hit"),
                    "nd": nd,
                    "nd_mean": mean_of_known(nd.values()),
                    "rmse_log1p": {t: v["rmse_log1p_weekly"] for t, v in e2e["fit"].items()},
                    "bytes_sent": int(net.sent.get(i, 0)),
                    "bytes_received": int(net.received.get(i, 0)),
                    "kinds_sent": sorted(net.kinds_sent.get(i, set())),
                }
            )
        out[r.key] = {
            "protocol": r.name,
            "params": r.params,
            "institutions": rows,
            "mean_recovery": float(np.mean(scores)),
            "mean_nd": mean_of_known(row["nd_mean"] for row in rows),
            "mcg": mcg(g),
            "cgs": cgs(g),
            "min_gain": float(g.min()),
            "mean_recovery_own": float(np.mean(own)),
            "mcg_own": mcg(g_own),
            "cgs_own": cgs(g_own),
            "min_gain_own": float(g_own.min()),
            "bytes_total": net.total_bytes(),
            "bytes_by_kind": dict(net.per_kind),
            "wall_time_s": r.wall_time_s,
            "epsilon": r.epsilon,
            "delta": r.delta,
            "history": r.history,
            "nonfinite_losses": r.nonfinite_losses,
            "summary": r.summary,
        }
    return out
