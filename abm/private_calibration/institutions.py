"""Institutions: a region's own population, private observed series and simulated training pairs.

Everything here stays inside the institution: the protocols only see the participant built
from it (:mod:`abm.private_calibration.federation`), whose model is trained on the pairs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from abm.learning import progress
from abm.learning.data import Dataset
from abm.learning.partition import ParticipantData
from abm.populations import Population, Region, build_population, load_region
from abm.private_calibration.observed import CHANNELS, PER, model_scenario, observed_kc2020
from abm.private_calibration.parameters import BinGrid, whole_infections
from abm.private_calibration.regions import institution_region
from abm.private_calibration.scenario import InstitutionSpec, ModelSection, PrivateCalibrationScenario
from abm.private_calibration.simulate import (
    SimulatedSeries,
    features,
    observe,
    reported_cases,
    simulate,
    weekly_rates,
)
from abm.scenario import Scenario


@dataclass
class Institution:
    """One institution's private state."""

    index: int
    spec: InstitutionSpec
    region: Region
    population: Population
    prior: dict[str, tuple[float, float]]
    data: ParticipantData  # train / val under its own prior; test = held-out over the full range
    own_test: Dataset | None  # held-out under its own prior (None when own_holdout_simulations is 0)
    observed_daily: pd.DataFrame  # cases, hospital_admissions per 100k residents, by date
    observed_x: torch.Tensor  # [1, 2W] calibrator input of the observed series
    truth: dict[str, float] | None
    truth_class: int | None
    simulations: int  # simulations run (training, validation, held-out, observed)

    @property
    def name(self) -> str:
        """Institution name."""
        return self.spec.name


