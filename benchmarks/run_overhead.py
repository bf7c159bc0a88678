"""The whole `abm` command as a user runs it: fresh processes, from start to exit.

    python benchmarks/run_overhead.py [--repeats 5] [--tree DIR ...] [--skip-10] [--size AGENTSxREPLICATES ...]

Each tree (a checkout of abm, put first on PYTHONPATH; default: this one) runs, ``--repeats``
times and alternating between trees so that all of them see the same load on the machine:

- ``abm --version`` and ``abm validate scenarios/king_county/no_intervention.yaml``;
- ``abm run scenarios/king_county/no_intervention.yaml`` with 1 and 10 (the scenario's)
  replicates (``--size``, repeatable: other agents and replicates, ``20000x2``), into a fresh
  folder, with the process's CPU seconds (user and system, less noisy than the wall time on a
  shared machine) and a breakdown from the run's ``manifest.json`` timings:
  population, engine setup, day loop, tables and summary, writing the tables (resolved scenario,
  CSV, Parquet, summary), plots, map, map snapshots, the exit (from the last line printed to the
  process's end); start-up is what remains of the wall time (interpreter, imports, checks, and
  printing the summary).

With two trees or more, the last runs' folders are compared with the first tree's: every file but
``manifest.json`` must be byte-identical (a PNG whose bytes differ is compared pixel by pixel).
Prints a Markdown table of medians for BENCHMARKS.md, with each tree's median ratio to the first
tree's (the ratios of the runs of one repeat, which ran back to back).
"""

from __future__ import annotations

import argparse
import datetime as dt
import filecmp
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = "scenarios/king_county/no_intervention.yaml"
PHASES = {  # breakdown row: manifest timing
    "population": "population_seconds",
    "engine setup": "setup_seconds",
    "day loop": "engine_seconds",
    "tables and summary": "tables_seconds",
    "plots": "plots_seconds",
    "map": "map_seconds",
    "map snapshots": "map_snapshots_seconds",
}


def child_cpu() -> float:
    """CPU seconds (user and system) of this process's ended children so far."""
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def timed(tree: Path, args: list[str]) -> tuple[float, float, float]:
    """Seconds that ``python -m abm ARGS`` takes with ``tree`` first on PYTHONPATH (run in ``tree``),
    of those the seconds from its last line of output to its end (the exit), and its CPU seconds."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, "-m", "abm", *args]
    cpu = child_cpu()
    start = time.perf_counter()
    with subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as proc:
        last = start
        for _ in proc.stdout:  # type: ignore[union-attr]
            last = time.perf_counter()
    end = time.perf_counter()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} in {tree} failed with exit code {proc.returncode}")
    return end - start, end - last, child_cpu() - cpu


def whole_run(tree: Path, agents: int | None, replicates: int, out: Path) -> dict[str, float]:
    """One `abm run` of ``agents`` (None: the scenario's) into ``out`` (written fresh): its wall
    time, CPU time and the manifest's breakdown."""
    shutil.rmtree(out, ignore_errors=True)
    size = [] if agents is None else ["--agents", str(agents)]
    args = ["run", SCENARIO, *size, "--replicates", str(replicates), "--out", str(out)]
    wall, exit_seconds, cpu = timed(tree, args)
    t = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["timings"]
    row = {"total": wall, "CPU (user + system)": cpu, **{name: t[key] for name, key in PHASES.items()}}
    figures = t["plots_seconds"] + t["map_seconds"] + t["map_snapshots_seconds"]
    row["writing tables"] = t["output_seconds"] - figures
    row["output (tables, plots, maps)"] = t["output_seconds"]
    row["outside the day loop"] = wall - t["engine_seconds"]
    row["exit (after the last line printed)"] = exit_seconds
    run_seconds = sum(t[k] for k in ("population_seconds", "setup_seconds", "engine_seconds", "tables_seconds"))
    row["start-up (the rest)"] = wall - run_seconds - t["output_seconds"] - exit_seconds
    return row


def same_outputs(a: Path, b: Path) -> list[str]:
    """Files of run folder ``b`` that differ from ``a`` (manifest.json and its checksum in the
    mark aside; PNGs by pixels)."""
    names = sorted(
        {p.relative_to(a) for p in a.rglob("*") if p.is_file()}
        | {p.relative_to(b) for p in b.rglob("*") if p.is_file()}
    )
    differ = []
    for name in names:
        if name.name == "manifest.json":
            continue
        fa, fb = a / name, b / name
        if not (fa.is_file() and fb.is_file()):
            differ.append(f"{name} (only in one)")
        elif name.name == ".abm-output":  # the mark: the files' checksums, manifest.json's aside
            if mark_lines(fa) != mark_lines(fb):
                differ.append(str(name))
        elif not filecmp.cmp(fa, fb, shallow=False) and not (name.suffix == ".png" and same_pixels(fa, fb)):
            differ.append(str(name))
    return differ


def mark_lines(path: Path) -> list[str]:
    """An output folder's mark (``.abm-output``) but its line of manifest.json's checksum."""
    return [line for line in path.read_text(encoding="utf-8").splitlines() if not line.endswith(" manifest.json")]


def same_pixels(a: Path, b: Path) -> bool:
    """Whether two PNG files hold the same image."""
    from PIL import Image

    with Image.open(a) as ia, Image.open(b) as ib:
        return ia.size == ib.size and ia.mode == ib.mode and ia.tobytes() == ib.tobytes()


def run_size(text: str) -> tuple[int | None, int]:
    """``--size``'s value, ``AGENTSxREPLICATES`` (``20000x2``; ``x10``: the scenario's agents)."""
    match = re.fullmatch(r"(\d*)x(\d+)", text)
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r}: give AGENTSxREPLICATES, such as 20000x2 or x10")
    return (int(match[1]) if match[1] else None), int(match[2])


