"""Differential privacy for summed updates: L2 clipping, Gaussian noise, and an accountant.

Each participant clips its vector to L2 norm ``clip`` and adds N(0, (sigma * clip)^2 / n) noise,
so the sum of n contributions carries N(0, (sigma * clip)^2) noise in total; this works under
secure aggregation because no one sees an individual vector. The guarantee is participant-level
(add/remove one participant's contribution changes the sum by at most ``clip``).

The accountant composes the Gaussian mechanism over releases in two standard ways:

* ``rdp``: Renyi DP, RDP(alpha) = T * alpha / (2 sigma^2), converted to (epsilon, delta) with the
  conversion of Balle et al. 2020 (as in Opacus / TF Privacy) over a grid of orders.
* ``gdp``: exact. T Gaussian releases with noise multiplier sigma are mu-GDP with
  mu = sqrt(T) / sigma, and delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)
  (Dong, Roth, Su 2019; Balle & Wang 2018); epsilon is found by bisection.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.optimize import brentq
from scipy.stats import norm

from abm.learning.messages import MessageKind, Network
from abm.learning.privacy.aggregation import SumAggregator

RDP_ORDERS = tuple([1.0 + x / 10.0 for x in range(1, 100)] + list(range(11, 64)) + [128, 256, 512])


def clip_l2(vec: torch.Tensor, clip: float) -> torch.Tensor:
    """Scale ``vec`` down to L2 norm at most ``clip``."""
    n = float(vec.norm())
    return vec * min(1.0, clip / n) if n > 0 else vec


def rdp_epsilon(noise_multiplier: float, steps: int, delta: float) -> float:
    """(epsilon, delta)-DP of ``steps`` Gaussian releases via RDP (Balle et al. 2020 conversion)."""
    if steps == 0:
        return 0.0
    best = math.inf
    for a in RDP_ORDERS:
        rdp = steps * a / (2.0 * noise_multiplier**2)
        eps = rdp + math.log1p(-1.0 / a) - (math.log(delta) + math.log(a)) / (a - 1.0)
        best = min(best, eps)
    return max(best, 0.0)


def gdp_delta(eps: float, mu: float) -> float:
    """delta(eps) of a mu-GDP mechanism."""
    return float(norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2))


def gdp_epsilon(noise_multiplier: float, steps: int, delta: float) -> float:
    """Exact (epsilon, delta) of ``steps`` Gaussian releases (composition is mu-GDP)."""
    if steps == 0:
        return 0.0
    mu = math.sqrt(steps) / noise_multiplier
    if gdp_delta(0.0, mu) <= delta:
        return 0.0
    hi = 1.0
    while gdp_delta(hi, mu) > delta:
        hi *= 2.0
    return float(brentq(lambda e: gdp_delta(e, mu) - delta, 0.0, hi, xtol=1e-10))


class DPAccountant:
    """Counts Gaussian releases with a fixed noise multiplier and reports epsilon."""

    def __init__(self, noise_multiplier: float, method: str = "rdp") -> None:
        if method not in ("rdp", "gdp"):
            raise ValueError(f"unknown accountant {method!r}; allowed: rdp, gdp")
        self.noise_multiplier = noise_multiplier
        self.method = method
        self.steps = 0

    def step(self, n: int = 1) -> None:
        """Record ``n`` releases."""
        self.steps += n

    def epsilon(self, delta: float) -> float:
        """Epsilon spent so far for the given delta."""
        f = rdp_epsilon if self.method == "rdp" else gdp_epsilon
        return f(self.noise_multiplier, self.steps, delta)


class DifferentiallyPrivateSum(SumAggregator):
    """Clip + distributed Gaussian noise around any inner sum aggregator."""

    adds_noise = True

    def __init__(
        self,
        inner: SumAggregator,
        clip: float,
        noise_multiplier: float,
        seed: int,
        accountant: str = "rdp",
    ) -> None:
        self.inner = inner
        self.clip = clip
        self.noise_multiplier = noise_multiplier
        self.accountant = DPAccountant(noise_multiplier, accountant)
        self._rng = np.random.default_rng(seed)

    def aggregate(
        self,
        contributions: dict[int, torch.Tensor],
        round_: int,
        network: Network,
        kind: MessageKind = MessageKind.MODEL_UPDATE,
        dropped: frozenset[int] = frozenset(),
    ) -> torch.Tensor:
        n = len(contributions)
        std = self.noise_multiplier * self.clip / math.sqrt(n)
        noisy = {}
        for pid in sorted(contributions):
            v = clip_l2(contributions[pid].float(), self.clip)
            noise = torch.from_numpy(self._rng.normal(0.0, std, size=v.numel())).float()
            noisy[pid] = v + noise
        self.accountant.step()
        return self.inner.aggregate(noisy, round_, network, kind, dropped)

    def epsilon(self, delta: float) -> float:
        return self.accountant.epsilon(delta)
