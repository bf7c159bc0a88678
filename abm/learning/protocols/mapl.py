"""MAPL: model-agnostic peer-to-peer learning with learnable prototypes and a learned graph.

Each participant's model is a feature body (any architecture with a common embedding width d_z)
and a linear head. MAPL adds a projector d_z -> d_p and K learnable class prototypes in R^{d_p}.

Per round: (A) local epochs on two augmented views (Gaussian jitter of ``jitter`` times each
feature's standard deviation in the participant's own training data, then feature masking) with
L = CE + SupCon (Eq. 3) + sample-to-prototype contrastive (Eq. 4) + prototype uniformity (Eq. 5,
divided by K(K-1)); (B) after ``warmup_rounds``: participants exchange classifier heads, compute
s_ij = mean_k cos(Phi_i^k, Phi_j^k), max-normalise (s_ii = 1), and take one step on
L_g(w_i) = mu2 (beta ||w_i|| - log(d_i + eps)) - mu1 sum_j gamma_j s_ij w_ij, projected onto the
simplex (``graph_step``: ``adam_reset`` = one fresh-Adam step, the authors' code, degree held
constant; or ``pgd``; a peer whose similarity is not finite, a head's weights having turned NaN
as training diverged, gets weight 0 in the row, a row with no peer left is self-weight only, and
the summary's ``nonfinite_similarities`` lists each such row by round); (C) prototypes are
replaced by sum_j w_ij xi_j over active neighbours (a neighbour whose prototypes are not finite,
its training diverged, sends none and is left out of the average, which is then over the weight of
those that arrived, as a sum's dropout is; a row left with none keeps its own; recorded as
``privacy.withheld``). Only prototypes (K x d_p) and classifier
heads (K x d_z) travel, with 0-byte ``request`` messages (each round i asks every peer j with
w_ij > 0 for its prototypes: j learns that it was chosen) and, before round 0, every
participant's training-set size to every other (``data_size``, 8 bytes: the confidences
gamma_j = |D_j| / sum |D| of the graph step; not sent when ``use_confidence``, ``learn_graph``
or ``aggregate_prototypes`` is false).

MAPL+ (``aggregate_backbone: true``, mapl.md 3.4, the homogeneous-model variant): in (C) each
participant also replaces its feature body's trainable parameters by sum_j w_ij theta_j with the
same row (BatchNorm running statistics stay local, as the authors' code aggregates only weights and
biases), so the bodies travel too; it needs one architecture for every participant. Heads,
projectors and optimizer states stay local.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from abm.learning.messages import Message, MessageKind
from abm.learning.models import load_trainable_flat, one_architecture, trainable_flat
from abm.learning.protocols.base import Protocol, RunContext
from abm.learning.protocols.configs import MAPLConfig
from abm.learning.protocols.sizes import sizes_to_peers


def project_simplex(v: np.ndarray) -> np.ndarray:
    """Euclidean projection onto the probability simplex (sort-based, Condat 2016) of a finite
    vector. The projection is the same for ``v`` shifted by a constant, so it is computed for
    ``v - max(v)``: the largest entry is then 0 and always in the support, where for a large one
    (a graph step of a huge ``graph_lr``) its sum with -1 rounded back to itself and no entry was."""
    if not np.isfinite(v).all():
        raise ValueError(f"project_simplex needs finite values; got {v.tolist()}")
    v = v - v.max()
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - 1.0
    ind = np.arange(1, len(v) + 1)
    rho = np.nonzero(u - css / ind > 0)[0][-1]
    theta = css[rho] / (rho + 1.0)
    return np.maximum(v - theta, 0.0)


def augment(
    x: torch.Tensor, feature_std: torch.Tensor, jitter: float, mask_fraction: float, gen: torch.Generator
) -> torch.Tensor:
    """One augmented view (mapl.md 5.4): Gaussian jitter with sd ``jitter * feature_std`` per
    feature, then each entry zeroed with probability ``mask_fraction``."""
    noise = torch.randn(x.shape, generator=gen) * (jitter * feature_std)
    keep = (torch.rand(x.shape, generator=gen) >= mask_fraction).to(x.dtype)
    return (x + noise) * keep


def supcon_loss(z: torch.Tensor, y: torch.Tensor, tau: float) -> torch.Tensor:
    """Supervised contrastive loss L_out (Eq. 3), mean over anchors with a positive."""
    z = F.normalize(z, dim=1)
    sim = z @ z.T / tau
    n = z.shape[0]
    eye = torch.eye(n, dtype=torch.bool)
    sim = sim.masked_fill(eye, -1e9)
    logprob = sim - torch.logsumexp(sim, dim=1, keepdim=True)
    pos = (y[:, None] == y[None, :]) & ~eye
    npos = pos.sum(1)
    has = npos > 0
    if not bool(has.any()):
        return z.sum() * 0.0
    per = -(logprob * pos).sum(1)[has] / npos[has]
    return per.mean()


def proto_loss(z: torch.Tensor, y: torch.Tensor, protos: torch.Tensor, tau: float) -> torch.Tensor:
    """Sample-to-prototype contrastive loss (Eq. 4) with cosine logits."""
    logits = F.normalize(z, dim=1) @ F.normalize(protos, dim=1).T / tau
    return F.cross_entropy(logits, y)


def uniformity_loss(protos: torch.Tensor) -> torch.Tensor:
    """Mean pairwise cosine between prototypes (Eq. 5 / (K(K-1)))."""
    p = F.normalize(protos, dim=1)
    c = p @ p.T
    k = p.shape[0]
    return (c.sum() - c.diagonal().sum()) / (k * (k - 1))


def head_similarity(heads: list[np.ndarray]) -> np.ndarray:
    """s_ij = mean over classes of the cosine between head rows (bias excluded)."""
    h = [x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12) for x in heads]
    m = len(h)
    s = np.ones((m, m))
    for i in range(m):
        for j in range(m):
            if i != j:
                s[i, j] = float(np.mean(np.sum(h[i] * h[j], axis=1)))
    return s


def graph_step(
    w: np.ndarray,
    s_row: np.ndarray,
    gamma: np.ndarray,
    i: int,
    cfg: MAPLConfig,
) -> np.ndarray:
    """One graph-learning step for participant i's row, then projection onto the simplex.

    A peer whose similarity to i is not finite (its head or i's has a weight that is NaN or inf:
    training diverged, :func:`unjudged_peers`) is left out of the row: it gets weight 0, and the
    step and the projection run over the other entries as if it were not there. A row left with
    no peer is self-weight only (w_ii = 1)."""
    known = np.isfinite(s_row)
    known[i] = True
    if not known.all():
        kept = np.flatnonzero(known)
        out = np.zeros_like(w)
        out[kept] = graph_step(w[kept], s_row[kept], gamma[kept], int(np.searchsorted(kept, i)), cfg)
        return out
    s = s_row.copy()
    peers = [j for j in range(len(s)) if j != i]
    mx = max(s[peers]) if peers else 1.0
    if mx > 0:
        s = s / mx
    s[i] = 1.0
    gam = gamma if cfg.use_confidence else np.ones_like(gamma) / len(gamma)
    norm = max(np.linalg.norm(w), 1e-12)
    grad = -cfg.mu1 * gam * s + cfg.mu2 * cfg.beta * w / norm
    if cfg.graph_step == "pgd":
        deg = max(1.0 - w[i], 0.0)
        dlog = np.full_like(w, -1.0 / (deg + cfg.eps))
        dlog[i] = 0.0
        grad = grad + cfg.mu2 * dlog
        new = w - cfg.graph_lr * grad
    else:  # one step of a freshly created Adam = lr * sign(grad) (degree held constant)
        new = w - cfg.graph_lr * np.sign(grad)
    return project_simplex(new)


def unjudged_peers(s: np.ndarray) -> list[list[int]]:
    """For each row i of the similarity matrix ``s``, the peers whose similarity to i is not
    finite (NaN or inf), which :func:`graph_step` leaves out of i's row."""
    return [[j for j in range(len(row)) if j != i and not np.isfinite(row[j])] for i, row in enumerate(s)]


