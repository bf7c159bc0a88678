"""Private calibration parts: regions, bins, the per-replicate simulation hooks, observations."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from abm.populations import build_population, load_region
from abm.populations.region import RegionError, subset_region
from abm.private_calibration.institutions import model_scenario
from abm.private_calibration.parameters import BinGrid, FreeParameter
from abm.private_calibration.regions import institution_region, region_masks
from abm.private_calibration.scenario import ModelSection, PrivateCalibrationScenario
from abm.private_calibration.simulate import features, reported_cases, simulate, weekly_rates


@pytest.fixture(scope="module")
def county():
    return load_region("king_county")


def test_region_rules_partition_the_county(county):
    masks = region_masks(county.tracts)
    stack = np.stack(list(masks.values()))
    assert (stack.sum(axis=0) == 1).all()  # disjoint and covering
    assert int(masks["seattle"].sum()) == 132  # Seattle city tracts 0001-0121 (2010-vintage tracts; 2020 has 177)
    north = county.tracts[masks["north"]]
    assert (north["lat"] >= 47.70).all()
    east = county.tracts[masks["east"]]
    assert (east["lon"] > -122.23).all() and east["lat"].between(47.50, 47.70, inclusive="left").all()
    # the cut at -122.23 runs along Lake Washington: the three tracts of East's band just west of it
    # (within 0.03 degrees) are South's (regions.py)
    t = county.tracts
    band = t["lat"].between(47.50, 47.70, inclusive="left") & t["lon"].between(-122.26, -122.23)
    west = t["geoid"][band.to_numpy() & ~masks["seattle"]].str[5:].tolist()
    assert all(masks["south"][band.to_numpy() & ~masks["seattle"]])
    assert sorted(west) == ["024200", "024300", "024602"]


def test_subset_region_scales_population_to_its_tracts(county):
    parts = [institution_region(county, rule, rule) for rule in ("seattle", "north", "east", "south")]
    assert sum(len(p.tracts) for p in parts) == len(county.tracts)
    total = sum(p.figures.population for p in parts)
    assert abs(total - county.figures.population) <= 4  # rounding of four parts
    pop = build_population(parts[0], 500, 0)
    assert pop.size == 500 and set(pop.tracts["geoid"]) <= set(parts[0].tracts["geoid"])
    with pytest.raises(RegionError, match="not in the region"):
        subset_region(county, ["53033999999"], "x")


def test_bins_classes_and_marginals_exact():
    t = FreeParameter("transmission", 0.5, 1.5, 4)
    s = FreeParameter("seeding", 2, 32, 2, log=True)
    assert np.allclose(t.edges(), [0.5, 0.75, 1.0, 1.25, 1.5])
    assert np.allclose(s.edges(), [2, 8, 32]) and np.allclose(s.centers(), [4, 16])
    assert t.bin_of(np.array([0.5, 0.74, 0.75, 1.49, 1.5, 9.0])).tolist() == [0, 0, 1, 3, 3, 3]
    grid = BinGrid((t, s))
    assert grid.n_classes == 8
    values = np.array([[0.6, 3.0], [1.4, 20.0], [1.1, 7.9]])
    classes = grid.classes_of(values)
    assert classes.tolist() == [0 * 2 + 0, 3 * 2 + 1, 2 * 2 + 0]
    assert grid.bins_of(classes).tolist() == [[0, 0], [3, 1], [2, 0]]
    # joint probabilities 0.5 on class (1, 1) and 0.5 on (3, 1): marginals [0, .5, 0, .5] and [0, 1]
    logits = torch.full((1, 8), -1e4)
    logits[0, 1 * 2 + 1] = 0.0
    logits[0, 3 * 2 + 1] = 0.0
    mt, ms = grid.marginals(logits)
    assert np.allclose(mt, [[0, 0.5, 0, 0.5]]) and np.allclose(ms, [[0, 1]])
    est = grid.estimate(logits)[0]
    assert est["transmission"] == pytest.approx((0.875 + 1.375) / 2)
    assert est["seeding"] == pytest.approx(16.0)
    # a log parameter's posterior mean is taken over the logs of its centres: half on 4, half on
    # 16 gives sqrt(4 * 16) = 8 (not 10)
    halves = torch.full((1, 8), -1e4)
    halves[0, [1 * 2 + 0, 1 * 2 + 1]] = 0.0
    assert grid.estimate(halves)[0] == pytest.approx({"transmission": 0.875, "seeding": 8.0})
    acc = grid.marginal_accuracy(logits.repeat(2, 1), torch.tensor([1 * 2 + 1, 0]))
    assert acc["seeding"] == pytest.approx(0.5)  # arg-max bin 1: right for the first, wrong for the second
    assert acc["transmission"] == pytest.approx(0.5)  # arg-max bin 1 (the first of the tie): the same
    # each parameter is scored against its own true bin: truths (1, 1) and (0, 1) are right for
    # seeding twice, for transmission once
    acc = grid.marginal_accuracy(logits.repeat(2, 1), torch.tensor([1 * 2 + 1, 0 * 2 + 1]))
    assert acc == {"transmission": 0.5, "seeding": 1.0}


def test_a_log_parameter_is_drawn_log_uniformly():
    """A log parameter on [1, 100] is drawn uniformly in log space: half the draws below 10 (the
    geometric midpoint), where a uniform draw would put 9%; a linear one uniformly: 9/99 below
    10. 4,000 draws: the shares are within 4 standard errors (0.008 at most)."""
    log = FreeParameter("seeding", 1, 100, 4, log=True).sample(np.random.default_rng(0), 4_000, 1, 100)
    linear = FreeParameter("transmission", 1, 100, 4).sample(np.random.default_rng(0), 4_000, 1, 100)
    assert log.min() >= 1 and log.max() <= 100
    assert abs((log < 10).mean() - 0.5) < 4 * np.sqrt(0.25 / 4_000)
    assert abs((linear < 10).mean() - 9 / 99) < 4 * np.sqrt(9 / 99 * 90 / 99 / 4_000)


def test_each_observation_draw_is_labelled_with_its_own_replicate():
    """Two replicates with different onsets, three observation draws each (ascertainment 1, so
    each draw reports every onset, after the reporting delay): every row of the features is its
    replicate's, whichever order the rows come in."""
    from abm.private_calibration.simulate import SimulatedSeries, observe

    section = ModelSection(start_date=dt.date(2020, 2, 1), window=(dt.date(2020, 2, 1), dt.date(2020, 2, 14)))
    onsets = np.zeros((section.days, 2), dtype=np.int64)
    onsets[:, 0], onsets[:, 1] = 3, 40
    series = SimulatedSeries(onsets, np.zeros_like(onsets), agents=1000)
    x, rep = observe(series, np.ones((2, 3)), section, np.random.default_rng(0), draws=3)
    assert x.shape[0] == 6 and sorted(rep.tolist()) == [0, 0, 0, 1, 1, 1]
    cases = reported_cases(onsets, np.ones(2), section.case_delay_days, None)
    own = features(weekly_rates(cases, section, 1000), weekly_rates(onsets * 0.0, section, 1000), section)
    assert np.allclose(x, own[rep])


