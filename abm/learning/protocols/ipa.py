"""IPA: iterative parameter alignment on a ring (same architecture, different initialisations).

The token holding all N parameter sets travels around the ring; on its turn peer i runs
``local_epochs`` passes over its data (Algorithm 1's one pass when it is 1; as many as local-only
training makes a round) of SGD on CE(D_i; theta_i) + lam * sum_l sum_{j != i} a_ij * dist_p(theta_i^l, theta_j^l)
over *all* copies (``update_others``), so theta_i learns from its data and every other copy is
pulled toward it. ``p = 1``: sum of absolute differences; ``p = 2``: sum of squared differences
(``reduction: mean`` divides by the layer size). Pair weights a_ij are 1 (``uniform``) or
N |D_j| / |D| (``size``: the weighted coupling). Early stopping: a fixed ``stop_round`` or the
first round at which every peer's validation accuracy reaches ``target_accuracy``; after the stop
the models are frozen.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F
from pydantic import Field

from abm.learning.messages import Message, MessageKind
from abm.learning.models import architecture_key, flat_params
from abm.learning.protocols.base import Protocol, ProtocolConfig, RunContext
from abm.learning.training import accuracy, minibatch_indices


class IPAConfig(ProtocolConfig):
    """IPA parameters (ipa.md section 8)."""

    lam: float = Field(0.01, ge=0)
    p: Literal[1, 2] = 1
    reduction: Literal["sum", "mean"] = "sum"
    update_others: bool = True
    lr: float | None = Field(None, gt=0)  # plain SGD; default: the scenario's training lr
    pair_weights: Literal["uniform", "size"] = "uniform"
    stop_round: int | None = Field(None, ge=1)
    target_accuracy: float | None = Field(None, ge=0, le=1)


def alignment(
    params_i: Iterable[torch.Tensor], params_j: Iterable[torch.Tensor], p: int, reduction: str
) -> torch.Tensor:
    """sum over layers of dist_p(theta_i^l, theta_j^l)."""
    total = 0.0
    for a, b in zip(params_i, params_j, strict=True):
        d = a - b
        term = d.abs().sum() if p == 1 else (d * d).sum()
        if reduction == "mean":
            term = term / d.numel()
        total = total + term
    return total


class IPA(Protocol):
    """Iterative parameter alignment."""

    name = "ipa"
    Config = IPAConfig
    same_architecture = True

    def setup(self, ctx: RunContext) -> None:
        if len({architecture_key(p.model) for p in ctx.participants}) > 1:
            raise ValueError("IPA needs identical architectures for all participants")
        sizes = np.array([p.n_train for p in ctx.participants], dtype=float)
        n = ctx.n
        if self.config.pair_weights == "size":
            self.a = np.tile(n * sizes / sizes.sum(), (n, 1))
        else:
            self.a = np.ones((n, n))
        self.stopped_at: int | None = None
        self.distances_l1: list[float] = []

    def _turn(self, ctx: RunContext, i: int) -> None:
        cfg = self.config
        models = [p.model for p in ctx.participants]
        pi = ctx.participants[i]
        params = [list(m.parameters()) for m in models]
        trainable = [q for ps in params for q in ps] if cfg.update_others else list(params[i])
        opt = torch.optim.SGD(trainable, lr=cfg.lr if cfg.lr is not None else pi.train_config.lr)
        data = pi.data.train
        models[i].train()
        # local training's epochs and minibatches, so that with lam = 0 a peer trains as local-only does
        for _ in range(ctx.local_epochs):
            for idx in minibatch_indices(len(data), pi.train_config.batch_size, pi.generator):
                loss = F.cross_entropy(models[i](data.x[idx]), data.y[idx])
                for j in range(ctx.n):
                    if j == i:
                        continue
                    other = params[j] if cfg.update_others else [q.detach() for q in params[j]]
                    loss = loss + cfg.lam * float(self.a[i, j]) * alignment(params[i], other, cfg.p, cfg.reduction)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()

    def run_round(self, ctx: RunContext, t: int) -> None:
        cfg = self.config
        if self.stopped_at is not None:
            return
        n = ctx.n
        for i in range(n):
            self._turn(ctx, i)
            token = torch.cat([flat_params(p.model) for p in ctx.participants])
            ctx.network.send(Message(MessageKind.TOKEN, i, (i + 1) % n, {"theta": token}, t))
        flats = [flat_params(p.model) for p in ctx.participants]
        d = [float((flats[i] - flats[j]).abs().mean()) for i in range(n) for j in range(i + 1, n)]
        self.distances_l1.append(float(np.mean(d)) if d else 0.0)
        if cfg.stop_round is not None and t + 1 >= cfg.stop_round:
            self.stopped_at = t + 1
        if cfg.target_accuracy is not None:
            accs = [accuracy(p.model, p.data.val) for p in ctx.participants]
            if min(accs) >= cfg.target_accuracy:
                self.stopped_at = t + 1

    def summary(self, ctx: RunContext) -> dict:
        return {"stopped_at": self.stopped_at, "mean_abs_param_distance": self.distances_l1}
