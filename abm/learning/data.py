"""Data sets as tensors for learning scenarios: synthetic Gaussian mixtures and scikit-learn's
bundled sets (made as arrays by :mod:`abm.learning.sources`).

Every source returns a :class:`Dataset` of standardized float32 features and int64 labels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from abm.learning.sources import SourceArrays, sklearn_arrays


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


def tensors(arrays: SourceArrays) -> DataSource:
    """Pooled data as tensors: float32 features, int64 labels."""
    x = torch.tensor(arrays.x, dtype=torch.float32)
    return DataSource(Dataset(x, torch.tensor(arrays.y, dtype=torch.long)), arrays.n_classes, arrays.input_shape)


def sklearn_dataset(name: str) -> DataSource:
    """One of scikit-learn's bundled data sets (:func:`abm.learning.sources.sklearn_arrays`)."""
    return tensors(sklearn_arrays(name))
