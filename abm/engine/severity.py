"""What an infection leads to, by age, as the disease settings give it: the chance that an
infection brings symptoms, a hospital stay, intensive care and death.

These follow from ``disease.branching`` alone (each row is the chance of the next stage on
entering a stage), as the chance that an agent's path from infection ever enters a stage: a
hitting probability of the chain, so a table that loops (ICU back to hospital) is counted right.
They hold for an agent whom nothing else changes (no vaccine, no prior infection), and the
calibration's ``death_multiplier`` scales observed deaths, not these. Needs no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from abm.engine.config import ABSORBING, AGE_GROUP_LABELS, SYMPTOMATIC, DiseaseConfig, Stage

# Each outcome: the stages whose entry it counts (any of them).
OUTCOMES: dict[str, tuple[int, ...]] = {
    "symptoms": tuple(int(s) for s in SYMPTOMATIC),
    "hospital": (int(Stage.HOSPITALIZED),),
    "icu": (int(Stage.CRITICAL_ICU),),
    "death": (int(Stage.DEATH),),
}


def hitting_probability(branching: np.ndarray, targets: tuple[int, ...]) -> float:
    """The chance that an infection (the susceptible row of one age group's ``branching``, an
    11 x 11 table) ever enters one of ``targets``.

    Solved exactly: ``h = into + onward @ h`` over the stages from which a target can be reached
    (elsewhere ``h`` is 0), a system without a singular matrix since every such stage leaks to a
    target. (Iterating the equation from 0 took a step per stage passed, so a loop that is left
    rarely, 1 time in 100,000, was far from its limit after 10,000 steps.)"""
    rows = np.asarray(branching, dtype=np.float64)
    into = rows[:, list(targets)].sum(axis=1)
    onward = rows.copy()
    onward[:, list(targets)] = 0.0  # a path stops counting at its first target
    onward[:, [int(s) for s in ABSORBING]] = 0.0
    reach = into > 0
    while True:  # the stages with a path to a target
        more = reach | (onward[:, reach] > 0).any(axis=1)
        if (more == reach).all():
            break
        reach = more
    hit = np.zeros(rows.shape[0])
    at = np.flatnonzero(reach)
    if at.size:
        hit[at] = np.linalg.solve(np.eye(at.size) - onward[np.ix_(at, at)], into[at])
    return float(np.clip(hit[Stage.SUSCEPTIBLE], 0.0, 1.0))


@dataclass(frozen=True)
class Severity:
    """One age group's chances, per infection, of each outcome (0-1)."""

    age_group: str
    symptoms: float
    hospital: float
    icu: float
    death: float


def severity_by_age(disease: DiseaseConfig) -> list[Severity]:
    """Each age group's chances of symptoms, hospital, intensive care and death per infection."""
    table = np.asarray(disease.branching, dtype=np.float64)
    return [
        Severity(label, **{name: hitting_probability(table[a], stages) for name, stages in OUTCOMES.items()})
        for a, label in enumerate(AGE_GROUP_LABELS)
    ]


def resident_severity(disease: DiseaseConfig) -> Severity | None:
    """The chances of a long-term-care resident (``disease.long_term_care_branching``), or None
    where residents follow their age group's rows."""
    table = disease.long_term_care_branching
    if table is None:
        return None
    rows = np.asarray(table, dtype=np.float64)
    return Severity(
        "long-term-care residents", **{name: hitting_probability(rows, stages) for name, stages in OUTCOMES.items()}
    )


def weighted_severity(rows: list[Severity], weights: np.ndarray, label: str) -> Severity:
    """The chances for infections spread over the age groups in proportion to ``weights``."""
    w = np.asarray(weights, dtype=np.float64) / float(np.sum(weights))
    return Severity(
        label,
        **{name: float(sum(wi * getattr(r, name) for wi, r in zip(w, rows, strict=True))) for name in OUTCOMES},
    )
