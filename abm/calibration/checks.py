"""The checks of a scenario's calibration section against the rest of the scenario, made before
anything runs by every command that reads the scenario: ``abm validate``, ``abm run`` and ``abm
sweep`` (:func:`abm.overrides.resolve`) as ``abm calibrate``
(:func:`abm.calibration.optimize.checked_inputs`), so that they accept and refuse the same
scenarios with the same messages. Torch-free: ``abm validate`` loads no engine.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from abm.calibration.config import BUNDLED_FIPS, CalibrationConfig
from abm.calibration.errors import CalibrationError
from abm.calibration.observed import load_observed
from abm.key_paths import lookup
from abm.populations import load_region
from abm.scenario import COMMAND_LINE, Scenario, ScenarioError, apply_set, overlaps, validate
from abm.set_options import OptionNames

RATE = "disease.transmission_rate"  # the one key of calibration.parameters the gradient method fits
OBSERVATION = "calibration.observation."

# What check_horizon adds where a command may run the scenario without calibrating it.
FEWER_DAYS = "; a run of fewer days needs no calibration section: set calibration: null"


def with_values(data: dict[str, Any], values: dict[str, float]) -> dict[str, Any]:
    """Scenario data with each ``key.path`` set to its value."""
    for key, value in values.items():
        data = apply_set(data, f"{key}={json.dumps(value)}")
    return data


def check_horizon(days: int, cfg: CalibrationConfig, source: str, hint: str = "") -> None:
    """The simulation's ``days`` must cover every window (``hint``: what the message adds after
    the windows' need, such as :data:`FEWER_DAYS`)."""
    last = max(w[1] for w in (cfg.fit_window, cfg.holdout_window) if w is not None)
    need = (last - cfg.start_date).days + 1
    if days < need:
        raise CalibrationError(
            f"{source}: simulation.days: {days} is too short; the windows need {need} days from {cfg.start_date}{hint}"
        )


# Scenario keys that are no model parameter, with why fitting one is refused.
NOT_FITTED = {
    "simulation.seed": "a random seed is not a model parameter: fitting it would pick the luckiest draw",
    "simulation.replicates": "the number of replicates sets the noise of a trial, not the model",
    "simulation.device": "the device runs the model, it is not part of it",
    "simulation.threads": "threads run the model, they are not part of it",
    "population.agents": "the number of agents samples the population, it is not a model parameter",
    "calibration": "the calibration's own settings are not model parameters (calibration.observation.* are)",
    "outputs": "outputs change no simulated value",
}


def check_parameters(data: dict[str, Any], cfg: CalibrationConfig, source: str) -> None:
    """Each free parameter must name a scenario key of the model (not :data:`NOT_FITTED`) whose
    bounds both give a valid scenario that still covers the windows; checked before anything
    runs."""
    for key, bounds in cfg.parameters.items():
        refused = next(
            (why for prefix, why in NOT_FITTED.items() if overlaps(key, prefix) and not key.startswith(OBSERVATION)),
            None,
        )
        if refused:
            raise CalibrationError(f"{source}: calibration.parameters.{key}: not allowed; {refused}")
        parts = key.split(".")
        if parts[0] == "interventions" and len(parts) > 2 and lookup(data, ("interventions", parts[1])) is None:
            raise CalibrationError(
                f"{source}: calibration.parameters.{key}: the scenario has no interventions.{parts[1]}, and "
                "varying one of its values would turn it on with its defaults; add it to the scenario first"
            )
        if not bounds.integer:  # a value between the bounds, as the sampler draws it
            inside = bounds.low + 0.382 * (bounds.high - bounds.low)
            try:
                validate(with_values(data, {key: inside}), source)
            except ScenarioError as exc:
                if "fractional part" in str(exc):  # validation_errors.PLAIN["int_from_float"]: a whole-number field
                    raise CalibrationError(
                        f"{source}: calibration.parameters.{key}: takes whole numbers; add integer: true"
                    ) from None  # any other fault: the bounds' checks below name it
        for which, value in (("low", bounds.low), ("high", bounds.high)):
            drawn = int(value) if bounds.integer else value
            where = f"{source}: calibration.parameters.{key}: {which} {drawn!r}"
            try:
                if key == "simulation.days":  # the windows' need first: it says why, before other checks
                    check_horizon(int(drawn), cfg, source)
                sc = validate(with_values(data, {key: drawn}), source)
                assert sc.calibration is not None
                check_horizon(sc.simulation.days, sc.calibration, source)
            except ScenarioError as exc:
                reason = str(exc).removeprefix(f"{source}: invalid scenario")
                at, _, problem = reason.removeprefix(": ").partition(": ")
                if "\n" not in reason and problem.startswith("unknown key") and overlaps(key, at):
                    # the key path, not the bound: any value would be refused (a misspelt key)
                    raise CalibrationError(
                        f"{source}: calibration.parameters.{key}: not allowed; {key} names no setting of the "
                        f"scenario ({at}: {problem})"
                    ) from None
                raise CalibrationError(f"{where} gives an invalid scenario{reason}") from None
            except CalibrationError as exc:
                raise CalibrationError(f"{where}: {str(exc).removeprefix(source + ': ')}") from None


