"""The engine on a GPU: does every scenario run with ``device: cuda``, is a CUDA run
reproducible, does it agree with the CPU in distribution, and how fast is it.

    python benchmarks/gpu.py [--out DIR] [--budget SECONDS]
                             [--parts smoke,calibrate,memory,determinism,agreement,timing,profile]

Parts, in this order (each is skipped once the budget is spent; results so far are written to
DIR/gpu_check.json after every step, so a run cut short still reports):

- smoke: every King County run scenario and every reference scenario at 20,000 agents, 70 days,
  2 replicates on cuda (the interventions' code paths), and one ``abm run --device cuda`` whose
  output folder is listed;
- calibrate: ``abm calibrate --method gradient`` (2 steps) and ``--method optuna`` (2 trials) with
  ``simulation.device=cuda``;
- memory: ``abm run`` of 1,000,000 agents with more replicates than the GPU's memory holds must end
  with one message and exit code 2, writing nothing: once beyond the least memory a run takes
  (refused up front), and once with 10 replicates in a process whose share of the GPU is capped at
  2 GB (``torch.cuda.set_per_process_memory_fraction``), so that a run the check lets through runs
  out of memory for real within seconds;
- determinism: the same CUDA run twice (no intervention and vacc_ct, 100,000 agents, 2 replicates,
  180 days), compared array for array;
- agreement: no intervention and vacc_ct (testing, vaccination, both tracings), 100,000 agents,
  10 replicates, 180 days, on the CPU and on CUDA (different random streams, so they agree in
  distribution only): final size, peak of the mean hospitalized curve and its day, with the z
  score of the final-size difference; and the reference ct_app70 as it is (a full epidemic under
  tracing; its own rate, 1 CPU thread as the scenario says), with its engine seconds and cost;
- timing: engine seconds (day loop only, after a warm-up run) on cuda from 100,000 agents to the
  whole county (2.25M), 1 and 10 replicates, with peak GPU memory; and the CPU on the same
  machine (1 thread and all cores) for the ratio.
- profile: vacc_ct at 100,000 agents x 10 replicates for 180 days under torch.profiler (the
  operations with the most self CPU time and the most calls; DIR/profile_vacc_ct.txt); about 3
  minutes on an H200, the profiler's own cost (the run takes 4 s without it).

The runs use the transmission rate 4.567 (as benchmarks/engine.py), a full epidemic.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from abm.engine import Simulation  # noqa: E402
from abm.engine.disease import Stage  # noqa: E402
from abm.populations import build_population, load_region  # noqa: E402
from abm.runs import resolve  # noqa: E402

KC = ROOT / "scenarios/king_county"
REF = ROOT / "scenarios/reference"
RATE = 4.567
DEVICE = "cuda"  # --device cpu: a dry run of the script on a machine without a GPU
PARTS = ("smoke", "calibrate", "memory", "determinism", "agreement", "timing", "profile")


class Budget:
    """Seconds left for the whole check."""

    def __init__(self, seconds: float) -> None:
        self.end = time.perf_counter() + seconds

    def left(self) -> float:
        return self.end - time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def simulate(name: Path, agents: int, replicates: int, days: int, device: str, seed: int = 1234, pop=None):
    """A Simulation of a King County scenario at the benchmark rate; returns (result, seconds, pop)."""
    sc = resolve(
        name,
        {"agents": agents, "replicates": replicates, "days": days, "seed": seed, "device": device},
        [f"disease.transmission_rate={RATE}"],
    )
    if pop is None:
        pop = build_population(load_region(sc.population.region), agents, seed)
    sim = Simulation(
        pop,
        sc.disease,
        sc.contacts,
        sc.seeding,
        days,
        replicates,
        seed,
        device=torch.device(device),
        interventions=sc.interventions.build(),
    )
    res = sim.run()
    return res, res.engine_seconds, pop


def curves(res) -> dict:
    """Final size per replicate, the mean hospitalized curve's peak and day."""
    stages = res.stages_by_tract.sum(axis=2)  # [days, replicates, stages]
    final = res.agents - stages[-1, :, Stage.SUSCEPTIBLE]
    hosp = stages[:, :, Stage.HOSPITALIZED].mean(axis=1)
    return {
        "final_size_mean": float(final.mean()),
        "final_size_sd": float(final.std(ddof=1)) if final.shape[0] > 1 else 0.0,
        "peak_hospitalized": float(hosp.max()),
        "peak_day": int(hosp.argmax()),
    }


