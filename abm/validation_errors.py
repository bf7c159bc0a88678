"""pydantic's validation errors as one message for the user, for every kind of scenario
(epidemic, learning, private calibration): the file, and for each problem the key path the user
wrote, the value and what is allowed.
"""

from __future__ import annotations

import datetime as dt
import difflib
import math
import re
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field, ValidationError

from abm.key_paths import lookup, not_finite
from abm.yaml_loader import load_yaml

TOP_LEVEL = "(top level)"

# How pydantic names the member of a union it tried, in an error's location: ``bool``,
# ``list[int]``, ``literal['a','b']``, ``list[literal['a','b']]`` (a tagged union's member: its
# tag). Such a part is no key of the file; where it ends the location, this tells it from a
# missing key.
UNION_MEMBER = re.compile(r"^(bool|int|float|str|[a-z_]+\[.*\])$")


def likely_meant(key: str, allowed: list[str]) -> str | None:
    """The allowed key a misspelt ``key`` most likely meant: the same words in another order
    (``tracing_digital``), or one at most two letters away (``dayz``, ``comunity``) and not
    half rewritten; None when no key is that close (a wrong guess misleads more than none)."""
    words = sorted(key.split("_"))
    for name in allowed:
        if sorted(name.split("_")) == words:
            return name

    def edits(name: str) -> int:
        ops = difflib.SequenceMatcher(None, key, name).get_opcodes()
        return sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in ops if tag != "equal")

    best = min(allowed, key=edits, default=None)
    if best is None or edits(best) > min(2, len(key) // 3):
        return None
    return best


def user_key_path(loc: tuple[Any, ...], data: Any) -> tuple[tuple[Any, ...], int | None]:
    """An error location as the key path the user wrote in ``data``, and the length of the key
    path of the key that takes several forms (None when the location names no union member).

    pydantic also names the union member it tried and marks a mapping key's own error
    (``[key]``: the key itself is at fault); a part that is no key of ``data`` there is such a
    name, but for a last part that names a missing key."""
    parts = [p for p in loc if p not in ("", "[key]")]
    out: list[Any] = []
    root = None
    for i, part in enumerate(parts):
        here = lookup(data, tuple(out))
        present = (isinstance(here, dict) and part in here) or (isinstance(here, list) and isinstance(part, int))
        missing = i == len(parts) - 1 and not (isinstance(part, str) and UNION_MEMBER.match(part))
        if present or missing:
            out.append(part)
        elif root is None:
            root = len(out)
    return tuple(out), root


# A value longer than this (a table, e.g. disease.branching's 9 x 11 x 11) is not repeated in a message.
LONGEST_SHOWN = 300


def shown(value: Any) -> str:
    """A value as messages show it, as YAML writes it: a date as written (YAML reads 2020-02-28 as
    one), lists and mappings in flow style (``[1, 2]``, ``{x: 3}``), ``true``, ``false`` and
    ``null``; text keeps its quotes (``'1e4'``: YAML read it as text)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(shown(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {shown(v)}" for k, v in value.items()) + "}"
    return repr(value)


def format_key_path(loc: tuple[Any, ...], data: Any) -> str:
    """A key path as written in messages: ``protocols[0].params.lr`` (a list item by its index in
    brackets; a mapping key that YAML read as a number stays a key: ``seeding.infections.1``)."""
    out = ""
    for i, part in enumerate(loc):
        if isinstance(part, int) and isinstance(lookup(data, loc[:i]), list):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or TOP_LEVEL


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _keys(model: type[BaseModel]) -> dict[str, Any]:
    """A model's keys as the user writes them (a field's alias, else its name) and their fields."""
    return {f.alias or name: f for name, f in model.model_fields.items()}


def union_members(annotation: Any) -> list[Any]:
    """The members of a union annotation (``A | B | None``, ``Annotated[A | B, ...]``) but None,
    or the annotation itself."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return union_members(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [m for a in typing.get_args(annotation) for m in union_members(a)]
    return [] if annotation is type(None) else [annotation]


