"""Interventions: one module per intervention, each owning its config model, registered by
name. The engine calls their hooks by phase (see :class:`abm.engine.Phase`); they talk through
shared per-agent fields (``sim.field``) and the agent state, never by calling each other."""

from abm.interventions import (  # noqa: F401  (registers the built-in interventions)
    contact_multipliers,
    digital_tracing,
    manual_tracing,
    quarantine,
    testing,
    vaccination,
)
from abm.interventions.registry import InterventionBase, InterventionsBase, interventions_model, register, registered

InterventionsConfig = interventions_model()

__all__ = [
    "InterventionBase",
    "InterventionsBase",
    "InterventionsConfig",
    "interventions_model",
    "register",
    "registered",
]
