"""The intervention registry: name -> (config model, class). Plug-ins register through the
``abm.interventions`` entry-point group, each entry pointing at a class with ``config_model``."""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from pydantic import BaseModel, ConfigDict, RootModel, model_validator

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


class InterventionsConfig(RootModel[dict[str, Any]]):
    """``interventions:`` maps an intervention name to its settings."""

    root: dict[str, Any] = {}
    model_config = ConfigDict()

    @model_validator(mode="before")
    @classmethod
    def _by_name(cls, data: Any) -> Any:
        if data is None or type(data).__name__ == "PydanticUndefinedType":
            return {}
        if not isinstance(data, dict):
            raise ValueError("interventions must be a mapping of intervention names to settings")
        known = registered()
        out: dict[str, BaseModel] = {}
        for name, settings in data.items():
            if name not in known:
                allowed = ", ".join(sorted(known)) or "none installed"
                raise ValueError(f"unknown intervention {name!r}; allowed: {allowed}")
            model = known[name].config_model
            out[name] = settings if isinstance(settings, model) else model.model_validate(settings or {})
        return out

    def build(self) -> list[Any]:
        """The enabled interventions, in the order they were listed."""
        known = registered()
        return [known[n](cfg) for n, cfg in self.root.items() if getattr(cfg, "enabled", True)]
