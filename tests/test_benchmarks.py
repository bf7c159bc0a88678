"""Cheap checks of the benchmark scripts in benchmarks/ (the figures in BENCHMARKS.md and
benchmarks/*.md come from them, and reviewers re-run their recorded commands)."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from datetime import date
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def benchmark(name: str) -> ModuleType:
    """The script benchmarks/NAME.py, loaded as a module (its main() not run)."""
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_learning_benchmarks_header_records_the_run_date_cores_and_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The results file's header says when, where and with which options it was made: a re-run
    must not claim the date of the first run (2026-11-22, once written into the script) or leave
    out the ``--only`` that restricted it."""
    module = benchmark("learning_benchmarks")
    out = tmp_path / "learning.md"
    argv = ["learning_benchmarks.py", "--seeds", "5", "--only", "no_such_scenario", "--results", str(out)]
    monkeypatch.setattr(sys, "argv", argv)
    module.main()  # no scenario matches: only the header is written
    text = out.read_text()
    assert "Command: `python benchmarks/learning_benchmarks.py --seeds 5 --only no_such_scenario`" in text
    assert f"Date: {date.today().isoformat()}." in text
    assert f"Machine: {os.cpu_count()}-core CPU" in text


@pytest.mark.parametrize("complete", [False, True])
def test_reference_tables_writes_benchmarks_md_only_with_every_scenario(
    complete: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--only ni`` (no cache of the others) must not replace BENCHMARKS.md's recorded table of
    eleven scenarios by a table of one; with every scenario the section is written."""
    module = benchmark("reference_tables")
    names = module.NAMES if complete else ["ni"]
    monkeypatch.setattr(module, "ROOT", tmp_path)
    monkeypatch.setattr(module, "run_all", lambda *a: {n: {} for n in names})
    monkeypatch.setattr(module, "markdown", lambda rows, reps: f"new table of {len(rows)}\n")
    recorded = f"# Benchmarks\n\n{module.BEGIN}\nrecorded table of 11\n{module.END}\n"
    (tmp_path / "BENCHMARKS.md").write_text(recorded)
    only = [] if complete else ["--only", "ni"]
    monkeypatch.setattr(sys, "argv", ["reference_tables.py", *only, "--cache", str(tmp_path / "cache.json")])
    module.main()
    text = (tmp_path / "BENCHMARKS.md").read_text()
    if complete:
        assert text == f"# Benchmarks\n\n{module.BEGIN}\nnew table of 11\n{module.END}\n"
    else:
        assert text == recorded
        err = capsys.readouterr().err
        assert "BENCHMARKS.md left as it is" in err and "sq" in err and "vacc_budget" in err


def fake_reference_run(module: ModuleType, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make reference_tables.py's runs instant; the list returned collects the scenarios run."""
    from types import SimpleNamespace

    from abm.outputs.reference_results import ReferenceMetrics

    ran: list[str] = []

    def run(path: Path, replicates: int) -> SimpleNamespace:
        ran.append(Path(path).stem)
        return SimpleNamespace(result=SimpleNamespace(engine_seconds=1.0, replicates=replicates))

    def metrics(result: SimpleNamespace) -> ReferenceMetrics:
        zero = {50: 0.0, 70: 0.0, 120: 0.0}
        return ReferenceMetrics(
            100, result.replicates, 0.0, 0, 0.0, 0.0, 0.0, zero, zero, np.zeros(9), 0.0, 0.0, 0.0, (0, 0)
        )

    monkeypatch.setattr(module.abm, "run", run)
    monkeypatch.setattr(module, "reference_metrics", metrics)
    monkeypatch.setattr(module, "markdown", lambda rows, reps: f"table of {','.join(rows)}\n")
    return ran


def test_reference_tables_without_reuse_keeps_the_other_scenarios_in_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--only ni`` without ``--reuse`` runs ni afresh and must leave the cache's other scenarios
    there for a later ``--reuse`` (it rewrote the cache with ni alone); its table is ni's only."""
    module = benchmark("reference_tables")
    ran = fake_reference_run(module, monkeypatch)
    cache = tmp_path / "cache.json"
    module.run_all(["sq", "ni"], 10, cache, False)
    argv = ["reference_tables.py", "--only", "ni", "--no-write", "--cache", str(cache)]
    monkeypatch.setattr(sys, "argv", argv)
    module.main()
    assert ran == ["sq", "ni", "ni"]
    assert sorted(json.loads(cache.read_text())) == ["ni", "sq"]
    assert capsys.readouterr().out.startswith("table of ni\n")


def test_reference_tables_reuse_tables_only_scenarios_cached_at_the_replicates_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A table of 10 replicates must not mix in a scenario the cache holds at 40."""
    module = benchmark("reference_tables")
    ran = fake_reference_run(module, monkeypatch)
    cache = tmp_path / "cache.json"
    module.run_all(["sq"], 40, cache, True)
    module.run_all(["vacc"], 10, cache, True)
    argv = ["reference_tables.py", "--only", "ni", "--reuse", "--no-write", "--cache", str(cache)]
    monkeypatch.setattr(sys, "argv", argv)
    module.main()
    assert ran == ["sq", "vacc", "ni"]
    assert capsys.readouterr().out.startswith("table of ni,vacc\n")


def test_gradient_step_finds_its_default_scenario_from_any_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Like the other scripts, gradient_step.py reads its default scenario from the repository, not
    from the folder it is started in (it stopped with 'cannot read the scenario file')."""
    module = benchmark("gradient_step")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["gradient_step.py", "--seeds", "1"])
    module.main()
    assert capsys.readouterr().out.startswith("calibrate_2020: 100,000 agents x 1 replicate x 151 days")