def _fits(member: Any, value: Any) -> bool:
    """Whether ``value`` can be of union member ``member``: a mapping for a model or a mapping
    type, whose literal keys (a tagged union's tag) hold what the model allows; a list for a list."""
    if _is_model(member):
        return isinstance(value, dict) and all(
            value[k] in typing.get_args(f.annotation)
            for k, f in _keys(member).items()
            if k in value and typing.get_origin(f.annotation) is typing.Literal
        )
    origin = typing.get_origin(member)
    return isinstance(value, dict) if origin is dict else isinstance(value, list) and origin is list


def _member_for(annotation: Any, value: Any) -> Any:
    """The member of ``annotation`` that ``value`` is written for (None where that is not one)."""
    members = union_members(annotation)
    if len(members) > 1:
        members = [m for m in members if _fits(m, value)]
    return members[0] if len(members) == 1 else None


def _section_at(model: type[BaseModel], loc: tuple[Any, ...], data: Any) -> type[BaseModel] | None:
    """The model of the section that holds the last key of key path ``loc`` (None where that is
    not a section of settings). ``data``: what the user wrote, from ``model``'s top; it picks the
    member of a union (a tagged union by its tag)."""
    annotation: Any = model
    for i, part in enumerate(loc[:-1]):
        current = _member_for(annotation, lookup(data, loc[:i]))
        origin = typing.get_origin(current)
        if _is_model(current) and part in _keys(current):
            annotation = _keys(current)[part].annotation
        elif origin is list and isinstance(part, int) and typing.get_args(current):
            annotation = typing.get_args(current)[0]
        elif origin is dict and len(typing.get_args(current)) == 2:
            annotation = typing.get_args(current)[1]
        else:
            return None
    current = _member_for(annotation, lookup(data, loc[:-1]))
    return current if _is_model(current) else None


def allowed_keys(model: type[BaseModel], loc: tuple[Any, ...], data: Any) -> list[str] | None:
    """The keys the schema ``model`` allows in the mapping that holds the last key of key path
    ``loc`` (None where that is not a section of settings); ``data`` as for :func:`_section_at`."""
    section = _section_at(model, loc, data)
    return list(_keys(section)) if section is not None else None


def sections_with_key(model: type[BaseModel], loc: tuple[Any, ...], data: Any) -> list[str]:
    """The sections beside the unknown last key of key path ``loc`` that allow that key, by
    name (``interventions`` for a top-level ``vaccination``, ``simulation`` for ``days``): where a
    key was written one section too high. The sections the user wrote come alone where one of
    them allows it (``start_day`` under ``interventions``, beside a ``vaccination:`` left empty,
    is the vaccination's)."""
    section = _section_at(model, loc, data)
    if section is None or not loc:
        return []
    holder = lookup(data, loc[:-1])
    found = [
        name
        for name, field in _keys(section).items()
        if any(_is_model(m) and str(loc[-1]) in _keys(m) for m in union_members(field.annotation))
    ]
    written = [name for name in found if isinstance(holder, dict) and name in holder]
    return written or found


def pattern_words(model: type[BaseModel], loc: tuple[Any, ...], data: Any) -> str | None:
    """What a text key at key path ``loc`` allows, in words: its field's ``json_schema_extra``
    ``{"allowed": ...}`` (a pattern such as ``^(cpu|cuda(:\\d+)?)$`` says it to few readers)."""
    section = _section_at(model, loc, data)
    field = _keys(section).get(loc[-1]) if section is not None and loc else None
    extra = field.json_schema_extra if field is not None else None
    return extra.get("allowed") if isinstance(extra, dict) else None


# A name that names a folder or files (a run folder, a protocol's plot files): no spaces, no /, not
# hidden (a leading .).
NAME_PATTERN = r"^[A-Za-z0-9_-][A-Za-z0-9_.-]*$"
NAME_WORDS = "letters, digits, _, - and . (not first), no spaces or /"


