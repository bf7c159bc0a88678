"""Interventions: one module per intervention, each owning its config model, registered by
name. The engine calls their hooks by phase (see :class:`abm.engine.Phase`)."""

from abm.interventions.registry import InterventionsConfig, register, registered

__all__ = ["InterventionsConfig", "register", "registered"]
