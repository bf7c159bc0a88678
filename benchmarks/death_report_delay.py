"""The delay between a King County death and its count in JHU CSSE's series, measured from the
county's own releases (no simulation).

    python benchmarks/death_report_delay.py [--draws 2000] [--seed 0]

In March 2020 Public Health - Seattle & King County's releases gave each newly reported death
with its date of death. ``abm/calibration/data/king_county_death_reports_2020.csv`` lists them
(one row a death; sources in the folder's SOURCES.md) with the day on which JHU's cumulative
deaths, as the project carries them (``king_county_2020.csv``), first reach the release's total;
the delay is that day less the date of death. The script prints:

- the number of deaths and releases, the delays' mean and median and their counts by days;
- the maximum-likelihood mean of the observation model's geometric delay (weights (1 - q) q^k
  over k = 0, 1, ..., mean q / (1 - q); ``abm.calibration.observation.delay_weights``), which is
  the delays' mean, with a bootstrap 90% interval over releases (the deaths of one release share
  its day of report, so releases, not deaths, are resampled);
- the same for a delay of one day plus a geometric one, fitted conditionally on the days of report
  the table holds (a death of day t enters the table only if t + delay is one of them): the
  table stops on 2020-03-23 and misses some releases, so long delays of the last weeks are
  missing from it, and the plain mean is low by that.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import minimize_scalar

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "abm/calibration/data/king_county_death_reports_2020.csv"
RELEASE = ["release", "release_basis", "release_total"]


def load(path: Path = TABLE) -> pd.DataFrame:
    """The death reports table, its date columns read as dates."""
    return pd.read_csv(path, parse_dates=["release", "jhu_day", "date_of_death"])


def geometric_ml_mean(delays: np.ndarray) -> float:
    """Maximum-likelihood mean of a geometric delay on 0, 1, ... (weights (1 - q) q^k): the
    log-likelihood n log(1 - q) + sum(d) log q is largest at q = mean / (1 + mean), mean = the
    delays' mean."""
    return float(np.mean(delays))


def conditional_ml_mean(deaths: pd.DataFrame, shift: int = 1) -> float:
    """Maximum-likelihood mean of a delay of ``shift`` days plus a geometric one, each death's
    delay conditioned on falling on a day of report of the table (its ``jhu_day`` values): the
    likelihood of a death of day t with delay d is w(d) / sum of w(k) over the k with t + k a
    day of report, w the shifted geometric weights."""
    days = np.array(sorted(deaths["jhu_day"].unique()), dtype="datetime64[D]")
    died = deaths["date_of_death"].to_numpy(dtype="datetime64[D]")
    lags = (days[None, :] - died[:, None]).astype(int) - shift  # geometric part of each possible delay
    possible = lags >= 0
    observed = deaths["delay_days"].to_numpy() - shift

    def nll(mean: float) -> float:
        log_q = np.log(mean / (1.0 + mean))
        norm = np.log(np.where(possible, np.exp(np.where(possible, lags, 0) * log_q), 0.0).sum(axis=1))
        return -float((observed * log_q - norm).sum())

    return shift + float(minimize_scalar(nll, bounds=(1e-3, 50.0), method="bounded").x)


def bootstrap(deaths: pd.DataFrame, estimate, draws: int, seed: int) -> np.ndarray:
    """``estimate`` (a function of a table of deaths) on ``draws`` tables of the releases drawn
    with replacement (each drawn release with all its deaths)."""
    groups = [g for _, g in deaths.groupby(RELEASE)]
    rng = np.random.default_rng(seed)
    return np.array(
        [estimate(pd.concat([groups[i] for i in rng.integers(len(groups), size=len(groups))])) for _ in range(draws)]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    deaths = load()
    delays = deaths["delay_days"].to_numpy()
    releases = deaths.groupby(RELEASE).ngroups
    print(
        f"{len(deaths)} deaths in {releases} releases, dates of death "
        f"{deaths['date_of_death'].min():%Y-%m-%d} to {deaths['date_of_death'].max():%Y-%m-%d}, "
        f"JHU days {deaths['jhu_day'].min():%Y-%m-%d} to {deaths['jhu_day'].max():%Y-%m-%d}"
    )
    print(f"delay (JHU day - date of death): mean {delays.mean():.3f}, median {np.median(delays):g} days")
    counts = pd.Series(delays).value_counts().sort_index()
    print("deaths by delay: " + ", ".join(f"{d} d: {n}" for d, n in counts.items()))
    print(f"\n| delay model | ML mean (days) | bootstrap 90% over releases ({args.draws} draws, seed {args.seed}) |")
    print("|---|---:|---|")
    fits = {
        "geometric on 0, 1, ... (the observation model's)": lambda t: geometric_ml_mean(t["delay_days"].to_numpy()),
        "1 day + geometric, conditional on the days of report": conditional_ml_mean,
    }
    for name, estimate in fits.items():
        lo, hi = np.quantile(bootstrap(deaths, estimate, args.draws, args.seed), [0.05, 0.95])
        print(f"| {name} | {estimate(deaths):.3f} | {lo:.2f}-{hi:.2f} |")


if __name__ == "__main__":
    main()
