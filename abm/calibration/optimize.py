"""Fitting a scenario's free parameters to observed series with Optuna (TPE, seeded)."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pandas as pd

from abm import scenario_notes
from abm.calibration.checks import OBSERVATION, RATE, check_calibration, with_values
from abm.calibration.config import CalibrationConfig, Observation
from abm.calibration.fit_plot import plot_fit
from abm.calibration.journal import TrialJournal
from abm.calibration.observation import RAW, observe_arrays
from abm.calibration.observed import (
    CalibrationError,
    fit_loss,
    losses,
    observe,
    raw_series,
    simulated,
    weekly,
    weekly_fit_table,
)
from abm.calibration.report import calibration_report_html
from abm.memory import memory_note
from abm.outputs.run_folder import atomic_folder, check_target, unwritten_said
from abm.outputs.strict_json import dumps
from abm.overrides import apply_overrides, given, refuse_learning_data
from abm.parallel import (
    ProcessPool,
    check_ray_address,
    check_ray_device,
    check_workers,
    in_order,
    ray_cpus,
    ray_finished,
    ray_session,
    ray_task,
    run_and_release,
    usable_cpus,
    workers_record,
)
from abm.plugin_errors import PluginFailure
from abm.plurals import counted
from abm.residents_per_agent import more_agents_than_residents
from abm.runs import TASK_REUSE, run
from abm.scenario import (
    COMMAND_LINE,
    Scenario,
    ScenarioError,
    apply_set,
    check_device,
    read_scenario_data,
    validate,
    with_full_data_paths,
)
from abm.scenario_notes import ScenarioNote, too_many_workers, unapplied_settings
from abm.set_options import PYTHON, OptionNames, refuse_repeated_keys


def checked_inputs(
    path: str | Path,
    sets: list[str] | None = None,
    method: str = "optuna",
    names: OptionNames = COMMAND_LINE,
    overrides: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], Scenario, pd.DataFrame]:
    """The scenario's data (``--set`` and ``overrides``, as ``--agents``, applied:
    :func:`abm.overrides.apply_overrides`), the validated scenario and the observed series,
    after every check made before anything runs: a calibration section, and
    :func:`abm.calibration.checks.check_calibration`'s for ``method``. Errors name the file."""
    data = read_scenario_data(path)
    refuse_learning_data(data, str(path), names)
    refuse_repeated_keys(list(sets or []), names, str(path))
    for i, item in enumerate(sets or []):
        data = apply_set(data, item, names.set_item(i))
    data = with_full_data_paths(apply_overrides(data, overrides, list(sets or []), str(path), names))
    source = names.scenario(str(path), list(sets or []), given(overrides))
    sc = validate(data, source)
    if sc.calibration is None:
        raise CalibrationError(f"{source}: calibration: the scenario has no calibration section")
    return data, sc, check_calibration(data, sc, source, method, names)


def held_fixed(cfg: CalibrationConfig, method: str) -> list[str]:
    """The keys of ``calibration.parameters`` that ``method`` does not fit and holds at the
    scenario's values: every key but the transmission rate for the gradient method, none for Optuna."""
    return [k for k in cfg.parameters if k != RATE] if method == "gradient" else []


BACKENDS = ("local", "ray")
METHODS = ("optuna", "gradient")


DRAW_SEED_STEP = 1000  # population draw k of a trial runs with seed + 1000 k (its replicates are one batch)


def simulate_values(data: dict[str, Any], values: dict[str, float], source: str) -> pd.DataFrame:
    """Run the scenario with ``values`` filled in; its raw simulated series by date (admissions,
    deaths, onsets of symptoms: :func:`abm.calibration.observed.raw_series`), averaged over
    ``calibration.population_draws`` population draws (a Ray task). Values that make an invalid
    scenario together (each bound alone was checked before the trials) are named as a trial's.
    The population and community network of each draw are built once in a process and reused by
    its next trials while their settings are the same (:data:`abm.runs.TASK_REUSE`; the default
    free parameters change neither). A plug-in that fails raises its :class:`PluginFailure` naming
    the trial's values."""
    drawn = ", ".join(f"{k}={v:g}" for k, v in values.items())
    sc = validate(with_values(data, values), f"{source} (a calibration trial's values: {drawn})")
    cfg = sc.calibration
    assert cfg is not None
    sc.outputs.reproduction_number = False  # a trial's series need no infectors
    TASK_REUSE.keep = cfg.population_draws  # the population and network of each draw
    try:
        draws = [
            raw_series(
                run(sc, seed=sc.simulation.seed + DRAW_SEED_STEP * k if k else None, reuse=TASK_REUSE, warn=False),
                cfg,
            )
            for k in range(cfg.population_draws)
        ]
    except PluginFailure as exc:
        raise exc.in_run(f"a calibration trial ({drawn})") from exc
    return sum(draws[1:], draws[0]) / len(draws)


