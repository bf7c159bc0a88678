"""Gradient calibration: Adam on log beta and a weekly transmission multiplier series through
the engine's differentiable mode.

In that mode every infection draw is the ordinary engine's 0/1 outcome for the same seed, and
each infected agent carries a weight, 1.0 in value, that multiplies its infectiousness and every
count it adds to; by default its gradient is the score of the agent's infection history: the
likelihood ratio of the infecting draw and of the earlier draws that did not infect it
(``calibration.gradient.estimator``; :mod:`abm.engine.relaxed`). So the weekly simulated admissions, deaths and cases
carry gradients to the daily transmission rate through chains of infection.

The rate on day d is ``beta * m[week(d)]`` with ``m_k = exp(theta_k - mean(theta))`` (so beta
is the geometric-mean level), one week per 7 days from day 0 up to the end of the fit window;
the last multiplier is held after that. Where ``calibration.parameters`` bounds
``disease.transmission_rate``, log beta is projected onto the logs of those bounds after every
step. The calibrated scenario expresses the multipliers as
``interventions.contact_multipliers.changes`` (one per week, multiplying all three layers, which
is the same as multiplying the transmission rate), so ``abm run`` re-creates the fit with the
ordinary engine.

The observation model is the Optuna path's, the same code on tensors
(:func:`abm.calibration.observation.observe_arrays`, differentiable in the daily counts), with
the scenario's values held fixed: the gradient method fits beta and the weekly multipliers only.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch

from abm.calibration.config import CalibrationConfig
from abm.calibration.observation import observe_arrays
from abm.calibration.observed import CalibrationError, fit_loss, weekly
from abm.engine import Simulation, Stage
from abm.engine.disease import SYMPTOMATIC
from abm.memory import cpu_allocation_failed
from abm.plurals import counted
from abm.populations import Population, load_region
from abm.runs import population_of, simulation_of
from abm.scenario import Scenario
from abm.threads import torch_threads


@dataclass
class GradientStep:
    """One Adam step: its seed, the fit loss before the update, beta, and its seconds."""

    step: int
    seed: int
    loss: float
    beta: float
    seconds: float


def simulation(sc: Scenario, pop: Population, seed: int, estimator: str) -> Simulation:
    """A differentiable simulation of the scenario with run seed ``seed``."""
    return simulation_of(
        sc, pop, seed=seed, differentiable=True, gradient_estimator=estimator, attribute_infections=False
    )


def simulated_series(sim: Simulation, cfg: CalibrationConfig, scale: float) -> dict[str, torch.Tensor]:
    """Daily simulated targets (mean over replicates, scaled to the region) from the weighted
    entries of a finished differentiable run, through the observation model
    (:func:`abm.calibration.observation.observe_arrays`), differentiable."""
    # On the CPU, where the parameters and observed series live (a copy keeps the gradient).
    entries = torch.stack(sim.recorder.weighted_entries).mean(dim=1).cpu() * scale  # [days, stage]
    raw = {
        "hospital_admissions": entries[:, Stage.HOSPITALIZED],
        "deaths": entries[:, Stage.DEATH],
        "symptomatic_onsets": entries[:, list(SYMPTOMATIC)].sum(dim=1),
    }
    return observe_arrays(raw, cfg.observation, cfg.targets, cfg.start_date)


def weeks_to_fit(cfg: CalibrationConfig) -> int:
    """Number of weekly multipliers: weeks from day 0 through the fit window's last day."""
    return (cfg.fit_window[1] - cfg.start_date).days // 7 + 1


