"""Whole runs on the King County population: bookkeeping, reproducibility, replicates."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import fixed_seeds_note

import abm
from abm.engine import ContactConfig, DiseaseConfig, SeedingConfig, Simulation, Stage


@pytest.fixture(scope="module")
def small_kc(king_county):
    from abm.populations import build_population

    return build_population(king_county, 20_000, seed=1)


def simulate(pop, seed: int, replicates: int = 2, days: int = 60) -> tuple[Simulation, object]:
    sim = Simulation(
        pop,
        DiseaseConfig(),
        ContactConfig(),
        SeedingConfig(infections={"asymptomatic": 10, "presymptomatic_mild": 10}),
        days=days,
        replicates=replicates,
        seed=seed,
    )
    return sim, sim.run()


def test_stage_counts_sum_to_n_and_match_the_agents(small_kc):
    sim, res = simulate(small_kc, seed=1)
    n = small_kc.size
    assert (res.stages.sum(axis=2) == n).all(), "every agent is in exactly one stage every day"
    final = sim.state.stage.view(2, n).long()
    recount = np.stack([torch.bincount(final[r], minlength=11).numpy() for r in range(2)])
    assert np.array_equal(res.stages[-1], recount), "event-kept counts equal a recount"
    tract = torch.as_tensor(small_kc.tract).long()
    by_tract = torch.zeros(len(small_kc.tracts), 11, dtype=torch.long).index_put_(
        (tract, final[0]), torch.ones(n, dtype=torch.long), accumulate=True
    )
    assert np.array_equal(res.stages_by_tract[-1, 0], by_tract.numpy())
    # Cumulative infections grow by the day's new infections.
    cum = n - res.stages[:, :, Stage.SUSCEPTIBLE]
    assert np.array_equal(np.diff(cum, axis=0), res.new_infections[1:])
    assert (res.new_infections[0] == 20).all(), "the 20 initial infections count on day 0"
    # Entries: deaths enter once; a stage's count changes by entries minus exits.
    deaths = res.stages[:, :, Stage.DEATH]
    assert np.array_equal(np.diff(deaths, axis=0), res.entries[1:, :, Stage.DEATH])
    hosp = res.stages[:, :, Stage.HOSPITALIZED].astype(int)
    assert (np.diff(hosp, axis=0) <= res.entries[1:, :, Stage.HOSPITALIZED]).all()
    assert res.admissions.sum() > 0 and np.array_equal(res.admissions, res.entries[:, :, Stage.HOSPITALIZED])
    assert cum[-1].min() > 200, "the epidemic took off"


def test_same_seed_same_results_and_different_seeds_differ(small_kc):
    _, a = simulate(small_kc, seed=4)
    _, b = simulate(small_kc, seed=4)
    _, c = simulate(small_kc, seed=5)
    assert np.array_equal(a.stages_by_tract, b.stages_by_tract)
    assert np.array_equal(a.new_by_age, b.new_by_age)
    assert not np.array_equal(a.stages, c.stages)
    # Replicates of one batch are independent runs, not copies.
    assert not np.array_equal(a.stages[:, 0], a.stages[:, 1])


def test_results_do_not_depend_on_the_number_of_threads():
    """A seed gives the same results whatever simulation.threads is (docs/model.md), with every
    intervention on and an epidemic large enough for the multi-threaded paths."""
    with fixed_seeds_note():
        runs = [
            abm.run(
                "scenarios/king_county/vacc_ct.yaml",
                agents=20_000,
                days=80,
                replicates=2,
                sets=["disease.transmission_rate=6", f"simulation.threads={t}"],
            )
            for t in (1, 2)
        ]
    one, two = (r.result for r in runs)
    assert int(one.entries.sum()) > 2_000, "the check needs an epidemic"
    assert np.array_equal(one.stages_by_tract, two.stages_by_tract)
    assert np.array_equal(one.entries, two.entries)
    assert runs[0].costs.equals(runs[1].costs)


def test_run_api_returns_tables_consistent_with_the_summary():
    with fixed_seeds_note():
        r = abm.run("scenarios/king_county/no_intervention.yaml", agents=5000, days=40, replicates=3)
    ts = r.timeseries
    assert len(ts) == 40 * 3
    mean_hosp = ts.groupby("day")["hospitalized"].mean()
    assert r.summary["peak_hospitalized"]["value"] == pytest.approx(mean_hosp.max())
    assert r.summary["peak_hospitalized"]["day"] == int(mean_hosp.idxmax())
    last = ts[ts.day == 39]
    assert r.summary["cumulative_infected"]["mean"] == pytest.approx(last.cumulative_infected.mean())
    assert r.summary["deaths"]["mean"] == pytest.approx(last.deaths.mean())
    # by_age sums to the timeseries; by_tract's mean over replicates sums to the mean curve.
    ba = r.by_age.groupby(["day", "replicate"])[["new_infections", "cumulative_infected", "deaths"]].sum()
    tsi = ts.set_index(["day", "replicate"])[["new_infections", "cumulative_infected", "deaths"]]
    assert np.array_equal(ba.to_numpy(), tsi.to_numpy())
    bt = r.by_tract.groupby("day")["cumulative_infected"].sum()
    assert np.allclose(bt.to_numpy(), ts.groupby("day")["cumulative_infected"].mean().to_numpy())


@pytest.mark.parametrize("scenario", ["sq", "vacc_ct"])
def test_a_finished_simulation_is_freed_without_the_cyclic_collector(scenario):
    """Nothing of a run refers back to its simulation in a cycle, so its tensors are freed as
    soon as the last reference goes; a process running many simulations (calibration trials,
    sweep runs) does not hold the finished ones until Python's cyclic collector runs."""
    import gc
    import weakref

    from abm.populations import load_region
    from abm.runs import population_of, resolve, simulation_of

    sc = resolve(f"scenarios/king_county/{scenario}.yaml", {"agents": 3000, "days": 40}, None)
    sim = simulation_of(sc, population_of(sc, load_region(sc.population.region)))
    gc.disable()
    try:
        sim.run(None)
        ref = weakref.ref(sim)
        del sim
        assert ref() is None
    finally:
        gc.enable()


