"""The first week's reproduction number and the generation interval in `abm compare`'s table.

Both come from each run's summary.json (``reproduction_number``: ``initial`` and
``generation_interval_days``, each the mean, sd and number of the replicates that have one), so the
table shows the figures `abm run` printed. Per run: the mean (over how many replicates, where not
all have one) and, after the first run, its change against the first run: the difference of the
means, with Welch's 95% interval from the two runs' means, sds and replicates
(:func:`abm.outputs.differences.welch_of_moments`). summary.json keeps no replicate's own
generation interval, so runs that share their draws are not paired here: their interval is wider
than a paired one would be.

A run may lack a figure: one written before abm recorded them (no ``reproduction_number``), one
run with ``outputs.reproduction_number: false`` (null), or one whose figure is null (no
replicate's first week of infections final by the last day; nothing transmitted). Its cells read
"n/a", never 0, and the note under the table names it and why (:func:`lacking_notes`, which
:func:`abm.compare` gives as warnings too).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import pandas as pd

from abm.outputs.differences import welch_of_moments

NA = "n/a"


@dataclass(frozen=True)
class Figure:
    """One figure of summary.json's ``reproduction_number``: its ``key`` there, the least decimal
    places the reports show it with, and its name in the note."""

    key: str
    places: int
    words: str


# By the table's column of the mean (sweep.csv's names for the same figures).
FIGURES = {
    "reproduction_number_initial": Figure("initial", 2, "the first week's reproduction number"),
    "generation_interval": Figure("generation_interval_days", 1, "the generation interval"),
}
# The columns of each figure after its mean: the replicates it is over, its change against the
# first run and that change's 95% interval.
CHANGES = {f"{column}_change": column for column in FIGURES}
ENDS = {f"{column}_change": (f"{column}_change_low", f"{column}_change_high") for column in FIGURES}
REPLICATES = {column: f"{column}_replicates" for column in FIGURES}
LABELS = {
    "reproduction_number_initial": "reproduction number, first week (mean)",
    "reproduction_number_initial_replicates": "replicates with a first week's reproduction number",
    "reproduction_number_initial_change": "change in reproduction number, first week, vs first run (95% interval)",
    "generation_interval": "generation interval, days (mean)",
    "generation_interval_replicates": "replicates with a generation interval",
    "generation_interval_change": "change in generation interval, days, vs first run (95% interval)",
}
LABELS |= {
    end: f"{side} end of that interval"
    for ends in ENDS.values()
    for end, side in zip(ends, ("low", "high"), strict=True)
}
# The least decimal places of each column's numbers in the reports (R 1.23, 5.4 days).
PLACES = {column: figure.places for column, figure in FIGURES.items()}
PLACES |= {change: FIGURES[column].places for change, column in CHANGES.items()}


@dataclass(frozen=True)
class Spread:
    """A figure over a run's replicates: mean, sd (NaN for one replicate) and how many."""

    mean: float
    sd: float
    replicates: int


def _is_number(v: Any) -> bool:
    """Whether a JSON value is a number (true and false are not)."""
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def summary_problems(summary: dict[str, Any]) -> list[str]:
    """The entries of summary.json's ``reproduction_number`` that are not as `abm run` writes
    them, as "lacks the numbers ..." lists them; empty where it is absent (an earlier version's
    run), null (not recorded) or well formed."""
    rn = summary.get("reproduction_number")
    if rn is None:
        return []
    if not isinstance(rn, dict):
        return ["reproduction_number (an object or null)"]
    runs = summary.get("replicates")
    problems = []
    for figure in FIGURES.values():
        x = rn.get(figure.key)
        where = f"reproduction_number.{figure.key}"
        if x is None:
            continue
        if not isinstance(x, dict):
            problems.append(f"{where} (an object or null)")
            continue
        n = x.get("replicates")
        if not _is_number(n) or n < 1 or n % 1 or (_is_number(runs) and n > runs):
            problems.append(f"{where}.replicates (a whole number from 1 to the run's replicates)")
        if not _is_number(x.get("mean")):
            problems.append(f"{where}.mean")
        sd = x.get("sd")
        if not (_is_number(sd) or (sd is None and n == 1)):
            problems.append(f"{where}.sd")
    return problems


def spread(summary: dict[str, Any], column: str) -> Spread | None:
    """The figure of ``column`` (a key of :data:`FIGURES`) of a run's summary; None where the run
    lacks it (see :func:`why_missing`)."""
    x = (summary.get("reproduction_number") or {}).get(FIGURES[column].key)
    if not x:
        return None
    sd = x.get("sd")
    return Spread(float(x["mean"]), float(sd) if _is_number(sd) else math.nan, int(x["replicates"]))


