"""``--set key.path=value`` overrides of a scenario's plain data, and how messages name the options
that gave them (the command line's, or the Python API's arguments). Free of any scenario schema,
so that a learning scenario is read and checked without the epidemic engine's settings."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from abm.yaml_loader import load_yaml


class ScenarioError(ValueError):
    """A scenario file or override is invalid. The message is meant for the user as is."""


def dotted(key: str) -> str:
    """A key path with its list indices dotted, as messages print them or not: ``a[0].b`` and
    ``a.0.b`` are both ``a.0.b``."""
    return re.sub(r"\[(\d+)\]", r".\1", key.strip())


def indexed(parts: list[str]) -> str:
    """A key path's parts as messages write it, list indices in brackets: ``protocols[0].models``."""
    return "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in parts).lstrip(".")


def yaml_problem(exc: Exception) -> str:
    """A YAML error's problem (without the position in a one-line value), on one line."""
    return " ".join(str(getattr(exc, "problem", None) or exc).split())


def apply_set(
    data: dict[str, Any],
    assignment: str,
    source: str = "--set",
    defaults: Callable[[list[str]], Any] | None = None,
    defaults_shown: str = "a run's scenario.resolved.yaml",
) -> dict[str, Any]:
    """Apply one ``key.path=value`` override; the value is read as YAML (numbers, lists...).
    Messages begin with ``source``, where the override was given (``--set``, ``sets``, a file's
    key), and name nothing else as its origin. An item of a list the data leave out is set in
    ``defaults(key path)``, the schema's default there (None: none), as plain data; where there is
    none, the message names the list as the user writes it and ``defaults_shown``, the output that
    shows the scenario with its defaults."""
    if "=" not in assignment:
        raise ScenarioError(f"{source}: {assignment!r} is not allowed; write key.path=value")
    key, _, text = assignment.partition("=")
    parts = dotted(key).split(".")  # a list item by its index: dwell_times[0].shape or dwell_times.0.shape
    if not all(parts):
        raise ScenarioError(f"{source}: {key!r} is not a key path; write e.g. simulation.days=90")
    bracketed = [part for part in parts if "[" in part or "]" in part]  # what dotted() left: no whole number
    if bracketed:
        raise ScenarioError(
            f"{source}: {key.strip()}: {bracketed[0]!r} is not allowed; a list item is given by its index, a whole "
            "number from 0, in brackets: e.g. disease.dwell_times[0].shape"
        )
    try:
        value = load_yaml(text) if text.strip() else None
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{source}: {key}: {text!r} is not a valid value ({yaml_problem(exc)})") from None
    out = dict(data)
    node: Any = out
    i = 0
    defaulted = False  # the node is the schema's default, not the data's
    while True:
        if isinstance(node, list):  # a list item by its index: dwell_times.0.shape
            if not parts[i].isdigit() or int(parts[i]) >= len(node):
                where = ".".join(parts[:i])
                if not node:
                    raise ScenarioError(
                        f"{source}: {key}: {where} is an empty list, so it has no item to set; give the "
                        f"whole list: {where}=[...]"
                    )
                raise ScenarioError(
                    f"{source}: {key}: {where} is a list of {len(node)}; {parts[i]!r} is not allowed, "
                    f"give an index 0..{len(node) - 1}"
                )
            part, i = int(parts[i]), i + 1
        else:  # the longest run of parts that is a key here (calibration parameters have dots)
            j = next((j for j in range(len(parts), i + 1, -1) if ".".join(parts[i:j]) in node), i + 1)
            if parts[:i] == ["calibration", "parameters"] and ".".join(parts[i:j]) not in node:
                # a new free parameter: the rest of the path is its key, but for a bound at the end
                j = len(parts) - 1 if parts[-1] in ("low", "high", "integer") and len(parts) - i > 1 else len(parts)
            part, i = ".".join(parts[i:j]), j
        if i == len(parts):
            node[part] = value
            return out
        child = node[part] if isinstance(node, list) else node.get(part)
        if child is None and parts[i].isdigit():  # a list the file leaves to its default: index into that
            child = defaults(parts[:i]) if defaults else None
            defaulted = True
        if child is None and parts[i].isdigit():
            raise ScenarioError(
                f"{source}: {key}: {indexed(parts[:i])} is not in the file, so it has no item to set; "
                f"give the whole list in the file ({defaults_shown} holds the defaults)"
            )
        if parts[i].isdigit() and not isinstance(child, dict | list):  # a single value: it has no item
            raise ScenarioError(no_item_message(source, key, parts[:i], parts[i], child, not defaulted))
        child = dict(child) if isinstance(child, dict) else list(child) if isinstance(child, list) else {}
        node[part] = child
        node = child


def no_item_message(source: str, key: str, path: list[str], index: str, value: Any, given: bool) -> str:
    """The message for ``key`` asking for item ``index`` of the single ``value`` at ``path`` (the
    data's own, or, not ``given``, the schema's default): a value that is no list has no item."""
    where = "".join(f"[{part}]" if part.isdigit() else f".{part}" for part in path).lstrip(".")
    shown = yaml.safe_dump(value, default_flow_style=True, width=10**6).removesuffix("\n...\n").strip()
    return (
        f"{source}: {key}: {where} is {shown}{'' if given else ' (its default)'}, a single value, not a list, so it "
        f"has no item {index} to set; give the whole value: {where}=..."
    )


