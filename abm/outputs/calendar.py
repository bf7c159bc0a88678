"""Calendar dates of simulation days, where a scenario gives the date of day 0
(``simulation.start_date``): the tables' ``date`` column and the summary's peak dates."""

from __future__ import annotations

from datetime import date, timedelta

import pandas as pd


def date_of(start: date, day: int) -> str:
    """The ISO date (YYYY-MM-DD) of simulation day ``day`` when day 0 is ``start``."""
    return (start + timedelta(days=int(day))).isoformat()


def with_dates(table: pd.DataFrame, start: date | None) -> pd.DataFrame:
    """``table`` (with a ``day`` column) with a ``date`` column after it (an empty table gets the
    column too); unchanged without a start date."""
    if start is None:
        return table
    days = table["day"].unique()
    dates = pd.Series([date_of(start, d) for d in days], index=days)
    out = table.copy()
    out.insert(out.columns.get_loc("day") + 1, "date", table["day"].map(dates).to_numpy())
    return out
