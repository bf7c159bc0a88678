"""abm: a tensorized agent-based epidemic simulator for King County, WA, and beyond."""

__version__ = "0.1.0"

from abm.runs import RunResult, run

__all__ = ["RunResult", "__version__", "run"]
