"""The scenario reference, generated from the schema: every field with its type, default, bounds
and description (units are in the descriptions).

    python -m abm.outputs.schema_doc > docs/scenarios.md
"""

from __future__ import annotations

import json
import types
import typing
from typing import Any

import annotated_types as at
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticSerializationError, PydanticUndefined, to_jsonable_python

HEADER = """# Scenario reference

Generated from the schema by `python -m abm.outputs.schema_doc > docs/scenarios.md`; do not edit
by hand. A scenario is YAML; unknown keys are refused. `extends: other.yaml` takes another
scenario and changes only what differs; `--set key.path=value` overrides from the command line
(a list item by its index: `disease.dwell_times[0].shape=2`); a mapping given to `--set`
replaces the one there as a whole, where `extends` merges key by key, so to change one entry give
its full path (`--set interventions.testing.start_day=10`). Each section lists its keys with
type, default, allowed range and meaning (units are in the meaning). `key[]` is an entry of a
list; `key.<name>` an entry of a mapping. Interventions are off unless their key is present
(`testing: {}` turns testing on with its defaults). A default too long for the table ends in `...`;
`abm validate FILE --show` prints every value a scenario runs with, in full. Numbers are written
without quotes (`"3"` is text, refused where a number is expected) and, as YAML 1.1 reads them,
with a dot and a signed exponent where they have one (`1.0e-5`; `1e-5` is text). An editor
given the scenario's JSON Schema shows these meanings as you type and flags unknown keys
([Editing scenarios in an editor](editors.md)).
"""


def _models_in(annotation: Any) -> list[tuple[str, type[BaseModel]]]:
    """Nested models of an annotation, with the path suffix that reaches them."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [("", annotation)]
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (list, tuple, set, frozenset) and args:
        return [("[]", m) for _, m in _models_in(args[0])]
    if origin is dict and len(args) == 2:
        return [(".<name>", m) for _, m in _models_in(args[1])]
    if origin in (typing.Union, types.UnionType) or origin is typing.Annotated:
        out = []
        for a in args:
            out += _models_in(a)
        return out
    return []


def type_name(annotation: Any) -> str:
    """A short readable type."""
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type):
        return annotation.__name__
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(json.dumps(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin is typing.Annotated:
        return type_name(args[0])
    if origin is not None:
        inner = ", ".join(type_name(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    return str(annotation).replace("typing.", "")


def bounds(field: FieldInfo) -> str:
    """The numeric and length bounds of a field, e.g. ">= 0, <= 1" or ">= 2, even"."""
    parts = []
    for m in field.metadata:
        for attr, sym in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            v = getattr(m, attr, None)
            if v is not None and isinstance(m, at.Ge | at.Gt | at.Le | at.Lt | at.Interval):
                parts.append(f"{sym} {v}")
        if isinstance(m, at.MinLen):
            parts.append(f"length >= {m.min_length}")
        if isinstance(m, at.MaxLen):
            parts.append(f"length <= {m.max_length}")
        if isinstance(m, at.MultipleOf):
            parts.append("even" if m.multiple_of == 2 else f"a multiple of {m.multiple_of}")
        pattern = getattr(m, "pattern", None)
        if pattern:
            parts.append(f"matches `{pattern}`")
    item = _item_field(field.annotation)
    if item is not None and bounds(item):
        parts.append(f"each {bounds(item)}")
    return ", ".join(parts)


def _item_field(annotation: Any) -> FieldInfo | None:
    """The constraints shared by every item of a tuple or list of constrained numbers (e.g.
    ``tuple[Annotated[float, Field(ge=0)], ...]``), or None."""
    if typing.get_origin(annotation) not in (tuple, list):
        return None
    items = {a for a in typing.get_args(annotation) if a is not Ellipsis}
    if len(items) != 1:
        return None
    item = items.pop()
    if typing.get_origin(item) is not typing.Annotated:
        return None
    infos = [m for m in typing.get_args(item)[1:] if isinstance(m, FieldInfo)]
    return infos[0] if infos else None


def default_text(field: FieldInfo) -> str:
    """The default as compact JSON, or "required"."""
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "(section)"
    if value is PydanticUndefined:
        return ""
    try:
        text = json.dumps(to_jsonable_python(value), default=str)
    except (TypeError, PydanticSerializationError):
        text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def first_paragraph(text: str) -> str:
    """The first paragraph of a docstring, on one line: what the reference says of a section."""
    return " ".join(text.strip().split("\n\n")[0].split())


def document(model: type[BaseModel], path: str = "", seen: tuple[type, ...] = ()) -> list[str]:
    """Markdown sections for ``model`` and the models nested in it."""
    title = f"## `{path}`" if path else "## Top level"
    doc = first_paragraph(model.__doc__ or "")
    rows, nested = [], []
    for name, field in model.model_fields.items():
        key = field.alias or name
        full = f"{path}.{key}" if path else key
        models = [(suffix, m) for suffix, m in _models_in(field.annotation) if m not in seen]
        if models and all(not s for s, _ in models) and len(models) == 1:
            nested.append((full, models[0][1]))
            rows.append(f"| `{key}` | section | {default_text(field)} | | {_cell(field.description or '')} "
                        f"(see [`{full}`](#{full.replace('.', '').lower()})) |")  # fmt: skip
            continue
        rows.append(
            f"| `{key}` | {_cell(type_name(field.annotation))} | `{_cell(default_text(field))}` | "
            f"{_cell(bounds(field))} | {_cell(field.description or '')} |"
        )
        for suffix, m in models:
            nested.append((full + suffix, m))
    out = [title, "", doc, ""] if doc else [title, ""]
    out += ["| key | type | default | allowed | meaning |", "|---|---|---|---|---|", *rows, ""]
    for full, m in nested:
        out += document(m, full, (*seen, model))
    return out


def scenario_reference() -> str:
    """The whole reference as Markdown."""
    from abm.scenario import Scenario

    return HEADER + "\n" + "\n".join(document(Scenario)) + "\n"


def main() -> None:
    """Print the reference."""
    print(scenario_reference(), end="")


if __name__ == "__main__":
    main()
