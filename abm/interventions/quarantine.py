"""Self-quarantine: after a positive test (and, when tracing asks, after a notice), an agent
stays home for a number of days with a daily dropout; a quarantined agent has no contacts in
either direction.

Fields read: ``positive_day`` (testing), ``quarantine_request`` (tracing; cleared here).
Written: ``isolated_history`` (int32 bits: isolated on each of the last 30 days, bit 0 the
latest), which tracing reads.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import BaseModel, ConfigDict, Field

from abm.engine.disease import Stage
from abm.engine.rng import generator
from abm.engine.simulator import Phase, Simulation
from abm.interventions.registry import InterventionBase, register


class QuarantineConfig(BaseModel):
    """Self-quarantine after a positive test (thesis: 14 days, 1% daily dropout)."""

    model_config = ConfigDict(extra="forbid")
    enabled: bool = True
    enter_probability: float = Field(1.0, ge=0, le=1, description="P(quarantine | positive test)")
    days: int = Field(14, ge=1, description="length of a quarantine")
    daily_dropout: float = Field(0.01, ge=0, le=1, description="P(leaving early), each day")
    household: bool = Field(False, description="household members of a positive quarantine too (same probability)")
    reset_infectiousness: bool = Field(
        False, description="an infected agent completing quarantine is no longer infectious"
    )
    cost_per_day: float = Field(0.0, ge=0, description="US$ per agent-day in quarantine")
    persistence: Literal["full", "entry_day"] = Field(
        "full",
        description="full: a quarantine lasts until it ends or the agent drops out (intended); entry_day: it "
        "isolates the agent on the day it starts only, and the daily dropout applies on that day (reproduces the "
        "reference code, where the day's quarantine flag is never carried to the next day: specs section 11 Q3)",
    )
    blocks: Literal["both", "infector"] = Field(
        "both",
        description="both: a quarantined agent neither infects nor is infected (intended); infector: it only stops "
        "infecting others (reproduces the reference code, specs section 11 Q5)",
    )


@register("quarantine")
class Quarantine(InterventionBase):
    """Sets ``isolated`` on the agents in quarantine."""

    config_model = QuarantineConfig
    order = 10

    def attach(self, sim: Simulation) -> None:
        sim.isolation_shields = self.cfg.blocks == "both"
        # Bit k: isolated on the k-th latest day this phase ran (bit 0: the latest), for tracing.
        self.history = sim.field("isolated_history", torch.int32, 0)
        self.until = torch.full((sim.total,), -1, dtype=torch.int16, device=sim.device)
        self.positive_day = sim.field("positive_day", torch.int16, -1)
        self.request = sim.field("quarantine_request", torch.bool, False)

    def hooks(self) -> dict:
        if self.cfg.persistence == "entry_day":
            return {Phase.QUARANTINE: self.step, Phase.CONTACT_LOGGING: self.lift}
        return {Phase.QUARANTINE: self.step}

    def lift(self, sim: Simulation, day: int) -> None:
        """Entry-day persistence: today's quarantines end once the day's contacts are over."""
        st = sim.state
        if self.cfg.reset_infectiousness:
            st.infectiousness_scale[st.isolated & (st.stage != Stage.SUSCEPTIBLE)] = 0.0
        st.isolated.zero_()

    def step(self, sim: Simulation, day: int) -> None:
        st = sim.state
        gen = generator(sim.seed, "quarantine", day, sim.device)

        def draw(mask: torch.Tensor, p: float) -> torch.Tensor:
            idx = mask.nonzero().squeeze(1)
            keep = torch.rand(idx.shape[0], generator=gen, device=sim.device) < p
            out = torch.zeros_like(mask)
            out[idx[keep]] = True
            return out

        ending = st.isolated & (self.until <= day)
        if self.cfg.reset_infectiousness:
            st.infectiousness_scale[ending & (st.stage != Stage.SUSCEPTIBLE)] = 0.0
        st.isolated &= ~ending
        enter = draw(self.positive_day == day, self.cfg.enter_probability)
        if self.cfg.household:
            _, members = sim.household.contacts_of(enter.nonzero().squeeze(1), day)
            mates = torch.zeros_like(enter)
            mates[members] = True
            enter |= draw(mates & ~enter, self.cfg.enter_probability)
        enter |= self.request
        enter &= (st.stage != Stage.DEATH) & ~st.isolated
        st.isolated |= enter
        self.until[enter] = day + self.cfg.days
        self.request.zero_()
        staying = st.isolated if self.cfg.persistence == "entry_day" else st.isolated & ~enter
        st.isolated &= ~draw(staying, self.cfg.daily_dropout)
        st.isolated &= st.stage != Stage.DEATH
        self.history.bitwise_left_shift_(1).bitwise_and_((1 << 30) - 1).bitwise_or_(st.isolated.to(torch.int32))
        if self.cfg.cost_per_day > 0:
            sim.book_cost(
                "quarantine_day", day, sim.per_replicate(st.isolated.nonzero().squeeze(1)), self.cfg.cost_per_day
            )
