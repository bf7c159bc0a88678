"""How close can any model come to the held-out window of a calibration scenario? The normalized
deviation (ND = sum |sim - obs| / sum obs over weekly counts) of a model whose weekly means are
exactly right is not 0: the observed counts scatter around their means. This script puts a number
on that floor for each target of a calibration scenario's held-out window (no simulation).

    python benchmarks/holdout_noise_floor.py [--scenario scenarios/king_county/calibrate_2020.yaml]
        [--draws 100000] [--seed 0]

For each target it fits a smooth decline (or rise) to the held-out weeks, log-linear in the week
with Poisson counts (maximum likelihood), and prints:

- the weekly ratio of that curve and its ND against the observed weeks (the fit is made on the same
  weeks, so this flatters it);
- the Pearson dispersion of the observed weeks about it (1 for Poisson counts);
- the ND a model with that curve as its exact weekly means would get, on average and its 5th-95th
  percentiles, against counts drawn around it: Poisson, and negative binomial with the variance
  the dispersion gives (variance = dispersion x mean).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from scipy.optimize import minimize
from scipy.stats import poisson

from abm.calibration.observed import load_observed, weekly
from abm.runs import resolve

ROOT = Path(__file__).resolve().parents[1]


def log_linear_fit(y: np.ndarray) -> np.ndarray:
    """The Poisson maximum-likelihood curve exp(a + b t) through the counts ``y`` (t = 0, 1, ...)."""
    t = np.arange(len(y), dtype=float)

    def nll(p: np.ndarray) -> float:
        return -float(poisson.logpmf(y, np.exp(p[0] + p[1] * t)).sum())

    a, b = minimize(nll, np.array([np.log(max(y.mean(), 1e-9)), 0.0]), method="Nelder-Mead").x
    return np.exp(a + b * t)


def nd(sim: np.ndarray, obs: np.ndarray) -> np.ndarray:
    """ND of ``sim`` against each row of ``obs`` (or against ``obs`` itself)."""
    return np.abs(obs - sim).sum(axis=-1) / obs.sum(axis=-1)


def floor(mu: np.ndarray, dispersion: float, draws: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """ND of the exact means ``mu`` against ``draws`` series of counts around them: Poisson, and
    negative binomial with variance ``dispersion`` x mean (Poisson where the dispersion is <= 1)."""
    out = {"poisson": nd(mu, rng.poisson(mu, size=(draws, len(mu))))}
    if dispersion > 1:
        # numpy's negative binomial: n successes, success probability p; mean n (1-p)/p, variance mean / p
        p = 1.0 / dispersion
        n = mu * p / (1 - p)
        counts = rng.negative_binomial(n, p, (draws, len(mu)))
        out[f"negative binomial (variance {dispersion:.2f} x mean)"] = nd(mu, counts)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default=str(ROOT / "scenarios/king_county/calibrate_2020.yaml"))
    parser.add_argument("--draws", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    cfg = resolve(args.scenario).calibration
    if cfg is None or cfg.holdout_window is None:
        raise SystemExit(f"{args.scenario}: no calibration.holdout_window")
    weeks = weekly(load_observed(cfg, args.scenario), cfg.holdout_window)
    rng = np.random.default_rng(args.seed)
    print(f"held-out window {cfg.holdout_window[0]} to {cfg.holdout_window[1]}: {len(weeks)} whole weeks\n")
    print(
        "| target | observed weeks | weekly ratio | ND of the curve | dispersion | counts drawn "
        "| ND of exact means: mean (5th-95th) |"
    )
    print("|---|---|---:|---:|---:|---|---|")
    for target in cfg.targets:
        y = weeks[target].to_numpy(dtype=float)
        mu = log_linear_fit(y)
        ratio = mu[1] / mu[0]
        dispersion = float(((y - mu) ** 2 / mu).sum() / (len(y) - 2))
        for k, (kind, values) in enumerate(floor(mu, dispersion, args.draws, rng).items()):
            lo, hi = np.quantile(values, [0.05, 0.95])
            head = (
                f"| {target} | {', '.join(f'{v:.0f}' for v in y)} | {ratio:.3f} | {nd(mu, y):.3f} | {dispersion:.2f}"
                if k == 0
                else "| | | | | "
            )
            print(f"{head} | {kind} | {values.mean():.3f} ({lo:.3f}-{hi:.3f}) |")


if __name__ == "__main__":
    main()