def name_field(what: str, more: str = "", **field: Any) -> Any:
    """A text field of :data:`NAME_PATTERN` (pydantic ``Field``, other settings in ``field``) whose
    bad value is told in words: "write ``what``: letters, digits, ..." then ``more`` (the pattern
    says it to few readers; :func:`pattern_words`)."""
    return Field(pattern=NAME_PATTERN, json_schema_extra={"allowed": f"{what}: {NAME_WORDS}{more}"}, **field)


# The largest seed a scenario may give where a seed reaches a library's generator: Optuna's
# sampler (numpy's legacy generator) takes seeds below 2**32, torch's below 2**64 with the offsets
# the learning protocols add; a seed beyond would end the run with a traceback.
SEED_MAX = 2**32 - 1


def seed_field(default: int = 0, description: str | None = None) -> Any:
    """A random seed's field (pydantic ``Field``): a whole number from 0 to :data:`SEED_MAX`."""
    return Field(default, ge=0, le=SEED_MAX, description=description)


# pydantic's error types for a mapping (a section) given something else, whose own messages
# name Python types ("a valid dictionary or instance of SimulationConfig").
SECTION_EXPECTED = ("model_type", "model_attributes_type", "dict_type")


def section_expected(model: type[BaseModel], loc: tuple[Any, ...], data: Any) -> str:
    """What to write where a section of settings (a mapping) is expected at key path ``loc`` of
    ``data``, with the keys it allows where the schema names them."""
    keys = allowed_keys(model, (*loc, None), data)
    allowed = f" (allowed keys: {', '.join(keys)})" if keys else ""
    return f"a section of settings is expected here, written as key: value lines under it{allowed}"


# pydantic's error types, in the words of the people who write scenarios ("Input should be
# greater than or equal to 1" is the schema library speaking); a type not here keeps pydantic's
# message, its "Input should be" said as "must be".
PLAIN = {
    "greater_than_equal": "must be at least {ge}",
    "greater_than": "must be greater than {gt}",
    "less_than_equal": "must be at most {le}",
    "less_than": "must be less than {lt}",
    "multiple_of": "must be a multiple of {multiple_of}",
    "literal_error": "must be {expected}",
    "int_parsing": "must be a whole number",
    "int_type": "must be a whole number",
    "int_from_float": "must be a whole number, without a fractional part",
    "float_parsing": "must be a number",
    "float_type": "must be a number",
    "bool_parsing": "write true or false",
    "bool_type": "write true or false",
    "string_type": "must be text",
    "string_too_long": "must be at most {max_length} characters long",
    "list_type": "must be a list",
    "tuple_type": "must be a list",
    "set_type": "must be a list",
    "date_type": "must be a date, written YYYY-MM-DD (e.g. 2020-02-01)",
    "date_parsing": "must be a date, written YYYY-MM-DD (e.g. 2020-02-01)",
    "date_from_datetime_parsing": "must be a date, written YYYY-MM-DD (e.g. 2020-02-01)",
    "date_from_datetime_inexact": "must be a date, written YYYY-MM-DD (e.g. 2020-02-01)",
}


def plain_message(
    kind: str, msg: str, ctx: dict[str, Any] | None, model: type[BaseModel], loc: tuple[Any, ...], data: Any
) -> str:
    """What is allowed, for a pydantic error of type ``kind`` with message ``msg`` and context
    ``ctx`` at key path ``loc`` of ``data`` (validated as ``model``), in plain words: a section
    expected names the keys it allows, a text key its allowed form (a pattern says it to few
    readers), the others :data:`PLAIN`."""
    if kind in SECTION_EXPECTED:
        return section_expected(model, loc, data)
    words = pattern_words(model, loc, data) if kind == "string_pattern_mismatch" else None
    if words:
        return f"write {words}"
    shown = {k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in (ctx or {}).items()}
    try:
        return PLAIN[kind].format(**shown)
    except (KeyError, IndexError):
        return re.sub(r"^Input should be\b", "must be", msg).replace(" after validation", "")


# pydantic's error types for a number outside its bounds.
BOUNDS = ("greater_than_equal", "greater_than", "less_than_equal", "less_than")


