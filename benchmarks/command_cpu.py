"""CPU seconds (user + system, the command's process and its children) of one `abm` command run
in each of several source trees, the trees alternated run by run; medians per tree.

    python benchmarks/command_cpu.py --trees /tmp/before . --runs 5 -- validate scenarios/learning/digits_codream.yaml

Each run is ``python -m abm ARGS`` in the tree's folder with ``PYTHONPATH`` set to it, so a
checkout of another commit (``git worktree add /tmp/before COMMIT``) is compared with this one
in the same conditions."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys


def cpu_seconds(tree: str, args: list[str]) -> float:
    """CPU seconds of ``python -m abm ARGS`` run in ``tree``."""
    before = os.times()
    env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
    subprocess.run([sys.executable, "-m", "abm", *args], cwd=tree, env=env, check=True, capture_output=True)
    after = os.times()
    return (after.children_user + after.children_system) - (before.children_user + before.children_system)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", nargs="+", required=True, help="source trees to compare (the first: the reference)")
    parser.add_argument("--runs", type=int, default=5, help="runs per tree (default 5)")
    parser.add_argument("args", nargs="+", help="the abm command and its arguments, after --")
    opts = parser.parse_args()
    times: dict[str, list[float]] = {tree: [] for tree in opts.trees}
    for _ in range(opts.runs):
        for tree in opts.trees:
            times[tree].append(cpu_seconds(tree, opts.args))
    first = statistics.median(times[opts.trees[0]])
    for tree in opts.trees:
        median = statistics.median(times[tree])
        runs = ", ".join(f"{t:.2f}" for t in times[tree])
        print(f"{tree}: median {median:.2f} s (runs {runs}); x{median / first:.2f} of the first")


if __name__ == "__main__":
    main()
