"""Static communication topologies as boolean adjacency matrices (row i: who i listens to)."""

from __future__ import annotations

import numpy as np


def fully_connected(n: int) -> np.ndarray:
    """Everyone with everyone (no self loops)."""
    return ~np.eye(n, dtype=bool)


def ring(n: int) -> np.ndarray:
    """Each participant with its two ring neighbours."""
    a = np.zeros((n, n), dtype=bool)
    for i in range(n):
        if n > 1:
            a[i, (i + 1) % n] = True
            a[i, (i - 1) % n] = True
    return a


def k_regular(n: int, k: int) -> np.ndarray:
    """Circulant k-regular graph: neighbours at ring offsets 1..k/2 either way (k even, k < n)."""
    if k % 2 or k >= n:
        raise ValueError(f"k must be even and below n; got k={k}, n={n}")
    a = np.zeros((n, n), dtype=bool)
    for i in range(n):
        for off in range(1, k // 2 + 1):
            a[i, (i + off) % n] = True
            a[i, (i - off) % n] = True
    return a


def star(n: int) -> np.ndarray:
    """Participants talk only to a server: no peer edges (aggregation goes through the server)."""
    return np.zeros((n, n), dtype=bool)


def build_topology(name: str, n: int, k: int = 2) -> np.ndarray:
    """Topology by name: star, fully_connected, ring, k_regular."""
    if name == "star":
        return star(n)
    if name == "fully_connected":
        return fully_connected(n)
    if name == "ring":
        return ring(n)
    if name == "k_regular":
        return k_regular(n, k)
    raise ValueError(f"unknown topology {name!r}; allowed: star, fully_connected, ring, k_regular")