def not_finite_text(value: Any) -> bool:
    """Whether ``value`` is text that reads as an infinite or NaN number (``nan``, ``NaN``,
    ``-inf``, ``Infinity``, ``1e999``: YAML keeps these as text, and pydantic reads them as numbers)."""
    if not isinstance(value, str):
        return False
    try:
        return not math.isfinite(float(value))
    except ValueError:
        return False


def number_as_text(value: Any, msg: str) -> str:
    """Where a whole number is expected (``msg``) and was written so that YAML reads it as text
    (``1e4``, ``1_000.0``): how to write it (``; YAML reads 1e4 as text: write 10000``), else
    nothing (a date written as '2020' gets no such hint)."""
    if not isinstance(value, str) or "whole number" not in msg:
        return ""
    return how_to_write(value, whole=True)


def how_to_write(text: str, whole: bool) -> str:
    """How to write the number that ``text`` (a value YAML read as text) stands for, where a
    number (``whole``: a whole number) is expected: without its quotes where YAML reads it as a
    number so (``'3'``), else as YAML writes it (``1e-3`` and ``1.0e19``, which YAML 1.1 reads
    as text: ``0.001``, ``1.0e+19``; ``'010'``: ``10.0``); nothing where it stands for no such number."""
    try:
        number = float(text)
    except ValueError:
        return ""
    if not math.isfinite(number) or (whole and not number.is_integer()):
        return ""
    try:
        plain = load_yaml(text)
    except yaml.YAMLError:  # 010: YAML's octal (abm.yaml_loader)
        plain = None
    if isinstance(plain, (int, float)) and not isinstance(plain, bool):
        return f"; write the number without quotes: {text.strip()}"
    written = str(int(number)) if whole else yaml.safe_dump(number).splitlines()[0]  # 0.001, 1.0e+19
    read = f"YAML reads {text.strip()} as text: " if isinstance(plain, str) else ""
    return f"; {read}write {written}"


def number_as_text_problem(options: list[Any], value: Any) -> str | None:
    """What is allowed where ``value`` is text and the schema's ``options`` (a key's types) take
    a number only, or a number or a word (named choices, a date or any text) where ``value`` is a
    number and none of the words: pydantic would read ``'3'`` as 3 (or as the word '3'), and a file
    that quotes a number reads as text in other YAML readers (and to its readers: quotes mark
    text). None where that is not so; text for an infinite or NaN number is named as such
    (:func:`abm.key_paths.not_finite`)."""
    if not isinstance(value, str) or not_finite_text(value):
        return None
    kind = number_kind(options)
    if kind is not None:
        return f"must be {kind}" + how_to_write(value, whole=kind == "a whole number")
    # A number or a word (``int | str``, a number or a named choice, a day or a date): pydantic
    # reads '30' as 30 (or keeps it as a word), so a quoted number is refused here as well,
    # where the field's alternatives that are no text are all numbers and '30' is none of its words.
    kind = number_kind([o for o in options if o in (int, float)])
    words = [word_name(o) for o in options if o not in (int, float)]
    if kind is None or not words or None in words or value in literal_words(options):
        return None
    hint = how_to_write(value, whole=kind == "a whole number")
    return f"must be {kind} or {' or '.join(dict.fromkeys(str(w) for w in words))}{hint}" if hint else None


def word_name(option: Any) -> str | None:
    """How a union's alternative written as text is named (``'a' or 'b'``, a date, a word);
    None for one that is no text (a list, true/false, a section)."""
    if typing.get_origin(option) is typing.Literal:
        args = typing.get_args(option)
        return one_of(args) if all(isinstance(a, str) for a in args) else None
    return {str: "a word", dt.date: "a date"}.get(option)


def literal_words(options: list[Any]) -> set[Any]:
    """The named choices of a union's ``Literal`` alternatives."""
    return {a for o in options if typing.get_origin(o) is typing.Literal for a in typing.get_args(o)}


def size_problem(ctx: dict[str, Any], value: Any) -> str:
    """A list or mapping with too few or too many entries: how many it has and how many it may."""
    n = len(value) if hasattr(value, "__len__") else ctx.get("actual_length", 0)
    noun = ("entry", "entries") if isinstance(value, dict) else ("item", "items")
    has = f"has {n} {noun[n != 1]}"
    if "min_length" in ctx:
        return f"{has}; give at least {ctx['min_length']}"
    return f"{has}; give at most {ctx['max_length']}"


