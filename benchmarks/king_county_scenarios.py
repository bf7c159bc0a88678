"""The King County intervention scenarios side by side, and the thesis's qualitative findings.

    python benchmarks/king_county_scenarios.py [--agents 100000] [--replicates 10]

Runs every scenario of scenarios/king_county/ (except base) through the Python API and prints
a Markdown table (means over replicates; peaks of the mean curves) and each finding with
whether it holds.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import abm

ROOT = Path(__file__).resolve().parents[1]
NAMES = [
    "ni", "sq", "vacc", "ct", "vacc_ct", "vacc_budget", "vacc_t30", "vacc_t60", "vacc_t30_ct", "vacc_t60_ct",
    "vacc_phase1a", "vacc_on_schedule",
]  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--agents", type=int, default=100_000)
    ap.add_argument("--replicates", type=int, default=10)
    args = ap.parse_args()
    results = {}
    for name in NAMES:
        t = time.perf_counter()
        results[name] = abm.run(
            ROOT / "scenarios/king_county" / f"{name}.yaml", agents=args.agents, replicates=args.replicates
        )
        print(f"# {name}: {time.perf_counter() - t:.1f} s", flush=True)
    print(f"{args.agents:,} agents, {args.replicates} replicates, 180 days; means over replicates (sd).\n")
    print(
        "| scenario | peak hospitalized (day) | peak beds incl. ICU | cumulative infected | deaths | 70+ infected "
        "| under-70 infected | total cost $ | engine s |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    age_share = {}
    for name, r in results.items():
        s = r.summary
        last = r.by_age[r.by_age.day == r.by_age.day.max()]
        old = last[last.age_group.isin(["70-79", "80+"])]
        young = last[~last.age_group.isin(["70-79", "80+"])]
        o = old.cumulative_infected.sum() / old.agents.sum()
        y = young.cumulative_infected.sum() / young.agents.sum()
        age_share[name] = (o, y)
        ph, po, ci = s["peak_hospitalized"], s["peak_hospital_occupancy"], s["cumulative_infected"]
        print(
            f"| {name} | {ph['value']:.1f} ({ph['day']}) | {po['value']:.1f} "
            f"| {100 * ci['share']:.1f}% ({100 * ci['sd'] / s['agents']:.1f}) "
            f"| {s['deaths']['mean']:.0f} ({s['deaths']['sd']:.0f}) | {100 * o:.1f}% | {100 * y:.1f}% "
            f"| {s['total_cost']['mean']:,.0f} | {r.manifest['timings']['engine_seconds']:.1f} |"
        )
    peak = {n: r.summary["peak_hospitalized"] for n, r in results.items()}
    cost = {n: r.summary["total_cost"]["mean"] for n, r in results.items()}
    four = ["ni", "sq", "vacc", "ct"]
    print("\nFindings:")
    lowest = min(four, key=lambda n: peak[n]["value"])
    print(f"- tracing gives the lowest hospital peak of ni/sq/vacc/ct: {lowest == 'ct'} (lowest: {lowest})")
    print(
        f"- tracing delays the peak (ct peak day {peak['ct']['day']} vs ni {peak['ni']['day']}): "
        f"{(peak['ct']['day'] or 0) > (peak['ni']['day'] or 0)}"
    )
    late = [n for n in NAMES if (peak[n]["day"] or 0) >= 100]
    later = ", ".join(f"{n} day {peak[n]['day']}" for n in late) or "none"
    print(f"- every peak before day 100: {not late} (later: {later})")
    red_old = 1 - age_share["vacc"][0] / age_share["ni"][0]
    red_young = 1 - age_share["vacc"][1] / age_share["ni"][1]
    print(
        f"- vaccination protects the 70+ far more than other ages: infections cut {100 * red_old:.0f}% (70+) "
        f"vs {100 * red_young:.0f}% (under 70): {red_old > 2 * red_young}"
    )
    print(
        "- for the same spend, tracing lowers the peak more than vaccination: "
        f"ct ${cost['ct']:,.0f} peak {peak['ct']['value']:.1f} "
        f"vs vacc_budget ${cost['vacc_budget']:,.0f} peak {peak['vacc_budget']['value']:.1f}: "
        f"{cost['ct'] <= cost['vacc_budget'] and peak['ct']['value'] < peak['vacc_budget']['value']}"
    )


if __name__ == "__main__":
    main()
