"""FedAvg and FedProx (star topology, shared initialisation, size-weighted aggregation).

Each round every participant starts from the global model, trains ``local_epochs`` (FedProx adds
(mu/2) ||w - w_global||^2), and sends its weighted update w_k (theta_k - theta_global) with
w_k = |D_k| / sum_j |D_j| through the context's sum aggregator (plain, secure, or DP). The server
adds the updates, divides by the weight of the participants whose update arrived (neither dropped
out nor held back because the sum cannot carry it: not finite, training having diverged, or beyond
the secure sum's range, or so large that the sum could overflow float32), and broadcasts; a
round whose sum is not released (too few updates arrived) leaves the global model as it was, and so
does one whose new global model would not be finite (``server_lr`` above 1 times a huge average
update): that aggregate is discarded and recorded (:func:`finite_or_discarded`).
The sizes are messages: before round 0 each participant sends the server its size, and the server
sends each participant the total (``data_size``, 8 bytes each; not with ``weighting: uniform``).
Each participant computes its own w_k from its size and the total it received (client operation
``set_contribution_weight``); the weight is never sent. Participant 0's initial weights are the
shared initialisation. Client work goes through ``ctx.clients`` (operations ``get_weights``,
``set_weights``, ``fedavg.fit``), so the protocol runs in process and over Flower alike.

BatchNorm running statistics (floating buffers) are data statistics, not trained weights. With
``bn_stats: auto`` (default) they travel with the weights and are averaged, except when the
aggregator adds DP noise: then only the trainable parameters go through the private sum (and are
clipped and noised), and each participant keeps its own running statistics, as FedBN (Li et al.
2021) does for all BatchNorm state. Noising them would corrupt them (a noisy running variance can
go negative: NaN outputs), and releasing them without noise would void the DP guarantee, so under
DP they never leave the participant. ``bn_stats: local`` keeps them local always; ``shared`` with DP is
refused when the scenario is loaded (:func:`abm.learning.scenario.check_protocols`).
"""

from __future__ import annotations

from typing import Any

import torch

from abm.learning.clients import ClientEnv, Payload, client_op, contribution_weight
from abm.learning.messages import SERVER, Message, MessageKind
from abm.learning.models import flat_params, load_flat_params, load_trainable_flat, one_architecture, trainable_flat
from abm.learning.privacy.aggregation import arrived_weight, finite_or_discarded
from abm.learning.protocols.base import Protocol, RunContext
from abm.learning.protocols.sizes import contribution_weights


@client_op("fedavg.fit")
def fit_update(env: ClientEnv, payload: Payload, config: dict[str, Any]) -> Payload:
    """Client side of a round: train from the current (global) weights; return the weighted update
    (of parameters and buffers, or of the trainable parameters only when ``share_buffers`` is false)."""
    p = env.participant
    flatten = flat_params if bool(config.get("share_buffers", True)) else trainable_flat
    start = flatten(p.model)
    mu = float(config["mu"])
    extra = None
    if mu > 0:
        gparams = [q.detach().clone() for q in p.model.parameters()]

        def extra(model, xb, yb, logits):
            prox = sum(((a - b) ** 2).sum() for a, b in zip(model.parameters(), gparams, strict=True))
            return 0.5 * mu * prox

    p.train(int(config["epochs"]), extra)
    return {"update": (flatten(p.model) - start) * contribution_weight(env)}


@client_op("fedavg.set_params")
def set_params(env: ClientEnv, payload: Payload, config: dict[str, Any]) -> Payload:
    """Load global trainable parameters, keeping the participant's own BatchNorm running statistics."""
    load_trainable_flat(env.participant.model, payload["w"])
    return {}


class FedAvg(Protocol):
    """FedAvg (``mu = 0``) or FedProx (``mu > 0``)."""

    name = "fedavg"

    def setup(self, ctx: RunContext) -> None:
        if not one_architecture(ctx.clients.model_template(pid) for pid in ctx.ids):
            raise ValueError(f"{self.name} needs identical architectures for all participants")
        noisy = ctx.aggregator.adds_noise
        if self.config.bn_stats == "shared" and noisy:
            raise ValueError(
                f"{self.name}: bn_stats 'shared' with differential privacy: BatchNorm running statistics would "
                "either be noised (corrupting them) or leave without noise; use bn_stats: auto or local"
            )
        self.share_buffers = self.config.bn_stats == "shared" or (self.config.bn_stats == "auto" and not noisy)
        self.contribution_weights = contribution_weights(ctx, self.config.weighting)
        first = ctx.ids[0]
        init = ctx.clients.call("get_weights", {first: {}})[first]["w"]
        ctx.network.send(Message(MessageKind.MODEL_WEIGHTS, first, SERVER, {"w": init}, -1))
        self.global_model = ctx.clients.model_template(first)
        load_flat_params(self.global_model, init)
        self.global_flat = init if self.share_buffers else trainable_flat(self.global_model)
        # the shared initialisation (weights and the initial, data-free BatchNorm statistics)
        for pid in ctx.ids:
            ctx.network.send(Message(MessageKind.MODEL_WEIGHTS, SERVER, pid, {"w": init}, -1))
        ctx.clients.broadcast("set_weights", {"w": init})

    def _broadcast(self, ctx: RunContext, t: int) -> None:
        for pid in ctx.ids:
            ctx.network.send(Message(MessageKind.MODEL_WEIGHTS, SERVER, pid, {"w": self.global_flat}, t))
        ctx.clients.broadcast("set_weights" if self.share_buffers else "fedavg.set_params", {"w": self.global_flat})

    def run_round(self, ctx: RunContext, t: int) -> None:
        cfg = self.config
        w = self.contribution_weights
        ids = ctx.ids
        replies = ctx.clients.call(
            "fedavg.fit",
            {pid: {} for pid in ids},
            {"epochs": ctx.local_epochs, "mu": cfg.mu, "share_buffers": self.share_buffers},
        )
        updates: dict[int, torch.Tensor] = {pid: replies[pid]["update"] for pid in ids}
        dropped = ctx.dropouts.get(t, frozenset())
        total = ctx.aggregator.aggregate(updates, t, ctx.network, MessageKind.MODEL_UPDATE, dropped)
        if total is not None:  # else the round's update is skipped: the model stays as it was
            arrived = arrived_weight(w, ids, dropped | ctx.aggregator.withheld())
            step = self.global_flat + cfg.server_lr * total / arrived
            new = finite_or_discarded(ctx.aggregator, step, t, MessageKind.MODEL_UPDATE)
            if new is not None:  # else (server_lr times the average overflowed) the model stays as it was
                self.global_flat = new
                (load_flat_params if self.share_buffers else load_trainable_flat)(self.global_model, new)
        self._broadcast(ctx, t)


class FedProx(FedAvg):
    """FedAvg with a proximal term (default mu = 0.01)."""

    name = "fedprox"
