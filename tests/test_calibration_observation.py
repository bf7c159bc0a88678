"""The observation model of deaths: a geometric reporting delay and a severity multiplier, the
same in the Optuna path (numpy) and the gradient path (torch), and identifiable by a fit."""

from __future__ import annotations

import numpy as np
import optuna
import pandas as pd
import pytest
import torch
import yaml
from pydantic import ValidationError
from scipy import stats

import abm
from abm.calibration import gradient, optimize
from abm.calibration.config import Observation
from abm.calibration.observation import RAW, delay_weights, observe_arrays, reported, severity_multipliers, shifted
from abm.calibration.observed import load_observed, losses, raw_series, simulated
from abm.calibration.optimize import FitLoss, calibrate, fit_value
from abm.populations import build_population, load_region
from abm.scenario import ScenarioError, validate

# Free parameters a scenario without contact multipliers can take (the default ones vary them).
RATE_ONLY = {"disease.transmission_rate": {"low": 1.0, "high": 6.0}}


def scenario(seed: int = 5, **observation: object) -> dict:
    return {
        "name": "deaths",
        "population": {"agents": 20_000},
        "simulation": {"days": 150, "replicates": 2, "seed": seed},
        "seeding": {"infections": {"asymptomatic": 30}},
        "disease": {"transmission_rate": 3.0},
        "calibration": {
            "targets": ["hospital_admissions", "deaths"],
            "fit_window": ["2020-02-08", "2020-04-29"],
            "holdout_window": None,
            "parameters": RATE_ONLY,
            "observation": observation,
        },
    }


CHANGE = {
    "death_multiplier": 1.5,
    "death_multiplier_after": 0.5,
    "death_multiplier_change": ["2020-03-01", "2020-03-31"],  # days 29 to 59
}


@pytest.fixture(scope="module")
def plain_run():
    return abm.run(scenario())


def test_delay_weights_have_the_stated_mean_and_keep_every_death():
    assert delay_weights(0.0, 5).tolist() == [1.0, 0.0, 0.0, 0.0, 0.0]
    w = delay_weights(4.0, 400)
    assert w.sum() == pytest.approx(1.0, abs=1e-12)
    assert (w * np.arange(400)).sum() == pytest.approx(4.0, abs=1e-9)
    assert np.all(np.diff(w) < 0)  # the day of death is the likeliest day of report
    daily = np.array([0.0, 10.0, 0.0, 0.0, 3.0, 0.0, 0.0, 0.0])
    manual = [sum(daily[j] * w[i - j] for j in range(i + 1)) for i in range(len(daily))]
    np.testing.assert_allclose(reported(daily, 4.0), manual)
    np.testing.assert_array_equal(reported(daily, 0.0), daily)


@pytest.mark.parametrize(("mean", "q"), [(1.0, 0.5), (0.5, 1 / 3)])
def test_a_reporting_delay_of_a_day_or_less_is_spread_as_any_other(mean, q):
    """A mean delay of 1 day (or half a day) is geometric too: 8 deaths on day 0 are reported
    (1 - q) q^k on day k, q = mean / (1 + mean), not all on the day of death."""
    expected = [8 * (1 - q) * q**k for k in range(4)]
    np.testing.assert_allclose(reported(np.array([8.0, 0.0, 0.0, 0.0]), mean), expected, rtol=1e-12)


