"""The cost ledger: every intervention books (item, day, count, unit cost) per replicate."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch


class CostLedger:
    """Spending per replicate, one entry per (item, day)."""

    def __init__(self, replicates: int) -> None:
        self.replicates = replicates
        self._rows: list[tuple[str, int, float, np.ndarray]] = []

    def book(self, item: str, day: int, counts: torch.Tensor, unit_cost: float) -> None:
        """Book ``counts[r]`` units of ``item`` for replicate r at ``unit_cost`` each."""
        c = counts.detach().to("cpu", torch.float64).numpy().reshape(self.replicates)
        if c.any():
            self._rows.append((item, day, float(unit_cost), c))

    def table(self) -> pd.DataFrame:
        """One row per (item, day, replicate) with count, unit_cost and cost."""
        cols = ["item", "day", "replicate", "count", "unit_cost", "cost"]
        if not self._rows:
            return pd.DataFrame(columns=cols)
        r = np.arange(self.replicates)
        frames = [
            pd.DataFrame({"item": item, "day": day, "replicate": r, "count": c, "unit_cost": u, "cost": c * u})
            for item, day, u, c in self._rows
        ]
        out = pd.concat(frames, ignore_index=True)
        return out[out["count"] != 0].reset_index(drop=True)[cols]

    def totals(self) -> np.ndarray:
        """Total spending per replicate."""
        tot = np.zeros(self.replicates)
        for _, _, u, c in self._rows:
            tot += c * u
        return tot