def smoke(report: dict, budget: Budget, out: Path) -> None:
    import abm

    rows = report.setdefault("smoke", [])
    paths = [p for p in sorted(KC.glob("*.yaml")) if not p.stem.startswith(("calibrate", "base"))]
    paths += [p for p in sorted(REF.glob("*.yaml")) if p.stem != "base"]
    for path in paths:
        if budget.left() < 0:
            rows.append({"scenario": str(path.relative_to(ROOT)), "status": "skipped (budget)"})
            continue
        row = {"scenario": str(path.relative_to(ROOT))}
        t = time.perf_counter()
        try:
            r = abm.run(path, agents=20_000, days=70, replicates=2, seed=1, device=DEVICE)
            row.update(status="ok", seconds=round(time.perf_counter() - t, 2), **curves(r.result))
            row["cost"] = float(r.costs["cost"].sum()) if len(r.costs) else 0.0
        except Exception as exc:  # report and go on: the point is to find every failing path
            row.update(status=f"error: {type(exc).__name__}: {exc}", traceback=traceback.format_exc()[-3000:])
        rows.append(row)
        log(f"smoke {row['scenario']}: {row['status'][:200]}")
    folder = Path("/tmp/abm-cuda-run")
    cmd = [
        sys.executable,
        "-m",
        "abm",
        "run",
        str(KC / "vacc_ct.yaml"),
        "--agents",
        "20000",
        "--days",
        "70",
        "--replicates",
        "2",
        "--device",
        DEVICE,
        "--out",
        str(folder),
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    files = sorted(str(f.relative_to(folder)) for f in folder.rglob("*") if f.is_file()) if folder.exists() else []
    report["cli_run"] = {"exit": p.returncode, "stderr_tail": p.stderr[-2000:], "files": files}
    if (folder / "manifest.json").exists():
        report["cli_run"]["manifest"] = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    log(f"abm run --device {DEVICE}: exit {p.returncode}, {len(files)} files")


def calibrate(report: dict, budget: Budget, out: Path) -> None:
    rows = report.setdefault("calibrate", [])
    for method, n in (("gradient", 2), ("optuna", 2)):
        if budget.left() < 30:
            rows.append({"method": method, "status": "skipped (budget)"})
            continue
        folder = Path(f"/tmp/abm-cuda-cal-{method}")
        cmd = [
            sys.executable,
            "-m",
            "abm",
            "calibrate",
            str(KC / "calibrate_2020.yaml"),
            "--method",
            method,
            "--trials",
            str(n),
            "--out",
            str(folder),
            "--set",
            f"simulation.device={DEVICE}",
            "--set",
            "population.agents=20000",
            "--set",
            "calibration.rerank_trials=1",
            "--set",
            "calibration.rerank_replicates=2",
        ]
        t = time.perf_counter()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=max(30, min(90, budget.left())))
            row = {
                "method": method,
                "exit": p.returncode,
                "seconds": round(time.perf_counter() - t, 1),
                "stderr_tail": p.stderr[-2500:],
            }
            if (folder / "calibration.json").exists():
                row["calibration"] = json.loads((folder / "calibration.json").read_text(encoding="utf-8"))
        except subprocess.TimeoutExpired:
            row = {"method": method, "status": "timeout", "seconds": round(time.perf_counter() - t, 1)}
        rows.append(row)
        log(f"calibrate {method}: {row.get('exit', row.get('status'))} in {row['seconds']} s")


