"""What the checks of digital and manual contact tracing share (they run in
:mod:`abm.interventions.tracing`)."""

from __future__ import annotations

from typing import Any

from pydantic import Field


def skip_tested_contacts_field() -> Any:
    """The ``skip_tested_contacts`` setting of both tracings (applied by
    :func:`abm.interventions.tracing.window_contacts`)."""
    return Field(
        False,
        description="skip a contact of day d who has taken a test on day d or later (field last_test_day); "
        "the reference code does this (docs/reference.md §6 step 2)",
    )


def tracing_notes(name: str, cfg: Any, on: dict[str, Any]) -> list[str]:
    """Notes on tracing ``name`` that would do less than its settings say: it asks its contacts to
    test (``test_contacts``) but no test type of the enabled testing is given to traced contacts
    (the requests would go untaken); or quarantine is off, so a notice asks for nothing anyone
    does, unless it leads to a test (the notices are still counted, and billed if priced)."""
    testing = on.get("testing")
    asks_tests = bool(getattr(cfg, "test_contacts", False))
    tested = testing is not None and any("traced" in test.given_to for test in testing.tests)
    notes = []
    if asks_tests and testing is not None and not tested:
        notes.append(
            f"interventions.{name}.test_contacts is true, but no test in interventions.testing.tests is given "
            "to traced contacts (add 'traced' to a test's given_to): traced contacts are not tested in this run"
        )
    if "quarantine" not in on and not (asks_tests and tested):
        notes.append(
            f"interventions.{name} notifies contacts to quarantine, but interventions.quarantine is off: no "
            "one quarantines and the notices change nothing (they are still counted, and billed if priced)"
        )
    return notes
