"""JSON Schemas of the three kinds of scenario file, for editors (VS Code's YAML extension,
JetBrains IDEs, any client of yaml-language-server): completion, hover text and errors while a
file is written (docs/editors.md). Each is generated from the pydantic models that validate that
kind (``model_json_schema``), in draft-07 (what yaml-language-server reads), then fitted to the
files as users write them rather than to the models alone:

* an epidemic scenario may name a base file (``extends:``), which supplies what it leaves out: no
  key of its top level is required (``name`` defaults to the file's name), nor a key of a section
  or of a mapping's entry (``calibration.parameters.<key>``), which ``extends`` merges key by key;
  a list's items (``disease.dwell_times[]``) keep their required keys, as a list given replaces
  the base's whole;
* a day setting (``start_day``, ``seeding.day``, ``outputs.map_days``'s entries, ...) may be a
  date, and ``calibration.start_date`` null, to take ``simulation.start_date`` (:mod:`abm.day_dates`);
* a protocol's ``params`` are checked against that protocol's own settings, as ``abm validate``
  checks them (:func:`abm.learning.scenario.protocol_param_problems`);
* a field named two ways (``from`` or ``from_stage``) takes either, not both.

Unknown keys are refused where the models refuse them (``additionalProperties: false``).
``abm data schema KIND`` writes one, with the installed plug-in interventions; the example
scenarios carry those of the built-in ones in ``schemas/`` (a checkout's ``scenarios/schemas/``,
copied with the examples by ``abm data scenarios``), which each example names on its first line.

    python -m abm.scenario_schemas      # rewrites scenarios/schemas/*.schema.json in a checkout
"""

from __future__ import annotations

import copy
import json
import os
import re
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, create_model

from abm.day_dates import DAY_KEYS, DAY_LISTS
from abm.examples import SOURCE
from abm.outputs.schema_doc import first_paragraph

# The kinds of scenario file, as `abm data schema` names them: an epidemic scenario (abm run,
# sweep, calibrate), a learning one and a private-calibration one (kind: private_calibration; both
# for abm learn).
KINDS = ("epidemic", "learning", "private_calibration")
# The examples' folder of schemas (the checkout's scenarios/schemas/), and the first line of an
# example scenario of each kind, which names its schema for yaml-language-server.
FOLDER = "schemas"
MODELINE = "# yaml-language-server: $schema=../schemas/{kind}.schema.json"
DRAFT = "http://json-schema.org/draft-07/schema#"
# Keywords whose values are data (a default, allowed values), not schemas, and keywords that map
# names (keys of a file, definitions) to schemas: neither is read as a schema itself.
VALUES = frozenset({"default", "const", "enum", "examples"})
NAMED = frozenset({"properties", "patternProperties", "$defs", "definitions"})
DEFS = "#/definitions/"
# A docstring's code, ``key`` or a role (:func:`abm.run`), and the characters Markdown would read
# as syntax in a description's prose.
CODE = re.compile(r"(?::[a-z]+:)?(?:``([^`]+)``|`([^`]+)`)")
MARKDOWN_SYNTAX = re.compile(r"([\\*_\[\]<>~])")
# The keys of a mapping keyed by whole numbers (a learning protocol's ``privacy.dropouts``, by
# round), as a schema sees them: YAML's ``2:`` reaches it as the text "2".
WHOLE_NUMBER_KEYS = {"pattern": "^[0-9]+$", "patternErrorMessage": "allowed: a whole number, 0 or more"}
DATE = {"type": "string", "format": "date", "description": "a date, YYYY-MM-DD: the days after simulation.start_date"}
EXTENDS = {
    "type": "string",
    "description": "a scenario file (its path relative to this file's folder) whose settings this file takes and "
    "changes: mappings merge key by key, anything else (a list, a value) is replaced; its name is not taken",
}
TITLES = {
    "epidemic": "abm epidemic scenario (abm run, sweep, calibrate)",
    "learning": "abm learning scenario (abm learn)",
    "private_calibration": "abm private-calibration scenario (abm learn; kind: private_calibration)",
}
DESCRIPTIONS = {
    "epidemic": "An epidemic scenario (docs/scenarios.md). Every key may be left out: it takes its default, or "
    "the value of the file `extends` names; an intervention is off unless its key is present. `abm validate FILE` "
    "checks what a schema cannot: the region's settings, consistency between sections, the files named.",
    "learning": "A learning scenario (docs/learning.md): data, split, models and the protocols compared. "
    "`abm validate FILE` checks what a schema cannot (the protocols' needs, the split's classes).",
    "private_calibration": "A private-calibration scenario (docs/private_calibration.md): institutions calibrate "
    "the model scenario's free parameters without pooling data. `abm validate FILE` checks what a schema cannot "
    "(the model scenario and the institutions' tracts).",
}


