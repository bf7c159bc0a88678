"""Where a pydantic error points in the user's own data: its key path without the names of the
union members pydantic tried (``bool``, ``"list[literal['a','b']]"``), which are no keys of the
file."""

from __future__ import annotations

from typing import Any


def lookup(data: Any, loc: tuple[Any, ...]) -> Any:
    """The value at key path ``loc`` in ``data``, or None where there is none."""
    cur = data
    for part in loc:
        try:
            cur = cur[part]
        except (KeyError, IndexError, TypeError):
            return None
    return cur


def key_path(loc: tuple[Any, ...], data: Any) -> tuple[Any, ...]:
    """A pydantic error location as the user's key path: pydantic also names the member of a
    union that it tried (``'gaussian_mixture'``, ``"literal['a','b']"``); such a part is not a key
    of the user's mapping there (a missing key, the last part, stays)."""
    out: list[Any] = []
    for i, part in enumerate(loc):
        here = lookup(data, tuple(out))
        index = isinstance(part, int) and isinstance(here, list)
        key = isinstance(part, str) and isinstance(here, dict) and (part in here or i == len(loc) - 1)
        if index or key:
            out.append(part)
    return tuple(out)
