"""CoDream and CoDream-fast: federated optimisation of shared synthetic inputs ("dreams").

Per round (after ``dream_start`` rounds of local training):

1. Knowledge extraction / aggregation. The server draws dreams x ~ N(0, I) of the data's flat
   shape. For ``dream_steps`` steps every client computes the input gradient of its local loss

       l_k(x) = w_entropy * H(f_k(x)) + w_feature * R_feat,k(x) + w_adv * R_adv,k(x)

   through its own frozen model (eval mode): H is the mean prediction entropy, R_feat the
   DeepInversion feature-statistics term sum_l ||mu_l(x) - mu_l^BN|| + ||var_l(x) - var_l^BN||
   over the model's BatchNorm layers (0 for a model without BatchNorm), and R_adv = -JSD(teacher,
   student) with the server's student model (from round ``adv_start``). The gradients are
   weighted (|D_k| / sum |D_j|: before round 0 each client sends the server its size and gets
   their total back, :mod:`abm.learning.protocols.sizes`) and summed through the context's sum
   aggregator (so secure aggregation and DP apply), and the server takes an Adam step on x.
   Architectures may differ: only input-shaped gradients travel.
   CoDream-fast replaces the many server steps by a shared generator G(z): clients take
   ``local_steps`` Adam steps on (G, z), the server averages both, and a Reptile step moves a
   meta-generator toward the average so later batches start from a good initialisation.
2. Knowledge acquisition: the server sends the final x to the clients (``dreams``), which send
   their logits on x, and the weighted sum sum_k w_k z_k of the logits becomes the soft labels.
   With the plain sum each client sends its raw logits (``codream.logits``) and the server weights
   and adds them (it also reads each teacher's logits for the report). When privacy is on the
   clients weight their own logits as they weight their dream gradients (``codream.weighted_logits``
   returns w_k z_k, w_k from ``set_contribution_weight``), and the weighted vectors go through the
   sum aggregator as they are (secure aggregation masks them, DP clips, noises and accounts them):
   the server never holds a client's raw logits. The server sends the soft labels alone
   (``soft_labels``: the clients hold x); (x, soft labels) enter a FIFO buffer shared with every
   client.
3. Distillation: each client trains on KD(buffer) + CE(own data), then ``local_epochs`` of CE;
   the student distils from the buffer too.

The server describes each round's new soft labels for the report (:func:`soft_label_quality`:
flatness, teacher agreement, class coverage) from what it already receives.

Every client computation is a client operation (``codream.*`` below) called through
``ctx.clients``, so the protocol runs in process and over Flower alike; each client keeps its own
copy of the dream buffer and of the server's latest student.

Ablations: ``collaborate: false`` (independent dreams: each client dreams alone on its share of
the batch and labels its own dreams with its own logits, as in the authors' independent-dreams
variant ``feddream_fast_independent``; the labelled dreams are still shared with everyone, so
knowledge travels without any aggregation; ``independent_labels: all`` keeps the earlier variant
in which the pooled independent dreams are labelled by everyone's averaged logits), ``w_adv: 0``
(no adversarial term), ``w_feature: 0`` (no feature statistics).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from abm.learning.clients import ClientEnv, Payload, client_op, contribution_weight
from abm.learning.messages import SERVER, Message, MessageKind
from abm.learning.models import flat_params, load_flat_params
from abm.learning.privacy.aggregation import PlainSum, arrived_weight, finite_or_discarded
from abm.learning.privacy.secure_aggregation import SecureSum
from abm.learning.protocols.base import Protocol, RunContext
from abm.learning.protocols.configs import CoDreamConfig
from abm.learning.protocols.sizes import contribution_weights
from abm.learning.training import LossWatch, kd_loss, minibatches, predict

if TYPE_CHECKING:
    from abm.learning.data import Dataset


class _FrozenBNStats:
    """Context manager: BatchNorm layers keep their running statistics (momentum 0) while dreams pass
    through in training mode, so the statistics keep summarising the client's private data (the
    feature-statistics term compares dreams against them)."""

    def __init__(self, model: nn.Module) -> None:
        self.bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm1d | nn.BatchNorm2d)]
        self.saved: list[float | None] = []

    def __enter__(self) -> _FrozenBNStats:
        self.saved = [m.momentum for m in self.bns]
        for m in self.bns:
            m.momentum = 0.0
        return self

    def __exit__(self, *exc) -> None:
        for m, mom in zip(self.bns, self.saved, strict=True):
            m.momentum = mom


class _BNStats:
    """Forward hooks that collect the BatchNorm feature-statistics loss of one forward pass.

    Statistics are per channel (dimension 1) over every other dimension: [n, C], [n, C, L] and
    [n, C, H, W] inputs alike. A BatchNorm layer without running statistics has nothing to match
    and is skipped."""

    def __init__(self, model: nn.Module) -> None:
        self.loss: torch.Tensor | float = 0.0
        self.handles = [
            m.register_forward_hook(self._hook)
            for m in model.modules()
            if isinstance(m, nn.BatchNorm1d | nn.BatchNorm2d) and m.running_mean is not None
        ]

    def _hook(self, module: nn.Module, inputs: tuple[torch.Tensor, ...], output) -> None:
        x = inputs[0]
        dims = [0, *range(2, x.dim())]
        mean = x.mean(dims)
        var = x.var(dims, unbiased=False)
        self.loss = (
            self.loss
            + torch.linalg.vector_norm(mean - module.running_mean)
            + torch.linalg.vector_norm(var - module.running_var)
        )

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def entropy(logits: torch.Tensor) -> torch.Tensor:
    """Mean prediction entropy."""
    logp = F.log_softmax(logits, dim=1)
    return -(logp.exp() * logp).sum(1).mean()


def jsd(logits_p: torch.Tensor, logits_q: torch.Tensor) -> torch.Tensor:
    """Mean Jensen-Shannon divergence between softmax distributions (in [0, ln 2])."""
    p = F.softmax(logits_p, 1)
    q = F.softmax(logits_q, 1)
    m = (0.5 * (p + q)).clamp_min(1e-12)
    kl_pm = (p * (p.clamp_min(1e-12).log() - m.log())).sum(1)
    kl_qm = (q * (q.clamp_min(1e-12).log() - m.log())).sum(1)
    return (0.5 * (kl_pm + kl_qm)).mean()


def dream_loss(
    model: nn.Module,
    x: torch.Tensor,
    cfg: CoDreamConfig,
    student: nn.Module | None,
) -> torch.Tensor:
    """A client's knowledge-extraction loss on dreams ``x`` (model frozen, eval mode)."""
    hooks = _BNStats(model) if cfg.w_feature > 0 else None
    try:
        logits = model(x)
    finally:
        if hooks is not None:
            hooks.remove()
    loss = cfg.w_entropy * entropy(logits)
    if hooks is not None:
        loss = loss + cfg.w_feature * hooks.loss
    if student is not None and cfg.w_adv > 0:
        loss = loss - cfg.w_adv * jsd(logits, student(x))
    return loss


