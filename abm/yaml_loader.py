"""YAML reading for scenario files: safe loading that refuses a key given twice in one mapping
(plain YAML keeps the last silently, so a duplicated section would drop settings) and a number
written with a leading 0 (YAML 1.1 reads ``010`` as the octal 8, and ``06037`` as 3103)."""

from __future__ import annotations

from typing import Any

import yaml


class UniqueKeyLoader(yaml.SafeLoader):
    """A safe loader whose mappings refuse duplicate keys, naming the key and its line."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor`: merged keys may be overridden
                continue
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
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


def load_yaml(text: str) -> Any:
    """Parse YAML ``text`` safely; a duplicate key raises :class:`yaml.YAMLError`."""
    return yaml.load(text, Loader=UniqueKeyLoader)
