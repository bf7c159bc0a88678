"""Private calibration: the noise floor of a per-institution gain, and CYCle's reputation thresholds.

    python benchmarks/private_calibration_noise.py [--seeds 0 1 2] [--reinits 2] [--tau-max 0.75 0.5]

Per seed, builds the default scenario's institutions once (the same data as
``benchmarks/private_calibration.py`` for that seed) and runs on them:

* local-only, and local-only again with ``--reinits`` other initialisations and batch orders
  (participant seeds from scenario seed + 1000 a): the "gain" of a re-run that exchanges nothing
  is the noise floor against which one institution's gain in one seed can be read;
* CYCle with each ``--tau-max`` (tau_opt 0.25): with the paper's 0.75 a peer whose distillation
  gradient is orthogonal to the own cross-entropy gradient (cos 0) keeps reputation 0.5; with 0.5
  the reputation is clip(2 cos, 0, 1), so an orthogonal or opposed peer gets 0 and the participant
  trains as local-only (tau_max is one of CYCle's two hyperparameters, cycle.md 2.5 and 5.8).

Prints per run the recovery per institution on the full-range and the own-prior held-out sets, the
gains against local-only, and a summary (sd and largest absolute value of the null gains; per
tau_max the mean gain and the smallest per-institution gain).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch
import yaml

from abm.private_calibration.federation import run_protocol
from abm.private_calibration.institutions import Institution, build_institutions
from abm.private_calibration.scenario import CalibrationProtocolSpec, PrivateCalibrationScenario, load_scenario

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", type=Path, default=ROOT / "scenarios/learning/private_calibration.yaml")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--reinits", type=int, default=2)
    ap.add_argument("--tau-max", type=float, nargs="+", default=[0.75, 0.5])
    args = ap.parse_args()
    torch.set_num_threads(1)
    base = yaml.safe_load(args.scenario.read_text(encoding="utf-8"))
    base["model"]["scenario"] = str((args.scenario.parent / base["model"]["scenario"]).resolve())
    null: dict[str, list[np.ndarray]] = {"full": [], "own": []}
    cyc: dict[float, dict[str, list[np.ndarray]]] = {t: {"full": [], "own": []} for t in args.tau_max}
    start = time.perf_counter()
    print("| seed | run | recovery (full range) | gain | recovery (own prior) | gain |")
    print("|---:|---|---|---|---|---|")
    for seed in args.seeds:
        scenario, b = load_scenario(dict(base, seed=seed))
        institutions, _ = build_institutions(scenario, b)

        local = _scores(scenario, institutions, {"name": "local"})
        runs = {}
        for a in range(1, args.reinits + 1):
            other = load_scenario(dict(base, seed=seed + 1000 * a))[0]  # same institutions, other init
            runs[f"local, init {a}"] = _scores(other, institutions, {"name": "local"})
        for t in args.tau_max:
            runs[f"cycle, tau_max {t}"] = _scores(scenario, institutions, {"name": "cycle", "params": {"tau_max": t}})
        for key, r in [("local", local), *runs.items()]:
            g = {m: r[m] - local[m] for m in ("full", "own")}
            print(
                f"| {seed} | {key} | {_fmt(r['full'])} | {_fmt(g['full'], True)} | {_fmt(r['own'])} "
                f"| {_fmt(g['own'], True)} |",
                flush=True,
            )
            for m in ("full", "own"):
                if key.startswith("local,"):
                    null[m].append(g[m])
                elif key.startswith("cycle"):
                    cyc[float(key.rsplit(" ", 1)[1])][m].append(g[m])
    print()
    for m, what in (("full", "full range"), ("own", "own prior")):
        z = np.array(null[m])
        print(
            f"- null gains ({what}; local-only re-runs, {z.size} institution-runs): sd {z.std(ddof=1):.3f}, "
            f"largest |gain| {np.abs(z).max():.3f}"
        )
        for t, d in cyc.items():
            g = np.array(d[m])  # [seeds, institutions]
            print(
                f"- CYCle tau_max {t} ({what}): mean gain {g.mean():+.3f}; per-institution gains averaged over "
                f"seeds {_fmt(g.mean(0), True)}; smallest single gain {g.min():+.3f}"
            )
    print(f"\nwall {time.perf_counter() - start:.0f} s")


def _scores(scenario: PrivateCalibrationScenario, institutions: list[Institution], spec: dict) -> dict[str, np.ndarray]:
    """Recovery per institution (full range, own prior) of one protocol run from fresh calibrators."""
    run = run_protocol(scenario, institutions, CalibrationProtocolSpec.model_validate(spec))
    return {
        "full": np.array([p.score() for p in run.participants]),
        "own": np.array([p.own_score() for p in run.participants]),
    }


def _fmt(v: np.ndarray, signed: bool = False) -> str:
    """Values of ``v`` with 3 decimals (signed for gains)."""
    return " ".join(f"{x:+.3f}" if signed else f"{x:.3f}" for x in v)


if __name__ == "__main__":
    main()
