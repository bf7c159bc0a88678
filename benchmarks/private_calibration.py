"""Private calibration benchmark: run the default known-truth scenario (and optionally the
King County 2020 one), time it, and write the results table.

    python benchmarks/private_calibration.py [--scenario scenarios/learning/private_calibration.yaml]
        [--seeds 0] [--results benchmarks/private_calibration_results.md] [--out runs/pc_bench]
        [--budget N] [--protocols YAML]

``--budget`` gives every institution that simulation budget; ``--protocols`` replaces the
scenario's protocol list by a YAML list (e.g. ``'[{name: mapl}, {name: cycle}]'``), so a variant
of the scenario is one command line.

Prints and writes, per seed: the per-protocol table of report.md (recovery per institution, MCG,
CGS, min gain, mean ND, MB sent, wall time), the checks of issue #8 (every collaborative protocol
beats local-only on mean recovery; CYCle's minimum gain >= 0), and the total wall time. With
several seeds (each seed draws new populations, simulations, held-out sets and initialisations) it
also writes a summary: per protocol the mean and sd over seeds of the mean recovery, the paired
difference to local-only with a one-sided paired t-test, and per institution the mean and sd of
the gain, so that "beats local-only" and "no negative gain" are judged against measured noise.
The summary is written twice: for recovery on held-out simulations over the full parameter range
(the headline) and on held-out simulations under each institution's own prior (its own range).
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np
import yaml
from scipy import stats

from abm.private_calibration.report import markdown, run_private_calibration

ROOT = Path(__file__).resolve().parents[1]
NOT_COLLABORATIVE = ("local", "centralized", "mapl_local")
"""Entries that are not collaborations: the baseline, the pooled upper bound and MAPL's W = I control."""


def shown_path(path: Path) -> str:
    """``path`` relative to the repository when it lies inside it (as the command was given from
    there), else in full."""
    full = path.resolve()
    return str(full.relative_to(ROOT)) if full.is_relative_to(ROOT) else str(full)


def checks(report: dict) -> list[str]:
    """The issue's claims, evaluated on one report."""
    prots = report["protocols"]
    local = prots["local"]["mean_recovery"]
    lines = []
    for key, r in prots.items():
        if key in NOT_COLLABORATIVE:
            continue
        ok = r["mean_recovery"] > local
        lines.append(
            f"- {key}: mean recovery {r['mean_recovery']:.3f} vs local-only {local:.3f}: "
            f"{'above' if ok else 'NOT above'} local-only on this seed (the summary's paired test over seeds "
            f"decides 'beats'); min gain {r['min_gain']:+.3f}"
        )
    if "cycle" in prots:
        g = prots["cycle"]["min_gain"]
        lines.append(f"- CYCle: {'no' if g >= 0 else 'an'} institution with a negative gain (min gain {g:+.3f})")
        g = prots["cycle"].get("min_gain_own", float("nan"))
        if not np.isnan(g):
            lines.append(
                f"- CYCle, own prior: {'no' if g >= 0 else 'an'} institution with a negative gain (min gain {g:+.3f})"
            )
    return lines