def profiled_keys(cfg: CalibrationConfig) -> list[str]:
    """The free observation parameters fitted per trial by :func:`profile` (none when
    ``profile_observation`` is off: then the sampler draws them like the others)."""
    if not cfg.profile_observation:
        return []
    return [k for k in cfg.parameters if k.startswith(OBSERVATION)]


def observation_with(cfg: CalibrationConfig, values: dict[str, float]) -> Observation:
    """The scenario's observation model with the ``calibration.observation.*`` entries of
    ``values`` filled in."""
    update = {k[len(OBSERVATION) :]: v for k, v in values.items() if k.startswith(OBSERVATION)}
    return Observation.model_validate({**cfg.observation.model_dump(), **update})


class FitLoss:
    """The fit objective of :func:`fit_value` on daily arrays, without pandas, fast enough for
    the grid search: :func:`abm.calibration.observed.fit_loss` of the observation model's series."""

    def __init__(self, observed: pd.DataFrame, cfg: CalibrationConfig) -> None:
        self.cfg = cfg
        obs = weekly(observed, cfg.fit_window)
        self.observed_weekly = {t: obs[t].to_numpy() for t in cfg.targets}

    def __call__(self, raw: dict[str, np.ndarray], obs: Observation) -> float:
        """The loss of the daily :data:`abm.calibration.observation.RAW` series read with ``obs``."""
        series = observe_arrays(raw, obs, self.cfg.targets, self.cfg.start_date)
        return float(fit_loss(series, self.observed_weekly, self.cfg))


def grid(low: float, high: float, points: int, integer: bool) -> np.ndarray:
    """``points`` values from low to high (whole numbers, each once, when ``integer``)."""
    values = np.linspace(low, high, points)
    return np.unique(np.round(values)) if integer else values


def profile(raw: pd.DataFrame, cfg: CalibrationConfig, loss: FitLoss) -> dict[str, float]:
    """The profiled observation parameters that minimise the fit loss of this simulation: the
    best point of a grid of ``profile_points`` per parameter, then of a grid 4 times finer
    (9 points per parameter) around it. Costs no simulation."""
    keys = profiled_keys(cfg)
    arrays = {c: raw[c].to_numpy() for c in RAW}
    ranges = [cfg.parameters[k] for k in keys]
    axes = [grid(r.low, r.high, cfg.profile_points, r.integer) for r in ranges]
    best: tuple[float, tuple[float, ...]] = (math.inf, ())
    for _ in range(2):
        for point in np.array(np.meshgrid(*axes, indexing="ij")).reshape(len(keys), -1).T:
            values = {k: (int(v) if r.integer else float(v)) for k, v, r in zip(keys, point, ranges, strict=True)}
            value = loss(arrays, observation_with(cfg, values))
            if value < best[0]:
                best = (value, tuple(values.values()))
        steps = [(r.high - r.low) / (cfg.profile_points - 1) for r in ranges]
        axes = [
            grid(max(r.low, b - s), min(r.high, b + s), 9, r.integer)
            for r, b, s in zip(ranges, best[1], steps, strict=True)
        ]
    return dict(zip(keys, best[1], strict=True))


def suggest(trial: optuna.Trial, cfg: CalibrationConfig) -> dict[str, float]:
    """The trial's values of the free parameters drawn by the sampler (all but the profiled)."""
    values: dict[str, float] = {}
    skip = set(profiled_keys(cfg))
    for key, rng in cfg.parameters.items():
        if key in skip:
            continue
        if rng.integer:
            values[key] = trial.suggest_int(key, int(rng.low), int(rng.high))
        else:
            values[key] = trial.suggest_float(key, rng.low, rng.high)
    return values


def fit_value(sim: pd.DataFrame, observed: pd.DataFrame, cfg: CalibrationConfig) -> float:
    """The objective: mean over targets, weighted by ``target_weights``, of the RMSE of log1p
    weekly counts on the fit window."""
    fit = losses(sim, observed, cfg.fit_window)
    weights = {t: cfg.target_weights.get(t, 1.0) for t in fit}
    return float(sum(weights[t] * v["rmse_log1p_weekly"] for t, v in fit.items()) / sum(weights.values()))


