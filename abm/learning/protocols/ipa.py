"""IPA: iterative parameter alignment on a ring (same architecture, different initialisations).

The token holding all N parameter sets travels around the ring; on its turn peer i runs
``local_epochs`` passes over its data (Algorithm 1's one pass when it is 1; as many as local-only
training makes a round) of SGD on CE(D_i; theta_i) + lam * sum_l sum_{j != i} a_ij * dist_p(theta_i^l, theta_j^l)
over *all* copies (``update_others``), so theta_i learns from its data and every other copy is
pulled toward it. ``p = 1``: sum of absolute differences; ``p = 2``: sum of squared differences
(``reduction: mean`` divides by the layer size). Pair weights a_ij are 1 (``uniform``) or
N |D_j| / |D| (``size``: the weighted coupling). Early stopping: a fixed ``stop_round``, the
first round at which every peer's validation accuracy reaches ``target_accuracy`` (after the stop
the models are frozen), or ``fair_stop`` (:class:`FairStop`), ipa.md's fair regime (4.6, 7.7 (b)
and (c)): rounds whose Pearson rho between the peers' standalone and IPA validation accuracies is
at least ``rho_min``.

``fair_stop``'s information assumption: whoever applies the rule learns every peer's scalar
validation accuracies, standalone (phi_i, once) and IPA's after each round (xi_i(t)); the peers
publish these numbers, nothing else (``target_accuracy`` assumes the same of xi). Each peer gets
phi_i by training a copy of its initial model alone before round 1 (:func:`standalone_val_accuracy`).

Messages (every one on the run's network): with ``pair_weights: size`` every peer first sends its
training-set size to every other (``data_size``, 8 bytes; row i of a_ij is from what peer i
received); before round 1 every peer but the first sends its
initial parameters to the first (``model_weights``: theta* assembled, ipa.md's "initialize theta*,
send to peer 1"); each turn ends with the token to the next peer (``token``). A peer uses its own
parameter set on its own data after the round (its validation accuracy for ``target_accuracy`` or
``fair_stop``, and its model once training ends), but with ``update_others`` the turns after its own
changed that set: the last peer of the ring, which holds theta* as it stands, sends every peer
but the first (which gets the token) its set back (``model_weights``) after every round that the
rule evaluates and after the last round trained. The rules' scalars are published to every other
peer (``validation_accuracy``, one float64 each: phi before round 1, xi after each round), so
every peer applies the rule itself and no decision travels.

A peer whose own training diverges on its turn (a loss that is not finite, or parameters that are
not finite after it: too high a learning rate) is left out of the coupling from then on, as a
peer that dropped out of the ring: its turn's changes to the other copies are undone (they are as
the turn found them, bit for bit), its own copy stays as it is, it takes no further turns, no
other peer aligns with it or updates it, the token carries only the coupled peers' sets and skips
it, and the distances and stopping rules are over the coupled peers. The run records it once, in
the round it diverged, in ``privacy.withheld`` (kind ``token``) and warns
(:meth:`abm.learning.privacy.aggregation.SumAggregator.hold_back`). Before, with ``update_others``
its turn wrote NaN into every copy on the token, and without it the others aligned with its NaN
parameters: every peer's model turned NaN. A peer whose parameters grow huge but stay finite is
not caught on its own turn; a later peer whose turn then diverges is left out in its place.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable

import numpy as np
import torch
import torch.nn.functional as F

from abm.learning.messages import Message, MessageKind
from abm.learning.metrics import collaborative_fairness
from abm.learning.models import flat_params, one_architecture
from abm.learning.participant import Participant
from abm.learning.protocols.base import Protocol, RunContext
from abm.learning.protocols.configs import FairStop
from abm.learning.protocols.sizes import sizes_to_peers
from abm.learning.training import accuracy, minibatch_indices

INFORMATION_ASSUMPTION = (
    "the peers publish their scalar validation accuracies (standalone once, IPA's after each round) "
    "to whoever applies the rule"
)


def standalone_val_accuracy(ctx: RunContext) -> list[float]:
    """phi: each peer's validation accuracy after training a copy of its model, as it is now, alone
    for the run's rounds x ``local_epochs`` passes with its own optimizer settings, batch size and
    seed. Called before round 1 it is local-only's training, so phi is the validation accuracy of
    the local-only baseline of a run with as many rounds. The copies draw their minibatches from
    generators of their own, so the peers' IPA training is as it would be without them. A copy's
    training losses that are not finite count as its peer's
    (:class:`abm.learning.training.LossWatch`): they are reported with round 0's."""
    out = []
    for p in ctx.participants:
        alone = Participant(p.pid, p.data, copy.deepcopy(p.model), p.train_config, p.seed)
        alone.losses = p.losses
        alone.train(ctx.rounds * ctx.local_epochs)
        out.append(accuracy(alone.model, alone.data.val))
    return out


