"""Calibrator architectures: an MLP, a 1-D CNN over weeks and a GRU over weeks.

Every calibrator is an :class:`abm.learning.models.Classifier` (``head(body(x))``) on the flat
input [n, C * W] (C observed channels, W weeks, channel-major), so CoDream's dreams and input
gradients have the same flat shape whatever the architecture, and MAPL sees a common embedding
width ``embed_dim``.
"""

from __future__ import annotations

import torch
from torch import nn

from abm.learning.models import Classifier, mlp_body


class _Series(nn.Module):
    """Flat [n, C * W] -> [n, C, W]."""

    def __init__(self, channels: int, weeks: int) -> None:
        super().__init__()
        self.channels, self.weeks = channels, weeks

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(x.shape[0], self.channels, self.weeks)


class _SeriesBatchNorm(nn.Module):
    """BatchNorm over channels of [n, C, W] series, held as a BatchNorm2d on [n, C, 1, W] so that
    code reading BatchNorm statistics (CoDream's feature-statistics term) sees the usual 4-D case."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.bn = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(x.unsqueeze(2)).squeeze(2)


def cnn1d_body(channels: int, weeks: int, widths: list[int], embed_dim: int, batchnorm: bool) -> nn.Sequential:
    """1-D convolutions (kernel 3, + BatchNorm over channels) + ReLU over weeks, then a linear to ``embed_dim``."""
    layers: list[nn.Module] = [_Series(channels, weeks)]
    prev = channels
    for w in widths:
        layers.append(nn.Conv1d(prev, w, 3, padding=1))
        if batchnorm:
            layers.append(_SeriesBatchNorm(w))
        layers.append(nn.ReLU())
        prev = w
    layers += [nn.Flatten(), nn.Linear(prev * weeks, embed_dim), nn.ReLU()]
    return nn.Sequential(*layers)


class GRUBody(nn.Module):
    """A GRU over the weeks (C features per step); its last hidden state through a linear + ReLU."""

    def __init__(self, channels: int, weeks: int, hidden: int, embed_dim: int) -> None:
        super().__init__()
        self.series = _Series(channels, weeks)
        self.gru = nn.GRU(channels, hidden, batch_first=True)
        self.out = nn.Sequential(nn.Linear(hidden, embed_dim), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seq = self.series(x).transpose(1, 2)  # [n, W, C]
        _, h = self.gru(seq)
        return self.out(h[-1])


def build_calibrator(
    kind: str,
    channels: int,
    weeks: int,
    n_classes: int,
    hidden: list[int] | None = None,
    conv: list[int] | None = None,
    embed_dim: int = 32,
    batchnorm: bool = True,
) -> Classifier:
    """A calibrator ``mlp`` (``hidden`` widths, then ``embed_dim``), ``cnn`` (``conv`` channels)
    or ``gru`` (``hidden[0]`` units), each ending in an ``embed_dim`` representation."""
    if kind == "mlp":
        widths = [*(hidden or [64]), embed_dim]
        return Classifier(mlp_body(channels * weeks, widths, batchnorm), embed_dim, n_classes)
    if kind == "cnn":
        return Classifier(
            cnn1d_body(channels, weeks, list(conv or [16, 32]), embed_dim, batchnorm), embed_dim, n_classes
        )
    if kind == "gru":
        return Classifier(GRUBody(channels, weeks, (hidden or [64])[0], embed_dim), embed_dim, n_classes)
    raise ValueError(f"unknown calibrator kind {kind!r}; allowed: mlp, cnn, gru")
