"""The intervention registry: name -> class with a ``config_model``. Plug-ins register through
the ``abm.interventions`` entry-point group, each entry pointing at such a class.

The scenario's ``interventions:`` section is a pydantic model with one optional field per
registered intervention, so every setting is validated with its full key path."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from abm.plugin_errors import PluginError
from abm.plurals import counted

if TYPE_CHECKING:
    import torch

REGISTRY: dict[str, type] = {}
# The meaning of every intervention's ``enabled`` key (docs/scenarios.md).
ENABLED_HELP = "false: off, as if the key were absent, its settings kept (for extends and --set); true: on"
# The most a daily count (doses, tests, interviews) may be: more than any population a run can hold,
# so it takes no one's dose or test away, while the engine's 64-bit counts cannot overflow (1e20
# daily doses ended a run with "Overflow when unpacking long long"; null is unlimited).
MAX_DAILY_COUNT = 1_000_000_000


def register(name: str) -> Callable[[type], type]:
    """Class decorator: make an intervention available as ``interventions.<name>``."""

    def wrap(cls: type) -> type:
        cls.name = name
        REGISTRY[name] = cls
        return cls

    return wrap


def registered() -> dict[str, type]:
    """Built-in and plug-in interventions by name. A plug-in's class is registered under its entry
    point's name, which becomes its ``name`` (as :func:`register` sets it); a plug-in named as a
    built-in is left out."""
    for ep in entry_points(group="abm.interventions"):
        if ep.name not in REGISTRY:
            cls = load_plugin(ep)
            cls.plugin_entry_point = ep.value  # the engine reports its failures as the plug-in's
            register(ep.name)(cls)
    return REGISTRY


def load_plugin(ep: EntryPoint) -> type:
    """The intervention class an entry point names; a :class:`PluginError` naming the entry point
    and its package when it cannot be imported or is not an intervention class (an error while
    the scenario model is built would otherwise read as that model missing)."""
    where = f"the abm.interventions plug-in {ep.name!r} ({ep.value}"
    where += f", from {ep.dist.name} {ep.dist.version})" if ep.dist is not None else ")"
    try:
        cls = ep.load()
    except Exception as exc:
        raise PluginError(f"{where} cannot be loaded: {type(exc).__name__}: {exc}; fix or uninstall it") from exc
    model = getattr(cls, "config_model", None)
    if not (isinstance(cls, type) and isinstance(model, type) and issubclass(model, BaseModel)):
        raise PluginError(
            f"{where} is not an intervention: it must name a class whose config_model is a pydantic model "
            "(docs/plugins.md)"
        )
    return cls


class InterventionBase:
    """What every intervention shares: its settings, its place in a phase (``order``), and
    hooks by phase (see :class:`abm.engine.Phase`)."""

    name = ""
    order = 0
    config_model: type[BaseModel]
    needs: tuple[str, ...] = ()  # interventions whose results it acts on (without them it does nothing)
    # "module:Class" of the subclass that runs it, for a class that holds only what loading and
    # checking a scenario need (the built-ins: abm.interventions.config), so that `abm validate`
    # does not load torch; it applies to the class that sets it, not to its subclasses.
    runner_path: str = ""
    # "module:Class" of the entry point of an installed plug-in (set as it is loaded; empty for a
    # built-in): an exception its attach or hooks raise is reported as the plug-in's
    # (:class:`abm.plugin_errors.PluginFailure`).
    plugin_entry_point: str = ""

    def __init__(self, cfg: Any) -> None:
        self.cfg = cfg

    @classmethod
    def runner(cls) -> type[InterventionBase]:
        """The class whose instances run in a simulation: the one :attr:`runner_path` names when
        this class sets it (imported now), else this class itself (a runner, a plug-in)."""
        path = vars(cls).get("runner_path", "")
        if not path:
            return cls
        module, name = path.split(":")
        return getattr(importlib.import_module(module), name)

    @classmethod
    def first_day(cls, cfg: Any) -> int | None:
        """The first simulation day on which it can act (``cfg.start_day``, else 0); None when it
        never acts."""
        return getattr(cfg, "start_day", 0)

    @classmethod
    def unused_settings(cls, cfg: Any, on: dict[str, Any], days: int) -> list[str]:
        """Notes on settings of ``cfg`` that have no effect given the enabled interventions
        ``on`` (name -> settings) in a run of ``days`` days; none by default."""
        return []

    @classmethod
    def population_problem(cls, cfg: Any, age_groups: Callable[[], torch.Tensor]) -> str | None:
        """What in ``cfg`` the population makes impossible (a message naming the key), or None;
        ``age_groups()`` gives each agent's age group, built only when a check needs it (so
        ``abm validate`` builds the population only then). Checked by ``attach`` and by
        ``abm validate``; none by default."""
        return None

    def attach(self, sim: Any) -> None:
        """Create the state the intervention keeps; called once before day 0."""

    def hooks(self) -> dict:
        """Callables ``hook(sim, day)`` by phase."""
        return {}


class InterventionsBase(BaseModel):
    """``interventions:`` maps an intervention name to its settings; absent means off."""

    model_config = ConfigDict(extra="forbid")

    def enabled(self) -> dict[str, Any]:
        """The settings of the enabled interventions, by name."""
        out = {}
        for name in type(self).model_fields:
            cfg = getattr(self, name)
            if cfg is not None and getattr(cfg, "enabled", True):
                out[name] = cfg
        return out

    def idle(self, days: int) -> list[str]:
        """A note for each enabled intervention that does nothing in a run of ``days`` days: one
        that starts after the last day, or one that acts on the results of another that is off
        (a valid scenario, e.g. a sweep's variant without testing, but worth saying); and for each
        setting that has no effect (``unused_settings``)."""
        known = registered()
        on = self.enabled()
        notes = []
        for name, cfg in on.items():
            first = known[name].first_day(cfg)
            missing = [need for need in known[name].needs if need not in on]
            if first is not None and first >= days:
                notes.append(
                    f"interventions.{name} starts on day {first}, after the {counted(days, 'simulated day')} "
                    f"(0..{days - 1}): it does nothing in this run"
                )
            elif missing:
                notes.append(
                    f"interventions.{name} acts on the results of {' and '.join(missing)}, which "
                    f"{'is' if len(missing) == 1 else 'are'} off: it does nothing in this run"
                )
            else:
                notes += known[name].unused_settings(cfg, on, days)
        return notes

    def population_problems(self, age_groups: Callable[[], torch.Tensor]) -> list[str]:
        """The enabled interventions' :meth:`InterventionBase.population_problem` messages."""
        known = registered()
        found = (known[name].population_problem(cfg, age_groups) for name, cfg in self.enabled().items())
        return [problem for problem in found if problem is not None]

    def build(self) -> list[Any]:
        """The enabled interventions, ready to attach to a simulation."""
        known = registered()
        return [known[name].runner()(cfg) for name, cfg in self.enabled().items()]


def summary(model: type[BaseModel]) -> str:
    """The first sentence of a settings model's docstring, lower-cased where it starts a sentence
    (``Two-dose vaccination (...)`` -> ``two-dose vaccination (...)``); empty without one."""
    text = " ".join((model.__doc__ or "").split())
    first = text.split(". ", 1)[0].removesuffix(".")
    if len(first) > 1 and first[0].isupper() and not first[1].isupper():
        first = first[0].lower() + first[1:]
    return first


def interventions_model(plugins: bool = True) -> type[InterventionsBase]:
    """The ``interventions`` section's model over every registered intervention (without
    ``plugins``: the built-in ones only); each field's description (docs/scenarios.md) is its
    settings model's first sentence."""
    known = {name: cls for name, cls in registered().items() if plugins or not getattr(cls, "plugin_entry_point", "")}
    fields: dict[str, Any] = {
        name: (
            cls.config_model | None,
            Field(None, description="; ".join(filter(None, [summary(cls.config_model), "off unless present"]))),
        )
        for name, cls in sorted(known.items())
    }
    return create_model("InterventionsConfig", __base__=InterventionsBase, **fields)
