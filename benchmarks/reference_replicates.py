"""How much the reference profile's 10-replicate figures move with the draw (issue #4).

    python benchmarks/reference_replicates.py [--scenario ni] [--replicates 40] [--set-size 1] [--seed 1234]
                                              [--device cuda]

Runs one reference scenario with many replicates and prints the published metrics (cumulative
infected at t = 10..70, final size, HOSPITALIZED peak of the mean curve and its day, reference
row convention) for all replicates and for each consecutive group of 10, the size of the
published runs. ``--set-size 10`` gives every group of 10 replicates one shared set of five
initially infected agents (the reference fixes its five in the population file; specs section
2.7), drawn from the seed; ``--set-size 1`` (default) draws them per replicate, as the profile
does. ``--reference-design`` runs the replicates as groups of 10, each its own simulation (seed
``--seed`` + group) in which all 10 share one draw of every day's contacts
(``contacts.same_in_every_replicate: true``: occupation and community) and one set of initial
infections (``seeding.resample_per_replicate: false``): the reference code's 10 runs re-used one
population file and all its pre-generated daily network files, occupation and random (specs
section 1, num_runs, and section 2; its ``model.py`` reads ``Random/<t>.csv`` every step).
Torch threads: 1.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from abm.engine.disease import Stage
from abm.engine.rng import generator
from abm.outputs.reference_results import reference_rows
from abm.populations.population import Population
from abm.populations.reference import build_reference_population
from abm.runs import simulation_of
from abm.scenario import Scenario, load_scenario

ROOT = Path(__file__).resolve().parents[1]


def summary(hosp: np.ndarray, cum: np.ndarray) -> str:
    """Metrics of replicates' curves [row, replicate] (means over the replicates)."""
    h, c = hosp.mean(axis=1), cum.mean(axis=1)
    parts = [f"t{t}={c[t]:,.0f}" for t in (10, 20, 30, 40, 50, 70, 120)]
    parts.append(f"(sd t50 {cum[50].std(ddof=1):,.0f})" if cum.shape[1] > 1 else "")
    parts.append(f"final={c[-1]:,.0f} peak={h.max():.1f} day={int(h.argmax())}")
    return " ".join(p for p in parts if p)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", default="ni", help="name in scenarios/reference/")
    ap.add_argument("--replicates", type=int, default=40)
    ap.add_argument("--set-size", type=int, default=1, help="replicates sharing one set of initial infections")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument(
        "--reference-design", action="store_true", help="groups of 10 sharing all contacts and initial agents"
    )
    ap.add_argument("--device", default="cpu", help="cpu or cuda (one batch of all replicates on a GPU)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    sc = load_scenario(ROOT / "scenarios/reference" / f"{a.scenario}.yaml")
    pop = build_reference_population(sc.population.agents, a.seed)
    if a.reference_design:
        reference_design(a, sc, pop)
        return
    sim = simulation_of(sc, pop, replicates=a.replicates, seed=a.seed, device=torch.device(a.device))
    if a.set_size > 1:
        stages = torch.cat([torch.full((v,), int(Stage[k.upper()])) for k, v in sc.seeding.counts(sim.n).items()])
        stages = stages.to(sim.device)

        def shared_sets(day: int) -> None:
            gen = generator(sim.seed, "seeding-sets", day, sim.device)
            picks = []
            for g in range(0, a.replicates, a.set_size):
                chosen = torch.randperm(sim.n, generator=gen, device=sim.device)[: stages.shape[0]]
                picks += [chosen + r * sim.n for r in range(g, min(g + a.set_size, a.replicates))]
            sim._infect(torch.cat(picks), stages.repeat(len(picks)), day, gen)

        sim._seed = shared_sets
    t0 = time.perf_counter()
    res = sim.run()
    st = reference_rows(res.stages_by_age.astype(np.float64)).sum(axis=2)  # [row, replicate, stage]
    hosp, cum = st[:, :, Stage.HOSPITALIZED], res.agents - st[:, :, Stage.SUSCEPTIBLE]
    secs = time.perf_counter() - t0
    print(f"{a.scenario} seed {a.seed}, {a.replicates} replicates, set size {a.set_size} ({secs:.0f} s)")
    print("  all:", summary(hosp, cum))
    days, peaks = [], []
    for g in range(0, a.replicates - 9, 10):
        print(f"  replicates {g}-{g + 9}:", summary(hosp[:, g : g + 10], cum[:, g : g + 10]))
        mean = hosp[:, g : g + 10].mean(axis=1)
        days.append(int(mean.argmax()))
        peaks.append(float(mean.max()))
    if len(days) > 1:
        print(f"  groups of 10: peak days sorted {sorted(days)}; median {float(np.median(days)):.1f}")
        print(
            f"  groups of 10: peaks sorted {[round(p, 1) for p in sorted(peaks)]}; median {float(np.median(peaks)):.1f}"
        )


def reference_design_scenario(sc: Scenario) -> Scenario:
    """``sc`` with the design of the reference code's 10 runs: every replicate meets one draw of
    each day's contacts on every layer (the reference re-used its pre-generated occupation and
    random network files in every run) and the same initial agents (its population file)."""
    return sc.model_copy(
        update={
            "contacts": sc.contacts.model_copy(update={"same_in_every_replicate": True}),
            "seeding": sc.seeding.model_copy(update={"resample_per_replicate": False}),
        }
    )


def reference_design(a: argparse.Namespace, sc: Scenario, pop: Population) -> None:
    """Groups of 10 replicates, each sharing one draw of contacts and initial infections."""
    sc = reference_design_scenario(sc)
    t0 = time.perf_counter()
    hosps, cums = [], []
    for g in range(a.replicates // 10):
        res = simulation_of(sc, pop, replicates=10, seed=a.seed + g, device=torch.device(a.device)).run()
        st = reference_rows(res.stages_by_age.astype(np.float64)).sum(axis=2)
        hosps.append(st[:, :, Stage.HOSPITALIZED])
        cums.append(res.agents - st[:, :, Stage.SUSCEPTIBLE])
    secs = time.perf_counter() - t0
    print(f"{a.scenario} seeds {a.seed}-{a.seed + len(hosps) - 1}, reference design, 10 replicates each ({secs:.0f} s)")
    print("  all:", summary(np.concatenate(hosps, axis=1), np.concatenate(cums, axis=1)))
    for g, (h, c) in enumerate(zip(hosps, cums, strict=True)):
        print(f"  seed {a.seed + g}:", summary(h, c))


if __name__ == "__main__":
    main()
