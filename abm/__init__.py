"""abm: a tensorized agent-based epidemic simulator for King County, WA, and beyond."""

__version__ = "0.1.0"

from abm.outputs.compare import Comparison, compare
from abm.runs import RunResult, run

__all__ = ["Comparison", "RunResult", "__version__", "compare", "run"]
