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

from collections.abc import Callable
from typing import Annotated, Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field

from abm.engine.simulator import Phase, Simulation
from abm.interventions.registry import ENABLED_HELP, InterventionBase, register
from abm.interventions.testing import positives_to_trace
from abm.interventions.tracing import bernoulli, can_be_asked, keep_window, notify, tracing_notes, window_contacts

# Relative app ownership by age group (smartphone-style propensities of the thesis model).
APP_WEIGHTS = [0.09, 0.80, 0.97, 0.96, 0.94, 0.86, 0.70, 0.48, 0.32]


class DigitalTracingConfig(BaseModel):
    """Exposure notification by app (thesis: 40% adoption, 7 days, 80% compliance)."""

    model_config = ConfigDict(extra="forbid")
    enabled: bool = Field(True, description=ENABLED_HELP)
    app_adoption: float = Field(
        0.4,
        ge=0,
        le=1,
        description="average share of agents with the app; at most the share in age groups of weight above 0 "
        "(abm validate checks it)",
    )
    age_stratified: bool = Field(True, description="ownership follows age weights (else uniform)")
    age_weights: list[Annotated[float, Field(ge=0)]] = Field(
        default_factory=lambda: list(APP_WEIGHTS),
        min_length=9,
        max_length=9,
        description="relative ownership by age group",
    )
    window_days: int = Field(
        7, ge=1, le=30, description="days of contacts the app keeps (quarantine keeps 30 days of isolation history)"
    )
    notify_probability: float = Field(1.0, ge=0, le=1, description="P(a positive app owner sends the notice)")
    compliance: float = Field(0.8, ge=0, le=1, description="P(a notified contact quarantines)")
    test_contacts: bool = Field(
        False, description="notified contacts who comply also ask for a test (taken by a test type given to traced)"
    )
    cost_per_notification: float = Field(0.0, ge=0, description="US$ per contact notified")
    require_app: Literal["both", "recipient"] = Field(
        "both",
        description="both: only an app owner who tests positive notifies, only contacts logged by both phones "
        "(intended); recipient: every positive notifies every contact that owns the app (reproduces the reference "
        "code, docs/reference.md §11 Q4)",
    )
    skip_tested_contacts: bool = Field(
        False,
        description="skip a contact of day d who has taken a test on day d or later (field last_test_day); "
        "the reference code does this (docs/reference.md §6 step 2)",
    )


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


@register("digital_tracing")
class DigitalTracing(InterventionBase):
    """Notifies app-owning contacts of app owners who test positive."""

    config_model = DigitalTracingConfig
    needs = ("testing",)
    order = 30

    @classmethod
    def unused_settings(cls, cfg: Any, on: dict[str, Any], days: int) -> list[str]:
        """Notes when its notices would do less than asked (:func:`tracing_notes`), or none are
        sent: no one has the app (``app_adoption`` 0)."""
        if cfg.app_adoption == 0:
            return [f"interventions.{cls.name}.app_adoption is 0: no one has the app, so it does nothing in this run"]
        return tracing_notes(cls.name, cfg, on)

    @classmethod
    def population_problem(cls, cfg: Any, age_groups: Callable[[], torch.Tensor]) -> str | None:
        """An ``app_adoption`` above the share of agents in age groups of weight above 0."""
        if not cfg.age_stratified or min(cfg.age_weights) > 0 or cfg.app_adoption == 0:
            return None
        groups = age_groups()
        positive = torch.tensor([w > 0 for w in cfg.age_weights], device=groups.device)
        reachable = float(positive.index_select(0, groups).float().mean())
        if cfg.app_adoption <= reachable + 1e-9:
            return None
        return (
            f"interventions.digital_tracing.app_adoption: {cfg.app_adoption} cannot be reached with these "
            f"age_weights: the age groups of weight 0 hold {1 - reachable:.1%} of the agents, so at most "
            f"{reachable:.1%} can own the app; lower app_adoption or give those groups a weight above 0"
        )

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
        if c.cost_per_notification > 0:
            sim.book_cost("dct_notification", day, counted, c.cost_per_notification)
