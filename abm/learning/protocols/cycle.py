"""CYCle (reputation-weighted, probabilistic private distillation) and its VPDL baseline.

Participant n minimises CE_n + lambda0 * sum_{k != n, k shared} lambda_(n,k) * DL(n,k), where
DL(n,k) = KL(p_n || p_k) at temperature T on n's own inputs, p_k from peer k's (start-of-round)
model: in the real system k answers on encrypted inputs, so only predictions travel.

* VPDL: every peer shares every round, lambda_(n,k) = 1 / (N - 1).
* CYCle: lambda_(n,k) = r_(n,k) / (N - 1) (``normalize``), with the private reputation
  r_(n,k) = EMA_alpha of h(s), s = (1 - cos(grad CE_n, grad DL(n,k))) / 2 over n's parameters,
  h(s) = clip((s - tau_max) / (tau_opt - tau_max), 0, 1). Peer k answers n with probability
  r_(k,n) (its own view of n); every ``period`` rounds everyone shares and reputations are
  recalibrated. The first ``warmup_rounds`` rounds are local CE only.

A peer whose predictions are not finite (its training diverged) answers no one that round and is
not judged in a recalibration (the others' reputation of it stays as it was), so its NaN does not
spread to the peers that would distil it.

Messages: after the warm-up, every round, each participant sends its prediction request (its
training inputs, encrypted in the real system) to every peer, since it cannot know whether the peer
will answer; the peer's predictions come back only when it shares (cycle.md 8). Reputations and
sharing draws stay with their owner.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from abm.learning.messages import Message, MessageKind
from abm.learning.participant import Participant
from abm.learning.protocols.base import Protocol, RunContext
from abm.learning.protocols.configs import CYCleConfig
from abm.learning.training import minibatch_indices, predict


def soft_clip(s: np.ndarray | float, tau_opt: float, tau_max: float) -> np.ndarray:
    """h(s) = clip((s - tau_max) / (tau_opt - tau_max), 0, 1)."""
    return np.clip((np.asarray(s, dtype=float) - tau_max) / (tau_opt - tau_max), 0.0, 1.0)


def distill_kl(student_logits: torch.Tensor, teacher_logits: torch.Tensor, t: float) -> torch.Tensor:
    """KL(p_student || p_teacher) at temperature ``t`` (teacher detached), batch mean."""
    logp = F.log_softmax(student_logits / t, 1)
    logq = F.log_softmax(teacher_logits.detach() / t, 1)
    return (logp.exp() * (logp - logq)).sum(1).mean()


def _flat_grad(loss: torch.Tensor, params: list[torch.Tensor]) -> torch.Tensor:
    grads = torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
    return torch.cat(
        [(g if g is not None else torch.zeros_like(p)).reshape(-1) for g, p in zip(grads, params, strict=True)]
    )


class CYCle(Protocol):
    """CYCle: reputation from gradient alignment, probabilistic reciprocal sharing."""

    name = "cycle"
    adaptive = True

    def setup(self, ctx: RunContext) -> None:
        n = ctx.n
        self.reputation = np.full((n, n), np.nan)
        self.raw_reputation: list[list[list[float]]] = []
        self.share_counts = np.zeros((n, n), dtype=int)  # [sender, receiver]
        self.calibrated = False
        self.warmup = self.config.warmup_rounds if self.config.warmup_rounds is not None else max(1, ctx.rounds // 4)

    def _teacher_logits(self, ctx: RunContext) -> dict[tuple[int, int], torch.Tensor]:
        """Logits of every peer k on every participant n's training inputs (start of round)."""
        out = {}
        for n in ctx.participants:
            for k in ctx.participants:
                if k.pid == n.pid:
                    continue
                out[(n.pid, k.pid)] = predict(k.model, n.data.train.x)
        return out

    def _calibrate(
        self, ctx: RunContext, teacher: dict[tuple[int, int], torch.Tensor], diverged: set[int] | None = None
    ) -> None:
        """Recalibrate the reputations from the gradient alignment with each peer's predictions; a
        ``diverged`` peer's (not finite) are not judged, and n's reputation of it stays as it was."""
        cfg = self.config
        diverged = diverged or set()
        raw = np.full((ctx.n, ctx.n), np.nan)
        for n in ctx.participants:
            m = min(cfg.reputation_samples, n.n_train)
            x, y = n.data.train.x[:m], n.data.train.y[:m]
            params = [q for q in n.model.parameters() if q.requires_grad]
            was = n.model.training
            n.model.eval()
            logits = n.model(x)
            g_ce = _flat_grad(F.cross_entropy(logits, y), params)
            for k in ctx.participants:
                if k.pid == n.pid or k.pid in diverged:
                    continue
                g_dl = _flat_grad(distill_kl(logits, teacher[(n.pid, k.pid)][:m], cfg.temperature), params)
                denom = float(g_ce.norm() * g_dl.norm())
                cos = float(g_ce @ g_dl) / denom if denom > 0 else 0.0
                raw[n.pid, k.pid] = float(soft_clip((1.0 - cos) / 2.0, cfg.tau_opt, cfg.tau_max))
            n.model.train(was)
        if not self.calibrated:
            self.reputation = raw.copy()
            self.calibrated = True
        else:
            ema = cfg.alpha * self.reputation + (1 - cfg.alpha) * raw
            judged = ~np.isnan(raw)
            self.reputation = np.where(judged & np.isnan(self.reputation), raw, np.where(judged, ema, self.reputation))
        self.raw_reputation.append(_json_matrix(raw))

    def _shares(self, ctx: RunContext, forced: bool) -> np.ndarray:
        """share[k, n]: does k send its predictions on n's inputs to n this round."""
        share = ~np.eye(ctx.n, dtype=bool)
        if forced or not self.adaptive:
            return share
        for k in ctx.participants:
            for n in ctx.participants:
                if k.pid != n.pid:
                    share[k.pid, n.pid] = k.rng.random() <= self.reputation[k.pid, n.pid]
        return share

    def _weight(self, n: int, k: int, ctx: RunContext) -> float:
        if not self.adaptive:
            return 1.0 / (ctx.n - 1)
        r = self.reputation[n, k]
        return float(r) / (ctx.n - 1) if self.config.normalize else float(r)

    def run_round(self, ctx: RunContext, t: int) -> None:
        cfg = self.config
        if t < self.warmup:
            for p in ctx.participants:
                p.train(ctx.local_epochs)
            return
        c = t - self.warmup
        forced = c % cfg.period == 0
        teacher = self._teacher_logits(ctx)
        # a peer whose predictions are not finite (its training diverged) answers no one this round
        diverged = {k for (_, k), z in teacher.items() if not bool(torch.isfinite(z).all())}
        if self.adaptive and forced:
            self._calibrate(ctx, teacher, diverged)
        share = self._shares(ctx, forced)
        share[sorted(diverged), :] = False
        self.share_counts += share
        for (n, k), logits in teacher.items():
            # n cannot know k's draw: it asks every peer, and k answers or withholds
            ctx.network.send(Message(MessageKind.PREDICTION_REQUEST, n, k, {"x": ctx.participants[n].data.train.x}, t))
            if share[k, n]:
                ctx.network.send(Message(MessageKind.PREDICTIONS, k, n, {"z": logits}, t))
        for p in ctx.participants:
            peers = [(k, self._weight(p.pid, k, ctx)) for k in range(ctx.n) if k != p.pid and share[k, p.pid]]
            for _ in range(ctx.local_epochs):
                self._epoch(p, peers, teacher, cfg)

    def _epoch(
        self,
        p: Participant,
        peers: list[tuple[int, float]],
        teacher: dict[tuple[int, int], torch.Tensor],
        cfg: CYCleConfig,
    ) -> None:
        data = p.data.train
        p.model.train()
        # the same batches as local-only training (a last batch of one is merged, not dropped), so
        # that with every reputation 0 a participant follows its local-only trajectory exactly
        for idx in minibatch_indices(len(data), p.train_config.batch_size, p.generator):
            logits = p.model(data.x[idx])
            loss = F.cross_entropy(logits, data.y[idx])
            for k, lam in peers:
                if lam > 0:
                    z_k = teacher[(p.pid, k)][idx]
                    loss = loss + cfg.lambda0 * lam * distill_kl(logits, z_k, cfg.temperature)
            p.losses.see(loss)
            p.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            p.optimizer.step()

    def summary(self, ctx: RunContext) -> dict:
        return {
            "reputation": _json_matrix(self.reputation),
            "raw_reputation_history": self.raw_reputation,
            "share_counts": self.share_counts.tolist(),
        }


def _json_matrix(m: np.ndarray) -> list[list[float | None]]:
    """A reputation matrix for the report: null where there is no value (a participant's view of
    itself, and every pair before the first recalibration)."""
    return [[None if np.isnan(v) else float(v) for v in row] for row in m]


class VPDL(CYCle):
    """Vanilla private decentralised learning: everyone distils from everyone, equal weights."""

    name = "vpdl"
    adaptive = False

    def summary(self, ctx: RunContext) -> dict:
        return {"share_counts": self.share_counts.tolist()}