def test_calibration_benchmark_reports_the_weighted_fit_loss_and_needs_no_held_out_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--evaluate``'s "fit loss" is the calibration's objective: with ``target_weights:
    {deaths: 0.25}`` it is (RMSE admissions + 0.25 RMSE deaths) / 1.25 of the printed per-target
    RMSEs, not their plain mean (which it was). A calibrated scenario without a held-out window
    is evaluated on its fit window alone (it stopped with a TypeError)."""
    import yaml

    module = benchmark("calibration_king_county")
    scenario = {
        "name": "weighted",
        "population": {"agents": 2000},
        "simulation": {"days": 70, "replicates": 2, "seed": 5},
        "seeding": {"infections": {"asymptomatic": 30}},
        "disease": {"transmission_rate": 3.0},
        "calibration": {
            "targets": ["hospital_admissions", "deaths"],
            "target_weights": {"deaths": 0.25},
            "fit_window": ["2020-02-29", "2020-04-03"],  # 35 days: 5 weeks
            "holdout_window": None,
            "parameters": {"disease.transmission_rate": {"low": 1.0, "high": 5.0}},
        },
    }
    path = tmp_path / "calibrated.yaml"
    path.write_text(yaml.safe_dump(scenario))
    result = module.check(path, 2, 5)
    rmse = {t: v["rmse_log1p_weekly"] for t, v in result["fit"].items()}
    assert result["loss_fit"] == pytest.approx((rmse["hospital_admissions"] + 0.25 * rmse["deaths"]) / 1.25, rel=1e-12)
    assert abs(result["loss_fit"] - (rmse["hospital_admissions"] + rmse["deaths"]) / 2) > 1e-3  # the weights matter
    assert result["holdout"] is None and result["holdout_weekly_sim_obs"] is None
    assert len(result["fit_weekly_sim_obs"]["deaths"]) == 5
    module.evaluate(path, [2], [5])
    printed = capsys.readouterr().out
    assert f"fit loss {result['loss_fit']:.3f}, ND " in printed and "held-out weekly" not in printed


def test_holdout_noise_floor_fits_a_decline_and_draws_counts_of_the_stated_spread() -> None:
    """benchmarks/holdout_noise_floor.py: the log-linear fit finds a clean decline's ratio, and the
    ND of exact means against drawn counts matches E|X - mu| / mu computed exactly from scipy's
    Poisson and negative binomial (the variance 2 x mean the dispersion asks for)."""
    from scipy.stats import nbinom, poisson

    module = benchmark("holdout_noise_floor")
    y = np.round(100 * 0.8 ** np.arange(8))
    assert module.log_linear_fit(y)[1] / module.log_linear_fit(y)[0] == pytest.approx(0.8, abs=0.01)
    mu = np.full(8, 20.0)
    got = module.floor(mu, 2.0, 20_000, np.random.default_rng(3))
    k = np.arange(400)
    exact = {
        "poisson": float((np.abs(k - 20) * poisson.pmf(k, 20)).sum() / 20),
        "negative binomial (variance 2.00 x mean)": float((np.abs(k - 20) * nbinom.pmf(k, 20.0, 0.5)).sum() / 20),
    }
    assert set(got) == set(exact)
    for kind, value in exact.items():
        # ND is a ratio of sums over 8 weeks: its mean is E|X - mu| / mu to well under 3% here
        assert got[kind].mean() == pytest.approx(value, rel=0.03), kind
    assert exact["negative binomial (variance 2.00 x mean)"] > 1.3 * exact["poisson"]
    assert set(module.floor(mu, 0.8, 10, np.random.default_rng(0))) == {"poisson"}


def test_deaths_per_admission_divides_the_lagged_deaths_by_the_months_admissions() -> None:
    """benchmarks/deaths_per_admission.py: each month's figure is the deaths of its days shifted by
    the lag over the month's admissions, exactly."""
    import pandas as pd

    module = benchmark("deaths_per_admission")
    days = pd.date_range("2020-02-20", "2020-07-15", freq="D")
    frame = pd.DataFrame({"hospital_admissions": 2.0, "deaths": 0.0}, index=days)
    frame.loc["2020-04-06":"2020-05-05", "deaths"] = 1.0  # April's days shifted by 5
    # lag 5: April's window (April 6 to May 5) holds all 30 deaths, March's (to April 5) and May's
    # (from May 6) none
    assert module.per_admission(frame, lag=5) == pytest.approx([0.0, 30 / 60, 0.0, 0.0])
    # lag 0: April holds 25 of them (from April 6), May 5 (May 1-5) over 31 days x 2 admissions
    assert module.per_admission(frame, lag=0) == pytest.approx([0.0, 25 / 60, 5 / 62, 0.0])


