"""Key paths in scenario data: what the user wrote at a path that an error names."""

from __future__ import annotations

from typing import Any


def lookup(data: Any, loc: tuple[Any, ...]) -> Any:
    """The value at key path ``loc`` (mapping keys and list indexes) in ``data``, or None where
    there is none."""
    for part in loc:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return None
    return data