def draw_parameters(
    grid: BinGrid, ranges: dict[str, tuple[float, float]], n: int, rng: np.random.Generator, draws: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """Per-simulation (transmission, seeding) [n, 2] and ascertainment [n, draws] under ``ranges``."""
    out = {}
    for p in grid.params:
        lo, hi = ranges.get(p.name, (p.low, p.high))
        size = n * draws if p.name == "ascertainment" else n
        out[p.name] = p.sample(rng, size, lo, hi)
    sim = np.stack([out["transmission"], whole_infections(out["seeding"])], axis=1)
    asc = out["ascertainment"].reshape(n, draws) if "ascertainment" in out else np.full((n, draws), np.nan)
    return sim, asc


def pairs(
    grid: BinGrid,
    population: Population,
    model: Scenario,
    section: ModelSection,
    ranges: dict[str, tuple[float, float]],
    n: int,
    draws: int,
    rng: np.random.Generator,
    seed: int,
    fixed_ascertainment: float,
) -> Dataset:
    """``n`` simulations under ``ranges`` x ``draws`` observation draws -> (features, joint class)."""
    sim_params, asc = draw_parameters(grid, ranges, n, rng, draws)
    if "ascertainment" not in grid.names:
        asc = np.full((n, draws), fixed_ascertainment)
    series = simulate(population, model, section, sim_params[:, 0], sim_params[:, 1].astype(np.int64), seed)
    x, rep = observe(series, asc, section, rng, draws)
    values = {"transmission": sim_params[rep, 0], "seeding": sim_params[rep, 1], "ascertainment": asc.reshape(-1)}
    y = grid.classes_of(np.stack([values[name] for name in grid.names], axis=1))
    return Dataset(torch.from_numpy(x), torch.as_tensor(y, dtype=torch.long))


def observed_known_truth(
    population: Population,
    model: Scenario,
    section: ModelSection,
    truth: dict[str, float],
    rng: np.random.Generator,
    seed: int,
    fixed_ascertainment: float,
) -> pd.DataFrame:
    """One simulated realisation at the true parameters: daily reported cases and admissions
    per 100k residents (the institution's private observed series)."""
    series = simulate(
        population, model, section, np.array([truth["transmission"]]), whole_infections([truth["seeding"]]), seed
    )
    a = np.array([truth.get("ascertainment", fixed_ascertainment)])
    return daily_frame(series, a, section, rng)


def daily_frame(
    series: SimulatedSeries, ascertainment: np.ndarray, section: ModelSection, rng: np.random.Generator | None
) -> pd.DataFrame:
    """Daily cases and admissions per 100k residents, averaged over the replicates of ``series``
    (``ascertainment`` [R]; ``rng`` None = expected reported cases)."""
    cases = reported_cases(series.onsets, ascertainment, section.case_delay_days, rng).mean(axis=1)
    adm = series.admissions.mean(axis=1)
    dates = pd.date_range(section.start_date, periods=series.onsets.shape[0], freq="D")
    scale = PER / series.agents
    return pd.DataFrame({"cases": cases * scale, "hospital_admissions": adm * scale}, index=dates)


def observed_features(frame: pd.DataFrame, section: ModelSection) -> torch.Tensor:
    """Calibrator input [1, 2W] of a daily frame in per-100k units."""
    w = [weekly_rates(frame[[c]].reindex(_dates(section)).fillna(0.0).to_numpy(), section, PER) for c in CHANNELS]
    return torch.from_numpy(features(w[0], w[1], section))


def _dates(section: ModelSection) -> pd.DatetimeIndex:
    return pd.date_range(section.start_date, periods=section.days, freq="D")


def build_institutions(scenario: PrivateCalibrationScenario, base: Path) -> tuple[list[Institution], Scenario]:
    """Every institution's population, observed series and training / validation / held-out pairs.

    Institution k uses random streams derived from (scenario seed, k) only, so
    :func:`build_institution` builds any one of them alone, identically (as a Flower client does).
    """
    model = model_scenario(scenario, base)
    county = load_region(model.population.region)
    institutions, n = [], len(scenario.institutions)
    for k in range(n):
        institutions.append(build_institution(scenario, model, county, k))
        progress.step("institutions' simulations", k + 1, n, f"{n} populations, their simulations and held-out sets")
    return institutions, model


FIXED_ASCERTAINMENT = 0.2
"""The share of symptomatic infections reported as cases when ascertainment is not a free parameter."""


def build_institution(scenario: PrivateCalibrationScenario, model: Scenario, county: Region, k: int) -> Institution:
    """Institution ``k``: its population, observed series and pairs, from (scenario seed, k) only."""
    grid = scenario.grid()
    section = scenario.model
    fixed_asc = FIXED_ASCERTAINMENT  # used only when ascertainment is not a free parameter
    spec = scenario.institutions[k]
    rng = np.random.default_rng([scenario.seed, k, 0x1C])
    seed0 = scenario.seed * 100_003 + k * 1009
    region = institution_region(county, spec.tracts, spec.name)
    pop = build_population(region, spec.agents, seed0)
    prior = {p.name: tuple(spec.prior.get(p.name, (p.low, p.high))) for p in grid.params}
    full = {p.name: (p.low, p.high) for p in grid.params}
    ev = scenario.evaluation
    train = pairs(grid, pop, model, section, prior, spec.budget, spec.ascertainment_draws, rng, seed0 + 1, fixed_asc)
    val = pairs(grid, pop, model, section, prior, ev.val_simulations, 1, rng, seed0 + 2, fixed_asc)
    test = pairs(grid, pop, model, section, full, ev.holdout_simulations, 1, rng, seed0 + 3, fixed_asc)
    if scenario.mode == "known_truth":
        truth = {name: float(spec.truth[name]) for name in grid.names}
        obs = observed_known_truth(pop, model, section, truth, rng, seed0 + 4, fixed_asc)
        # the true bin is that of the values simulated: seeding in whole agents, as every simulation
        simulated = {**truth, "seeding": float(whole_infections(truth["seeding"]))}
        truth_class = int(grid.classes_of(np.array([[simulated[n] for n in grid.names]]))[0])
    else:
        truth, truth_class = None, None
        obs = observed_kc2020(section, county.figures.population)
    # drawn last, so that adding it left every other draw of the institution unchanged
    own_n = ev.own_holdout_simulations
    own = pairs(grid, pop, model, section, prior, own_n, 1, rng, seed0 + 6, fixed_asc) if own_n else None
    return Institution(
        index=k,
        spec=spec,
        region=region,
        population=pop,
        prior=prior,
        data=ParticipantData(train, val, test),
        own_test=own,
        observed_daily=obs,
        observed_x=observed_features(obs, section),
        truth=truth,
        truth_class=truth_class,
        simulations=spec.budget + ev.val_simulations + ev.holdout_simulations + own_n + (truth is not None),
    )
