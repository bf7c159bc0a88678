"""Calibrate the King County model to 2020 (scenarios/king_county/calibrate_2020.yaml), then
re-run the calibrated scenario with more replicates and other seeds (does `abm run` on it
reproduce the fit within noise?) and print the fit and held-out losses for BENCHMARKS.md.

    python benchmarks/calibration_king_county.py [--scenario FILE] [--trials 200] [--method optuna|gradient]
        [--backend local|ray] [--workers 2] [--check-replicates 10 40] [--out DIR]
        [--evaluate CALIBRATED_YAML [--seeds 1234 4321]] [--set key.path=value ...]
        [--time-workers 1 2 [--rounds 3]]

``--workers``: trials run at once; the trials do not depend on it (the scenario's
``calibration.parallel_trials`` is the sampler's batch: 2 in calibrate_2020.yaml, as the Ray
``--workers 2`` runs that found its values asked them).

``--evaluate`` skips the calibration and only re-runs the given calibrated scenario (``--seeds``,
default 1234 and 4321; each number of ``--check-replicates``; with any ``--set`` overrides),
printing the weekly held-out series too.

``--diagnose`` adds the held-out losses of the calibrated scenario with the mobility multiplier
frozen at its value on the fit window's last day (a counterfactual that isolates how much of
the May-June error comes from the mobility series' recovery), and with the series' recovery
share set to 1 (contacts follow the mobility series' recovery in full).

``--care-homes CALIBRATED_YAML`` only counts the deaths of long-term-care residents against
everyone's, up to the fit window's end and over the run (``--check-replicates``' first number of
replicates, each of ``--seeds``, default 1234).

``--time-workers 1 2`` skips the checks and times the same calibration (``--trials``, ``--set``)
with each number of workers, ``--rounds`` times in alternating order, prints each wall time
(the whole calibration: worker start-up, trials, re-ranked trials, outputs), the medians and
their ratio, and checks that every run gave the same trials (Optuna's timing columns aside):

    python benchmarks/calibration_king_county.py --time-workers 1 2 --rounds 3 --trials 16 \
        --set population.agents=20000
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch

import abm
from abm.calibration.observed import load_observed, losses, simulated, weekly
from abm.calibration.optimize import calibrate, fit_value
from abm.engine.disease import Stage
from abm.interventions.contact_multipliers import ContactMultipliers
from abm.populations.region import load_region
from abm.runs import population_of, resolve, simulation_of

ROOT = Path(__file__).resolve().parents[1]


def check(calibrated: Path, replicates: int, seed: int, sets: list[str] | None = None) -> dict:
    """Fit and held-out losses (None without a held-out window) of the calibrated scenario run
    with ``replicates`` and ``seed``, its fit loss (the calibration's objective: the mean of the
    targets' fit-window RMSEs weighted by ``calibration.target_weights``) and the weekly series
    (simulated, observed) of both windows."""
    res = abm.run(calibrated, replicates=replicates, seed=seed, sets=sets)
    cfg = res.scenario.calibration

    def pairs(window: tuple) -> dict:
        s, o = weekly(sim, window), weekly(obs, window)
        return {t: [[round(float(a)), round(float(b))] for a, b in zip(s[t], o[t], strict=True)] for t in cfg.targets}

    obs, sim = load_observed(cfg), simulated(res, cfg)
    held = cfg.holdout_window
    return {
        "fit": losses(sim, obs, cfg.fit_window),
        "loss_fit": fit_value(sim, obs, cfg),
        "holdout": losses(sim, obs, held) if held else None,
        "fit_weekly_sim_obs": pairs(cfg.fit_window),
        "holdout_weekly_sim_obs": pairs(held) if held else None,
    }


def evaluate(
    calibrated: Path, replicates: list[int], seeds: list[int] | None = None, sets: list[str] | None = None
) -> None:
    """Print the fit and held-out ND of the calibrated scenario at each number of replicates and
    each seed (default 1234 and 4321), with ``sets`` overrides (for example another population
    size)."""
    for reps in replicates:
        for seed in seeds or (1234, 4321):
            t = time.perf_counter()
            result = check(calibrated, reps, seed, sets or None)
            windows = [w for w in ("fit", "holdout") if result[w] is not None]
            nd = {w: {k: round(v["nd_weekly"], 3) for k, v in result[w].items()} for w in windows}
            seconds = time.perf_counter() - t
            print(
                f"re-run, {reps} replicates, seed {seed} ({seconds:.0f} s): fit loss {result['loss_fit']:.3f}, "
                f"ND {json.dumps(nd)}"
            )
            print("  fit-window weekly [sim, obs]:", json.dumps(result["fit_weekly_sim_obs"]))
            if result["holdout_weekly_sim_obs"] is not None:
                print("  held-out weekly [sim, obs]:", json.dumps(result["holdout_weekly_sim_obs"]))


def care_home_deaths(calibrated: Path, replicates: int, seed: int, sets: list[str] | None = None) -> None:
    """Deaths of long-term-care residents and of everyone else, up to the fit window's last day
    and over the whole run, summed over ``replicates`` (``--care-homes``). Death days are not
    recorded per agent, so the run is made twice with the same seed: to the fit window's last day
    and in full (the random streams are keyed by day, so the two agree up to that day)."""
    sc = resolve(calibrated, {"replicates": replicates, "seed": seed}, sets=sets)
    cfg = sc.calibration
    pop = population_of(sc, load_region(sc.population.region))
    care = torch.as_tensor(pop.long_term_care)
    last = (cfg.fit_window[1] - cfg.start_date).days + 1
    for days, label in ((last, f"to {cfg.fit_window[1]}"), (sc.simulation.days, "whole run")):
        run_sc = sc.model_copy(update={"simulation": sc.simulation.model_copy(update={"days": days})})
        sim = simulation_of(run_sc, pop, device=torch.device("cpu"))
        sim.run(None)
        dead = (sim.state.stage == Stage.DEATH).reshape(replicates, -1)
        infected = (sim.state.stage != Stage.SUSCEPTIBLE).reshape(replicates, -1)
        in_care = int((dead & care).sum())
        print(
            f"{label} ({days} days, {replicates} replicates, seed {seed}): deaths {int(dead.sum())}, of them "
            f"{in_care} long-term-care residents ({in_care / max(int(dead.sum()), 1):.0%}); infected "
            f"{int(infected.sum())}, of them {int((infected & care).sum())} residents; residents "
            f"{int(care.sum())} of {pop.size} agents"
        )


def frozen_mobility_series(calibrated: Path, out: Path) -> list[str]:
    """``--set`` overrides that replace the mobility series (its levels after ``recovery``) by
    itself frozen from the fit window's last day (the counterfactual of ``--diagnose``)."""
    sc = resolve(calibrated)
    cfg = sc.calibration
    series = sc.interventions.contact_multipliers.series
    values = ContactMultipliers(sc.interventions.contact_multipliers).levels
    last = (cfg.fit_window[1] - cfg.start_date).days - series.start_day
    frozen = values[: last + 1] + [values[last]] * max(0, len(values) - last - 1)
    out.write_text("multiplier\n" + "\n".join(f"{v:.6f}" for v in frozen) + "\n", encoding="utf-8")
    return [
        f"interventions.contact_multipliers.series.source={out}",
        "interventions.contact_multipliers.series.recovery=1.0",
    ]


def time_workers(scenario: Path, workers: list[int], rounds: int, trials: int | None, sets: list[str]) -> None:
    """Wall time of the same calibration with each number of ``workers``, ``rounds`` times (the
    order reversed every other round, so that neither always runs first), with the medians and
    their ratio (first over each other); exits with an error if two runs gave different trials."""
    seconds: dict[int, list[float]] = {w: [] for w in workers}
    first = None
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            for w in workers if r % 2 == 0 else workers[::-1]:
                out = Path(tmp) / f"workers{w}-round{r}"
                t = time.perf_counter()
                summary = calibrate(scenario, out, trials=trials, sets=sets, workers=w)
                seconds[w].append(time.perf_counter() - t)
                timings = ["datetime_start", "datetime_complete", "duration"]
                table = pd.read_csv(out / "trials.csv").drop(columns=timings).to_csv(index=False)
                first = first or table
                print(
                    f"round {r + 1}, --workers {w}: {seconds[w][-1]:.1f} s (parallel_trials "
                    f"{summary['parallel_trials']}, best trial {summary['best_trial']}, loss {summary['loss_fit']:.4f})"
                )
                if table != first:
                    raise SystemExit(f"--workers {w} gave other trials than the first run")
    medians = {w: statistics.median(s) for w, s in seconds.items()}
    print(f"medians of {rounds}: " + ", ".join(f"--workers {w} {m:.1f} s" for w, m in medians.items()))
    base = workers[0]
    for w in workers[1:]:
        print(f"--workers {base} / --workers {w}: {medians[base] / medians[w]:.2f}")
    print("every run gave the same trials")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", type=Path, default=ROOT / "scenarios/king_county/calibrate_2020.yaml")
    ap.add_argument("--trials", type=int, default=None, help="Optuna trials or gradient steps")
    ap.add_argument("--method", default="optuna")
    ap.add_argument("--backend", default="local")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--check-replicates", type=int, nargs="*", default=[10])
    ap.add_argument("--evaluate", type=Path, default=None, help="only re-run this calibrated scenario")
    ap.add_argument("--diagnose", action="store_true")
    ap.add_argument("--out", type=Path, default=Path("runs/calibrate_2020-calibration"))
    ap.add_argument("--set", dest="sets", action="append", default=[])
    ap.add_argument("--seeds", type=int, nargs="+", default=None, help="--evaluate: seeds (default 1234 4321)")
    ap.add_argument("--time-workers", type=int, nargs="+", default=None, help="time the calibration with these")
    ap.add_argument("--rounds", type=int, default=3, help="--time-workers: runs of each")
    ap.add_argument(
        "--care-homes", type=Path, default=None, help="deaths of long-term-care residents in this calibrated scenario"
    )
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.time_workers is not None:
        time_workers(args.scenario, args.time_workers, args.rounds, args.trials, args.sets)
        return
    if args.evaluate is not None:
        evaluate(args.evaluate, args.check_replicates, args.seeds, args.sets)
        return
    if args.care_homes is not None:
        for seed in args.seeds or (1234,):
            reps = args.check_replicates[0] if args.check_replicates else 10
            care_home_deaths(args.care_homes, reps, seed, args.sets)
        return
    t = time.perf_counter()
    summary = calibrate(
        args.scenario,
        args.out,
        trials=args.trials,
        sets=args.sets,
        method=args.method,
        backend=args.backend,
        workers=args.workers,
    )
    print(json.dumps(summary, indent=1))
    print(f"calibration wall time: {time.perf_counter() - t:.0f} s")
    calibrated = args.out / "calibrated.yaml"
    evaluate(calibrated, args.check_replicates)
    reps = args.check_replicates[0] if args.check_replicates else 2
    if args.diagnose:
        sets = frozen_mobility_series(calibrated, args.out.parent / f"{args.out.name}-frozen-mobility.csv")
        result = check(calibrated, reps, 1234, sets)
        print("mobility frozen after the fit window:", json.dumps(result))
        result = check(calibrated, reps, 1234, ["interventions.contact_multipliers.series.recovery=1.0"])
        print("full recovery (recovery = 1):", json.dumps(result))


if __name__ == "__main__":
    main()