class SchemaKindError(ValueError):
    """A kind of scenario that has no schema."""


def scenario_model(kind: str, plugins: bool = True) -> type[BaseModel]:
    """The pydantic model that validates scenarios of ``kind`` (:data:`KINDS`); for
    an epidemic one without ``plugins``, its ``interventions`` section holds the built-in
    interventions only."""
    if kind == "epidemic":
        from abm.scenario import Scenario

        return Scenario if plugins else _without_plugins(Scenario)
    if kind == "learning":
        from abm.learning.scenario import LearningScenario

        return LearningScenario
    if kind == "private_calibration":
        from abm.private_calibration.scenario import PrivateCalibrationScenario

        return PrivateCalibrationScenario
    raise SchemaKindError(f"{kind!r} is not a kind of scenario; give one of {', '.join(KINDS)}")


def _without_plugins(scenario: type[BaseModel]) -> type[BaseModel]:
    """``scenario`` with an ``interventions`` section of the built-in interventions only."""
    from abm.interventions.registry import interventions_model

    field = copy.copy(scenario.model_fields["interventions"])
    section = interventions_model(plugins=False)
    field.annotation = section
    return create_model(scenario.__name__, __base__=scenario, __doc__=scenario.__doc__, interventions=(section, field))


def json_schema(kind: str, plugins: bool = True) -> dict[str, Any]:
    """The JSON Schema of a scenario file of ``kind`` (see the module's text); ``plugins``: with
    the installed plug-in interventions (epidemic scenarios)."""
    model = scenario_model(kind, plugins)
    root = model.model_json_schema(by_alias=True, mode="validation")
    defs: dict[str, Any] = root.pop("$defs", {})
    protocols = _add_protocol_params(defs)
    root = _draft7({**root, "$defs": defs})
    defs = root.pop("$defs")
    for node in defs.values():
        if isinstance(node.get("description"), str):
            node["description"] = first_paragraph(node["description"])
    models = _models_below(model)
    for node in [root, *defs.values()]:
        if node.get("title") in models:
            _alternate_names(node, models[node["title"]])
            _whole_number_keys(node, models[node["title"]])
    if kind == "epidemic":
        for node in [root, *defs.values()]:
            _days_as_dates(node)
        root.pop("required", None)
        root["properties"] = {"extends": EXTENDS, **root["properties"]}
        _shared_start_date(defs)
        for name in _reached_outside_lists(root, defs):
            defs[name].pop("required", None)
    _title_by_key_path(root, defs)
    for config, names in protocols.items():
        defs[config]["title"] = f"protocols[].params of {', '.join(names)}"
    root.pop("title", None)
    root["description"] = DESCRIPTIONS[kind]
    schema = {"$schema": DRAFT, "title": TITLES[kind], **root, "definitions": defs}
    _markdown_descriptions(schema)
    return schema


def markdown_description(text: str) -> str:
    """A description (``text``: a field's, or a docstring's first paragraph, where code is
    written ``key`` or :func:`name`) as Markdown: its code as code spans (`key`), anything else
    that Markdown would read as syntax (``*``, ``_``, ``<name>``) escaped, so that it shows as
    written."""
    parts, end = [], 0
    for code in CODE.finditer(text):
        parts += [MARKDOWN_SYNTAX.sub(r"\\\1", text[end : code.start()]), f"`{code.group(1) or code.group(2)}`"]
        end = code.end()
    return "".join([*parts, MARKDOWN_SYNTAX.sub(r"\\\1", text[end:])])


def _markdown_descriptions(node: Any) -> None:
    """Each description below ``node`` that holds code gets a ``markdownDescription`` beside it
    (:func:`markdown_description`), which the hover of yaml-language-server (VS Code's YAML
    extension, ...) shows as Markdown; without one it escapes the description's backticks and
    shows them. Other editors (JetBrains IDEs) read ``description``, kept as the reference's."""
    if isinstance(node, list):
        for item in node:
            _markdown_descriptions(item)
        return
    if not isinstance(node, dict):
        return
    text = node.get("description")
    if isinstance(text, str) and "`" in text:
        node["markdownDescription"] = markdown_description(text)
    for key, value in node.items():
        if key not in VALUES:
            _markdown_descriptions(value)


def schema_text(kind: str, plugins: bool = True) -> str:
    """:func:`json_schema` as the text ``abm data schema`` writes (indented JSON, a final newline)."""
    return json.dumps(json_schema(kind, plugins), indent=2, ensure_ascii=False) + "\n"


