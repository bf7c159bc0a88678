"""Shared builders for tests: tiny hand-made populations and quiet engine settings."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from abm.engine import ContactConfig
from abm.engine.contacts import default_degrees
from abm.populations import Population, build_population, load_region
from abm.populations.population import LONG_TERM_CARE, SCHOOL


def make_population(
    households: list[list[int]], groups: list[list[int]] | None = None, ages: list[int] | None = None
) -> Population:
    """A population from explicit households (lists of consecutive agent ids, in order) and
    occupation groups (lists of agent ids). Everyone is 30 unless ``ages`` says otherwise, and
    lives in one tract."""
    n = sum(len(h) for h in households)
    assert [a for h in households for a in h] == list(range(n)), "households must list 0..n-1 in order"
    age = np.array(ages if ages is not None else [30] * n, dtype=np.int16)
    size = np.array([len(h) for h in households], dtype=np.int32)
    group = np.full(n, -1, dtype=np.int32)
    for g, members in enumerate(groups or []):
        group[members] = g
    return Population(
        age=age,
        age_group=np.minimum(age // 10, 8).astype(np.int8),
        tract=np.zeros(n, dtype=np.int32),
        household=np.repeat(np.arange(len(households)), size).astype(np.int32),
        household_start=(np.cumsum(size) - size).astype(np.int64),
        household_size=size,
        long_term_care=np.zeros(n, dtype=bool),
        group=group,
        group_category=np.zeros(len(groups or []), dtype=np.int16),
        categories=["OFFICE", SCHOOL, LONG_TERM_CARE],
        tracts=pd.DataFrame(
            {
                "geoid": ["00000000001"],
                "name": ["1"],
                "lat": [47.6],
                "lon": [-122.3],
                "land_km2": [1.0],
                "residents": [n],
                "agents": [n],
            }
        ),
        region_name="test",
    )


def quiet_contacts(**layers: dict) -> ContactConfig:
    """Contact settings with every layer off unless given."""
    base = {
        "household": {"weight": 0.0},
        "occupation": {"weight": 0.0, "rewire_probability": 0.0, "degree": {**default_degrees(), "OFFICE": 2}},
        "community": {"weight": 0.0, "mean_contacts": (0, 0, 0), "sd_contacts": (0, 0, 0)},
    }
    for name, cfg in layers.items():
        base[name] = {**base[name], **cfg}
    return ContactConfig.model_validate(base)


@pytest.fixture(scope="session")
def king_county():
    return load_region("king_county")


@pytest.fixture(scope="session")
def kc_100k(king_county):
    return build_population(king_county, 100_000, seed=7)


@pytest.fixture(autouse=True)
def _no_fast_exit(monkeypatch):
    """abm's console script ends its process without the interpreter's teardown (abm.entry):
    a test that ran it in the test process would end pytest, with exit code 0 and tests unrun.
    Here that exit raises SystemExit instead, as a normal exit would."""
    import abm.entry

    def leave(code: int) -> None:
        raise SystemExit(code)

    monkeypatch.setattr(abm.entry, "_leave", leave)