Score = Callable[[optuna.Trial, dict[str, float], pd.DataFrame], float]
Progress = Callable[[int, int, float], None] | None  # (trials or steps done, of how many, the last loss)


def trial_scorer(observed: pd.DataFrame, cfg: CalibrationConfig, curves: dict[int, pd.DataFrame]) -> Score:
    """Scores a trial from its raw series: profiles the observation parameters (recorded as the
    trial's user attributes), keeps the observed-like curves in ``curves``, returns the fit loss."""
    loss = FitLoss(observed, cfg)

    def score(trial: optuna.Trial, values: dict[str, float], raw: pd.DataFrame) -> float:
        profiled = profile(raw, cfg, loss) if profiled_keys(cfg) else {}
        for key, value in profiled.items():
            trial.set_user_attr(key, value)
        trial_cfg = cfg.model_copy(update={"observation": observation_with(cfg, {**values, **profiled})})
        sim = observe(raw, trial_cfg)
        curves[trial.number] = sim
        return fit_value(sim, observed, cfg)

    return score


# Runs a batch of trials' values and gives their raw series (:func:`simulate_values`) in the
# order of the values, each as soon as it and those before it are done.
RunBatch = Callable[[list[dict[str, float]]], Iterator[pd.DataFrame]]


def batch_sizes(cfg: CalibrationConfig, trials: int | None = None) -> tuple[int, int]:
    """The trials the sampler asks for at a time (``parallel_trials``, or ``trials`` when fewer)
    and the largest batch the workers run: that, or the re-ranked trials, which run as one batch
    on the same workers, whichever is larger."""
    batch = min(cfg.parallel_trials, trials or cfg.parallel_trials)
    return batch, max(batch, min(cfg.rerank_trials, trials or cfg.rerank_trials))


def local_workers(cfg: CalibrationConfig, workers: int | None, device: str, trials: int | None = None) -> int:
    """The processes that run ``local`` trials (:func:`trial_runner`): ``workers``, else 1 on a
    GPU and the batch or the usable CPUs, whichever is fewer, on the CPU."""
    if workers:
        return workers
    return 1 if device.startswith("cuda") else min(batch_sizes(cfg, trials)[0], usable_cpus())


def trials_memory_note(sc: Scenario, runs: int, names: OptionNames = COMMAND_LINE) -> str | None:
    """The note (:func:`abm.memory.memory_note`) where ``runs`` of a calibration's largest runs at
    once, a trial's or a re-ranked one's (``calibration.rerank_replicates``), may need more memory
    than this machine has available; None where they fit."""
    cfg = sc.calibration
    assert cfg is not None
    reranked_larger = cfg.rerank_trials > 0 and cfg.rerank_replicates > sc.simulation.replicates
    fewer = ("agents", "calibration.rerank_replicates") if reranked_larger else ("replicates", "agents")
    replicates = cfg.rerank_replicates if reranked_larger else None
    return memory_note([sc], replicates=replicates, runs=runs, fewer=fewer, names=names)


