"""Strict JSON for the files abm writes: numpy values as Python ones, NaN and infinities as
null (a bare NaN is not JSON, and many readers refuse it)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np


def jsonable(obj: Any) -> Any:
    """``obj`` with numpy values as Python ones and NaN or infinite floats as None."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    return obj


def dumps(obj: Any, indent: int | None = 2) -> str:
    """``obj`` as strict JSON text (see :func:`jsonable`), ending with a newline."""
    return json.dumps(jsonable(obj), indent=indent, allow_nan=False) + "\n"