def memory(report: dict, budget: Budget, out: Path) -> None:
    """Two runs of 1,000,000 agents that do not fit the GPU, each with one message, exit code 2 and
    no folder: one beyond the least memory a run takes (refused before anything is built), and the
    most replicates that pass that check (it runs out of memory as it builds or runs)."""
    from abm.scenario import GPU_BYTES_PER_AGENT, GPU_BYTES_PER_AGENT_REPLICATE

    agents = 1_000_000
    total = torch.cuda.get_device_properties(0).total_memory if DEVICE == "cuda" else 150e9
    passing = int((total - GPU_BYTES_PER_AGENT * agents) // (GPU_BYTES_PER_AGENT_REPLICATE * agents))
    # The `abm` command in a process that may use only 2 GB of the GPU: the check before the run
    # counts the whole card, so 10 replicates pass it and then run out of memory for real.
    capped = (
        "import sys, torch; "
        + (f"torch.cuda.set_per_process_memory_fraction({2e9 / total:.6f}); " if DEVICE == "cuda" else "")
        + "from abm.entry import main; sys.argv = ['abm'] + sys.argv[1:]; main()"
    )
    rows = report.setdefault("memory", [])
    for case, replicates in (("refused up front", int(passing * 1.2)), ("runs out (2 GB cap)", 10)):
        folder = Path(f"/tmp/abm-cuda-oom-{replicates}")
        start = ["-m", "abm"] if case == "refused up front" else ["-c", capped]
        cmd = [sys.executable, *start, "run", str(KC / "no_intervention.yaml"), "--agents", str(agents)]
        cmd += ["--replicates", str(replicates), "--days", "3", "--device", DEVICE, "--out", str(folder)]
        t = time.perf_counter()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=max(30, min(240, budget.left())))
        except subprocess.TimeoutExpired as exc:  # recorded, and the other case still runs
            rows.append({"case": case, "replicates": replicates, "status": f"timed out after {exc.timeout:.0f} s"})
            log(f"memory {case} ({replicates} replicates): timed out after {exc.timeout:.0f} s")
            continue
        row = {
            "case": case,
            "replicates": replicates,
            "exit": p.returncode,
            "seconds": round(time.perf_counter() - t, 1),
            "stderr_tail": p.stderr[-1500:],
            "folder_exists": folder.exists(),
        }
        rows.append(row)
        log(f"memory {case} ({replicates} replicates): exit {p.returncode}: {' '.join(p.stderr.split())[-300:]}")


def determinism(report: dict, budget: Budget, out: Path) -> None:
    rows = report.setdefault("determinism", [])
    for mode in ("default", "deterministic algorithms"):
        torch.use_deterministic_algorithms(mode != "default")
        for name in ("no_intervention", "vacc_ct"):
            if budget.left() < 20:
                rows.append({"scenario": name, "mode": mode, "status": "skipped (budget)"})
                continue
            try:
                a, sa, pop = simulate(KC / f"{name}.yaml", 100_000, 2, 180, DEVICE)
                b, sb, _ = simulate(KC / f"{name}.yaml", 100_000, 2, 180, DEVICE, pop=pop)
                same = {
                    k: bool(np.array_equal(getattr(a, k), getattr(b, k)))
                    for k in ("stages_by_tract", "new_by_tract", "stages_by_age", "entries")
                }
                diff = int(np.abs(a.stages_by_tract.astype(np.int64) - b.stages_by_tract).sum())
                row = {
                    "scenario": name,
                    "mode": mode,
                    "identical": same,
                    "abs_count_difference": diff,
                    "seconds": [round(sa, 2), round(sb, 2)],
                    "run_a": curves(a),
                    "run_b": curves(b),
                }
            except Exception as exc:
                row = {
                    "scenario": name,
                    "mode": mode,
                    "status": f"error: {type(exc).__name__}: {exc}",
                    "traceback": traceback.format_exc()[-3000:],
                }
            rows.append(row)
            log(f"determinism {name} ({mode}): {row.get('identical', row.get('status'))}")
    torch.use_deterministic_algorithms(False)


