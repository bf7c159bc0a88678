"""Household sizes by number of agents, and what they do to an epidemic's final size.

Mean household size (households outside long-term care) and the share of one-person households
of King County populations of 5,000, 20,000 and 100,000 agents over seeds 1-8; then
no_intervention.yaml for 300 days (seed 11) at 5,000 x 40, 20,000 x 20 and 100,000 x 10
replicates: how many epidemics took off (over 5% infected) and their mean final size with its
standard error. Uses only the public API, so it runs on an older tree too (``PYTHONPATH=TREE``).
BENCHMARKS.md, calibration section, "Session 32".

    python benchmarks/households.py [--skip-epidemics]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import abm  # noqa: E402
from abm.populations import build_population, load_region  # noqa: E402

SIZES = (5_000, 20_000, 100_000)
EPIDEMICS = ((5_000, 40), (20_000, 20), (100_000, 10))
NI = ROOT / "scenarios/king_county/no_intervention.yaml"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-epidemics", action="store_true", help="household sizes only (seconds)")
    args = ap.parse_args()
    region = load_region("king_county")
    print("| agents | mean household (seeds 1-8: mean, range) | households of one |")
    print("|---:|---|---:|")
    for n in SIZES:
        means, singles = [], []
        for seed in range(1, 9):
            pop = build_population(region, n, seed)
            sizes = pop.household_size[~pop.long_term_care[pop.household_start]]
            means.append(sizes.mean())
            singles.append((sizes == 1).mean())
        print(f"| {n:,} | {np.mean(means):.3f} ({min(means):.2f}-{max(means):.2f}) | {100 * np.mean(singles):.1f}% |")
    if args.skip_epidemics:
        return
    print("\n| agents x replicates | took off | final size of those (mean +- se) |")
    print("|---|---:|---|")
    for agents, reps in EPIDEMICS:
        run = abm.run(NI, agents=agents, replicates=reps, seed=11, days=300)
        res = run.result
        final = (res.agents - res.stages[-1, :, 0]) / res.agents
        took = final[final > 0.05]
        se = took.std(ddof=1) / np.sqrt(len(took))
        print(f"| {agents:,} x {reps} | {len(took)} | {took.mean():.3f} +- {se:.3f} |", flush=True)


if __name__ == "__main__":
    main()
