"""Metamorphic dose-response checks of the interventions: a stronger setting of an intervention
must not make the epidemic worse in expectation (and, where the design has the power to show it,
must make it measurably better), and what it buys must not fall when more is bought.

The configuration and the cases are those of benchmarks/dose_response.py (10,000 King County
agents, 100 days, 8 replicates, seed 1234, the calibrated transmission rate 3.137, 20 seeded
infections); its table (BENCHMARKS.md) gives the measured differences. The weaker and the stronger
setting of a case run on the same seed: replicate r of both has the same population, the same
seeded agents and the same random streams, so the two are paired until the intervention first
acts differently (test_variants_share_the_epidemic_until_the_intervention_acts).

The noise model of the tolerances. For an outcome Y, d_r = Y_r(stronger) - Y_r(weaker) over the
R = 8 replicates are independent (each replicate draws its own seeded agents and contacts), so the
mean difference D has standard error SE = sd(d) / sqrt(R). Two one-sided checks at z = 3:

* not worse: direction * D > -3 SE. Were the stronger setting no better (expected difference 0,
  the boundary of the property), D/SE would exceed 3 against the direction with probability 0.13%
  (normal) or about 1% (Student t on R - 1 = 7 degrees of freedom, SE being estimated); a failure
  is evidence that the stronger setting makes things worse.
* effect: direction * D > 3 SE, asserted only where the measured z is 5 or more (see
  EFFECTS), so that a new draw of the same design (another seed, a change to the random
  streams) would still pass unless the effect shrank: at a true z of 5, P(observed z < 3) is
  about 2% (normal). It catches an intervention that silently stops acting.

Vaccine doses and their cost are deterministic given the supply (every dose produced is used
here): those are checked exactly, replicate by replicate.

The default run holds one case per intervention (13 runs: 30 s on a 2-core machine shared with a CI run, 28 s of CPU);
a second vaccination case and two more contact layers are marked slow.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
AGENTS, DAYS, REPLICATES, SEED = 10_000, 100, 8, 1234
Z = 3.0

# Outcomes whose effect (not only its sign) is asserted: measured |z| >= 5 with this configuration
# (benchmarks/dose_response.py, seed 1234). The others are checked for "not worse" only.
EFFECTS = {
    ("vaccination_doses", "infections"),
    ("vaccination_start", "infections"),
    ("testing_capacity", "infections"),
    ("quarantine_compliance", "infections"),
    ("app_adoption", "infections"),
    ("app_adoption", "app_notifications"),
    ("manual_tracing_capacity", "infections"),
    ("community_multiplier", "infections"),
    ("prior_immunity", "infections"),
    ("occupation_multiplier", "infections"),
    ("transmission_rate", "infections"),
    ("transmission_rate", "peak_day"),
}
SLOW = {"vaccination_start", "occupation_multiplier", "household_multiplier"}


def _load() -> ModuleType:
    """benchmarks/dose_response.py, loaded as a module (its main() not run)."""
    spec = importlib.util.spec_from_file_location("benchmark_dose_response", ROOT / "benchmarks" / "dose_response.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


DR = _load()
CASES = {case.name: case for case in DR.CASES}
_RUNS: dict[str, Any] = {}


def run(changes: dict[str, Any]) -> Any:
    """The run of a setting (cached for the module: cases share their no-intervention run)."""
    key = repr(changes)
    if key not in _RUNS:
        _RUNS[key] = DR.abm.run(DR.scenario(changes, AGENTS, DAYS, REPLICATES, SEED))
    return _RUNS[key]


def outcomes(changes: dict[str, Any]) -> dict[str, np.ndarray]:
    """Per-replicate outcomes of a setting (benchmarks/dose_response.py's ``outcomes``)."""
    return DR.outcomes(run(changes))


def params() -> list[Any]:
    """(case, outcome) pairs, the slow cases marked."""
    out = []
    for case in DR.CASES:
        marks = [pytest.mark.slow] if case.name in SLOW else []
        for outcome in case.outcomes:
            if outcome in ("doses", "vaccine_cost"):
                continue  # deterministic: test_vaccine_doses_and_cost_rise_with_the_supply
            out.append(pytest.param(case.name, outcome, marks=marks, id=f"{case.name}-{outcome}"))
    return out


@pytest.mark.parametrize(("name", "outcome"), params())
def test_stronger_setting_is_not_worse(name: str, outcome: str) -> None:
    """The stronger setting moves the outcome in its direction, or leaves it, in expectation: the
    paired difference is not beyond 3 standard errors the wrong way; where EFFECTS lists the
    outcome, it is beyond 3 standard errors the right way."""
    case = CASES[name]
    direction = case.outcomes[outcome]
    d = DR.difference(outcomes(case.weak)[outcome], outcomes(case.strong)[outcome])
    means = f"weaker {d.weak_mean:.1f}, stronger {d.strong_mean:.1f}"
    shown = f"{name} {outcome}: {means}, diff {d.mean:+.1f} (SE {d.se:.1f})"
    assert direction * d.mean > -Z * d.se, f"stronger setting is worse: {shown}"
    if (name, outcome) in EFFECTS:
        assert direction * d.mean > Z * d.se, f"no effect at z = {Z}: {shown}"


@pytest.mark.parametrize("name", ["vaccination_doses", pytest.param("vaccination_start", marks=pytest.mark.slow)])
def test_vaccine_doses_and_cost_rise_with_the_supply(name: str) -> None:
    """Exactly, in every replicate: the stronger programme (more doses a day, or an earlier start)
    gives more doses; the cost is the price times the doses given (none is lost or billed twice);
    every dose produced from the start day is given (the supply binds in this population), so the
    doses are the supply's; and a larger supply costs more."""
    case = CASES[name]
    weak, strong = outcomes(case.weak), outcomes(case.strong)
    for setting, result in ((case.weak, weak), (case.strong, strong)):
        cfg = setting["interventions"]["vaccination"]
        price = 20.0  # the default price_per_dose
        np.testing.assert_array_equal(result["vaccine_cost"], price * result["doses"])
        supply = cfg["daily_doses_per_100k"] * AGENTS / 1e5 * (DAYS - cfg["start_day"])
        np.testing.assert_array_equal(result["doses"], np.full(REPLICATES, supply))
    assert (strong["doses"] > weak["doses"]).all()
    assert (strong["vaccine_cost"] > weak["vaccine_cost"]).all()


def test_variants_share_the_epidemic_until_the_intervention_acts() -> None:
    """Same seed, same draws: vaccination from day 10 protects no one before day 24 (dose 1 takes
    14 days) and draws from streams of its own, so every replicate's epidemic is the same as
    without vaccination up to day 23, to the agent count; what the pairing of the differences
    rests on. (The reproduction number's columns look forward, to what the agents infected on a
    day go on to cause, and are left out.)"""
    base = run({}).timeseries
    vacc = run(CASES["vaccination_doses"].weak).timeseries
    forward = {"secondary_infections", "reproduction_number"}
    columns = [c for c in base.columns if c in vacc.columns and c not in forward]
    assert "generation_interval" in columns
    early = base[base.day < 24][columns].reset_index(drop=True)
    np.testing.assert_array_equal(early.to_numpy(), vacc[vacc.day < 24][columns].reset_index(drop=True).to_numpy())
    later = base[base.day == DAYS - 1].cumulative_infected.to_numpy()
    assert (later != vacc[vacc.day == DAYS - 1].cumulative_infected.to_numpy()).any()