def summary(reports: list[dict], own: bool = False) -> list[str]:
    """Mean and sd over seeds; paired comparisons with local-only judged against the seed-to-seed noise.

    ``own``: recovery on held-out simulations under each institution's own prior instead of over
    the full parameter range.
    """
    n = len(reports)
    keys = list(reports[0]["protocols"])
    names = [i["name"] for i in reports[0]["institutions"]]
    t_crit = float(stats.t.ppf(0.95, n - 1)) if n > 1 else float("nan")
    sfx = "_own" if own else ""
    rec = {k: np.array([r["protocols"][k]["mean_recovery" + sfx] for r in reports]) for k in keys}
    where = (
        "held-out simulations under each institution's own prior (its own range)"
        if own
        else "held-out simulations over the full parameter range"
    )
    lines = [
        f"## Summary over {n} seeds: recovery on {where}",
        "",
        f"Mean +- sd over seeds. Difference: paired (same seed) mean recovery minus local-only's; t: paired "
        f"t statistic; 'beats local-only' when t > {t_crit:.2f} (one-sided 5%, {n - 1} degrees of freedom). "
        "Gains per institution: mean +- sd over seeds; 'negative beyond noise' when mean + t_crit sd / sqrt(n) < 0.",
        "",
        "| protocol | mean recovery | difference to local-only | t | beats local-only | seeds above local | "
        + " | ".join(f"gain {x}" for x in names)
        + " | institutions negative beyond noise |",
        "|---|---:|---:|---:|---|---:|" + "---:|" * len(names) + "---|",
    ]
    verdicts = []
    for k in keys:
        d = rec[k] - rec["local"]
        sd = float(d.std(ddof=1)) if n > 1 else float("nan")
        t = float(d.mean() / (sd / np.sqrt(n))) if n > 1 and sd > 0 else float("nan")
        beats = k != "local" and n > 1 and t > t_crit
        g = np.array([[row["gain" + sfx] for row in r["protocols"][k]["institutions"]] for r in reports])
        gm, gs = g.mean(0), g.std(0, ddof=1) if n > 1 else np.zeros(g.shape[1])
        neg = [names[i] for i in range(len(names)) if n > 1 and gm[i] + t_crit * gs[i] / np.sqrt(n) < 0]
        gains = " | ".join(f"{gm[i]:+.3f} +- {gs[i]:.3f}" for i in range(len(names)))
        negs = ", ".join(neg) or "none"
        lines.append(
            f"| {k} | {rec[k].mean():.3f} +- {rec[k].std(ddof=1) if n > 1 else 0:.3f} | {d.mean():+.3f} +- {sd:.3f} "
            f"| {t:.1f} | {'yes' if beats else 'no'} | {int((d > 0).sum())}/{n} | {gains} | {negs} |"
        )
        if k not in NOT_COLLABORATIVE:
            verdicts.append(
                f"- {k}: {'beats' if beats else 'does NOT beat'} local-only beyond noise "
                f"(difference {d.mean():+.3f} +- {sd:.3f}, t {t:.1f}); institutions with a gain negative beyond "
                f"noise: {negs}"
            )
    return [*lines, "", f"Checks over seeds ({where}):", "", *verdicts, ""]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", type=Path, default=ROOT / "scenarios/learning/private_calibration.yaml")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--results", type=Path, default=ROOT / "benchmarks/private_calibration_results.md")
    ap.add_argument("--out", type=Path, default=ROOT / "runs/pc_bench")
    ap.add_argument("--budget", type=int, help="every institution's simulation budget (default: the scenario's)")
    ap.add_argument("--protocols", help="a YAML list of protocol entries replacing the scenario's")
    args = ap.parse_args()
    args.scenario = args.scenario.resolve()
    base = yaml.safe_load(args.scenario.read_text(encoding="utf-8"))
    base["model"]["scenario"] = str((args.scenario.parent / base["model"]["scenario"]).resolve())
    variant = ""
    if args.budget is not None:
        base["institutions"] = [dict(inst, budget=args.budget) for inst in base["institutions"]]
        variant += f" --budget {args.budget}"
    if args.protocols is not None:
        base["protocols"] = yaml.safe_load(args.protocols)
        variant += f" --protocols '{args.protocols}'"
    lines = [
        "# Private calibration results",
        "",
        f"Command: `python benchmarks/private_calibration.py --scenario {shown_path(args.scenario)} "
        f"--seeds {' '.join(map(str, args.seeds))}{variant}`. Date: {time.strftime('%Y-%m-%d')}. "
        f"Machine: {os.cpu_count()}-core CPU ({platform.machine()}, Python {platform.python_version()}), "
        f"torch CPU, 1 thread; load average {os.getloadavg()[0]:.1f} at the start.",
        "",
    ]
    reports = []
    per_seed: list[str] = []
    for seed in args.seeds:
        start = time.perf_counter()
        report = run_private_calibration(dict(base, seed=seed), args.out / f"seed{seed}")
        wall = time.perf_counter() - start
        reports.append(report)
        t = report["timings_s"]
        per_seed += [
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
        print("\n".join(per_seed[-12:]), flush=True)
    if len(reports) > 1:
        lines += summary(reports)
        if not np.isnan(reports[0]["protocols"]["local"].get("mean_recovery_own", float("nan"))):
            lines += summary(reports, own=True)
        print("\n".join(lines[4:]), flush=True)
    args.results.write_text("\n".join(lines + per_seed) + "\n", encoding="utf-8")
    print(f"results: {args.results}")


if __name__ == "__main__":
    main()
