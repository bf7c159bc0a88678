"""Seed-replicated comparisons for the learning claims (issue #7): one scenario, several seeds,
mean and sample SD per protocol, and paired differences against a reference protocol.

    python benchmarks/learning_claims.py scenarios/learning/gmm_codream_ablation.yaml --seeds 1 2 3 \
        --reference codream --json /tmp/cd.json

Each seed re-draws the data, the split and every initialisation; all protocols of one seed share
them, so the per-seed difference (protocol - reference) is a paired comparison. A difference is
called "beyond noise" when its mean is more than two standard errors from 0 (SE = SD of the
paired differences / sqrt(seeds)) and has the same sign on every seed.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
import yaml

from abm.learning.runner import run_all
from abm.learning.scenario import load_scenario


def run_seeds(path: Path, seeds: list[int], only: list[str] | None = None) -> list[dict]:
    """Run the scenario at ``path`` once per seed (optionally only the protocols labelled ``only``)."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    if only:
        raw["protocols"] = [p for p in raw["protocols"] if (p.get("label") or p["name"]) in only]
    reports = []
    for seed in seeds:
        t0 = time.perf_counter()
        scenario, _ = load_scenario({**raw, "seed": seed})
        rep = run_all(scenario)
        print(f"seed {seed}: {time.perf_counter() - t0:.0f} s", flush=True)
        reports.append(rep)
    return reports


def summarise(reports: list[dict], reference: str | None) -> list[str]:
    """Markdown table: per protocol mean / SD over seeds, per-seed values, paired difference to the reference."""
    keys = list(reports[0]["protocols"])
    acc = {k: np.array([100 * r["protocols"][k]["mean_score"] for r in reports]) for k in keys}
    minp = {
        k: [min(100 * p["collaborative"] for p in r["protocols"][k]["participants"]) for r in reports] for k in keys
    }
    neg = {k: [sum(p["gain"] < 0 for p in r["protocols"][k]["participants"]) for r in reports] for k in keys}
    lines = [
        f"| protocol | mean acc % | SD | per seed | diff to {reference or '-'} (pts, mean +- SE) | verdict "
        "| worst participant % | participants below local |",
        "|---|---|---|---|---|---|---|---|",
    ]
    n = len(reports)
    for k in keys:
        a = acc[k]
        sd = float(a.std(ddof=1)) if n > 1 else 0.0
        diff, verdict = "-", "-"
        if reference is not None and k != reference and reference in acc:
            d = a - acc[reference]
            se = float(d.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
            diff = f"{d.mean():+.1f} +- {se:.1f}"
            same_sign = bool((d < 0).all() or (d > 0).all())
            if abs(d.mean()) > 2 * se and same_sign:
                verdict = "lower" if d.mean() < 0 else "higher"
            else:
                verdict = "within noise"
        lines.append(
            f"| {k} | {a.mean():.1f} | {sd:.1f} | {' / '.join(f'{v:.1f}' for v in a)} | {diff} | {verdict} "
            f"| {np.mean(minp[k]):.1f} | {'/'.join(map(str, neg[k]))} |"
        )
    return lines


def main() -> None:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenario", type=Path)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--reference", default=None, help="protocol label the others are compared with")
    ap.add_argument("--only", nargs="+", default=None, help="run only these protocol labels (local always runs)")
    ap.add_argument("--json", type=Path, default=None, help="also write the per-seed reports here")
    args = ap.parse_args()
    torch.set_num_threads(1)
    reports = run_seeds(args.scenario, args.seeds, args.only)
    if args.json:
        args.json.write_text(json.dumps(reports, indent=1), encoding="utf-8")
    print("\n".join(summarise(reports, args.reference)))
    for k in reports[0]["protocols"]:
        s = [r["protocols"][k]["summary"] for r in reports]
        if "within_cluster_mass" in s[0]:
            print(f"- {k}: within-cluster mass per seed {[round(x['within_cluster_mass'], 2) for x in s]}")
        print(f"- {k}: wall time per seed {[round(r['protocols'][k]['wall_time_s'], 1) for r in reports]} s")


if __name__ == "__main__":
    main()