def daily_rate(log_beta: torch.Tensor, theta: torch.Tensor, days: int) -> torch.Tensor:
    """beta * m[week(d)] for d = 0..days-1, the last multiplier held."""
    week = (torch.arange(days) // 7).clamp_max(theta.shape[0] - 1)
    return torch.exp(log_beta + (theta - theta.mean()).index_select(0, week))


def log_bounds(cfg: CalibrationConfig) -> tuple[float, float]:
    """Bounds on log beta: the logs of ``calibration.parameters``' bounds on
    ``disease.transmission_rate`` where it is listed, else none (-inf, inf)."""
    b = cfg.parameters.get("disease.transmission_rate")
    if b is None:
        return -math.inf, math.inf
    return (math.log(b.low) if b.low > 0 else -math.inf), math.log(b.high)


def multipliers(theta: torch.Tensor) -> list[float]:
    """The weekly multipliers m_k = exp(theta_k - mean(theta))."""
    return torch.exp(theta - theta.mean()).tolist()


def calibrated_values(
    data: dict[str, Any], beta: float, weekly: list[float] | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Scenario data with the fitted rate and weekly multipliers (as contact changes on every
    layer, appended to the scenario's own changes), and the fitted values for the summary. A
    ``contact_multipliers`` block the scenario disables played no part in the fit, so it is replaced
    by one that holds the fitted changes only (kept disabled, they would be ignored by ``abm run``)."""
    out = dict(data)
    disease = dict(out.get("disease") or {})
    disease["transmission_rate"] = round(beta, 6)
    out["disease"] = disease
    values: dict[str, Any] = {"disease.transmission_rate": round(beta, 6)}
    if weekly:
        interventions = dict(out.get("interventions") or {})
        cm = dict(interventions.get("contact_multipliers") or {})
        if cm.get("enabled") is False:
            cm = {}
        changes = list(cm.get("changes") or [])
        for k, m in enumerate(weekly):
            v = round(m, 6)
            until = 7 * (k + 1) if k < len(weekly) - 1 else None
            changes.append({"from_day": 7 * k, "until_day": until, "household": v, "occupation": v, "community": v})
        cm["changes"] = changes
        interventions["contact_multipliers"] = cm
        out["interventions"] = interventions
        values["weekly_transmission_multipliers"] = [round(m, 6) for m in weekly]
    return out, values


def optimize(
    sc: Scenario,
    observed: pd.DataFrame,
    progress: Callable[[int, int, float], None] | None = None,
    steps: int | None = None,
) -> tuple[float, list[float] | None, list[GradientStep]]:
    """Run Adam on log beta (and the weekly log multipliers); return beta, the multipliers
    (None when not fitted) and the steps."""
    cfg = sc.calibration
    assert cfg is not None
    g = cfg.gradient
    n_steps = steps or g.steps
    region = load_region(sc.population.region)
    pop = population_of(sc, region)
    scale = region.figures.population / pop.size
    obs = {t: torch.tensor(weekly(observed, cfg.fit_window)[t].to_numpy(), dtype=torch.float32) for t in cfg.targets}
    log_beta = torch.tensor(math.log(max(sc.disease.transmission_rate, 1e-6)), requires_grad=True)
    low, high = log_bounds(cfg)
    with torch.no_grad():
        log_beta.clamp_(low, high)
    theta = torch.zeros(weeks_to_fit(cfg) if g.weekly_multipliers else 1, requires_grad=True)
    params = [log_beta, theta] if g.weekly_multipliers else [log_beta]
    adam = torch.optim.Adam(params, lr=g.learning_rate)
    # The step size falls to 0 along a cosine: the simulated losses are noisy (a new seed per
    # step), so late steps must be small for the parameters to settle.
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(adam, T_max=n_steps)
    history = []
    try:
        with torch_threads(sc.simulation.threads):
            for step in range(n_steps):
                history.append(adam_step(sc, cfg, pop, scale, obs, log_beta, theta, adam, step))
                with torch.no_grad():  # projected onto the scenario's bounds, as Optuna draws within them
                    log_beta.clamp_(low, high)
                schedule.step()
                if progress is not None:
                    progress(step + 1, n_steps, history[-1].loss)
    except (torch.OutOfMemoryError, MemoryError, RuntimeError) as exc:
        # a GPU's, or on the CPU torch's allocator failing or a MemoryError; any other error passes
        if not isinstance(exc, torch.OutOfMemoryError) and not cpu_allocation_failed(exc):
            raise
        where = sc.simulation.device if isinstance(exc, torch.OutOfMemoryError) else "cpu"
        raise CalibrationError(
            f"{sc.name}: population.agents: {sc.population.agents} agents x "
            f"{counted(sc.simulation.replicates, 'replicate')} "
            f"of a differentiable run do not fit in the memory of {where}; use fewer agents or replicates"
        ) from None
    weekly_m = multipliers(theta.detach()) if g.weekly_multipliers else None
    # exactly within the bounds (exp of the float32 log of a bound can pass it by a rounding)
    beta = min(max(math.exp(log_beta.item()), math.exp(low)), math.exp(high))
    return beta, weekly_m, history


def adam_step(
    sc: Scenario,
    cfg: CalibrationConfig,
    pop: Population,
    scale: float,
    obs: dict[str, torch.Tensor],
    log_beta: torch.Tensor,
    theta: torch.Tensor,
    adam: torch.optim.Optimizer,
    step: int,
) -> GradientStep:
    """One differentiable simulation (run seed: the scenario's seed + step), its loss and
    gradient, and one Adam update."""
    g = cfg.gradient
    t0 = time.perf_counter()
    seed = sc.simulation.seed + step
    sim = simulation(sc, pop, seed, g.estimator)
    sim.daily_rate = daily_rate(log_beta, theta, sim.days).to(sim.device)
    sim.run()
    loss = fit_loss(simulated_series(sim, cfg, scale), obs, cfg)
    total = loss
    if theta.shape[0] > 1 and g.smoothness > 0:
        total = total + g.smoothness * ((theta[1:] - theta[:-1]) ** 2).mean()
    adam.zero_grad()
    total.backward()
    beta = math.exp(log_beta.item())
    adam.step()
    return GradientStep(step, seed, loss.item(), beta, time.perf_counter() - t0)
