"""Age ranges in years as a vaccination priority list names them: ``"65+"`` (65 and over) and
``"65-74"`` (65 to 74), beside the ten-year age groups 0..8, which stand for the ranges 0-9 ..
70-79 and 80+. A population knows its agents' ages only as finely as the bands they were drawn in
(a region's ``age_bands``, within which ages are drawn uniformly; the reference population's
ten-year groups, whose agents all have their group's first year as their age), so a range must
start and end where a band does: :func:`cut_band` finds the band it would cut instead.
Standard library only (loading a scenario loads no numpy or torch)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

# The oldest age in years a range may name.
OLDEST = 120
# The oldest ten-year age group (80+) and the number of groups.
LAST_GROUP = 8
_RANGE = re.compile(r"(\d{1,3})(?:\+|-(\d{1,3}))")
# How a range is written, for messages.
FORMS = "an age range in years ('65+': 65 and over; '65-74': 65 to 74)"


class AgeRange(NamedTuple):
    """Ages ``first`` to ``last`` in years, both included; ``last`` None: and over."""

    first: int
    last: int | None

    def __str__(self) -> str:
        return f"{self.first}+" if self.last is None else f"{self.first}-{self.last}"

    def ages(self) -> range:
        """The ages in years it holds, up to :data:`OLDEST`."""
        return range(self.first, (OLDEST if self.last is None else self.last) + 1)


def parse_range(text: str) -> AgeRange | None:
    """The range ``text`` writes (``65+``, ``65-74``), or None where it is written otherwise (a
    setting's name). The range may be empty or past :data:`OLDEST`: :func:`range_problem` says so."""
    m = _RANGE.fullmatch(text)
    if m is None:
        return None
    return AgeRange(int(m[1]), None if m[2] is None else int(m[2]))


def range_problem(r: AgeRange) -> str | None:
    """Why a written range cannot be a priority entry (empty, or ages past :data:`OLDEST`); None
    where it can."""
    if r.first > OLDEST or (r.last is not None and r.last > OLDEST):
        return f"{str(r)!r} names ages past {OLDEST}, the oldest a range may name"
    if r.last is not None and r.last < r.first:
        return f"{str(r)!r} is an empty range: its first age is past its last (write {r.last}-{r.first})"
    return None


def group_range(group: int) -> AgeRange:
    """The ages of ten-year age group ``group`` (0 = 0-9 ... 8 = 80+)."""
    return AgeRange(10 * group, None if group == LAST_GROUP else 10 * group + 9)


def entry_range(entry: int | str) -> AgeRange | None:
    """The ages a priority entry stands for: an age group's, a written range's; None for a
    setting's name (or the long-term care residents)."""
    if isinstance(entry, int):
        return group_range(entry)
    return parse_range(entry)


def written(entry: int | str) -> str:
    """A priority entry as messages give it: ``8``, ``'65+'``."""
    return repr(entry) if isinstance(entry, str) else str(entry)


def covered_entries(entries: Sequence[int | str]) -> list[tuple[str, str]]:
    """Age entries whose every age earlier age entries take (``'75+'`` after ``'65+'``), each with
    those earlier entries, as :func:`written` gives them: such a class would vaccinate no one."""
    earlier: list[tuple[str, set[int]]] = []
    out = []
    for entry in entries:
        r = entry_range(entry)
        if r is None or range_problem(r) is not None:
            continue
        ages = set(r.ages())
        if ages <= set().union(*(taken for _, taken in earlier)):
            out.append((written(entry), ", ".join(name for name, taken in earlier if taken & ages)))
        earlier.append((written(entry), ages))
    return out


Band = tuple[int, int | None]  # first and last age of a band; last None: and over


def cut_band(r: AgeRange, bands: Sequence[Band]) -> tuple[int, Band] | None:
    """The first of ``r``'s ends (its first age, the age after its last) that falls inside one
    of ``bands`` instead of at a band's first age, with that band; None where the range's ages
    are whole bands (an end past the oldest band cuts nothing)."""
    ends = [r.first] + ([] if r.last is None else [r.last + 1])
    for end in ends:
        for band in bands:
            lo, hi = band
            if lo < end and (hi is None or end <= hi):
                return end, band
    return None


def beyond_bands(r: AgeRange, bands: Sequence[Band]) -> bool:
    """Whether ``r`` starts past the oldest band's last age: no agent is that old."""
    last = bands[-1][1] if bands else None
    return last is not None and r.first > last


def band_text(band: Band) -> str:
    """A band as a message names it: ``65-69``, ``80+``."""
    return f"{band[0]}+" if band[1] is None else f"{band[0]}-{band[1]}"


def bands_problem(r: AgeRange, bands: Sequence[Band], whose: str) -> str | None:
    """Why a population whose ages were drawn in ``bands`` (``whose``: what names it in a message)
    cannot tell range ``r`` exactly: an end inside a band (its agents' years tell no more than
    the band, so the range would be rounded to bands) or a first age past the oldest band (no
    agent is that old); None where it can, or where ``bands`` is empty (ages exact to the year)."""
    if not bands:
        return None
    if beyond_bands(r, bands):
        return (
            f"{str(r)!r} is not allowed: {whose} has no agent that old (its oldest age band is "
            f"{band_text(bands[-1])}), so it would vaccinate no one"
        )
    cut = cut_band(r, bands)
    if cut is None:
        return None
    end, band = cut
    after = [b[0] for b in bands if b[0] > band[0]][:1]  # where the next band starts, if one does
    return (
        f"{str(r)!r} is not allowed: {whose} knows its agents' ages only by age band, and {end} falls inside its "
        f"band {band_text(band)} (an agent's year there tells no more than the band), so the range would be "
        f"rounded to bands; start and end it where a band starts: {band[0]}" + "".join(f" or {a}" for a in after)
    )
