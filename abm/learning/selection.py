"""Collaborator-selection policies of thesis chapter D.

Every policy answers ``select(me, round_, sim, rng, k_max)`` with up to ``k_max`` collaborator ids
(never ``me``). ``sim`` is the [U, U] similarity matrix as seen this round (row = the rater).
A policy chooses among ``me``'s neighbours in its communication topology (:meth:`SelectionPolicy.restrict`;
everyone by default); "all others" below means those neighbours.

* :class:`RandomPolicy`: uniform among all others.
* :class:`OracleWithinGroupPolicy`: uniform among same-group users (needs the group labels).
* :class:`GreedyPolicy`: the most similar other user (Top-K with K = 1).
* :class:`EpsGreedyPolicy`: greedy, with probability ``eps`` uniform instead.
* :class:`SimilaritySamplingPolicy`: j with probability softmax(sim / temperature).
* :class:`TopKPolicy`: uniform among the K most similar, optionally on similarity averaged over
  the last ``avg_window`` rounds.
* :class:`ConsensusClusterPolicy`: consensus clustering. Pairwise similarity is the Pearson
  correlation of similarity profiles (rows of ``sim``); every user runs the same deterministic
  clustering (affinity propagation on that correlation, or mean shift on the profiles) and samples
  collaborators uniformly from its own cluster (random fallback for a singleton).
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from collections import deque
from typing import Any, Literal

import numpy as np

PolicyName = Literal[
    "random",
    "oracle",
    "greedy",
    "eps_greedy",
    "sim_sampling",
    "top_k",
    "consensus_affinity_propagation",
    "consensus_mean_shift",
]  # what build_policy builds


class SelectionPolicy(ABC):
    """Chooses collaborators for one user in one round."""

    name: str = "policy"
    #: [U, U] booleans: row i marks whom user i may choose (its topology's neighbours); None: everyone
    neighbours: np.ndarray | None = None

    def restrict(self, neighbours: np.ndarray) -> None:
        """Choose only among each user's neighbours (row i of the boolean adjacency matrix)."""
        self.neighbours = np.asarray(neighbours, dtype=bool)

    def candidates(self, me: int, n: int) -> np.ndarray:
        """The users ``me`` may choose: every other user, or its neighbours."""
        others = np.array([j for j in range(n) if j != me], dtype=int)
        return others if self.neighbours is None else others[self.neighbours[me, others]]

    def uniform(self, me: int, n: int, rng: np.random.Generator, k_max: int) -> list[int]:
        """Up to ``k_max`` of ``me``'s candidates, uniformly without replacement."""
        others = self.candidates(me, n)
        return sorted(rng.choice(others, size=min(k_max, len(others)), replace=False).tolist())

    @abstractmethod
    def select(self, me: int, round_: int, sim: np.ndarray, rng: np.random.Generator, k_max: int = 1) -> list[int]:
        """Collaborator ids for ``me`` (excluding ``me``)."""

    def start_round(self, round_: int, sim: np.ndarray) -> None:  # noqa: B027 - optional hook
        """Called once per round before any ``select`` (consensus computations go here)."""


class RandomPolicy(SelectionPolicy):
    """Uniform among all other users."""

    name = "random"

    def select(self, me: int, round_: int, sim: np.ndarray, rng: np.random.Generator, k_max: int = 1) -> list[int]:
        return self.uniform(me, sim.shape[0], rng, k_max)


class OracleWithinGroupPolicy(SelectionPolicy):
    """Uniform among users of the same (known) group."""

    name = "oracle"

    def __init__(self, groups: list[int]) -> None:
        self.groups = np.asarray(groups)

    def select(self, me: int, round_: int, sim: np.ndarray, rng: np.random.Generator, k_max: int = 1) -> list[int]:
        others = self.candidates(me, sim.shape[0])
        peers = others[self.groups[others] == self.groups[me]]
        if len(peers) == 0:
            return self.uniform(me, sim.shape[0], rng, k_max)
        return sorted(rng.choice(peers, size=min(k_max, len(peers)), replace=False).tolist())


