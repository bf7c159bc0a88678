"""The pooled data of a learning scenario as NumPy arrays: synthetic Gaussian mixtures and
scikit-learn's bundled sets, standardized per feature. Free of torch, so that ``abm validate``
checks a scenario's split on the data themselves (:mod:`abm.learning.split`); the runs take them
as tensors (:mod:`abm.learning.data`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from abm.learning.scenario import GaussianMixtureSpec, SklearnSpec

# scikit-learn's bundled sets and their numbers of classes (checked against the data in tests)
SKLEARN_CLASSES = {"digits": 10, "wine": 3, "breast_cancer": 2, "iris": 3}
SKLEARN_SOURCES = tuple(SKLEARN_CLASSES)
# the files scikit-learn ships them in (sklearn/datasets/data), one sample a line, its label last;
# all but digits begin with a line "samples,features,class names..."
SKLEARN_FILES = {
    "digits": "digits.csv.gz",
    "wine": "wine_data.csv",
    "breast_cancer": "breast_cancer.csv",
    "iris": "iris.csv",
}
DIGITS_SHAPE = (1, 8, 8)  # one digit: an 8x8 image of one channel


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
    shape = DIGITS_SHAPE if name == "digits" else (x.shape[1],)
    return SourceArrays(x, y, int(y.max()) + 1, shape)


def source_labels(data: GaussianMixtureSpec | SklearnSpec, seed: int) -> tuple[np.ndarray, tuple[int, ...]]:
    """The labels of a scenario's pooled data, in order (:func:`source_arrays`'s ``y``), and the
    shape of one sample: what ``abm validate`` checks a split and the models' sizes on. Those of
    scikit-learn's sets are read from its data files without importing scikit-learn, which
    takes seconds (:func:`sklearn_labels`)."""
    if data.source != "gaussian_mixture":
        labels = sklearn_labels(data.source)
        if labels is not None:
            return labels
    arrays = source_arrays(data, seed)
    return arrays.y, arrays.input_shape


def sklearn_labels(name: str) -> tuple[np.ndarray, tuple[int, ...]] | None:
    """The labels of scikit-learn's bundled set ``name`` and the shape of one sample, read from
    the file scikit-learn ships it in (:data:`SKLEARN_FILES`) as :func:`sklearn_arrays` has them,
    without importing scikit-learn; None where that file is not there or not as expected (another
    version of scikit-learn: :func:`sklearn_arrays` then)."""
    from importlib.util import find_spec

    try:
        spec = find_spec("sklearn")
        folders = list(spec.submodule_search_locations or []) if spec is not None else []
        if not folders:
            return None
        path = Path(folders[0]) / "datasets" / "data" / SKLEARN_FILES[name]
        if name == "digits":
            labels = np.loadtxt(path, delimiter=",", usecols=-1, dtype=np.int64)
            return labels, DIGITS_SHAPE
        with open(path, encoding="utf-8") as f:
            samples, features = (int(v) for v in f.readline().split(",")[:2])
            labels = np.loadtxt(f, delimiter=",", usecols=features, dtype=np.int64, ndmin=1)
    except (OSError, ValueError, KeyError):
        return None
    return (labels, (features,)) if len(labels) == samples else None


def source_arrays(data: GaussianMixtureSpec | SklearnSpec, seed: int) -> SourceArrays:
    """A scenario's pooled data set (its ``data`` section; ``seed``: the scenario's)."""
    if data.source == "gaussian_mixture":
        return gaussian_mixture_arrays(
            data.n_samples, data.n_classes, data.n_features, data.modes_per_class, data.separation, seed
        )
    return sklearn_arrays(data.source)