@contextmanager
def trial_runner(
    cfg: CalibrationConfig,
    data: dict[str, Any],
    source: str,
    backend: str,
    workers: int | None,
    address: str | None = None,
    device: str = "cpu",
    trials: int | None = None,
    names: OptionNames = COMMAND_LINE,
) -> Iterator[tuple[RunBatch, dict[str, int]]]:
    """Where trials run, and how many at once (``workers``; the default in brackets, where
    "batch" is ``parallel_trials``, or ``trials`` when fewer):

    - ``local``, 1 worker: one after the other in this process (the default on ``cuda``);
    - ``local``, N workers: in N worker processes of this machine (min(batch, the usable CPUs));
    - ``ray``: as Ray tasks of one CPU, N at once (min(batch, the cluster's CPUs)), on the Ray
      instance this process is connected to, else on ``address`` (or RAY_ADDRESS) or a local
      one started and shut down here. On ``cuda`` (min(batch, the cluster's GPUs)) each task
      asks Ray for the GPUs divided by N, at most one.

    Each worker runs its simulations with the scenario's ``simulation.threads``. Gives the batch
    runner and what ``calibration.json`` records of the workers (:func:`abm.parallel.workers_record`):
    ``workers``, how many of a batch could run at once (at most the larger of the batch and the
    re-ranked trials, and on Ray at most the cluster's CPUs, though ``workers`` asks for more),
    and on Ray ``ray_cpus``, the cluster's CPUs as the trials began. Leaving the block (after an
    error or an interrupt too) stops the workers. Messages name the backend as ``names`` does
    (``--backend ray`` or ``backend='ray'``)."""

    batch, largest = batch_sizes(cfg, trials)
    if backend == "ray":
        given = names.given("backend", "ray")
        check_ray_device(device, source, CalibrationError, given)
        with ray_session(address, CalibrationError, given, names.given("ray-address", address)) as ray:
            resources = ray.cluster_resources()
            gpus = float(resources.get("GPU", 0)) if device == "cuda" else 0.0
            if device == "cuda" and gpus == 0:
                raise CalibrationError(
                    f"{source}: simulation.device: 'cuda' is not allowed with {given} here: the Ray cluster "
                    f"has no GPU; use cpu, or {names.given('backend', 'local')}"
                )
            cpus = ray_cpus(ray)
            slots = max(1, int(gpus)) if gpus else cpus
            n = workers or min(batch, slots)
            remote = ray_task(ray, simulate_values)
            if gpus:
                remote = remote.options(num_gpus=min(1.0, gpus / n))

            def on_ray(values: list[dict[str, float]]) -> Iterator[pd.DataFrame]:
                calls = [(remote, (data, v, source)) for v in values]

                def named(index: int) -> str:
                    return "the trial of " + ", ".join(f"{k}={x:g}" for k, x in values[index].items())

                errors = (CalibrationError, ScenarioError, PluginFailure)
                return in_order(ray_finished(ray, calls, n, errors, given, named))

            yield on_ray, workers_record(n, largest, cpus)
    else:
        # On a GPU, trials share it only when --workers asks for that (not measured: no GPU machine
        # has run it); by default they run in this process, one after the other, as on Ray's GPUs.
        n = local_workers(cfg, workers, device, trials)
        if n == 1:
            try:
                yield (
                    (lambda values: (run_and_release(simulate_values, data, v, source) for v in values)),
                    {"workers": 1},
                )
            finally:
                TASK_REUSE.clear()
        else:
            with ProcessPool(n, names) as pool:
                yield (
                    (lambda values: in_order(pool.finished(simulate_values, [(data, v, source) for v in values]))),
                    workers_record(n, largest),
                )


def run_trials(
    study: optuna.Study,
    cfg: CalibrationConfig,
    n_trials: int,
    run_batch: RunBatch,
    score: Score,
    progress: Progress,
    journal: TrialJournal | None = None,
    reused: Callable[[int], None] | None = None,
) -> None:
    """Trials in batches of ``calibration.parallel_trials``: ask the sampler for a batch, run it
    with ``run_batch``, tell the results in trial order. With the sampler's seed and the batch
    size fixed, the trials are the same however many of a batch run at once, and wherever.
    ``journal``: where finished trials are kept, and a batch it already holds is told from it
    instead of being run (:mod:`abm.calibration.journal`); ``progress`` is told of those too, at
    once, and ``reused`` of how many there were as the first batch that runs begins."""
    done = 0
    told_from_journal = 0
    while done < n_trials:
        trials = [study.ask() for _ in range(min(cfg.parallel_trials, n_trials - done))]
        values = [suggest(t, cfg) for t in trials]
        kept = journal.kept(done, values) if journal is not None else None
        if kept is not None:
            told_from_journal += len(kept)
        elif told_from_journal and reused is not None:  # the kept ones come first: once, at the first run
            reused(told_from_journal)
            reused = None
        for trial, v, raw in zip(trials, values, kept or run_batch(values), strict=True):
            loss = score(trial, v, raw)
            study.tell(trial, loss)
            if journal is not None and kept is None:
                journal.add_trial(trial.number, v, raw)
            done += 1
            if progress is not None:
                progress(done, n_trials, loss)


def at_bounds(best: dict[str, float], cfg: CalibrationConfig) -> list[str]:
    """The free parameters whose fitted value lies within 1% of the range from a bound: the fit
    may want a value outside the bounds."""
    out = []
    for key, value in best.items():
        b = cfg.parameters.get(key)
        if b is not None and b.high > b.low and min(value - b.low, b.high - value) <= 0.01 * (b.high - b.low):
            out.append(key)
    return out


