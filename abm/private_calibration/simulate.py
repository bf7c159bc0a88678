"""Batched simulations of one institution's population and the observation model.

R parameter sets run as R replicates of one :class:`abm.engine.Simulation` (one tensor
program). The engine has one transmission rate and one seeding for all replicates, so two
per-replicate settings are applied by a hook object passed with the scenario's interventions:

* the transmission multiplier m_r scales every agent's ``susceptibility_scale`` in replicate r
  (lambda_i = beta * S(age_i) * scale_i * force_i, so this is beta_r = m_r * beta);
* seeding puts s_r random agents of replicate r into their first infected stage (drawn by age,
  as for any infection) on the seeding day; the scenario's own seeding is switched off.

Everything else (disease, contacts, the 2020 mobility multipliers) is the model scenario's,
resolved with :func:`abm.overrides.resolve` as ``abm run`` would. Observations follow
:mod:`abm.calibration.observation`: admissions are new hospitalisations; reported cases are onsets
of symptoms thinned by the ascertainment (Binomial) and delayed ``case_delay_days``
(:func:`abm.calibration.observation.shifted`); both are summed over the window's weeks with
:func:`abm.calibration.observed.weekly` and expressed per 100,000 residents.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from abm.calibration.observation import shifted
from abm.calibration.observed import weekly
from abm.engine import Simulation
from abm.engine.rng import generator
from abm.engine.simulator import Phase, SeedingConfig
from abm.populations import Population
from abm.private_calibration.observed import PER
from abm.private_calibration.scenario import ModelSection
from abm.scenario import Scenario


class ReplicateParameters:
    """Engine hooks that give each replicate its own transmission multiplier and seeding."""

    name = "replicate_parameters"
    order = -100

    def __init__(self, multipliers: np.ndarray, seeds: np.ndarray, day: int) -> None:
        self.multipliers = torch.as_tensor(np.asarray(multipliers, dtype=np.float32))
        self.seeds = torch.as_tensor(np.asarray(seeds, dtype=np.int64))
        self.day = day

    def attach(self, sim: Simulation) -> None:
        """Scale susceptibility per replicate (m_r for all N agents of replicate r)."""
        if self.multipliers.shape[0] != sim.replicates or self.seeds.shape[0] != sim.replicates:
            raise ValueError(f"need one multiplier and one seeding per replicate ({sim.replicates})")
        if int(self.seeds.max()) > sim.n:
            raise ValueError(f"seeding asks for {int(self.seeds.max())} infections but there are {sim.n} agents")
        sim.state.susceptibility_scale.copy_(self.multipliers.to(sim.device).repeat_interleave(sim.n))

    def hooks(self) -> dict:
        """Seeding before the day's transmission."""
        return {Phase.TRANSMISSION: self.seed}

    def seed(self, sim: Simulation, day: int) -> None:
        """On the seeding day infect s_r random agents of each replicate r."""
        if day != self.day:
            return
        gen = generator(sim.seed, "replicate_seeding", day, sim.device)
        k = int(self.seeds.max())
        if k == 0:
            return
        r = sim.replicates
        order = torch.rand(r, sim.n, generator=gen, device=sim.device).argsort(dim=1)[:, :k]
        take = torch.arange(k, device=sim.device)[None, :] < self.seeds.to(sim.device)[:, None]
        offset = (torch.arange(r, device=sim.device) * sim.n)[:, None]
        idx = (order + offset)[take]
        sim.infect(idx, None, day, gen)  # the engine's own infection step (stage drawn by age)


@dataclass
class SimulatedSeries:
    """Daily onsets of symptoms and admissions [days, R] of R replicates of ``agents`` agents."""

    onsets: np.ndarray
    admissions: np.ndarray
    agents: int


def simulate(
    population: Population,
    model: Scenario,
    section: ModelSection,
    multipliers: np.ndarray,
    seeds: np.ndarray,
    seed: int,
) -> SimulatedSeries:
    """Simulate one replicate per (multiplier, seeding) pair; returns the daily series."""
    sim = Simulation(
        population=population,
        disease_cfg=model.disease,
        contact_cfg=model.contacts,
        seeding=SeedingConfig(day=section.seeding_day, infections={}),
        days=section.days,
        replicates=len(multipliers),
        seed=seed,
        interventions=[*model.interventions.build(), ReplicateParameters(multipliers, seeds, section.seeding_day)],
        attribute_infections=False,  # the series need no infectors
    )
    res = sim.run()
    return SimulatedSeries(res.symptomatic_onsets.astype(np.int64), res.admissions.astype(np.int64), population.size)


def reported_cases(
    onsets: np.ndarray, ascertainment: np.ndarray, delay: int, rng: np.random.Generator | None
) -> np.ndarray:
    """Daily reported cases [days, n]: onsets of symptoms thinned by ``ascertainment`` [n] and
    delayed.

    With ``rng`` each onset is reported with probability a (Binomial); without, the
    expectation a x onsets.
    """
    rep = onsets * ascertainment[None, :] if rng is None else rng.binomial(onsets, ascertainment[None, :])
    return shifted(rep.astype(float), delay)


def weekly_rates(daily: np.ndarray, section: ModelSection, population: float) -> np.ndarray:
    """Weekly sums over the window [weeks, n] of daily counts [days, n], per 100,000 residents."""
    dates = pd.date_range(section.start_date, periods=daily.shape[0], freq="D")
    frame = pd.DataFrame(daily, index=dates)
    return weekly(frame, section.window).to_numpy(dtype=float) * (PER / population)


def features(cases_weekly: np.ndarray, admissions_weekly: np.ndarray, section: ModelSection) -> np.ndarray:
    """Calibrator inputs [n, 2 * weeks]: channel-major (cases weeks, then admissions weeks) of
    (log1p(weekly per 100k) - center) / scale. The scaling is public and fixed."""
    x = np.concatenate([cases_weekly.T, admissions_weekly.T], axis=1)
    return ((np.log1p(x) - section.feature_center) / section.feature_scale).astype(np.float32)


def observe(
    series: SimulatedSeries,
    ascertainment: np.ndarray,
    section: ModelSection,
    rng: np.random.Generator,
    draws: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """Observation draws of simulated replicates: features [R * draws, 2W] and the replicate of
    each row; ``ascertainment`` is [R, draws]."""
    rows, reps = [], []
    adm = weekly_rates(series.admissions, section, series.agents)
    for d in range(draws):
        cases = reported_cases(series.onsets, ascertainment[:, d], section.case_delay_days, rng)
        rows.append(features(weekly_rates(cases, section, series.agents), adm, section))
        reps.append(np.arange(series.onsets.shape[1]))
    x = np.stack(rows, axis=1).reshape(-1, rows[0].shape[1])
    rep = np.stack(reps, axis=1).reshape(-1)
    return x, rep