class TopKPolicy(SelectionPolicy):
    """Uniform among the ``k`` most similar users (on similarity averaged over a window); users
    tied at equal similarity are ranked in a random order, not by their number."""

    name = "top_k"

    def __init__(self, k: int = 6, avg_window: int = 1) -> None:
        self.k = k
        self.avg_window = avg_window
        self._history: deque[np.ndarray] = deque(maxlen=avg_window)

    def start_round(self, round_: int, sim: np.ndarray) -> None:
        self._history.append(np.asarray(sim, dtype=float).copy())

    def _sim(self, sim: np.ndarray) -> np.ndarray:
        return np.mean(self._history, axis=0) if self._history else sim

    def select(self, me: int, round_: int, sim: np.ndarray, rng: np.random.Generator, k_max: int = 1) -> list[int]:
        others = self.candidates(me, len(sim))
        s = np.full(len(sim), -np.inf)
        s[others] = self._sim(sim)[me, others]
        shuffled = rng.permutation(len(s))  # ties (similarity from a small validation set) broken at random
        order = shuffled[np.argsort(-s[shuffled], kind="stable")]
        top = order[: min(self.k, len(others))]
        return sorted(rng.choice(top, size=min(k_max, len(top)), replace=False).tolist())


class GreedyPolicy(TopKPolicy):
    """The single most similar user(s): Top-K with K = ``k_max``."""

    name = "greedy"

    def __init__(self) -> None:
        super().__init__(k=1, avg_window=1)

    def select(self, me: int, round_: int, sim: np.ndarray, rng: np.random.Generator, k_max: int = 1) -> list[int]:
        self.k = k_max
        return super().select(me, round_, sim, rng, k_max)


class EpsGreedyPolicy(GreedyPolicy):
    """Greedy, but with probability ``eps`` uniform among all others."""

    name = "eps_greedy"

    def __init__(self, eps: float = 0.5) -> None:
        super().__init__()
        self.eps = eps

    def start_round(self, round_: int, sim: np.ndarray) -> None:
        """Nothing to keep: greedy on this round's similarity."""

    def select(self, me: int, round_: int, sim: np.ndarray, rng: np.random.Generator, k_max: int = 1) -> list[int]:
        if rng.random() < self.eps:
            return self.uniform(me, sim.shape[0], rng, k_max)
        return super().select(me, round_, sim, rng, k_max)


class SimilaritySamplingPolicy(SelectionPolicy):
    """j drawn with probability softmax(sim[me] / temperature) over the others."""

    name = "sim_sampling"

    def __init__(self, temperature: float = 0.1) -> None:
        self.temperature = temperature

    def select(self, me: int, round_: int, sim: np.ndarray, rng: np.random.Generator, k_max: int = 1) -> list[int]:
        rest = self.candidates(me, sim.shape[0])
        want = min(k_max, len(rest))
        chosen: list[int] = []
        while len(chosen) < want:
            # Where softmax underflows to 0 for all but a few, draw those and go on over the rest
            # (one draw at a time without replacement renormalises over who is left).
            logits = sim[me, rest] / self.temperature
            p = np.exp(logits - logits.max())
            p /= p.sum()
            size = min(want - len(chosen), int(np.count_nonzero(p)))
            picks = rng.choice(rest, size=size, replace=False, p=p)
            chosen += picks.tolist()
            rest = rest[~np.isin(rest, picks)]
        return sorted(chosen)