def input_gradient(model: nn.Module, x: torch.Tensor, cfg: CoDreamConfig, student: nn.Module | None) -> torch.Tensor:
    """Gradient of :func:`dream_loss` with respect to the dreams."""
    was = model.training
    model.eval()
    xv = x.detach().clone().requires_grad_(True)
    try:
        with frozen(model):
            (g,) = torch.autograd.grad(dream_loss(model, xv, cfg, student), xv)
    finally:
        model.train(was)
    return g


@contextmanager
def frozen(model: nn.Module) -> Iterator[None]:
    """The model's parameters without gradients inside, each as it was after (a parameter frozen
    on purpose stays frozen)."""
    flags = [q.requires_grad for q in model.parameters()]
    for q in model.parameters():
        q.requires_grad_(False)
    try:
        yield
    finally:
        for q, flag in zip(model.parameters(), flags, strict=True):
            q.requires_grad_(flag)


class Generator(nn.Module):
    """CoDream-fast's dream generator: z -> x."""

    def __init__(self, noise_dim: int, hidden: int, out_dim: int) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(noise_dim, hidden),
            nn.BatchNorm1d(hidden),
            nn.ReLU(),
            nn.Linear(hidden, out_dim),
        )

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(z)


def distill(
    model: nn.Module,
    opt: torch.optim.Optimizer,
    buffer: list[tuple[torch.Tensor, torch.Tensor]],
    cfg: CoDreamConfig,
    gen: torch.Generator,
    train_data: Dataset | None = None,
    freeze_bn: bool | None = None,
    watch: LossWatch | None = None,
) -> None:
    """``kd_epochs`` passes of KD on the dream buffer, each batch joined by a CE batch of ``train_data``;
    ``watch`` (a client's) counts the losses that are not finite.

    ``freeze_bn`` (default ``cfg.freeze_bn_on_dreams``) keeps the model's BatchNorm running statistics
    out of reach of the dreams; a client's statistics must keep summarising its private data. The
    server's student has no private data: its statistics must follow the dreams, or the student
    evaluated in eval mode (the adversarial term) would normalise with its initial statistics.
    """
    freeze = cfg.freeze_bn_on_dreams if freeze_bn is None else freeze_bn
    xs = torch.cat([b[0] for b in buffer])
    ys = torch.cat([b[1] for b in buffer])
    model.train()
    for _ in range(cfg.kd_epochs):
        perm = torch.randperm(len(xs), generator=gen)
        bs = 64
        local = minibatches(train_data, bs, gen) if train_data is not None else None
        for s in range(0, len(xs) - 1, bs):
            idx = perm[s : s + bs]
            if len(idx) < 2:
                continue
            if freeze:
                with _FrozenBNStats(model):
                    out = model(xs[idx])
            else:
                out = model(xs[idx])
            loss = cfg.kd_weight * kd_loss(out, ys[idx], cfg.kd_temperature)
            if local is not None:
                try:
                    xb, yb = next(local)
                except StopIteration:
                    local = minibatches(train_data, bs, gen)
                    xb, yb = next(local)
                loss = loss + F.cross_entropy(model(xb), yb)
            if watch is not None:
                watch.see(loss)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()