def test_one_observation_model_reads_arrays_and_tensors():
    """The same code reads numpy arrays (the Optuna path) and tensors (the gradient path): equal
    series, and gradients through the severity multiplier and both delays."""
    import datetime as dt

    rng = np.random.default_rng(0)
    raw = {c: rng.random(60) * 100 for c in RAW}
    obs = Observation(ascertainment=0.3, case_delay_days=5, death_delay_days=4.0, **CHANGE)
    targets = ["hospital_admissions", "deaths", "cases"]
    start = dt.date(2020, 2, 10)
    arrays = observe_arrays(raw, obs, targets, start)
    leaves = {c: torch.tensor(v, requires_grad=True) for c, v in raw.items()}
    tensors = observe_arrays(leaves, obs, targets, start)
    for t in targets:
        np.testing.assert_allclose(tensors[t].detach().numpy(), arrays[t], rtol=1e-13, atol=1e-12)
    np.testing.assert_array_equal(arrays["cases"], np.concatenate([np.zeros(5), 0.3 * raw["symptomatic_onsets"][:55]]))
    sum(s.sum() for s in tensors.values()).backward()
    np.testing.assert_array_equal(leaves["symptomatic_onsets"].grad.numpy(), [0.3] * 55 + [0.0] * 5)
    m = severity_multipliers(obs, start, 60)
    kept = reported(np.ones(60), 4.0)[::-1]  # share of day j's deaths reported by the last day
    np.testing.assert_allclose(leaves["deaths"].grad.numpy(), m * kept, rtol=1e-12)
    # [days, n] series move along the days, exactly; a delay past the last day leaves zeros
    wide = np.arange(12.0).reshape(6, 2)
    np.testing.assert_array_equal(shifted(wide, 2), np.vstack([np.zeros((2, 2)), wide[:4]]))
    np.testing.assert_array_equal(shifted(torch.tensor(wide), 9).numpy(), np.zeros((6, 2)))


def test_observation_bounds_are_enforced():
    assert Observation().death_delay_days == 0 and Observation().death_multiplier == 1
    for bad in ({"death_delay_days": -1}, {"death_delay_days": 31}, {"death_multiplier": 0}, {"death_multiplier": 6}):
        with pytest.raises(ValidationError):
            Observation(**bad)
    with pytest.raises(ValidationError):
        Observation(death_delay=3)  # unknown keys are refused


def test_a_changing_severity_moves_linearly_and_then_holds():
    """death_multiplier until the change's first day, linear to death_multiplier_after on its
    last day, held after; both keys or neither, and the period must run forward."""
    import datetime as dt

    obs = Observation(
        death_multiplier=2.0, death_multiplier_after=1.0, death_multiplier_change=["2020-02-03", "2020-02-07"]
    )
    m = severity_multipliers(obs, dt.date(2020, 2, 1), 10)
    np.testing.assert_allclose(m, [2.0, 2.0, 2.0, 1.75, 1.5, 1.25, 1.0, 1.0, 1.0, 1.0])
    constant = severity_multipliers(Observation(death_multiplier=1.5), dt.date(2020, 2, 1), 3)
    np.testing.assert_array_equal(constant, 1.5)
    for bad in (
        {"death_multiplier_after": 1.0},
        {"death_multiplier_change": ["2020-02-03", "2020-02-07"]},
        {"death_multiplier_after": 1.0, "death_multiplier_change": ["2020-02-07", "2020-02-03"]},
        {"death_multiplier_after": 0.0, "death_multiplier_change": ["2020-02-03", "2020-02-07"]},
    ):
        with pytest.raises(ValidationError):
            Observation(**bad)