def publish_accuracies(ctx: RunContext, accuracies: list[float], t: int) -> None:
    """Every peer sends its validation accuracy (one float64) to every other peer (round ``t``;
    -1 before round 1), so that every peer can apply the stopping rule itself."""
    for i, acc in enumerate(accuracies):
        value = torch.tensor([acc], dtype=torch.float64)
        for j in range(ctx.n):
            if j != i:
                ctx.network.send(Message(MessageKind.VALIDATION_ACCURACY, i, j, {"accuracy": value}, t))


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

    def setup(self, ctx: RunContext) -> None:
        if not one_architecture(p.model for p in ctx.participants):
            raise ValueError("IPA needs identical architectures for all participants")
        n = ctx.n
        if self.config.pair_weights == "size":  # row i from the sizes peer i received (data_size)
            sizes = sizes_to_peers(ctx)
            self.a = n * sizes / sizes.sum(1, keepdims=True)
        else:
            self.a = np.ones((n, n))
        self.stopped_at: int | None = None
        self.left_out: set[int] = set()  # peers whose training diverged: out of the coupling (_turn)
        self.distances_l1: list[float] = []
        # theta* assembled: every peer's initial parameters to the first peer of the ring
        for j in range(1, n):
            ctx.network.send(
                Message(MessageKind.MODEL_WEIGHTS, j, 0, {"theta": flat_params(ctx.participants[j].model)}, -1)
            )
        # fair_stop: phi, xi(t) and rho(t) per round, the round whose models are kept and a copy of them
        self.phi: list[float] = standalone_val_accuracy(ctx) if self.config.fair_stop is not None else []
        if self.config.fair_stop is not None:
            publish_accuracies(ctx, self.phi, -1)
        self.val_accuracy: list[list[float]] = []
        self.rho: list[float] = []
        self.kept_round: int | None = None
        self._kept: list[dict[str, torch.Tensor]] | None = None

    def coupled(self, n: int) -> list[int]:
        """The peers still in the coupling (in ring order): all but those whose training diverged."""
        return [i for i in range(n) if i not in self.left_out]

    def _turn(self, ctx: RunContext, i: int) -> bool:
        """Peer ``i``'s turn; whether its training diverged (a loss, or a parameter after the turn,
        not finite). A diverged turn stops at its first loss that is not finite and undoes its
        changes to the other peers' copies; peer ``i``'s own copy stays as it is."""
        cfg = self.config
        models = [p.model for p in ctx.participants]
        pi = ctx.participants[i]
        params = [list(m.parameters()) for m in models]
        coupled = self.coupled(ctx.n)
        peers = [j for j in coupled if j != i]
        trainable = [q for j in coupled for q in params[j]] if cfg.update_others else list(params[i])
        others = [q for j in peers for q in params[j]] if cfg.update_others else []
        before = [q.detach().clone() for q in others]
        opt = torch.optim.SGD(trainable, lr=cfg.lr if cfg.lr is not None else pi.train_config.lr)
        data = pi.data.train
        models[i].train()
        diverged = False
        # local training's epochs and minibatches, so that with lam = 0 a peer trains as local-only does
        for _ in range(ctx.local_epochs):
            for idx in minibatch_indices(len(data), pi.train_config.batch_size, pi.generator):
                loss = F.cross_entropy(models[i](data.x[idx]), data.y[idx])
                for j in peers:
                    other = params[j] if cfg.update_others else [q.detach() for q in params[j]]
                    loss = loss + cfg.lam * float(self.a[i, j]) * alignment(params[i], other, cfg.p, cfg.reduction)
                pi.losses.see(loss)
                if not bool(torch.isfinite(loss.detach())):
                    diverged = True
                    break
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            if diverged:
                break
        diverged = diverged or not all(bool(torch.isfinite(q.detach()).all()) for q in [*params[i], *others])
        if diverged:
            with torch.no_grad():
                for q, b in zip(others, before, strict=True):
                    q.copy_(b)
        return diverged

    def _pass_token(self, ctx: RunContext, i: int, t: int) -> None:
        """Peer ``i`` sends the token (the coupled peers' parameter sets) to the next coupled peer
        of the ring, if any is left."""
        coupled = self.coupled(ctx.n)
        after = [j for j in coupled if j > i] + [j for j in coupled if j < i]
        if after:
            token = torch.cat([flat_params(ctx.participants[j].model) for j in coupled])
            ctx.network.send(Message(MessageKind.TOKEN, i, after[0], {"theta": token}, t))

    def run_round(self, ctx: RunContext, t: int) -> None:
        cfg = self.config
        if self.stopped_at is not None:
            return
        n = ctx.n
        for i in self.coupled(n):
            if self._turn(ctx, i):
                self.left_out.add(i)
                ctx.aggregator.hold_back(t, MessageKind.TOKEN, (i,))
            self._pass_token(ctx, i, t)
        coupled = self.coupled(n)
        flats = [flat_params(ctx.participants[i].model) for i in coupled]
        m = len(flats)
        d = [float((flats[i] - flats[j]).abs().mean()) for i in range(m) for j in range(i + 1, m)]
        self.distances_l1.append(float(np.mean(d)) if d else 0.0)
        evaluates = cfg.target_accuracy is not None or cfg.fair_stop is not None
        if evaluates:  # each peer measures its own set on its own validation data
            self._return_own_sets(ctx, t)
        if cfg.stop_round is not None and t + 1 >= cfg.stop_round:
            self.stopped_at = t + 1
        if cfg.target_accuracy is not None:
            accs = [accuracy(p.model, p.data.val) for p in ctx.participants]
            publish_accuracies(ctx, accs, t)
            if min(accs[i] for i in coupled or range(n)) >= cfg.target_accuracy:
                self.stopped_at = t + 1
        if cfg.fair_stop is not None:
            self._fair_stop(ctx, t, cfg.fair_stop)
        if not evaluates and (self.stopped_at is not None or t + 1 == ctx.rounds):
            self._return_own_sets(ctx, t)  # training ends: every peer keeps its own set

    def _return_own_sets(self, ctx: RunContext, t: int) -> None:
        """The last coupled peer of the ring sends every coupled peer but the first (which got the
        token) its own parameter set as it stands after round ``t`` (a peer left out keeps its own).
        Without ``update_others`` only a peer's own turn changes its set, so nothing needs to travel."""
        if not self.config.update_others:
            return
        coupled = self.coupled(ctx.n)
        for j in coupled[1:-1]:  # from the last coupled peer to each but the first and itself
            ctx.network.send(
                Message(MessageKind.MODEL_WEIGHTS, coupled[-1], j, {"theta": flat_params(ctx.participants[j].model)}, t)
            )

    def _fair_stop(self, ctx: RunContext, t: int, rule: FairStop) -> None:
        """Record xi(t) and rho(t); apply ``rule`` (:class:`FairStop`) after round ``t``."""
        xi = [accuracy(p.model, p.data.val) for p in ctx.participants]
        publish_accuracies(ctx, xi, t)
        kept = self.coupled(ctx.n) or range(ctx.n)  # the rule is over the peers still coupled
        rho = collaborative_fairness([self.phi[i] for i in kept], [xi[i] for i in kept])
        self.val_accuracy.append(xi)
        self.rho.append(rho)
        fair = not math.isnan(rho) and rho >= rule.rho_min
        if rule.rule == "first_all_gain":
            if fair and all(xi[i] >= self.phi[i] for i in kept):
                self.stopped_at = self.kept_round = t + 1
            return
        if fair:
            self.kept_round = t + 1
            self._kept = [{k: v.detach().clone() for k, v in p.model.state_dict().items()} for p in ctx.participants]
        if t + 1 == ctx.rounds and self._kept is not None and self.kept_round != t + 1:
            for p, state in zip(ctx.participants, self._kept, strict=True):
                p.model.load_state_dict(state)

    def summary(self, ctx: RunContext) -> dict:
        out: dict = {"stopped_at": self.stopped_at, "mean_abs_param_distance": self.distances_l1}
        rule = self.config.fair_stop
        if rule is not None:
            out["fair_stop"] = {
                "rule": rule.rule,
                "rho_min": rule.rho_min,
                "standalone_val_accuracy": self.phi,
                "val_accuracy": self.val_accuracy,
                "rho": self.rho,
                "kept_round": self.kept_round,
                "information_assumption": INFORMATION_ASSUMPTION,
            }
        return out
