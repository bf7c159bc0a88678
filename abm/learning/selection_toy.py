"""The 2-D collaborator-selection simulation of chapter D (Fig. 14).

Users' "models" are points in the plane. User i's local optimum o_i ~ N(domain centre, spread^2);
each round every point moves halfway toward its optimum (local training), users score each other
by a noisy similarity (-squared distance + noise), pick one collaborator with the policy, and
average positions with it (equal weights). Greedy selection collapses into small cliques, some of
them across domains; consensus clustering recovers the domains.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from abm.learning.collaboration import CollaborationRecord
from abm.learning.metrics import cluster_recovery
from abm.learning.selection import ConsensusClusterPolicy, build_policy

if TYPE_CHECKING:
    from abm.learning.scenario import SelectionToySpec


def simulate(
    policy_name: str,
    users_per_domain: int = 13,
    domains: int = 3,
    rounds: int = 40,
    spread: float = 0.5,
    domain_distance: float = 4.0,
    noise: float = 0.1,
    seed: int = 0,
    step: float = 0.5,
) -> dict[str, Any]:
    """Run one policy; returns the record, the final positions and summary indicators."""
    rng = np.random.default_rng(seed)
    u = users_per_domain * domains
    groups = np.repeat(np.arange(domains), users_per_domain)
    angles = 2 * np.pi * np.arange(domains) / domains
    centres = domain_distance * np.stack([np.cos(angles), np.sin(angles)], axis=1)
    optima = centres[groups] + rng.normal(0, spread, size=(u, 2))
    pos = rng.normal(0, 1.0, size=(u, 2))  # shared random start
    params: dict[str, Any] = {"seed": seed} if policy_name.startswith("consensus") else {}
    if policy_name == "top_k":
        params = {"k": 6}
    policy = build_policy(policy_name, groups.tolist(), **params)
    record = CollaborationRecord(u)
    sel_rng = np.random.default_rng(seed + 1)
    for t in range(rounds):
        pos = pos + step * (optima - pos)
        d2 = ((pos[:, None, :] - pos[None, :, :]) ** 2).sum(-1)
        sim = -d2 + rng.normal(0, noise, size=d2.shape)
        policy.start_round(t, sim)
        choices = {i: policy.select(i, t, sim, sel_rng, 1) for i in range(u)}
        record.record(choices)
        new = pos.copy()
        for i, js in choices.items():
            new[i] = pos[[i, *js]].mean(0)
        pos = new
    out = {
        "policy": policy_name,
        "within_domain_rate_last10": record.within_group_rate(groups, last=10),
        "mean_distinct_partners_last10": float(record.distinct_partners(10).mean()),
        "cliques_last10": len(set(record.cliques(10).tolist())),
        "collapse": record.collapse(10),
        "mean_distance_to_optimum": float(np.linalg.norm(pos - optima, axis=1).mean()),
        "record": record,
        "groups": groups,
    }
    if isinstance(policy, ConsensusClusterPolicy) and policy.labels is not None:
        out["clusters"] = policy.labels.tolist()
        out["cluster_recovery"] = cluster_recovery(policy.labels, groups)
    return out


def run_selection_toy(spec: SelectionToySpec, seed: int) -> dict[str, Any]:
    """Every policy of ``spec`` (a SelectionToySpec); JSON-ready summaries."""
    results = {}
    for name in spec.policies:
        r = simulate(
            name,
            spec.users_per_domain,
            spec.domains,
            spec.rounds,
            spec.spread,
            spec.domain_distance,
            spec.noise,
            seed,
        )
        r.pop("groups")
        rec = r.pop("record")
        r["last_round_choices"] = rec.matrices[-1].argmax(1).tolist()
        results[name] = r
    return results
