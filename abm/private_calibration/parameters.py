"""Free parameters, their bins, and the joint class over bins that a calibrator predicts.

A calibrator is a classifier over the *joint* grid of bins (bins_1 x bins_2 x ...): one softmax
over every combination, so the protocols of :mod:`abm.learning` (cross-entropy, distillation,
entropy of dreams, class prototypes) apply unchanged. Marginals over each parameter's bins are
sums over the joint probabilities; recovery accuracy is measured per parameter on the marginals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch
    from numpy.typing import ArrayLike

PARAMETER_NAMES = ("transmission", "seeding", "ascertainment")
"""transmission: multiplier of the model scenario's transmission rate; seeding: initial infections
(agents) on the seeding day; ascertainment: share of symptomatic infections reported as
cases."""


def whole_infections(seeding: ArrayLike) -> np.ndarray:
    """Seeding sizes as whole initial infections (int64, the shape of ``seeding``): the nearest
    whole number of agents, a half going to the even neighbour (22.6 -> 23, 22.5 -> 22, 23.5 -> 24,
    0.4 -> 0), never below 0. Every simulation of a seeding size uses it: the training and held-out
    pairs, an institution's observed series in known-truth mode (and so its true bin), and the fit
    at a protocol's estimate."""
    return np.maximum(np.rint(np.asarray(seeding, dtype=float)), 0.0).astype(np.int64)


@dataclass(frozen=True)
class FreeParameter:
    """A free parameter on [low, high] cut into ``bins`` equal bins (in log space if ``log``)."""

    name: str
    low: float
    high: float
    bins: int
    log: bool = False

    def _fwd(self, v: np.ndarray | float) -> np.ndarray:
        v = np.asarray(v, dtype=float)
        return np.log(v) if self.log else v

    def _inv(self, u: np.ndarray) -> np.ndarray:
        return np.exp(u) if self.log else u

    def edges(self) -> np.ndarray:
        """Bin edges (bins + 1 values) in parameter units."""
        return self._inv(np.linspace(self._fwd(self.low), self._fwd(self.high), self.bins + 1))

    def centers(self) -> np.ndarray:
        """Bin centres (midpoints in the transformed space) in parameter units."""
        e = self._fwd(self.edges())
        return self._inv((e[:-1] + e[1:]) / 2)

    def bin_of(self, values: np.ndarray | float) -> np.ndarray:
        """Bin index of each value (values outside [low, high] go to the end bins)."""
        e = self._fwd(self.edges())
        return np.clip(np.searchsorted(e, self._fwd(values), side="right") - 1, 0, self.bins - 1)

    def sample(self, rng: np.random.Generator, n: int, low: float, high: float) -> np.ndarray:
        """``n`` draws uniform on [low, high] (log-uniform if ``log``)."""
        return self._inv(rng.uniform(self._fwd(low), self._fwd(high), size=n))

    def mean_of(self, probs: np.ndarray) -> np.ndarray:
        """Posterior mean over bin centres (in the transformed space) of marginal ``probs`` [n, bins]."""
        return self._inv(probs @ self._fwd(self.centers()))


@dataclass(frozen=True)
class BinGrid:
    """The joint grid of bins; joint class = row-major index over the parameters' bins."""

    params: tuple[FreeParameter, ...]

    @property
    def names(self) -> list[str]:
        """Parameter names in grid order."""
        return [p.name for p in self.params]

    @property
    def shape(self) -> tuple[int, ...]:
        """Bins per parameter."""
        return tuple(p.bins for p in self.params)

    @property
    def n_classes(self) -> int:
        """Number of joint classes."""
        return math.prod(self.shape)

    def classes_of(self, values: np.ndarray) -> np.ndarray:
        """Joint class of each row of ``values`` [n, P] (parameter units)."""
        idx = np.stack([p.bin_of(values[:, i]) for i, p in enumerate(self.params)], axis=1)
        return np.ravel_multi_index(tuple(idx.T), self.shape)

    def bins_of(self, classes: np.ndarray | torch.Tensor) -> np.ndarray:
        """Per-parameter bin indices [n, P] of joint classes."""
        return np.stack(np.unravel_index(np.asarray(classes), self.shape), axis=1)

    def marginals(self, logits: torch.Tensor) -> list[np.ndarray]:
        """Per parameter, the marginal bin probabilities [n, bins] of joint ``logits`` [n, C]."""
        probs = logits.detach().double().softmax(dim=1).numpy().reshape(-1, *self.shape)
        out = []
        for i in range(len(self.params)):
            axes = tuple(a + 1 for a in range(len(self.params)) if a != i)
            out.append(probs.sum(axis=axes))
        return out

    def marginal_accuracy(self, logits: torch.Tensor, classes: torch.Tensor) -> dict[str, float]:
        """Per parameter: share of samples whose marginal arg-max bin is the true bin."""
        truth = self.bins_of(classes.numpy())
        return {
            p.name: float((m.argmax(1) == truth[:, i]).mean())
            for i, (p, m) in enumerate(zip(self.params, self.marginals(logits), strict=True))
        }

    def estimate(self, logits: torch.Tensor) -> list[dict[str, float]]:
        """Point estimates per sample: the marginal posterior mean of each parameter."""
        means = [p.mean_of(m) for p, m in zip(self.params, self.marginals(logits), strict=True)]
        return [{p.name: float(means[i][k]) for i, p in enumerate(self.params)} for k in range(logits.shape[0])]
