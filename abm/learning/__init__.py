"""Decentralized learning: protocols, collaborator selection, privacy, runners and metrics.

Entry point for scenarios: :func:`run_scenario`. See ``docs/learning.md``.
"""

from abm.learning.errors import LearningScenarioError, SecureAggregationError


def run_scenario(path_or_dict, out_dir):
    """Run a learning scenario and write ``report.json`` and plots into ``out_dir``."""
    from abm.learning.report import run_scenario as _run

    return _run(path_or_dict, out_dir)


__all__ = ["LearningScenarioError", "SecureAggregationError", "run_scenario"]
