"""Manual contact tracing: tracers interview index cases who test positive and can be reached,
recall each household and school/work contact of the last days with some probability, reach
the contacts and ask them to quarantine. In ``two_step`` mode (the thesis's hybrid), tracers
follow up only contacts without the app or who ignored the app's notice; in ``parallel``
mode the two channels act independently.

Fields read: ``positive_day``, ``has_app``, ``dct_notified_day``, ``dct_complied_day``.
Written: ``quarantine_request`` (and ``test_request`` when asked).
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import BaseModel, ConfigDict, Field

from abm.engine.rng import generator
from abm.engine.simulator import Phase, Simulation
from abm.interventions.registry import InterventionBase, register
from abm.interventions.selection import first_per_replicate
from abm.interventions.tracing import bernoulli, notify, unique_pairs


class ManualTracingConfig(BaseModel):
    """Manual tracing (thesis: 7 days, recall 0.7, compliance 0.9; reachability 0.8)."""

    model_config = ConfigDict(extra="forbid")
    enabled: bool = True
    window_days: int = Field(7, ge=1, description="days of contacts traced back")
    recall: float = Field(0.7, ge=0, le=1, description="P(an index case recalls a given contact)")
    reachable: float = Field(0.8, ge=0, le=1, description="P(tracers reach an index case; and, separately, a contact)")
    compliance: float = Field(0.9, ge=0, le=1, description="P(a traced contact quarantines)")
    daily_capacity: int | None = Field(
        None, ge=0, description="index cases interviewed per day per replicate; none: unlimited"
    )
    cost_per_interview: float = Field(0.0, ge=0, description="US$ per index case interviewed")
    mode: Literal["parallel", "two_step"] = Field(
        "two_step", description="how manual tracing combines with digital tracing"
    )
    test_contacts: bool = Field(False, description="traced contacts who comply also ask for a test")


@register("manual_tracing")
class ManualTracing(InterventionBase):
    """Tracers follow household and school/work contacts of positives."""

    config_model = ManualTracingConfig
    order = 31

    def attach(self, sim: Simulation) -> None:
        self.positive_day = sim.field("positive_day", torch.int16, -1)
        self.has_app = sim.field("has_app", torch.bool, False)
        self.notified_day = sim.field("dct_notified_day", torch.int16, -1)
        self.complied_day = sim.field("dct_complied_day", torch.int16, -1)

    def hooks(self) -> dict:
        return {Phase.TRACING: self.trace}

    def trace(self, sim: Simulation, day: int) -> None:
        c = self.cfg
        index = (self.positive_day == day).nonzero().squeeze(1)
        index = index[bernoulli(sim, "mct-reach-index", day, index.shape[0], c.reachable)]
        if c.daily_capacity is not None:
            limit = torch.full((sim.replicates,), c.daily_capacity, device=sim.device)
            key = torch.rand(
                index.shape[0], device=sim.device, generator=generator(sim.seed, "mct-capacity", day, sim.device)
            )
            index = index[first_per_replicate(sim.replicate.index_select(0, index), key, limit)]
        if index.numel() == 0:
            return
        if c.cost_per_interview > 0:
            sim.book_cost("mct_interview", day, sim.per_replicate(index), c.cost_per_interview)
        owners, partners = [], []
        for d in range(max(0, day - c.window_days), day):
            for layer in (sim.household, sim.occupation):
                o, p = layer.contacts_of(index, d)
                owners.append(o)
                partners.append(p)
        _owner, partner = unique_pairs(torch.cat(owners), torch.cat(partners), sim.total)
        # Recall per (index case, contact); then each contact is reached or not.
        recalled = partner[bernoulli(sim, "mct-recall", day, partner.shape[0], c.recall)]
        traced = torch.unique(recalled)
        traced = traced[bernoulli(sim, "mct-reach-contact", day, traced.shape[0], c.reachable)]
        traced = traced[~sim.state.isolated.index_select(0, traced)]
        if c.mode == "two_step":
            has_app = self.has_app.index_select(0, traced)
            heeded = self.complied_day.index_select(0, traced) == day
            traced = traced[~has_app | ~heeded]
        notify(sim, day, traced, c.compliance, "mct-comply", c.test_contacts)
