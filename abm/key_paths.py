"""Key paths in scenario data: what the user wrote at a path that an error names, and the
shortest distinct forms of dotted paths for labels."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def lookup(data: Any, loc: tuple[Any, ...]) -> Any:
    """The value at key path ``loc`` (mapping keys and list indexes) in ``data``, or None where
    there is none."""
    for part in loc:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return None
    return data


# The largest 32-bit float: the engines compute in 32-bit floats, and a number beyond it ends a run
# with an overflow (disease.infectiousness_by_stage) or a traceback (infectiousness_profile_mean).
LARGEST = float(np.finfo(np.float32).max)


def not_finite(data: Any, path: tuple[str, ...] = ()) -> list[str]:
    """A message for each key whose value is infinite or NaN (YAML's .inf, .nan), or a number
    beyond what a 32-bit float holds (:data:`LARGEST`): no scenario number may be (epidemic,
    learning and private-calibration scenarios alike)."""
    if isinstance(data, float) and not math.isfinite(data):
        return [f"{'.'.join(path)}: {data} is not allowed: a finite number is expected here"]
    if isinstance(data, float) and abs(data) > LARGEST:
        return [
            f"{'.'.join(path)}: {data:g} is not allowed: too large; numbers must lie within -{LARGEST:.3g} and "
            f"{LARGEST:.3g} (32-bit floats)"
        ]
    if isinstance(data, dict):
        return [p for k, v in data.items() for p in not_finite(v, (*path, str(k)))]
    if isinstance(data, (list, tuple)):  # a validated scenario holds tuples (e.g. mean_contacts)
        head, last = path[:-1], path[-1] if path else ""
        return [p for i, v in enumerate(data) for p in not_finite(v, (*head, f"{last}[{i}]"))]
    return []


def short_keys(keys: list[str]) -> list[str]:
    """Each dotted key by its last components, as few as keep the keys distinct."""
    for n in range(1, max(k.count(".") for k in keys) + 2):
        tails = [".".join(k.split(".")[-n:]) for k in keys]
        if len(set(tails)) == len(tails):
            return tails
    return keys