def test_simulated_deaths_are_delayed_and_scaled(plain_run):
    """Same run, three observation models: admissions do not change; the multiplier scales the
    deaths exactly; the delay moves reports later (cumulative reports never ahead of deaths)
    and loses only what is reported after the last day."""
    deaths = plain_run.result.entries[:, :, 8].mean(axis=1) * (
        plain_run.summary["region_population"] / plain_run.result.agents
    )
    assert deaths.sum() > 100  # enough deaths for the comparison to mean something
    base = simulated(plain_run, validate(scenario(), "x").calibration)
    np.testing.assert_allclose(base["deaths"], deaths)
    cfg = validate(scenario(death_delay_days=6.0, death_multiplier=1.5), "x").calibration
    obs = simulated(plain_run, cfg)
    pd.testing.assert_series_equal(obs["hospital_admissions"], base["hospital_admissions"])
    np.testing.assert_allclose(obs["deaths"], 1.5 * reported(deaths, 6.0))
    assert np.all(np.cumsum(obs["deaths"] / 1.5) <= np.cumsum(deaths) + 1e-6)
    centre = lambda s: (np.arange(len(s)) * s).sum() / s.sum()  # noqa: E731
    assert 3.0 < centre(obs["deaths"].to_numpy()) - centre(deaths) < 6.5
    # a death on day d is reported within the run with probability sum(w[: days - d]): only those are kept
    w = delay_weights(6.0, len(deaths))
    kept = np.array([w[: len(deaths) - d].sum() for d in range(len(deaths))])
    assert obs["deaths"].sum() / 1.5 == pytest.approx((deaths * kept).sum())
    assert (deaths * kept).sum() < deaths.sum()
    # a severity that falls from 1.5 to 0.5 over March scales each death by its day's value
    # before the delay (a day's deaths keep the multiplier of the day they happened)
    falling = validate(scenario(death_delay_days=6.0, **CHANGE), "x").calibration
    m = np.interp(np.arange(len(deaths)), [29, 59], [1.5, 0.5])
    np.testing.assert_allclose(simulated(plain_run, falling)["deaths"], reported(deaths * m, 6.0))


def test_reported_cases_count_onsets_of_symptoms_only():
    """No transmission, 30 initial infections a replicate: 20 asymptomatic (never reported), 7
    presymptomatic (reported once their symptoms start) and 3 already symptomatic (on day 0).
    Cases are 0.2 of the onsets, 2 days later (the default delay), scaled to the region."""
    sc = {
        "name": "onsets",
        "population": {"agents": 500},
        "simulation": {"days": 40, "replicates": 2, "seed": 3},
        "seeding": {"infections": {"asymptomatic": 20, "presymptomatic_mild": 7, "mild_symptoms": 3}},
        "disease": {"transmission_rate": 0.0},
        "calibration": {
            "targets": ["cases"],
            "fit_window": ["2020-02-01", "2020-03-06"],
            "holdout_window": None,
            "parameters": RATE_ONLY,
            "observation": {"ascertainment": 0.2},
        },
    }
    run = abm.run(sc)
    res = run.result
    assert res.new_infections.sum(axis=0).tolist() == [30, 30]
    onsets = res.symptomatic_onsets
    assert onsets[0].tolist() == [3, 3]
    assert onsets.sum(axis=0).tolist() == [10, 10]  # each presymptomatic seed once, within 40 days
    cases = simulated(run, validate(sc, "x").calibration)["cases"].to_numpy()
    scale = run.summary["region_population"] / res.agents
    expected = np.concatenate([[0.0, 0.0], 0.2 * onsets.mean(axis=1)[:-2]]) * scale
    np.testing.assert_allclose(cases, expected)


@pytest.mark.parametrize("severity", [{"death_multiplier": 1.5}, CHANGE], ids=["constant", "changing"])
def test_gradient_path_reports_deaths_as_the_optuna_path_does(plain_run, severity):
    """The differentiable run with the same seed follows the ordinary run, and its observation
    model (torch) gives the same delayed and scaled deaths, with a gradient to the rate. Its
    admissions (entries to HOSPITALIZED) and cases (entries to mild or severe symptoms, times the
    ascertainment, 2 days later) are the Optuna path's too: each target the gradient path fits."""
    data = scenario(death_delay_days=6.0, **severity)
    data["calibration"]["targets"] = ["hospital_admissions", "deaths", "cases"]
    sc = validate(data, "x")
    pop = build_population(load_region(sc.population.region), sc.population.agents, sc.simulation.seed)
    sim = gradient.simulation(sc, pop, sc.simulation.seed, "score")
    rate = torch.tensor(3.0, requires_grad=True)
    sim.daily_rate = rate.expand(sc.simulation.days)
    sim.run()
    scale = plain_run.summary["region_population"] / pop.size
    series = gradient.simulated_series(sim, sc.calibration, scale)
    expected = simulated(plain_run, sc.calibration)
    for target in sc.calibration.targets:
        assert expected[target].sum() > 10 * scale  # ten agents' events at least: a wrong stage would show
        np.testing.assert_allclose(series[target].detach().numpy(), expected[target].to_numpy(), rtol=1e-4, atol=1e-3)
    series["deaths"].sum().backward()
    assert rate.grad is not None and float(rate.grad) != 0.0


