"""Engine speed and memory: 100k agents x 180 days (1 and 10 replicates), 1M agents, the whole
`abm run` command, and peak memory per agent.

    python benchmarks/engine.py [--repeats 3] [--threads N] [--skip-1m]

Each configuration runs in a fresh subprocess (so peak memory is its own); engine time is the
simulation's day loop only (population building, setup and writing excluded), median of
--repeats. Prints a Markdown table for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios/king_county/no_intervention.yaml"

CHILD = r"""
import json, resource, sys, time, torch
threads = int(sys.argv[4])
if threads > 0:
    torch.set_num_threads(threads)
from abm.runs import resolve
from abm.engine import Simulation
from abm.populations import build_population, load_region
sc = resolve(sys.argv[1], {"agents": int(sys.argv[2]), "replicates": int(sys.argv[3]), "days": 180})
t0 = time.perf_counter()
pop = build_population(load_region(sc.population.region), sc.population.agents, sc.simulation.seed)
t1 = time.perf_counter()
sim = Simulation(pop, sc.disease, sc.contacts, sc.seeding, sc.simulation.days, sc.simulation.replicates, sc.simulation.seed)
t2 = time.perf_counter()
res = sim.run()
print(json.dumps({"population_s": t1 - t0, "setup_s": t2 - t1, "engine_s": res.engine_seconds,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "infected_share": float(1 - res.stages[-1, :, 0].mean() / pop.size)}))
"""


def measure(agents: int, replicates: int, threads: int) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(SCENARIO), str(agents), str(replicates), str(threads)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def whole_run(threads: int) -> float:
    env_cmd = [sys.executable, "-m", "abm", "run", str(SCENARIO), "--replicates", "1", "--out", "/tmp/abm-bench-run"]
    t = time.perf_counter()
    subprocess.run(env_cmd, capture_output=True, check=True)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--skip-1m", action="store_true")
    args = ap.parse_args()
    configs = [(100_000, 1), (100_000, 10)] + ([] if args.skip_1m else [(1_000_000, 1)])
    rows = []
    for agents, reps in configs:
        runs = [measure(agents, reps, args.threads) for _ in range(args.repeats)]
        engine = statistics.median(r["engine_s"] for r in runs)
        rss = max(r["peak_rss_mb"] for r in runs)
        rows.append(
            (
                agents,
                reps,
                engine,
                [r["engine_s"] for r in runs],
                statistics.median(r["population_s"] + r["setup_s"] for r in runs),
                rss,
                runs[0]["infected_share"],
            )
        )
        print(f"# {agents} x {reps}: engine {engine:.2f} s, peak {rss:.0f} MB", file=sys.stderr)
    whole = statistics.median(whole_run(args.threads) for _ in range(args.repeats))
    print(
        f"machine: {platform.processor() or platform.machine()}, {platform.platform()}; torch threads: {args.threads or 'default'}"
    )
    print()
    print(
        "| agents | replicates | engine s (median) | engine s (all) | population + setup s | peak memory MB | bytes per agent-replicate | agent-days per s |"
    )
    print("|---:|---:|---:|---|---:|---:|---:|---:|")
    for agents, reps, engine, all_s, setup, rss, _ in rows:
        per = rss * 1024 * 1024 / (agents * reps)
        print(
            f"| {agents:,} | {reps} | {engine:.2f} | {', '.join(f'{x:.2f}' for x in all_s)} | {setup:.2f} | {rss:,.0f} | {per:,.0f} | {agents * reps * 180 / engine:,.0f} |"
        )
    one = next(r for r in rows if r[:2] == (100_000, 1))[2]
    ten = next(r for r in rows if r[:2] == (100_000, 10))[2]
    print()
    print(f"10 replicates / 1 replicate engine time: {ten / one:.2f}")
    print(f"whole `abm run` (100k x 180 days, 1 replicate, import to files written), median: {whole:.2f} s")


if __name__ == "__main__":
    main()
