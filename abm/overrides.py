"""A scenario as a command runs it: the file (or plain data, or a Scenario) with the command's
``--set`` texts and its overrides (``--agents``, ``--days``, ``--replicates``, ``--seed``,
``--device``) applied, then validated. Torch-free, so that ``abm validate`` loads no engine.
"""

from __future__ import annotations

import json
import reprlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from abm.scenario import (
    COMMAND_LINE,
    Scenario,
    ScenarioError,
    apply_set,
    extended,
    key_origin,
    overlaps,
    read_scenario_data,
    validate,
    with_full_data_paths,
)
from abm.scenario_kinds import learning_kind, not_epidemic
from abm.set_options import OptionNames, option_texts, refuse_repeated_keys

OVERRIDE_KEYS = {
    "agents": "population.agents",
    "days": "simulation.days",
    "replicates": "simulation.replicates",
    "seed": "simulation.seed",
    "device": "simulation.device",
}


def resolve(
    scenario: Scenario | str | Path | dict[str, Any],
    overrides: dict[str, Any] | None = None,
    sets: list[str] | None = None,
    *,
    names: OptionNames = COMMAND_LINE,
    batch: int | None = None,
) -> Scenario:
    """A validated scenario from a path, plain data or a Scenario, with overrides applied
    (``sets``: ``key.path=value`` texts; one text alone is taken as a list of one). Messages name
    the options as ``names`` says: as ``abm run`` takes them (``--agents 0``, ``--set
    key=value``; the default), as :func:`abm.runs.run` takes them (``PYTHON``: ``agents=0``,
    ``sets=['key=value']``) or as a file's key (``sets`` from a learning scenario's
    ``model.set``). ``batch``: the replicates a run holds at once, for the memory check
    (:func:`abm.scenario.validate`). A calibration section read from a file or plain data is
    checked against the rest of the scenario (:func:`check_calibration_section`); a
    :class:`Scenario` is taken as read (a calibration's trials run scenarios with values between
    bounds already checked)."""
    sets = option_texts(sets, "set", names)
    origin = None
    source = scenario_source(scenario)
    refuse_repeated_keys(sets, names, source)
    if isinstance(scenario, Scenario):
        data = scenario.model_dump(mode="json", by_alias=True)
    elif isinstance(scenario, dict):
        # as a file holds it, ``extends`` included (a path relative to the working folder)
        data = extended(scenario, "scenario", Path.cwd())
    elif isinstance(scenario, str | Path):
        data = read_scenario_data(scenario)
        if not sets and not any(v is not None for v in (overrides or {}).values()):
            origin = key_origin(scenario)  # which file of its extends chain set a bad value
    else:
        raise ScenarioError(
            f"scenario: {reprlib.repr(scenario)} is not allowed; give a scenario file's path, plain data as a "
            "file holds it (a dict) or a Scenario"
        )
    refuse_learning_data(data, source, names)
    for i, item in enumerate(sets):
        data = apply_set(data, item, names.set_item(i))
    data = with_full_data_paths(apply_overrides(data, overrides, sets, source, names, origin))
    named = names.scenario(source, sets, given(overrides))
    sc = validate(data, named, origin, batch=batch)
    if sc.calibration is not None and not isinstance(scenario, Scenario):
        check_calibration_section(data, sc, named, names)
    return sc


def refuse_learning_data(data: dict[str, Any], source: str, names: OptionNames) -> None:
    """Refuse a learning or private-calibration scenario's data (from ``source``) in one line
    pointing to ``abm learn`` (``abm.learn`` from Python), rather than a line per key that an
    epidemic scenario lacks."""
    kind = learning_kind(data)
    if kind is not None:
        raise ScenarioError(not_epidemic(kind, source, names.python))


def check_calibration_section(
    data: dict[str, Any], sc: Scenario, source: str, names: OptionNames = COMMAND_LINE
) -> None:
    """Raise :class:`ScenarioError` where the calibration section of ``sc`` (validated from
    ``data``) does not fit the rest of the scenario (:func:`abm.calibration.checks.check_calibration`:
    windows beyond the simulated days, data that do not cover them, bounds that give an invalid
    scenario), as ``abm calibrate`` would refuse it: every command that reads a scenario accepts
    and refuses the same ones, with the same message (``source``: the scenario with its options)."""
    from abm.calibration.checks import FEWER_DAYS, check_calibration
    from abm.calibration.errors import CalibrationError

    try:
        check_calibration(data, sc, source, names=names, hint=FEWER_DAYS)
    except CalibrationError as exc:
        raise ScenarioError(str(exc)) from None


def scenario_source(scenario: Any) -> str:
    """How messages name a scenario given as :func:`resolve` takes it: a file by its path, plain
    data as ``scenario``, a :class:`Scenario` by its name."""
    if isinstance(scenario, Scenario):
        return scenario.name
    return str(scenario) if isinstance(scenario, str | Path) else "scenario"


def given(overrides: dict[str, Any] | None) -> list[tuple[str, Any]]:
    """The overrides that change something (a value of None leaves the scenario's), in order:
    what messages name with the scenario (``FILE (with --agents 5)``)."""
    return [(key, value) for key, value in (overrides or {}).items() if value is not None]


def refuse_clash(key: str, value: Any, sets: list[str], source: str, names: OptionNames = COMMAND_LINE) -> None:
    """Raise :class:`ScenarioError` where override ``key`` (given ``value``) and one of ``sets``
    set the same scenario key (:data:`OVERRIDE_KEYS`), naming both."""
    path = OVERRIDE_KEYS[key]
    clash = sorted(k for k in (item.split("=", 1)[0].strip() for item in sets) if overlaps(k, path))
    if clash:
        option = names.given(key, value) if names.python else names.name(key)
        raise ScenarioError(f"{source}: {option} and {names.item('set', f'{clash[0]}=...')} both set {path}; give one")


def apply_overrides(
    data: dict[str, Any],
    overrides: dict[str, Any] | None,
    sets: list[str],
    source: str,
    names: OptionNames = COMMAND_LINE,
    origin: Callable[[tuple[Any, ...]], Path | None] | None = None,
) -> dict[str, Any]:
    """``data`` (the sets already applied) with ``overrides`` (``agents``, ``days``,
    ``replicates``, ``seed``, ``device``: :data:`OVERRIDE_KEYS`) applied. One that sets the same
    key as one of ``sets`` is refused, naming both; one the file has no section for (a list
    there, say) gets the file's own message (``source``; ``origin``: :func:`validate`'s)."""
    done: list[tuple[str, Any]] = []
    for key, value in given(overrides):
        if key not in OVERRIDE_KEYS:
            raise ScenarioError(f"override {key!r} is not allowed; allowed: {', '.join(OVERRIDE_KEYS)}")
        refuse_clash(key, value, sets, source, names)
        try:
            data = apply_set(data, f"{OVERRIDE_KEYS[key]}={json.dumps(value)}", names.name(key))
        except ScenarioError:  # the file has no section there (a list, say): the file is what is wrong
            validate(data, names.scenario(source, sets, done), origin)
            raise
        done.append((key, value))
    return data
