"""The run summary: peaks of the mean curves, final shares, totals, mean and sd over
replicates."""

from __future__ import annotations

import math
from datetime import date
from typing import Any

import numpy as np

from abm.engine.disease import AGE_GROUP_LABELS, Stage
from abm.engine.recorder import SimulationResult
from abm.outputs import reproduction
from abm.outputs.calendar import date_of
from abm.outputs.peaks import peak
from abm.outputs.spread import sample_sd
from abm.outputs.tables import ACTIVE_STAGES, HOSPITAL_STAGES

# The summary's peaks (each with ``day``: null for a curve that stays at zero).
PEAKS = ("peak_hospitalized", "peak_hospital_occupancy", "peak_icu", "peak_new_infections")
# The counts that ``region_scaled`` gives for the region: mean and sd over replicates, and peaks.
SCALED_MEAN_SD = ("cumulative_infected", "hospitalizations", "deaths", "total_cost")
SCALED_PEAKS = ("peak_hospitalized", "peak_hospital_occupancy", "peak_icu")


def mean_sd(values: np.ndarray) -> dict[str, float]:
    """Mean and sample sd (:func:`abm.outputs.spread.sample_sd`: exactly 0 for replicates of one
    value); the sd is NaN (null in summary.json, empty in a CSV) for a single replicate, which has
    no spread to measure (an sd of 0 would read as no variation)."""
    v = np.asarray(values, dtype=np.float64)
    return {"mean": float(v.mean()), "sd": sample_sd(v)}


def capacity(occupancy: np.ndarray, beds_per_100k: float, agents: int) -> dict[str, Any]:
    """Beds per 100,000 and for the ``agents``, and the days the mean of ``occupancy`` [day,
    replicate] is above them, and the replicates that ever are."""
    beds = beds_per_100k * agents / 1e5
    return {
        "beds_per_100k": beds_per_100k,
        "beds": beds,
        "days_over_capacity": int((occupancy.mean(axis=1) > beds).sum()),
        # the mean curve can stay under a line that some replicates cross
        "replicates_over_capacity": int((occupancy > beds).any(axis=0).sum()),
    }


def region_scaled(summary: dict[str, Any]) -> dict[str, Any] | None:
    """The summary's counts and costs of the agents scaled to the region: each multiplied by
    ``factor``, ``region_population`` / ``agents``, which takes the agents for a representative
    sample of the region's residents. Means and sds over replicates (an sd stays NaN, null in
    summary.json, for a single replicate), the peaks of the mean curves, and the hospital and ICU
    beds (``icu_capacity_beds`` None where ``icu_capacity`` is). None for a summary without a
    ``region_population``."""
    people = summary.get("region_population")
    if people is None:
        return None
    factor = people / summary["agents"]

    def times(value: float) -> float:  # NaN stays math.nan (one replicate has no sd)
        return math.nan if math.isnan(value) else value * factor

    icu = summary["icu_capacity"]
    return {
        "factor": factor,
        **{key: {k: times(summary[key][k]) for k in ("mean", "sd")} for key in SCALED_MEAN_SD},
        **{key: times(summary[key]["value"]) for key in SCALED_PEAKS},
        "hospital_capacity_beds": times(summary["hospital_capacity"]["beds"]),
        "icu_capacity_beds": None if icu is None else times(icu["beds"]),
    }


def group_outcomes(agents: int, infected: np.ndarray, deaths: np.ndarray) -> dict[str, Any]:
    """A group's ``agents``, those infected by the end (per replicate in ``infected``: mean, sd
    and the share of the group) and those dead (``deaths``), with deaths per 100 infected (of the
    means; null where no one was infected)."""
    return {
        "agents": agents,
        "infected": {**mean_sd(infected), "share": float(infected.mean() / agents) if agents else None},
        "deaths": mean_sd(deaths),
        "deaths_per_100_infected": float(100 * deaths.mean() / infected.mean()) if infected.mean() else None,
    }


def by_age(res: SimulationResult) -> list[dict[str, Any]]:
    """Per ten-year age group: its agents, those infected by the end (seeded ones too; mean and
    sd over replicates, and the share of the group) and those dead, with deaths per 100 infected
    (of the means; null where no one was infected). Infections of the run's last weeks may not
    have ended yet, so deaths per 100 infected can be lower than the disease settings' chance."""
    first, last = res.stages_by_age[0, 0].astype(np.float64), res.stages_by_age[-1].astype(np.float64)
    rows = []
    for a, label in enumerate(AGE_GROUP_LABELS):
        agents = int(first[a].sum())
        infected = agents - last[:, a, Stage.SUSCEPTIBLE]
        rows.append({"age_group": label, **group_outcomes(agents, infected, last[:, a, Stage.DEATH])})
    return rows


