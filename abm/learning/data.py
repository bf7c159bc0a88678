"""Data sources for learning scenarios: synthetic Gaussian mixtures and scikit-learn's bundled sets.

Every source returns a :class:`Dataset` of standardized float32 features and int64 labels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

# scikit-learn's bundled sets and their numbers of classes (checked against the data in tests)
SKLEARN_CLASSES = {"digits": 10, "wine": 3, "breast_cancer": 2, "iris": 3}
SKLEARN_SOURCES = tuple(SKLEARN_CLASSES)


@dataclass(frozen=True)
class Dataset:
    """Features ``x`` [n, d] (float32) and labels ``y`` [n] (int64)."""

    x: torch.Tensor
    y: torch.Tensor

    def __len__(self) -> int:
        return int(self.y.shape[0])

    def subset(self, idx: np.ndarray | torch.Tensor) -> Dataset:
        """Rows ``idx`` as a new dataset."""
        idx_t = torch.as_tensor(np.asarray(idx), dtype=torch.long)
        return Dataset(self.x[idx_t], self.y[idx_t])

    @staticmethod
    def concat(parts: list[Dataset]) -> Dataset:
        """Concatenate datasets row-wise."""
        return Dataset(torch.cat([p.x for p in parts]), torch.cat([p.y for p in parts]))


@dataclass(frozen=True)
class DataSource:
    """A loaded data set with its shape metadata."""

    data: Dataset
    n_classes: int
    input_shape: tuple[int, ...]  # shape of one sample before flattening (e.g. (1, 8, 8))


def gaussian_mixture(
    n_samples: int,
    n_classes: int,
    n_features: int,
    modes_per_class: int,
    separation: float,
    seed: int,
) -> DataSource:
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
    return DataSource(
        Dataset(torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.long)),
        n_classes,
        (n_features,),
    )


def sklearn_dataset(name: str) -> DataSource:
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
    return DataSource(
        Dataset(torch.tensor(x, dtype=torch.float32), torch.tensor(y)),
        int(y.max()) + 1,
        shape,
    )
