"""Interventions: one module per intervention, registered by name with its config model. The
engine calls their hooks by phase (see :class:`abm.engine.Phase`); they talk through shared
per-agent fields (``sim.field``) and the agent state, never by calling each other.
Plug-ins add others through the ``abm.interventions`` entry-point group (docs/plugins.md).

The built-ins that need torch keep their settings and checks in :mod:`abm.interventions.config`,
which is what this package imports: a scenario loads and is checked without torch, and an
intervention's module is imported when a run builds it (:meth:`InterventionsBase.build`)."""

import functools
from typing import Any

from abm.interventions import config, contact_multipliers  # noqa: F401  (registers the built-in interventions)
from abm.interventions.registry import InterventionBase, InterventionsBase, interventions_model, register, registered


@functools.cache
def _interventions_config() -> type[InterventionsBase]:
    return interventions_model()


def __getattr__(name: str) -> Any:
    """``InterventionsConfig``: the ``interventions`` section's model over the built-in and plug-in
    interventions, built on first use, not when this package is imported: a plug-in module imports
    this package, so loading the plug-ins here would import that module again while it is only
    partly run (and fail) when it is the first to be imported."""
    if name == "InterventionsConfig":
        return _interventions_config()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "InterventionBase",
    "InterventionsBase",
    "InterventionsConfig",
    "interventions_model",
    "register",
    "registered",
]