def long_term_care_residents(res: SimulationResult) -> dict[str, Any] | None:
    """The long-term-care residents' outcomes as :func:`by_age` gives an age group's (they are
    counted in their age groups too), with their share of all deaths (of the means; null where no
    one died) and the infected and dead of each replicate (``by_replicate``, which ``abm compare``
    pairs); None where the population has no residents."""
    final = res.residents_final
    if final is None:
        return None
    agents = int(final[0].sum())
    infected, deaths = agents - final[:, Stage.SUSCEPTIBLE], final[:, Stage.DEATH]
    out = group_outcomes(agents, infected.astype(np.float64), deaths.astype(np.float64))
    all_deaths = float(res.stages[-1, :, Stage.DEATH].mean())
    out["share_of_deaths"] = float(deaths.mean() / all_deaths) if all_deaths else None
    out["by_replicate"] = {"infected": infected.tolist(), "deaths": deaths.tolist()}  # for abm compare
    return out


def reproduction_summary(res: SimulationResult) -> dict[str, Any] | None:
    """``initial``: the reproduction number of each replicate's first week of infections (mean and
    sd over the replicates where it is final: ``replicates``; ``infections``, those replicates'
    first-week infections, which it rests on); ``generation_interval_days``: per
    replicate, the mean days from an infector's infection to its infectee's, over all infections
    by transmission (mean and sd over the replicates with any). None where infections were not
    put down to infectors."""
    if res.secondary is None or res.unfinished is None or res.generation_days is None:
        return None
    new = res.new_infections.astype(np.float64)
    initial = reproduction.first_week(new, res.secondary.astype(np.float64), res.unfinished == 0)
    final = ~np.isnan(initial)
    infections = reproduction.first_week_infections(new)[final].astype(np.int64).tolist()
    initial = initial[final]
    transmitted = res.transmitted.sum(axis=0)
    interval = res.generation_days.sum(axis=0)[transmitted > 0] / transmitted[transmitted > 0]
    return {
        "initial": {**mean_sd(initial), "replicates": int(initial.size), "infections": infections}
        if initial.size
        else None,
        "generation_interval_days": {**mean_sd(interval), "replicates": int(interval.size)} if interval.size else None,
    }


def summarize(
    res: SimulationResult,
    meta: dict[str, Any],
    beds_per_100k: float,
    start_date: date | None = None,
    icu_beds_per_100k: float | None = None,
) -> dict[str, Any]:
    """The summary.json contents; with ``start_date`` (the date of day 0), also that date and
    each peak's ``date``; ``icu_capacity`` null without ``icu_beds_per_100k``; ``region_scaled``
    (:func:`region_scaled`) null without ``region_population`` in ``meta``."""
    n = res.agents
    st = res.stages.astype(np.float64)  # [day, replicate, stage]
    final = st[-1]
    cumulative = n - final[:, Stage.SUSCEPTIBLE]
    hosp = st[:, :, Stage.HOSPITALIZED]
    occupancy = st[:, :, HOSPITAL_STAGES].sum(-1)
    icu = st[:, :, Stage.CRITICAL_ICU]
    # Cumulative infections by transmission (mean over replicates): seeded infections are left
    # out, so that seeding after day 0 is not read as a jump in the infection rate.
    cum_transmitted = np.cumsum(res.transmitted.astype(np.float64).mean(axis=1))
    out = {
        **meta,
        "agents": n,
        "days": res.days,
        "replicates": res.replicates,
        "cumulative_infected": {**mean_sd(cumulative), "share": float(cumulative.mean() / n)},
        # Replicates whose epidemic is over by the last day (no one infected then): their means
        # and those of epidemics still going are averaged alike, and one that died out early
        # (a few seeds) pulls the mean down.
        "replicates_epidemic_over": int((final[:, ACTIVE_STAGES].sum(axis=1) == 0).sum()),
        "peak_hospitalized": peak(hosp, n),
        "peak_hospital_occupancy": peak(occupancy, n),
        "peak_icu": peak(icu, n),
        # Infections by transmission: the initial (seeded) infections are not an epidemic's peak.
        "peak_new_infections": peak(res.transmitted.astype(np.float64), n),
        # The thesis's "peak daily infection rate": max second difference of the mean
        # cumulative-infected curve, by transmission (none for a run of 1 or 2 days). With every
        # seed on day 0, as in the thesis, this is the second difference of all cumulative infections.
        "peak_infection_rate_2nd_difference": float(np.diff(cum_transmitted, n=2).max()) if res.days > 2 else None,
        "hospital_capacity": capacity(occupancy, beds_per_100k, n),
        "icu_capacity": None if icu_beds_per_100k is None else capacity(icu, icu_beds_per_100k, n),
        # Admissions over the run (entries into hospital, as the timeseries' new_hospitalizations).
        "hospitalizations": mean_sd(res.admissions.sum(axis=0)),
        "deaths": mean_sd(final[:, Stage.DEATH]),
        "total_cost": mean_sd(res.cost_totals),
    }
    out["by_age"] = by_age(res)
    out["long_term_care_residents"] = long_term_care_residents(res)
    out["reproduction_number"] = reproduction_summary(res)
    out["region_scaled"] = region_scaled(out)
    if start_date is not None:
        out["start_date"] = start_date.isoformat()
        for key in PEAKS:  # null, as the day, for a curve that stays at zero
            day = out[key]["day"]
            out[key]["date"] = None if day is None else date_of(start_date, day)
    return out
