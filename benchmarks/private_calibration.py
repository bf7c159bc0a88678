"""Private calibration benchmark: run the default known-truth scenario (and optionally the
King County 2020 one), time it, and write the results table.

    python benchmarks/private_calibration.py [--scenario scenarios/learning/private_calibration.yaml]
        [--seeds 0] [--results benchmarks/private_calibration_results.md] [--out runs/pc_bench]

Prints and writes, per seed: the per-protocol table of report.md (recovery per institution, MCG,
CGS, min gain, mean ND, MB sent, wall time), the checks of issue #8 (every collaborative protocol
beats local-only on mean recovery; CYCle's minimum gain >= 0), and the total wall time.
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import yaml

from abm.private_calibration.report import markdown, run_private_calibration

ROOT = Path(__file__).resolve().parents[1]


def checks(report: dict) -> list[str]:
    """The issue's claims, evaluated on one report."""
    prots = report["protocols"]
    local = prots["local"]["mean_recovery"]
    lines = []
    for key, r in prots.items():
        if key in ("local", "centralized"):
            continue
        ok = r["mean_recovery"] > local
        lines.append(
            f"- {key}: mean recovery {r['mean_recovery']:.3f} vs local-only {local:.3f}: "
            f"{'beats' if ok else 'does NOT beat'} local-only; min gain {r['min_gain']:+.3f}"
        )
    if "cycle" in prots:
        g = prots["cycle"]["min_gain"]
        lines.append(f"- CYCle: {'no' if g >= 0 else 'an'} institution with a negative gain (min gain {g:+.3f})")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", type=Path, default=ROOT / "scenarios/learning/private_calibration.yaml")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--results", type=Path, default=ROOT / "benchmarks/private_calibration_results.md")
    ap.add_argument("--out", type=Path, default=ROOT / "runs/pc_bench")
    args = ap.parse_args()
    base = yaml.safe_load(args.scenario.read_text())
    base["model"]["scenario"] = str((args.scenario.parent / base["model"]["scenario"]).resolve())
    lines = [
        "# Private calibration results",
        "",
        f"Command: `python benchmarks/private_calibration.py --scenario {args.scenario.relative_to(ROOT)} "
        f"--seeds {' '.join(map(str, args.seeds))}`. Date: 2026-11-22. Machine: 2-core CPU shared with other "
        f"jobs ({platform.machine()}, Python {platform.python_version()}), torch CPU, 1 thread.",
        "",
    ]
    for seed in args.seeds:
        start = time.perf_counter()
        report = run_private_calibration(dict(base, seed=seed), args.out / f"seed{seed}")
        wall = time.perf_counter() - start
        t = report["timings_s"]
        lines += [
            f"## seed {seed}",
            "",
            f"Wall time {wall:.0f} s (simulations {t['simulations']:.0f} s, protocols {t['protocols']:.0f} s, "
            f"end-to-end fits {t['end_to_end']:.0f} s).",
            "",
            *markdown(report).splitlines()[2:],
            "",
            "Checks:",
            "",
            *checks(report),
            "",
        ]
        print("\n".join(lines[-12:]), flush=True)
    args.results.write_text("\n".join(lines) + "\n")
    print(f"results: {args.results}")


if __name__ == "__main__":
    main()
