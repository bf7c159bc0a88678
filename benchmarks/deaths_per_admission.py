"""Deaths per hospital admission, month by month, in the county's 2020 series and in a calibrated
scenario's simulation (through its observation model, and before it).

    python benchmarks/deaths_per_admission.py [--scenario scenarios/king_county/calibrate_2020.yaml]
        [--replicates 20] [--seed 1234] [--lag 10]

For each month from March to June 2020 (June to the 20th, so that deaths ``--lag`` days later are
in the data): the deaths of the days ``--lag`` days after the month's days, per admission of the
month. Rows: the observed series; the simulation read through the scenario's observation model
(reporting delay and multiplier), as the calibration compares it with the data; the simulation's
own deaths and admissions, before the observation model.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

import abm
from abm.calibration.observed import load_observed, raw_series, simulated

ROOT = Path(__file__).resolve().parents[1]
MONTHS = [("2020-03-01", "2020-03-31"), ("2020-04-01", "2020-04-30"), ("2020-05-01", "2020-05-31"),
          ("2020-06-01", "2020-06-20")]  # fmt: skip


def per_admission(series: pd.DataFrame, lag: int) -> list[float]:
    """For each month of :data:`MONTHS`: the deaths ``lag`` days after its days per admission."""
    out = []
    for a, b in MONTHS:
        admissions = float(series.loc[a:b, "hospital_admissions"].sum())
        shift = pd.Timedelta(days=lag)
        deaths = float(series.loc[pd.Timestamp(a) + shift : pd.Timestamp(b) + shift, "deaths"].sum())
        out.append(deaths / admissions if admissions else float("nan"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default=str(ROOT / "scenarios/king_county/calibrate_2020.yaml"))
    parser.add_argument("--replicates", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--lag", type=int, default=10)
    args = parser.parse_args()
    res = abm.run(args.scenario, replicates=args.replicates, seed=args.seed)
    cfg = res.scenario.calibration
    rows = {
        "data": load_observed(cfg, args.scenario),
        "model, through the observation model": simulated(res, cfg),
        "model before the observation model": raw_series(res, cfg),
    }
    runs = f"{args.replicates} replicates, seed {args.seed}"
    print(f"deaths {args.lag} days after a month's admissions, per admission ({runs})")
    print("| series | " + " | ".join(a[:7] for a, _ in MONTHS) + " |")
    print("|---|" + "---:|" * len(MONTHS))
    for name, series in rows.items():
        print(f"| {name} | " + " | ".join(f"{v:.2f}" for v in per_admission(series, args.lag)) + " |")


if __name__ == "__main__":
    main()
