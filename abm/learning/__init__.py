"""Decentralized learning: protocols, collaborator selection, privacy, runners and metrics.

Entry points for scenarios: :func:`abm.learn` (:mod:`abm.learning.result`; the ``abm learn`` command, which
also runs private calibrations) and :func:`run_scenario`, which returns the report alone. See
``docs/learning.md``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from abm.learning.errors import LearningScenarioError, SecureAggregationError

# Flower sends usage events to its makers (telemetry.flower.ai) unless FLWR_TELEMETRY_ENABLED is
# 0, read once as flwr is imported. abm's Flower runners carry institutions' calibrations that
# must not leave their machines unasked, so they run with it off, unless the user sets the
# variable. Set here, where every import of abm's learning code (and of flwr through it) passes
# first; Flower's client processes and Ray's workers inherit it.
os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")


def run_scenario(
    path_or_dict: str | Path | dict[str, Any],
    out_dir: str | Path,
    runner: str | None = None,
    sets: list[str] | None = None,
) -> dict[str, Any]:
    """Run a learning scenario; write ``report.json``, ``report.md``, ``report.html``,
    ``scenario.json`` and the PNG plots into ``out_dir``; return the report.

    ``runner`` (inprocess, flower-sim, flower) overrides the scenario's; ``sets``
    (``key.path=value``, as ``abm learn --set``) override any key. See
    :func:`abm.learning.report.run_scenario` (atomic output, validation errors).
    """
    from abm.learning.report import run_scenario as _run

    return _run(path_or_dict, out_dir, runner, sets)


__all__ = ["LearningScenarioError", "SecureAggregationError", "run_scenario"]
