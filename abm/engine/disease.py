"""Disease progression as data: stages, branching by age, dwell times, infectiousness.

Every default is the value of the thesis model (specs: epidemic model sections 3 and 5):
branching probabilities and dwell times from the model's King County disease table, stage
infectiousness, susceptibility by age and the infectiousness profile over time since
infection (a gamma with mean 5.5 days, sd 2.14 days).
"""

from __future__ import annotations

import math
from enum import IntEnum
from typing import Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from abm.populations.population import AGE_GROUP_LABELS as AGE_GROUP_LABELS  # kept here for the engine's users
from abm.populations.population import AGE_GROUPS


class Stage(IntEnum):
    """The 11 disease stages. Vaccine protection is a separate per-agent flag."""

    SUSCEPTIBLE = 0
    ASYMPTOMATIC = 1
    PRESYMPTOMATIC_MILD = 2
    PRESYMPTOMATIC_SEVERE = 3
    MILD_SYMPTOMS = 4
    SEVERE_SYMPTOMS = 5
    HOSPITALIZED = 6
    CRITICAL_ICU = 7
    DEATH = 8
    HOSPITALIZED_RECOVERING = 9
    RECOVERED = 10


STAGE_NAMES = [s.name.lower() for s in Stage]
NUM_STAGES = len(Stage)
NUM_AGE_GROUPS = AGE_GROUPS  # ten-year groups 0-9 .. 80+ (abm.populations.population)
ABSORBING = (Stage.DEATH, Stage.RECOVERED)
SYMPTOMATIC = (Stage.MILD_SYMPTOMS, Stage.SEVERE_SYMPTOMS)  # entering one is the onset of symptoms
NEVER = 32767  # "no scheduled transition" in the int16 day field
# The longest simulation, and the longest delay or duration a setting may give (a result's delay,
# a quarantine, a dose's protection): a day plus such a delay stays below NEVER in an int16 field.
MAX_DAYS = 10_000

# Branching by age group (rows 0-9 .. 80+): probabilities of the next stage.
_S_TO = [  # S -> (ASYMPTOMATIC, PRESYMPTOMATIC_MILD, PRESYMPTOMATIC_SEVERE)
    (0.456, 0.533, 0.011), (0.412, 0.569, 0.019), (0.370, 0.597, 0.033),
    (0.332, 0.614, 0.054), (0.296, 0.616, 0.088), (0.265, 0.602, 0.133),
    (0.238, 0.571, 0.191), (0.214, 0.523, 0.263), (0.192, 0.461, 0.347),
]  # fmt: skip
_SEV_TO_HOSP = [0.001, 0.006, 0.015, 0.069, 0.219, 0.279, 0.370, 0.391, 0.379]
_HOSP_TO = [  # HOSPITALIZED -> (CRITICAL_ICU, DEATH, RECOVERED)
    (0.05, 0.0, 0.95), (0.05, 0.0, 0.95), (0.045, 0.005, 0.95), (0.045, 0.005, 0.95),
    (0.0504, 0.0126, 0.937), (0.0976, 0.0244, 0.878), (0.1096, 0.1644, 0.726),
    (0.1728, 0.2592, 0.568), (0.03545, 0.67355, 0.291),
]  # fmt: skip
_ICU_TO_DEATH = [0.33, 0.25, 0.5, 0.5, 0.5, 0.69, 0.65, 0.88, 1.0]