def observed_file(tmp_path, plain_run, **observation: object):
    """Observed series made by the model's own run (so the simulation is exact) read through
    the observation model with ``observation``."""
    truth = simulated(plain_run, validate(scenario(**observation), "x").calibration)
    days = plain_run.result.days
    truth.insert(0, "date", pd.date_range("2020-02-01", periods=days, freq="D").strftime("%Y-%m-%d"))
    truth.to_csv(tmp_path / "obs.csv", index=False)
    return tmp_path / "obs.csv"


def fit_death_observation(tmp_path, plain_run, profile: bool, trials: int, parallel_trials: int = 4) -> dict:
    data = scenario()
    data["calibration"].update(
        {
            "data": str(observed_file(tmp_path, plain_run, death_delay_days=5.0, death_multiplier=1.5)),
            "parameters": {
                "calibration.observation.death_delay_days": {"low": 0.0, "high": 14.0},
                "calibration.observation.death_multiplier": {"low": 0.5, "high": 2.0},
            },
            "trials": trials,
            "parallel_trials": parallel_trials,
            "profile_observation": profile,
        }
    )
    path = tmp_path / "cal.yaml"
    path.write_text(yaml.safe_dump(data))
    return calibrate(path, tmp_path / "out")


def test_profiled_observation_parameters_are_found_without_extra_simulations(tmp_path, plain_run):
    """Deaths observed with a 5-day mean delay and multiplier 1.5: the per-trial grid search
    finds both within a quarter of its coarse step, the calibrated scenario carries them, and
    `abm run` on it re-creates the fit."""
    summary = fit_death_observation(tmp_path, plain_run, profile=True, trials=2)
    best = summary["best_parameters"]
    assert abs(best["calibration.observation.death_delay_days"] - 5.0) <= 0.125, best
    assert abs(best["calibration.observation.death_multiplier"] - 1.5) <= 0.02, best
    assert summary["loss_fit"] < 0.01
    trials = pd.read_csv(tmp_path / "out" / "trials.csv")
    assert "user_attrs_calibration.observation.death_multiplier" in trials.columns
    rerun = abm.run(tmp_path / "out" / "calibrated.yaml")
    cfg = rerun.scenario.calibration
    assert cfg.observation.death_delay_days == best["calibration.observation.death_delay_days"]
    assert losses(simulated(rerun, cfg), load_observed(cfg), cfg.fit_window) == summary["fit"]


def test_a_changing_severity_is_found_by_the_grid_search(tmp_path, plain_run):
    """Deaths observed with a severity falling from 1.5 to 0.5 over March and a 5-day delay:
    profiling three observation parameters finds all three (the change's dates are given)."""
    data = scenario(death_multiplier_change=CHANGE["death_multiplier_change"], death_multiplier_after=1.0)
    data["calibration"].update(
        {
            "data": str(observed_file(tmp_path, plain_run, death_delay_days=5.0, **CHANGE)),
            "parameters": {
                "calibration.observation.death_delay_days": {"low": 0.0, "high": 14.0},
                "calibration.observation.death_multiplier": {"low": 0.5, "high": 2.0},
                "calibration.observation.death_multiplier_after": {"low": 0.25, "high": 2.0},
            },
            "trials": 1,
            "profile_points": 15,
        }
    )
    path = tmp_path / "cal.yaml"
    path.write_text(yaml.safe_dump(data))
    summary = calibrate(path, tmp_path / "out")
    best = summary["best_parameters"]
    assert abs(best["calibration.observation.death_delay_days"] - 5.0) <= 0.25, best
    assert abs(best["calibration.observation.death_multiplier"] - 1.5) <= 0.03, best
    assert abs(best["calibration.observation.death_multiplier_after"] - 0.5) <= 0.03, best
    assert summary["loss_fit"] < 0.01
    calibrated = yaml.safe_load((tmp_path / "out" / "calibrated.yaml").read_text())
    assert calibrated["calibration"]["observation"]["death_multiplier_after"] == pytest.approx(
        best["calibration.observation.death_multiplier_after"]
    )


