"""Self-quarantine's settings (run by :mod:`abm.interventions.quarantine`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from abm.engine.config import MAX_DAYS
from abm.interventions.registry import ENABLED_HELP, InterventionBase, register


class QuarantineConfig(BaseModel):
    """Self-quarantine after a positive test (thesis: 14 days, 1% daily dropout)."""

    model_config = ConfigDict(extra="forbid")
    enabled: bool = Field(True, description=ENABLED_HELP)
    enter_probability: float = Field(1.0, ge=0, le=1, description="P(quarantine | positive test)")
    days: int = Field(14, ge=1, le=MAX_DAYS, description="length of a quarantine")
    daily_dropout: float = Field(
        0.01, ge=0, le=1, description="P(leaving early), each day after the day of entry (entry_day: on that day)"
    )
    household: bool = Field(
        False, description="household members of a positive quarantine too (each with enter_probability)"
    )
    reset_infectiousness: bool = Field(
        True,
        description="an infected agent completing its quarantine days is no longer infectious (thesis; false "
        "reproduces the reference code, which does not implement it: docs/reference.md §11 Q12; entry_day "
        "quarantines never complete)",
    )
    cost_per_day: float = Field(0.0, ge=0, description="US$ per agent-day in quarantine")
    persistence: Literal["full", "entry_day"] = Field(
        "full",
        description="full: a quarantine lasts until it ends or the agent drops out (intended); entry_day: it "
        "isolates the agent on the day it starts only, and the daily dropout applies on that day (reproduces the "
        "reference code, where the day's quarantine flag is never carried to the next day: docs/reference.md §11 Q3)",
    )
    blocks: Literal["both", "infector"] = Field(
        "both",
        description="both: a quarantined agent neither infects nor is infected (intended); infector: it only stops "
        "infecting others (reproduces the reference code, docs/reference.md §11 Q5)",
    )


@register("quarantine")
class QuarantineSpec(InterventionBase):
    """Self-quarantine as a scenario gives it: its settings, what it acts on and its place in a
    phase (run by :class:`abm.interventions.quarantine.Quarantine`)."""

    config_model = QuarantineConfig
    needs = ("testing",)
    order = 10
    runner_path = "abm.interventions.quarantine:Quarantine"