def check_series_region(sc: Scenario, source: str) -> None:
    """A bundled observed series belongs to its county: a region of another county (its
    ``fips`` differs) would be fitted to that county's counts, scaled to its own population,
    without a word (``calibration.data`` defaults to King County's series)."""
    assert sc.calibration is not None
    county = BUNDLED_FIPS.get(sc.calibration.data)
    if county is None or sc.population.kind != "region":
        return
    region = load_region(sc.population.region)
    if region.figures.fips != county:
        default = "" if "data" in sc.calibration.model_fields_set else " (the default)"
        raise CalibrationError(
            f"{source}: calibration.data: {sc.calibration.data!r}{default} is not allowed with population.region "
            f"{sc.population.region!r}: it is the observed series of FIPS {county}, and the region is "
            f"{region.name!r} (fips {region.figures.fips!r}); give your region's series as a CSV file with a "
            "date column and one column per target (docs/calibration.md, Data)"
        )


def check_calibration(
    data: dict[str, Any],
    sc: Scenario,
    source: str,
    method: str = "optuna",
    names: OptionNames = COMMAND_LINE,
    hint: str = "",
) -> pd.DataFrame:
    """Check the calibration section of ``sc`` (validated from ``data``, its plain data with the
    data files' full paths) against the rest of the scenario; return the observed series. Cases
    read as positive tests need testing on; a bundled series belongs to the region's county; the
    data cover the windows, and the simulation's days too (``hint`` added to that message); each
    free parameter's bounds give a valid scenario (``optuna``: every parameter; ``gradient``: the
    transmission rate, the one it fits, as real numbers, on one population draw). Messages begin
    with ``source`` and name ``method`` as ``names`` says. The data are checked before the
    windows' length: a window outside the data is named as such, not as a simulation too short
    for it. Raises :class:`CalibrationError`."""
    cfg = sc.calibration
    assert cfg is not None
    gradient = names.given("method", "gradient")
    if "cases" in cfg.targets and cfg.observation.cases == "positive_tests":
        if "testing" not in sc.interventions.enabled():
            raise CalibrationError(
                f"{source}: calibration.observation.cases: positive_tests needs interventions.testing, which the "
                "scenario leaves off (no one is tested, so there are no positive results); enable testing, or "
                "use cases: onsets"
            )
        if method == "gradient":
            raise CalibrationError(
                f"{source}: calibration.observation.cases: positive_tests is not read by {gradient} (its "
                f"differentiable run has no testing); use {names.given('method', 'optuna')}, or cases: onsets"
            )
    check_series_region(sc, source)
    observed = load_observed(cfg, source)
    check_horizon(sc.simulation.days, cfg, source, hint)
    if method == "optuna":
        check_parameters(data, cfg, source)
    elif RATE in cfg.parameters:  # the gradient method keeps the rate within its bounds
        if cfg.parameters[RATE].integer:
            raise CalibrationError(
                f"{source}: calibration.parameters.{RATE}: integer: true is not allowed with {gradient}, which fits "
                f"the rate as a real number; remove integer: true, or use {names.given('method', 'optuna')}"
            )
        check_parameters(data, cfg.model_copy(update={"parameters": {RATE: cfg.parameters[RATE]}}), source)
    if method == "gradient" and cfg.population_draws > 1:
        raise CalibrationError(
            f"{source}: calibration.population_draws: {cfg.population_draws} is not used by "
            f"{gradient}, which fits one population; set it to 1, or use {names.given('method', 'optuna')}"
        )
    return observed