def soft_label_quality(
    labels: torch.Tensor, temperature: float, teacher_logits: Sequence[torch.Tensor] | None = None
) -> dict[str, Any]:
    """How informative soft labels (averaged logits, one row a dream) are, for the report.

    ``top_prob`` / ``entropy`` are the mean top probability and mean entropy (nats) of
    softmax(labels) over the dreams, ``top_prob_kd`` / ``entropy_kd`` the same at ``temperature``
    (what distillation uses): 1 / C and ln C mean flat labels that teach nothing.
    ``teacher_agreement`` is the share of dreams on which every teacher's argmax is the same class,
    ``label_support`` the mean share of teachers whose argmax is the label's argmax class (both
    None without ``teacher_logits``; while no class is known to every teacher, as on class-group
    splits before the teachers learn their missing classes from dreams, the agreement is 0 and
    the support says more). Class coverage counts the dreams per class of the
    labels' argmax (ties go to the lowest class): ``dreams_per_class``, the smallest share of any
    class (``min_class_share``) and the number of classes with no dream. Computed in float64 on
    detached copies: nothing that trains is touched.
    """
    with torch.no_grad():
        y = labels.detach().to(torch.float64)
        n, c = y.shape
        out: dict[str, Any] = {"dreams": int(n)}
        for suffix, temp in (("", 1.0), ("_kd", float(temperature))):
            logp = F.log_softmax(y / temp, dim=1)
            p = logp.exp()
            out[f"top_prob{suffix}"] = float(p.max(1).values.mean())
            out[f"entropy{suffix}"] = float(-(p * logp).sum(1).mean())
        label = y.argmax(1)
        agreement = support = None
        if teacher_logits:
            votes = torch.stack([z.detach().argmax(1) for z in teacher_logits])
            agreement = float((votes == votes[0]).all(0).double().mean())
            support = float((votes == label).double().mean())
        out["teacher_agreement"] = agreement
        out["label_support"] = support
        counts = torch.bincount(label, minlength=c)
        out["dreams_per_class"] = [int(v) for v in counts]
        out["min_class_share"] = float(counts.min()) / n
        out["classes_without_dreams"] = int((counts == 0).sum())
    return out


