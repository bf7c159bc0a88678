"""Learning-protocol benchmarks: run every scenario in scenarios/learning for several seeds and
write benchmarks/learning_results.md.

    python benchmarks/learning_benchmarks.py [--seeds 0 1 2] [--out runs/learning_bench]
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np
import yaml

from abm.learning import run_scenario

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "scenarios" / "learning"


def _fmt(x: float | None, pct: bool = True) -> str:
    if x is None:
        return "-"
    return f"{100 * x:.1f}" if pct else f"{x:.2f}"


def protocol_table(reports: list[dict]) -> list[str]:
    """Mean over seeds (and range) per protocol."""
    keys = list(reports[0]["protocols"])
    lines = [
        "| protocol | mean acc % | MCG (pts) | CGS (pts) | min gain (pts) | "
        "participants with gain < 0 | MB sent | time s | epsilon |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for k in keys:
        rs = [r["protocols"][k] for r in reports]
        mean = [r["mean_score"] for r in rs]
        neg = [sum(p["gain"] < 0 for p in r["participants"]) for r in rs]
        eps = rs[0]["epsilon"]
        lines.append(
            f"| {k} | {_fmt(np.mean(mean))} ({_fmt(min(mean))}-{_fmt(max(mean))}) "
            f"| {_fmt(np.mean([r['mcg'] for r in rs]))} | {_fmt(np.mean([r['cgs'] for r in rs]))} "
            f"| {_fmt(min(r['min_gain'] for r in rs))} | {'/'.join(map(str, neg))} "
            f"| {np.mean([r['bytes_total'] for r in rs]) / 1e6:.2f} "
            f"| {np.mean([r['wall_time_s'] for r in rs]):.1f} "
            f"| {'-' if eps is None else f'{eps:.1f}'} |"
        )
    return lines


def extras(reports: list[dict]) -> list[str]:
    """Graph, reputation, selection and toy-simulation figures."""
    out = []
    for seed_i, r in enumerate(reports):
        for k, p in r["protocols"].items():
            s = p["summary"]
            if "within_cluster_mass" in s:
                edges = s["active_edges"][-1] if s["active_edges"] else None
                out.append(
                    f"- seed {r['seed']}: {k}: within-cluster mass of the learned graph "
                    f"{s['within_cluster_mass']:.2f}, active edges {edges}"
                )
            if "reputation" in s:
                rep = np.array(s["reputation"], dtype=float)
                n = len(rep)
                at_peers = [float(np.mean([rep[i, k] for i in range(n) if i != k])) for k in range(n)]
                out.append(
                    f"- seed {r['seed']}: {k}: mean reputation of each participant at its peers "
                    f"{[round(v, 2) for v in at_peers]}"
                )
            if "within_group_rate" in s:
                out.append(
                    f"- seed {r['seed']}: {k}: within-domain picks {s['within_group_rate']:.2f}, "
                    f"distinct partners (last 10 rounds) {s['distinct_partners_last10']}, "
                    f"collapse warning {s['collapse']}"
                    + (f", clusters {s['clusters']}" if "clusters" in s else "")
                    + (
                        ", cluster purity {purity:.2f}, inverse purity {inverse_purity:.2f}, ARI {ari:.2f}".format(
                            **s["cluster_recovery"]
                        )
                        if "cluster_recovery" in s
                        else ""
                    )
                )
        toy = r.get("selection_toy")
        if toy and seed_i == 0:
            out.append("")
            out.append("2-D selection simulation (39 users, 3 domains, 40 rounds, seed 0):")
            out.append("")
            out.append(
                "| policy | within-domain picks (last 10) | distinct partners | SCC cliques "
                "| collapse | cluster purity / inverse purity / ARI vs domains | distance to own optimum |"
            )
            out.append("|---|---|---|---|---|---|---|")
            for name, t in toy.items():
                out.append(
                    f"| {name} | {t['within_domain_rate_last10']:.2f} "
                    f"| {t['mean_distinct_partners_last10']:.1f} | {t['cliques_last10']} "
                    f"| {t['collapse']} | {_recovery(t)} "
                    f"| {t['mean_distance_to_optimum']:.2f} |"
                )
    return out


def _recovery(summary: dict) -> str:
    r = summary.get("cluster_recovery")
    return "-" if r is None else f"{r['purity']:.2f} / {r['inverse_purity']:.2f} / {r['ari']:.2f}"


def speed_benchmark(participants: int = 20, rounds: int = 100, runner: str = "inprocess") -> dict:
    """FedAvg with ``participants`` small MLPs (one hidden layer of 32) on digits for ``rounds``
    rounds through ``runner`` (inprocess, flower-sim, flower); returns wall times in seconds."""
    import torch

    from abm.learning.runner import run_all
    from abm.learning.scenario import load_scenario

    torch.set_num_threads(1)
    sc = {
        "name": "speed",
        "seed": 0,
        "data": {"source": "digits"},
        "split": {"participants": participants},
        "models": [{"kind": "mlp", "hidden": [32]}],
        "rounds": rounds,
        "evaluate_on": "own",
        "protocols": [{"name": "fedavg"}],
        "runner": runner,
    }
    start = time.perf_counter()
    r = run_all(load_scenario(sc)[0])["protocols"]
    return {
        "total_s": time.perf_counter() - start,
        "fedavg_s": r["fedavg"]["wall_time_s"],
        "local_s": r["local"]["wall_time_s"],
        "fedavg_acc": r["fedavg"]["mean_score"],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "abm_learning_bench")
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "learning_results.md")
    ap.add_argument("--speed", action="store_true", help="only the 20 x 100 FedAvg timing")
    ap.add_argument("--runner", default="inprocess", help="runner for --speed: inprocess, flower-sim, flower")
    ap.add_argument("--rounds", type=int, default=100, help="rounds for --speed")
    ap.add_argument("--participants", type=int, default=20, help="participants for --speed")
    args = ap.parse_args()
    if args.speed:
        t = speed_benchmark(args.participants, args.rounds, args.runner)
        print(
            f"FedAvg ({args.runner}), {args.participants} participants x {args.rounds} rounds, digits, "
            f"MLP-32: {t['fedavg_s']:.1f} s "
            f"(local-only baseline {t['local_s']:.1f} s, whole run {t['total_s']:.1f} s); "
            f"accuracy {100 * t['fedavg_acc']:.1f} %"
        )
        return
    lines = [
        "# Learning benchmarks",
        "",
        "Command: `python benchmarks/learning_benchmarks.py --seeds "
        + " ".join(map(str, args.seeds))
        + (" --only " + " ".join(args.only) if args.only else "")
        + "`",
        "",
        f"Date: {date.today().isoformat()}. Machine: {os.cpu_count()}-core CPU ({platform.machine()}, "
        f"{platform.python_implementation()} {platform.python_version()}), torch CPU, 1 thread. "
        "Accuracies in percent; gains, MCG and CGS in percentage points against local-only "
        "(the standalone score B_n of each participant, same rounds and optimizer). "
        "Values are means over seeds with the range in brackets; 'participants with gain < 0' "
        "lists the count per seed.",
        "",
    ]
    for path in sorted(SCENARIOS.glob("*.yaml")):
        if args.only and path.stem not in args.only:
            continue
        base = yaml.safe_load(path.read_text(encoding="utf-8"))
        if base.get("kind") == "private_calibration":  # benchmarks/private_calibration.py runs these
            continue
        reports = []
        start = time.perf_counter()
        for seed in args.seeds:
            sc = dict(base, seed=seed)
            reports.append(run_scenario(sc, args.out / f"{path.stem}_seed{seed}"))
        elapsed = (time.perf_counter() - start) / len(args.seeds)
        lines += [
            f"## {path.stem}",
            "",
            f"{base.get('description', '')}. Scenario `scenarios/learning/{path.name}`; "
            f"{elapsed:.0f} s per seed (all protocols).",
            "",
            *protocol_table(reports),
            "",
            *extras(reports),
            "",
        ]
        print(f"{path.stem}: {elapsed:.0f} s per seed", flush=True)
        args.results.write_text("\n".join(lines) + "\n", encoding="utf-8")
    args.results.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
