"""The measured figures docs/model.md quotes about contacts and tracing, re-measured.

Contacts (seconds per seed): of King County populations of ``--agents`` agents (seeds
``--seeds``), the share of agents in no school, workplace or facility; the occupation layer on
day 0: contacts per member (contacts that landed on the agent itself left out) against the mean
of the settings' degrees mu over members, and the rewired contacts that land on the agent itself
or repeat another contact; the same for the reference population; the community layer over its
first cycle: daily contacts per agent against its k_i, different people met per cycle per k_i
and contacts that land on the agent itself. Tracing (about a minute; ``--skip-notices`` leaves
it out): the notices that reach contacts in hospital in scenarios/king_county/ct.yaml at 20,000
agents x 10 replicates and transmission rate 5. docs/model.md, "Contacts" and "The day".

    python benchmarks/model_figures.py [--agents 100000] [--seeds 1234,1,7,99] [--skip-notices]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from abm.engine.config import CommunityContacts, OccupationContacts, Stage, default_degrees  # noqa: E402
from abm.engine.contacts import OccupationLayer  # noqa: E402
from abm.engine.reference_contacts import community_layer  # noqa: E402
from abm.engine.simulator import Simulation  # noqa: E402
from abm.populations import Population, build_population, load_region  # noqa: E402
from abm.populations.reference import build_reference_population  # noqa: E402

CT = ROOT / "scenarios/king_county/ct.yaml"
IN_HOSPITAL = (Stage.HOSPITALIZED, Stage.CRITICAL_ICU, Stage.HOSPITALIZED_RECOVERING)


def occupation_figures(pop: Population, seed: int) -> dict[str, float]:
    """Day 0 of the occupation layer: contacts per member, mean mu, self-landed and repeated contacts."""
    cfg = OccupationContacts(degree={**default_degrees(), "CHILD": 10, "ELDERLY": 3})
    layer = OccupationLayer(pop, cfg, 1, torch.device("cpu"), seed)
    members = np.flatnonzero(pop.group >= 0)
    mu = np.array([cfg.degree[c] for c in pop.categories])[pop.group_category[pop.group[members]]]
    edges = layer.edges(0)
    src, dst = edges.src.numpy(), edges.dst.numpy()
    idx = layer.rewiring(0)[0].numpy()
    home = src != dst
    per_agent = np.bincount(np.concatenate([src[home], dst[home]]), minlength=pop.size)
    pair = np.minimum(src[home], dst[home]).astype(np.int64) * pop.size + np.maximum(src[home], dst[home])
    repeats = pair.size - np.unique(pair).size
    landed_home = int((src[idx] == dst[idx]).sum())
    return {
        "no_group": 1 - members.size / pop.size,
        "per_member": float(per_agent[members].mean()),
        "mu": float(mu.mean()),
        "self_of_rewired": landed_home / max(1, idx.size),
        "self_of_all": landed_home / max(1, src.size),
        "repeats_of_all": repeats / max(1, src.size),
    }


def community_figures(pop: Population, seed: int) -> dict[str, float]:
    """The community layer (defaults) over its first cycle."""
    cfg = CommunityContacts()
    layer = community_layer(pop, cfg, 1, torch.device("cpu"), seed, False)
    k = (layer.stub_ptr[1:] - layer.stub_ptr[:-1]).numpy()
    agents = torch.arange(pop.size)
    keys, landed_home, started = [], 0, 0
    for day in range(cfg.cycle_days):
        e = layer.edges(day)
        landed_home += int((e.src == e.dst).sum())
        started += e.src.shape[0]
        owner, partner = layer.contacts_of(agents, day)
        keys.append(owner.numpy().astype(np.int64) * pop.size + partner.numpy())
    met = np.concatenate(keys)
    return {
        "k": float(k.mean()),
        "daily": met.size / cfg.cycle_days / pop.size,
        "distinct_per_k": np.unique(met).size / max(1, int(k.sum())),
        "self_of_all": landed_home / max(1, started),
    }


def notices_in_hospital(replicates: int = 10) -> tuple[int, int]:
    """(notices to contacts in hospital, all notices) in ct.yaml at 20,000 agents and rate 5."""
    import abm.interventions.digital_tracing as digital
    import abm.interventions.manual_tracing as manual
    from abm.runs import simulation_of
    from abm.scenario import load_scenario, population_of

    counts = [0, 0]
    notify = digital.notify

    def counted(sim: Simulation, day: int, contacts: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
        """``notify``, counting the contacts it is given and those of them in hospital."""
        stage = sim.state.stage.index_select(0, contacts)
        counts[0] += int(sum((stage == s).sum() for s in IN_HOSPITAL))
        counts[1] += contacts.numel()
        return notify(sim, day, contacts, *args, **kwargs)

    digital.notify = manual.notify = counted
    try:
        sets = ["population.agents=20000", "disease.transmission_rate=5", f"simulation.replicates={replicates}"]
        sc = load_scenario(CT, sets)
        simulation_of(sc, population_of(sc, load_region(sc.population.region))).run()
    finally:
        digital.notify = manual.notify = notify
    return counts[0], counts[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", type=int, default=100_000)
    ap.add_argument("--seeds", default="1234,1,7,99", help="population seeds, comma-separated")
    ap.add_argument("--skip-notices", action="store_true", help="contacts only (seconds)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    region = load_region("king_county")
    print(f"{args.agents:,} agents")
    print("| seed | population | in no group | occupation contacts per member | mean mu | landed on the agent "
          "(of rewired, of all) | repeats (of all) |")  # fmt: skip
    print("|---:|---|---:|---:|---:|---:|---:|")
    for seed in (int(s) for s in args.seeds.split(",")):
        for name, pop in (
            ("King County", build_population(region, args.agents, seed)),
            ("reference", build_reference_population(args.agents, seed)),
        ):
            f = occupation_figures(pop, seed)
            print(
                f"| {seed} | {name} | {f['no_group']:.1%} | {f['per_member']:.2f} | {f['mu']:.2f} | "
                f"{f['self_of_rewired']:.2%}, {f['self_of_all']:.3%} | {f['repeats_of_all']:.3%} |"
            )
    print()
    print("| seed | community k_i (mean) | contacts a day | different people per cycle / k_i | landed on the agent |")
    print("|---:|---:|---:|---:|---:|")
    for seed in (int(s) for s in args.seeds.split(",")):
        f = community_figures(build_population(region, args.agents, seed), seed)
        print(f"| {seed} | {f['k']:.3f} | {f['daily']:.3f} | {f['distinct_per_k']:.2f} | {f['self_of_all']:.3%} |")
    if not args.skip_notices:
        hospital, notices = notices_in_hospital()
        where = "ct.yaml, 20,000 agents x 10 replicates, rate 5"
        print(f"\n{where}: {hospital} of {notices:,} notices to agents in hospital")


if __name__ == "__main__":
    main()