def test_runs_that_reuse_a_population_and_network_give_what_fresh_runs_give(builds):
    """A Reuse (calibration trials) builds a population and a community network once for runs
    that share their settings and seed, and such a run equals one that builds its own, after a
    run with other disease values; a change of seed, replicates or community settings builds
    anew (keep 1: the earlier one goes)."""
    import abm.runs as runs

    path = "scenarios/king_county/vacc_ct.yaml"
    small = {"agents": 3000, "days": 40, "replicates": 2}
    changes = [
        ({}, {"population": 1, "community": 1}),
        ({"seed": 7}, {"population": 2, "community": 2}),
        ({"seed": 7, "replicates": 3}, {"population": 2, "community": 3}),
        (
            {"seed": 7, "replicates": 3, "sets": ["contacts.community.local_share=0.5"]},
            {"population": 2, "community": 4},
        ),
    ]
    with fixed_seeds_note():
        fresh = [abm.run(path, **{**small, **change}) for change, _ in changes]
    builds.update(population=0, community=0)  # counted from here on
    reuse = runs.Reuse()
    with fixed_seeds_note():
        first = abm.run(path, sets=["disease.transmission_rate=6"], reuse=reuse, **small)
    assert not first.timeseries.equals(fresh[0].timeseries)  # the rate changed the epidemic
    for (change, expected_builds), expected in zip(changes, fresh, strict=True):
        with fixed_seeds_note():
            again = abm.run(path, reuse=reuse, **{**small, **change})
        assert builds == expected_builds, change
        pd.testing.assert_frame_equal(again.timeseries, expected.timeseries)
        assert again.summary == expected.summary
        if not change:
            assert again.population is first.population
    assert len(reuse._populations) == len(reuse._networks) == 1


def test_a_community_network_of_other_settings_is_refused(small_kc):
    from abm.engine.reference_contacts import community_layer

    cfg = ContactConfig()
    layer = community_layer(small_kc, cfg.community, 2, torch.device("cpu"), 1, False)
    args = dict(disease_cfg=DiseaseConfig(), contact_cfg=cfg, seeding=SeedingConfig(), days=5, replicates=2)
    assert Simulation(small_kc, **args, seed=1, community_built=layer).community is layer
    with pytest.raises(ValueError, match="community_built"):
        Simulation(small_kc, **args, seed=2, community_built=layer)