def test_sampled_observation_parameters_are_found_by_tpe(tmp_path, plain_run, monkeypatch):
    """With profiling off, TPE draws the two observation parameters like any other, far less
    precisely than the grid search above. What it guarantees run by run: the chosen trial is the
    argmin of trials.csv, and its values are the calibrated ones.

    That TPE's best beats a random sampler's best at the same 24 trials and seed is not reliable
    run by run: measured over sampler seeds 0-79 (2026-11-26), TPE was better for 60, tied for 6
    (the best was among the 10 startup trials, which TPE draws as the random sampler does) and
    worse for 14. The paired log(TPE best / random best) had mean -0.63 and sd 0.79 per seed, so
    over 40 seeds its mean lies about 0.63 / (0.79 / sqrt(40)) = 5 se below 0: asserted beyond
    t(0.999, 39) = 3.31 se (seeds 0-39 and 40-79 gave 4.8 and 5.3 se). Those figures are for
    trials asked one at a time (parallel_trials 1, as here). The observation parameters change no
    simulation, so each study runs the scenario once (cached, in this process: one worker)."""
    raws: dict[str, pd.DataFrame] = {}
    real = optimize.simulate_values

    def once(data: dict, values: dict[str, float], source: str) -> pd.DataFrame:
        assert all(k.startswith("calibration.observation.") for k in values)
        if "raw" not in raws:
            raws["raw"] = real(data, values, source)
        return raws["raw"]

    monkeypatch.setattr(optimize, "simulate_values", once)
    summary = fit_death_observation(tmp_path, plain_run, profile=False, trials=24, parallel_trials=1)
    trials = pd.read_csv(tmp_path / "out" / "trials.csv")
    assert len(trials) == 24 and trials["chosen"].sum() == 1
    chosen = trials.loc[trials["chosen"]].iloc[0]
    assert chosen["value"] == trials["value"].min() == summary["loss_fit"]
    assert summary["best_trial"] == chosen["number"]
    for key, value in summary["best_parameters"].items():
        assert chosen[f"params_{key}"] == value
    calibrated = yaml.safe_load((tmp_path / "out" / "calibrated.yaml").read_text())
    assert calibrated["calibration"]["observation"]["death_delay_days"] == pytest.approx(
        summary["best_parameters"]["calibration.observation.death_delay_days"]
    )

    data = yaml.safe_load((tmp_path / "cal.yaml").read_text())
    source = str(tmp_path / "cal.yaml")

    def best_loss(seed: int) -> float:
        data["calibration"]["seed"] = seed
        sc = validate(data, source)
        observed = load_observed(sc.calibration)
        with optimize.trial_runner(sc.calibration, data, source, "local", 1) as (run_batch, _):
            study, _ = optimize._run_study(sc.calibration, observed, 24, run_batch, None)
        return study.best_value

    tpe = np.array([best_loss(seed) for seed in range(40)])
    monkeypatch.setattr(optuna.samplers, "TPESampler", lambda seed, **_: optuna.samplers.RandomSampler(seed=seed))
    rand = np.array([best_loss(seed) for seed in range(40)])
    log_ratio = np.log(tpe / rand)
    se = log_ratio.std(ddof=1) / np.sqrt(len(log_ratio))
    assert log_ratio.mean() < -stats.t.ppf(0.999, len(log_ratio) - 1) * se, (log_ratio.mean(), se)