def agreement(report: dict, budget: Budget, out: Path) -> None:
    torch.set_num_threads(os.cpu_count() or 1)
    pop = None
    for name in ("no_intervention", "vacc_ct"):
        if budget.left() < 60:
            report[f"agreement_{name}"] = {"status": "skipped (budget)"}
            continue
        res_cpu, s_cpu, pop = simulate(KC / f"{name}.yaml", 100_000, 10, 180, "cpu", pop=pop)
        res_gpu, s_gpu, _ = simulate(KC / f"{name}.yaml", 100_000, 10, 180, DEVICE, pop=pop)
        c, g = curves(res_cpu), curves(res_gpu)
        se = ((c["final_size_sd"] ** 2 + g["final_size_sd"] ** 2) / 10) ** 0.5
        key = "agreement" if name == "no_intervention" else f"agreement_{name}"
        report[key] = {
            "cpu": c,
            "cuda": g,
            "cpu_seconds": round(s_cpu, 2),
            "cuda_seconds": round(s_gpu, 2),
            "final_size_z": (g["final_size_mean"] - c["final_size_mean"]) / se if se > 0 else None,
            "cpu_threads": torch.get_num_threads(),
        }
        log(f"{key}: {json.dumps(report[key])}")
    if budget.left() < 120:
        report["agreement_ct_app70"] = {"status": "skipped (budget)"}
        return
    import abm

    runs = {}
    for dev in ("cpu", DEVICE):
        r = abm.run(REF / "ct_app70.yaml", replicates=10, device=dev)
        runs[dev] = {**curves(r.result), "cost": float(r.costs["cost"].sum()) / 10, "engine_s": r.result.engine_seconds}
    c, g = runs["cpu"], runs[DEVICE]
    se = ((c["final_size_sd"] ** 2 + g["final_size_sd"] ** 2) / 10) ** 0.5
    report["agreement_ct_app70"] = {
        "cpu": c,
        "cuda": g,
        "final_size_z": (g["final_size_mean"] - c["final_size_mean"]) / se,
    }
    log(f"agreement_ct_app70: {json.dumps(report['agreement_ct_app70'])}")


def timing(report: dict, budget: Budget, out: Path) -> None:
    rows = report.setdefault("timing", [])
    pops: dict[int, object] = {}
    simulate(KC / "no_intervention.yaml", 20_000, 1, 30, DEVICE)  # CUDA context and kernels
    configs = [
        ("no_intervention", 100_000, 1, "cuda", 3),
        ("vacc_ct", 100_000, 1, "cuda", 3),
        ("no_intervention", 100_000, 10, "cuda", 3),
        ("vacc_ct", 100_000, 10, "cuda", 3),
        ("no_intervention", 100_000, 1, "cpu1", 3),
        ("no_intervention", 1_000_000, 1, "cuda", 1),
        ("no_intervention", 2_250_000, 1, "cuda", 1),
        ("vacc_ct", 2_250_000, 1, "cuda", 1),
        ("no_intervention", 2_250_000, 10, "cuda", 1),
        ("no_intervention", 2_250_000, 1, "cpu", 1),
    ]
    for name, agents, reps, dev, repeats in configs:
        if budget.left() < 15:
            rows.append(
                {"scenario": name, "agents": agents, "replicates": reps, "device": dev, "status": "skipped (budget)"}
            )
            continue
        torch.set_num_threads(1 if dev == "cpu1" else (os.cpu_count() or 1))
        device = "cpu" if dev.startswith("cpu") else DEVICE
        try:
            t = time.perf_counter()
            if agents not in pops:
                _, _, pops[agents] = simulate(KC / f"{name}.yaml", agents, 1, 1, "cpu")
            build = time.perf_counter() - t
            secs, infected = [], []
            if device == "cuda":
                torch.cuda.reset_peak_memory_stats()
            for _ in range(repeats):
                res, s, _ = simulate(KC / f"{name}.yaml", agents, reps, 180, device, pop=pops[agents])
                secs.append(s)
                infected.append(curves(res)["final_size_mean"] / agents)
            row = {
                "scenario": name,
                "agents": agents,
                "replicates": reps,
                "device": dev,
                "threads": torch.get_num_threads(),
                "engine_s_median": round(statistics.median(secs), 3),
                "engine_s_runs": [round(x, 3) for x in secs],
                "infected": round(statistics.median(infected), 4),
                "population_build_s": round(build, 2),
                "agent_days_per_s": round(agents * reps * 180 / statistics.median(secs)),
            }
            if device == "cuda":
                row["peak_gpu_mb"] = round(torch.cuda.max_memory_allocated() / 2**20)
        except Exception as exc:
            row = {
                "scenario": name,
                "agents": agents,
                "replicates": reps,
                "device": dev,
                "status": f"error: {type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc()[-3000:],
            }
        rows.append(row)
        log(f"timing {json.dumps({k: v for k, v in row.items() if k != 'traceback'})}")


