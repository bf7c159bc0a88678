"""The engine's settings (pydantic models) and the plain values they name: the disease stages
and their defaults, the contact layers' settings, the seeding, the phases of a day and the
memory a run takes. Pydantic and the standard library only, no torch: loading and checking a
scenario (``abm validate``) reads these without loading the engine (:mod:`abm.engine.disease`,
:mod:`abm.engine.contacts` and :mod:`abm.engine.simulator` use them and name them as before).

Every disease default is the value of the thesis model (specs: epidemic model sections 3 and 5):
branching probabilities and dwell times from the model's King County disease table, stage
infectiousness, susceptibility by age and the infectiousness profile over time since
infection (a gamma with mean 5.5 days, sd 2.14 days).
"""

from __future__ import annotations

import math
from enum import IntEnum
from fractions import Fraction
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from abm.populations.population import AGE_GROUP_LABELS, AGE_GROUPS, LONG_TERM_CARE, SCHOOL


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
# A share between 0 and 1.
Share = Annotated[float, Field(ge=0, le=1)]
ABSORBING = (Stage.DEATH, Stage.RECOVERED)
SYMPTOMATIC = (Stage.MILD_SYMPTOMS, Stage.SEVERE_SYMPTOMS)  # entering one is the onset of symptoms
# The columns of timeseries.csv that the engine and the run's outputs fill, whatever the
# interventions: an intervention's daily count (``Simulation.declare_activity``) may not take one
# of these names, which it would overwrite (day, deaths), be overwritten by (reproduction_number)
# or collide with (date, added with simulation.start_date).
RESULT_COLUMNS = (
    "day", "date", "replicate", *STAGE_NAMES, "new_infections", "cumulative_infected", "active", "icu",
    "hospital_occupancy", "deaths", "new_hospitalizations", "new_icu", "new_deaths", "secondary_infections",
    "reproduction_number", "generation_interval",
)  # fmt: skip
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


def check_stage_rows(rows: list[list[float]], at: str, whose: str) -> None:
    """Raise ValueError unless ``rows`` (11 x 11, [from stage][to stage]; ``at`` names it in a
    scenario, as ``branching[3]``, and ``whose`` says whose course it is) holds probabilities, each
    row summing to 1 (all 0 for the final stages, death and recovered: the engine moves no one out
    of them), and no stage leads back to susceptible."""
    for s, row in enumerate(rows):
        for to, p in enumerate(row):
            if p < 0 or p > 1:
                raise ValueError(
                    f"branching probabilities must lie in [0, 1]; {at}[{s}][{to}] ({whose}, {STAGE_NAMES[s]} to "
                    f"{STAGE_NAMES[to]}) is {p:g}"
                )
    for s, row in enumerate(rows):
        total = sum(row)
        wrong = total != 0 if s in ABSORBING else abs(total - 1) >= 1e-6
        if wrong:
            raise ValueError(
                "each branching row must sum to 1 (and be all 0 for death and recovered, the final stages); "
                f"{at}[{s}] ({whose}, from {STAGE_NAMES[s]}) sums to {total:g}"
            )
    for s, row in enumerate(rows):
        if row[Stage.SUSCEPTIBLE] > 0:
            raise ValueError(
                "no stage leads to susceptible (an infection starts in an infected stage, and immunity does "
                f"not wane); {at}[{s}][0] ({whose}, {STAGE_NAMES[s]} to susceptible) is {row[Stage.SUSCEPTIBLE]:g}"
            )