def default_branching() -> list[list[list[float]]]:
    """The [age group][from stage][to stage] table of the thesis model."""
    table = []
    for a in range(NUM_AGE_GROUPS):
        rows = [[0.0] * NUM_STAGES for _ in range(NUM_STAGES)]
        rows[Stage.SUSCEPTIBLE][Stage.ASYMPTOMATIC : Stage.PRESYMPTOMATIC_SEVERE + 1] = _S_TO[a]
        rows[Stage.ASYMPTOMATIC][Stage.RECOVERED] = 1.0
        rows[Stage.PRESYMPTOMATIC_MILD][Stage.MILD_SYMPTOMS] = 1.0
        rows[Stage.PRESYMPTOMATIC_SEVERE][Stage.SEVERE_SYMPTOMS] = 1.0
        rows[Stage.MILD_SYMPTOMS][Stage.RECOVERED] = 1.0
        rows[Stage.SEVERE_SYMPTOMS][Stage.HOSPITALIZED] = _SEV_TO_HOSP[a]
        rows[Stage.SEVERE_SYMPTOMS][Stage.RECOVERED] = round(1.0 - _SEV_TO_HOSP[a], 6)
        icu, death, rec = _HOSP_TO[a]
        rows[Stage.HOSPITALIZED][Stage.CRITICAL_ICU] = icu
        rows[Stage.HOSPITALIZED][Stage.DEATH] = death
        rows[Stage.HOSPITALIZED][Stage.RECOVERED] = rec
        rows[Stage.CRITICAL_ICU][Stage.DEATH] = _ICU_TO_DEATH[a]
        rows[Stage.CRITICAL_ICU][Stage.HOSPITALIZED_RECOVERING] = round(1.0 - _ICU_TO_DEATH[a], 6)
        rows[Stage.HOSPITALIZED_RECOVERING][Stage.RECOVERED] = 1.0
        table.append(rows)
    return table


StageName = Literal[
    "susceptible", "asymptomatic", "presymptomatic_mild", "presymptomatic_severe",
    "mild_symptoms", "severe_symptoms", "hospitalized", "critical_icu", "death",
    "hospitalized_recovering", "recovered",
]  # fmt: skip
# The stages of an ongoing infection: those an initial infection can be put in.
InfectedStageName = Literal[
    "asymptomatic", "presymptomatic_mild", "presymptomatic_severe", "mild_symptoms", "severe_symptoms",
    "hospitalized", "critical_icu", "hospitalized_recovering",
]  # fmt: skip


