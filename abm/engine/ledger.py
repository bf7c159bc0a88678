"""The cost ledger: every intervention books (item, day, count, unit cost) per replicate."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch


class CostLedger:
    """Spending per replicate, one entry per (item, day)."""

    def __init__(self, replicates: int) -> None:
        self.replicates = replicates
        self._rows: list[tuple[str, int, float, np.ndarray]] = []  # counts: int64 per replicate

    def book(self, item: str, day: int, counts: torch.Tensor, unit_cost: float) -> None:
        """Book ``counts[r]`` (whole) units of ``item`` for replicate r at ``unit_cost`` each."""
        whole = counts.detach().to("cpu", torch.float64).numpy().reshape(self.replicates)
        c = np.rint(whole).astype(np.int64)
        if not np.array_equal(c, whole):
            raise ValueError(f"{item}: counts must be whole units, got {whole.tolist()}")
        if c.any():
            self._rows.append((item, day, float(unit_cost), c))

    def table(self) -> pd.DataFrame:
        """One row per (item, day, replicate) with count, unit_cost and cost."""
        cols = ["item", "day", "replicate", "count", "unit_cost", "cost"]
        if not self._rows:
            return pd.DataFrame(columns=cols)
        k, r = len(self._rows), self.replicates
        counts = np.stack([c for *_, c in self._rows])  # (rows, replicates)
        unit = np.repeat([u for _, _, u, _ in self._rows], r)
        out = pd.DataFrame(
            {
                "item": np.repeat([item for item, *_ in self._rows], r),
                "day": np.repeat([day for _, day, *_ in self._rows], r),
                "replicate": np.tile(np.arange(r), k),
                "count": counts.ravel(),
                "unit_cost": unit,
                "cost": counts.ravel() * unit,
            }
        )
        return out[out["count"] != 0].reset_index(drop=True)[cols]

    def totals(self) -> np.ndarray:
        """Total spending per replicate."""
        tot = np.zeros(self.replicates)
        for _, _, u, c in self._rows:
            tot += c * u
        return tot
