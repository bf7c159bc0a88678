"""Dose-response of the interventions: for each one, a weaker and a stronger setting run on the
same seed, and the paired difference (stronger - weaker) of the outcomes it should move, with
its standard error over replicates.

    python benchmarks/dose_response.py [--agents 10000] [--days 100] [--replicates 8] [--seed 1234]
    python benchmarks/dose_response.py --separate      # each replicate its own run, seed + r (as abm sweep)
    python benchmarks/dose_response.py --only testing_capacity,quarantine_compliance

The configuration (:data:`BASE`): King County, the calibrated transmission rate 3.137, 20
asymptomatic infections on day 0 (with the scenarios' 5, at 10,000 agents one replicate in 8
died out and another lagged by weeks, noise that hides the effects), no intervention unless a
case adds one. By
default one run per setting holds all replicates (they are batched); replicate r of the weaker
and of the stronger setting share the population, the seeded agents and the random streams, so
they are paired. ``--separate`` runs each replicate on its own with seed ``seed + r`` instead,
as ``abm sweep`` does. Prints a Markdown table: per case and outcome, the mean of each setting,
the paired difference, its standard error sd(d)/sqrt(R), z = difference / SE, and the Welch
standard error of the same difference as if the runs were independent (what pairing saves).
tests/test_dose_response.py asserts these properties on this configuration.
"""

from __future__ import annotations

import argparse
import copy
import math
import platform
import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

import abm

BASE: dict[str, Any] = {
    "name": "dose_response",
    "disease": {"transmission_rate": 3.137},
    "population": {"region": "king_county", "agents": 10000},
    "simulation": {"days": 100, "replicates": 8, "seed": 1234},
    "seeding": {"day": 0, "infections": {"asymptomatic": 20}},
}

# The tracing cases' testing and quarantine: unlimited RT-PCR tests of the symptomatic, but only half
# the positives quarantine, so that an epidemic is left for tracing to act on (with every positive in
# quarantine it stays at a few hundred infections, and a capacity of 2 interviews a day hardly binds).
TESTING = {"testing": {}, "quarantine": {"enter_probability": 0.5}}


def rt_pcr(capacity: int | None) -> dict[str, Any]:
    """The default RT-PCR test (docs/scenarios.md) with a daily capacity per replicate."""
    return {
        "name": "rt_pcr",
        "sensitivity": 0.99,
        "result_delay_days": [1, 2, 3],
        "result_delay_probs": [0.3, 0.4, 0.3],
        "daily_capacity": capacity,
    }


def multiplier(**layers: float) -> dict[str, Any]:
    """Contact multipliers on some layers for the whole run."""
    return {"contact_multipliers": {"changes": [{"from_day": 0, **layers}]}}


@dataclass(frozen=True)
class Case:
    """One property: the interventions (and disease settings) of the weaker and the stronger
    setting, and the outcomes compared with the direction each should move (-1: down, +1: up)
    from the weaker to the stronger."""

    name: str
    weak: dict[str, Any]
    strong: dict[str, Any]
    outcomes: dict[str, int]


def vaccination(doses: float, start: int) -> dict[str, Any]:
    """Two-dose vaccination with the defaults but its supply and start day."""
    return {"interventions": {"vaccination": {"daily_doses_per_100k": doses, "start_day": start}}}


CASES = (
    Case(
        "vaccination_doses",
        vaccination(300, 10),
        vaccination(1000, 10),
        {"infections": -1, "doses": +1, "vaccine_cost": +1},
    ),
    Case("vaccination_start", vaccination(500, 40), vaccination(500, 10), {"infections": -1, "doses": +1}),
    Case(
        "testing_capacity",
        {"interventions": {"testing": {"tests": [rt_pcr(3)]}, "quarantine": {}}},
        {"interventions": {"testing": {"tests": [rt_pcr(10)]}, "quarantine": {}}},
        {"infections": -1, "tests": +1},
    ),
    Case(
        "quarantine_compliance",
        {"interventions": {"testing": {}, "quarantine": {"enter_probability": 0.3}}},
        {"interventions": {"testing": {}, "quarantine": {"enter_probability": 0.9}}},
        {"infections": -1},
    ),
    Case(
        "app_adoption",
        {"interventions": {**TESTING, "digital_tracing": {"app_adoption": 0.2}}},
        {"interventions": {**TESTING, "digital_tracing": {"app_adoption": 0.6}}},
        {"infections": -1, "app_notifications": +1},
    ),
    Case(
        "manual_tracing_capacity",
        {"interventions": {**TESTING, "manual_tracing": {"daily_capacity": 1}}},
        {"interventions": {**TESTING, "manual_tracing": {"daily_capacity": 10}}},
        {"infections": -1, "interviews": +1},
    ),
    Case("community_multiplier", {}, {"interventions": multiplier(community=0.6)}, {"infections": -1}),
    Case("occupation_multiplier", {}, {"interventions": multiplier(occupation=0.6)}, {"infections": -1}),
    Case("household_multiplier", {}, {"interventions": multiplier(household=0.6)}, {"infections": -1}),
    Case(
        "prior_immunity",
        {"seeding": {"prior_immunity": 0.05}},
        {"seeding": {"prior_immunity": 0.2}},
        {"infections": -1},
    ),
    Case(
        "transmission_rate",
        {},
        {"disease": {"transmission_rate": 4.0}},
        {"infections": +1, "peak_day": -1},
    ),
)


