"""Which runs ``abm compare`` pairs replicate by replicate (common random numbers) and what it
subtracts then, on tiny hand-made runs whose resolved scenarios say how they drew."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from abm.outputs.compare import comparison_table
from abm.outputs.plots import RunTables

AGENTS = 3000


def tiny(
    label: str,
    admitted: list[float],
    costs: list[float],
    seed: int = 7,
    device: str = "cpu",
    region: str = "king_county",
) -> RunTables:
    """A one-day run of 3,000 agents whose replicates admit ``admitted`` and spend ``costs``,
    drawn with ``seed`` on ``device`` in ``region`` (its resolved scenario's)."""
    reps = list(range(len(admitted)))
    ts = pd.DataFrame({"day": 0, "replicate": reps, "new_hospitalizations": admitted, "deaths": 0.0})
    costs_table = pd.DataFrame({"item": "x", "day": 0, "replicate": reps, "count": 1.0, "unit_cost": costs})
    summary: dict[str, Any] = {
        "agents": AGENTS,
        "days": 1,
        "replicates": len(admitted),
        "peak_hospital_occupancy": {"value": 1.0, "day": 0, "per_100k": 1e5 / AGENTS, "at_end": False},
        "peak_icu": {"value": 0.0, "day": None, "per_100k": 0.0, "at_end": False},
        "hospital_capacity": {"beds_per_100k": 55.0, "beds": 55.0 * AGENTS / 1e5, "days_over_capacity": 0},
        "cumulative_infected": {"share": 0.1},
        "deaths": {"mean": 0.0},
        "total_cost": {"mean": sum(costs) / len(costs)},
    }
    scenario = {
        "simulation": {"seed": seed, "device": device},
        "population": {"agents": AGENTS, "region": region},
    }
    return RunTables(label, ts, pd.DataFrame(), costs_table, summary, scenario)


def averted_by(base: RunTables, other: RunTables) -> str:
    return str(comparison_table([base, other]).iloc[1].averted_by)


def test_runs_on_the_cpu_and_a_gpu_are_independent_but_two_gpus_pair() -> None:
    """The CPU and a GPU draw different streams from one seed; two GPUs of one kind draw the same."""
    base = tiny("base", [3.0, 4.0], [0.0, 0.0])
    assert averted_by(base, tiny("other", [1.0, 2.0], [0.0, 0.0])) == "paired replicates"
    assert averted_by(base, tiny("gpu", [1.0, 2.0], [0.0, 0.0], device="cuda")) == "independent runs"
    gpu0 = tiny("gpu0", [3.0, 4.0], [0.0, 0.0], device="cuda:0")
    assert averted_by(gpu0, tiny("gpu1", [1.0, 2.0], [0.0, 0.0], device="cuda:1")) == "paired replicates"


def test_runs_of_two_regions_are_independent() -> None:
    """One seed and number of agents draws different populations in different regions."""
    base = tiny("base", [3.0, 4.0], [0.0, 0.0])
    assert averted_by(base, tiny("other", [1.0, 2.0], [0.0, 0.0], region="/data/my_region")) == "independent runs"


def test_runs_of_different_replicates_are_compared_as_independent_runs() -> None:
    """Same seed and agents but 2 and 3 replicates: no replicate-by-replicate pairing (Welch's
    interval: 3.5 - 2 = 1.5 averted per 3,000 agents, 50 per 100,000)."""
    table = comparison_table([tiny("base", [3.0, 4.0], [0.0, 0.0]), tiny("other", [1.0, 2.0, 3.0], [0.0] * 3)])
    row = table.iloc[1]
    assert row.averted_by == "independent runs"
    assert row.hospitalizations_averted_per_100k == pytest.approx(1.5 * 1e5 / AGENTS)


def test_a_paired_cost_per_averted_hospitalization_is_extra_cost_over_admissions_averted() -> None:
    """Paired runs, each replicate spending $20 more and admitting 2 fewer: $10 per admission
    averted at both ends of the interval (no noise), not -$10."""
    base = tiny("base", [3.0, 5.0, 4.0], [0.0, 0.0, 0.0])
    other = tiny("other", [1.0, 3.0, 2.0], [20.0, 20.0, 20.0])
    row = comparison_table([base, other]).iloc[1]
    assert row.averted_by == "paired replicates"
    assert row.cost_per_averted_hospitalization == pytest.approx(10.0)
    assert (row.cost_per_averted_low, row.cost_per_averted_high) == pytest.approx((10.0, 10.0))
