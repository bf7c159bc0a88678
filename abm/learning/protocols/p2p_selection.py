"""Peer-to-peer model averaging with collaborator selection (thesis chapter D).

Each round every user trains locally, answers its neighbours' challenges, scores every neighbour
(``sim[i, j]`` = accuracy of j's model on i's private validation set, the paper's simplification:
i sends its challenge inputs, j returns predictions), picks up to ``collaborators`` neighbours with
the selection policy, fetches their models (a 0-byte ``request`` to each chosen neighbour, which
answers with its model) and averages self + chosen with equal weights. The
neighbours are the ``topology``'s: everyone (``fully_connected``, the default), the two ring
neighbours (``ring``) or ``degree`` ring neighbours (``k_regular``, ``degree`` / 2 either way);
pairs that are not neighbours exchange nothing. The collaboration record keeps who chose whom
each round.
"""

from __future__ import annotations

import numpy as np

from abm.learning.collaboration import CollaborationRecord
from abm.learning.messages import Message, MessageKind
from abm.learning.metrics import cluster_recovery
from abm.learning.models import flat_params, load_flat_params, one_architecture
from abm.learning.protocols.base import Protocol, RunContext
from abm.learning.selection import build_policy
from abm.learning.topology import build_topology
from abm.learning.training import predict


class P2PSelection(Protocol):
    """Local training + similarity-driven selection + equal-weight model averaging."""

    name = "p2p_selection"

    def setup(self, ctx: RunContext) -> None:
        if not one_architecture(p.model for p in ctx.participants):
            raise ValueError("p2p_selection averages models: it needs identical architectures")
        cfg = self.config
        params: dict = {}
        if cfg.policy == "top_k":
            params = {"k": cfg.k}
        elif cfg.policy == "eps_greedy":
            params = {"eps": cfg.eps}
        elif cfg.policy == "sim_sampling":
            params = {"temperature": cfg.temperature}
        elif cfg.policy.startswith("consensus"):
            params = {"seed": ctx.seed}
        self.policy = build_policy(cfg.policy, ctx.groups, **params)
        self.neighbours = build_topology(cfg.topology, ctx.n, cfg.degree)
        self.policy.restrict(self.neighbours)
        self.record = CollaborationRecord(ctx.n)

    def similarity(self, ctx: RunContext, t: int) -> np.ndarray:
        """sim[i, j]: accuracy of j's model on i's validation challenge (NaN where j is not i's
        neighbour: nothing is exchanged)."""
        n = ctx.n
        sim = np.full((n, n), np.nan)
        for i, pi in enumerate(ctx.participants):
            for j, pj in enumerate(ctx.participants):
                if not self.neighbours[i, j]:
                    continue
                x = pi.data.val.x
                ctx.network.send(Message(MessageKind.CHALLENGE, i, j, {"x": x}, t))
                z = predict(pj.model, x)
                ctx.network.send(Message(MessageKind.PREDICTIONS, j, i, {"z": z}, t))
                sim[i, j] = float((z.argmax(1) == pi.data.val.y).float().mean())
            sim[i, i] = float((predict(pi.model, pi.data.val.x).argmax(1) == pi.data.val.y).float().mean())
        return sim

    def run_round(self, ctx: RunContext, t: int) -> None:
        for p in ctx.participants:
            p.train(ctx.local_epochs)
        sim = self.similarity(ctx, t)
        self.policy.start_round(t, sim)
        choices = {i: self.policy.select(i, t, sim, ctx.rng, self.config.collaborators) for i in range(ctx.n)}
        self.record.record(choices)
        flats = [flat_params(p.model) for p in ctx.participants]
        for i, js in choices.items():
            for j in js:  # i asks each peer it chose (which learns that it was chosen) for its model
                ctx.network.send(Message(MessageKind.REQUEST, i, j, {}, t))
                ctx.network.send(Message(MessageKind.MODEL_WEIGHTS, j, i, {"w": flats[j]}, t))
            avg = sum(flats[k] for k in [i, *js]) / (1 + len(js))
            load_flat_params(ctx.participants[i].model, avg)

    def summary(self, ctx: RunContext) -> dict:
        out = {
            "topology": self.config.topology,
            "neighbours": int(self.neighbours[0].sum()),
            "collaboration": self.record.to_json(),
            "distinct_partners_last10": self.record.distinct_partners(10).tolist(),
            "cliques_last10": self.record.cliques(10).tolist(),
            "collapse": self.record.collapse(10),
        }
        if ctx.groups is not None:
            out["within_group_rate"] = self.record.within_group_rate(ctx.groups)
        labels = getattr(self.policy, "labels", None)
        if labels is not None:
            out["clusters"] = [int(v) for v in labels]
            if ctx.groups is not None:  # known domains: how well the clusters recover them
                out["cluster_recovery"] = cluster_recovery(labels, ctx.groups)
        return out
