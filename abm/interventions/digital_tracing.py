"""Digital contact tracing: app owners (age-stratified ownership with a target average) log
their contacts on every layer when both phones have the app; an app owner who tests positive
notifies the contacts of the last days, who quarantine with some compliance.

Days on which an index case was isolated are skipped (it met nobody then).

Fields read: ``positive_day`` (testing), ``isolated_history`` (quarantine) and, with
``skip_tested_contacts``, ``last_test_day`` (testing). Written: ``has_app``, ``dct_notified_day``,
``dct_complied_day``, ``quarantine_request`` (and ``test_request`` when asked). Daily count
(timeseries column): ``app_notifications``, the contacts notified.
"""

from __future__ import annotations

import torch

from abm.engine.config import Phase
from abm.engine.simulator import Simulation
from abm.interventions.config.digital_tracing import DigitalTracingConfig as DigitalTracingConfig  # named as before
from abm.interventions.config.digital_tracing import DigitalTracingSpec
from abm.interventions.testing import positives_to_trace
from abm.interventions.tracing import bernoulli, can_be_asked, keep_window, notify, window_contacts


def ownership_probabilities(weights: torch.Tensor, target: float) -> torch.Tensor:
    """p_i = min(1, c w_i) with c chosen so that the mean of p is ``target``."""
    if target <= 0 or float(weights.sum()) == 0:
        return torch.zeros_like(weights)
    lo, hi = 0.0, 1.0 / max(float(weights[weights > 0].min()), 1e-12)
    for _ in range(60):
        mid = (lo + hi) / 2
        if float(torch.clamp(mid * weights, max=1).mean()) < target:
            lo = mid
        else:
            hi = mid
    return torch.clamp(hi * weights, max=1)


class DigitalTracing(DigitalTracingSpec):
    """Notifies app-owning contacts of app owners who test positive."""

    def attach(self, sim: Simulation) -> None:
        c = self.cfg
        problem = self.population_problem(c, lambda: sim.age_group[: sim.n])
        if problem is not None:
            from abm.scenario import ScenarioError  # the scenario module imports the interventions

            raise ScenarioError(problem)
        w = torch.tensor(c.age_weights if c.age_stratified else [1.0] * 9, device=sim.device)
        weights = w.index_select(0, sim.age_group[: sim.n]).float()
        p = ownership_probabilities(weights, c.app_adoption)
        u = sim.rand("app", -1, sim.total)
        self.has_app = sim.field("has_app", torch.bool, False)
        self.has_app |= u < p.repeat(sim.replicates)
        sim.field("positive_day", torch.int16, -1)  # read through positives_to_trace; exists from the start
        self.notified_day = sim.field("dct_notified_day", torch.int16, -1)
        self.complied_day = sim.field("dct_complied_day", torch.int16, -1)
        keep_window(sim, self.cfg.window_days)
        sim.declare_activity("app_notifications")

    def hooks(self) -> dict:
        return {Phase.TRACING: self.trace}

    def contacts(self, sim: Simulation, index: torch.Tensor, day: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(index case, contact) over the window on every layer, the contact with the app."""
        tested = sim.fields.get("last_test_day") if self.cfg.skip_tested_contacts else None
        owner, partner = window_contacts(sim, index, day, self.cfg.window_days, sim.layers, tested)
        keep = self.has_app.index_select(0, partner)
        return owner[keep], partner[keep]

    def trace(self, sim: Simulation, day: int) -> None:
        """Notify the recent contacts with the app of today's positives (positives need the app too where
        ``require_app`` is both)."""
        c = self.cfg
        index = positives_to_trace(sim, day)
        if c.require_app == "both":
            index = index[self.has_app.index_select(0, index)]
        index = index[bernoulli(sim, "dct-notify", day, index.shape[0], c.notify_probability)]
        if index.numel() == 0:
            return
        _, partner = self.contacts(sim, index, day)
        reached = torch.unique(partner)
        reached = can_be_asked(sim, reached)
        self.notified_day[reached] = day
        counted = sim.per_replicate(reached)
        sim.count_activity("app_notifications", day, counted)
        complied = notify(sim, day, reached, c.compliance, "dct-comply", c.test_contacts)
        self.complied_day[reached[complied]] = day
        sim.book_cost("dct_notification", day, counted, c.cost_per_notification)