def rerank(
    top: list[optuna.trial.FrozenTrial],
    cfg: CalibrationConfig,
    run_batch: RunBatch,
    observed: pd.DataFrame,
    sets: dict[str, float],
    progress: Progress = None,
) -> list[dict[str, Any]]:
    """Re-run the ``top`` trials with ``sets`` (more replicates) where the trials ran, profile
    their observation parameters again on the new curves, and rank them by the new fit loss;
    ``progress`` is told of each re-run as it is scored (in the order of ``top``), with its new
    loss. Returns the ranking, best first: trial number, loss as it ran, new loss, values (drawn
    and profiled), new curve."""
    loss = FitLoss(observed, cfg)
    rows: list[dict[str, Any]] = []
    for trial, raw in zip(top, run_batch([{**t.params, **sets} for t in top]), strict=True):
        profiled = profile(raw, cfg, loss) if profiled_keys(cfg) else {}
        trial_cfg = cfg.model_copy(update={"observation": observation_with(cfg, {**trial.params, **profiled})})
        sim = observe(raw, trial_cfg)
        rows.append(
            {
                "trial": trial.number,
                "loss_as_run": trial.value,
                "loss_fit": fit_value(sim, observed, cfg),
                "values": {**trial.params, **profiled},
                "curve": sim,
            }
        )
        if progress is not None:
            progress(len(rows), len(top), rows[-1]["loss_fit"])
    return sorted(rows, key=lambda r: r["loss_fit"])


@dataclass
class _Fit:
    """What a calibration method found: the calibrated scenario, its best parameters, the best
    fit's curve, the curves of the fit plot's band, the table of trials or steps (and its file
    name), and the method's own summary entries."""

    calibrated: Scenario
    best: dict[str, Any]
    sim: pd.DataFrame
    band: list[pd.DataFrame]
    table: pd.DataFrame
    table_name: str
    extra: dict[str, Any]


def _check_options(
    method: str,
    backend: str,
    workers: int | None,
    names: OptionNames,
    trials: int | None = None,
    ray_address: str | None = None,
) -> None:
    """Refuse an unknown method or backend, a bad number of trials (or steps) or workers, a Ray
    address without the Ray backend, and a backend other than local or any workers for the
    gradient, whose steps run one after the other; messages name the options as ``names`` does
    (``--method`` or ``method``)."""
    if trials is not None and (isinstance(trials, bool) or not isinstance(trials, int) or trials < 1):
        # 0 was taken as "the scenario's count" and -1 ended in Optuna's "No trials are completed yet"
        raise CalibrationError(f"{names.name('trials')}: {trials!r} is not allowed; give a whole number, at least 1")
    if method not in METHODS:
        raise CalibrationError(f"{names.name('method')}: {method!r} is not allowed; allowed: {', '.join(METHODS)}")
    if backend not in BACKENDS:
        raise CalibrationError(f"{names.name('backend')}: {backend!r} is not allowed; allowed: {', '.join(BACKENDS)}")
    check_workers(workers, CalibrationError, names.name("workers"))
    check_ray_address(ray_address, backend, CalibrationError, names)
    gradient = names.given("method", "gradient")
    if method == "gradient" and backend != "local":
        raise CalibrationError(f"{names.name('backend')}: {backend!r} is not allowed with {gradient}; allowed: local")
    if method == "gradient" and workers is not None:
        raise CalibrationError(
            f"{names.name('workers')}: {workers} is not allowed with {gradient}, whose steps run one after the "
            f"other in this process; leave {names.name('workers')} out, or use {names.given('method', 'optuna')}"
        )


def _fit_by_gradient(
    sc: Scenario,
    data: dict[str, Any],
    source: str,
    observed: pd.DataFrame,
    progress: Progress,
    steps: int | None,
) -> _Fit:
    """Adam on the transmission rate (and weekly multipliers); the calibrated scenario is run
    once for the best fit's curve (no band)."""
    from abm.calibration import gradient

    cfg = sc.calibration
    assert cfg is not None
    beta, weekly_m, done = gradient.optimize(sc, observed, progress, steps)
    if not all(math.isfinite(v) for v in [beta, *(weekly_m or [])]):
        raise CalibrationError(
            f"{source}: calibration.gradient.learning_rate: {cfg.gradient.learning_rate}: the fit diverged (beta or "
            "a weekly multiplier is no longer a finite number); use a smaller learning rate (default 0.05)"
        )
    calibrated_data, best = gradient.calibrated_values(data, beta, weekly_m)
    calibrated = validate(calibrated_data, source)
    sim = simulated(run(calibrated, warn=False), cfg)
    table = pd.DataFrame([vars(s) for s in done])
    extra = {
        "steps": len(done),
        "seconds_per_step_median": float(table["seconds"].median()),
        "loss_fit": fit_value(sim, observed, cfg),
    }
    return _Fit(calibrated, best, sim, [], table, "steps.csv", extra)