def error_location(err: Any) -> tuple[Any, ...]:
    """A pydantic error's location, but for a key that is no text (``invalid_key``) the key itself
    as the file holds it: pydantic names ``null`` as 'None', a date by its repr and ``true`` as 1."""
    loc = tuple(err["loc"])
    return (*loc[:-1], err["input"]) if err["type"] == "invalid_key" and loc else loc


def read_as(value: Any) -> str:
    """What YAML read a value as, in words: null, true or false, a number, a date, a list..."""
    if value is None:
        return "null (no value)"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, dt.date):
        return "a date"
    return "text" if isinstance(value, str) else f"a {type(value).__name__}"


def error_lines(
    exc: ValidationError,
    model: type[BaseModel],
    data: Any,
    prefix: tuple[Any, ...] = (),
    origin: Callable[[tuple[Any, ...]], Path | None] | None = None,
) -> list[str]:
    """A line for each problem naming the key path, the value and what is allowed, and the file
    of an ``extends`` chain that set it where that is not the file itself (``origin``, a
    function from a key path to that file).

    ``model`` is what was validated, ``data`` the whole file as the user wrote it and ``prefix``
    the key path in it of what was validated (a protocol's ``params``, validated against the
    protocol's own config). A key that takes several forms (true/false or a list, a name or a
    list) is named by its own key path: what each form allows goes on one line, and where a list
    was given and an item is at fault, only the item is named."""
    entries = [(err, *user_key_path(prefix + error_location(err), data)) for err in exc.errors()]
    # A list (or mapping) given where a key takes several forms, with an item at fault: the item
    # says what is wrong; the other forms' "should be a boolean" would only mislead.
    items_at_fault = {loc[:root] for _, loc, root in entries if root is not None and len(loc) > root}
    # A fixed-length list (contacts.community.mean_contacts) given too few items: pydantic names
    # each absent position as a missing key; the list is named once, with how many it needs.
    short: dict[tuple[Any, ...], int] = {}
    for err, loc, _ in entries:
        if err["type"] == "missing" and loc and isinstance(loc[-1], int) and isinstance(lookup(data, loc[:-1]), list):
            short[loc[:-1]] = max(short.get(loc[:-1], 0), loc[-1] + 1)
    # An unknown key close to a required key that is missing (``populaton``): one line, the
    # unknown key's, names both.
    missing = {loc for err, loc, _ in entries if err["type"] == "missing"}
    meant: dict[tuple[Any, ...], tuple[Any, ...]] = {}  # the unknown key -> the missing key
    for err, loc, _ in entries:
        if err["type"] == "extra_forbidden":
            close = likely_meant(str(loc[-1]), allowed_keys(model, loc[len(prefix) :], lookup(data, prefix)) or [])
            if close is not None and (*loc[:-1], close) in missing:
                meant[loc] = (*loc[:-1], close)
    lines: list[tuple[tuple[Any, ...], str]] = []
    merged: dict[tuple[Any, ...], int] = {}  # a key of several forms -> its line
    for err, loc, root in entries:
        if root is not None and len(loc) == root and loc in items_at_fault:
            continue
        kind, value = err["type"], err.get("input")
        raw = err["msg"].removeprefix("Value error, ")
        msg = plain_message(kind, raw, err.get("ctx"), model, loc[len(prefix) :], lookup(data, prefix))
        if kind in BOUNDS and not_finite_text(value):  # 'NaN' is not "below 0": it is no number to compare
            msg, value = "a finite number is expected here", float(value)  # named as a number: inf, nan
        if kind == "string_type" and isinstance(value, int) and not isinstance(value, bool):  # fips: 53033
            msg += f"; write it in quotes: '{value}'"
        if kind in ("union_tag_invalid", "union_tag_not_found"):  # a section's variant, by its tag
            ctx = err["ctx"]
            loc = (*loc, ctx["discriminator"].strip("'"))
            kind = "missing" if kind == "union_tag_not_found" else kind
            value, msg = ctx.get("tag"), f"must be one of {ctx.get('expected_tags')}"
        if root is not None and loc in merged:
            at = merged[loc]
            if msg not in lines[at][1]:
                lines[at] = (loc, f"{lines[at][1]}; or {msg}")
            continue
        path = format_key_path(loc, data)
        if kind in SECTION_EXPECTED and value is None:
            text = f"{path}: has no value; {msg}, or leave the key out for the defaults"
        elif kind == "extra_forbidden":
            allowed = allowed_keys(model, loc[len(prefix) :], lookup(data, prefix))
            hint = f"allowed keys: {', '.join(allowed)}" if allowed else "remove it"
            close = likely_meant(str(loc[-1]), allowed)
            required = " (a required key, which is missing)" if loc in meant else ""
            guess = f"did you mean {close!r}{required}? " if close else ""
            if not close and (sections := sections_with_key(model, loc[len(prefix) :], lookup(data, prefix))):
                paths = [format_key_path((*loc[:-1], name), data) for name in sections]
                guess = (
                    f"did you mean {paths[0] + '.' + str(loc[-1])!r}? "
                    if len(paths) == 1
                    else f"it is a key of {', '.join(paths)}: indent it under one of them; "
                )
            text = f"{path}: unknown key; {guess}{hint}"
        elif kind == "invalid_key":  # a key YAML read as no name (null, true, 3, 2020-01-01)
            allowed = allowed_keys(model, loc[len(prefix) :], lookup(data, prefix))
            hint = f"allowed keys: {', '.join(allowed)}" if allowed else "write the key as a name"
            parent = format_key_path(loc[:-1], data) + "." if loc[:-1] else ""
            text = f"{parent}{shown(value)}: unknown key (YAML reads it as {read_as(value)}, not as a name); {hint}"
        elif kind == "missing" and loc[:-1] in short:
            if any(at == loc[:-1] for at, _ in lines):
                continue
            loc, n = loc[:-1], len(lookup(data, loc[:-1]))
            text = f"{format_key_path(loc, data)}: has {n} item{'s' * (n != 1)}; give {short[loc]}"
        elif kind == "missing" and loc in meant.values():  # said by the misspelt key's line
            continue
        elif kind == "missing":
            text = f"{path}: required key is missing"
        elif not loc:  # a check across sections: its message names the keys
            text = msg
        elif kind in ("too_short", "too_long"):  # a list or mapping: how many entries, not all of them
            text = f"{path}: {size_problem(err.get('ctx', {}), value)}"
        elif kind == "value_error" and (
            (isinstance(value, dict) and root is None)  # a check across a section's keys
            or len(shown(value)) > LONGEST_SHOWN  # a table: its message names the entry
        ):
            text = f"{path}: {msg}"
        elif value is None:  # `key:` with nothing after it, or null
            text = f"{path}: has no value; {msg}"
        else:
            text = f"{path}: {shown(value)} is not allowed: {msg}" + number_as_text(value, msg)
        if root is not None:
            merged[loc] = len(lines)
        lines.append((loc, text))
    out = []
    for loc, text in lines:
        where = origin(loc) if origin is not None and loc else None
        if where is not None and origin is not None and where != origin(()):
            text += f" (set in {where})"
        out.append(text)
    return out


