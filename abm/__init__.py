"""abm: a tensorized agent-based epidemic simulator for King County, WA, and beyond.

From Python: ``abm.run`` (a run's tables, summary, plots and map), ``abm.compare`` (runs side by
side), ``abm.run_sweep`` (variants x replicates; also ``abm.sweep.run_sweep``), ``abm.calibrate``
(``abm calibrate``: the calibrated values, losses and folder) and ``abm.learn`` (``abm learn``:
decentralized learning and private calibration). Bad input raises a ``ValueError`` with the
message the command prints: ``abm.scenario.ScenarioError`` (``abm.learn``:
``abm.learning.LearningScenarioError``). Nothing is printed: the notes the commands print on a
scenario (``note: ...``) are warnings of class ``abm.ScenarioNote`` (``abm.scenario_notes``),
given before anything runs, and those on the results (a peak held to the last day, a fitted value
at a bound) are warnings of its subclass ``abm.ResultNote`` (``abm.result_notes``), given once the
result is complete, and written. README.md, "From Python", has an example of each.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# typing.TYPE_CHECKING without importing typing (3 ms): ``abm`` itself loads before ``python -m abm``
# can handle Ctrl-C as the command does (abm/__main__.py), and stays as short as it can.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from abm.calibration.result import CalibrationResult, calibrate
    from abm.learning.result import LearningResult, learn
    from abm.outputs.compare import Comparison, compare
    from abm.result_notes import ResultNote
    from abm.runs import RunResult, run
    from abm.scenario_notes import ScenarioNote
    from abm.sweep import SweepResult, run_sweep

_EXPORTS = {
    "CalibrationResult": "abm.calibration.result",
    "calibrate": "abm.calibration.result",
    "LearningResult": "abm.learning.result",
    "learn": "abm.learning.result",
    "Comparison": "abm.outputs.compare",
    "compare": "abm.outputs.compare",
    "ResultNote": "abm.result_notes",
    "RunResult": "abm.runs",
    "run": "abm.runs",
    "ScenarioNote": "abm.scenario_notes",
    "SweepResult": "abm.sweep",
    "run_sweep": "abm.sweep",
}
# Modules a notebook reaches as attributes after ``import abm`` alone (``abm.sweep.run_sweep``,
# ``except abm.scenario.ScenarioError``), imported on first use like the names above.
_MODULES = ("outputs", "scenario", "sweep")


def __getattr__(name: str) -> Any:
    """The public API, imported on first use (so that `abm --help` and Ctrl-C at start-up are quick)."""
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    if name in _MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'abm' has no attribute {name!r}")


__all__ = [
    "CalibrationResult",
    "Comparison",
    "LearningResult",
    "ResultNote",
    "RunResult",
    "ScenarioNote",
    "SweepResult",
    "__version__",
    "calibrate",
    "compare",
    "learn",
    "run",
    "run_sweep",
]
