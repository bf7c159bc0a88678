"""Peak resident memory of `abm calibrate --workers K` and of each of its worker processes.

    python benchmarks/worker_memory.py [--trials 80] [--workers 2] [--set key.path=value ...]

Runs `abm calibrate scenarios/king_county/calibrate_2020.yaml` (100,000 agents, the scenario's
re-ranking) in a child process, reads the resident memory (VmRSS) of the command and of every
process under it from /proc every 0.5 s, and prints each process's peak, the wall time and the
number of trials. Linux only (it reads /proc).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def children(pid: int) -> list[int]:
    """The processes under ``pid`` (all generations)."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                kids = [int(k) for k in (task / "children").read_text(encoding="utf-8").split()]
            except OSError:
                continue
            found += kids
            todo += kids
    return found


def resident_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=80)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--set", dest="sets", action="append", default=[])
    args = ap.parse_args()
    scratch = tempfile.TemporaryDirectory()  # the calibration's output, removed at exit
    out = Path(scratch.name) / "calibration"
    command = [sys.executable, "-m", "abm", "calibrate", str(ROOT / "scenarios/king_county/calibrate_2020.yaml")]
    command += ["--trials", str(args.trials), "--workers", str(args.workers), "--out", str(out)]
    for s in args.sets:
        command += ["--set", s]
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peaks: dict[int, float] = {}
    while child.poll() is None:
        for pid in [child.pid, *children(child.pid)]:
            mb = resident_mb(pid)
            if mb is not None:
                peaks[pid] = max(peaks.get(pid, 0.0), mb)
        time.sleep(0.5)
    wall = time.perf_counter() - start
    if child.returncode != 0:
        raise SystemExit(f"abm calibrate ended with exit code {child.returncode}")
    print(f"{args.trials} trials, --workers {args.workers}: {wall:.1f} s")
    print(f"command: peak {peaks.pop(child.pid):,.0f} MB")
    for pid, mb in sorted(peaks.items(), key=lambda kv: -kv[1]):
        print(f"process {pid}: peak {mb:,.0f} MB")


if __name__ == "__main__":
    main()