def invalid_message(source: str, lines: list[str], heading: str = "invalid scenario") -> str:
    """One message for a scenario's problems: one line, or a list under the file's name (and
    ``heading``, where there is one)."""
    head = f"{source}: {heading}" if heading else source
    return head + (": " + lines[0] if len(lines) == 1 else ":\n  " + "\n  ".join(lines))


def _section_model(annotation: Any) -> Any:
    """The model of a section's annotation, ``Model`` or ``Model | None`` (else the annotation
    itself: a list of sections is no section)."""
    models = [a for a in union_members(annotation) if isinstance(a, type) and issubclass(a, BaseModel)]
    return models[0] if len(models) == 1 else annotation


def number_kind(options: list[Any]) -> str | None:
    """What a field of these types takes, when they are all numbers: "a whole number" (int
    only) or "a number"; None otherwise."""
    if not options or not all(o in (int, float) for o in options):
        return None
    return "a whole number" if all(o is int for o in options) else "a number"


def one_of(values: tuple[Any, ...]) -> str:
    """Named choices as the schema's messages name them: ``'a', 'b' or 'c'``."""
    shown = [repr(v) for v in values]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"


def allowed_words(options: list[Any]) -> str | None:
    """What a key of these types (its annotation's union members) allows, said as the schema's
    messages say it for a wrong value of each form (``must be 'a' or 'b'; or must be a list``);
    None where a type has no words here."""
    words: list[str] = []
    for option in options:
        origin = typing.get_origin(option)
        if origin is typing.Literal:
            word = f"must be {one_of(typing.get_args(option))}"
        elif option in (int, float):
            word = f"must be {number_kind([o for o in options if o in (int, float)])}"
        elif option is str:
            word = PLAIN["string_type"]
        elif option is dt.date:
            word = PLAIN["date_type"]
        elif origin in (list, tuple, set):
            word = PLAIN["list_type"]
        elif origin is dict:
            word = "must be a mapping"
        else:
            return None
        words += [word] if word not in words else []
    return "; or ".join(words) or None