# ---- client operations -----------------------------------------------------------------------
def _cfg(config: dict[str, Any]) -> CoDreamConfig:
    return CoDreamConfig.model_validate(config["cfg"])


def _client_student(env: ClientEnv, config: dict[str, Any]) -> nn.Module | None:
    if not config.get("student", False):
        return None
    student = env.store["student"]
    student.eval()
    return student


@client_op("codream.student")
def _receive_student(env: ClientEnv, payload: Payload, config: dict[str, Any]) -> Payload:
    if "student" not in env.store:
        env.store["student"] = env.model_template(int(config["template"]))
    load_flat_params(env.store["student"], payload["s"])
    return {}


@client_op("codream.grad")
def _grad(env: ClientEnv, payload: Payload, config: dict[str, Any]) -> Payload:
    cfg = _cfg(config)
    g = input_gradient(env.participant.model, payload["x"], cfg, _client_student(env, config))
    return {"g": g.reshape(-1) * contribution_weight(env)}


@client_op("codream.dream_alone")
def _dream_alone(env: ClientEnv, payload: Payload, config: dict[str, Any]) -> Payload:
    cfg = _cfg(config)
    student = _client_student(env, config)
    x = payload["x"].clone().requires_grad_(True)
    opt = torch.optim.Adam([x], lr=cfg.dream_lr)
    for _s in range(cfg.dream_steps):
        opt.zero_grad()
        x.grad = input_gradient(env.participant.model, x, cfg, student)
        opt.step()
    x = x.detach()
    return {"x": x, "z": predict(env.participant.model, x)}


@client_op("codream.logits")
def _logits(env: ClientEnv, payload: Payload, config: dict[str, Any]) -> Payload:
    """The client's raw logits on the dreams (the plain sum: the server reads and weights them)."""
    return {"z": predict(env.participant.model, payload["x"])}


@client_op("codream.weighted_logits")
def _weighted_logits(env: ClientEnv, payload: Payload, config: dict[str, Any]) -> Payload:
    """The client's logits on the dreams times its own contribution weight, flattened: its share of
    the private sum of soft labels (the server never holds, let alone multiplies, raw logits)."""
    return {"z": predict(env.participant.model, payload["x"]).reshape(-1) * contribution_weight(env)}


@client_op("codream.update")
def _update(env: ClientEnv, payload: Payload, config: dict[str, Any]) -> Payload:
    """New (dreams, soft labels) enter the client's buffer; distil on it; then local CE epochs."""
    cfg = _cfg(config)
    p = env.participant
    n_new = int(config.get("new_batches", 0))
    if n_new:
        buffer = env.store.setdefault("buffer", [])
        buffer.extend((payload[f"x{i}"], payload[f"y{i}"]) for i in range(n_new))
        env.store["buffer"] = buffer[-cfg.buffer_batches :]
    if config.get("distill", False):
        distill(p.model, p.optimizer, env.store["buffer"], cfg, p.generator, p.data.train, watch=p.losses)
    p.train(int(config["epochs"]))
    return {}


