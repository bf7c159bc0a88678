"""The ``abm learn FILE [--out DIR] [--runner NAME]`` command body (wired into the ``abm`` typer app)."""

from __future__ import annotations

import sys
from pathlib import Path

from abm.learning.errors import LearningScenarioError


def learn(file: Path, out: Path | None = None, runner: str | None = None) -> None:
    """Run a learning scenario; write report.json and plots to OUT (default runs/<name>).

    ``runner`` (inprocess, flower-sim, flower) overrides the scenario's ``runner`` key. An invalid
    scenario or runner prints one clear message and exits with code 2, writing nothing.
    """
    import typer

    from abm.learning.report import run_scenario
    from abm.learning.scenario import load_scenario
    from abm.private_calibration.cli import dispatch

    if dispatch(file, out, runner):  # `kind: private_calibration` scenarios (abm.private_calibration)
        return
    try:
        scenario, _ = load_scenario(file, runner)
    except LearningScenarioError as e:
        print(f"error: {e}", file=sys.stderr)
        raise typer.Exit(code=2) from None
    target = out if out is not None else Path("runs") / scenario.name
    report = run_scenario(file, target, runner)
    print(f"{'protocol':<22}{'mean':>8}{'MCG':>8}{'CGS':>8}{'min gain':>10}{'MB':>10}")
    for key, r in report["protocols"].items():
        print(
            f"{key:<22}{r['mean_score']:>8.3f}{r['mcg']:>8.3f}{r['cgs']:>8.3f}"
            f"{r['min_gain']:>10.3f}{r['bytes_total'] / 1e6:>10.2f}"
        )
    print(f"report: {target / 'report.json'}")