def _run_study(
    cfg: CalibrationConfig,
    observed: pd.DataFrame,
    n_trials: int,
    run_batch: RunBatch,
    progress: Progress,
    journal: TrialJournal | None = None,
    reused: Callable[[int], None] | None = None,
) -> tuple[optuna.Study, dict[int, pd.DataFrame]]:
    """The seeded TPE study after ``n_trials`` trials run by ``run_batch`` (or told from
    ``journal``; ``reused`` is told how many, :func:`run_trials`), and each trial's
    observed-like curve by trial number."""
    curves: dict[int, pd.DataFrame] = {}
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # a failed trial's error is raised
    study = optuna.create_study(direction="minimize", sampler=optuna.samplers.TPESampler(seed=cfg.seed))
    run_trials(study, cfg, n_trials, run_batch, trial_scorer(observed, cfg, curves), progress, journal, reused)
    return study, curves


def _trials_table(
    study: optuna.Study, reranked: list[dict[str, Any]], best_number: int, cfg: CalibrationConfig
) -> pd.DataFrame:
    """Optuna's table of trials, with the re-runs' loss and re-profiled observation values (where
    trials were re-ranked) and which trial was chosen."""
    table = study.trials_dataframe()
    if reranked:
        again = {r["trial"]: r for r in reranked}
        table["rerank_loss_fit"] = table["number"].map(lambda k: again[k]["loss_fit"] if k in again else math.nan)
        for key in profiled_keys(cfg):
            table[f"rerank_{key}"] = table["number"].map(
                lambda k, key=key: again.get(k, {}).get("values", {}).get(key, math.nan)
            )
    table["chosen"] = table["number"] == best_number
    return table


def _fit_by_optuna(
    sc: Scenario,
    data: dict[str, Any],
    source: str,
    observed: pd.DataFrame,
    trials: int | None,
    progress: Progress,
    backend: str,
    workers: int | None,
    ray_address: str | None,
    names: OptionNames = COMMAND_LINE,
    journal: TrialJournal | None = None,
    rerun_progress: Progress = None,
    note: Callable[[str], None] | None = None,
    reused: Callable[[int], None] | None = None,
    memory: bool = True,
) -> _Fit:
    """The study's trials (those ``journal`` holds told from it), then the best: the best of the
    top trials re-run with more replicates (``rerank_trials``, on the trials' workers; ``note``
    is told as they start and ``rerun_progress`` of each), or else the study's best trial; the
    band from the best curves. ``note`` is told too, as local workers start, where their runs
    may need more memory than this machine has (:func:`trials_memory_note`; ``memory`` False:
    not told, the caller warned of it). Messages name the options as ``names`` does."""
    cfg = sc.calibration
    assert cfg is not None
    n_trials = trials or cfg.trials
    rerun: dict[str, float] = {}  # what the re-ranked runs changed (their replicates)
    reranked: list[dict[str, Any]] = []
    runner = trial_runner(cfg, data, source, backend, workers, ray_address, sc.simulation.device, n_trials, names)
    with runner as (run_batch, used):
        if backend == "local" and note is not None and memory:  # as the workers start
            text = trials_memory_note(sc, used["workers"], names)
            if text is not None:
                note(text)
        study, curves = _run_study(cfg, observed, n_trials, run_batch, progress, journal, reused)
        ranked = sorted(
            (t for t in study.trials if t.value is not None and math.isfinite(t.value)), key=lambda t: t.value
        )
        if cfg.rerank_trials > 0:
            rerun = {"simulation.replicates": cfg.rerank_replicates}
            top = ranked[: cfg.rerank_trials]
            if note is not None:  # the re-runs take longer than the trials: say what runs now
                note(
                    f"re-running the {counted(len(top), 'trial')} of lowest loss with "
                    f"{counted(cfg.rerank_replicates, 'replicate')} each (calibration.rerank_trials, "
                    "rerank_replicates): the best re-run is the fit"
                )
            reranked = rerank(top, cfg, run_batch, observed, rerun, rerun_progress)
    if reranked:
        best_number, drawn, sim = reranked[0]["trial"], reranked[0]["values"], reranked[0]["curve"]
        # the band from the re-run curves too, so that it holds the best fit drawn from them
        band = [r.pop("curve") for r in reranked][: cfg.band_trials]
        band_numbers = [r["trial"] for r in reranked][: cfg.band_trials]
    else:
        best_trial = study.best_trial
        best_number, drawn = best_trial.number, {**best_trial.params, **best_trial.user_attrs}
        sim = curves[best_number]
        band = [curves[t.number] for t in ranked[: cfg.band_trials]]
        band_numbers = [t.number for t in ranked[: cfg.band_trials]]
    best = {k: drawn[k] for k in cfg.parameters}
    calibrated = validate(with_values(data, {**best, **rerun}), source)
    extra: dict[str, Any] = {
        "trials": n_trials,
        "backend": backend,
        "parallel_trials": cfg.parallel_trials,  # the sampler's batch: the trials depend on it
        **used,  # workers: how many of a batch ran at once (the trials do not depend on it); Ray: ray_cpus
        "best_trial": best_number,
        "loss_fit": reranked[0]["loss_fit"] if reranked else study.best_value,
        "band_trials": band_numbers,  # the trials whose curves make the fit plot's band
    }
    if reranked:
        extra["rerank_replicates"] = cfg.rerank_replicates
        extra["reranked"] = reranked
    return _Fit(calibrated, best, sim, band, _trials_table(study, reranked, best_number, cfg), "trials.csv", extra)


