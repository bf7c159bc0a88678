"""Manual contact tracing: tracers interview index cases who test positive and can be reached,
recall each household and school/work contact of the last days with some probability, reach
the contacts and ask them to quarantine. In ``two_step`` mode (the thesis's hybrid), tracers
follow up only contacts without the app or who ignored the app's notice; in ``parallel``
mode the two channels act independently.

Days on which an index case was isolated are skipped (it met nobody then).

Fields read: ``positive_day``, ``has_app``, ``dct_complied_day`` (digital tracing),
``isolated_history`` (quarantine) and, with ``skip_tested_contacts``, ``last_test_day``.
Written: ``quarantine_request`` (and ``test_request`` when asked). Daily counts (timeseries
columns): ``interviews`` (index cases reached) and ``manual_notifications`` (contacts reached).
"""

from __future__ import annotations

from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field

from abm.engine.simulator import Phase, Simulation
from abm.interventions.registry import ENABLED_HELP, MAX_DAILY_COUNT, InterventionBase, register
from abm.interventions.selection import first_per_replicate
from abm.interventions.testing import positives_to_trace
from abm.interventions.tracing import bernoulli, can_be_asked, keep_window, notify, tracing_notes, window_contacts


class ManualTracingConfig(BaseModel):
    """Manual tracing (thesis: 7 days, recall 0.7, compliance 0.9; reachability 0.8)."""

    model_config = ConfigDict(extra="forbid")
    enabled: bool = Field(True, description=ENABLED_HELP)
    window_days: int = Field(
        7, ge=1, le=30, description="days of contacts traced back (quarantine keeps 30 days of isolation history)"
    )
    recall: float = Field(0.7, ge=0, le=1, description="P(an index case recalls a given contact)")
    reachable: float = Field(0.8, ge=0, le=1, description="P(tracers reach an index case; and, separately, a contact)")
    compliance: float = Field(0.9, ge=0, le=1, description="P(a traced contact quarantines)")
    daily_capacity: int | None = Field(
        None,
        ge=0,
        le=MAX_DAILY_COUNT,
        description="index cases interviewed per day per replicate, drawn at random among the day's reachable "
        "positives (those beyond it are not interviewed later); none: unlimited",
    )
    cost_per_interview: float = Field(0.0, ge=0, description="US$ per index case interviewed")
    mode: Literal["parallel", "two_step"] = Field(
        "two_step", description="how manual tracing combines with digital tracing"
    )
    test_contacts: bool = Field(
        False, description="traced contacts who comply also ask for a test (taken by a test type given to traced)"
    )
    recall_unit: Literal["pair", "contact"] = Field(
        "pair",
        description="pair: an index case recalls each of its contacts independently (intended); contact: one recall "
        "draw per traced agent per day, however many index cases met it (reproduces the reference code, specs "
        "section 7.4)",
    )
    reachability: Literal["daily", "per_agent"] = Field(
        "daily",
        description="daily: whether tracers reach an agent is drawn each time (intended); per_agent: drawn once per "
        "agent at the start, so the same agents are never reached (reproduces the reference code)",
    )
    skip_tested_contacts: bool = Field(
        False,
        description="skip a contact of day d who has taken a test on day d or later (field last_test_day); "
        "the reference code does this (docs/reference.md §6 step 2)",
    )


@register("manual_tracing")
class ManualTracing(InterventionBase):
    """Tracers follow household and school/work contacts of positives."""

    config_model = ManualTracingConfig
    needs = ("testing",)
    order = 31

    @classmethod
    def unused_settings(cls, cfg: Any, on: dict[str, Any], days: int) -> list[str]:
        """Notes when its notices would do less than asked (:func:`tracing_notes`)."""
        return tracing_notes(cls.name, cfg, on)

    def attach(self, sim: Simulation) -> None:
        sim.field("positive_day", torch.int16, -1)  # read through positives_to_trace; exists from the start
        self.has_app = sim.field("has_app", torch.bool, False)
        self.complied_day = sim.field("dct_complied_day", torch.int16, -1)
        if self.cfg.reachability == "per_agent":
            u = sim.rand("mct-reachable", -1, sim.total)
            self.reachable = u < self.cfg.reachable
        keep_window(sim, self.cfg.window_days)
        sim.declare_activity("interviews")
        sim.declare_activity("manual_notifications")

    def reach(self, sim: Simulation, stream: str, day: int, agents: torch.Tensor) -> torch.Tensor:
        """Mask of the ``agents`` tracers reach today."""
        if self.cfg.reachability == "per_agent":
            return self.reachable.index_select(0, agents)
        return bernoulli(sim, stream, day, agents.shape[0], self.cfg.reachable)

    def hooks(self) -> dict:
        return {Phase.TRACING: self.trace}

    def trace(self, sim: Simulation, day: int) -> None:
        """Interview today's reachable positives and notify the household and occupation contacts they recall."""
        c = self.cfg
        index = positives_to_trace(sim, day)
        index = index[self.reach(sim, "mct-reach-index", day, index)]
        if c.daily_capacity is not None:
            limit = torch.full((sim.replicates,), c.daily_capacity, device=sim.device)
            key = sim.rand("mct-capacity", day, index.shape[0])
            index = index[first_per_replicate(sim.replicate.index_select(0, index), key, limit)]
        if index.numel() == 0:
            return
        counted = sim.per_replicate(index)
        sim.count_activity("interviews", day, counted)
        if c.cost_per_interview > 0:
            sim.book_cost("mct_interview", day, counted, c.cost_per_interview)
        tested = sim.fields.get("last_test_day") if c.skip_tested_contacts else None
        layers = (sim.household, sim.occupation)
        _owner, partner = window_contacts(sim, index, day, c.window_days, layers, tested)
        if c.recall_unit == "pair":  # recall per (index case, contact)
            traced = torch.unique(partner[bernoulli(sim, "mct-recall", day, partner.shape[0], c.recall)])
        else:  # one recall draw per contact
            traced = torch.unique(partner)
            traced = traced[bernoulli(sim, "mct-recall", day, traced.shape[0], c.recall)]
        traced = traced[self.reach(sim, "mct-reach-contact", day, traced)]
        traced = can_be_asked(sim, traced)
        if c.mode == "two_step":
            has_app = self.has_app.index_select(0, traced)
            heeded = self.complied_day.index_select(0, traced) == day
            traced = traced[~has_app | ~heeded]
        sim.count_activity("manual_notifications", day, sim.per_replicate(traced))
        notify(sim, day, traced, c.compliance, "mct-comply", c.test_contacts)
