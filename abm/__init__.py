"""abm: a tensorized agent-based epidemic simulator for King County, WA, and beyond."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from abm.outputs.compare import Comparison, compare
    from abm.runs import RunResult, run

_EXPORTS = {
    "Comparison": "abm.outputs.compare",
    "compare": "abm.outputs.compare",
    "RunResult": "abm.runs",
    "run": "abm.runs",
}


def __getattr__(name: str) -> Any:
    """The public API, imported on first use (so that `abm --help` and Ctrl-C at start-up are quick)."""
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'abm' has no attribute {name!r}")


__all__ = ["Comparison", "RunResult", "__version__", "compare", "run"]