# The Python API's arguments for the command line's repeatable options (``abm.run(sets=[...])``).
PYTHON_ARGUMENTS = {"set": "sets", "sweep": "sweeps", "ray-address": "ray_address"}


@dataclass(frozen=True)
class OptionNames:
    """How messages name what the user gave besides the scenario file, so that they name what
    the user wrote: the command line's options (the default: ``--agents 0``, ``--set
    key=value``), or with ``python`` the arguments of :func:`abm.run` and
    :func:`abm.sweep.run_sweep` (``agents=0``, ``sets=['key=value']``), or with ``set_key``
    the key of a file whose list of ``key.path=value`` items is applied as sets (``FILE:
    model.set``: its items are ``FILE: model.set[0]``, ...). ``swept_from``: the sets from this
    index on are a sweep's values, named by the sweep option (whose value the message's prefix
    gives), not as sets the user never gave."""

    python: bool = False
    set_key: str | None = None
    swept_from: int | None = None

    def name(self, option: str) -> str:
        """An option alone: ``--replicates`` or ``replicates`` (``--set`` or ``sets``)."""
        return PYTHON_ARGUMENTS.get(option, option) if self.python else f"--{option}"

    def given(self, option: str, value: Any) -> str:
        """An option with its value: ``--agents 0`` or ``agents=0``."""
        return f"{self.name(option)}={value!r}" if self.python else f"--{option} {value}"

    def item(self, option: str, text: str | None = None) -> str:
        """One use of a repeatable option: ``--sweep key=1,2`` or ``sweeps item 'key=1,2'``
        (no text: ``--sweep option`` or ``sweeps item``)."""
        if self.python:
            return f"{self.name(option)} item" + ("" if text is None else f" {text!r}")
        return f"--{option} " + ("option" if text is None else text)

    def set_item(self, index: int) -> str:
        """Where sets item ``index`` was given, for :func:`apply_set`'s messages."""
        if self.swept_from is not None and index >= self.swept_from:
            return self.name("sweep")
        return f"{self.set_key}[{index}]" if self.set_key else self.name("set")

    def scenario(self, source: str, sets: list[str], given: list[tuple[str, Any]]) -> str:
        """The scenario's name in messages with what changed it, so that an error they caused is
        not blamed on the file alone: ``FILE (with --set a --agents 5)``, ``FILE (with sets=['a'],
        agents=5)``, or ``SET_KEY (on FILE)``."""
        sets = sets[: self.swept_from]
        if self.set_key:  # a file's sets alone (no other option)
            return f"{self.set_key} (on {source})"
        if self.python:
            options = ([f"sets={sets!r}"] if sets else []) + [self.given(k, v) for k, v in given]
            return with_options(source, options, ", ")
        return with_options(source, [f"--set {item}" for item in sets] + [self.given(k, v) for k, v in given])


COMMAND_LINE = OptionNames()
PYTHON = OptionNames(python=True)


def with_options(source: str, options: list[str], sep: str = " ") -> str:
    """A scenario's name in messages, with the options that changed it (``--set key=value`` on
    the command line; ``agents=0`` from Python, joined by ``sep``), so that an error an option
    caused is not blamed on the file alone."""
    return f"{source} (with {sep.join(options)})" if options else source


def refuse_repeated_keys(sets: list[str], names: OptionNames = COMMAND_LINE, source: str = "") -> None:
    """Raise :class:`ScenarioError` where two of ``sets`` (``key.path=value`` texts) give one key
    path (``a[0].b`` and ``a.0.b`` alike) two values, naming ``source`` (the scenario file, if
    given), the key and both values: the last would replace the first without a word. The same
    value twice changes nothing and passes."""
    first: dict[str, str] = {}
    for i, item in enumerate(sets):
        key, sep, value = item.partition("=")
        if not sep:  # no key path: apply_set names it
            continue
        path, value = dotted(key), value.strip()
        if first.setdefault(path, value) != value:
            where = f"{source}: " if source and not names.set_key else ""  # a file's key names its file
            raise ScenarioError(
                f"{where}{names.set_item(i)}: {indexed(path.split('.'))} is given twice, as {first[path]} and as "
                f"{value}; give it once"
            )


# What each repeatable option's texts look like, for the message that refuses a value that is no
# list of texts (``sets=5``, ``sweeps=[0.2]``).
OPTION_TEXTS = {
    "set": ("key.path=value", "contacts.community.weight=0.3"),
    "sweep": ("key.path=value1,value2,...", "contacts.community.weight=0.2,0.4"),
}


def option_texts(value: Any, option: str, names: OptionNames = COMMAND_LINE, example: str | None = None) -> list[str]:
    """The texts given to a repeatable option (``set`` or ``sweep``: ``sets=[...]`` and
    ``sweeps=[...]`` from Python) as a list: one text alone is a list of one, None is none.
    Anything else (a number, a dict, a list holding anything but texts) raises
    :class:`ScenarioError` naming the option as ``names`` says and the texts it takes, with
    ``example`` (default: one of a run's scenario, :data:`OPTION_TEXTS`)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        return list(value)
    form, usual = OPTION_TEXTS[option]
    example = example or usual
    raise ScenarioError(
        f"{names.name(option)}: {value!r} is not allowed; give a list of {form!r} texts, "
        f"e.g. {names.given(option, [example])}"
    )