def write_schema(text: str, path: Path) -> None:
    """Write ``text`` to ``path`` at once: into a file beside it, then renamed over it, so that a
    failure leaves ``path`` as it was (``OSError`` is raised)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def _add_protocol_params(defs: dict[str, Any]) -> dict[str, list[str]]:
    """Each protocol spec of ``defs`` (a definition with ``name``, an enum of protocol names, and
    ``params``) checks ``params`` against the named protocol's settings (its config's schema,
    added to ``defs``); returns the protocols of each config's definition."""
    from abm.learning.protocols.traits import PROTOCOLS

    protocols: dict[str, list[str]] = {}
    for spec in list(defs.values()):
        names = spec.get("properties", {}).get("name", {}).get("enum", [])
        if "params" not in spec.get("properties", {}) or not names or not set(names) <= set(PROTOCOLS):
            continue
        rules = []
        for name in names:
            config = PROTOCOLS[name].config
            own = config.model_json_schema(by_alias=True, mode="validation")
            for key, value in {**own.pop("$defs", {}), config.__name__: own}.items():
                if defs.setdefault(key, value) != value:
                    raise RuntimeError(f"two schemas named {key}: {config.__name__}'s and the scenario's")
            protocols.setdefault(config.__name__, [])
            if name not in protocols[config.__name__]:
                protocols[config.__name__].append(name)
            rules.append(
                {
                    "if": {"properties": {"name": {"const": name}}, "required": ["name"]},
                    "then": {"properties": {"params": {"$ref": f"#/$defs/{config.__name__}"}}},
                }
            )
        spec["allOf"] = rules
        spec["properties"]["params"]["description"] = "the protocol's settings (those of the protocol `name` names)"
    return protocols


