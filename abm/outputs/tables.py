"""Result tables: one row per day and replicate, by age group, by tract."""

from __future__ import annotations

import numpy as np
import pandas as pd

from abm.engine.disease import AGE_GROUP_LABELS, STAGE_NAMES, Stage
from abm.engine.recorder import SimulationResult

HOSPITAL_STAGES = [Stage.HOSPITALIZED, Stage.CRITICAL_ICU, Stage.HOSPITALIZED_RECOVERING]
ACTIVE_STAGES = [s for s in Stage if s not in (Stage.SUSCEPTIBLE, Stage.RECOVERED, Stage.DEATH)]


def _derived(stages: np.ndarray, new: np.ndarray, agents: np.ndarray | int) -> dict[str, np.ndarray]:
    """Columns computed from stage counts [..., 11] and new infections [...]."""
    return {
        "new_infections": new,
        "cumulative_infected": agents - stages[..., Stage.SUSCEPTIBLE],
        "active": stages[..., ACTIVE_STAGES].sum(-1),
        "hospitalized": stages[..., Stage.HOSPITALIZED],
        "icu": stages[..., Stage.CRITICAL_ICU],
        "hospital_occupancy": stages[..., HOSPITAL_STAGES].sum(-1),
        "deaths": stages[..., Stage.DEATH],
    }


def timeseries(res: SimulationResult) -> pd.DataFrame:
    """One row per (day, replicate): every stage count and the derived columns.

    Counts are at the end of the day; ``new_infections`` happened that day (the initial
    infections count on their day); ``deaths`` is cumulative; ``hospitalized`` is the
    HOSPITALIZED stage alone and ``hospital_occupancy`` adds ICU and step-down beds;
    ``new_hospitalizations``, ``new_icu`` and ``new_deaths`` count entries that day. The
    run's interventions add their daily counts (``SimulationResult.activity``: tests, doses...).
    Where infections were put down to infectors: ``secondary_infections``, those caused by the
    agents infected that day; ``reproduction_number``, their mean per agent (empty on a day
    without infections or with agents who may still infect someone at the end); ``generation_interval``, the
    mean days from infector's infection to infectee's over the day's infections by transmission.
    """
    d, r = res.days, res.replicates
    stages = res.stages
    cols: dict[str, np.ndarray] = {
        "day": np.repeat(np.arange(d), r),
        "replicate": np.tile(np.arange(r), d),
    }
    for i, name in enumerate(STAGE_NAMES):
        cols[name] = stages[:, :, i].reshape(-1)
    for k, v in _derived(stages, res.new_infections, res.agents).items():
        cols[k] = v.reshape(-1)
    entries = res.entries.astype(np.int64)
    cols["new_hospitalizations"] = entries[:, :, Stage.HOSPITALIZED].reshape(-1)
    cols["new_icu"] = entries[:, :, Stage.CRITICAL_ICU].reshape(-1)
    cols["new_deaths"] = entries[:, :, Stage.DEATH].reshape(-1)
    for name, counts in res.activity.items():
        cols[name] = counts.reshape(-1)
    r = res.reproduction_number
    if r is not None and res.secondary is not None and res.generation_days is not None:
        cols["secondary_infections"] = res.secondary.reshape(-1)
        cols["reproduction_number"] = r.reshape(-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            interval = res.generation_days / res.transmitted
        cols["generation_interval"] = np.where(res.transmitted > 0, interval, np.nan).reshape(-1)
    return pd.DataFrame(cols)


def by_age(res: SimulationResult) -> pd.DataFrame:
    """One row per (day, replicate, age group)."""
    d, r = res.days, res.replicates
    g = len(AGE_GROUP_LABELS)
    agents = res.stages_by_age[0].sum(-1)  # [replicate, age]
    cols: dict[str, np.ndarray] = {
        "day": np.repeat(np.arange(d), r * g),
        "replicate": np.tile(np.repeat(np.arange(r), g), d),
        "age_group": np.tile(np.array(AGE_GROUP_LABELS), d * r),
        "agents": np.broadcast_to(agents, (d, r, g)).reshape(-1),
    }
    for k, v in _derived(res.stages_by_age, res.new_by_age, agents[None]).items():
        cols[k] = v.reshape(-1)
    return pd.DataFrame(cols)


def by_tract(res: SimulationResult, tracts: pd.DataFrame) -> pd.DataFrame:
    """One row per (day, tract) with the mean over replicates, and per 100,000 agents (empty,
    NaN, for a tract that has no agents: a small run leaves many tracts without any)."""
    d, t, r = res.days, len(tracts), res.replicates
    # Sums over replicates in integers, divided once: a mean such as 0.1 is then written as 0.1,
    # not as the 0.09999999999999432 that differences of float means leave.
    stages = res.stages_by_tract.sum(axis=1, dtype=np.int64)  # [day, tract, stage]
    agents = res.stages_by_tract[0, 0].sum(-1)  # [tract]
    summed = _derived(stages, res.new_by_tract.sum(axis=1, dtype=np.int64), r * agents[None])
    derived = {k: v / r for k, v in summed.items()}
    cols: dict[str, np.ndarray] = {
        "day": np.repeat(np.arange(d), t),
        "geoid": np.tile(tracts["geoid"].to_numpy(), d),
        "agents": np.tile(agents, d),
    }
    for k in ("new_infections", "cumulative_infected", "active", "hospital_occupancy", "deaths"):
        cols[k] = derived[k].reshape(-1)
    per = np.where(agents > 0, 1e5 / np.maximum(agents, 1), np.nan)
    cols["cumulative_per_100k"] = (derived["cumulative_infected"] * per[None]).reshape(-1)
    return pd.DataFrame(cols)
