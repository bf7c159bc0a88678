"""The finished trials of a running Optuna calibration, kept on disk next to its output folder
so that a calibration stopped before its end (Ctrl-C, a lost worker, a killed process, a power
cut) continues from them when the same command runs again.

The file, ``.<output folder name>.trials.jsonl`` beside the output folder, holds a header line
naming what it belongs to (a hash of the resolved scenario, abm's version and the search
settings) and one line per finished trial: its number, the values the sampler drew and its raw
simulated series (:func:`abm.calibration.observed.raw_series`). A calibration that finds the file
of the same scenario asks the seeded sampler for the same trials again; each batch whose values
all match the file's is told the kept series instead of being simulated, so the study, and so
every output, is what an uninterrupted calibration gives. The first batch that is not in the file
(or whose values differ: a changed library) runs as usual, and the file is cut there. The file is
removed once the output folder is written. Keeping trials never stops a calibration: where
the file cannot be written (a read-only folder, a full disk), the calibration goes on without it
and says so once.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from abm import __version__
from abm.calibration.config import CalibrationConfig
from abm.scenario import Scenario

FORMAT = 1


def journal_path(target: Path) -> Path:
    """Where the trials of a calibration into the folder ``target`` are kept while it runs."""
    return target.parent / f".{target.name}.trials.jsonl"


def calibration_key(sc: Scenario) -> str:
    """What the kept trials belong to: the resolved scenario (its calibration section, with the
    sampler's seed and batch, included) and abm's version."""
    text = json.dumps({"abm": __version__, "scenario": sc.model_dump(mode="json")}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


class TrialJournal:
    """The kept trials of one calibration (:mod:`abm.calibration.journal`)."""

    def __init__(self, path: Path, key: str, cfg: CalibrationConfig, warn: Callable[[str], None] | None = None) -> None:
        self.path, self.key, self.cfg, self.warn = path, key, cfg, warn
        self.entries: list[dict[str, Any]] = []  # by trial number, from 0
        self.found = 0  # trials read from an earlier, unfinished calibration of the same scenario
        self.replaced = False  # the file held another scenario's trials, or could not be read
        self.writable = True  # False once a write failed: trials are no longer kept
        if path.exists():
            try:
                self.entries = self._read()
            except OSError as exc:
                self._failed(exc)
                return
            self.found = len(self.entries)
            self.replaced = not self.entries
        self._rewrite()

    def _failed(self, exc: OSError) -> None:
        """Keep no more trials (the calibration goes on), and say so once."""
        if self.writable and self.warn is not None:
            self.warn(
                f"finished trials cannot be kept in {self.path} ({exc.strerror or exc}); the calibration goes on, "
                "but if it stops before its end it will start over"
            )
        self.writable = False

    def _read(self) -> list[dict[str, Any]]:
        """The file's trials if it is this calibration's, else none. A line cut short by a killed
        process ends the trials read."""
        entries: list[dict[str, Any]] = []
        try:
            with self.path.open(encoding="utf-8") as f:
                header = json.loads(f.readline() or "null")
                if not isinstance(header, dict) or header.get("key") != self.key or header.get("format") != FORMAT:
                    return []
                for line in f:
                    try:
                        entry = json.loads(line)
                    except json.JSONDecodeError:
                        break
                    if entry.get("number") != len(entries):
                        break
                    entries.append(entry)
        except (UnicodeDecodeError, json.JSONDecodeError):
            return []
        return entries

    def _rewrite(self) -> None:
        """The file anew with the header and the entries kept (written aside, then renamed)."""
        if not self.writable:
            return
        tmp = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with tmp.open("w", encoding="utf-8") as f:
                f.write(json.dumps({"format": FORMAT, "key": self.key}) + "\n")
                for entry in self.entries:
                    f.write(json.dumps(entry) + "\n")
            tmp.replace(self.path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            self._failed(exc)

    def kept(self, first: int, values: list[dict[str, float]]) -> list[pd.DataFrame] | None:
        """The raw series of trials ``first``, ``first + 1``, ... if the file holds all of them
        with these values; else None, and the file is cut before ``first`` (they run again)."""
        stored = self.entries[first : first + len(values)]
        if len(stored) == len(values) and all(e["values"] == v for e, v in zip(stored, values, strict=True)):
            return [self._frame(e["raw"]) for e in stored]
        if len(self.entries) > first:
            del self.entries[first:]
            self._rewrite()
        return None

    def add(self, number: int, values: dict[str, float], raw: pd.DataFrame) -> None:
        """Keep a finished trial (appended and flushed at once)."""
        entry = {"number": number, "values": values, "raw": {c: raw[c].tolist() for c in raw.columns}}
        self.entries.append(entry)
        if not self.writable:
            return
        try:
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(entry) + "\n")
        except OSError as exc:
            self._failed(exc)

    def _frame(self, raw: dict[str, list[float]]) -> pd.DataFrame:
        days = len(next(iter(raw.values())))
        index = pd.date_range(self.cfg.start_date, periods=days, freq="D")
        return pd.DataFrame({c: pd.Series(v, dtype="float64").to_numpy() for c, v in raw.items()}, index=index)

    def remove(self) -> None:
        """The calibration is written: its kept trials go."""
        try:
            self.path.unlink(missing_ok=True)
        except OSError as exc:  # the results are written; a file left behind is harmless
            self._failed(exc)
