"""The ``abm learn`` body for ``kind: private_calibration`` scenarios."""

from __future__ import annotations

from pathlib import Path


def learn(file: Path, out: Path | None = None, runner: str | None = None) -> None:
    """Run the private-calibration scenario ``file``; write its report to OUT (default
    runs/<name>) and print a table.

    ``runner`` (inprocess, flower-sim, flower) overrides the scenario's ``runner`` key.

    An invalid scenario prints one clear message and exits with code 2, writing nothing.
    """
    from abm.learning.cli import announce, load_or_exit, run_or_exit
    from abm.private_calibration.federation import calibration_specs
    from abm.private_calibration.report import run_private_calibration
    from abm.private_calibration.scenario import load_scenario

    scenario = load_or_exit(load_scenario, file, runner)
    target = out if out is not None else Path("runs") / scenario.name
    header = announce(scenario, len(calibration_specs(scenario)), f"{len(scenario.institutions)} institutions", target)
    report = run_or_exit(
        lambda: run_private_calibration(file, target, runner), target, file, "private_calibration", header
    )
    names = [i["name"] for i in report["institutions"]]
    print(
        f"{'protocol':<18}{'recovery':>9}"
        + "".join(f"{n[:9]:>10}" for n in names)
        + f"{'MCG':>8}{'CGS':>7}{'own rec':>9}{'own MCG':>9}{'ND':>7}{'MB':>8}"
    )
    for key, r in report["protocols"].items():
        per = "".join(f"{row['recovery']:>10.3f}" for row in r["institutions"])
        print(
            f"{key:<18}{r['mean_recovery']:>9.3f}{per}{r['mcg']:>+8.3f}{r['cgs']:>7.3f}"
            f"{r['mean_recovery_own']:>9.3f}{r['mcg_own']:>+9.3f}{r['mean_nd']:>7.2f}{r['bytes_total'] / 1e6:>8.2f}"
        )
    print("recovery: held-out simulations over the full range; own rec, own MCG: under each institution's own prior")
    print(f"report: {target / 'report.json'}")
