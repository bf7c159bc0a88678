"""The spread of a figure over replicates: sample variance, sd and covariance (n - 1 in the
denominator), taken about each figure's first replicate so that replicates with the same value
have a spread of exactly 0.

numpy takes the spread about the mean, and the float mean of equal values is not always that
value: ten replicates that each spent $3,545.9999999999995 average $3,545.999999999999, and their
sd came out as 4.8e-13, which the console printed as "3,546 ± 4.8e-13". Deviations from the first
value are exactly 0 for equal values, and the spread does not depend on the point it is taken about.
numpy only: ``abm compare`` reads these without loading torch.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike


def sample_variance(values: ArrayLike) -> float:
    """The sample variance of ``values`` (n - 1 in the denominator); NaN for fewer than two."""
    v = np.asarray(values, dtype=np.float64).ravel()
    return float((v - v[0]).var(ddof=1)) if v.size > 1 else math.nan


def sample_sd(values: ArrayLike) -> float:
    """The sample standard deviation of ``values`` (n - 1 in the denominator); NaN for fewer than
    two, which have no spread to measure."""
    return math.sqrt(sample_variance(values)) if np.size(values) > 1 else math.nan


def sample_covariance(rows: ArrayLike) -> np.ndarray:
    """The sample covariance matrix of ``rows`` (one figure per row, one replicate per column;
    n - 1 in the denominator)."""
    r = np.asarray(rows, dtype=np.float64)
    return np.atleast_2d(np.cov(r - r[:, :1]))
