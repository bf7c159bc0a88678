"""The run's plots: CPU time to write them, and whether two trees draw the same figures.

    python benchmarks/plot_writing.py --tree OLD --tree NEW [--repeats 7] [--folder RUN ...]

Each tree (a checkout of abm, put first on PYTHONPATH) writes, in a fresh process of its own, the
7 plots of ``abm run`` (``abm.outputs.plots.write_plots``) for every case: hand-built runs (one
or eleven runs of 5 to 180 days, bands that fill the axes so that the legend has to go beside
them, a dated run, a one-day run, 25 runs) and each run folder given (``abm run`` output, alone
and as three runs compared). The process writes every case once to warm up (fonts, imports), then
``--repeats`` times, timing each write with ``time.process_time`` (CPU seconds of that process
alone: the shared machine's load counts less than in wall time). The trees alternate, repeat by
repeat. Then the first repeat's PNGs of each tree are compared with the first tree's, byte for
byte, and the legends' boxes in pixels (each axes' legend and the figure's, after drawing).

Prints the median CPU seconds per case and tree, the median ratio to the first tree, and what
differs.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WORKER = r'''
import json, sys, time
from pathlib import Path
import numpy as np
import pandas as pd
from abm.outputs import plots

def hand_run(label, days=5, replicates=2, spread=False, start=None):
    """A run of 1,000 agents: every count day + replicate, or (spread) 0 and 900 by replicate."""
    day = np.tile(np.arange(days), replicates)
    rep = np.repeat(np.arange(replicates), days)
    value = np.where(rep == 1, 900.0, 0.0) if spread else (day + rep).astype(float)
    ts = pd.DataFrame({"day": day, "replicate": rep, "hospital_occupancy": value, "icu": value / 2,
                       "new_infections": value, "cumulative_infected": value, "secondary_infections": value,
                       "reproduction_number": np.where(value > 0, 1.0, np.nan)})
    by_age = pd.concat([ts.assign(age_group=g, agents=100)[["day", "replicate", "age_group", "agents",
                        "cumulative_infected"]] for g in plots.AGE_GROUP_LABELS])
    costs = pd.DataFrame({"item": [], "day": [], "replicate": [], "count": [], "unit_cost": []})
    summary = {"scenario": label, "agents": 1000, "days": days, "replicates": replicates,
               "hospital_capacity": {"beds_per_100k": 55.0}, "icu_capacity": {"beds_per_100k": 6.1}}
    if start:
        summary["start_date"] = start
    return plots.RunTables(label, ts, by_age, costs, summary)

cases = {
    "5 days": [hand_run("ni")],
    "180 days": [hand_run("ni", days=180)],
    "180 days, dated": [hand_run("ni", days=180, start="2020-03-01")],
    "one day": [hand_run("ni", days=1)],
    "11 runs filling the axes": [hand_run(f"run {k}", days=30, spread=True) for k in range(11)],
    "3 runs filling the axes": [hand_run(f"run {k}", days=30, spread=True) for k in range(3)],
    "3 mixed runs": [hand_run("a", days=60), hand_run("b", days=60, spread=True),
                     hand_run("c", days=60, replicates=1, start="2020-03-01")],
    "25 runs": [hand_run(f"r{k}", days=40, replicates=1 + k % 3) for k in range(25)],
}
out, repeats, folders = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
for folder in folders:
    name = Path(folder).name
    cases[f"run folder {name}"] = [plots.RunTables.from_folder(folder)]
    cases[f"run folder {name}, 3 runs"] = [plots.RunTables.from_folder(folder, label=f"run {k}") for k in range(3)]
seconds, boxes = {}, {}
for k in range(repeats + 1):  # the first: warm-up, and the PNGs compared
    for i, (case, runs) in enumerate(cases.items()):
        folder = out / (f"case{i}" if k == 0 else "scratch")
        start = time.process_time()
        plots.write_plots(runs, folder)
        if k:
            seconds.setdefault(case, []).append(time.process_time() - start)
for i, (case, runs) in enumerate(cases.items()):
    for key, make in plots.FIGURES.items():
        fig = make(runs, pyplot=False)
        fig.draw_without_rendering()
        legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
        boxes[f"case{i}/{key}"] = [[round(v, 3) for v in leg.get_window_extent().bounds] for leg in legends]
print(json.dumps({"seconds": seconds, "boxes": boxes, "cases": list(cases)}))
'''


def measure(tree: Path, out: Path, repeats: int, folders: list[str]) -> dict:
    """One worker process in ``tree``: its CPU seconds per case, legend boxes and PNGs in ``out``."""
    env = {**os.environ, "PYTHONPATH": str(tree), "MPLBACKEND": "Agg"}
    done = subprocess.run(
        [sys.executable, "-c", WORKER, str(out), str(repeats), *folders],
        cwd=tree, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", type=Path, action="append", required=True, help="a checkout of abm (repeatable)")
    ap.add_argument("--repeats", type=int, default=7, help="rounds of the trees in turn")
    ap.add_argument("--folder", action="append", default=[], help="an `abm run` output folder (repeatable)")
    args = ap.parse_args()
    trees = [t.resolve() for t in args.tree]
    folders = [str(Path(f).resolve()) for f in args.folder]
    work = Path(tempfile.mkdtemp(prefix="abm-plot-writing-"))
    seconds: dict[tuple[int, str], list[float]] = {}
    firsts: dict[int, dict] = {}
    for k in range(args.repeats):
        for i, tree in enumerate(trees):
            got = measure(tree, work / f"tree{i}-{k}", 1, folders)
            firsts.setdefault(i, got)
            for case, values in got["seconds"].items():
                seconds.setdefault((i, case), []).extend(values)
        print(f"# round {k + 1} of {args.repeats} done", file=sys.stderr, flush=True)
    cases = firsts[0]["cases"]
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, Python "
        f"{platform.python_version()}; {args.repeats} rounds, medians of CPU seconds to write the 7 plots"
    )
    print()
    ratios = [f"{t} / first" for t in trees[1:]]
    print("| case | " + " | ".join([*(str(t) for t in trees), *ratios]) + " |")
    print("|---|" + "---:|" * (2 * len(trees) - 1))
    for case in [*cases, "all cases"]:
        if case == "all cases":
            rows = [[sum(v) for v in zip(*(seconds[i, c] for c in cases), strict=True)] for i in range(len(trees))]
        else:
            rows = [seconds[i, case] for i in range(len(trees))]
        cells = [f"{statistics.median(r):.3f}" for r in rows]
        cells += [f"{statistics.median(b / a for a, b in zip(rows[0], r, strict=True)):.2f}" for r in rows[1:]]
        print(f"| {case} | " + " | ".join(cells) + " |")
    for i in range(1, len(trees)):
        a, b = work / "tree0-0", work / f"tree{i}-0"
        pngs = sorted(p.relative_to(a) for p in a.rglob("case*/*.png"))
        differ = [str(p) for p in pngs if not filecmp.cmp(a / p, b / p, shallow=False)]
        moved = [name for name, box in firsts[0]["boxes"].items() if firsts[i]["boxes"].get(name) != box]
        print(
            f"\n{trees[i]} against {trees[0]}: {len(pngs)} PNGs, {len(differ)} differ"
            + (f" ({', '.join(differ)})" if differ else "")
            + f"; {len(firsts[0]['boxes'])} figures' legend boxes, {len(moved)} differ"
            + (f" ({', '.join(moved)})" if moved else "")
        )


if __name__ == "__main__":
    main()
