"""Days written as dates in a scenario: with ``simulation.start_date`` (the date of day 0), a day
setting (``start_day``, ``from_day``, ``until_day``, ``seeding.day``, an entry of
``outputs.map_days``) may be written as a date, YYYY-MM-DD, and is read as the number of days
after the start date. The scenario as run holds day numbers. ``simulation.start_date`` and
``calibration.start_date`` name one date, day 0's: either, given alone, gives it to the other
(:func:`shared_start_date`)."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

# The keys whose values are simulation days, wherever they are in a scenario.
DAY_KEYS = frozenset({"day", "start_day", "from_day", "until_day"})
DAY_LISTS = frozenset({"map_days"})
ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def as_date(value: Any) -> dt.date | None:
    """``value`` as a date when it is one (YAML reads 2020-03-01 as a date; a sweep's values
    and quoted text are ISO strings), else None."""
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value
    if isinstance(value, str) and ISO_DATE.match(value.strip()):
        try:
            return dt.date.fromisoformat(value.strip())
        except ValueError:
            return None  # not a calendar date: the schema names the value as it is
    return None


def dates_as_text(value: Any) -> Any:
    """``value`` with every date (at any depth) as its ISO text, as a sweep's values are kept
    (text goes into its tables and JSON; a day setting reads the text as a date)."""
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: dates_as_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [dates_as_text(v) for v in value]
    return value


def shared_start_date(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with day 0's date given to both ``simulation.start_date`` and
    ``calibration.start_date`` when a scenario with a calibration section gives it in only one of
    them (a key left out or null is not given; neither given: as it is, the calibration's default
    then being 2020-02-01 and the run's none). Only a date is given on: a value that is none is
    left for the schema to name at its own key; two different dates are refused by the schema."""
    simulation, calibration = data.get("simulation"), data.get("calibration")
    if not isinstance(calibration, dict) or not (simulation is None or isinstance(simulation, dict)):
        return data
    run_date, fitted = (simulation or {}).get("start_date"), calibration.get("start_date")
    if run_date is None and as_date(fitted) is not None:
        return {**data, "simulation": {**(simulation or {}), "start_date": fitted}}
    if fitted is None and as_date(run_date) is not None:
        return {**data, "calibration": {**calibration, "start_date": run_date}}
    return data


@dataclass(frozen=True)
class DateRead:
    """A day setting written as a date, at key path ``key`` (``seeding.day``,
    ``outputs.map_days[1]``), and the day number it was read as."""

    key: str
    date: dt.date
    day: int

    def named_in(self, message: str) -> bool:
        """Whether ``message`` names this setting: its key path (a list's entry by the list's),
        or its section's path and its own key (``...closures[0]: until_day (14) must ...``)."""
        key = re.sub(r"\[\d+\]$", "", self.key)
        section, _, leaf = key.rpartition(".")
        named = re.search(rf"\b{re.escape(leaf)}\b", message) is not None
        return key in message or (bool(section) and section in message and named)


def with_dates_read(message: str, read: list[DateRead], start: Any) -> str:
    """``message`` with the dates it names read as day numbers said after it: a scenario's checks
    see the day numbers, which the user did not write (``seeding.day: 182 is not within ...``)."""
    named = [r for r in read if r.named_in(message)]
    if not named:
        return message
    days = "; ".join(f"{r.key}: {r.date} is day {r.day}" for r in named)
    sep = "\n  " if "\n" in message else " "  # a message of several lines gets a line of its own
    return f"{message}{sep}(days written as dates, counted from simulation.start_date {start}: {days})"


def with_day_dates(text: str, start: dt.date | None) -> str:
    """``text`` with the date of each simulation day it names (``day 182``) after it, ``day 182
    (2020-08-01)``, where day 0 has the date ``start``; unchanged without a start date."""
    if start is None:
        return text
    return re.sub(r"\bday (\d+)\b", lambda m: f"{m[0]} ({start + dt.timedelta(days=int(m[1]))})", text)


def days_from_dates(data: dict[str, Any]) -> tuple[dict[str, Any], list[str], list[DateRead]]:
    """``data`` with every day written as a date replaced by its day number, the problems (a
    date without ``simulation.start_date``, or one before it), each naming the key, and the
    dates read as days (for messages about them: :func:`with_dates_read`)."""
    simulation = data.get("simulation")
    given = simulation.get("start_date") if isinstance(simulation, dict) else None
    start = as_date(given)
    if given is not None and start is None:
        return data, [], []  # a start date that is none: the schema names it (not "give a start date")
    problems: list[str] = []
    read: list[DateRead] = []

    def day_of(value: Any, where: str) -> Any:
        when = as_date(value)
        if when is None:
            return value
        if start is None:
            problems.append(
                f"{where}: {when} is a date: give simulation.start_date (the date of day 0) to write days as "
                "dates, or write the day's number"
            )
            return value
        if when < start:
            problems.append(f"{where}: {when} is not allowed: it is before simulation.start_date ({start})")
            return value
        read.append(DateRead(where, when, (when - start).days))
        return read[-1].day

    def walk(node: Any, path: str) -> Any:
        if isinstance(node, dict):
            out = {}
            for key, value in node.items():
                where = f"{path}.{key}" if path else str(key)
                if key in DAY_KEYS:
                    out[key] = day_of(value, where)
                elif key in DAY_LISTS and isinstance(value, list):
                    out[key] = [day_of(v, f"{where}[{i}]") for i, v in enumerate(value)]
                else:
                    out[key] = walk(value, where)
            return out
        if isinstance(node, list):
            return [walk(v, f"{path}[{i}]") for i, v in enumerate(node)]
        return node

    return walk(data, ""), problems, read
