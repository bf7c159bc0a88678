"""Digital contact tracing's settings and checks (run by :mod:`abm.interventions.digital_tracing`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from abm.interventions.config.tracing import skip_tested_contacts_field, tracing_notes
from abm.interventions.registry import ENABLED_HELP, InterventionBase, register

if TYPE_CHECKING:
    import torch

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
    skip_tested_contacts: bool = skip_tested_contacts_field()


@register("digital_tracing")
class DigitalTracingSpec(InterventionBase):
    """Digital tracing as a scenario gives it: its settings, what it acts on, its place in a
    phase and the checks on them (run by :class:`abm.interventions.digital_tracing.DigitalTracing`)."""

    config_model = DigitalTracingConfig
    needs = ("testing",)
    order = 30
    runner_path = "abm.interventions.digital_tracing:DigitalTracing"

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
        import torch  # only here, as the population is built only here (abm validate needs neither otherwise)

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
