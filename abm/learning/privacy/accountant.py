"""The privacy accountant of the Gaussian releases of :mod:`abm.learning.privacy.dp`, in two
standard ways:

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
spend at most a target epsilon (one the accountant can reach: :func:`min_epsilon`, which a
scenario's check uses). Plain arithmetic without torch; scipy (about a second to load) is imported
by the functions that need it, so that the check goes without it.
"""

from __future__ import annotations

import math

RDP_ORDERS = tuple([1.0 + x / 10.0 for x in range(1, 100)] + list(range(11, 64)) + [128, 256, 512])


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
    from scipy.stats import norm

    second = math.exp(eps + float(norm.logcdf(-eps / mu - mu / 2)))
    return float(norm.cdf(-eps / mu + mu / 2) - second)


def gdp_epsilon(noise_multiplier: float, steps: float, delta: float) -> float:
    """Exact (epsilon, delta) of ``steps`` Gaussian releases (composition is mu-GDP)."""
    return _gdp_mu_to_dp(math.sqrt(steps) / noise_multiplier, delta)


def _gdp_mu_to_dp(mu: float, delta: float) -> float:
    """Epsilon of a mu-GDP mechanism at ``delta``."""
    from scipy.optimize import brentq

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
    from scipy.optimize import brentq

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

    def spent(self) -> float:
        """The sum over the releases so far of 1 / sigma_t^2 (what epsilon is a function of)."""
        return self._inv_var

    def epsilon(self, delta: float) -> float:
        """Epsilon spent so far for the given delta."""
        if self.method == "rdp":
            return _rdp_to_dp(self._inv_var, delta)
        return _gdp_mu_to_dp(math.sqrt(self._inv_var), delta)
