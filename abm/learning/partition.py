"""Splitting a pooled data set across participants: IID, Dirichlet label skew, quantity skew,
class groups (domains), and concept shift (label permutations for some participants)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from abm.learning.data import Dataset


@dataclass(frozen=True)
class ParticipantData:
    """A participant's private train / validation / test data."""

    train: Dataset
    val: Dataset
    test: Dataset


def iid_indices(n: int, n_parts: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Equal random shares."""
    return [np.sort(p) for p in np.array_split(rng.permutation(n), n_parts)]


DIRICHLET_TRIES = 100  # draws of label shares before dirichlet_label_indices gives up on min_size


def dirichlet_label_indices(
    labels: np.ndarray,
    n_parts: int,
    alpha: float,
    rng: np.random.Generator,
    min_size: int = 10,
) -> list[np.ndarray]:
    """Per class c draw q ~ Dir_N(alpha) and split that class's samples in proportion to q.

    Redraws (up to :data:`DIRICHLET_TRIES` times) until every part holds at least ``min_size``
    samples; if none does, the last draw is returned, and the caller must check the sizes.
    """
    for _ in range(DIRICHLET_TRIES):
        parts: list[list[int]] = [[] for _ in range(n_parts)]
        for c in np.unique(labels):
            idx = rng.permutation(np.flatnonzero(labels == c))
            q = rng.dirichlet(np.full(n_parts, alpha))
            cuts = (np.cumsum(q)[:-1] * len(idx)).astype(int)
            for k, chunk in enumerate(np.split(idx, cuts)):
                parts[k].extend(chunk.tolist())
        if min(len(p) for p in parts) >= min_size:
            break
    return [np.sort(np.array(p, dtype=np.int64)) for p in parts]


def quantity_indices(
    n: int, n_parts: int, alpha: float, rng: np.random.Generator, min_size: int = 10
) -> list[np.ndarray]:
    """Sizes p ~ Dir_N(alpha) over participants (at least ``min_size`` each), random rows."""
    if n_parts * min_size > n:
        raise ValueError("not enough samples for the minimum size")
    p = rng.dirichlet(np.full(n_parts, alpha))
    sizes = min_size + np.floor(p * (n - n_parts * min_size)).astype(int)
    perm = rng.permutation(n)
    cuts = np.cumsum(sizes)[:-1]
    return [np.sort(c) for c in np.split(perm[: sizes.sum()], cuts)]


def fixed_fraction_indices(n: int, fractions: list[float], rng: np.random.Generator) -> list[np.ndarray]:
    """Shares of given fractions (normalised), random rows."""
    f = np.asarray(fractions, dtype=float)
    f = f / f.sum()
    cuts = (np.cumsum(f)[:-1] * n).astype(int)
    return [np.sort(c) for c in np.split(rng.permutation(n), cuts)]


def class_group_indices(
    labels: np.ndarray,
    groups: list[list[int]],
    assignment: list[int],
    rng: np.random.Generator,
) -> list[np.ndarray]:
    """Participant k receives only classes ``groups[assignment[k]]``.

    Samples of each class are shared equally among the participants that hold that class.
    """
    n_parts = len(assignment)
    parts: list[list[int]] = [[] for _ in range(n_parts)]
    for c in np.unique(labels):
        holders = [k for k in range(n_parts) if int(c) in groups[assignment[k]]]
        if not holders:
            continue
        idx = rng.permutation(np.flatnonzero(labels == c))
        for k, chunk in zip(holders, np.array_split(idx, len(holders)), strict=True):
            parts[k].extend(chunk.tolist())
    return [np.sort(np.array(p, dtype=np.int64)) for p in parts]


def permute_labels(data: Dataset, swaps: list[tuple[int, int]]) -> Dataset:
    """Concept shift: swap the given label pairs (same inputs, different labelling function)."""
    y = data.y.clone()
    for a, b in swaps:
        y[data.y == a] = b
        y[data.y == b] = a
    return replace(data, y=y)


def train_val_test_rows(
    n: int, val_fraction: float, test_fraction: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random train / validation / test rows of a share of ``n`` rows (at least one each of
    validation and test)."""
    perm = rng.permutation(n)
    n_val = max(1, round(val_fraction * n))
    n_test = max(1, round(test_fraction * n))
    return np.sort(perm[n_val + n_test :]), np.sort(perm[:n_val]), np.sort(perm[n_val : n_val + n_test])
