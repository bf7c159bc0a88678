"""Engine speed and memory: 100k agents x 180 days (1 and 10 replicates), 1M agents, the whole
`abm run` command, and peak memory per agent.

    python benchmarks/engine.py [--repeats 3] [--threads N] [--skip-1m] [--rate 4.567]
    python benchmarks/engine.py --scaling [--repeats 1] [--scenario vacc_ct]   # 10k agents to all of King County
    python benchmarks/engine.py --thread-scaling [--repeats 1]                 # torch threads 1, 2, 4, ... cores
    python benchmarks/engine.py --side-by-side                                 # two runs at once, 1 and 2 threads

The runs use the transmission rate 4.567 (``--rate``; 0 keeps the scenarios' own), so that the
workload stays a full epidemic whatever the King County calibration gives.

Each configuration runs in a fresh subprocess (so peak memory is its own); engine time is the
simulation's day loop only (population building, setup and writing excluded), median of
--repeats. Prints a Markdown table for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios/king_county/no_intervention.yaml"
# The benchmark's workload: the King County rate of sessions 3-7, at which NI infects about 77%
# of agents by day 180 (a full epidemic, like the peers' in peers.py). The scenarios' calibrated
# rate (3.137 since 2026-11-25) infects about 47%, which is less work; `--rate 0` times that.
BENCHMARK_RATE = 4.567

CHILD = r"""
import json, resource, sys, time, torch
threads = int(sys.argv[4])
if threads > 0:
    torch.set_num_threads(threads)
from abm.runs import resolve
from abm.engine import Simulation
from abm.populations import build_population, load_region
sets = [f"disease.transmission_rate={sys.argv[5]}"] if float(sys.argv[5]) > 0 else None
sc = resolve(sys.argv[1], {"agents": int(sys.argv[2]), "replicates": int(sys.argv[3]), "days": 180}, sets)
if threads == 0:
    torch.set_num_threads(torch.get_num_threads())
t0 = time.perf_counter()
pop = build_population(load_region(sc.population.region), sc.population.agents, sc.simulation.seed)
t1 = time.perf_counter()
sim = Simulation(pop, sc.disease, sc.contacts, sc.seeding, sc.simulation.days, sc.simulation.replicates,
                 sc.simulation.seed, interventions=sc.interventions.build())
t2 = time.perf_counter()
res = sim.run()
print(json.dumps({"population_s": t1 - t0, "setup_s": t2 - t1, "engine_s": res.engine_seconds,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "infected_share": float(1 - res.stages[-1, :, 0].mean() / pop.size)}))
"""


def child(scenario: Path, agents: int, replicates: int, threads: int, rate: float) -> subprocess.Popen:
    """A measuring run in its own process (started, not waited for)."""
    args = [sys.executable, "-c", CHILD, str(scenario), str(agents), str(replicates), str(threads), str(rate)]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def result(proc: subprocess.Popen) -> dict:
    """A measuring run's figures, once it has finished."""
    out, err = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"measuring run failed ({proc.returncode}): {err[-2000:]}")
    return json.loads(out.strip().splitlines()[-1])


def measure(scenario: Path, agents: int, replicates: int, threads: int, rate: float = 0.0) -> dict:
    return result(child(scenario, agents, replicates, threads, rate))


def whole_run(rate: float) -> float:
    t = time.perf_counter()
    cmd = [sys.executable, "-m", "abm", "run", str(SCENARIO), "--replicates", "1", "--out", "/tmp/abm-bench-run"]
    if rate > 0:
        cmd += ["--set", f"disease.transmission_rate={rate}"]
    subprocess.run(cmd, capture_output=True, check=True)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    ap.add_argument("--skip-1m", action="store_true")
    ap.add_argument("--scaling", action="store_true", help="one scenario at 10k, 100k, 1M and 2.25M agents")
    ap.add_argument("--thread-scaling", action="store_true", help="no intervention at 1, 2, 4, ... torch threads")
    ap.add_argument("--side-by-side", action="store_true", help="two 100k x 10 runs at once, 1 then 2 threads each")
    ap.add_argument(
        "--rate",
        type=float,
        default=BENCHMARK_RATE,
        help=f"transmission rate of the runs (default {BENCHMARK_RATE}; 0: the scenarios' own)",
    )
    names = sorted(p.stem for p in (ROOT / "scenarios/king_county").glob("*.yaml"))
    ap.add_argument("--scenario", default="vacc_ct", choices=names, help="King County scenario for --scaling")
    args = ap.parse_args()
    if args.scaling:
        scaling(args.scenario, args.repeats, args.threads, args.rate)
        return
    if args.thread_scaling:
        thread_scaling(args.repeats, args.rate)
        return
    if args.side_by_side:
        side_by_side(args.rate)
        return
    kc = ROOT / "scenarios/king_county"
    configs = [
        ("no_intervention", 100_000, 1),
        ("vacc_ct", 100_000, 1),
        ("no_intervention", 100_000, 10),
        ("vacc_ct", 100_000, 10),
    ]
    if not args.skip_1m:
        configs.append(("no_intervention", 1_000_000, 1))
    rows = []
    for name, agents, reps in configs:
        runs = [measure(kc / f"{name}.yaml", agents, reps, args.threads, args.rate) for _ in range(args.repeats)]
        engine = statistics.median(r["engine_s"] for r in runs)
        rss = max(r["peak_rss_mb"] for r in runs)
        setup = statistics.median(r["population_s"] + r["setup_s"] for r in runs)
        rows.append((name, agents, reps, engine, [r["engine_s"] for r in runs], setup, rss))
        print(f"# {name} {agents} x {reps}: engine {engine:.2f} s, peak {rss:.0f} MB", file=sys.stderr, flush=True)
    whole = statistics.median(whole_run(args.rate) for _ in range(args.repeats))
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}; "
        f"torch threads: {args.threads or 'default'}; transmission rate: {args.rate or 'the scenarios'}"
    )
    print()
    print(
        "| scenario | agents | replicates | engine s (median) | engine s (runs) | population + setup s "
        "| peak RSS MB | agent-days per s |"
    )
    print("|---|---:|---:|---:|---|---:|---:|---:|")
    for name, agents, reps, engine, all_s, setup, rss in rows:
        runs_s = ", ".join(f"{x:.2f}" for x in all_s)
        rate = agents * reps * 180 / engine
        print(f"| {name} | {agents:,} | {reps} | {engine:.2f} | {runs_s} | {setup:.2f} | {rss:,.0f} | {rate:,.0f} |")
    big = [r for r in rows if r[1] == 1_000_000]
    print()
    for scenario in ("no_intervention", "vacc_ct"):
        one = next(r[3] for r in rows if r[0] == scenario and r[1:3] == (100_000, 1))
        ten = next(r[3] for r in rows if r[0] == scenario and r[1:3] == (100_000, 10))
        print(f"{scenario}: 10 replicates / 1 replicate engine time: {ten / one:.2f}")
    if big:
        base = next(r[6] for r in rows if r[0] == "no_intervention" and r[1:3] == (100_000, 1))
        per = (big[0][6] - base) * 1024 * 1024 / 900_000
        print(f"memory per agent (peak RSS difference 1M vs 100k, per extra agent): {per:,.0f} bytes")
    print(f"whole `abm run` (100k x 180 days, 1 replicate, start to files written), median: {whole:.2f} s")