def _draft7(node: Any) -> Any:
    """A copy of pydantic's schema ``node`` in draft-07's words: ``definitions`` for ``$defs``,
    ``items`` as a list for ``prefixItems``, a ``$ref`` with other keys inside ``allOf`` (draft-07
    ignores a ``$ref``'s siblings), an ``allowed`` text (the words abm's messages use for a
    pattern) as ``patternErrorMessage`` (VS Code's); pydantic's ``discriminator`` dropped (not a
    draft-07 keyword) and each property's title (its key, capitalised)."""
    if isinstance(node, list):
        return [_draft7(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {
        key: value if key in VALUES else _by_name(value) if key in NAMED else _draft7(value)
        for key, value in node.items()
        if key not in ("discriminator", "allowed")
    }
    if "allowed" in node and "pattern" in node:
        out["patternErrorMessage"] = f"allowed: {node['allowed']}"
    if isinstance(out.get("$ref"), str):
        out["$ref"] = out["$ref"].replace("#/$defs/", DEFS)
        if len(out) > 1:
            out = {"allOf": [{"$ref": out.pop("$ref")}], **out}
    if "prefixItems" in out:
        items = out.pop("prefixItems")
        rest = out.pop("items", None)
        out["items"] = items
        out["additionalItems"] = rest if rest is not None else False
    if isinstance(out.get("properties"), dict) and "$ref" not in node:
        for value in out["properties"].values():
            if isinstance(value, dict):
                value.pop("title", None)
    return out


def _by_name(schemas: Any) -> Any:
    """A mapping of names to schemas (``properties``, ``$defs``) with each schema in draft-07's words."""
    return {name: _draft7(schema) for name, schema in schemas.items()} if isinstance(schemas, dict) else schemas


def _models_below(model: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """``model`` and every model its fields reach, by class name (their definitions' titles)."""
    found: dict[str, type[BaseModel]] = {}

    def visit(annotation: Any) -> None:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if annotation.__name__ not in found:
                found[annotation.__name__] = annotation
                for field in annotation.model_fields.values():
                    visit(field.annotation)
            return
        for arg in typing.get_args(annotation):
            visit(arg)

    visit(model)
    return found


def _alternate_names(node: dict[str, Any], model: type[BaseModel]) -> None:
    """Where ``model`` takes a field by its alias or by its own name (``populate_by_name``:
    ``disease.dwell_times[]``'s ``from`` or ``from_stage``), its schema ``node`` takes both; a
    required one is required under one of them (both are refused, as the model refuses them)."""
    if not (model.model_config.get("populate_by_name") or model.model_config.get("validate_by_name")):
        return
    required = node.get("required", [])
    either = []
    for name, field in model.model_fields.items():
        if field.alias and field.alias != name and field.alias in node["properties"]:
            node["properties"][name] = {
                **copy.deepcopy(node["properties"][field.alias]),
                "description": f"the same as `{field.alias}`",
            }
            if field.alias in required:
                required.remove(field.alias)
                either.append({"oneOf": [{"required": [field.alias]}, {"required": [name]}]})
    if either:
        node["allOf"] = [*node.get("allOf", []), *either]


def _whole_number_keys(node: dict[str, Any], model: type[BaseModel]) -> None:
    """Each mapping of ``model`` keyed by whole numbers (``dict[int, ...]``) has its keys checked
    in its schema ``node`` (:data:`WHOLE_NUMBER_KEYS`): pydantic's schema leaves them unchecked."""
    for name, field in model.model_fields.items():
        key = field.alias or name
        annotation = field.annotation
        if (
            typing.get_origin(annotation) is dict
            and typing.get_args(annotation)[0] is int
            and key in node["properties"]
        ):
            node["properties"][key]["propertyNames"] = dict(WHOLE_NUMBER_KEYS)


def _title_by_key_path(root: dict[str, Any], defs: dict[str, Any]) -> None:
    """Each definition's title (what an editor's hover shows as its heading) is the first key
    path that reaches it, as docs/scenarios.md names its sections (``simulation``,
    ``interventions.testing.tests[]``, ``calibration.parameters.<name>``), not its class's name."""
    queue: list[tuple[Any, str]] = [(root, "")]
    titled: set[str] = set()
    while queue:
        node, path = queue.pop(0)
        if isinstance(node, list):
            queue += [(item, path) for item in node]
            continue
        if not isinstance(node, dict):
            continue
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(DEFS) and ref.removeprefix(DEFS) not in titled:
            name = ref.removeprefix(DEFS)
            titled.add(name)
            defs[name]["title"] = path or defs[name].get("title", name)
            queue.append((defs[name], path))
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                queue += [(sub, f"{path}.{prop}" if path else prop) for prop, sub in value.items()]
            elif key == "items":
                queue.append((value, f"{path}[]"))
            elif key == "additionalProperties":
                queue.append((value, f"{path}.<name>"))
            elif key in ("allOf", "anyOf", "oneOf", "then"):
                queue.append((value, path))


def _shared_start_date(defs: dict[str, Any]) -> None:
    """``calibration.start_date`` may be null, as ``simulation.start_date`` may: either, left out
    or null, takes the other's date (:func:`abm.day_dates.shared_start_date`)."""
    from abm.calibration.config import CalibrationConfig

    node = defs[CalibrationConfig.__name__]["properties"]["start_date"]
    meta = {key: node.pop(key) for key in ("description", "default") if key in node}
    defs[CalibrationConfig.__name__]["properties"]["start_date"] = {**meta, "anyOf": [node, {"type": "null"}]}


def _days_as_dates(node: Any) -> None:
    """Every day setting below ``node`` (:data:`abm.day_dates.DAY_KEYS`, and the entries of
    :data:`abm.day_dates.DAY_LISTS`) also takes a date."""
    if isinstance(node, list):
        for item in node:
            _days_as_dates(item)
        return
    if not isinstance(node, dict):
        return
    for value in node.values():
        _days_as_dates(value)
    properties = node.get("properties")
    if isinstance(properties, dict):
        for key, value in properties.items():
            if key in DAY_KEYS | DAY_LISTS and isinstance(value, dict):
                properties[key] = _or_date(value)


def _or_date(node: dict[str, Any]) -> dict[str, Any]:
    """``node`` with each whole number it allows (itself, a member of its ``anyOf``, a list's
    items) also allowed as a date."""
    if node.get("type") == "integer":
        meta = {key: node.pop(key) for key in ("description", "default") if key in node}
        return {**meta, "anyOf": [node, DATE]}
    if isinstance(node.get("anyOf"), list):
        node["anyOf"] = [_or_date(member) for member in node["anyOf"]]
    if node.get("type") == "array" and isinstance(node.get("items"), dict):
        node["items"] = _or_date(node["items"])
    return node


def _reached_outside_lists(root: dict[str, Any], defs: dict[str, Any]) -> set[str]:
    """The definitions ``root`` reaches other than through a list's items: sections and mapping
    entries, which ``extends`` merges key by key (a base may supply their keys)."""
    found: set[str] = set()
    seen: set[tuple[str, bool]] = set()

    def visit(node: Any, in_list: bool) -> None:
        if isinstance(node, list):
            for item in node:
                visit(item, in_list)
            return
        if not isinstance(node, dict):
            return
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(DEFS):
            name = ref.removeprefix(DEFS)
            if (name, in_list) not in seen:
                seen.add((name, in_list))
                if not in_list:
                    found.add(name)
                visit(defs[name], in_list)
        for key, value in node.items():
            if key == "items":
                visit(value, True)
            elif key not in ("$ref", "default"):
                visit(value, in_list)

    visit(root, False)
    return found


def file_name(kind: str) -> str:
    """The file name of the schema of ``kind`` among the examples (``epidemic.schema.json``)."""
    return f"{kind}.schema.json"


def main() -> None:
    """Rewrite the checkout's example schemas (built-in interventions only)."""
    folder = Path(__file__).resolve().parents[1] / SOURCE / FOLDER
    if not folder.is_dir():
        raise SystemExit(f"{folder}: no such folder; run this in a checkout of abm")
    for kind in KINDS:
        write_schema(schema_text(kind, plugins=False), folder / file_name(kind))


if __name__ == "__main__":
    main()