def _grid_with_ascertainment():
    return BinGrid(
        (
            FreeParameter("transmission", 0.5, 1.5, 2),
            FreeParameter("seeding", 1, 8, 2),
            FreeParameter("ascertainment", 0.05, 0.45, 4),
        )
    )


def test_each_simulation_has_its_own_ascertainment_per_observation_draw():
    """4 simulations x 3 observation draws: 12 ascertainments, one per draw, as [simulations,
    draws] (not one per simulation repeated or cut short)."""
    from abm.private_calibration.institutions import draw_parameters

    sim, asc = draw_parameters(_grid_with_ascertainment(), {}, 4, np.random.default_rng(0), draws=3)
    assert sim.shape == (4, 2) and asc.shape == (4, 3)
    assert len(set(asc.ravel().tolist())) == 12 and ((asc >= 0.05) & (asc <= 0.45)).all()


def test_a_training_pairs_ascertainment_class_is_that_of_its_own_observation_draw(monkeypatch):
    """8 simulations of 100,000 agents with 10,000 onsets a day, 3 observation draws each with its
    own ascertainment: the share of a row's first-week onsets reported as cases (Binomial
    thinning: the draw's ascertainment, sd below 0.002) lies in the ascertainment bin of the row's
    label, but for at most one row drawn next to a bin edge."""
    import abm.private_calibration.institutions as institutions
    from abm.private_calibration.simulate import SimulatedSeries

    section = ModelSection(start_date=dt.date(2020, 2, 1), window=(dt.date(2020, 2, 1), dt.date(2020, 2, 14)))
    onsets = np.full((section.days, 8), 10_000, dtype=np.int64)
    monkeypatch.setattr(
        institutions, "simulate", lambda *args: SimulatedSeries(onsets, np.zeros_like(onsets), agents=100_000)
    )
    grid = _grid_with_ascertainment()
    data = institutions.pairs(grid, None, None, section, {}, 8, 3, np.random.default_rng(0), 0, 0.1)
    # the first feature: the window's first week of reported cases per 100k (here: of the agents),
    # log1p, centred and scaled; the reporting delay leaves 7 - delay days of onsets in it
    weekly = np.expm1(data.x[:, 0].numpy().astype(float) * section.feature_scale + section.feature_center)
    share = weekly / ((7 - section.case_delay_days) * 10_000)
    labels = grid.bins_of(data.y.numpy())[:, 2]
    assert (grid.params[2].bin_of(share) != labels).sum() <= 1


def test_the_daily_frame_of_several_replicates_is_their_mean_per_100k():
    """A fit's daily frame averages the replicates simulated at an estimate: replicates of 1 and
    3 onsets and 2 and 6 admissions a day among 1,000 agents (ascertainment 1 and 0.5) give 1.25
    cases (after the reporting delay) and 4 admissions a day, x 100 per 100,000."""
    from abm.private_calibration.institutions import daily_frame
    from abm.private_calibration.simulate import SimulatedSeries

    section = ModelSection(start_date=dt.date(2020, 2, 1), window=(dt.date(2020, 2, 1), dt.date(2020, 2, 14)))
    onsets = np.tile(np.array([1, 3]), (section.days, 1))
    series = SimulatedSeries(onsets, 2 * onsets, agents=1000)
    frame = daily_frame(series, np.array([1.0, 0.5]), section, None)
    delay = section.case_delay_days
    assert frame["hospital_admissions"].tolist() == [400.0] * section.days
    assert frame["cases"].tolist() == [0.0] * delay + [125.0] * (section.days - delay)


