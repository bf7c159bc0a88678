"""Byte counts as people read them, in the unit that shows their size (``512 B``, ``4.1 kB``,
``2.00 MB``): in megabytes alone, anything under 5 kB read ``0.00``. Decimal units (a kB is
10^3 bytes, an MB 10^6). What programs read (report.json) keeps the plain number of bytes."""

from __future__ import annotations

# (bytes in the unit, its name, decimals shown), smallest first
UNITS = ((1, "B", 0), (10**3, "kB", 1), (10**6, "MB", 2), (10**9, "GB", 2))


def size_text(count: float) -> str:
    """``count`` bytes in the largest unit it holds one of (bytes below 1 kB), with that unit's
    decimals; a value that rounds up to 1000 of a unit is given in the next (999,999 bytes:
    ``1.00 MB``, not ``1000.0 kB``)."""
    for i, (scale, unit, decimals) in enumerate(UNITS):
        last = i == len(UNITS) - 1
        if not last and abs(count) >= UNITS[i + 1][0]:
            continue
        text = f"{count / scale:.{decimals}f}"
        if last or abs(float(text)) < 1000:
            return f"{text} {unit}"
    raise AssertionError("not reached")  # the last unit always returns
