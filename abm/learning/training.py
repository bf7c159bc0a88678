"""Local training primitives: optimizers, minibatch epochs, distillation loss, evaluation."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from abm.learning.data import Dataset

ExtraLoss = Callable[[nn.Module, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
"""(model, x batch, y batch, logits) -> extra loss term added to cross-entropy."""


@dataclass(frozen=True)
class TrainConfig:
    """Local optimizer settings."""

    optimizer: str = "adam"
    lr: float = 0.01
    momentum: float = 0.9
    weight_decay: float = 0.0
    batch_size: int = 32


@dataclass
class LossWatch:
    """One participant's training losses that were not finite (NaN or inf: its training diverged,
    say at too high a learning rate), counted as its training loops see them, until taken (the
    runner takes them after every round, with the scores: :func:`abm.learning.runner.execute_protocol`)."""

    nonfinite: int = 0

    def see(self, loss: torch.Tensor) -> None:
        """Count ``loss`` (a minibatch's) if it is not finite."""
        if not bool(torch.isfinite(loss.detach()).all()):
            self.nonfinite += 1

    def take(self) -> int:
        """The non-finite losses seen since the last call."""
        count, self.nonfinite = self.nonfinite, 0
        return count


def make_optimizer(params: Iterable[torch.nn.Parameter], cfg: TrainConfig) -> torch.optim.Optimizer:
    """SGD (with momentum) or Adam over ``params``."""
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    if cfg.optimizer == "adam":
        return torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    raise ValueError(f"unknown optimizer {cfg.optimizer!r}; allowed: sgd, adam")


def minibatch_indices(n: int, batch_size: int, generator: torch.Generator) -> Iterator[torch.Tensor]:
    """Sample indices of shuffled minibatches over ``n`` samples; a final batch of one sample is
    merged into the previous one (BatchNorm needs two)."""
    perm = torch.randperm(n, generator=generator)
    starts = list(range(0, n, batch_size))
    if len(starts) > 1 and n - starts[-1] < 2:
        starts.pop()
    for i, s in enumerate(starts):
        e = starts[i + 1] if i + 1 < len(starts) else n
        yield perm[s:e]


def minibatches(
    data: Dataset, batch_size: int, generator: torch.Generator
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Shuffled minibatches; a final batch of one sample is merged (BatchNorm needs two)."""
    for idx in minibatch_indices(len(data), batch_size, generator):
        yield data.x[idx], data.y[idx]


def train_epochs(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    data: Dataset,
    epochs: int,
    batch_size: int,
    generator: torch.Generator,
    extra_loss: ExtraLoss | None = None,
    watch: LossWatch | None = None,
) -> float:
    """Cross-entropy training (plus ``extra_loss``) for ``epochs`` passes; returns the last loss.
    ``watch`` counts the minibatch losses that are not finite."""
    model.train()
    last = 0.0
    for _ in range(epochs):
        for xb, yb in minibatches(data, batch_size, generator):
            logits = model(xb)
            loss = F.cross_entropy(logits, yb)
            if extra_loss is not None:
                loss = loss + extra_loss(model, xb, yb, logits)
            if watch is not None:
                watch.see(loss)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            last = float(loss.detach())
    return last


def kd_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """KL(softmax(teacher/T) || softmax(student/T)) * T^2, batch mean."""
    t = temperature
    return (
        F.kl_div(
            F.log_softmax(student_logits / t, dim=1),
            F.log_softmax(teacher_logits / t, dim=1),
            log_target=True,
            reduction="batchmean",
        )
        * t
        * t
    )


@torch.no_grad()
def predict(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Logits in eval mode."""
    was = model.training
    model.eval()
    out = model(x)
    model.train(was)
    return out


def accuracy(model: nn.Module, data: Dataset) -> float:
    """Fraction of correct argmax predictions."""
    if len(data) == 0:
        return float("nan")
    return float((predict(model, data.x).argmax(1) == data.y).float().mean())