def bool_mixups(model: type[BaseModel], data: Any, path: tuple[str, ...] = ()) -> list[str]:
    """Keys where YAML's true/false stands for a number or text, or a number for true/false
    (pydantic would read ``days: true`` as 1 and ``household: 1`` as true)."""
    if not isinstance(data, dict):
        return []
    fields = {f.alias or name: f for name, f in model.model_fields.items()}
    problems = []
    for key, value in data.items():
        field = fields.get(key)
        if field is None:
            continue
        ann, where = field.annotation, ".".join((*path, str(key)))
        options = union_members(ann)
        sub = _section_model(ann)
        if not _is_model(sub) and isinstance(value, dict) and _is_model(_member_for(ann, value)):
            sub = _member_for(ann, value)  # a section of several kinds (a learning scenario's data), by its tag
        section = isinstance(sub, type) and issubclass(sub, BaseModel)
        if isinstance(value, bool) and section:
            problems.append(
                f"{where}: {str(value).lower()} is not allowed: a section of settings is expected here "
                f"({{}} for its defaults)"
            )
        elif isinstance(value, bool) and not any(o is bool or o is Any for o in options):
            expected = allowed_words(options) or "must be a number or text"
            problems.append(f"{where}: {str(value).lower()} is not allowed: {expected}")
        elif number_for_date(options, value):
            problems.append(f"{where}: {shown(value)} is not allowed: {PLAIN['date_type']}")
        elif number_as_text_problem(options, value):
            problems.append(f"{where}: {shown(value)} is not allowed: {number_as_text_problem(options, value)}")
        elif ann is bool and not isinstance(value, bool):
            problems.append(f"{where}: {shown(value)} is not allowed: write true or false")
        elif bool in options and not isinstance(value, (bool, list)):  # true/false or a list
            problems.append(f"{where}: {shown(value)} is not allowed: write true or false, or a list")
        if section:
            problems += bool_mixups(sub, value, (*path, str(key)))
        elif typing.get_origin(ann) is list and isinstance(value, list):
            item = _section_model(typing.get_args(ann)[0]) if typing.get_args(ann) else None
            if isinstance(item, type) and issubclass(item, BaseModel):
                for i, entry in enumerate(value):
                    problems += bool_mixups(item, entry, (*path, f"{key}[{i}]"))
            else:
                problems += entry_mixups(ann, value, (*path, str(key)))
        elif isinstance(value, (list, dict)):
            problems += entry_mixups(ann, value, (*path, str(key)))
    return problems


def number_for_date(options: list[Any], value: Any) -> bool:
    """Whether ``value`` is a number where the schema's ``options`` take a date only (pydantic
    would read ``start_date: 0`` as 1970-01-01, seconds since 1970)."""
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and dt.date in options
        and not any(o in (int, float, Any) for o in options)
    )