class _MAPLHeads(nn.Module):
    """Projector and prototypes owned by one participant."""

    def __init__(self, d_z: int, hidden: int, d_p: int, k: int) -> None:
        super().__init__()
        self.projector = nn.Sequential(nn.Linear(d_z, hidden), nn.ReLU(), nn.Linear(hidden, d_p))
        bound = 1.0 / math.sqrt(d_p)
        self.prototypes = nn.Parameter(torch.empty(k, d_p).uniform_(-bound, bound))


class MAPL(Protocol):
    """MAPL with per-participant learned collaboration rows."""

    name = "mapl"

    def setup(self, ctx: RunContext) -> None:
        cfg = self.config
        dims = {p.model.embed_dim for p in ctx.participants}
        if len(dims) != 1:
            raise ValueError(f"MAPL needs one embedding width for all models; got {sorted(dims)}")
        if cfg.aggregate_backbone and not one_architecture(p.model.body for p in ctx.participants):
            raise ValueError("MAPL+ (aggregate_backbone: true) needs one architecture for all participants")
        d_z = dims.pop()
        self.extra = []
        self.opts = []
        # each participant's own per-feature sd (a local statistic: it scales the jitter, never sent)
        self.feature_std = [p.data.train.x.std(0, correction=0) for p in ctx.participants]
        for p in ctx.participants:
            torch.manual_seed(p.seed + 555)
            h = _MAPLHeads(d_z, cfg.projector_hidden, cfg.proto_dim, ctx.n_classes)
            self.extra.append(h)
            self.opts.append(
                torch.optim.Adam(
                    list(p.model.parameters()) + list(h.parameters()),
                    lr=cfg.lr if cfg.lr is not None else p.train_config.lr,
                )
            )
        n = ctx.n
        self.W = np.full((n, n), 1.0 / n)
        if not cfg.aggregate_prototypes:
            self.W = np.eye(n)
        self.warmup = cfg.warmup_rounds if cfg.warmup_rounds is not None else ctx.rounds // 5
        # gamma: row i the data-size confidences participant i weights its graph step by, from the
        # sizes the others sent it (data_size, before round 0); sent only where graph steps use them
        self.gamma = np.full((n, n), 1.0 / n)
        if cfg.learn_graph and cfg.aggregate_prototypes and cfg.use_confidence:
            sizes = sizes_to_peers(ctx)
            self.gamma = sizes / sizes.sum(1, keepdims=True)
        self.within_mass: list[float] = []
        self.active_edges: list[int] = []
        # the rows whose graph step left peers out, their similarity not finite (graph_step)
        self.nonfinite_similarities: list[dict] = []

    def _augment(self, x: torch.Tensor, k: int, gen: torch.Generator) -> torch.Tensor:
        return augment(x, self.feature_std[k], self.config.jitter, self.config.mask_fraction, gen)

    def _local(self, ctx: RunContext, k: int) -> None:
        cfg = self.config
        p = ctx.participants[k]
        h = self.extra[k]
        opt = self.opts[k]
        data = p.data.train
        bs = p.train_config.batch_size
        p.model.train()
        for _ in range(ctx.local_epochs):
            perm = torch.randperm(len(data), generator=p.generator)
            for s in range(0, len(data), bs):
                idx = perm[s : s + bs]
                if len(idx) < 2:
                    continue
                x, y = data.x[idx], data.y[idx]
                xa = torch.cat([self._augment(x, k, p.generator), self._augment(x, k, p.generator)])
                y2 = torch.cat([y, y])
                z = p.model.features(xa)
                proj = h.projector(z)
                loss = (
                    F.cross_entropy(p.model.head(z), y2)
                    + supcon_loss(proj, y2, cfg.tau)
                    + proto_loss(proj, y2, h.prototypes, cfg.tau)
                    + uniformity_loss(h.prototypes)
                )
                p.losses.see(loss)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()

    @staticmethod
    def _left_out(ctx: RunContext, protos: list[torch.Tensor], bodies: list[torch.Tensor]) -> frozenset[int]:
        """The participants whose prototypes (or, for MAPL+, body) are not finite, their training
        having diverged: each sends none, and every row's average goes on without it, over the
        weight of those that arrived, as the sums do (:meth:`SumAggregator.screen`, recorded as
        ``privacy.withheld``)."""
        shared = {j: torch.cat([protos[j].reshape(-1), *bodies[j : j + 1]]) for j in range(ctx.n)}
        return frozenset(ctx.aggregator.screen(shared))

    def run_round(self, ctx: RunContext, t: int) -> None:
        cfg = self.config
        n = ctx.n
        for k in range(n):
            self._local(ctx, k)
        if cfg.learn_graph and cfg.aggregate_prototypes and t >= self.warmup:
            heads = [p.model.head.weight.detach().numpy().copy() for p in ctx.participants]
            for i in range(n):
                for j in range(n):
                    if i != j:
                        ctx.network.send(
                            Message(
                                MessageKind.CLASSIFIER_HEAD,
                                j,
                                i,
                                {"w": ctx.participants[j].model.head.weight.detach()},
                                t,
                            )
                        )
            s = head_similarity(heads)
            for i, peers in enumerate(unjudged_peers(s)):
                if peers:
                    self.nonfinite_similarities.append({"round": t, "participant": i, "peers": peers})
            new_w = self.W.copy()
            for i in range(n):
                new_w[i] = graph_step(self.W[i], s[i], self.gamma[i], i, cfg)
            self.W = new_w
        protos = [h.prototypes.detach().clone() for h in self.extra]
        bodies = [trainable_flat(p.model.body) for p in ctx.participants] if cfg.aggregate_backbone else []
        left_out = self._left_out(ctx, protos, bodies)
        averaged = False
        for i in range(n):
            agg = torch.zeros_like(protos[i])
            body = torch.zeros_like(bodies[i]) if bodies else None
            for j in range(n):
                if self.W[i, j] > 0:
                    if j != i:  # i asks the peers its row weights; each answers with its prototypes
                        ctx.network.send(Message(MessageKind.REQUEST, i, j, {}, t))
                    if j in left_out:  # it answers nothing
                        continue
                    if j != i:
                        ctx.network.send(Message(MessageKind.PROTOTYPES, j, i, {"xi": protos[j]}, t))
                    agg = agg + float(self.W[i, j]) * protos[j]
                    if body is not None:
                        if j != i:
                            ctx.network.send(Message(MessageKind.MODEL_WEIGHTS, j, i, {"theta": bodies[j]}, t))
                        body = body + float(self.W[i, j]) * bodies[j]
            arrived = sum(float(self.W[i, j]) for j in range(n) if self.W[i, j] > 0 and j not in left_out)
            if arrived == 0:  # nothing arrived: i keeps its own
                continue
            averaged = True
            if any(self.W[i, j] > 0 for j in left_out):  # over the weight of those that arrived
                agg = agg / arrived
                body = body / arrived if body is not None else None
            with torch.no_grad():
                self.extra[i].prototypes.copy_(agg)
            if body is not None:
                load_trainable_flat(ctx.participants[i].model.body, body)
        ctx.aggregator.note_withheld(t, MessageKind.PROTOTYPES, averaged)
        self.active_edges.append(int(((self.W > 0) & ~np.eye(n, dtype=bool)).sum()))
        if ctx.groups is not None:
            self.within_mass.append(within_cluster_mass(self.W, ctx.groups))

    def summary(self, ctx: RunContext) -> dict:
        out = {
            "graph": self.W.tolist(),
            "active_edges": self.active_edges,
            "nonfinite_similarities": self.nonfinite_similarities,
        }
        # with W = I (aggregate_prototypes: false) no row has a peer, and the mass would read 1.0
        if ctx.groups is not None and self.config.aggregate_prototypes:
            out["within_cluster_mass"] = within_cluster_mass(self.W, ctx.groups)
            out["within_cluster_mass_history"] = self.within_mass
        return out


def within_cluster_mass(w: np.ndarray, groups: list[int], include_self: bool = False) -> float:
    """Mean over rows of the weight on same-cluster peers, renormalised over peers (self excluded
    unless ``include_self``)."""
    g = np.asarray(groups)
    out = []
    for i in range(len(g)):
        row = w[i].copy()
        if not include_self:
            row[i] = 0.0
        tot = row.sum()
        if tot <= 0:
            out.append(1.0)
            continue
        same = row[(g == g[i])].sum()
        out.append(same / tot)
    return float(np.mean(out))