class DwellTime(BaseModel):
    """Days spent in ``from_stage`` before moving to ``to_stage``: 1 + D days, where D is a
    rounded gamma draw (``shape``, ``scale``) or a two-point draw floor(mean) + Bernoulli(mean - floor(mean))."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    from_stage: StageName = Field(alias="from", description="the stage the agent is in (a stage name)")
    to_stage: StageName = Field(
        alias="to", description="the stage it moves to next (drawn from `disease.branching` on entering `from`)"
    )
    distribution: Literal["gamma", "two_point"] = Field(
        description="the law of D in the 1 + D days: gamma (give shape and scale) or two_point (give mean)"
    )
    shape: float | None = Field(None, gt=0, description="gamma shape (mean^2/sd^2)")
    scale: float | None = Field(None, gt=0, description="gamma scale in days (sd^2/mean)")
    mean: float | None = Field(None, ge=0, description="two-point mean in days")

    @model_validator(mode="after")
    def _params(self) -> DwellTime:
        if self.distribution == "gamma" and (self.shape is None or self.scale is None):
            raise ValueError("a gamma dwell time needs shape and scale")
        if self.distribution == "two_point" and self.mean is None:
            raise ValueError("a two_point dwell time needs mean")
        return self


def _gamma(frm: str, to: str, mean: float, sd: float) -> DwellTime:
    return DwellTime.model_validate(
        {
            "from": frm,
            "to": to,
            "distribution": "gamma",
            "shape": round(mean**2 / sd**2, 6),
            "scale": round(sd**2 / mean, 6),
        }
    )


def _two_point(frm: str, to: str, mean: float) -> DwellTime:
    return DwellTime.model_validate({"from": frm, "to": to, "distribution": "two_point", "mean": mean})


def default_dwell_times() -> list[DwellTime]:
    """Dwell times of the thesis model with gamma means and sds as the model intends."""
    return [
        _gamma("asymptomatic", "recovered", 15, 5),
        _gamma("presymptomatic_mild", "mild_symptoms", 5.42, 2.7),
        _gamma("presymptomatic_severe", "severe_symptoms", 5.42, 2.7),
        _gamma("mild_symptoms", "recovered", 12, 5),
        _two_point("severe_symptoms", "hospitalized", 5.14),
        _gamma("severe_symptoms", "recovered", 12, 5),
        _two_point("hospitalized", "critical_icu", 2.27),
        _two_point("hospitalized", "death", 2.27),
        _gamma("hospitalized", "recovered", 8.75, 8.75),
        _gamma("critical_icu", "death", 11.74, 8.79),
        _gamma("critical_icu", "hospitalized_recovering", 18.8, 12.21),
        _gamma("hospitalized_recovering", "recovered", 8.75, 8.75),
    ]


class Seasonality(BaseModel):
    """A yearly cycle of the transmission rate: on day d it is multiplied by
    1 + g cos(2 pi (d - peak_day) / 365), whose mean over a year is 1, with g such that the
    summer trough is ``reduction`` below the winter peak: g = reduction / (2 - reduction)."""

    model_config = ConfigDict(extra="forbid")
    reduction: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="how far the transmission rate falls from its winter peak to its summer trough half a year "
        "later (0: no seasonal cycle; 0.421 is the fall of R_t estimated for 143 temperate European regions, "
        "Gavenciak et al., PLoS Comput Biol 2022)",
    )
    peak_day: int = Field(
        -31,
        ge=-365,
        le=365,
        description="simulation day of the winter peak (negative: before day 0); -31: 1 January for a run whose "
        "day 0 is 1 February",
    )

    def factors(self, days: int) -> list[float]:
        """The multiplier of the transmission rate on each day 0 .. days - 1 (all 1 without a cycle)."""
        g = self.reduction / (2 - self.reduction)
        return [1 + g * math.cos(2 * math.pi * (d - self.peak_day) / 365) for d in range(days)]


class DiseaseConfig(BaseModel):
    """Disease parameters. Defaults: the thesis model's King County values."""

    model_config = ConfigDict(extra="forbid")
    transmission_rate: float = Field(
        5.02,
        ge=0,
        description="transmission scale (the thesis's R; not the reproduction number): multiplies every "
        "contact's daily force of infection",
    )
    seasonality: Seasonality = Field(
        Seasonality(),
        description="a yearly cycle of the transmission rate around transmission_rate (its yearly mean); "
        "none by default",
    )
    susceptibility_by_age: list[float] = Field(
        default_factory=lambda: [0.35, 0.69, 1.03, 1.03, 1.03, 1.03, 1.27, 1.52, 1.52],
        description="relative susceptibility of the 9 age groups (0-9 .. 80+)",
        min_length=9,
        max_length=9,
    )
    infectiousness_by_stage: dict[StageName, float] = Field(
        default_factory=lambda: {
            "asymptomatic": 0.33,
            "presymptomatic_mild": 0.05,
            "presymptomatic_severe": 0.05,
            "mild_symptoms": 0.72,
            "severe_symptoms": 1.0,
        },
        description="relative infectiousness by stage; stages not listed are not infectious",
    )
    infectiousness_profile_mean: float = Field(
        5.5, gt=0, description="days: mean of the gamma profile over time since infection"
    )
    infectiousness_profile_sd: float = Field(2.14, gt=0, description="days: its sd")
    branching: list[list[list[float]]] = Field(
        default_factory=default_branching,
        description="[age group][from stage][to stage] probabilities; rows sum to 1 or 0",
    )
    dwell_times: list[DwellTime] = Field(
        default_factory=default_dwell_times,
        description="days spent in a stage before the next: one entry for each (from, to) pair that `branching` "
        "can take; a list given replaces the whole default list",
    )

    @field_validator("susceptibility_by_age")
    @classmethod
    def _non_negative(cls, v: list[float]) -> list[float]:
        negative = [f"[{i}] (age group {AGE_GROUP_LABELS[i]}) is {x:g}" for i, x in enumerate(v) if x < 0]
        if negative:
            raise ValueError(f"susceptibility must be >= 0; {', '.join(negative)}")
        return v

    @field_validator("infectiousness_by_stage")
    @classmethod
    def _non_negative_stage(cls, v: dict[str, float]) -> dict[str, float]:
        negative = [f"{k} is {x:g}" for k, x in v.items() if x < 0]
        if negative:
            raise ValueError(f"infectiousness must be >= 0; {', '.join(negative)}")
        # Only agents of an ongoing infection infect: a value for another stage would be ignored.
        idle = [f"{k} is {x:g}" for k, x in v.items() if x != 0 and k in ("susceptible", "death", "recovered")]
        if idle:
            raise ValueError(
                f"{', '.join(idle)}: only the stages of an ongoing infection can be infectious "
                "(susceptible, death and recovered must be 0 or left out)"
            )
        return v

    @field_validator("branching")
    @classmethod
    def _stochastic(cls, v: list[list[list[float]]]) -> list[list[list[float]]]:
        sizes = [("branching", v, NUM_AGE_GROUPS)] + [(f"branching[{a}]", rows, NUM_STAGES) for a, rows in enumerate(v)]
        sizes += [(f"branching[{a}][{s}]", row, NUM_STAGES) for a, rows in enumerate(v) for s, row in enumerate(rows)]
        for where, part, size in sizes:  # a ragged table would reach torch, whose message names no entry
            if len(part) != size:
                has = f"{len(part)} {'entry' if len(part) == 1 else 'entries'}"
                raise ValueError(f"branching must be a 9 x 11 x 11 table; {where} has {has}, not {size}")
        t = torch.tensor(v, dtype=torch.float64)
        if t.shape != (NUM_AGE_GROUPS, NUM_STAGES, NUM_STAGES):
            raise ValueError(f"branching must be a 9 x 11 x 11 table, got {tuple(t.shape)}")
        if (t < 0).any() or (t > 1).any():
            a, s, to = (int(i) for i in ((t < 0) | (t > 1)).nonzero()[0])
            raise ValueError(
                f"branching probabilities must lie in [0, 1]; branching[{a}][{s}][{to}] (age group "
                f"{AGE_GROUP_LABELS[a]}, {STAGE_NAMES[s]} to {STAGE_NAMES[to]}) is {float(t[a, s, to]):g}"
            )
        sums = t.sum(-1)
        final = torch.zeros(NUM_STAGES, dtype=torch.bool)
        final[list(ABSORBING)] = True
        # The engine moves no one out of a final stage, and sends an agent whose row is all 0 on
        # to recovered: rows must be all 0 exactly for the final stages.
        bad = torch.where(final, sums != 0, (sums - 1).abs() >= 1e-6)
        if bad.any():
            a, s = (int(i) for i in bad.nonzero()[0])
            raise ValueError(
                "each branching row must sum to 1 (and be all 0 for death and recovered, the final stages); "
                f"branching[{a}][{s}] (age group {AGE_GROUP_LABELS[a]}, from {STAGE_NAMES[s]}) sums to "
                f"{float(sums[a, s]):g}"
            )
        if (t[:, :, Stage.SUSCEPTIBLE] > 0).any():
            a, s = (int(i) for i in (t[:, :, Stage.SUSCEPTIBLE] > 0).nonzero()[0])
            raise ValueError(
                f"no stage leads to susceptible (an infection starts in an infected stage, and immunity does not "
                f"wane); branching[{a}][{s}][0] (age group {AGE_GROUP_LABELS[a]}, {STAGE_NAMES[s]} to susceptible) "
                f"is {float(t[a, s, 0]):g}"
            )
        return v

    @model_validator(mode="after")
    def _dwell_cover(self) -> DiseaseConfig:
        t = torch.tensor(self.branching)
        have: set[tuple[str, str]] = set()
        for d in self.dwell_times:  # the engine would take the last of two entries and ignore the first
            if (d.from_stage, d.to_stage) in have:
                raise ValueError(f"dwell_times has two entries from {d.from_stage} to {d.to_stage}; give one")
            have.add((d.from_stage, d.to_stage))
        for frm in range(1, NUM_STAGES):
            for to in range(NUM_STAGES):
                if (t[:, frm, to] > 0).any() and (STAGE_NAMES[frm], STAGE_NAMES[to]) not in have:
                    raise ValueError(f"dwell_times has no entry from {STAGE_NAMES[frm]} to {STAGE_NAMES[to]}")
        return self


