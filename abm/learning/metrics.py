"""Collaboration metrics: gains, MCG, CGS, collaborative fairness (cycle.md section 4)."""

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
    """CF = Pearson corr(B, A) (the metric CYCle criticises; NaN when constant)."""
    b = np.asarray(standalone, dtype=float)
    a = np.asarray(collaborative, dtype=float)
    if b.std() == 0 or a.std() == 0:
        return float("nan")
    return float(np.corrcoef(b, a)[0, 1])
