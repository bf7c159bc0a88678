"""The finished trials of a running Optuna calibration, kept beside its output folder
(``.<folder>.trials.jsonl``, :mod:`abm.outputs.journal`) so that a calibration stopped before
its end continues from them when the same command runs again.

Each line holds a trial's number, the values the sampler drew and its raw simulated series
(:func:`abm.calibration.observed.raw_series`); the file belongs to one resolved scenario (its
calibration section, with the sampler's seed and batch, included) and abm's code. A calibration
that finds it asks the seeded sampler for the same trials again; each batch whose values all
match the file's is told the kept series instead of being simulated, so the study, and so every
output, is what an uninterrupted calibration gives. The first batch that is not in the file (or
whose values differ: a changed library) runs as usual, and the file is cut there.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from abm.calibration.config import CalibrationConfig
from abm.outputs.journal import Journal, journal_path, work_key
from abm.scenario import Scenario


class TrialJournal(Journal):
    """The kept trials of one calibration into the folder ``target``."""

    def __init__(
        self, target: Path, sc: Scenario, cfg: CalibrationConfig, warn: Callable[[str], None] | None = None
    ) -> None:
        super().__init__(journal_path(target, "trials"), work_key(sc.model_dump(mode="json")), "trials", warn)
        self.cfg = cfg

    def kept(self, first: int, values: list[dict[str, float]]) -> list[pd.DataFrame] | None:
        """The raw series of trials ``first``, ``first + 1``, ... if the file holds all of them
        with these values; else None, and the file is cut before ``first`` (they run again)."""
        stored = self.entries[first : first + len(values)]
        if len(stored) == len(values) and all(
            e.get("number") == first + i and e.get("values") == v
            for i, (e, v) in enumerate(zip(stored, values, strict=True))
        ):
            return [self._frame(e["raw"]) for e in stored]
        self.cut(first)
        return None

    def add_trial(self, number: int, values: dict[str, float], raw: pd.DataFrame) -> None:
        """Keep a finished trial."""
        self.add({"number": number, "values": values, "raw": {c: raw[c].tolist() for c in raw.columns}})

    def _frame(self, raw: dict[str, list[float]]) -> pd.DataFrame:
        days = len(next(iter(raw.values())))
        index = pd.date_range(self.cfg.start_date, periods=days, freq="D")
        return pd.DataFrame({c: pd.Series(v, dtype="float64").to_numpy() for c, v in raw.items()}, index=index)
