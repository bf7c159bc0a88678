"""Infections and deaths by age group in a sweep's tables.

Each run of a sweep is one replicate, and its ``summary.json`` already has them by ten-year age
group (:func:`abm.outputs.summary.by_age`, the ``by_age`` block ``abm run`` writes and prints):
those infected by the end, seeded ones too, and those dead. The sweep takes them from there, as
counts of the run's agents like ``cumulative_infected`` and ``deaths``, so that over the groups
they add up to those two columns. They are named :func:`age_column` (``deaths_age_80_plus``) and
come last in ``sweep.csv``; ``sweep_summary.csv`` gives their mean and sd over replicates, as for
the other outcomes, also last, and then their changes from the first variant with 95% intervals,
taken as the totals' are (:func:`abm.sweep.changes_from_first` and :func:`abm.sweep.in_region`:
per 100,000 agents of all ages, and for the region). A result without them (made by hand from
Python; a sweep resumed from its journal reuses only runs of the same abm code, which have them)
has empty cells there, and so are its variant's means and sds, which over the other replicates
would not add up to the variant's totals, and the changes of a variant where it or the first has
such a result.
"""

from __future__ import annotations

from typing import Any

from abm.populations.population import AGE_GROUP_LABELS  # not abm.engine's: that loads torch

# The sweep's outcomes given by age group, with the key of summary.json's by_age rows they come from.
BY_AGE = {"cumulative_infected": "infected", "deaths": "deaths"}


def age_column(outcome: str, group: str) -> str:
    """The column of ``outcome`` (a key of :data:`BY_AGE`) for age group ``group`` (a label of
    :data:`abm.engine.disease.AGE_GROUP_LABELS`): ``cumulative_infected_age_0_9`` for ``0-9``,
    ``deaths_age_80_plus`` for ``80+``; letters, digits and underscores only."""
    return f"{outcome}_age_{group.replace('-', '_').replace('+', '_plus')}"


# sweep.csv's by-age columns, in order: every age group's infections, then every group's deaths.
AGE_COLUMNS = tuple(age_column(outcome, group) for outcome in BY_AGE for group in AGE_GROUP_LABELS)

# The line `abm sweep` prints to say where they are (the console's tables leave them out).
WHERE_BY_AGE = "by age group: " + " and ".join(f"{o}_age_*" for o in BY_AGE) + " in sweep.csv and sweep_summary.csv"


def age_outcomes(summary: dict[str, Any]) -> dict[str, int]:
    """The by-age columns of one run from its summary (``summary.json``'s contents): its
    ``by_age`` rows' means, which for a run of a single replicate, as each of a sweep's is, are
    that replicate's counts. A :class:`ValueError` for a summary of several replicates."""
    if summary["replicates"] != 1:
        raise ValueError(f"a sweep's run has one replicate, not {summary['replicates']}")
    rows = {row["age_group"]: row for row in summary["by_age"]}
    return {
        age_column(outcome, group): int(rows[group][key]["mean"])
        for outcome, key in BY_AGE.items()
        for group in AGE_GROUP_LABELS
    }
