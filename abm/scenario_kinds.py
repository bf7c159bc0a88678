"""The three kinds of scenario file, told apart by their top-level keys: an epidemic scenario (for
``abm run``, ``sweep`` and ``calibrate``), a learning scenario and a private-calibration one
(``kind: private_calibration``; both for ``abm learn``). Standard library only."""

from __future__ import annotations

from typing import Any

LEARNING, PRIVATE_CALIBRATION = "learning", "private calibration"
# The top-level keys of a learning scenario that no epidemic one has.
LEARNING_KEYS = frozenset({"protocols", "split", "data"})
# The sections of an epidemic scenario, by which one is recognised.
EPIDEMIC_SECTIONS = frozenset({"extends", "population", "simulation", "disease", "interventions", "seeding"})


def learning_kind(data: dict[str, Any]) -> str | None:
    """:data:`PRIVATE_CALIBRATION` for a top-level ``kind: private_calibration``, :data:`LEARNING`
    for a mapping with a learning scenario's keys and no other ``kind``, else None."""
    if data.get("kind") == "private_calibration":
        return PRIVATE_CALIBRATION
    return LEARNING if "kind" not in data and LEARNING_KEYS & data.keys() else None


def not_epidemic(kind: str, source: str, python: bool) -> str:
    """The message for a scenario of ``kind`` (learning or private calibration, from ``source``)
    given where an epidemic one is needed, pointing to what runs it: ``abm learn FILE`` or, from
    Python (``python``), ``abm.learn``."""
    where = "abm.learn" if python else f"`abm learn {source}`"
    return f"{source}: this is a {kind} scenario, not an epidemic one; run it with {where}"
