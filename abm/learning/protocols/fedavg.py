"""FedAvg and FedProx (star topology, shared initialisation, size-weighted aggregation).

Each round every participant starts from the global model, trains ``local_epochs`` (FedProx adds
(mu/2) ||w - w_global||^2), and sends its weighted update w_k (theta_k - theta_global) with
w_k = |D_k| / sum_j |D_j| through the context's sum aggregator (plain, secure, or DP). The server
adds the updates, divides by the weight of the participants whose update arrived, and broadcasts.
"""

from __future__ import annotations

import copy

import torch

from abm.learning.messages import SERVER, Message, MessageKind
from abm.learning.models import architecture_key, flat_params, load_flat_params
from abm.learning.protocols.base import Protocol, ProtocolConfig, RunContext


class FedAvgConfig(ProtocolConfig):
    """FedAvg / FedProx parameters."""

    mu: float = 0.0  # proximal coefficient; 0 = FedAvg
    server_lr: float = 1.0
    weighting: str = "size"  # size | uniform


class FedAvg(Protocol):
    """FedAvg (``mu = 0``) or FedProx (``mu > 0``)."""

    name = "fedavg"
    Config = FedAvgConfig
    same_architecture = True
    uses_aggregator = True

    def setup(self, ctx: RunContext) -> None:
        keys = {architecture_key(p.model) for p in ctx.participants}
        if len(keys) > 1:
            raise ValueError(f"{self.name} needs identical architectures for all participants")
        self.global_model = copy.deepcopy(ctx.participants[0].model)
        self.global_flat = flat_params(self.global_model)
        for p in ctx.participants:
            load_flat_params(p.model, self.global_flat)

    def _weights(self, ctx: RunContext):
        if self.config.weighting == "uniform":
            return [1.0 / ctx.n] * ctx.n
        return ctx.weights().tolist()

    def run_round(self, ctx: RunContext, t: int) -> None:
        cfg = self.config
        w = self._weights(ctx)
        gparams = [q.detach().clone() for q in self.global_model.parameters()]
        updates: dict[int, torch.Tensor] = {}
        for k, p in enumerate(ctx.participants):
            ctx.network.send(Message(MessageKind.MODEL_WEIGHTS, SERVER, p.pid, {"w": self.global_flat}, t))
            load_flat_params(p.model, self.global_flat)
            extra = None
            if cfg.mu > 0:

                def extra(model, xb, yb, logits, _g=gparams):
                    prox = sum(((a - b) ** 2).sum() for a, b in zip(model.parameters(), _g, strict=True))
                    return 0.5 * cfg.mu * prox

            p.train(ctx.local_epochs, extra)
            updates[p.pid] = (flat_params(p.model) - self.global_flat) * w[k]
        dropped = ctx.dropouts.get(t, frozenset())
        total = ctx.aggregator.aggregate(updates, t, ctx.network, MessageKind.MODEL_UPDATE, dropped)
        arrived = sum(w[k] for k, p in enumerate(ctx.participants) if p.pid not in dropped)
        self.global_flat = self.global_flat + cfg.server_lr * total / arrived
        load_flat_params(self.global_model, self.global_flat)
        for p in ctx.participants:
            load_flat_params(p.model, self.global_flat)


class FedProx(FedAvg):
    """FedAvg with a proximal term (default mu = 0.01)."""

    name = "fedprox"

    class Config(FedAvgConfig):
        mu: float = 0.01
