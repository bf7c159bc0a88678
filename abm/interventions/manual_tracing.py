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

import torch

from abm.engine.config import Phase
from abm.engine.simulator import Simulation
from abm.interventions.config.manual_tracing import ManualTracingConfig as ManualTracingConfig  # named here as before
from abm.interventions.config.manual_tracing import ManualTracingSpec
from abm.interventions.selection import first_per_replicate
from abm.interventions.testing import positives_to_trace
from abm.interventions.tracing import bernoulli, can_be_asked, keep_window, notify, window_contacts


class ManualTracing(ManualTracingSpec):
    """Tracers follow household and school/work contacts of positives."""

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
