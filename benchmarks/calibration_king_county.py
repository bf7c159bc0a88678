"""Calibrate the King County model to 2020 (scenarios/king_county/calibrate_2020.yaml) and print
the fit and held-out losses for BENCHMARKS.md.

    python benchmarks/calibration_king_county.py [--trials 40] [--out runs/calibrate_2020-calibration]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from abm.calibration.optimize import calibrate

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=None)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    t = time.perf_counter()
    summary = calibrate(ROOT / "scenarios/king_county/calibrate_2020.yaml", args.out, trials=args.trials)
    print(json.dumps(summary, indent=1))
    print(f"wall time: {time.perf_counter() - t:.0f} s")


if __name__ == "__main__":
    main()