def test_the_mean_nd_over_institutions_leaves_out_only_the_unknown():
    """The mean of the known values (NaN left out), whether given as a list or as a generator (the
    report's mean over institutions is one); NaN where none is known."""
    from abm.private_calibration.evaluation import mean_of_known

    assert mean_of_known([1.0, float("nan"), 3.0]) == 2.0
    assert mean_of_known(v for v in [1.0, float("nan"), 3.0]) == 2.0
    assert np.isnan(mean_of_known(v for v in [float("nan")]))


def test_kc2020_observations_are_the_countys_counts_per_100k_residents():
    """kc2020 mode: each day's count of the county series x 100,000 / the county's residents
    (the bundled file's 2020-04-01 to 04-14 rows, read here as text)."""
    from importlib.resources import files

    from abm.private_calibration.observed import observed_kc2020

    section = ModelSection(start_date=dt.date(2020, 3, 1), window=(dt.date(2020, 4, 1), dt.date(2020, 4, 14)))
    rows = (files("abm.calibration") / "data" / "king_county_2020.csv").read_text().splitlines()
    counts = {}
    for line in rows[1:]:
        date, cases, _, admissions = line.split(",")
        if "2020-04-01" <= date <= "2020-04-14":
            counts[date] = (float(cases), float(admissions))
    frame = observed_kc2020(section, 2_000_000)
    assert len(frame) == len(counts) == 14
    for day, (cases, admissions) in counts.items():
        assert frame.loc[day, "cases"] == pytest.approx(cases * 0.05)
        assert frame.loc[day, "hospital_admissions"] == pytest.approx(admissions * 0.05)


def test_every_protocols_estimate_is_simulated_with_the_institutions_one_seed(monkeypatch):
    """Common random numbers: two protocols' estimates for an institution are simulated with the
    same seed (so equal estimates give equal ND), and each institution with a seed of its own."""
    from types import SimpleNamespace

    import pandas as pd

    import abm.private_calibration.evaluation as evaluation
    from abm.private_calibration.simulate import SimulatedSeries

    section = ModelSection(start_date=dt.date(2020, 2, 1), window=(dt.date(2020, 2, 1), dt.date(2020, 2, 14)))
    seeds = []

    def simulate(population, model, section_, multipliers, seeding, seed):
        seeds.append((population, seed))
        onsets = np.ones((section.days, len(multipliers)), dtype=np.int64)
        return SimulatedSeries(onsets, onsets, agents=1000)

    monkeypatch.setattr(evaluation, "simulate", simulate)
    days = pd.date_range("2020-02-01", periods=section.days, freq="D")
    observed = pd.DataFrame({"cases": 100.0, "hospital_admissions": 100.0}, index=days)
    institutions = [SimpleNamespace(index=k, population=k, observed_daily=observed) for k in range(2)]
    scenario = SimpleNamespace(model=section, evaluation=SimpleNamespace(estimate_replicates=2), seed=3)
    estimate = {"transmission": 1.0, "seeding": 4.0, "ascertainment": 0.5}
    per_protocol = {name: [{"estimate": dict(estimate)} for _ in institutions] for name in ("local", "fedavg")}
    out = evaluation.end_to_end(scenario, None, institutions, per_protocol)
    by_institution = {k: {seed for who, seed in seeds if who == k} for k in range(2)}
    assert len(seeds) == 4 and all(len(s) == 1 for s in by_institution.values())
    assert by_institution[0] != by_institution[1]
    assert out["local"][0]["fit"] == out["fedavg"][0]["fit"]


def test_each_parameters_truth_bin_hit_compares_its_own_bins():
    """An institution whose true class is (bin 1, bin 0) and whose calibrator puts all its
    probability there hits both parameters' true bins; one that puts it on (bin 1, bin 1) hits
    the first only."""
    from types import SimpleNamespace

    from torch import nn

    from abm.private_calibration.evaluation import estimates

    grid = BinGrid((FreeParameter("transmission", 0.5, 1.5, 2), FreeParameter("seeding", 2, 32, 2, log=True)))

    class Fixed(nn.Module):
        def __init__(self, joint_class: int) -> None:
            super().__init__()
            self.logits = torch.full((1, 4), -1e4)
            self.logits[0, joint_class] = 0.0

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.logits

    truth = int(grid.classes_of(np.array([[1.2, 3.0]]))[0])  # bins (1, 0)
    institutions = [SimpleNamespace(observed_x=torch.zeros(1, 4), truth_class=truth) for _ in range(2)]
    run = SimpleNamespace(participants=[SimpleNamespace(model=Fixed(truth)), SimpleNamespace(model=Fixed(3))])
    rows = estimates(run, institutions, grid)
    assert rows[0]["truth_bin_hit"] == {"transmission": True, "seeding": True}
    assert rows[1]["truth_bin_hit"] == {"transmission": True, "seeding": False}


