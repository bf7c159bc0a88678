"""The ``calibration:`` section of a scenario: targets, windows, free parameters, budget."""

from __future__ import annotations

import datetime as dt
import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from abm.missing_file import RELATIVE_FILE
from abm.validation_errors import seed_field

Target = Literal["hospital_admissions", "deaths", "cases"]
# Observed series shipped with the package (abm/calibration/data/), by the name calibration.data takes.
BUNDLED = {"king_county_2020": "king_county_2020.csv"}
# The county (FIPS code, as a region.yaml's ``fips``) whose counts each bundled series holds.
BUNDLED_FIPS = {"king_county_2020": "53033"}


def whole_weeks(window: tuple[dt.date, dt.date]) -> int:
    """How many whole 7-day weeks a window holds from its first day: what the losses score (a
    last partial week is dropped)."""
    return ((window[1] - window[0]).days + 1) // 7


class ParameterRange(BaseModel):
    """Bounds of one free parameter, named by its scenario key path."""

    model_config = ConfigDict(extra="forbid")
    low: float = Field(description="the lowest value tried, in the parameter's own unit")
    high: float = Field(description="the highest value tried, in the parameter's own unit; above low")
    integer: bool = Field(False, description="draw whole numbers")

    @model_validator(mode="after")
    def _order(self) -> ParameterRange:
        if not (math.isfinite(self.low) and math.isfinite(self.high)):
            return self  # named at its own key as no finite number (abm.key_paths.not_finite), not as out of order
        if not self.low < self.high:
            raise ValueError(f"low ({self.low}) must be below high ({self.high})")
        if self.integer and not (float(self.low).is_integer() and float(self.high).is_integer()):
            raise ValueError(f"integer: true needs whole-number bounds, not low {self.low} and high {self.high}")
        return self


class Observation(BaseModel):
    """How simulated quantities become observed counts."""

    model_config = ConfigDict(extra="forbid")
    cases: Literal["onsets", "positive_tests"] = Field(
        "onsets",
        description="what reported cases are: onsets (new symptomatic infections times the ascertainment, "
        "case_delay_days after onset) or positive_tests (the positive results of interventions.testing, which "
        "the scenario must enable, case_delay_days after the result)",
    )
    ascertainment: float = Field(
        0.2, gt=0, le=1, description="share of symptomatic infections reported as cases (cases: onsets)"
    )
    case_delay_days: int = Field(
        2,
        ge=0,
        description="days from the onset of symptoms (cases: onsets; default 2, the RT-PCR result delay of the "
        "model's testing, 1-3 days, mean 2) or from a positive result (cases: positive_tests; default 0, "
        "reported on the day of the result) to a reported case",
    )
    death_delay_days: float = Field(
        0.0,
        ge=0,
        le=30,
        description="mean days from a death to its report: each day's deaths are reported over that day and "
        "the following days with geometric weights (1 - q) q^k, q = mean / (1 + mean); 0: on the day",
    )
    death_multiplier: float = Field(
        1.0,
        gt=0,
        le=5,
        description="severity multiplier on deaths: simulated deaths are multiplied by it (hospitalized and ICU "
        "agents do not transmit, so this equals scaling the disease table's death branches in expectation, "
        "while no branch would pass 1); it changes the calibration's reading only, not abm run's deaths; "
        "with death_multiplier_change, the multiplier up to that period's first day",
    )
    death_multiplier_after: float | None = Field(
        None,
        gt=0,
        le=5,
        description="the severity multiplier from the last day of death_multiplier_change on (fatality fell "
        "through 2020); it moves linearly from death_multiplier over that period and is held after it; "
        "null: one multiplier throughout",
    )
    death_multiplier_change: tuple[dt.date, dt.date] | None = Field(
        None,
        description="[first, last] dates (by date of death) over which the severity multiplier moves from "
        "death_multiplier to death_multiplier_after; needed with death_multiplier_after",
    )

    @model_validator(mode="after")
    def _change(self) -> Observation:
        if self.cases == "positive_tests" and "case_delay_days" not in self.model_fields_set:
            self.case_delay_days = 0  # the testing intervention's results already carry the test delay
        if (self.death_multiplier_after is None) != (self.death_multiplier_change is None):
            raise ValueError("death_multiplier_after and death_multiplier_change go together: give both or neither")
        c = self.death_multiplier_change
        if c is not None and not c[0] <= c[1]:
            raise ValueError(f"death_multiplier_change must run forward: {c[0]} is after {c[1]}")
        return self


