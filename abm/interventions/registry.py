"""The intervention registry: name -> class with a ``config_model``. Plug-ins register through
the ``abm.interventions`` entry-point group, each entry pointing at such a class.

The scenario's ``interventions:`` section is a pydantic model with one optional field per
registered intervention, so every setting is validated with its full key path."""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from pydantic import BaseModel, ConfigDict, create_model

REGISTRY: dict[str, type] = {}


def register(name: str) -> Callable[[type], type]:
    """Class decorator: make an intervention available as ``interventions.<name>``."""

    def wrap(cls: type) -> type:
        cls.name = name
        REGISTRY[name] = cls
        return cls

    return wrap


def registered() -> dict[str, type]:
    """Built-in and plug-in interventions by name."""
    for ep in entry_points(group="abm.interventions"):
        if ep.name not in REGISTRY:
            REGISTRY[ep.name] = ep.load()
    return REGISTRY


class InterventionBase:
    """What every intervention shares: its settings, its place in a phase (``order``), and
    hooks by phase (see :class:`abm.engine.Phase`)."""

    name = ""
    order = 0
    config_model: type[BaseModel]

    def __init__(self, cfg: Any) -> None:
        self.cfg = cfg

    def attach(self, sim: Any) -> None:
        """Create the state the intervention keeps; called once before day 0."""

    def hooks(self) -> dict:
        """Callables ``hook(sim, day)`` by phase."""
        return {}


class InterventionsBase(BaseModel):
    """``interventions:`` maps an intervention name to its settings; absent means off."""

    model_config = ConfigDict(extra="forbid")

    def build(self) -> list[Any]:
        """The enabled interventions."""
        known = registered()
        out = []
        for name in type(self).model_fields:
            cfg = getattr(self, name)
            if cfg is not None and getattr(cfg, "enabled", True):
                out.append(known[name](cfg))
        return out


def interventions_model() -> type[InterventionsBase]:
    """The ``interventions`` section's model over every registered intervention."""
    fields: dict[str, Any] = {name: (cls.config_model | None, None) for name, cls in sorted(registered().items())}
    return create_model("InterventionsConfig", __base__=InterventionsBase, **fields)