def size_text(agents: int | None, replicates: int) -> str:
    """How a table names a run size."""
    return f"{replicates} replicate(s)" if agents is None else f"{agents:,} agents x {replicates}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--tree", type=Path, action="append", help="a checkout of abm (repeatable; default: this one)")
    ap.add_argument("--skip-10", action="store_true", help="leave out the run of 10 replicates")
    ap.add_argument("--size", type=run_size, action="append", help="AGENTSxREPLICATES of a run (repeatable)")
    ap.add_argument("--runs-only", action="store_true", help="leave out abm --version and abm validate")
    args = ap.parse_args()
    trees = [t.resolve() for t in args.tree or [ROOT]]
    sizes = args.size or ([(None, 1)] if args.skip_10 else [(None, 1), (None, 10)])
    work = Path(tempfile.mkdtemp(prefix="abm-run-overhead-"))
    times: dict[tuple[int, str], list[float]] = {}
    try:
        for k in range(args.repeats):
            for i, tree in enumerate(trees):
                if not args.runs_only:
                    times.setdefault((i, "abm --version"), []).append(timed(tree, ["--version"])[0])
                    times.setdefault((i, "abm validate"), []).append(timed(tree, ["validate", SCENARIO])[0])
                for j, (agents, r) in enumerate(sizes):
                    for name, value in whole_run(tree, agents, r, work / f"tree{i}-s{j}").items():
                        times.setdefault((i, f"abm run, {size_text(agents, r)}: {name}"), []).append(value)
            print(f"# repeat {k + 1} of {args.repeats} done", file=sys.stderr, flush=True)
        differ = {
            (i, size_text(*size)): same_outputs(work / f"tree0-s{j}", work / f"tree{i}-s{j}")
            for i in range(1, len(trees))
            for j, size in enumerate(sizes)
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"{dt.date.today()}; machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, "
        f"Python {platform.python_version()}; {args.repeats} runs of each, medians in seconds"
    )
    print()
    ratios = [f"{t} / first" for t in trees[1:]]
    print("| measure | " + " | ".join([*(str(t) for t in trees), *ratios]) + " |")
    print("|---|" + "---:|" * (2 * len(trees) - 1))
    for measure in dict.fromkeys(m for _, m in times):
        cells = [f"{statistics.median(times[i, measure]):.2f}" for i in range(len(trees))]
        first = times[0, measure]
        for i in range(1, len(trees)):
            pairs = [b / a for a, b in zip(first, times[i, measure], strict=True) if a > 0]
            cells.append(f"{statistics.median(pairs):.2f}" if pairs else "")
        print(f"| {measure} | " + " | ".join(cells) + " |")
    for (i, size), names in differ.items():
        verdict = "identical outputs" if not names else f"DIFFERENT: {', '.join(names)}"
        print(f"\n{trees[i]} against {trees[0]}, {size}: {verdict} (manifest.json aside)")


if __name__ == "__main__":
    main()