def profile_correlation(sim: np.ndarray, exclude_diagonal: bool = True) -> np.ndarray:
    """Pearson correlation of similarity profiles (rows); the diagonal is masked out first.

    With ``exclude_diagonal`` each pair's correlation uses only the columns other than the two
    users themselves, so a user's (high) self-similarity does not dominate.
    """
    s = np.asarray(sim, dtype=float)
    n = s.shape[0]
    if not exclude_diagonal:
        c = np.corrcoef(s)
        return np.nan_to_num(c, nan=0.0)
    # sums over all columns except the pair's own two columns, for every pair (i, j) at once
    d = np.diag(s)
    m = n - 2
    sa = s.sum(1)[:, None] - d[:, None] - s  # sum_c s[i, c] without c in (i, j)
    sb = sa.T
    sq = (s * s).sum(1)
    saa = sq[:, None] - d[:, None] ** 2 - s**2
    sbb = saa.T
    sab = s @ s.T - d[:, None] * s.T - s * d[None, :]
    cov = sab - sa * sb / m
    var = (saa - sa**2 / m) * (sbb - sb**2 / m)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(var > 1e-24, cov / np.sqrt(np.maximum(var, 1e-300)), 0.0)
    np.fill_diagonal(out, 1.0)
    return out


def consensus_clusters(sim: np.ndarray, method: str = "affinity_propagation", seed: int = 0) -> np.ndarray:
    """Cluster labels every user derives identically from the shared similarity matrix."""
    from sklearn.cluster import AffinityPropagation, MeanShift, estimate_bandwidth
    from sklearn.exceptions import ConvergenceWarning

    if method == "affinity_propagation":
        corr = profile_correlation(sim)
        ap = AffinityPropagation(
            affinity="precomputed",
            damping=0.5,
            random_state=seed,
            max_iter=2000,
            convergence_iter=50,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            labels = ap.fit(corr).labels_
        if np.any(labels < 0):  # did not converge: everyone alone
            labels = np.arange(sim.shape[0])
        return labels
    if method == "mean_shift":
        x = np.asarray(sim, dtype=float)
        bandwidth = max(float(estimate_bandwidth(x, quantile=0.3)), 1e-9)
        return MeanShift(bandwidth=bandwidth).fit(x).labels_
    raise ValueError(f"unknown clustering {method!r}; allowed: affinity_propagation, mean_shift")


class ConsensusClusterPolicy(SelectionPolicy):
    """Sample collaborators from one's own consensus cluster (recomputed every round)."""

    name = "consensus"

    def __init__(self, method: str = "affinity_propagation", seed: int = 0) -> None:
        self.method = method
        self.seed = seed
        self.labels: np.ndarray | None = None
        self.name = f"consensus_{method}"

    def start_round(self, round_: int, sim: np.ndarray) -> None:
        self.labels = consensus_clusters(sim, self.method, self.seed)

    def select(self, me: int, round_: int, sim: np.ndarray, rng: np.random.Generator, k_max: int = 1) -> list[int]:
        if self.labels is None:
            self.start_round(round_, sim)
        assert self.labels is not None
        others = self.candidates(me, sim.shape[0])
        peers = others[self.labels[others] == self.labels[me]]
        if len(peers) == 0:
            return self.uniform(me, sim.shape[0], rng, k_max)
        return sorted(rng.choice(peers, size=min(k_max, len(peers)), replace=False).tolist())


def build_policy(name: str, groups: list[int] | None = None, **params: Any) -> SelectionPolicy:
    """Policy by name: random, oracle, greedy, eps_greedy, sim_sampling, top_k,
    consensus_affinity_propagation, consensus_mean_shift."""
    if name == "random":
        return RandomPolicy()
    if name == "oracle":
        if groups is None:
            raise ValueError("the oracle policy needs group labels")
        return OracleWithinGroupPolicy(groups)
    if name == "greedy":
        return GreedyPolicy()
    if name == "eps_greedy":
        return EpsGreedyPolicy(**params)
    if name == "sim_sampling":
        return SimilaritySamplingPolicy(**params)
    if name == "top_k":
        return TopKPolicy(**params)
    if name == "consensus_affinity_propagation":
        return ConsensusClusterPolicy("affinity_propagation", **params)
    if name == "consensus_mean_shift":
        return ConsensusClusterPolicy("mean_shift", **params)
    raise ValueError(
        f"unknown selection policy {name!r}; allowed: random, oracle, greedy, eps_greedy, "
        "sim_sampling, top_k, consensus_affinity_propagation, consensus_mean_shift"
    )