class GradientConfig(BaseModel):
    """The gradient method (``abm calibrate --method gradient``): Adam on log beta and a weekly
    piecewise-constant transmission multiplier series, through the engine's differentiable
    mode (see abm.engine.relaxed)."""

    model_config = ConfigDict(extra="forbid")
    steps: int = Field(30, ge=1, description="Adam steps (one differentiable simulation each, a new seed per step)")
    learning_rate: float = Field(0.05, gt=0, description="Adam step size on log beta and the log multipliers")
    weekly_multipliers: bool = Field(
        True, description="fit a transmission multiplier per week up to the fit window's end (held after it)"
    )
    smoothness: float = Field(1.0, ge=0, description="penalty on squared week-to-week changes of the log multipliers")
    estimator: Literal["score", "straight_through"] = Field(
        "score", description="gradient of an infection draw: score (d log p) or identity straight-through"
    )


class CalibrationConfig(BaseModel):
    """What to fit to which data. Simulation day 0 is ``start_date``; counts are scaled from
    the simulated agents to the region's population."""

    model_config = ConfigDict(extra="forbid")
    data: str = Field(
        "king_county_2020",
        description=f"a bundled series name or a CSV file (date plus target columns; {RELATIVE_FILE})",
    )
    start_date: dt.date = Field(
        dt.date(2020, 2, 1),
        description="the calendar date of simulation day 0; simulation.start_date when only that is given (give "
        "the date in one of them, or the same in both)",
    )
    targets: list[Target] = Field(
        ["hospital_admissions", "deaths"],
        min_length=1,
        description="the data's series fitted, as weekly counts: hospital_admissions, deaths and/or cases "
        "(read from the simulation through calibration.observation)",
    )
    target_weights: dict[Target, float] = Field(
        {},
        description="weight of each target's RMSE in the fit loss, which is their weighted mean (a target not "
        "named: 1); lower it for a noisier series",
    )
    fit_window: tuple[dt.date, dt.date] = Field(
        (dt.date(2020, 2, 28), dt.date(2020, 4, 30)),
        description="[first, last] dates (YYYY-MM-DD, both included) whose weekly counts the fit loss compares "
        "(7-day blocks from the first date; a last, shorter block is left out)",
    )
    holdout_window: tuple[dt.date, dt.date] | None = Field(
        (dt.date(2020, 5, 1), dt.date(2020, 6, 30)),
        description="[first, last] dates (both included), after the fit window, scored but not fitted: a check "
        "of the forecast; null: none",
    )
    parameters: dict[str, ParameterRange] = Field(
        min_length=1,
        default_factory=lambda: {
            "disease.transmission_rate": ParameterRange(low=1.0, high=8.0),
            "seeding.infections.asymptomatic": ParameterRange(low=1, high=200, integer=True),
            "seeding.day": ParameterRange(low=0, high=28, integer=True),
            "interventions.contact_multipliers.series.strength": ParameterRange(low=0.0, high=1.3),
        },
        description="scenario key path -> bounds",
    )
    observation: Observation = Field(
        Observation(),
        description="how simulated counts become observed ones: case ascertainment, reporting delays, death multiplier",
    )
    profile_observation: bool = Field(
        True,
        description="fit the free calibration.observation.* parameters of each Optuna trial by a grid search on "
        "that trial's simulation (they change no simulation) instead of drawing them with the sampler",
    )
    profile_points: int = Field(
        29, ge=2, le=201, description="grid points per profiled parameter (then 9 around the best, 4 times finer)"
    )
    rerank_trials: int = Field(
        0,
        ge=0,
        description="re-run this many best Optuna trials with rerank_replicates and keep the best of those "
        "(0: keep the best trial as it ran); guards against a trial that won by its replicates' luck",
    )
    rerank_replicates: int = Field(10, ge=1, description="replicates of each re-ranked trial")
    population_draws: int = Field(
        1,
        ge=1,
        le=64,
        description="population draws each trial (and each re-ranked trial) averages its series over (seeds "
        "simulation.seed + 1000 k): fitted values then belong to the model rather than to one draw",
    )
    trials: int = Field(40, ge=1, description="Optuna trials")
    parallel_trials: int = Field(
        4,
        ge=1,
        le=1024,
        description="trials the sampler draws together, as a batch, before it learns their losses (told in trial "
        "order); the trials depend on it, not on how many run at once (--workers), so a calibration gives the "
        "same trials on any machine",
    )
    seed: int = seed_field(0, "sampler seed")
    band_trials: int = Field(
        5,
        ge=1,
        description="best trials whose curves make the fit plot's band (with rerank_trials: the best re-run "
        "trials' curves, the best fit among them)",
    )
    gradient: GradientConfig = Field(GradientConfig(), description="settings of `abm calibrate --method gradient`")

    @field_validator("targets")
    @classmethod
    def _once(cls, targets: list[str]) -> list[str]:
        """Each target once: a repeated one would be two columns of one name in the losses."""
        twice = next((t for i, t in enumerate(targets) if t in targets[:i]), None)
        if twice is not None:
            raise ValueError(f"{twice!r} is named twice; name each target once")
        return targets

    @model_validator(mode="after")
    def _windows(self) -> CalibrationConfig:
        for name, w in (("fit_window", self.fit_window), ("holdout_window", self.holdout_window)):
            if w is not None and not w[0] <= w[1]:
                raise ValueError(f"{name} must run forward: {w[0]} is after {w[1]}")
            if w is not None and w[0] < self.start_date:
                raise ValueError(f"{name} starts on {w[0]}, before start_date {self.start_date}")
            if w is not None and (w[1] - w[0]).days + 1 < 7:
                raise ValueError(f"{name} {w[0]} to {w[1]} holds no whole week; losses are on weekly counts (7 days)")
        for target, weight in self.target_weights.items():
            if target not in self.targets:
                raise ValueError(
                    f"target_weights.{target}: {target} is not among targets ({', '.join(self.targets)}); "
                    "weigh only the series fitted"
                )
            if not weight > 0 or weight == float("inf"):
                raise ValueError(f"target_weights.{target}: {weight} is not allowed: must be a number above 0")
        for key in self.parameters:  # an observation value fitted to no target would only drift
            field = key.removeprefix("calibration.observation.")
            target = "cases" if field in ("ascertainment", "case_delay_days") else "deaths"
            if field != key and target not in self.targets:
                raise ValueError(
                    f"parameters.{key} acts on {target}, which is not among targets ({', '.join(self.targets)}); "
                    "no data would fit it: leave it out"
                )
            if field == "ascertainment" and self.observation.cases == "positive_tests":
                raise ValueError(
                    f"parameters.{key} acts on cases from onsets, but observation.cases is positive_tests (the "
                    "testing intervention decides who is found): leave it out, or fit the testing settings instead"
                )
        h = self.holdout_window
        if h is not None and h[0] <= self.fit_window[1]:
            raise ValueError(
                f"holdout_window starts on {h[0]}, within or before the fit window ({self.fit_window[0]} to "
                f"{self.fit_window[1]}); it must start after {self.fit_window[1]}"
            )
        return self