def test_reported_cases_and_weekly_rates_exact():
    section = ModelSection(start_date=dt.date(2020, 2, 1), window=(dt.date(2020, 2, 3), dt.date(2020, 2, 16)))
    onsets = np.zeros((section.days, 2), dtype=np.int64)
    onsets[0, 0] = 10
    onsets[5, 1] = 4
    cases = reported_cases(onsets, np.array([0.5, 1.0]), delay=3, rng=None)
    assert cases[3, 0] == 5.0 and cases[8, 1] == 4.0 and cases.sum() == 9.0
    w = weekly_rates(cases, section, population=1000)  # window days 2..15: weeks [2..8], [9..15]
    assert np.allclose(w, [[500.0, 400.0], [0.0, 0.0]])
    x = features(w, np.zeros_like(w), section)
    assert x.shape == (2, 4)
    assert x[0, 0] == pytest.approx((np.log1p(500.0) - 3.0) / 2.0)
    drawn = reported_cases(np.full((30, 1), 1000), np.array([0.2]), 0, np.random.default_rng(0))
    assert abs(drawn.mean() - 200) < 3 * np.sqrt(1000 * 0.2 * 0.8 / 30)  # Binomial thinning


def _tiny_model():
    sc = PrivateCalibrationScenario.model_validate(
        {
            "kind": "private_calibration",
            "name": "t",
            "model": {"window": ["2020-02-01", "2020-02-21"], "seeding_day": 0},
            "institutions": [
                {"name": "a", "tracts": "seattle", "truth": {"transmission": 1, "seeding": 4, "ascertainment": 0.1}},
                {"name": "b", "tracts": "east", "truth": {"transmission": 1, "seeding": 4, "ascertainment": 0.1}},
            ],
            "protocols": [{"name": "local"}],  # only the model is used
        }
    )
    return sc, model_scenario(sc, Path(__file__).resolve().parents[2] / "scenarios/learning")


def test_replicate_seeding_and_transmission_multiplier(county):
    sc, model = _tiny_model()
    pop = build_population(institution_region(county, "seattle", "s"), 400, 0)
    seeds = np.array([0, 3, 7, 12])
    out = simulate(pop, model, sc.model, np.zeros(4), seeds, seed=5)
    # multiplier 0: nobody is infected by contacts, so the onsets of symptoms in each replicate
    # are those of its seeds that are not asymptomatic: none on the seeding day (every first
    # stage is asymptomatic or presymptomatic), at most one per seed, none without seeds
    total = out.onsets.sum(axis=0)
    assert out.onsets[0].sum() == 0
    assert total[0] == 0 and (total <= seeds).all() and total[3] >= 1
    # more transmission gives more infections, so more onsets (same seeding): 6 replicates each
    m = np.repeat([0.6, 1.6], 6)
    res = simulate(pop, model, sc.model, m, np.full(12, 10), seed=5)
    total = res.onsets.sum(axis=0).astype(float)
    low, high = total[:6], total[6:]
    se = np.sqrt(low.var(ddof=1) / 6 + high.var(ddof=1) / 6)
    assert high.mean() - low.mean() > 3 * se  # one-sided, far beyond the replicate noise


