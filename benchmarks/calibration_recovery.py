"""Recovery of a known transmission rate from synthetic reported cases, over pairs of seeds: the
measurements behind the tolerances of tests/test_calibration.py's recovery tests.

    python benchmarks/calibration_recovery.py [--cases onsets|positive_tests] [--pairs 6]
        [--agents 20000] [--trials 16]

For each pair k (data seed 99 - k, calibration seed 1234 + k): simulate 70 days with rate 3.0
(20 asymptomatic seeds, 2 replicates; with ``positive_tests`` the default testing of the
symptomatic is on), read the simulated reported cases as the observed series (onsets: 0.2 of the
onsets of symptoms, 2 days later; positive_tests: the positive results, on the day of the
result), then calibrate the rate over [1, 6] with ``--trials`` TPE trials from another seed (fit
window 2020-02-08 to 2020-04-10). Prints each pair's estimate, fit ND and wall time, then their
range, mean and sd.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml

import abm
from abm.calibration.optimize import calibrate

TRUE_RATE = 3.0


def scenario(cases: str, agents: int, rate: float, seed: int) -> dict:
    """The synthetic scenario (testing on when cases are positive tests)."""
    sc = {
        "name": "synthetic",
        "population": {"agents": agents},
        "simulation": {"days": 70, "replicates": 2, "seed": seed},
        "seeding": {"infections": {"asymptomatic": 20}},
        "disease": {"transmission_rate": rate},
    }
    if cases == "positive_tests":
        sc["interventions"] = {"testing": {}}
    return sc


def observed_cases(result: abm.RunResult, cases: str) -> pd.DataFrame:
    """The simulated reported cases by date, scaled to the region, as the observation model reads
    them with its defaults."""
    res = result.result
    scale = result.summary["region_population"] / res.agents
    dates = pd.date_range("2020-02-01", periods=res.days, freq="D").strftime("%Y-%m-%d")
    if cases == "positive_tests":
        series = res.activity["positive_results"].mean(axis=1) * scale
    else:
        onsets = res.symptomatic_onsets.mean(axis=1) * scale * 0.2
        series = [0.0, 0.0, *onsets[:-2]]  # the default 2-day reporting delay
    return pd.DataFrame({"date": dates, "cases": series})


def recover(cases: str, agents: int, trials: int, pair: int, folder: Path) -> tuple[float, float]:
    """The calibrated rate and fit ND of one pair of seeds."""
    truth = abm.run(scenario(cases, agents, TRUE_RATE, 99 - pair))
    observed_cases(truth, cases).to_csv(folder / "obs.csv", index=False)
    sc = scenario(cases, agents, 5.0, 1234 + pair)
    sc["calibration"] = {
        "data": str(folder / "obs.csv"),
        "targets": ["cases"],
        "fit_window": ["2020-02-08", "2020-04-10"],
        "holdout_window": None,
        "parameters": {"disease.transmission_rate": {"low": 1.0, "high": 6.0}},
        "trials": trials,
        "observation": {"cases": cases},
    }
    (folder / "cal.yaml").write_text(yaml.safe_dump(sc), encoding="utf-8")
    summary = calibrate(folder / "cal.yaml", folder / "out")
    return summary["best_parameters"]["disease.transmission_rate"], summary["fit"]["cases"]["nd_weekly"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", choices=["onsets", "positive_tests"], default="onsets")
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--agents", type=int, default=20_000)
    ap.add_argument("--trials", type=int, default=16)
    args = ap.parse_args()
    rates, nds = [], []
    print("| data seed | calibration seed | estimated rate | fit ND | seconds |\n|---:|---:|---:|---:|---:|")
    for pair in range(args.pairs):
        t = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            rate, nd = recover(args.cases, args.agents, args.trials, pair, Path(tmp))
        rates.append(rate)
        nds.append(nd)
        print(f"| {99 - pair} | {1234 + pair} | {rate:.3f} | {nd:.3f} | {time.perf_counter() - t:.1f} |", flush=True)
    sd = statistics.stdev(rates) if len(rates) > 1 else float("nan")
    print(
        f"\nrate {min(rates):.2f}-{max(rates):.2f} (mean {statistics.mean(rates):.3f}, sd {sd:.3f}, true "
        f"{TRUE_RATE}); fit ND {min(nds):.2f}-{max(nds):.2f} (mean {statistics.mean(nds):.3f})"
    )


if __name__ == "__main__":  # worker processes import this file
    main()
