"""The reproduction number of a King County 2020 scenario, week by week, against the published
estimates, and what transmission rate gives February's infections which reproduction number.

    python benchmarks/reproduction_king_county.py [--scenario FILE] [--replicates 20] [--seed 1234]
        [--rates 3.137 5 6 7 8]

Prints (1) the case reproduction number (docs/model.md) of the infections of each week of
February to mid-April 2020, pooled over the replicates (the infections they caused over all
replicates / the infections), with the 10th-90th percentiles of the replicates' own figures;
(2) for each of ``--rates``, that of 2020-02-01 to 2020-02-21's infections (10 replicates, the
first 60 days). Published, for comparison: the Institute for Disease Modeling's effective
reproductive number for King County, about 2.7 in late February 2020 and about 1.4 on March 18
(reports of 2020-03-27/30), and about 0.75 (0.5-1) across King, Pierce and Snohomish counties in
early April (report of 2020-04-14).
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

import abm
from abm.outputs import reproduction

WEEKS = [
    ("2020-02-01", "2020-02-07"), ("2020-02-08", "2020-02-14"), ("2020-02-15", "2020-02-21"),
    ("2020-02-22", "2020-02-29"), ("2020-03-01", "2020-03-07"), ("2020-03-08", "2020-03-14"),
    ("2020-03-15", "2020-03-21"), ("2020-03-22", "2020-03-28"), ("2020-03-29", "2020-04-04"),
    ("2020-04-05", "2020-04-11"), ("2020-04-12", "2020-04-18"),
]  # fmt: skip


def weeks_table(ts: pd.DataFrame) -> list[str]:
    """Markdown rows: week, infections, pooled reproduction number, replicates' 10th-90th."""
    got = reproduction.arrays(ts)
    assert got is not None, "the run has no reproduction number (outputs.reproduction_number: false)"
    new, caused, final = got
    dates = pd.to_datetime(ts.groupby("day")["date"].first()).to_numpy()
    rows = []
    for start, end in WEEKS:
        days = np.flatnonzero((dates >= np.datetime64(start)) & (dates <= np.datetime64(end)))
        n, k = new[days].sum(axis=0), caused[days].sum(axis=0)
        own = k[n > 0] / n[n > 0]
        pooled = reproduction.pooled(new[days], caused[days], final[days])
        low, high = np.percentile(own, [10, 90]) if own.size else (np.nan, np.nan)
        rows.append(f"| {start} to {end} | {int(n.sum()):,} | {pooled:.2f} | {low:.2f}-{high:.2f} |")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="scenarios/king_county/calibrate_2020.yaml")
    ap.add_argument("--replicates", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--rates", type=float, nargs="*", default=[3.137, 5.0, 6.0, 7.0, 8.0])
    args = ap.parse_args()
    run = abm.run(args.scenario, replicates=args.replicates, seed=args.seed)
    print(f"{args.scenario}, {args.replicates} replicates, seed {args.seed}")
    print("| infected in | infections (all replicates) | reproduction number | replicates 10th-90th |")
    print("|---|---:|---:|---|")
    print("\n".join(weeks_table(run.timeseries)))
    print("\n| transmission rate | reproduction number, infections of 2020-02-01 to 02-21 |")
    print("|---:|---:|")
    for rate in args.rates:
        r = abm.run(args.scenario, replicates=10, seed=args.seed, days=60, sets=[f"disease.transmission_rate={rate}"])
        new, caused, final = reproduction.arrays(r.timeseries)
        print(f"| {rate:g} | {reproduction.pooled(new[:21], caused[:21], final[:21]):.2f} |")


if __name__ == "__main__":
    main()