def scaling(name: str, repeats: int, threads: int, rate: float) -> None:
    """The scaling table: one scenario, one replicate, from 10k agents to the whole county."""
    scenario = ROOT / "scenarios/king_county" / f"{name}.yaml"
    print(
        f"{name}; machine: {platform.machine()}, {os.cpu_count()} cores; torch threads: {threads or 'default'}; "
        f"transmission rate: {rate or 'the scenario'}"
    )
    print()
    print("| agents | engine s (median) | population + setup s | peak RSS MB | agent-days per s | infected |")
    print("|---:|---:|---:|---:|---:|---:|")
    for agents in (10_000, 100_000, 1_000_000, 2_250_000):
        runs = [measure(scenario, agents, 1, threads, rate) for _ in range(repeats)]
        engine = statistics.median(r["engine_s"] for r in runs)
        setup = statistics.median(r["population_s"] + r["setup_s"] for r in runs)
        rss = max(r["peak_rss_mb"] for r in runs)
        infected = statistics.median(r["infected_share"] for r in runs)
        print(
            f"| {agents:,} | {engine:.2f} | {setup:.2f} | {rss:,.0f} | {agents * 180 / engine:,.0f} | {infected:.1%} |",
            flush=True,
        )


def thread_scaling(repeats: int, rate: float) -> None:
    """Engine seconds of no intervention at 1, 2, 4, ... torch threads (up to the cores), for
    100,000 agents x 1 and x 10 replicates and 1,000,000 agents x 1."""
    cores = os.cpu_count() or 1
    counts = [t for t in (1, 2, 4, 8, 16, 32, 64) if t <= cores]
    print(f"no_intervention; machine: {platform.machine()}, {cores} cores; transmission rate: {rate or 'the scenario'}")
    print()
    print("| agents | replicates | " + " | ".join(f"{t} thread{'s' if t > 1 else ''} s" for t in counts) + " |")
    print("|---:|---:|" + "---:|" * len(counts))
    for agents, reps in ((100_000, 1), (100_000, 10), (1_000_000, 1)):
        secs = [
            statistics.median(measure(SCENARIO, agents, reps, t, rate)["engine_s"] for _ in range(repeats))
            for t in counts
        ]
        print(f"| {agents:,} | {reps} | " + " | ".join(f"{x:.2f}" for x in secs) + " |", flush=True)


def side_by_side(rate: float) -> None:
    """Two runs of no intervention (100,000 agents x 10 replicates) started together, with 1 and
    then 2 torch threads each: what threads cost when runs share the machine's cores."""
    print(f"no_intervention, 100,000 x 10, two at once; machine: {platform.machine()}, {os.cpu_count()} cores")
    print()
    print("| threads each | engine s (run 1) | engine s (run 2) | engine s alone (1 run after) |")
    print("|---:|---:|---:|---:|")
    for threads in (1, 2):
        pair = [child(SCENARIO, 100_000, 10, threads, rate) for _ in range(2)]
        both = [result(p)["engine_s"] for p in pair]
        alone = measure(SCENARIO, 100_000, 10, threads, rate)["engine_s"]
        print(f"| {threads} | {both[0]:.2f} | {both[1]:.2f} | {alone:.2f} |", flush=True)


if __name__ == "__main__":
    main()
