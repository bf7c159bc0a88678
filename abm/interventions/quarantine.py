"""Self-quarantine: after a positive test (and, when tracing asks, after a notice), an agent
stays home for a number of days with a daily dropout; a quarantined agent has no contacts in
either direction.

Fields read: ``positive_day`` (testing), ``quarantine_request`` (tracing; cleared here).
"""

from __future__ import annotations

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


@register("quarantine")
class Quarantine(InterventionBase):
    """Sets ``isolated`` on the agents in quarantine."""

    config_model = QuarantineConfig
    order = 10

    def attach(self, sim: Simulation) -> None:
        self.until = torch.full((sim.total,), -1, dtype=torch.int16, device=sim.device)
        self.positive_day = sim.field("positive_day", torch.int16, -1)
        self.request = sim.field("quarantine_request", torch.bool, False)

    def hooks(self) -> dict:
        return {Phase.QUARANTINE: self.step}

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
        st.isolated &= ~draw(st.isolated & ~enter, self.cfg.daily_dropout)
        st.isolated &= st.stage != Stage.DEATH
        if self.cfg.cost_per_day > 0:
            sim.book_cost(
                "quarantine_day", day, sim.per_replicate(st.isolated.nonzero().squeeze(1)), self.cfg.cost_per_day
            )
