"""Time of one gradient step of the differentiable engine: a forward run and the backward pass
to the daily transmission rate, on a calibration scenario (default the King County 2020 one,
100,000 agents x 1 replicate x its 151 days).

    python benchmarks/gradient_step.py [--scenario scenarios/king_county/calibrate_2020.yaml] [--seeds 5]

Prints each seed's seconds and their median (torch threads 1, as the engine runs by default).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from abm.populations.region import load_region
from abm.runs import population_of, simulation_of
from abm.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    """Time forward and backward passes, one seed each."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default=str(ROOT / "scenarios/king_county/calibrate_2020.yaml"))
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    sc = load_scenario(args.scenario, ["simulation.replicates=1"])
    pop = population_of(sc, load_region(sc.population.region))
    times = []
    for seed in range(args.seeds):
        sim = simulation_of(sc, pop, seed=seed, differentiable=True)
        rate = torch.tensor(sc.disease.transmission_rate, requires_grad=True)
        sim.daily_rate = rate.expand(sim.days)
        start = time.perf_counter()
        sim.run()
        torch.stack(sim.recorder.weighted_entries).sum().backward()
        times.append(time.perf_counter() - start)
    print(
        f"{sc.name}: {pop.size:,} agents x 1 replicate x {sim.days} days; forward + backward s: "
        f"{', '.join(f'{t:.2f}' for t in times)}; median {statistics.median(times):.2f}"
    )


if __name__ == "__main__":
    main()