def entry_mixups(annotation: Any, value: Any, path: tuple[str, ...]) -> list[str]:
    """Entries of a list or mapping of numbers, at any depth (``seeding.infections.asymptomatic``,
    ``disease.susceptibility_by_age[0]``, ``disease.branching[0][1][2]``), written as true/false,
    which pydantic would read as 1 or 0; entries that are sections are looked at as
    :func:`bool_mixups` does."""
    problems = []
    for member in union_members(annotation):
        origin, args = typing.get_origin(member), typing.get_args(member)
        if origin is dict and isinstance(value, dict) and len(args) == 2:
            entries = [(args[1], v, (*path, str(k))) for k, v in value.items()]
        elif origin is list and isinstance(value, list) and args:
            entries = [(args[0], v, (*path[:-1], f"{path[-1]}[{i}]")) for i, v in enumerate(value)]
        elif origin is tuple and isinstance(value, list) and args:
            item = [args[0]] * len(value) if args[-1] is Ellipsis else list(args)
            pairs = zip(item, value, strict=False)  # a list of the wrong length is the schema's to name
            entries = [(a, v, (*path[:-1], f"{path[-1]}[{i}]")) for i, (a, v) in enumerate(pairs)]
        else:
            continue
        for entry_annotation, entry, where in entries:
            options = union_members(entry_annotation)
            sub = _section_model(entry_annotation)
            if isinstance(sub, type) and issubclass(sub, BaseModel):
                problems += bool_mixups(sub, entry, where)
            elif isinstance(entry, bool) and number_kind(options):
                problems.append(
                    f"{'.'.join(where)}: {str(entry).lower()} is not allowed: must be {number_kind(options)}"
                )
            elif number_for_date(options, entry):
                problems.append(f"{'.'.join(where)}: {shown(entry)} is not allowed: {PLAIN['date_type']}")
            elif number_as_text_problem(options, entry):
                problems.append(
                    f"{'.'.join(where)}: {shown(entry)} is not allowed: {number_as_text_problem(options, entry)}"
                )
            elif isinstance(entry, (list, dict)):
                problems += entry_mixups(entry_annotation, entry, where)
        return problems
    return problems


def unnamed(lines: list[str], more: list[str]) -> list[str]:
    """The lines of ``more``, each once, whose key path (before the first ``": "``) no line of
    ``lines`` names (``more`` may name a key on several lines: its problems)."""
    named = {line.split(": ", 1)[0] for line in lines}
    return [line for line in dict.fromkeys(more) if line.split(": ", 1)[0] not in named]


M = typing.TypeVar("M", bound=BaseModel)


def validated(
    model: type[M],
    data: Any,
    source: str,
    error: type[Exception],
    origin: Callable[[tuple[Any, ...]], Path | None] | None = None,
    extra: list[str] | None = None,
    heading: str = "invalid scenario",
) -> M:
    """``data`` validated as ``model``, or ``error`` with one message for ``source`` (and
    ``heading``: :func:`invalid_message`) naming every problem: true/false written for a number
    or a section (:func:`bool_mixups`), infinite or NaN numbers, ``extra`` problems the caller
    found (parts validated on their own), and what the schema refuses (:func:`error_lines`; a
    key already named is named once)."""
    # a key is named once: a problem found twice (a YAML .inf in a protocol's params is also in
    # ``extra``, where its schema also finds it not above 0) by its first line
    mixups = unnamed([], bool_mixups(model, data) + not_finite(data))
    mixups += unnamed(mixups, extra or [])
    try:
        result = model.model_validate(data)
    except ValidationError as exc:
        lines = mixups + unnamed(mixups, error_lines(exc, model, data, origin=origin))
        raise error(invalid_message(source, lines, heading)) from None
    # A number written as text ("inf", "nan", "-Infinity") passes the check above as a string
    # and becomes a float only in validation: look again at what validation made of it.
    mixups += unnamed(mixups, not_finite(result.model_dump(mode="python", by_alias=True)))
    if mixups:
        raise error(invalid_message(source, mixups, heading))
    return result
