"""Differential privacy for summed updates: L2 clipping, Gaussian noise, and an accountant.

Each participant clips its vector to L2 norm ``clip`` and adds N(0, (sigma * clip)^2 / n) noise,
so the sum of n contributions carries N(0, (sigma * clip)^2) noise in total; this works under
secure aggregation because no one sees an individual vector. The guarantee is participant-level
for "zero-out" neighbours (Kairouz et al. 2021): one participant's contribution set to zero while it
still adds its noise share changes the sum by at most ``clip`` against the full noise. (Were the
participant absent altogether, its noise share would be missing too and the same sigma would give a
weaker guarantee.)

The accountant composes the Gaussian mechanism over releases in two standard ways:

* ``rdp``: Renyi DP, RDP(alpha) = T * alpha / (2 sigma^2), converted to (epsilon, delta) with the
  conversion of Balle et al. 2020 (as in Opacus / TF Privacy) over a grid of orders.
* ``gdp``: exact. T Gaussian releases with noise multiplier sigma are mu-GDP with
  mu = sqrt(T) / sigma, and delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)
  (Dong, Roth, Su 2019; Balle & Wang 2018); epsilon is found by bisection.

Releases may carry different noise multipliers: when participants drop out after adding their
share of the noise, the sum carries only the survivors' shares, so that release's effective
multiplier is sigma sqrt(survivors / n), and the accountant composes releases of any multipliers
(RDP: sum_t alpha / (2 sigma_t^2); GDP: mu = sqrt(sum_t sigma_t^-2)).

:func:`noise_multiplier_for` inverts the accountant: the smallest sigma whose ``steps`` releases
spend at most a target epsilon (one the accountant can reach: :func:`min_epsilon`). A
:class:`DifferentiallyPrivateSum` given ``max_releases`` refuses
(:class:`PrivacyBudgetExceeded`) a release beyond the budget it was calibrated for.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.optimize import brentq
from scipy.stats import norm

from abm.learning.messages import MessageKind, Network
from abm.learning.privacy.aggregation import SumAggregator


class PrivacyBudgetExceeded(RuntimeError):
    """A release was asked of a DP aggregator whose planned number of releases is spent."""


RDP_ORDERS = tuple([1.0 + x / 10.0 for x in range(1, 100)] + list(range(11, 64)) + [128, 256, 512])


def clip_l2(vec: torch.Tensor, clip: float) -> torch.Tensor:
    """Scale ``vec`` down to L2 norm at most ``clip``."""
    n = float(vec.norm())
    return vec * min(1.0, clip / n) if n > 0 else vec


def rdp_epsilon(noise_multiplier: float, steps: float, delta: float) -> float:
    """(epsilon, delta)-DP of ``steps`` Gaussian releases via RDP (Balle et al. 2020 conversion)."""
    return _rdp_to_dp(steps / noise_multiplier**2, delta)


def _rdp_to_dp(inv_var: float, delta: float) -> float:
    """Epsilon of releases whose summed ``1 / sigma_t^2`` is ``inv_var`` (RDP(alpha) = alpha inv_var / 2)."""
    if inv_var == 0:
        return 0.0
    best = math.inf
    for a in RDP_ORDERS:
        rdp = a * inv_var / 2.0
        eps = rdp + math.log1p(-1.0 / a) - (math.log(delta) + math.log(a)) / (a - 1.0)
        best = min(best, eps)
    return max(best, 0.0)


def min_epsilon(delta: float, method: str = "rdp") -> float:
    """The least epsilon at ``delta`` that some noise multiplier can reach (it is approached as sigma
    grows without bound, never attained): 0 for the exact accountant (``gdp``); for ``rdp`` the
    conversion's floor over :data:`RDP_ORDERS`, min_alpha log(1 - 1/alpha) - (log delta + log alpha)
    / (alpha - 1), about 0.0084 at delta 1e-5 (0 once delta is large enough for it to be negative)."""
    if method == "gdp":
        return 0.0
    floor = min(math.log1p(-1.0 / a) - (math.log(delta) + math.log(a)) / (a - 1.0) for a in RDP_ORDERS)
    return max(floor, 0.0)


def gdp_delta(eps: float, mu: float) -> float:
    """delta(eps) of a mu-GDP mechanism.

    The second term e^eps Phi(-eps/mu - mu/2) is evaluated in log space: for large epsilon
    e^eps overflows a float while the product stays below 1.
    """
    second = math.exp(eps + float(norm.logcdf(-eps / mu - mu / 2)))
    return float(norm.cdf(-eps / mu + mu / 2) - second)


def gdp_epsilon(noise_multiplier: float, steps: float, delta: float) -> float:
    """Exact (epsilon, delta) of ``steps`` Gaussian releases (composition is mu-GDP)."""
    return _gdp_mu_to_dp(math.sqrt(steps) / noise_multiplier, delta)


def _gdp_mu_to_dp(mu: float, delta: float) -> float:
    """Epsilon of a mu-GDP mechanism at ``delta``."""
    if mu == 0:
        return 0.0
    if gdp_delta(0.0, mu) <= delta:
        return 0.0
    hi = 1.0
    while gdp_delta(hi, mu) > delta:
        hi *= 2.0
    return float(brentq(lambda e: gdp_delta(e, mu) - delta, 0.0, hi, xtol=1e-10))


def noise_multiplier_for(epsilon: float, steps: float, delta: float, method: str = "rdp") -> float:
    """The smallest noise multiplier whose ``steps`` Gaussian releases spend at most ``epsilon``
    at ``delta`` under the ``method`` accountant (bisection on log sigma, relative tolerance 1e-9).
    ``steps`` may be fractional: releases at sigma / sqrt(c) cost c releases at sigma."""
    if epsilon <= 0 or steps < 1 or not 0 < delta < 1:
        raise ValueError(f"need epsilon > 0, steps >= 1 and 0 < delta < 1 (got {epsilon}, {steps}, {delta})")
    if method not in ("rdp", "gdp"):
        raise ValueError(f"unknown accountant {method!r}; allowed: rdp, gdp")
    floor = min_epsilon(delta, method)
    if epsilon <= floor:
        raise ValueError(
            f"epsilon {epsilon!r} is out of the {method} accountant's reach at delta {delta!r}: no noise "
            f"multiplier spends {floor:.6g} or less (ask for more, or use the exact accountant, gdp)"
        )
    f = rdp_epsilon if method == "rdp" else gdp_epsilon
    lo, hi = 1e-3, 1.0
    while f(hi, steps, delta) > epsilon:
        lo, hi = hi, hi * 2.0
    if f(lo, steps, delta) <= epsilon:
        return lo
    log_sigma = brentq(lambda x: f(math.exp(x), steps, delta) - epsilon, math.log(lo), math.log(hi), rtol=1e-12)
    sigma = math.exp(log_sigma)
    while f(sigma, steps, delta) > epsilon:  # land on the safe side of the root
        sigma *= 1 + 1e-9
    return sigma


class DPAccountant:
    """Composes Gaussian releases (each with its own noise multiplier) and reports epsilon."""

    def __init__(self, noise_multiplier: float, method: str = "rdp") -> None:
        if method not in ("rdp", "gdp"):
            raise ValueError(f"unknown accountant {method!r}; allowed: rdp, gdp")
        self.noise_multiplier = noise_multiplier
        self.method = method
        self.steps = 0
        self._inv_var = 0.0  # sum over releases of 1 / sigma_t^2

    def step(self, n: int = 1, noise_multiplier: float | None = None) -> None:
        """Record ``n`` releases with ``noise_multiplier`` (default: the accountant's)."""
        sigma = self.noise_multiplier if noise_multiplier is None else noise_multiplier
        if not sigma > 0:
            raise ValueError(f"noise multiplier must be positive, got {sigma}")
        self.steps += n
        self._inv_var += n / sigma**2

    def epsilon(self, delta: float) -> float:
        """Epsilon spent so far for the given delta."""
        if self.method == "rdp":
            return _rdp_to_dp(self._inv_var, delta)
        return _gdp_mu_to_dp(math.sqrt(self._inv_var), delta)


class DifferentiallyPrivateSum(SumAggregator):
    """Clip + distributed Gaussian noise around any inner sum aggregator.

    ``max_releases``: the number of sums the noise multiplier was calibrated for (``None``: no
    limit); one more raises :class:`PrivacyBudgetExceeded` before anything is sent.
    """

    adds_noise = True

    def __init__(
        self,
        inner: SumAggregator,
        clip: float,
        noise_multiplier: float,
        seed: int,
        accountant: str = "rdp",
        max_releases: int | None = None,
    ) -> None:
        self.inner = inner
        self.clip = clip
        self.noise_multiplier = noise_multiplier
        self.max_releases = max_releases
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
        if self.max_releases is not None and self.accountant.steps >= self.max_releases:
            raise PrivacyBudgetExceeded(
                f"release {self.accountant.steps + 1} asked, but the noise was calibrated for {self.max_releases} "
                "releases (the privacy budget is spent)"
            )
        n = len(contributions)
        std = self.noise_multiplier * self.clip / math.sqrt(n)
        noisy = {}
        for pid in sorted(contributions):
            v = clip_l2(contributions[pid].float(), self.clip)
            noise = torch.from_numpy(self._rng.normal(0.0, std, size=v.numel())).float()
            noisy[pid] = v + noise
        total = self.inner.aggregate(noisy, round_, network, kind, dropped)
        # only the survivors' noise shares reach the sum: sigma_eff = sigma sqrt(survivors / n)
        survivors = n - len(dropped & set(contributions))
        self.accountant.step(noise_multiplier=self.noise_multiplier * math.sqrt(survivors / n))
        return total

    def epsilon(self, delta: float) -> float:
        return self.accountant.epsilon(delta)