def scenario(changes: dict[str, Any], agents: int, days: int, replicates: int, seed: int) -> dict[str, Any]:
    """The base configuration with ``changes`` (sections merged one level deep) and the run size."""
    sc = copy.deepcopy(BASE)
    for section, values in changes.items():
        sc[section] = {**sc.get(section, {}), **copy.deepcopy(values)}
    sc["population"]["agents"] = agents
    sc["simulation"].update(days=days, replicates=replicates, seed=seed)
    return sc


def outcomes(result: Any) -> dict[str, np.ndarray]:
    """Per replicate: cumulative infections at the end (seeds included), the day of the peak of
    the 7-day mean of new infections, and the intervention counts summed over the run (tests,
    app notifications, interviews, doses given and what the doses cost)."""
    ts = result.timeseries
    last = ts[ts.day == ts.day.max()].sort_values("replicate")
    out = {"infections": last.cumulative_infected.to_numpy(dtype=float)}
    new = ts.pivot(index="day", columns="replicate", values="new_infections").sort_index(axis=1)
    out["peak_day"] = new.rolling(7, min_periods=1).mean().to_numpy().argmax(0).astype(float)
    totals = ts.groupby("replicate").sum(numeric_only=True).sort_index()
    for column, name in (("tests", "tests"), ("app_notifications", "app_notifications"), ("interviews", "interviews")):
        if column in totals:
            out[name] = totals[column].to_numpy(dtype=float)
    if "first_doses" in totals:
        out["doses"] = (totals.first_doses + totals.second_doses).to_numpy(dtype=float)
        costs = result.costs
        doses = costs[costs.item == "vaccine_dose"].groupby("replicate").cost.sum()
        out["vaccine_cost"] = doses.reindex(range(len(last)), fill_value=0.0).to_numpy(dtype=float)
    return out


def measure(changes: dict[str, Any], agents: int, days: int, replicates: int, seed: int, separate: bool) -> dict:
    """The outcomes of one setting, per replicate: one batched run, or (``separate``) one run per
    replicate with seed ``seed + r``."""
    if not separate:
        return outcomes(abm.run(scenario(changes, agents, days, replicates, seed)))
    runs = [outcomes(abm.run(scenario(changes, agents, days, 1, seed + r))) for r in range(replicates)]
    return {k: np.concatenate([run[k] for run in runs]) for k in runs[0]}


@dataclass(frozen=True)
class Difference:
    """The paired difference stronger - weaker of one outcome over R replicates."""

    weak_mean: float
    strong_mean: float
    mean: float
    se: float
    welch_se: float

    @property
    def z(self) -> float:
        """The difference in units of its standard error (inf when every pair differs alike)."""
        if self.se == 0:
            return 0.0 if self.mean == 0 else math.copysign(math.inf, self.mean)
        return self.mean / self.se


def difference(weak: np.ndarray, strong: np.ndarray) -> Difference:
    """Mean paired difference, its standard error sd(d)/sqrt(R) (ddof 1), and the Welch standard
    error sqrt(var(a)/R + var(b)/R) the same difference would have from independent runs."""
    d = strong - weak
    r = len(d)
    return Difference(
        float(weak.mean()),
        float(strong.mean()),
        float(d.mean()),
        float(d.std(ddof=1) / math.sqrt(r)),
        float(math.sqrt(weak.var(ddof=1) / r + strong.var(ddof=1) / r)),
    )


def main(argv: list[str] | None = None) -> None:
    """Run every case (or those of --only) and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", type=int, default=10000)
    ap.add_argument("--days", type=int, default=100)
    ap.add_argument("--replicates", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--separate", action="store_true", help="one run per replicate, seed + r (as abm sweep)")
    ap.add_argument("--only", default="", help="comma-separated case names")
    args = ap.parse_args(argv)
    only = {s for s in args.only.split(",") if s}
    cache: dict[str, dict] = {}

    def get(changes: dict[str, Any]) -> dict:
        key = repr(changes)
        if key not in cache:
            t0 = time.perf_counter()
            cache[key] = measure(changes, args.agents, args.days, args.replicates, args.seed, args.separate)
            print(f"  ran {key} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        return cache[key]

    mode = "separate runs, seed + r" if args.separate else "one batched run per setting"
    print(
        f"Dose-response: {args.agents} agents, {args.days} days, {args.replicates} replicates, seed {args.seed} "
        f"({mode}); {platform.node()}, torch threads 1. Command: `python benchmarks/dose_response.py "
        f"{' '.join(sys.argv[1:] if argv is None else argv)}`"
    )
    print()
    print("| case | outcome | weaker | stronger | paired diff | SE | z | Welch SE |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    t0 = time.perf_counter()
    for case in CASES:
        if only and case.name not in only:
            continue
        weak, strong = get(case.weak), get(case.strong)
        for outcome in case.outcomes:
            d = difference(weak[outcome], strong[outcome])
            print(
                f"| {case.name} | {outcome} | {d.weak_mean:.1f} | {d.strong_mean:.1f} | {d.mean:+.1f} | "
                f"{d.se:.1f} | {d.z:+.1f} | {d.welch_se:.1f} |"
            )
    print(f"\n{time.perf_counter() - t0:.0f} s in all")


if __name__ == "__main__":
    main()
