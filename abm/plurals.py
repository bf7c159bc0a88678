"""Counts in words for messages and titles: ``1 replicate``, ``3 replicates``."""

from __future__ import annotations


def plural(noun: str, n: int) -> str:
    """``noun`` for a count of ``n``: singular for 1, plural (an added s) otherwise."""
    return noun if n == 1 else f"{noun}s"


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun`` in the right number: ``1 replicate``, ``1,000 replicates``."""
    return f"{n:,} {plural(noun, n)}"