def discrete_gamma_cdf(shape: float, scale: float, days: int) -> torch.Tensor:
    """P(round(G) <= d) for d = 0..days, G ~ Gamma(shape, scale)."""
    edges = torch.arange(days + 1, dtype=torch.float64) + 0.5
    return torch.special.gammainc(torch.tensor(shape, dtype=torch.float64), edges / scale)


class DiseaseModel:
    """The disease configuration as tensors on a device, with samplers for progression."""

    def __init__(self, cfg: DiseaseConfig, horizon: int, device: torch.device) -> None:
        self.cfg = cfg
        self.device = device
        branching = torch.tensor(cfg.branching, dtype=torch.float64)
        # The cdf is 1 from a row's last stage of positive probability on: a row may sum to 1
        # within 1e-6 only (validation), and a cdf ending below 1 there would send the draws above
        # it to the row's last column (recovered), a stage of probability 0.
        positive = branching > 0
        tail = positive.cumsum(-1) == positive.sum(-1, keepdim=True)
        cdf = torch.where(tail & positive.any(-1, keepdim=True), 1.0, branching.cumsum(-1))
        self.branch_cdf = cdf.to(device=device, dtype=torch.float32)
        self.infectiousness = torch.zeros(NUM_STAGES, dtype=torch.float32)
        for name, value in cfg.infectiousness_by_stage.items():
            self.infectiousness[STAGE_NAMES.index(name)] = value
        self.infectiousness = self.infectiousness.to(device)
        self.susceptibility = torch.tensor(cfg.susceptibility_by_age, dtype=torch.float32, device=device)
        # Infectiousness profile g(k) = F(k) - F(k-1), k days since infection; g(0) = 0.
        m, s = cfg.infectiousness_profile_mean, cfg.infectiousness_profile_sd
        k = torch.arange(horizon + 2, dtype=torch.float64)
        f = torch.special.gammainc(torch.tensor(m**2 / s**2, dtype=torch.float64), k * m / s**2)
        self.profile = torch.diff(f, prepend=torch.zeros(1, dtype=torch.float64)).to(device, torch.float32)
        # Dwell times: one discrete cdf row per (from, to) pair, over 0..max_days.
        self.max_days = max(horizon, 1) + 60
        pair = torch.full((NUM_STAGES, NUM_STAGES), -1, dtype=torch.long)
        rows = []
        for i, d in enumerate(cfg.dwell_times):
            pair[STAGE_NAMES.index(d.from_stage), STAGE_NAMES.index(d.to_stage)] = i
            if d.distribution == "gamma":
                rows.append(discrete_gamma_cdf(d.shape, d.scale, self.max_days))
            else:
                base, frac = int(d.mean // 1), float(d.mean % 1)
                row = torch.zeros(self.max_days + 1, dtype=torch.float64)
                row[base:] = 1 - frac
                row[base + 1 :] = 1.0
                rows.append(row)
        cdf_rows = torch.stack(rows) if rows else torch.ones(1, self.max_days + 1, dtype=torch.float64)
        cdf_rows[:, -1] = 1.0
        # Offset each row by its index so one sorted 1-D array serves every pair.
        self.dwell_flat = (
            (cdf_rows + torch.arange(cdf_rows.shape[0], dtype=torch.float64)[:, None]).flatten().to(device)
        )
        self.dwell_pair = pair.to(device)
        self.dwell_width = self.max_days + 1

    def next_stage(self, age_group: torch.Tensor, stage: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Draw the stage after ``stage`` for agents of ``age_group`` from uniforms ``u``."""
        rows = self.branch_cdf.reshape(-1, NUM_STAGES)  # one row per (age group, stage)
        cdf = rows.index_select(0, age_group.long() * NUM_STAGES + stage.long())
        return (u[:, None] >= cdf).sum(1).clamp_max(NUM_STAGES - 1)

    def dwell(self, stage: torch.Tensor, nxt: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Draw D (days beyond the first) for the move ``stage`` -> ``nxt`` from uniforms ``u``."""
        p = self.dwell_pair[stage.long(), nxt.long()].clamp_min(0)
        pos = torch.searchsorted(self.dwell_flat, p.to(torch.float64) + u.to(torch.float64), right=True)
        return (pos - p * self.dwell_width).clamp(0, self.max_days)