# Why a run lacks both figures (a run-level reason) or one of them, by the keys of its summary.
WRITTEN_BEFORE = "written before abm recorded them (summary.json has no reproduction_number)"
NOT_RECORDED = "run with outputs.reproduction_number: false (infections not put down to infectors)"
NONE_FINAL = "no replicate's first week of infections was final by the last simulated day"
NONE_TRANSMITTED = "no infection was transmitted"


def why_missing(summary: dict[str, Any], column: str) -> str:
    """Why a run's summary lacks the figure of ``column`` (a key of :data:`FIGURES`), in words."""
    if "reproduction_number" not in summary:
        return WRITTEN_BEFORE
    if summary["reproduction_number"] is None:
        return NOT_RECORDED
    return NONE_FINAL if FIGURES[column].key == "initial" else NONE_TRANSMITTED


def columns(summaries: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per run (``summaries`` in the table's order, the first the reference): for each
    figure of :data:`FIGURES` its mean, the replicates it is over, and its change against the
    first run with the change's 95% interval (NaN for the first run and where either run lacks
    the figure)."""
    table: dict[str, list[float]] = {}
    for column in FIGURES:
        figures = [spread(s, column) for s in summaries]
        base = figures[0]
        table[column] = [math.nan if f is None else f.mean for f in figures]
        table[REPLICATES[column]] = [math.nan if f is None else f.replicates for f in figures]
        change = f"{column}_change"
        for key in (change, *ENDS[change]):
            table[key] = [math.nan] * len(figures)
        for i, f in enumerate(figures[1:], start=1):
            if f is None or base is None:
                continue
            iv = welch_of_moments((f.mean, f.sd**2, f.replicates), (base.mean, base.sd**2, base.replicates))
            table[change][i], table[ENDS[change][0]][i], table[ENDS[change][1]][i] = iv.mean, iv.low, iv.high
    return pd.DataFrame(table)


def cell(key: str, text: str, row: pd.Series, first: bool) -> str:
    """A cell of these columns as the reports show it, from its formatted ``text``: a mean with
    "(k of n)" where not all of the run's replicates have the figure; "n/a" where the run lacks
    it, and in a change column where it or the first run does (the first run's own change is
    blank, as its averted counts are). Other columns' text is returned as it is."""
    if key in FIGURES:
        if not text:
            return NA
        have, runs = int(row[REPLICATES[key]]), int(row["replicates"])
        return text if have == runs else f"{text} ({have} of {runs})"
    if key in CHANGES and not text and not first:
        return NA
    return text


def explained(labels: list[str], summaries: list[dict[str, Any]]) -> str:
    """The note's sentence on these columns (with a leading space), where some run has either
    figure: how they are taken and how their changes' intervals are."""
    if all(spread(s, column) is None for s in summaries for column in FIGURES):
        return ""
    return (
        " The reproduction number of the first week is the mean over replicates of the infections that each "
        "replicate's first week of infections caused, per infection, and the generation interval the mean over "
        "replicates of the days from an infector's infection to its infectee's (summary.json's "
        'reproduction_number), each over the replicates that have one ("k of n" where not all do); their '
        "changes against the first run have Welch's 95% interval from each run's mean, sd and replicates, also "
        "where runs share their draws (summary.json keeps no replicate's own figures), which makes it wider "
        "than a paired interval."
    )


def lacking_notes(labels: list[str], summaries: list[dict[str, Any]]) -> list[str]:
    """The notes (each a sentence without its full stop) on the runs (``labels``, with their
    ``summaries``) that lack a figure, and why (both figures at once where the whole record is
    missing); and, where the first run lacks one, that no change in it is shown."""
    lacking = {column: [label for label, s in zip(labels, summaries, strict=True) if spread(s, column) is None]
               for column in FIGURES}  # fmt: skip
    reasons: dict[tuple[str, str], list[str]] = {}  # (what, why): runs
    both = " and ".join(figure.words for figure in FIGURES.values())
    for label, s in zip(labels, summaries, strict=True):
        why = {column: why_missing(s, column) for column in FIGURES if label in lacking[column]}
        if set(why.values()) & {WRITTEN_BEFORE, NOT_RECORDED}:  # the whole record: both figures
            reasons.setdefault((both, next(iter(why.values()))), []).append(label)
            continue
        for column, reason in why.items():
            reasons.setdefault((FIGURES[column].words, reason), []).append(label)
    notes = [
        f"{what[0].upper()}{what[1:]}: n/a for {', '.join(runs)}, {reason}" for (what, reason), runs in reasons.items()
    ]
    notes += [
        f"The first run lacks {figure.words}, so no run's change in it is shown"
        for column, figure in FIGURES.items()
        if labels[0] in lacking[column]
    ]
    return notes
