"""The record of who collaborated with whom each round, and collapse indicators (chapter D).

``matrices[r][i, j] = 1`` when user i took user j as a collaborator in round r (asymmetric).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.sparse.csgraph import connected_components


@dataclass
class CollaborationRecord:
    """Per-round collaboration matrices for ``n`` users."""

    n: int
    matrices: list[np.ndarray] = field(default_factory=list)

    def record(self, choices: dict[int, list[int]]) -> None:
        """Add one round: user -> chosen collaborators."""
        m = np.zeros((self.n, self.n), dtype=np.int8)
        for i, js in choices.items():
            for j in js:
                m[i, j] = 1
        self.matrices.append(m)

    def window(self, w: int) -> np.ndarray:
        """Counts of choices over the last ``w`` rounds."""
        if not self.matrices:
            return np.zeros((self.n, self.n), dtype=int)
        return np.sum(self.matrices[-w:], axis=0, dtype=int)

    def within_group_rate(self, groups: list[int] | np.ndarray, last: int | None = None) -> float:
        """Fraction of choices that stay in the chooser's group (over the last ``last`` rounds)."""
        g = np.asarray(groups)
        mats = self.matrices if last is None else self.matrices[-last:]
        same = total = 0
        for m in mats:
            i, j = np.nonzero(m)
            same += int(np.sum(g[i] == g[j]))
            total += len(i)
        return same / total if total else float("nan")

    def distinct_partners(self, w: int = 10) -> np.ndarray:
        """Distinct collaborators per user over the last ``w`` rounds."""
        return (self.window(w) > 0).sum(axis=1)

    def cliques(self, w: int = 10) -> np.ndarray:
        """Strongly connected components of the last-``w``-rounds choice graph (labels)."""
        _, labels = connected_components(self.window(w) > 0, directed=True, connection="strong")
        return labels

    def collapse(self, w: int = 10, max_partners: int = 2) -> bool:
        """Collapse warning: some user has <= ``max_partners`` distinct partners over ``w`` rounds
        and the choice graph splits into more than one strongly connected component."""
        return bool(np.any(self.distinct_partners(w) <= max_partners) and len(set(self.cliques(w))) > 1)

    def to_json(self) -> list[list[list[int]]]:
        """Matrices as nested lists."""
        return [m.astype(int).tolist() for m in self.matrices]