class DiseaseConfig(BaseModel):
    """Disease parameters. Defaults: the thesis model's King County values."""

    model_config = ConfigDict(extra="forbid")
    transmission_rate: float = Field(
        5.02,
        ge=0,
        description="transmission scale (the thesis's R; not the reproduction number): multiplies every "
        "contact's daily force of infection; the King County scenarios set 3.137, fitted to the county's 2020 "
        "epidemic (scenarios/king_county/base.yaml), so a scenario that neither extends them nor sets it runs at "
        "the thesis's 5.02, a faster epidemic",
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

    long_term_care_branching: list[list[float]] | None = Field(
        None,
        description="[from stage][to stage] probabilities for residents of long-term care facilities, whatever "
        "their age, in place of their age group's rows of `branching` (rows sum to 1 or 0, as there); null: "
        "residents follow their age group's rows. docs/model.md gives a table from the outbreak of 2020 at a "
        "King County nursing facility",
    )

    @field_validator("branching")
    @classmethod
    def _stochastic(cls, v: list[list[list[float]]]) -> list[list[list[float]]]:
        sizes = [("branching", v, NUM_AGE_GROUPS)] + [(f"branching[{a}]", rows, NUM_STAGES) for a, rows in enumerate(v)]
        sizes += [(f"branching[{a}][{s}]", row, NUM_STAGES) for a, rows in enumerate(v) for s, row in enumerate(rows)]
        for where, part, size in sizes:  # a ragged table: say which entry
            if len(part) != size:
                has = f"{len(part)} {'entry' if len(part) == 1 else 'entries'}"
                raise ValueError(f"branching must be a 9 x 11 x 11 table; {where} has {has}, not {size}")
        for a, rows in enumerate(v):
            check_stage_rows(rows, f"branching[{a}]", f"age group {AGE_GROUP_LABELS[a]}")
        return v

    @field_validator("long_term_care_branching")
    @classmethod
    def _stochastic_residents(cls, v: list[list[float]] | None) -> list[list[float]] | None:
        if v is None:
            return v
        name = "long_term_care_branching"
        sizes = [(name, v)] + [(f"{name}[{s}]", row) for s, row in enumerate(v)]
        for where, part in sizes:  # a ragged table: say which entry
            if len(part) != NUM_STAGES:
                has = f"{len(part)} {'entry' if len(part) == 1 else 'entries'}"
                raise ValueError(f"{name} must be an 11 x 11 table; {where} has {has}, not {NUM_STAGES}")
        check_stage_rows(v, name, "long-term-care residents")
        return v

    def course_tables(self) -> list[list[list[float]]]:
        """The [course group][from stage][to stage] tables an agent's course is drawn from: the 9 age
        groups' rows of ``branching``, then ``long_term_care_branching`` where it is given."""
        extra = [] if self.long_term_care_branching is None else [self.long_term_care_branching]
        return [*self.branching, *extra]

    @model_validator(mode="after")
    def _dwell_cover(self) -> DiseaseConfig:
        have: set[tuple[str, str]] = set()
        for d in self.dwell_times:  # the engine would take the last of two entries and ignore the first
            if (d.from_stage, d.to_stage) in have:
                raise ValueError(f"dwell_times has two entries from {d.from_stage} to {d.to_stage}; give one")
            have.add((d.from_stage, d.to_stage))
        for frm in range(1, NUM_STAGES):
            for to in range(NUM_STAGES):
                taken = any(rows[frm][to] > 0 for rows in self.course_tables())
                if taken and (STAGE_NAMES[frm], STAGE_NAMES[to]) not in have:
                    raise ValueError(f"dwell_times has no entry from {STAGE_NAMES[frm]} to {STAGE_NAMES[to]}")
        return self


def default_degrees() -> dict[str, float]:
    """Mean daily contacts inside a school, workplace or facility, by setting (thesis model)."""
    return {
        "AGRICULTURE": 14, "MINING": 7, "UTILITIES": 7, "CONSTRUCTION": 7, "MANUFACTURING": 7,
        "WHOLESALETRADE": 1.75, "RETAILTRADE": 4.69, "TRANSPORTATION": 8.75, "INFORMATION": 1.75,
        "FINANCEINSURANCE": 4.69, "REALESTATERENTAL": 3.5, "SCIENTIFICTECHNICAL": 3.5,
        "ENTERPRISEMANAGEMENT": 3.5, "WASTEMANAGEMENT": 5.6, "EDUCATION": 2.31, "HEALTHCARE": 19.95,
        "ART": 3.5, "FOOD": 5.46, "OTHER": 4.69, SCHOOL: 10, LONG_TERM_CARE: 3,
    }  # fmt: skip


class HouseholdContacts(BaseModel):
    """Everyone in a household meets everyone else every day."""

    model_config = ConfigDict(extra="forbid")
    weight: float = Field(2.0, ge=0, description="relative weight of a household contact")
    normalizer: Literal["size", "member_list_string"] = Field(
        "size",
        description="what a household contact's force is divided by: size, the household's size (intended); "
        "member_list_string, the length of the text of its member-id list, e.g. 14 for '[12345, 12346]' "
        "(reproduces the reference code, docs/reference.md §11 Q2; needs consecutive member ids)",
    )


class OccupationContacts(BaseModel):
    """Schools, workplaces and care facilities: a Watts-Strogatz graph per group each day."""

    model_config = ConfigDict(extra="forbid")
    weight: float = Field(1.0, ge=0, description="relative weight of a school or work contact")
    rewire_probability: float = Field(0.1, ge=0, le=1, description="share of ring contacts rewired daily")
    degree: dict[str, Annotated[float, Field(ge=0)]] = Field(
        default_factory=default_degrees,
        description="mean daily contacts by setting (sector, SCHOOL, LONG_TERM_CARE; CHILD and ELDERLY in the "
        "reference population; a region's own sectors); settings not given keep their defaults; also the layer's "
        "normaliser: a contact's force is divided by the mean of the setting of the agent it reaches, so a larger "
        "mean spreads that agent's occupation force over more contacts rather than adding to it (docs/model.md, "
        "Contacts)",
    )

    @field_validator("degree")
    @classmethod
    def _merge(cls, v: dict[str, float]) -> dict[str, float]:
        return {**default_degrees(), **v}


# Contact surveys give means of 10-20 contacts a day, rarely hundreds for one person; a mean above
# this is a typo, and near 1e19 numpy's draw fails ("lam value too large") after validation passed.
DailyContacts = Annotated[float, Field(ge=0, le=1000)]


class CommunityContacts(BaseModel):
    """Random daily contacts, each agent with a fixed daily number, mostly near home."""

    model_config = ConfigDict(extra="forbid")
    weight: float = Field(0.25, ge=0, description="relative weight of a community contact")
    mean_contacts: tuple[DailyContacts, DailyContacts, DailyContacts] = Field(
        (2.0, 4.0, 3.0),
        description="mean daily contacts of children (0-19), adults, elderly (70+); also the layer's normaliser: a "
        "contact's force is divided by the mean of the class of the agent it reaches, so a larger mean spreads that "
        "agent's community force over more contacts rather than adding to it (docs/model.md, Contacts)",
    )
    sd_contacts: tuple[DailyContacts, DailyContacts, DailyContacts] = Field(
        (2.0, 4.0, 3.0),
        description="sd of daily contacts by age class: a negative binomial where sd^2 > mean; a Poisson (sd "
        "sqrt(mean)) where 0 < sd^2 <= mean; 0: every agent of the class the mean rounded to a whole number (half "
        "to even)",
    )
    local_share: float = Field(0.7, ge=0, le=1, description="share of contacts made near home")
    local_spread_tracts: float = Field(
        2.0, gt=0, description="sd, in tracts along the map's space-filling order, of a local contact"
    )
    cycle_days: int = Field(
        10,
        ge=2,
        multiple_of=2,
        description="local_mix: community contacts recur on a cycle of this many days: over a cycle an agent meets "
        "about cycle_days * k_i different people, the same again in the next cycle (longer: fewer repeat "
        "contacts, more memory)",
    )
    construction: Literal["local_mix", "stub_path"] = Field(
        "local_mix",
        description="local_mix: half the stubs start a contact each day, mostly near home, on a cycle "
        "(degree about k_i, intended; see cycle_days); "
        "stub_path: every agent's k_i stubs shuffled daily and consecutive stubs joined, a path with degree "
        "about 2 k_i (reproduces the reference code, docs/reference.md §11 Q8; local_share is not used)",
    )


class ContactConfig(BaseModel):
    """The three contact layers."""

    model_config = ConfigDict(extra="forbid")
    household: HouseholdContacts = Field(
        HouseholdContacts(), description="household layer: everyone in a household meets everyone else every day"
    )
    occupation: OccupationContacts = Field(
        OccupationContacts(),
        description="occupation layer: schools, workplaces and care facilities, a Watts-Strogatz graph per group",
    )
    community: CommunityContacts = Field(
        CommunityContacts(), description="community layer: random daily contacts, mostly near home"
    )
    same_in_every_replicate: bool | list[Literal["occupation", "community"]] = Field(
        False,
        description="false: each replicate draws its own daily contacts (intended: a mean over replicates "
        "averages over contact networks too); a list of layers: one draw of those layers shared by every "
        "replicate ([occupation]: each day's occupation rewiring; community: each agent's daily number of "
        "community contacts and the community contacts); true: both, as the reference code re-used its "
        "pre-generated occupation and random network files in every run (docs/reference.md §1 and section 2). "
        "It acts among one run's replicates (abm sweep runs each replicate on its own)",
    )

    def shares(self, layer: str) -> bool:
        """Whether every replicate meets one draw of ``layer``'s contacts."""
        shared = self.same_in_every_replicate
        return shared if isinstance(shared, bool) else layer in shared


class Phase(IntEnum):
    """The fixed order of a day. Interventions hook into phases; the engine runs
    transmission, progression and recording itself, after the phase's hooks."""

    TEST_RESULTS = 0
    TRACING = 1
    TESTING = 2
    QUARANTINE = 3
    VACCINATION = 4
    TRANSMISSION = 5
    PROGRESSION = 6
    CONTACT_LOGGING = 7
    RECORDING = 8


class SeedingConfig(BaseModel):
    """Who is infected at the start, per replicate."""

    model_config = ConfigDict(extra="forbid")
    day: int = Field(0, ge=0, description="day the initial infections happen")
    infections: dict[InfectedStageName, Annotated[int, Field(ge=0)]] = Field(
        default_factory=lambda: {"asymptomatic": 3, "presymptomatic_mild": 2},
        description="number of agents put in each stage on that day (chosen at random)",
    )
    infections_per_100k: dict[InfectedStageName, Annotated[float, Field(ge=0)]] | None = Field(
        None,
        description="instead of infections: agents put in each stage per 100,000 agents, so that the seeding keeps "
        "its share at any population.agents (--agents); the count is this times agents / 100,000, rounded half up",
    )
    resample_per_replicate: bool = Field(
        True,
        description=(
            "true: every replicate draws its own infected agents; false: the same agents (drawn once from "
            "the simulation seed, among agents susceptible in every replicate) in every replicate, as the "
            "reference code's population file fixes them (specs: epidemic model section 2.7)"
        ),
    )
    # The bounds are the validator's below (which words the message); they also go into the
    # scenario's JSON Schema, so an editor flags a share outside 0..1 or a list of another length.
    prior_immunity: Share | Annotated[list[Share], Field(min_length=AGE_GROUPS, max_length=AGE_GROUPS)] = Field(
        0.0,
        description="share of the agents immune from an earlier infection before day 0: one share, or a list of "
        "the 9 age groups' (0-9 .. 80+), each between 0 and 1; that many of each age group (the share of its "
        "agents, rounded half up) are chosen at random, per replicate unless resample_per_replicate is false; "
        "transmission and seeding never infect them; they stay in the susceptible stage's counts, as agents a "
        "vaccine protects do, and count among no infections",
    )

    @field_validator("prior_immunity", mode="before")
    @classmethod
    def _one_share_or_nine(cls, v: object) -> object:
        """One message for a value that is neither a share nor 9 of them (not one per branch of
        the two kinds of value)."""
        allowed = f"give one share between 0 and 1, or a list of {AGE_GROUPS} (the age groups 0-9 .. 80+)"
        shares = v if isinstance(v, list) else [v]
        numbers = all(isinstance(x, int | float) and not isinstance(x, bool) for x in shares)
        if not numbers or (isinstance(v, list) and len(v) != AGE_GROUPS):
            raise ValueError(allowed)  # the message names the key and the value before it
        outside = [x for x in shares if not 0 <= x <= 1]
        if outside:
            raise ValueError(f"{', '.join(f'{x:g}' for x in outside)} outside 0..1; {allowed}")
        return v

    @model_validator(mode="after")
    def _one_kind_of_count(self) -> SeedingConfig:
        given = [k for k, v in self.infections.items() if v] if "infections" in self.model_fields_set else []
        if self.infections_per_100k is not None and given:
            # A file's infections: {} merges into the counts of the file it extends (only --set
            # replaces a mapping), so the counts to set to 0 are named.
            zeros = ", ".join(f"{k}: 0" for k in given)
            raise ValueError(
                "give the initial infections as infections (counts) or as infections_per_100k, not both; to seed "
                f"by infections_per_100k where a base file gives counts, set infections: {{{zeros}}}"
            )
        return self

    def counts(self, agents: int) -> dict[str, int]:
        """The number of agents put in each stage on the seeding day, for ``agents`` agents:
        ``infections``, or ``infections_per_100k`` scaled to them and rounded half up."""
        if self.infections_per_100k is None:
            return dict(self.infections)
        return {k: round_half_up(v, agents, 100_000) for k, v in self.infections_per_100k.items()}

    def immune_counts(self, sizes: list[int]) -> list[int]:
        """The number of each age group's agents immune before day 0, of ``sizes`` agents in each:
        its share (``prior_immunity``) of them, rounded half up."""
        return [round_half_up(share, size) for share, size in zip(self.immune_shares(), sizes, strict=True)]

    def room_problem(self, sizes: list[int]) -> str | None:
        """The seeding infects agents not immune before day 0 only: where the age groups' ``sizes``
        (agents in each) leave fewer of them than it asks for, the message that says so (fewer, or
        none, would be seeded without a word); else None."""
        agents = sum(sizes)
        asked = sum(self.counts(agents).values())
        free = agents - sum(self.immune_counts(sizes))
        if asked <= free:
            return None
        return (
            f"seeding: {asked} initial infections a replicate, but seeding.prior_immunity leaves {free} of the "
            f"{agents:,} agents not immune to infect; lower the infections or the prior immunity"
        )

    def immune_shares(self) -> list[float]:
        """The share of each age group immune before day 0 (``prior_immunity``, per age group)."""
        shares = self.prior_immunity
        return list(shares) if isinstance(shares, list) else [float(shares)] * AGE_GROUPS


def round_half_up(value: float, count: int, per: int = 1) -> int:
    """``value * count / per`` rounded half up, exactly for ``value`` as written (its shortest
    decimal): in floating point 0.35 * 90 is 31.499..., which would round down to 31."""
    return math.floor(Fraction(repr(float(value))) * count / per + Fraction(1, 2))


# Community contacts a day, weighted by age class (children 0-19, adults, elderly 70+: about 23%,
# 67% and 10% of King County's residents), and the cycle they recur on, at the defaults.
AGE_CLASS_SHARES = (0.23, 0.67, 0.10)
DEFAULT_COMMUNITY_STUBS = (0.23 * 2.0 + 0.67 * 4.0 + 0.10 * 3.0) * 10


# Peak resident memory of `abm run` on the CPU, rounded up from its measured peaks (BENCHMARKS.md,
# "Peak memory of abm run", 2026-11-28: 438 MB at 2,000 agents; 1,340 and 2,000 MB at 1,000,000
# agents x 1 and x 2 replicates; 1,193 MB at 100,000 x 10; the days simulated change it by a few
# percent at most): the interpreter, torch and the region's data; each agent (the population);
# each agent and replicate (the epidemic's state).
MEMORY_FIXED_BYTES = 500_000_000
MEMORY_BYTES_PER_AGENT = 300
MEMORY_BYTES_PER_AGENT_REPLICATE = 800


def estimate_memory_bytes(agents: int, replicates: int, community_stubs: float = DEFAULT_COMMUNITY_STUBS) -> int:
    """Peak memory of a CPU run of ``agents`` x ``replicates``, conservatively: 1.1 to 1.3 times
    the peaks measured at 2,000 to 1,000,000 agents (:data:`MEMORY_FIXED_BYTES` and the bytes per
    agent and per agent-replicate); and 16 bytes per community contact over a cycle
    (``community_stubs``: mean daily contacts times ``cycle_days``) and agent-replicate beyond the
    defaults' 34 (measured 100-160 bytes per extra daily contact at 50,000 agents x 2 replicates)."""
    extra = 16 * max(0.0, community_stubs - DEFAULT_COMMUNITY_STUBS)
    per_agent = MEMORY_BYTES_PER_AGENT + (MEMORY_BYTES_PER_AGENT_REPLICATE + extra) * replicates
    return math.ceil(MEMORY_FIXED_BYTES + per_agent * agents)