def test_fast_fit_loss_equals_the_reported_loss(plain_run):
    """The grid search's numpy loss is the objective of :func:`fit_value`."""
    data = scenario(death_delay_days=3.0, death_multiplier=0.8)
    data["calibration"]["fit_window"] = ["2020-02-28", "2020-04-29"]  # King County admissions from 02-28
    cfg = validate(data, "x").calibration
    raw = raw_series(plain_run, cfg)
    observed = load_observed(cfg)
    fast = FitLoss(observed, cfg)({c: raw[c].to_numpy() for c in raw}, cfg.observation)
    assert fast == pytest.approx(fit_value(simulated(plain_run, cfg), observed, cfg), rel=1e-12)
    # target_weights: the weighted mean of the targets' RMSEs, by hand from the reported losses.
    rmse = {t: v["rmse_log1p_weekly"] for t, v in losses(simulated(plain_run, cfg), observed, cfg.fit_window).items()}
    assert fast == pytest.approx((rmse["hospital_admissions"] + rmse["deaths"]) / 2, rel=1e-12)
    data["calibration"]["target_weights"] = {"deaths": 0.25}
    weighted = validate(data, "x").calibration
    by_hand = (rmse["hospital_admissions"] + 0.25 * rmse["deaths"]) / 1.25
    assert FitLoss(observed, weighted)({c: raw[c].to_numpy() for c in raw}, cfg.observation) == pytest.approx(
        by_hand, rel=1e-12
    )
    assert fit_value(simulated(plain_run, weighted), observed, weighted) == pytest.approx(by_hand, rel=1e-12)
    assert abs(by_hand - fast) > 1e-3  # the weights matter here


def positives_scenario(**observation: object) -> dict:
    """No transmission; 7 presymptomatic and 3 symptomatic seeds a replicate, tested on symptoms."""
    return {
        "name": "positives",
        "population": {"agents": 500},
        "simulation": {"days": 40, "replicates": 2, "seed": 3},
        "seeding": {"infections": {"asymptomatic": 20, "presymptomatic_mild": 7, "mild_symptoms": 3}},
        "disease": {"transmission_rate": 0.0},
        "interventions": {"testing": {}},
        "calibration": {
            "targets": ["cases"],
            "fit_window": ["2020-02-01", "2020-03-06"],
            "holdout_window": None,
            "parameters": RATE_ONLY,
            "observation": {"cases": "positive_tests", **observation},
        },
    }


def test_reported_cases_can_be_the_positive_tests():
    """cases: positive_tests reads the testing intervention's positive results, scaled to the
    region, on the day of the result by default and case_delay_days later when set; the
    ascertainment plays no part."""
    sc = positives_scenario(ascertainment=0.2)
    run = abm.run(sc)
    positives = run.result.activity["positive_results"]
    assert positives.sum(axis=0).min() > 0 and positives.sum(axis=0).max() <= 10  # only the symptomatic seeds
    assert (run.timeseries.groupby("day").positive_results.mean().to_numpy() == positives.mean(axis=1)).all()
    scale = run.summary["region_population"] / run.result.agents
    cfg = validate(sc, "x").calibration
    assert cfg.observation.case_delay_days == 0
    np.testing.assert_allclose(simulated(run, cfg)["cases"].to_numpy(), positives.mean(axis=1) * scale)
    later = validate(positives_scenario(case_delay_days=3), "x").calibration
    assert later.observation.case_delay_days == 3
    expected = np.concatenate([np.zeros(3), positives.mean(axis=1)[:-3]]) * scale
    np.testing.assert_allclose(simulated(run, later)["cases"].to_numpy(), expected)
    onsets = validate({**sc, "calibration": {**sc["calibration"], "observation": {}}}, "x").calibration
    assert onsets.observation.cases == "onsets" and onsets.observation.case_delay_days == 2
    assert not np.allclose(simulated(run, onsets)["cases"].to_numpy(), simulated(run, cfg)["cases"].to_numpy())