def test_engine_infect_is_public_and_deterministic(county):
    """``Simulation.infect`` (the public engine call the seeding hook uses): the chosen agents are
    infected on the day, counted once, and the default random stream makes runs repeatable."""
    from abm.engine import Simulation
    from abm.engine.simulator import Phase, SeedingConfig

    _, model = _tiny_model()
    pop = build_population(institution_region(county, "east", "e"), 300, 1)
    idx = torch.tensor([0, 7, pop.size + 11])  # agents of replicates 0 and 1

    class Seed:
        name, order = "seed_three", 0

        def attach(self, sim):
            sim.state.susceptibility_scale.zero_()  # no onward transmission: only these infections

        def hooks(self):
            return {Phase.TRANSMISSION: lambda sim, day: sim.infect(idx, None, day) if day == 4 else None}

    def run():
        sim = Simulation(
            population=pop,
            disease_cfg=model.disease,
            contact_cfg=model.contacts,
            seeding=SeedingConfig(day=0, infections={}),
            days=20,
            replicates=2,
            seed=3,
            interventions=[Seed()],
        )
        return sim, sim.run()

    sim, res = run()
    assert res.new_infections[4].tolist() == [2, 1]
    assert res.new_infections.sum() == 3
    assert sim.state.infected_day[idx].tolist() == [4, 4, 4]
    assert (sim.state.infected_day >= 0).sum() == 3
    _, again = run()
    assert np.array_equal(res.admissions, again.admissions) and np.array_equal(res.new_infections, again.new_infections)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: d["model"].update(set=["disease.transmision_rate=3"]),
            r"model\.set \(on .*\): .*disease\.transmision_rate: unknown key",
        ),
        (
            lambda d: d["institutions"][0].update(tracts=["53033999999"]),
            r"institutions\[0\]\.tracts: .*tracts \['53033999999'\] are not in the region",
        ),
        (lambda d: d["institutions"][1].update(tracts=[]), r"institutions\[1\]\.tracts: .*needs at least one tract"),
        (lambda d: d["model"].update(seeding_day=400), r"model: seeding_day 400 must fall within the simulated days"),
        # a negative seed passed, and `abm learn` ended in numpy's 'expected non-negative integer' (exit 1)
        (lambda d: d.update(seed=-1), r"seed: -1 is not allowed: must be at least 0"),
        (
            # leaky protection overwrites susceptibility_scale, the carrier of the transmission multiplier
            lambda d: d["model"].update(set=[*d["model"]["set"], "interventions.vaccination.protection=leaky"]),
            r"model\.scenario: .*interventions\.vaccination\.protection: 'leaky' is not allowed",
        ),
        (
            # the per-replicate seeding draws among all agents, the immune too
            lambda d: d["model"].update(set=[*d["model"]["set"], "seeding.prior_immunity=0.2"]),
            r"model\.scenario: .*seeding\.prior_immunity: 0\.2 is not allowed: private calibration seeds each",
        ),
        # no protocol: the report compared nothing with the local-only baseline
        (lambda d: d.update(protocols=[]), r"invalid scenario: protocols: has 0 items; give at least 1"),
        (lambda d: d.pop("protocols"), r"invalid scenario: protocols: required key is missing"),
        # the run folder's name, in words (pydantic said "String should match pattern '^[A-Za-z0-9_-]...$'")
        (
            lambda d: d.update(name="my run"),
            r"invalid scenario: name: 'my run' is not allowed: write a folder name: letters, digits, _, - and \. "
            r"\(not first\), no spaces or /",
        ),
        (
            lambda d: d["institutions"][0].update(name="a/b"),
            r"invalid scenario: institutions\[0\]\.name: 'a/b' is not allowed: write letters, digits, spaces, _, - "
            r"and \.$",
        ),
        # a warm-up through the last round: the institutions never shared, without a word
        (
            lambda d: d.update(protocols=[{"name": "cycle", "params": {"warmup_rounds": 3}}]),
            r"protocols\[0\]\.params\.warmup_rounds: 3 is not allowed: the run has 3 rounds \(rounds\), counted "
            r"from 0, and the institutions share no prediction before round warmup_rounds, so they would never "
            r"share: 0\.\.2",
        ),
        (
            lambda d: d.update(protocols=[{"name": "cycle", "label": "local"}]),
            r"protocols\[0\]\.label: 'local' is not allowed for cycle: it is the name of the local-only baseline",
        ),
        (
            lambda d: (
                d.update(mode="kc2020"),
                d["model"].update(window=["2021-02-27", "2021-04-23"]),
                [inst.pop("truth", None) for inst in d["institutions"]],  # kc2020 has no known truth
            ),
            r"model\.window: 2021-02-27 to 2021-04-23 lies outside the data",
        ),
        # the model scenario's day 0 is 2020-02-01 (calibrate_2020.yaml): another date would shift the window
        (
            lambda d: d["model"].update(start_date="2020-02-05"),
            r"model\.start_date: 2020-02-05 is not the model scenario's day 0, its simulation\.start_date 2020-02-01 "
            r"\(.*calibrate_2020\.yaml\): the observed window would be read 4 days off its simulated days; give "
            r"2020-02-01$",
        ),
        (  # a calibrator's embedding is its embed_dim whatever the kind (it said "an mlp's last hidden width")
            lambda d: d.update(
                models=[{"kind": "mlp", "hidden": [8], "embed_dim": 8}, {"kind": "gru", "hidden": [8]}],
                protocols=[{"name": "mapl"}],
            ),
            r"models: embedding widths \[8, 32\] are not allowed for protocols\[0\]: mapl compares every "
            r"institution's embeddings with shared prototypes, so they need one width \(embed_dim, whatever the "
            r"kind\); give every model the same$",
        ),
        (  # one day off, in the singular (it said '1 days')
            lambda d: d["model"].update(start_date="2020-02-02"),
            r"the observed window would be read 1 day off its simulated days; give 2020-02-01$",
        ),
    ],
)
def test_what_the_schema_cannot_see_is_checked_at_load(tmp_path, change, message):
    """Bad model overrides, tracts, seeding day and kc2020 windows: one message naming the file
    and the key when the scenario is read, not a traceback half-way through the run."""
    import yaml

    from abm.learning.errors import LearningScenarioError
    from abm.private_calibration.scenario import load_scenario

    here = Path(__file__).parent
    data = yaml.safe_load((here / "tiny.yaml").read_text())
    data["model"]["scenario"] = str((here / data["model"]["scenario"]).resolve())
    change(data)
    path = tmp_path / "pc.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(LearningScenarioError) as e:
        load_scenario(path)
    assert str(e.value).startswith(f"{path}: ") and re.search(message, str(e.value)), str(e.value)


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("disease.transmission_rate", "model.set[1]: 'disease.transmission_rate' is not allowed; write key.path=value"),
        (
            "disease.dwell_times[99].shape=2",
            "model.set[1]: disease.dwell_times[99].shape: disease.dwell_times is a list of 12; '99' is not allowed, "
            "give an index 0..11",
        ),
        ("outputs.map_days.0=5", "model.set[1]: outputs.map_days.0: outputs.map_days is not in the file, so it has"),
        (
            "seeding.day=-3",
            "model.set (on {model}): invalid scenario: seeding.day: -3 is not allowed",
        ),
        (  # model.set[0] gives it 3.0
            "disease.transmission_rate=4.0",
            "model.set[1]: disease.transmission_rate is given twice, as 3.0 and as 4.0; give it once",
        ),
    ],
)
def test_a_bad_model_set_item_is_named_by_the_file_and_its_key(tmp_path, item, message):
    """A bad item of a private-calibration scenario's model.set is named by that file and the key
    (FILE: model.set[1]), not as a --set option the user never typed ("FILE: model.set (on ...):
    --set: ..." or "(with --set ...)"): `abm validate` and `abm learn` print one message, exit 2
    and write nothing."""
    import yaml
    from typer.testing import CliRunner

    from abm.cli import app

    here = Path(__file__).parent
    data = yaml.safe_load((here / "tiny.yaml").read_text())
    model = str((here / data["model"]["scenario"]).resolve())
    data["model"]["scenario"] = model
    data["model"]["set"] = [*data["model"]["set"], item]
    path = tmp_path / "pc.yaml"
    path.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    for args in (["validate", str(path)], ["learn", str(path), "--out", str(out)]):
        result = CliRunner().invoke(app, args)
        flat = " ".join(result.stderr.split())
        assert result.exit_code == 2, result.output
        assert flat.startswith(f"error: {path}: {message.format(model=model)}"), flat
        assert flat.count("error:") == 1 and "--set" not in flat, flat
    assert list(tmp_path.iterdir()) == [path]


