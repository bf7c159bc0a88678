"""Collaboration metrics: gains, MCG, CGS, collaborative fairness (cycle.md section 4), and how
well selection clusters recover known domains (purity, adjusted Rand index)."""

from __future__ import annotations

import numpy as np


def gains(collaborative: list[float], standalone: list[float]) -> np.ndarray:
    """G_n = A_n - B_n."""
    return np.asarray(collaborative, dtype=float) - np.asarray(standalone, dtype=float)


def mcg(g: np.ndarray | list[float]) -> float:
    """Mean collaboration gain."""
    return float(np.mean(g))


def cgs(g: np.ndarray | list[float], ddof: int = 0) -> float:
    """Collaboration gain spread: the standard deviation of gains.

    ``ddof=0`` (population SD) reproduces the paper's reported numbers; ``ddof=1`` is its Eq. 3.
    """
    return float(np.std(np.asarray(g, dtype=float), ddof=ddof))


def collaborative_fairness(standalone: list[float], collaborative: list[float]) -> float:
    """CF = Pearson corr(B, A) (the metric CYCle criticises; NaN when constant).

    Exactly 1.0 when the scores are the same (local-only against itself), where floating-point
    rounding of the correlation would give 0.9999999999999999; always within [-1, 1]."""
    b = np.asarray(standalone, dtype=float)
    a = np.asarray(collaborative, dtype=float)
    if b.std() == 0 or a.std() == 0:
        return float("nan")
    if np.array_equal(a, b):
        return 1.0
    return float(np.clip(np.corrcoef(b, a)[0, 1], -1.0, 1.0))


def cluster_recovery(clusters: list[int] | np.ndarray, domains: list[int] | np.ndarray) -> dict[str, float | int]:
    """How well ``clusters`` recover the known ``domains`` of the same users.

    ``purity``: the share of users whose cluster's most common domain is their own (1 when no
    cluster mixes domains, however finely the domains are split); ``inverse_purity``: the same
    with the roles swapped (1 when no domain is split over clusters); ``ari``: the adjusted Rand
    index (1 for exactly the domains, about 0 for chance); ``clusters``: how many there are.
    """
    from sklearn.metrics import adjusted_rand_score

    c, d = np.asarray(clusters), np.asarray(domains)

    def purity(a: np.ndarray, b: np.ndarray) -> float:
        return float(sum(np.bincount(b[a == k]).max() for k in np.unique(a)) / len(a))

    return {
        "purity": purity(c, d),
        "inverse_purity": purity(d, c),
        "ari": float(adjusted_rand_score(d, c)),
        "clusters": len(np.unique(c)),
    }
