"""The ``abm learn`` body for ``kind: private_calibration`` scenarios."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any


def learn(file: Path, out: Path | None = None, runner: str | None = None, sets: list[str] | None = None) -> None:
    """Run the private-calibration scenario ``file``; write its report to OUT (default
    runs/<name>) and print a table.

    ``runner`` (inprocess, flower-sim, flower) overrides the scenario's ``runner`` key; ``sets``
    (``key.path=value``, as ``abm run --set``) override any key.

    An invalid scenario prints one clear message and exits with code 2, writing nothing.
    """
    from abm.learning.cli import announce, load_or_exit, named, run_or_exit
    from abm.learning.result import learn as learn_scenario
    from abm.private_calibration.federation import calibration_specs
    from abm.private_calibration.scenario import load_scenario
    from abm.scenario import COMMAND_LINE

    scenario = load_or_exit(load_scenario, file, runner, sets)
    target = out if out is not None else Path("runs") / scenario.name
    header = announce(scenario, len(calibration_specs(scenario)), f"{len(scenario.institutions)} institutions", target)
    report = run_or_exit(
        lambda: learn_scenario(file, target, runner=runner, sets=sets, names=COMMAND_LINE, warn=False).report,
        target,
        named(file, sets, runner),
        "private_calibration",
        header,
    )
    print("\n".join(summary_lines(report)))
    print(f"report: {target / 'report.json'}")


def summary_lines(report: dict[str, Any]) -> list[str]:
    """The console table of a private-calibration report: per protocol, recovery (overall and per
    institution), MCG, CGS, the same under each institution's own prior ("n/a" where the scenario
    evaluates none: ``own_holdout_simulations: 0``), ND and the bytes sent; then what the columns
    mean, and a line per protocol run with differential privacy (its epsilon: :func:`privacy_lines`)."""
    from abm.byte_sizes import size_text
    from abm.learning.report import gain_shown, key_width, privacy_lines

    def own(value: float, spec: str) -> str:
        return "n/a" if math.isnan(value) else format(value, spec)

    names = [i["name"] for i in report["institutions"]]
    width = key_width(report["protocols"], 18)
    # each institution's column as wide as its whole name: cut to 9 letters, 'Institution A' and
    # 'Institution B' headed two columns alike
    columns = [max(10, len(n) + 2) for n in names]
    lines = [
        f"{'protocol':<{width}}{'recovery':>9}"
        + "".join(f"{n:>{w}}" for n, w in zip(names, columns, strict=True))
        + f"{'MCG':>8}{'CGS':>7}{'own rec':>9}{'own MCG':>9}{'ND':>7}{'sent':>11}"
    ]
    for key, r in report["protocols"].items():
        per = "".join(f"{row['recovery']:>{w}.3f}" for row, w in zip(r["institutions"], columns, strict=True))
        lines.append(
            f"{key:<{width}}{r['mean_recovery']:>9.3f}{per}{gain_shown(r['mcg']):>+8.3f}{r['cgs']:>7.3f}"
            f"{own(r['mean_recovery_own'], '.3f'):>9}{own(gain_shown(r['mcg_own']), '+.3f'):>9}{r['mean_nd']:>7.2f}"
            f"{size_text(r['bytes_total']):>11}"
        )
    lines.append(
        "recovery: held-out simulations over the full range; own rec, own MCG: under each institution's own prior; "
        "sent: the bytes of every message (kB: 10^3, MB: 10^6)"
    )
    return lines + privacy_lines(report["protocols"], "institution")