def test_a_bad_model_scenario_is_blamed_on_its_file_whatever_model_set_says(tmp_path):
    """A model scenario with a misspelled key of its own, named by a private calibration whose
    model.set is valid (tiny.yaml sets disease.transmission_rate): the message names model.scenario
    and the file; it said 'model.set (on FILE): invalid scenario: ...', blaming overrides that are
    fine, because the file's own message was compared with model.set's, which begins otherwise."""
    import yaml
    from typer.testing import CliRunner

    from abm.cli import app

    here = Path(__file__).parent
    data = yaml.safe_load((here / "tiny.yaml").read_text())
    shipped = (here / data["model"]["scenario"]).resolve()
    model = tmp_path / "model.yaml"
    model.write_text(f"extends: {shipped}\nsimulation: {{replicatez: 2}}\n")
    data["model"]["scenario"] = str(model)
    assert data["model"]["set"]  # a valid override, which is not at fault
    path = tmp_path / "pc.yaml"
    path.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    for args in (["validate", str(path)], ["learn", str(path), "--out", str(out)]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith(
            f"error: {path}: model.scenario: '{model}': {model}: invalid scenario: simulation.replicatez: unknown "
            "key; did you mean 'replicates'?"
        ), result.stderr
        assert "model.set" not in result.stderr and result.stderr.count("error:") == 1, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.yaml", "pc.yaml"]


def test_recovery_score_is_the_mean_over_parameters_and_own_score_uses_the_own_holdout():
    """A calibrator that always puts half its joint mass on (transmission bin 1, seeding bin 1) and
    half on (3, 1): marginal arg-max bins 1 (first of the tie) and 1. Held-out truths (1, 1) and
    (0, 1): transmission right once (0.5), seeding twice (1.0), so recovery = (0.5 + 1.0) / 2 = 0.75
    (not the best or the worst parameter). Own-prior truths (1, 0) twice: transmission 1.0,
    seeding 0.0, own recovery 0.5."""
    from torch import nn

    from abm.learning.data import Dataset
    from abm.learning.partition import ParticipantData
    from abm.learning.training import TrainConfig
    from abm.private_calibration.federation import CalibratorParticipant

    grid = BinGrid((FreeParameter("transmission", 0.5, 1.5, 4), FreeParameter("seeding", 2, 32, 2, log=True)))
    model = nn.Linear(1, 8)
    with torch.no_grad():
        model.weight.zero_()
        model.bias.fill_(-1e4)
        model.bias[[1 * 2 + 1, 3 * 2 + 1]] = 0.0
    x = torch.zeros(2, 1)
    test = Dataset(x, torch.tensor([1 * 2 + 1, 0 * 2 + 1]))
    own = Dataset(x, torch.tensor([1 * 2 + 0, 1 * 2 + 0]))
    p = CalibratorParticipant(0, ParticipantData(test, test, test), model, TrainConfig(), 0, grid=grid, own_test=own)
    assert p.recovery() == {"transmission": 0.5, "seeding": 1.0}
    assert p.score() == pytest.approx(0.75)
    assert p.own_score() == pytest.approx(0.5)


def test_the_true_bin_is_that_of_the_seeding_simulated():
    """Seeding counts agents: the observed series of a truth of 22.6 initial infections is simulated
    with 23 (as every training simulation rounds its draw), so the true bin that ``truth_bin_hit``
    judges against is 23's. With seeding bins cut at 22.63 (4 to 128, two log bins) 22.6 lies
    below the cut and 23 above; the true class was 22.6's."""
    import yaml

    from abm.private_calibration.institutions import build_institution
    from abm.private_calibration.scenario import load_scenario

    tiny = Path(__file__).parent / "tiny.yaml"
    data = yaml.safe_load(tiny.read_text())
    data["model"]["scenario"] = str((tiny.parent / data["model"]["scenario"]).resolve())
    data["parameters"]["seeding"] = {"low": 4, "high": 128, "bins": 2, "log": True}
    data["institutions"][0]["truth"]["seeding"] = 22.6
    data["institutions"][0].update(budget=8, ascertainment_draws=1)
    data["evaluation"] = {"holdout_simulations": 4, "val_simulations": 2, "own_holdout_simulations": 0}
    scenario, base = load_scenario(data)
    model = model_scenario(scenario, base)
    grid = scenario.grid()
    seeding = grid.names.index("seeding")
    assert grid.params[seeding].bin_of(22.6) == 0 and grid.params[seeding].bin_of(23) == 1
    inst = build_institution(scenario, model, load_region("king_county"), 0)
    assert inst.truth is not None and inst.truth["seeding"] == 22.6  # the truth as given
    assert grid.bins_of(np.array([inst.truth_class]))[0][seeding] == 1


def test_seeding_sizes_become_whole_infections_by_one_rule():
    """One rule turns a seeding size into whole initial infections, wherever one is simulated (the
    training and held-out draws, the observed series and its true bin, the fit at an estimate):
    the nearest whole number, a half going to the even neighbour, never below 0."""
    from abm.private_calibration.parameters import whole_infections

    sizes = [22.6, 22.4, 22.5, 23.5, 0.4, 0.5, 1.5, 64.0, -3.0]
    got = whole_infections(sizes)
    assert got.dtype == np.int64 and got.tolist() == [23, 22, 22, 24, 0, 0, 2, 64, 0]
    one = whole_infections(22.6)
    assert one.shape == () and int(one) == 23


def _tiny_data() -> dict:
    import yaml

    here = Path(__file__).parent
    data = yaml.safe_load((here / "tiny.yaml").read_text())
    data["model"]["scenario"] = str((here / data["model"]["scenario"]).resolve())
    return data


def _tiny_file(tmp_path: Path, **over: object) -> Path:
    import yaml

    data = _tiny_data()
    data.update(over)
    path = tmp_path / "pc.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_calibrators_whose_weights_exceed_the_memory_are_refused_naming_the_file(tmp_path, monkeypatch):
    """A calibrator of hidden width 1e11 passed `abm validate`, and `abm learn` failed only after
    simulating every institution. Its values are now counted from the spec: one line naming the
    file (not its folder, which abm learn's checks before the run named) and the sizes, exit code 2,
    nothing written, from both commands."""
    from typer.testing import CliRunner

    import abm.memory
    from abm.cli import app

    monkeypatch.setattr(abm.memory, "total_memory_bytes", lambda: 10**9)
    path = _tiny_file(tmp_path, models=[{"kind": "mlp", "hidden": [10**11]}], protocols=[{"name": "cycle"}])
    out = tmp_path / "out"
    line = (
        f"error: {path}: the run needs more memory than this machine has; give smaller sizes "
        "(institutions[*].agents and budget, the evaluation's simulations, the models' widths)"
    )
    for args in (["validate", str(path)], ["learn", str(path), "--out", str(out)]):
        result = CliRunner().invoke(app, args)
        assert (result.exit_code, result.output.strip().splitlines()) == (2, [line]), result.output
    assert not out.exists()


def test_a_missing_flower_is_named_by_the_file_not_its_folder(tmp_path, monkeypatch):
    """`abm learn --runner flower-sim` on a private calibration without flwr said 'error: FOLDER:
    the Flower runners ... need flwr': the loader's second value, the folder, stood for the file
    (now named with the option that asked for Flower)."""
    import sys

    from typer.testing import CliRunner

    from abm.cli import app

    monkeypatch.setitem(sys.modules, "flwr", None)
    path = _tiny_file(tmp_path, protocols=[{"name": "codream"}])
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["learn", str(path), "--out", str(out), "--runner", "flower-sim"])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(
        f"error: {path} (with --runner flower-sim): the Flower runners (flower-sim, flower) need flwr, which is not "
        "installed"
    ), result.stderr
    assert not out.exists()