@client_op("codream_fast.step")
def _fast_step(env: ClientEnv, payload: Payload, config: dict[str, Any]) -> Payload:
    cfg = _cfg(config)
    p = env.participant
    student = _client_student(env, config)
    dim = int(config["dim"])
    with torch.random.fork_rng(devices=[]):
        gk = Generator(cfg.noise_dim, cfg.generator_hidden, dim)
    load_flat_params(gk, payload["g"])
    zk = payload["z"].clone().requires_grad_(True)
    opt = torch.optim.Adam(
        [
            {"params": gk.parameters(), "lr": cfg.generator_lr},
            {"params": [zk], "lr": cfg.noise_lr},
        ],
        betas=(0.5, 0.999),
    )
    p.model.eval()
    gk.train()
    try:
        with frozen(p.model):
            for _s in range(cfg.local_steps):
                opt.zero_grad()
                dream_loss(p.model, gk(zk), cfg, student).backward()
                opt.step()
    finally:
        p.model.train()
    w = contribution_weight(env)
    return {"g": flat_params(gk) * w, "z": zk.detach().reshape(-1) * w}


class CoDream(Protocol):
    """CoDream with server-side Adam on the aggregated input gradients (DistAdam)."""

    name = "codream"

    def setup(self, ctx: RunContext) -> None:
        torch.manual_seed(ctx.seed + 7919)
        self.dim = math.prod(ctx.input_shape)
        self.student = ctx.clients.model_template(ctx.ids[0])
        for m in self.student.modules():
            if hasattr(m, "reset_parameters"):
                m.reset_parameters()
        self.student_opt = torch.optim.Adam(self.student.parameters(), lr=0.01)
        self.gen = torch.Generator().manual_seed(ctx.seed + 104729)
        self.buffer: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._own_labels: torch.Tensor | None = None
        self._cfg_json = self.config.model_dump(mode="json")
        # Soft-label quality (report only): this round's labels with each teacher's logits where the
        # server receives them one by one, and a row per dreaming round.
        self._round_labels: list[tuple[torch.Tensor, list[torch.Tensor] | None]] = []
        self.label_quality: list[dict[str, Any]] = []
        self._agreement_note: str | None = None
        # the sums' weights (sizes as messages: protocols.sizes); independent dreams labelled by
        # their dreamers are never summed, so no sizes travel for them
        sums = self.config.collaborate or self.config.independent_labels == "all"
        self.contribution_weights = contribution_weights(ctx, self.config.weighting) if sums else []

    def _student_for(self, t: int) -> nn.Module | None:
        if self.config.w_adv <= 0 or t < self.config.adv_start:
            return None
        self.student.eval()
        return self.student

    def _op_config(self, student: nn.Module | None, **extra: Any) -> dict[str, Any]:
        return {"cfg": self._cfg_json, "student": student is not None, **extra}

    @staticmethod
    def _to_clients(ctx: RunContext, kind: MessageKind, payload: dict[str, torch.Tensor], t: int) -> None:
        """The server sends ``payload`` to every client (round ``t``). A round's final dreams go as
        ``dreams`` when the clients get them (for their logits, or with the labels of independent
        dreams), and the soft labels on them after, as ``soft_labels`` alone."""
        for pid in ctx.ids:
            ctx.network.send(Message(kind, SERVER, pid, payload, t))

    def _sum(self, ctx: RunContext, parts: dict[int, torch.Tensor], t: int, kind: MessageKind) -> torch.Tensor | None:
        """The clients' weighted ``parts`` summed through the aggregator. A client that held back a
        part the sum cannot carry (not finite: training diverged) is left out as a dropout is, and the
        sum is over the weight of those whose part arrived; ``None`` when no sum was released."""
        total = ctx.aggregator.aggregate(parts, t, ctx.network, kind)
        left_out = ctx.aggregator.withheld()
        if total is None or not left_out:
            return total
        return total / arrived_weight(self.contribution_weights, ctx.ids, left_out)

    def _ship_student(self, ctx: RunContext, t: int) -> nn.Module | None:
        """The server ships its student to the clients when the adversarial term is on."""
        student = self._student_for(t)
        if student is not None:
            s = flat_params(student)
            self._to_clients(ctx, MessageKind.MODEL_WEIGHTS, {"s": s}, t)
            ctx.clients.broadcast("codream.student", {"s": s}, {"template": ctx.ids[0]})
        return student

    # ---- stage 1: dreaming -------------------------------------------------------------------
    def _dream(self, ctx: RunContext, t: int, student: nn.Module | None) -> torch.Tensor:
        cfg = self.config
        if not cfg.collaborate:
            return self._dream_independently(ctx, t, student)
        ids = ctx.ids
        x = torch.randn(cfg.n_dreams, self.dim, generator=self.gen)
        x.requires_grad_(True)
        opt = torch.optim.Adam([x], lr=cfg.dream_lr)
        for _s in range(cfg.dream_steps):
            xd = x.detach()
            for pid in ids:
                ctx.network.send(Message(MessageKind.DREAMS, SERVER, pid, {"x": xd}, t))
            replies = ctx.clients.call("codream.grad", {pid: {"x": xd} for pid in ids}, self._op_config(student))
            grads = {pid: replies[pid]["g"] for pid in ids}
            total = self._sum(ctx, grads, t, MessageKind.INPUT_GRADIENTS)
            if total is None:  # no sum released: this step leaves the dreams as they are
                continue
            opt.zero_grad()
            x.grad = total.reshape(x.shape)
            opt.step()
        return x.detach()

    def _dream_independently(self, ctx: RunContext, t: int, student: nn.Module | None) -> torch.Tensor:
        """Each client dreams alone on its share of the batch; the dreams are pooled. With
        ``independent_labels: dreamer`` each client's logits on its own dreams become their soft
        labels (kept in ``self._own_labels`` for :meth:`_soft_labels`)."""
        cfg = self.config
        share = max(2, cfg.n_dreams // ctx.n)
        starts = {pid: torch.randn(share, self.dim, generator=self.gen) for pid in ctx.ids}
        for pid, x0 in starts.items():  # the server draws each client's starting points
            ctx.network.send(Message(MessageKind.DREAMS, SERVER, pid, {"x": x0}, t))
        replies = ctx.clients.call(
            "codream.dream_alone", {pid: {"x": x0} for pid, x0 in starts.items()}, self._op_config(student)
        )
        parts, labels = [], []
        for pid in ctx.ids:
            ctx.network.send(Message(MessageKind.DREAMS, pid, SERVER, {"x": replies[pid]["x"]}, t))
            parts.append(replies[pid]["x"])
            if cfg.independent_labels == "dreamer":
                ctx.network.send(Message(MessageKind.LOGITS, pid, SERVER, {"z": replies[pid]["z"]}, t))
                labels.append(replies[pid]["z"])
        self._own_labels = torch.cat(labels) if labels else None
        return torch.cat(parts)

    # ---- stage 2: acquisition ----------------------------------------------------------------
    def _soft_labels(self, ctx: RunContext, x: torch.Tensor, t: int) -> torch.Tensor | None:
        """The soft labels of dreams ``x``; ``None`` when their private sum was not released (too
        few clients' logits could be carried): then the dreams go unlabelled and unused."""
        own = self._own_labels
        if own is not None:  # independent dreams labelled by their dreamers: no aggregation
            self._own_labels = None
            self._to_clients(ctx, MessageKind.DREAMS, {"x": x}, t)
            self._to_clients(ctx, MessageKind.SOFT_LABELS, {"y": own}, t)
            self._round_labels.append((own, None))
            self._agreement_note = "each dream is labelled by its dreamer alone: there is one teacher a dream"
            return own
        self._to_clients(ctx, MessageKind.DREAMS, {"x": x}, t)  # the clients' logits are on the final dreams
        if not isinstance(ctx.aggregator, PlainSum):
            # The soft labels are a weighted sum of private logits: each client weights its own
            # (as its dream gradients), so with secure aggregation the server sees only masked
            # vectors and their sum, and with DP each release is clipped, noised and counted by the
            # accountant, like the dream gradients.
            replies = ctx.clients.broadcast("codream.weighted_logits", {"x": x})
            parts = {pid: replies[pid]["z"] for pid in ctx.ids}
            summed = self._sum(ctx, parts, t, MessageKind.LOGITS)
            inner = getattr(ctx.aggregator, "inner", ctx.aggregator)  # DP wraps the sum it noises
            how = [what for what, on in (("secure aggregation", isinstance(inner, SecureSum)),
                                         ("DP: each clipped and noised", ctx.aggregator.adds_noise)) if on]  # fmt: skip
            self._agreement_note = f"the server takes only the sum of the teachers' logits ({', '.join(how)})"
            if summed is None:
                return None
            total = summed.reshape(len(x), -1)
            self._to_clients(ctx, MessageKind.SOFT_LABELS, {"y": total}, t)
            self._round_labels.append((total, None))
            return total
        w = self.contribution_weights
        replies = ctx.clients.broadcast("codream.logits", {"x": x})
        logits = {pid: replies[pid]["z"] for pid in ctx.ids}
        # a client whose logits are not finite (its model diverged) sends none, as a dropout
        left_out = frozenset(ctx.aggregator.screen(logits))
        total = None
        for k, pid in enumerate(ctx.ids):
            if pid in left_out:
                continue
            ctx.network.send(Message(MessageKind.LOGITS, pid, SERVER, {"z": logits[pid]}, t))
            total = logits[pid] * w[k] if total is None else total + logits[pid] * w[k]
        ctx.aggregator.note_withheld(t, MessageKind.LOGITS, total is not None)
        if total is None:
            return None
        if left_out:
            total = total / arrived_weight(w, ctx.ids, left_out)
        self._to_clients(ctx, MessageKind.SOFT_LABELS, {"y": total}, t)
        self._round_labels.append((total, None if left_out else [logits[pid] for pid in ctx.ids]))
        return total

    def _record_label_quality(self, t: int) -> None:
        """One row of :func:`soft_label_quality` on all of round ``t``'s new soft labels (none
        when no soft labels were released)."""
        if not self._round_labels:
            return
        labels = torch.cat([y for y, _ in self._round_labels])
        teachers = None
        if all(zs is not None for _, zs in self._round_labels):
            per_batch = [zs for _, zs in self._round_labels if zs is not None]
            teachers = [torch.cat(zk) for zk in zip(*per_batch, strict=True)]
        self._round_labels = []
        self.label_quality.append({"round": t, **soft_label_quality(labels, self.config.kd_temperature, teachers)})

    # ---- stage 3: distillation ----------------------------------------------------------------
    def _new_dreams(self, ctx: RunContext, t: int, student: nn.Module | None) -> list[torch.Tensor]:
        return [self._dream(ctx, t, student)]

    def run_round(self, ctx: RunContext, t: int) -> None:
        cfg = self.config
        new: dict[str, torch.Tensor] = {}
        dreaming = t >= cfg.dream_start
        if dreaming:
            student = self._ship_student(ctx, t)
            for x in self._new_dreams(ctx, t, student):
                y = self._soft_labels(ctx, x, t)
                if y is None:  # not labelled: the dreams are left out
                    continue
                i = len(new) // 2
                new[f"x{i}"], new[f"y{i}"] = x, y
                self.buffer.append((x, y))
                self.buffer = self.buffer[-cfg.buffer_batches :]
            self._record_label_quality(t)
        # Clients add the new (dreams, soft labels) to their buffers, distil, then train locally;
        # the server's student distils from its own copy of the buffer (once it holds any).
        distilling = dreaming and bool(self.buffer)
        ctx.clients.broadcast(
            "codream.update",
            new,
            {"cfg": self._cfg_json, "new_batches": len(new) // 2, "distill": distilling, "epochs": ctx.local_epochs},
        )
        if distilling:
            distill(self.student, self.student_opt, self.buffer, cfg, self.gen, freeze_bn=False)

    def summary(self, ctx: RunContext) -> dict:
        """The dream buffer's size, and the soft labels' quality: a row per dreaming round (without
        the per-class counts) and the final round's in full (docs/learning.md, "Reading CoDream's
        soft-label diagnostics")."""
        quality: dict[str, Any] = {
            "classes": ctx.n_classes,
            "max_entropy": math.log(ctx.n_classes),
            "kd_temperature": self.config.kd_temperature,
            "rounds": [{k: v for k, v in row.items() if k != "dreams_per_class"} for row in self.label_quality],
            "final": self.label_quality[-1] if self.label_quality else None,
        }
        if self._agreement_note is not None:
            quality["teacher_columns_null"] = self._agreement_note
        return {
            "dream_batches": len(self.buffer),
            "buffer_size": sum(len(b[0]) for b in self.buffer),
            "soft_labels": quality,
        }


class CoDreamFast(CoDream):
    """CoDream-fast: one aggregation round of ``local_steps`` client steps on a shared generator."""

    name = "codream_fast"

    def setup(self, ctx: RunContext) -> None:
        super().setup(ctx)
        cfg = self.config
        torch.manual_seed(ctx.seed + 31337)
        self.meta = Generator(cfg.noise_dim, cfg.generator_hidden, self.dim)

    def _new_dreams(self, ctx: RunContext, t: int, student: nn.Module | None) -> list[torch.Tensor]:
        batches = [self._fast_batch(ctx, t, student) for _ in range(self.config.fast_batches)]
        return [b for b in batches if b is not None]

    def _fast_batch(self, ctx: RunContext, t: int, student: nn.Module | None) -> torch.Tensor | None:
        """One batch of dreams from the averaged generator and latents; the Reptile step needs the
        generator's sum, the batch both sums (``None`` when either was not released)."""
        cfg = self.config
        ids = ctx.ids
        z0 = torch.randn(cfg.n_dreams, cfg.noise_dim, generator=self.gen)
        g0 = flat_params(self.meta)
        for pid in ids:
            ctx.network.send(Message(MessageKind.GENERATOR, SERVER, pid, {"g": g0, "z": z0}, t))
        replies = ctx.clients.call(
            "codream_fast.step",
            {pid: {"g": g0, "z": z0} for pid in ids},
            self._op_config(student, dim=self.dim),
        )
        gen_sum = {pid: replies[pid]["g"] for pid in ids}
        z_sum = {pid: replies[pid]["z"] for pid in ids}
        g_avg = self._sum(ctx, gen_sum, t, MessageKind.GENERATOR)
        z_avg = self._sum(ctx, z_sum, t, MessageKind.DREAMS)
        if g_avg is None:
            return None
        g_avg_model = copy.deepcopy(self.meta)
        load_flat_params(g_avg_model, g_avg)
        meta = finite_or_discarded(ctx.aggregator, g0 + cfg.meta_lr * (g_avg - g0), t, MessageKind.GENERATOR)
        if meta is not None:  # Reptile step; discarded (the generator stays as it was) where not finite
            load_flat_params(self.meta, meta)
        if z_avg is None:
            return None
        # Batch statistics, as the clients evaluated G(z) while optimising it (and the authors'
        # server generates): the running statistics have barely left their initial values.
        g_avg_model.train()
        with torch.no_grad():
            return g_avg_model(z_avg.reshape(cfg.n_dreams, cfg.noise_dim))