def calibrate(
    path: str | Path,
    out: str | Path | None = None,
    trials: int | None = None,
    sets: list[str] | None = None,
    progress: Progress = None,
    *,
    note: Callable[[str], None] | None = None,
    method: str = "optuna",
    backend: str = "local",
    workers: int | None = None,
    ray_address: str | None = None,
    names: OptionNames = PYTHON,
    agents: int | None = None,
    replicates: int | None = None,
    device: str | None = None,
    rerun_progress: Progress = None,
    reused: Callable[[int], None] | None = None,
    warn: bool = False,
) -> dict[str, Any]:
    """Fit the scenario's free parameters (``optuna``) or its transmission rate and weekly
    transmission multipliers (``gradient``); write the calibrated scenario, the trials (or
    gradient steps), a fit plot and ``calibration.json`` to ``out`` (default
    ``runs/<name>-calibration``); return the summary, with ``folder``, the folder written, and
    ``bounds``, each free parameter's ``[low, high]``, added (for the command's table; not in
    ``calibration.json``).
    ``backend``: where Optuna trials run, on this machine (``local``) or as Ray tasks (``ray``);
    ``workers``: how many run at once (:func:`trial_runner`). The sampler asks for
    ``calibration.parallel_trials`` trials at a time, so the trials do not depend on
    ``workers``. Finished Optuna trials are kept beside ``out`` until it is written, and a
    calibration of the same scenario continues from them (:mod:`abm.calibration.journal`).
    ``note`` is told of kept trials found (before anything runs) and, when stopped, of the
    trials kept. Messages
    name the arguments as Python has them (``method``, ``sets``); ``abm calibrate`` gives
    ``names=COMMAND_LINE`` (``--method``, ``--set``). ``agents``, ``replicates`` (per trial) and
    ``device`` replace the scenario's, as ``abm calibrate --agents`` does. ``progress`` is told
    of each finished trial (or gradient step) and ``rerun_progress`` of each re-run of the
    re-ranking (``calibration.rerank_trials``; ``note`` is told as it starts): how many are done,
    of how many, and the last loss. Kept trials are told to ``progress`` too, at once, as they
    are read; ``reused`` is told how many there were as the first trial that runs begins (not
    when every trial was kept), so that a pace taken from ``progress`` can leave them out (``abm
    calibrate``'s time left). The notes on the inputs (settings not used, more ``workers`` than
    CPUs, more agents than residents, the free parameters the gradient method holds at the
    scenario's values, local workers whose runs may need more memory than this machine has):
    ``warn`` True, each is given as a warning of class :class:`abm.scenario_notes.ScenarioNote`
    before anything runs, at the line that called :func:`abm.calibrate` (which calls this);
    False (``abm calibrate``, which prints the first two itself), ``note`` is told of the others,
    before anything runs (the memory, as the workers start)."""
    _check_options(method, backend, workers, names, trials, ray_address)
    path = Path(path)
    overrides = {"agents": agents, "replicates": replicates, "device": device}
    data, sc, observed = checked_inputs(path, sets, method, names, overrides)
    source = names.scenario(str(path), list(sets or []), given(overrides))
    # The gradient method and local trials (in this process or its workers) run on this machine;
    # on Ray every simulation (trials and re-ranked trials) runs on the cluster.
    if method == "gradient" or backend == "local":
        check_device(sc, source)
    cfg = sc.calibration
    assert cfg is not None
    target = check_target(Path(out) if out is not None else Path("runs") / f"{sc.name}-calibration", "calibration")
    fixed = held_fixed(cfg, method)
    held = scenario_notes.held_at_scenario_values(fixed, names)
    if warn:  # as abm calibrate notes them, before anything runs
        notes: list[ScenarioNote | str] = [
            *unapplied_settings(path, sets, names=names),
            *too_many_workers(workers, backend, names),
            *scenario_notes.residents(sc),
            *held,
        ]
        if method == "optuna" and backend == "local":  # the note abm calibrate gives as its workers start
            n = local_workers(cfg, workers, sc.simulation.device, trials)
            at_once = workers_record(n, batch_sizes(cfg, trials)[1])["workers"]
            notes += filter(None, [trials_memory_note(sc, at_once, names)])
        scenario_notes.warn(notes, stacklevel=3)
    elif note is not None:  # as abm run notes it, before anything runs; and the parameters held, not after a long fit
        residents = more_agents_than_residents(sc)
        for text in [*([residents] if residents is not None else []), *held]:
            note(text)
    start = time.perf_counter()
    journal = None
    if method == "gradient":
        fit = _fit_by_gradient(sc, data, source, observed, progress, trials)
    else:
        journal = TrialJournal(target, sc, cfg, note)
        # bad values, or a plug-in that fails, would fail again: nothing is kept
        with journal.keeping(bad=(ScenarioError, CalibrationError, PluginFailure)):
            fit = _fit_by_optuna(
                sc,
                data,
                source,
                observed,
                trials,
                progress,
                backend,
                workers,
                ray_address,
                names,
                journal,
                rerun_progress,
                note,
                reused,
                memory=not warn,
            )
    # the trials are done, the folder not yet written: Ctrl-C now says what is kept, as during the trials
    with journal.said_if_unwritten() if journal is not None else contextlib.nullcontext():
        summary = {
            "scenario": sc.name,
            "method": method,
            "targets": cfg.targets,
            # optuna: the sampler's seed; gradient: the simulation seed of step 0 (step k uses seed + k)
            "seed": cfg.seed if method == "optuna" else sc.simulation.seed,
            **fit.extra,
            "best_parameters": fit.best,
            "at_bounds": at_bounds(fit.best, cfg),  # gradient: the rate's bounds, where calibration.parameters has them
            # gradient: the free parameters it does not fit, held at the scenario's values
            "held_fixed": fixed,
            "fit_window": [str(d) for d in cfg.fit_window],
            "holdout_window": [str(d) for d in cfg.holdout_window] if cfg.holdout_window else None,
            "fit": losses(fit.sim, observed, cfg.fit_window),
            "holdout": losses(fit.sim, observed, cfg.holdout_window) if cfg.holdout_window else None,
            "seconds": time.perf_counter() - start,
        }
        bounds = {key: [b.low, b.high] for key, b in cfg.parameters.items()}
        with unwritten_said(target), atomic_folder(target, "calibration") as tmp:
            (tmp / "calibrated.yaml").write_text(fit.calibrated.resolved_yaml(), encoding="utf-8")
            fit.table.to_csv(tmp / fit.table_name, index=False)
            (tmp / "calibration.json").write_text(dumps(summary), encoding="utf-8")
            weekly_fit_table(observed, fit.sim, fit.band, cfg).to_csv(tmp / "fit_weekly.csv", index=False)
            plot_fit(observed, fit.sim, fit.band, cfg, tmp / "fit.png", fit.calibrated.simulation.replicates)
            files = sorted(p.name for p in tmp.iterdir())
            page = calibration_report_html({**summary, "bounds": bounds}, files)
            (tmp / "report.html").write_text(page, encoding="utf-8")
    if journal is not None:
        journal.remove()
    return {**summary, "folder": str(target), "bounds": bounds}
