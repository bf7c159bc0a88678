"""The pooled data of a learning scenario as NumPy arrays: synthetic Gaussian mixtures and
scikit-learn's bundled sets, standardized per feature. Free of torch, so that ``abm validate``
checks a scenario's split on the data themselves (:mod:`abm.learning.split`); the runs take them
as tensors (:mod:`abm.learning.data`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from abm.learning.scenario import GaussianMixtureSpec, SklearnSpec

# scikit-learn's bundled sets and their numbers of classes (checked against the data in tests)
SKLEARN_CLASSES = {"digits": 10, "wine": 3, "breast_cancer": 2, "iris": 3}
SKLEARN_SOURCES = tuple(SKLEARN_CLASSES)


@dataclass(frozen=True)
class SourceArrays:
    """Features ``x`` [n, d] (float64, standardized), labels ``y`` [n] (int64), the number of
    classes and the shape of one sample before flattening (e.g. (1, 8, 8))."""

    x: np.ndarray
    y: np.ndarray
    n_classes: int
    input_shape: tuple[int, ...]


def gaussian_mixture_arrays(
    n_samples: int,
    n_classes: int,
    n_features: int,
    modes_per_class: int,
    separation: float,
    seed: int,
) -> SourceArrays:
    """Classification data from a Gaussian mixture with unit-variance modes.

    Mode means are drawn N(0, (separation/2)^2 I); each class owns ``modes_per_class`` modes,
    so a linear model is imperfect when there is more than one mode.
    """
    rng = np.random.default_rng(seed)
    means = rng.normal(0.0, separation / 2.0, size=(n_classes, modes_per_class, n_features))
    y = rng.integers(0, n_classes, size=n_samples)
    mode = rng.integers(0, modes_per_class, size=n_samples)
    x = means[y, mode] + rng.normal(size=(n_samples, n_features))
    x = (x - x.mean(0)) / x.std(0)
    return SourceArrays(x, y, n_classes, (n_features,))


def sklearn_arrays(name: str) -> SourceArrays:
    """One of scikit-learn's bundled data sets (no download), standardized per feature."""
    from sklearn import datasets as skd

    loaders = {
        "digits": skd.load_digits,
        "wine": skd.load_wine,
        "breast_cancer": skd.load_breast_cancer,
        "iris": skd.load_iris,
    }
    if name not in loaders:
        raise KeyError(f"unknown scikit-learn data set {name!r}; allowed: {SKLEARN_SOURCES}")
    bunch = loaders[name]()
    x = np.asarray(bunch.data, dtype=np.float64)
    y = np.asarray(bunch.target, dtype=np.int64)
    std = x.std(0)
    x = (x - x.mean(0)) / np.where(std > 0, std, 1.0)
    shape = (1, 8, 8) if name == "digits" else (x.shape[1],)
    return SourceArrays(x, y, int(y.max()) + 1, shape)


def source_arrays(data: GaussianMixtureSpec | SklearnSpec, seed: int) -> SourceArrays:
    """A scenario's pooled data set (its ``data`` section; ``seed``: the scenario's)."""
    if data.source == "gaussian_mixture":
        return gaussian_mixture_arrays(
            data.n_samples, data.n_classes, data.n_features, data.modes_per_class, data.separation, seed
        )
    return sklearn_arrays(data.source)
