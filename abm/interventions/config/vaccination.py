"""Vaccination's settings and checks (run by :mod:`abm.interventions.vaccination`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from abm.engine.config import MAX_DAYS
from abm.interventions.config.age_ranges import FORMS, LAST_GROUP, AgeRange, covered_entries, parse_range, range_problem
from abm.interventions.registry import ENABLED_HELP, MAX_DAILY_COUNT, InterventionBase, register

# A priority entry for the residents of long-term care facilities (the setting's name,
# LONG_TERM_CARE, names its staff and residents alike).
RESIDENTS = "long_term_care_residents"

# Appended to each dose-2 setting's description: under first_doses_first it may never act.
SECOND_DOSES = " (second doses: see first_doses_first)"


class VaccinationConfig(BaseModel):
    """Two-dose vaccination (thesis defaults: from day 10, 0.3% of the population a day)."""

    model_config = ConfigDict(extra="forbid")
    enabled: bool = Field(True, description=ENABLED_HELP)
    start_day: int = Field(10, ge=0, description="first vaccination day")
    daily_doses_per_100k: float | None = Field(
        300.0,
        ge=0,
        le=100_000,
        description="doses produced per day per 100,000 agents (300 = 0.3%; 100,000: a dose for every agent each day)",
    )
    daily_doses: int | None = Field(
        None,
        ge=0,
        le=MAX_DAILY_COUNT,
        description="doses produced per day for the simulated agents, not the region's residents (5,000 a day for "
        "King County's 2.25 million residents is daily_doses_per_100k 222 at any population.agents); replaces "
        "daily_doses_per_100k, which the resolved scenario then shows as null",
    )
    shelf_life_days: int = Field(
        2,
        ge=0,
        le=MAX_DAYS,
        description="days an unused dose can wait before it expires (doses are left over on a day when fewer agents "
        "can take one than are made, e.g. while candidates are in quarantine or once the programme has run out of "
        "them; kept, they serve later days)",
    )
    priority: Literal["oldest_first", "youngest_first"] | list[int | str] = Field(
        "oldest_first",
        description="order of age groups (0 = 0-9 ... 8 = 80+), or a list of them (groups not listed get no dose; "
        "a group holds the agents whose age, drawn uniformly within a region's age band, falls in it, and one that "
        "cuts a band gets a note naming it); "
        "a list may also name age ranges in years, 65+ (65 and over) or 65-74 (65 to 74), which must start and end "
        "where the population's age bands do (a region's age_bands, King County's five-year bands; the reference "
        f"population's ten-year groups), {RESIDENTS} and occupation settings (a key of "
        "contacts.occupation.degree: HEALTHCARE, the health care sector's workers; LONG_TERM_CARE, the facilities' "
        "staff and residents; SCHOOL, pupils and staff), each agent in the class of the first entry it belongs to: "
        "[long_term_care_residents, HEALTHCARE, 8, 7] vaccinates residents, then health care workers, then the "
        "others of 80+, then of 70-79; [75+, 65+, 6] those of 75 and over, then of 65-74, then of 60-64",
    )
    first_doses_first: bool = Field(
        True,
        description="true: all first doses before any second dose: a day's doses go to second doses only when no "
        "one else can take a first dose that day (at the default supply, 0.3% of the agents a day, first doses reach "
        "half the agents in 170 days, so a 180-day run of every age group gives no second dose and the dose2_* "
        "settings change nothing); false: priority class by priority class (an age group, or an entry of a priority "
        "list), within a class second doses (those due) before first doses",
    )
    dose1_efficacy: float = Field(
        0.90, ge=0, le=1, description="P(protected) after dose 1 (leaky: susceptibility reduction)"
    )
    dose2_efficacy: float = Field(0.95, ge=0, le=1, description="P(protected) after dose 2" + SECOND_DOSES)
    dose1_delay_days: int = Field(14, ge=0, le=MAX_DAYS, description="days from dose 1 to protection")
    dose2_delay_days: int = Field(0, ge=0, le=MAX_DAYS, description="days from dose 2 to protection" + SECOND_DOSES)
    dose2_gap_days: int = Field(21, ge=0, le=MAX_DAYS, description="minimum days between doses" + SECOND_DOSES)
    dose2_dropout: float = Field(
        0.3, ge=0, le=1, description="P(not returning for dose 2), drawn as dose2_dropout_draw says" + SECOND_DOSES
    )
    protection: Literal["all_or_nothing", "leaky"] = Field(
        "all_or_nothing",
        description="all_or_nothing: a dose makes the agent immune with probability equal to its efficacy (see "
        "dose2_combine); leaky: from a dose's protection day the agent's susceptibility is multiplied by 1 - "
        "efficacy of the latest dose in effect (so a dose 2 less effective than dose 1 lowers the protection)",
    )
    price_per_dose: float = Field(20.0, ge=0, description="US$ per dose administered")
    dose2_combine: Literal["either", "overwrite"] = Field(
        "either",
        description="all-or-nothing protection after dose 2: either, protected if the dose-1 or the dose-2 draw "
        "protects (intended); overwrite, the dose-2 draw replaces the dose-1 draw (reproduces the reference code, "
        "docs/reference.md §11 Q6)" + SECOND_DOSES,
    )
    dose2_dropout_draw: Literal["once", "daily"] = Field(
        "once",
        description="once: whether an agent returns for dose 2 is drawn once (intended); daily: redrawn every day "
        "(reproduces the reference code, docs/reference.md §11 Q6)" + SECOND_DOSES,
    )

    @field_validator("priority")
    @classmethod
    def _groups(cls, v: object) -> object:
        if not isinstance(v, list):
            return v
        bad = [x for x in v if isinstance(x, int) and not 0 <= x <= LAST_GROUP]
        bad += [x for x in v if isinstance(x, str) and x != RESIDENTS and not x.isupper() and parse_range(x) is None]
        if not v or len(set(v)) != len(v) or bad:
            raise ValueError(
                f"a priority list holds one or more distinct entries, each an age group 0..{LAST_GROUP}, {FORMS}, "
                f"{RESIDENTS} or an occupation setting (upper case, a key of contacts.occupation.degree)"
                + (f"; not {', '.join(repr(x) for x in bad)}" if bad else "")
                + (" (an empty one vaccinates no one)" if not v else "")
            )
        wrong = [p for x in v if isinstance(x, str) and (r := parse_range(x)) and (p := range_problem(r))]
        if wrong:
            raise ValueError(wrong[0])
        covered = covered_entries(v)
        if covered:
            entry, by = covered[0]
            raise ValueError(
                f"{entry} comes after {by}, which take{'s' if ',' not in by else ''} all its ages (each agent is in "
                "the class of the first entry it belongs to), so it would vaccinate no one; leave it out, or put the "
                "narrower entry first ([75+, 65+]: 75 and over, then 65-74)"
            )
        return v

    def priority_names(self) -> list[str]:
        """The entries of the priority list that name agents other than by age: the occupation
        settings and :data:`RESIDENTS` (none for oldest_first or youngest_first)."""
        entries = self.priority if isinstance(self.priority, list) else []
        return [x for x in entries if isinstance(x, str) and parse_range(x) is None]

    def priority_settings(self) -> list[str]:
        """The occupation settings the priority list names (checked against the scenario's)."""
        return [x for x in self.priority_names() if x != RESIDENTS]

    def priority_ranges(self) -> list[AgeRange]:
        """The age ranges the priority list writes (``65+``, ``65-74``), in its order."""
        entries = self.priority if isinstance(self.priority, list) else []
        return [r for x in entries if isinstance(x, str) and (r := parse_range(x)) is not None]

    @model_validator(mode="after")
    def _supply(self) -> VaccinationConfig:
        if self.daily_doses is None and self.daily_doses_per_100k is None:
            raise ValueError("give daily_doses or daily_doses_per_100k")
        if self.daily_doses is not None:
            self.daily_doses_per_100k = None  # replaced: the resolved scenario shows the rule in use only
        return self


@register("vaccination")
class VaccinationSpec(InterventionBase):
    """Vaccination as a scenario gives it: its settings, its place in a phase and the notes on
    them (run by :class:`abm.interventions.vaccination.Vaccination`)."""

    config_model = VaccinationConfig
    order = 20
    runner_path = "abm.interventions.vaccination:Vaccination"

    @classmethod
    def unused_settings(cls, cfg: VaccinationConfig, on: dict, days: int) -> list[str]:
        """A note when the supply is 0 doses a day: the programme gives no dose."""
        key = "daily_doses" if cfg.daily_doses is not None else "daily_doses_per_100k"
        if getattr(cfg, key) == 0:
            return [f"interventions.{cls.name}.{key} is 0: no dose is given, so it does nothing in this run"]
        return []
