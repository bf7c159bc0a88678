"""YAML reading for scenario files: safe loading that refuses a key given twice in one mapping
(plain YAML keeps the last silently, so a duplicated section would drop settings), a key that is
a list or a mapping, a value that holds itself through an alias or is nested absurdly deep, and
a number written with a leading 0 (YAML 1.1 reads ``010`` as the octal 8, and ``06037`` as 3103)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import yaml

# The deepest nesting of lists and mappings read: a scenario's deepest (disease.branching, a table
# in a section) is 4 levels; hundreds would end reading, or the checks after it, with a
# RecursionError.
DEEPEST = 50


class UniqueKeyLoader(yaml.SafeLoader):
    """A safe loader whose mappings refuse duplicate keys, naming the key and its line."""

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        """A node; an alias to a value that is still being read (``a: &x [*x]``, a value that
        holds itself) is refused with its line: nothing could read such a value to its end; so is
        a value nested deeper than :data:`DEEPEST`."""
        open_anchors: list[str] = self.__dict__.setdefault("_open_anchors", [])
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in open_anchors:
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"*{event.anchor} refers to the value &{event.anchor} that holds it, a value without end; "
                    "write the value out",
                    event.start_mark,
                )
            return super().compose_node(parent, index)
        if len(open_anchors) >= DEEPEST:
            raise yaml.composer.ComposerError(
                None,
                None,
                f"values nested more than {DEEPEST} levels deep; no scenario needs that many",
                event.start_mark,
            )
        anchor = getattr(event, "anchor", None)
        open_anchors.append(anchor)
        try:
            return super().compose_node(parent, index)
        finally:
            open_anchors.pop()

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor`: merged keys may be overridden
                continue
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if not isinstance(key, Hashable):
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"a key must be a name (text), not a {'list' if isinstance(key, list) else 'mapping'}",
                    key_node.start_mark,
                )
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"key {key!r} appears twice in one mapping (lines {seen[key]} and {line}); keep one",
                    key_node.start_mark,
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_timestamp(self, node: yaml.ScalarNode) -> Any:
        """A date such as 2020-02-30 is refused with its line, not a bare ``ValueError``."""
        try:
            return super().construct_yaml_timestamp(node)
        except ValueError as exc:
            raise yaml.constructor.ConstructorError(
                None, None, f"{node.value!r} is not a calendar date ({exc}); write YYYY-MM-DD", node.start_mark
            ) from None

    def construct_yaml_int(self, node: yaml.ScalarNode) -> Any:
        """An integer; one written with a leading 0 (``010``, which YAML reads as the octal 8) is
        refused with its line, naming both readings."""
        digits = str(node.value).lstrip("+-").replace("_", "")
        if len(digits) > 1 and digits[0] == "0" and digits.isdigit():
            octal = super().construct_yaml_int(node)
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"{node.value} has a leading 0, which YAML reads as the octal number {octal}: write it without "
                f"the 0 for the number {int(node.value.replace('_', ''))}, or in quotes ('{node.value}') for a code",
                node.start_mark,
            )
        return super().construct_yaml_int(node)


UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", UniqueKeyLoader.construct_yaml_int)
UniqueKeyLoader.add_constructor("tag:yaml.org,2002:timestamp", UniqueKeyLoader.construct_yaml_timestamp)


# What the two commonest slips of hand-edited YAML mean, after YAML's own words for them: a tab
# in the indentation, and a line indented to match no key above it.
INDENTED_TO_NOTHING = "this line's indentation matches no line above it: line it up with the others of its section"
PROBLEM_HINTS = {
    "found character '\\t' that cannot start any token": "YAML indents with spaces, not tabs: replace the tab",
    "expected <block end>, but found '<block mapping start>'": INDENTED_TO_NOTHING,
    "expected <block end>, but found '<block sequence start>'": INDENTED_TO_NOTHING,
}


def yaml_error_text(exc: yaml.YAMLError) -> str:
    """A YAML error on one line, as messages give it after the file's name: ``invalid YAML at
    line 3, column 5: <problem>`` (with the position where YAML knows one), without YAML's copy
    of the line; a slip of :data:`PROBLEM_HINTS` is told what it means."""
    where = getattr(exc, "problem_mark", None)
    at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
    problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
    hints = [hint for start, hint in PROBLEM_HINTS.items() if problem.startswith(start)]
    return f"invalid YAML{at}: {problem}" + "".join(f"; {hint}" for hint in hints)


def load_yaml(text: str) -> Any:
    """Parse YAML ``text`` safely; a duplicate key raises :class:`yaml.YAMLError`."""
    return yaml.load(text, Loader=UniqueKeyLoader)
