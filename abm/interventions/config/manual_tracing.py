"""Manual contact tracing's settings and checks (run by :mod:`abm.interventions.manual_tracing`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from abm.interventions.config.tracing import skip_tested_contacts_field, tracing_notes
from abm.interventions.registry import ENABLED_HELP, MAX_DAILY_COUNT, InterventionBase, register


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
    skip_tested_contacts: bool = skip_tested_contacts_field()


@register("manual_tracing")
class ManualTracingSpec(InterventionBase):
    """Manual tracing as a scenario gives it: its settings, what it acts on, its place in a phase
    and the notes on them (run by :class:`abm.interventions.manual_tracing.ManualTracing`)."""

    config_model = ManualTracingConfig
    needs = ("testing",)
    order = 31
    runner_path = "abm.interventions.manual_tracing:ManualTracing"

    @classmethod
    def unused_settings(cls, cfg: Any, on: dict[str, Any], days: int) -> list[str]:
        """Notes when its notices would do less than asked (:func:`tracing_notes`), or none are
        sent: the tracers interview no one (``daily_capacity`` 0)."""
        if cfg.daily_capacity == 0:
            return [
                f"interventions.{cls.name}.daily_capacity is 0: no index case is interviewed, so it does nothing in "
                "this run"
            ]
        return tracing_notes(cls.name, cfg, on)