def profile(report: dict, budget: Budget, out: Path) -> None:
    """Where a tracing run's day goes on the GPU: vacc_ct, 100,000 agents x 10 replicates, 180
    days under torch.profiler; the operations with the most self CPU time (launches included) and
    the most calls, and the number of host-device synchronisations."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    _, _, pop = simulate(KC / "vacc_ct.yaml", 100_000, 1, 1, "cpu")
    simulate(KC / "vacc_ct.yaml", 100_000, 10, 30, DEVICE, pop=pop)  # warm-up
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if DEVICE == "cuda" else [])
    with torch_profile(activities=activities) as prof:
        res, secs, _ = simulate(KC / "vacc_ct.yaml", 100_000, 10, 180, DEVICE, pop=pop)
    events = prof.key_averages()

    def row(e) -> dict:
        return {
            "op": e.key,
            "calls": e.count,
            "self_cpu_ms": round(e.self_cpu_time_total / 1000, 1),
            "device_ms": round(getattr(e, "self_device_time_total", 0) / 1000, 1),
        }

    by_cpu = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[:30]
    by_calls = sorted(events, key=lambda e: e.count, reverse=True)[:30]
    report["profile"] = {
        "engine_s_profiled": round(secs, 2),
        "final_size_mean": curves(res)["final_size_mean"],
        "total_calls": int(sum(e.count for e in events)),
        "by_self_cpu": [row(e) for e in by_cpu],
        "by_calls": [row(e) for e in by_calls],
    }
    (out / "profile_vacc_ct.txt").write_text(
        events.table(sort_by="self_cpu_time_total", row_limit=60), encoding="utf-8"
    )
    log(f"profile: {secs:.2f} s profiled, {report['profile']['total_calls']} operator calls")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp")))
    ap.add_argument("--budget", type=float, default=420, help="seconds for all parts together")
    ap.add_argument("--parts", default=",".join(PARTS))
    ap.add_argument("--device", default="cuda", help="cpu: a dry run of this script without a GPU")
    args = ap.parse_args()
    global DEVICE
    DEVICE = args.device
    if DEVICE == "cuda" and not torch.cuda.is_available():
        sys.exit("benchmarks/gpu.py: no CUDA device (torch.cuda.is_available() is False)")
    budget = Budget(args.budget)
    report: dict = {
        "date": time.strftime("%Y-%m-%d"),
        "gpu": torch.cuda.get_device_name(0) if DEVICE == "cuda" else None,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpu_cores": os.cpu_count(),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / "gpu_check.json"
    for part in args.parts.split(","):
        log(f"part {part}, {budget.left():.0f} s left")
        try:
            globals()[part](report, budget, args.out)
        except Exception as exc:
            report[f"{part}_error"] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-3000:]}"
            log(report[f"{part}_error"])
        target.write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
    log(f"done, {budget.left():.0f} s of the budget left")


if __name__ == "__main__":
    main()
