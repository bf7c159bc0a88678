"""What attributing infections to infectors costs, and that it changes no epidemic.

Runs each scenario with and without ``Simulation.attribute_infections`` (the reproduction
number's source), alternating, on the same population, and reports the day loop's time (median
of the repeats) and whether every recorded array is identical.

    python benchmarks/infectors.py [--agents 100000] [--replicates 1] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from abm.populations import load_region
from abm.runs import population_of, resolve, simulation_of
from abm.threads import torch_threads

SCENARIOS = ("scenarios/king_county/no_intervention.yaml", "scenarios/king_county/vacc_ct.yaml")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", type=int, default=100_000)
    ap.add_argument("--replicates", type=int, default=1)
    ap.add_argument("--days", type=int, default=180)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--scenarios", nargs="+", default=list(SCENARIOS))
    args = ap.parse_args()
    print("| scenario | agents x replicates | without s (median) | with s (median) | ratio | identical |")
    print("|---|---|---:|---:|---:|---|")
    for path in args.scenarios:
        sc = resolve(path, {"agents": args.agents, "replicates": args.replicates, "days": args.days}, None)
        pop = population_of(sc, load_region(sc.population.region))
        times: dict[bool, list[float]] = {False: [], True: []}
        arrays: dict[bool, object] = {}
        with torch_threads(1):
            for _ in range(args.repeats):
                for on in (False, True):
                    sim = simulation_of(sc, pop, device=torch.device("cpu"), attribute_infections=on)
                    t = time.perf_counter()
                    res = sim.run()
                    times[on].append(time.perf_counter() - t)
                    arrays[on] = res
        a, b = arrays[False], arrays[True]
        same = all(
            np.array_equal(getattr(a, k), getattr(b, k))
            for k in ("stages_by_tract", "new_by_tract", "stages_by_age", "entries", "introduced")
        ) and all(np.array_equal(a.activity[k], b.activity[k]) for k in a.activity)
        off, on = statistics.median(times[False]), statistics.median(times[True])
        print(
            f"| {sc.name} | {args.agents:,} x {args.replicates} | {off:.2f} | {on:.2f} | {on / off:.3f} | "
            f"{'yes' if same else 'NO'} |"
        )


if __name__ == "__main__":
    main()