def test_every_simulated_series_is_scaled_to_the_region():
    """The observed counts are the county's, so every simulated daily series the observation
    model reads (admissions, deaths, onsets, positive tests) is the mean over replicates of the
    run's own daily counts (timeseries.csv) times region population / agents (about 1,100 here)."""
    sc = positives_scenario()
    sc["population"]["agents"] = 2000
    sc["simulation"]["days"] = 60
    sc["disease"]["transmission_rate"] = 3.0
    run = abm.run(sc)
    scale = run.summary["region_population"] / run.result.agents
    assert scale > 1000
    daily = run.timeseries.groupby("day")[["new_hospitalizations", "new_deaths", "positive_results"]].mean()
    assert (daily.sum() > 0).all()  # each series has counts, so a missing scale would show
    raw = raw_series(run, validate(sc, "x").calibration)
    np.testing.assert_allclose(raw["hospital_admissions"], daily["new_hospitalizations"] * scale, rtol=1e-12)
    np.testing.assert_allclose(raw["deaths"], daily["new_deaths"] * scale, rtol=1e-12)
    np.testing.assert_allclose(raw["positive_tests"], daily["positive_results"] * scale, rtol=1e-12)
    np.testing.assert_allclose(raw["symptomatic_onsets"], run.result.symptomatic_onsets.mean(axis=1) * scale)


def test_positive_tests_need_testing_and_the_optuna_method(tmp_path):
    no_testing = positives_scenario()
    del no_testing["interventions"]
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(no_testing))
    with pytest.raises(optimize.CalibrationError, match=r"positive_tests needs interventions.testing"):
        optimize.checked_inputs(tmp_path / "s.yaml")
    (tmp_path / "g.yaml").write_text(yaml.safe_dump(positives_scenario()))
    with pytest.raises(optimize.CalibrationError, match=r"not read by --method gradient"):
        optimize.checked_inputs(tmp_path / "g.yaml", method="gradient")
    fitted = positives_scenario()
    fitted["calibration"]["parameters"] = {"calibration.observation.ascertainment": {"low": 0.1, "high": 0.5}}
    with pytest.raises(ScenarioError, match=r"parameters.calibration.observation.ascertainment acts on cases from "):
        validate(fitted, "x")


def test_a_severity_change_whose_first_and_last_days_are_one_is_a_step_on_that_day():
    """death_multiplier_after holds from the change's last day on, also when the first day is
    that day: [2020-02-03, 2020-02-03] from day 0 2020-02-01 gives 2, 2 (days 0 and 1), then 0.5
    from day 2 (it gave 2 on day 2 too). A one-day ramp [02-03, 02-04] keeps 2 on the 3rd and
    gives 0.5 on the 4th. Deaths of 10 a day, reported on the day, read 20, 20, 5, 5, 5."""
    import datetime as dt

    start = dt.date(2020, 2, 1)
    step = Observation(death_multiplier=2.0, death_multiplier_after=0.5, death_multiplier_change=["2020-02-03"] * 2)
    assert severity_multipliers(step, start, 5).tolist() == [2.0, 2.0, 0.5, 0.5, 0.5]
    ramp = Observation(
        death_multiplier=2.0, death_multiplier_after=0.5, death_multiplier_change=["2020-02-03", "2020-02-04"]
    )
    assert severity_multipliers(ramp, start, 5).tolist() == [2.0, 2.0, 2.0, 0.5, 0.5]
    raw = {c: np.full(5, 10.0) for c in RAW}
    assert observe_arrays(raw, step, ["deaths"], start)["deaths"].tolist() == [20.0, 20.0, 5.0, 5.0, 5.0]