def test_model_figures_count_contacts_as_the_layers_give_them(king_county) -> None:
    """benchmarks/model_figures.py (docs/model.md's contact figures): the occupation contacts per
    member are the day's ring contacts, two ends each, less those that landed on the agent itself,
    as the layer gives them agent by agent; the community's daily contacts likewise over its cycle."""
    import torch

    from abm.engine.config import CommunityContacts, OccupationContacts
    from abm.engine.contacts import OccupationLayer
    from abm.engine.reference_contacts import community_layer
    from abm.populations import build_population

    module = benchmark("model_figures")
    pop = build_population(king_county, 3000, seed=5)
    members = np.flatnonzero(pop.group >= 0)
    occupation = module.occupation_figures(pop, 5)
    assert occupation["no_group"] == pytest.approx(1 - members.size / pop.size)
    layer = OccupationLayer(pop, OccupationContacts(), 1, torch.device("cpu"), 5)
    ring = layer.src.shape[0]
    landed = round(occupation["self_of_all"] * ring)
    assert landed > 0  # a small population's groups are small: some rewired contacts land home
    assert occupation["per_member"] == pytest.approx(2 * (ring - landed) / members.size)
    owner, _ = layer.contacts_of(torch.as_tensor(members), 0)
    assert occupation["per_member"] == pytest.approx(owner.numel() / members.size)
    community = module.community_figures(pop, 5)
    cfg = CommunityContacts()
    days = [community_layer(pop, cfg, 1, torch.device("cpu"), 5).edges(d) for d in range(cfg.cycle_days)]
    started = sum(e.src.numel() for e in days)
    home = sum(int((e.src == e.dst).sum()) for e in days)
    assert home > 0 and community["self_of_all"] == pytest.approx(home / started)
    assert community["daily"] == pytest.approx(2 * (started - home) / cfg.cycle_days / pop.size)