def test_a_calibrators_counted_values_are_those_torch_builds():
    """CalibratorSpec.parameter_count (torch-free, for the memory check) against the float state of
    build_calibrator's model on 2 channels x 8 weeks into 64 joint bins."""
    from abm.private_calibration.models import build_calibrator
    from abm.private_calibration.scenario import CalibratorSpec

    for spec in [
        CalibratorSpec(kind="mlp", hidden=[16, 8], embed_dim=5),
        CalibratorSpec(kind="mlp", hidden=[7], batchnorm=False),
        CalibratorSpec(kind="cnn", channels=[4, 6], embed_dim=9),
        CalibratorSpec(kind="cnn", channels=[3], embed_dim=2, batchnorm=False),
        CalibratorSpec(kind="gru", hidden=[12], embed_dim=5),
    ]:
        model = build_calibrator(spec.kind, 2, 8, 64, spec.hidden, spec.channels, spec.embed_dim, spec.batchnorm)
        built = sum(t.numel() for t in model.state_dict().values() if t.is_floating_point())
        assert spec.parameter_count((2, 8), 64) == built, spec


def test_simulations_the_memory_cannot_hold_are_refused_when_the_scenario_is_loaded(tmp_path, monkeypatch):
    """An institution's budget (or an evaluation set) is simulated as replicates of one run of its
    agents: 10^6 of them passed `abm validate` and ended `abm learn` only as it simulated. Refused
    at load, as `abm run` refuses a run that cannot fit (the engine's estimate at its lowest against
    the machine's memory and swap: here a machine of 1 GB), naming the key, exit code 2, nothing
    written; the tiny scenario itself fits."""
    from typer.testing import CliRunner

    import abm.memory
    from abm.cli import app

    monkeypatch.setattr(abm.memory, "total_memory_bytes", lambda: 10**9)
    institutions = _tiny_data()["institutions"]
    institutions[1]["budget"] = 10**6
    # the institutions simulate on the CPU whatever the model's device says (the check passed over them)
    gpu = {**_tiny_data()["model"], "set": ["disease.transmission_rate=3.0", "simulation.device=cuda"]}
    out = tmp_path / "out"
    for over, key in (
        ({"institutions": institutions}, r"institutions\[1\]\.budget: 1,000,000 simulations of institutions\[1\]"),
        (
            {"institutions": institutions, "model": gpu},
            r"institutions\[1\]\.budget: 1,000,000 simulations of institutions\[1\]",
        ),
        (
            {"evaluation": {"holdout_simulations": 10**6}},
            r"evaluation\.holdout_simulations: 1,000,000 simulations "
            r"of institutions\[0\]",
        ),
    ):
        path = _tiny_file(tmp_path, **over)
        for args in (["validate", str(path)], ["learn", str(path), "--out", str(out)]):
            result = CliRunner().invoke(app, args)
            assert result.exit_code == 2, result.output
            assert re.fullmatch(
                rf"error: {re.escape(str(path))}: {key}'s 600 agents, run at once, need at least about [\d.]+ GB, but "
                r"this machine has 1\.0 GB of memory and swap in all; give fewer simulations or agents "
                r"\(institutions\[\d\]\.agents\)\n",
                result.output,
            ), result.output
    assert not out.exists()
    assert CliRunner().invoke(app, ["validate", str(_tiny_file(tmp_path))]).exit_code == 0