def test_death_report_table_matches_the_jhu_deaths_the_project_carries() -> None:
    """abm/calibration/data/king_county_death_reports_2020.csv: every row's delay is its JHU day
    less its date of death, and each release's JHU day is the first on which the cumulative deaths
    of king_county_2020.csv reach the release's total (jhu_cumulative: their value that day)."""
    import pandas as pd

    module = benchmark("death_report_delay")
    deaths = module.load()
    assert ((deaths["jhu_day"] - deaths["date_of_death"]).dt.days == deaths["delay_days"]).all()
    series = pd.read_csv(ROOT / "abm/calibration/data/king_county_2020.csv", parse_dates=["date"])
    cumulative = series.set_index("date")["deaths"].cumsum()
    for (release, basis, total), rows in deaths.groupby(module.RELEASE):
        assert rows["jhu_day"].nunique() == 1 and rows["jhu_cumulative"].nunique() == 1, release
        first = cumulative.index[cumulative >= total][0]
        assert rows["jhu_day"].iloc[0] == first, (release, basis, total)
        assert rows["jhu_cumulative"].iloc[0] == cumulative[first], (release, basis, total)
        assert len(rows) <= total and (rows["date_of_death"] <= release).all(), release
    assert set(deaths["release_basis"]) == {"through", "announced"}
    assert deaths["source"].str.startswith("https://").all()


def test_death_report_delay_figures_are_those_of_the_table() -> None:
    """benchmarks/death_report_delay.py: the table's 60 delays sum to 161 (mean 161/60, median 2);
    the geometric maximum-likelihood mean is the delays' mean (the log-likelihood is largest
    there); the fit conditional on the days of report gives the exact answer of a case worked by
    hand, and exceeds the plain mean where long delays cannot be seen."""
    import pandas as pd

    module = benchmark("death_report_delay")
    deaths = module.load()
    delays = deaths["delay_days"].to_numpy()
    assert (len(delays), int(delays.sum()), float(np.median(delays))) == (60, 161, 2.0)
    assert module.geometric_ml_mean(delays) == pytest.approx(161 / 60)
    means = np.linspace(0.5, 8, 1501)
    q = means / (1 + means)
    loglik = len(delays) * np.log(1 - q) + delays.sum() * np.log(q)
    assert means[np.argmax(loglik)] == pytest.approx(161 / 60, abs=0.005)
    # One day of death, reports seen only 1 and 2 days later: 3 deaths at delay 1, 1 at delay 2.
    # With a shift of 1 the geometric part is 0 or 1, P(1 | 0 or 1) = q / (1 + q) = 1/4, so q = 1/3
    # and the geometric mean q / (1 - q) = 0.5: 1.5 days in all, above the plain mean of 1.25.
    died = pd.Timestamp("2020-03-01")
    hand = pd.DataFrame({"date_of_death": [died] * 4, "delay_days": [1, 1, 1, 2]})
    hand["jhu_day"] = hand["date_of_death"] + pd.to_timedelta(hand["delay_days"], unit="D")
    assert module.conditional_ml_mean(hand) == pytest.approx(1.5, abs=1e-4)
    assert module.conditional_ml_mean(hand, shift=0) == pytest.approx(0.5, abs=1e-4)
    assert module.conditional_ml_mean(deaths) > module.geometric_ml_mean(delays) + 0.5