def test_validate_show_names_the_model_scenario_so_that_its_yaml_loads_from_anywhere(tmp_path):
    """`abm validate FILE --show > full.yaml` (README) of a private calibration printed model.scenario
    as FILE gives it, relative to FILE's folder, so full.yaml saved elsewhere named no file ('no such
    file'). It now names it by its full path (a report's scenario.json names the copy it keeps)."""
    from typer.testing import CliRunner

    from abm.cli import app

    here = Path(__file__).parent
    shown = CliRunner().invoke(app, ["validate", str(here / "tiny.yaml"), "--show"])
    assert shown.exit_code == 0, shown.output
    model = (here / "../../scenarios/king_county/calibrate_2020.yaml").resolve()
    assert f"scenario: {model}\n" in shown.stdout
    full = tmp_path / "full.yaml"
    full.write_text(shown.stdout)
    again = CliRunner().invoke(app, ["validate", str(full)])
    assert again.exit_code == 0 and again.stdout == f"ok {full}: private calibration scenario 'pc_tiny' is valid\n"


def test_a_dicts_model_scenario_is_read_from_the_working_folder(tmp_path, monkeypatch):
    """A scenario given as a dict names its model scenario relative to the working folder, as
    ``abm.run`` reads a dict's ``extends``: it was read from ``scenarios/learning/`` below it, the
    checkout's folder, so a user's own file was not found (and a missing one's message gave that
    folder) unless the working folder held a copy of the checkout's scenarios."""
    import shutil

    import yaml

    from abm.learning.errors import LearningScenarioError
    from abm.private_calibration.scenario import load_scenario

    here = Path(__file__).parent
    data = yaml.safe_load((here / "tiny.yaml").read_text())
    shipped = (here / data["model"]["scenario"]).resolve()  # calibrate_2020.yaml, which extends base.yaml
    (tmp_path / "models").mkdir()
    for name in (shipped.name, "base.yaml"):
        shutil.copy(shipped.parent / name, tmp_path / "models" / name)
    monkeypatch.chdir(tmp_path)
    data["model"]["scenario"] = f"models/{shipped.name}"
    scenario, base = load_scenario(data)
    assert (base / scenario.model.scenario).resolve() == (tmp_path / "models" / shipped.name).resolve()

    data["model"]["scenario"] = "models/absent.yaml"
    with pytest.raises(LearningScenarioError) as e:
        load_scenario(data)
    assert str(e.value) == (
        "<dict>: model.scenario: 'models/absent.yaml' is not allowed: no such file "
        f"({tmp_path.resolve() / 'models' / 'absent.yaml'})"
    )
