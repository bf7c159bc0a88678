"""Who infected whom, and the reproduction number built on it (abm.engine.infectors,
abm.outputs.reproduction, the timeseries columns, summary, console and plot)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from conftest import fixed_seeds_note

from abm.engine import DiseaseConfig, SeedingConfig, Simulation
from abm.engine.infectors import choose
from abm.outputs import reproduction
from abm.outputs.summary import reproduction_summary
from abm.outputs.summary_table import few_infections, summary_table
from abm.runs import population_of, resolve, simulation_of
from abm.scenario import load_region
from tests.conftest import make_population, quiet_contacts


def test_choose_draws_each_pair_in_proportion_to_its_value():
    # target 0 owns positions 1 (2.0) and 3 (0.0); target 1 owns 0 (1.0), 2 (3.0) and 4 (4.0):
    # cumulative shares 1/8, 4/8, 8/8, so u picks the first pair whose share exceeds it.
    owner = torch.tensor([1, 0, 1, 0, 1])
    value = torch.tensor([1.0, 2.0, 3.0, 0.0, 4.0])
    for u0, u1, expected in [
        (0.0, 0.0, [1, 0]),
        (0.999, 0.1249, [1, 0]),
        (0.5, 0.125, [1, 2]),
        (0.5, 0.49, [1, 2]),
        (0.5, 0.5, [1, 4]),
        (0.5, 0.9999, [1, 4]),
    ]:
        assert choose(owner, value, torch.tensor([u0, u1])).tolist() == expected
    with pytest.raises(ValueError, match="without any pair"):
        choose(torch.tensor([0]), torch.tensor([1.0]), torch.tensor([0.5, 0.5]))
    with pytest.raises(ValueError, match="carry nothing"):
        choose(torch.tensor([0, 1]), torch.tensor([1.0, 0.0]), torch.tensor([0.5, 0.5]))


def test_choose_frequencies_follow_the_values():
    # 40,000 draws among values 1, 2, 5: shares 1/8, 2/8, 5/8, each within 4 binomial sds.
    n = 40_000
    owner = torch.arange(n).repeat_interleave(3)
    value = torch.tensor([1.0, 2.0, 5.0]).repeat(n)
    u = torch.rand(n, generator=torch.Generator().manual_seed(3))
    counts = torch.bincount(choose(owner, value, u) % 3, minlength=3).numpy()
    for got, share in zip(counts, (1 / 8, 2 / 8, 5 / 8), strict=True):
        assert abs(got - n * share) < 4 * math.sqrt(n * share * (1 - share))


def _mid_epidemic(construction: str, replicates: int = 2, days: int = 25) -> Simulation:
    sc = resolve(
        "scenarios/king_county/no_intervention.yaml",
        {"agents": 4000, "replicates": replicates, "days": 60, "seed": 3},
        [f"contacts.community.construction={construction}", "seeding.infections={asymptomatic: 40}"],
    )
    sim = simulation_of(sc, population_of(sc, load_region(sc.population.region)), device=torch.device("cpu"))
    for day in range(days):
        sim.step(day)
    return sim


@pytest.mark.parametrize("construction", ["local_mix", "stub_path"])
def test_each_infectors_share_sums_to_the_force_of_infection(construction):
    """Every agent exposed today: its infectious contacts' values, summed, are its force of
    infection, layer by layer weights and normalisers included, also with a closed setting and a
    scaled layer; and each pair's contact is one of today's infectious agents."""
    sim = _mid_epidemic(construction)
    day = 25
    for closures in ({}, {"SCHOOL": 0.0, "OFFICE": 0.5}):
        sim.occupation.scale_settings(closures)
        sim.layer_scale["community"] = 0.5 if closures else 1.0
        target, force = sim.exposure(day)
        assert target.numel() > 500
        src, _ = sim._sources
        # an infectious agent's force may hold its own infectiousness (a rewired contact that
        # came back to it), which infects no one: the agents who can be infected are compared
        keep = ~torch.isin(target, src)
        target, force = target[keep], force[keep]
        owner, partner, value = sim.infector_pairs(target, day)
        summed = torch.zeros_like(force).index_add_(0, owner, value)
        torch.testing.assert_close(summed, force, rtol=1e-5, atol=1e-9)
        assert bool(torch.isin(partner, src).all())
    assert float(sim._x.abs().sum()) == 0.0  # the scratch vector is left clean


def test_the_occupation_layers_one_day_lookup_finds_the_same_pairs():
    sim = _mid_epidemic("local_mix", days=3)
    agents = torch.randperm(sim.total, generator=torch.Generator().manual_seed(1))[:1500]
    for day in (0, 2, 9):
        for layer in sim.layers:
            a, b = layer.contacts_of(agents, day), layer.contacts_on(agents, day)
            assert sorted(zip(*[t.tolist() for t in a], strict=True)) == sorted(
                zip(*[t.tolist() for t in b], strict=True)
            )


def test_one_household_seed_infects_the_other_two_exactly():
    """Three agents in one household, one seeded, transmission certain: the seed causes both other
    infections the next day (reproduction number 2 on day 0, 0 on day 1, a generation interval
    of 1 day), final once everyone has recovered or died."""
    pop = make_population([[0, 1, 2]])
    sim = Simulation(
        pop,
        DiseaseConfig(transmission_rate=1e6),
        quiet_contacts(household={"weight": 1.0}),
        SeedingConfig(infections={"asymptomatic": 1}),
        days=120,
        replicates=3,
        seed=2,
    )
    res = sim.run()
    assert res.new_infections[:2].tolist() == [[1, 1, 1], [2, 2, 2]]
    assert res.secondary[:2].tolist() == [[2, 2, 2], [0, 0, 0]]
    assert res.unfinished.sum() == 0
    r = res.reproduction_number
    assert r[:2].tolist() == [[2.0, 2.0, 2.0], [0.0, 0.0, 0.0]]
    assert np.isnan(r[2:]).all()  # no one infected on the later days
    assert res.generation_days[1].tolist() == [2, 2, 2]  # two infections, 1 day each
    # the first week (days 0-6) holds the 3 infections, which caused 2: 2/3 in every replicate, a
    # figure that cannot vary here, and the summary says what it rests on
    initial = reproduction_summary(res)["initial"]
    assert initial == {"mean": pytest.approx(2 / 3), "sd": 0.0, "replicates": 3, "infections": [3, 3, 3]}
    assert few_infections(initial)[0] == " (first weeks of 3 infections)"


def test_attribution_changes_no_epidemic_and_accounts_for_every_transmission():
    sc = resolve("scenarios/king_county/no_intervention.yaml", {"agents": 5000, "replicates": 3, "days": 90}, None)
    pop = population_of(sc, load_region(sc.population.region))
    off = simulation_of(sc, pop, device=torch.device("cpu"), attribute_infections=False).run()
    on = simulation_of(sc, pop, device=torch.device("cpu")).run()
    for key in ("stages_by_tract", "new_by_tract", "stages_by_age", "entries", "introduced"):
        assert np.array_equal(getattr(off, key), getattr(on, key)), key
    assert off.secondary is None and off.reproduction_number is None
    assert on.transmitted.sum() > 300
    # every infection by transmission has one infector among the agents infected in the run
    assert on.secondary.sum(axis=0).tolist() == on.transmitted.sum(axis=0).tolist()
    # an infector infects from the day after its own infection: every interval is 1 day or more
    assert (on.generation_days >= on.transmitted).all()
    # a day's figure is final only where none of its agents is still infected
    final = on.unfinished == 0
    r = on.reproduction_number
    assert np.isnan(r[~final]).all() and (on.unfinished[-1] > 0).any()


def test_weekly_and_first_week_pool_the_final_days_only():
    new = np.array([[2, 1], [0, 0], [4, 0], [1, 3]], dtype=float)
    caused = np.array([[4, 3], [0, 0], [2, 0], [0, 1]], dtype=float)
    final = np.array([[True, True], [True, True], [True, True], [False, True]])
    np.testing.assert_allclose(reproduction.first_week(new, caused, final), [np.nan, 1.0])
    final[3, 0] = True
    np.testing.assert_allclose(reproduction.first_week(new, caused, final), [6 / 7, 1.0])
    # the infections each figure rests on: replicate 0's 2 + 4 + 1, replicate 1's 1 + 3
    assert reproduction.first_week_infections(new).tolist() == [7.0, 4.0]
    assert reproduction.first_week_infections(np.zeros((4, 1))).tolist() == [0.0]
    w = reproduction.weekly(new, caused, final)
    # a centred week holds days d-3..d+3: here every day sees the whole run
    np.testing.assert_allclose(w, [[6 / 7, 1.0]] * 4)
    # pooled: the replicates' infections together (6 + 4 caused by 7 + 4), not the mean of 6/7 and 1
    np.testing.assert_allclose(reproduction.weekly_pooled(new, caused, final), [10 / 11] * 4)
    final[2, 1] = False  # a day of replicate 1 not final: every window that holds it is empty
    assert np.isnan(reproduction.weekly(new, caused, final)[:, 1]).all()
    np.testing.assert_allclose(reproduction.weekly_pooled(new, caused, final), [6 / 7] * 4)  # replicate 0's alone
    final[0, 0] = False
    assert np.isnan(reproduction.weekly_pooled(new, caused, final)).all()


def test_the_first_week_is_the_day_of_the_first_infection_and_the_six_after_it():
    """First infections on day 2: the first week is days 2-8, so day 8's infection and what it
    caused count, day 9's do not, nor does day 10 whose count is not final: (4 + 5) / (2 + 1)."""
    new, caused = np.zeros((12, 1)), np.zeros((12, 1))
    new[[2, 8, 9], 0] = [2, 1, 4]
    caused[[2, 8, 9], 0] = [4, 5, 10]
    final = np.ones_like(new, dtype=bool)
    final[10, 0] = False
    assert reproduction.first_week(new, caused, final).tolist() == [3.0]
    assert reproduction.first_week_infections(new).tolist() == [3.0]


def test_weeks_of_too_few_infections_are_left_out():
    """``least``: a replicate's week (weekly) or the replicates' weeks together (weekly_pooled) with
    fewer infections than that has no figure; at the bound it has one."""
    new = np.array([[3, 9], [2, 0], [0, 0], [0, 0], [0, 0], [0, 0], [0, 0], [0, 1]], dtype=float)
    caused = np.array([[3, 9], [4, 0], [0, 0], [0, 0], [0, 0], [0, 0], [0, 0], [0, 2]], dtype=float)
    final = np.ones_like(new, dtype=bool)
    # day 0's week (days 0-3) holds 5 infections in replicate 0 and 9 in replicate 1; day 4's
    # (days 1-7) 2 and 1; day 7's (days 4-7) 0 and 1
    w = reproduction.weekly(new, caused, final, least=5)
    np.testing.assert_allclose(w[0], [7 / 5, 1.0])
    assert np.isnan(w[4:, :]).all()
    np.testing.assert_allclose(reproduction.weekly(new, caused, final, least=9)[0], [np.nan, 1.0])
    pooled = reproduction.weekly_pooled(new, caused, final, least=14)
    # days 0-3's weeks hold day 0: 5 + 9 infections; day 4's (days 1-7) 2 + 1
    np.testing.assert_allclose(pooled[:4], [16 / 14] * 4)
    assert np.isnan(pooled[4:]).all()
    np.testing.assert_allclose(reproduction.weekly_pooled(new, caused, final, least=15)[:2], [np.nan, np.nan])
    assert reproduction.weekly_pooled(new, caused, final, least=3)[4] == pytest.approx(6 / 3)
    # least below 1 means 1: a week without infections never has a figure
    assert np.isnan(reproduction.weekly(new, caused, final, least=0)[7, 0])


def test_the_plot_leaves_out_weeks_of_too_few_infections():
    """The reproduction number's plot draws no line or band over weeks of fewer than
    PLOTTED_LEAST infections, and its legend says so."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from abm.outputs import plots

    days, least = 30, reproduction.PLOTTED_LEAST
    # one replicate: `least` infections a day for 10 days, then one a day; each causes one
    new = np.where(np.arange(days) < 10, least, 1).astype(float)
    ts = pd.DataFrame(
        {"day": np.arange(days), "replicate": 0, "new_infections": new, "secondary_infections": new,
         "reproduction_number": np.ones(days)}
    )  # fmt: skip
    run = plots.RunTables("r", ts, pd.DataFrame(), pd.DataFrame(), {"agents": 1000, "days": days, "replicates": 1})
    fig = plots.FIGURES["reproduction_number"]([run])
    line = next(ln for ln in fig.axes[0].get_lines() if ln.get_label() == "r")
    y = np.asarray(line.get_ydata(), dtype=float)
    # day d's week holds days d-3..d+3: from day 13 on, at most 3 + 3 ones... below `least`
    assert np.isfinite(y[:13]).all() and (y[:13] == 1.0).all()
    assert np.isnan(y[13:]).all()
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert f"weeks of fewer than {least} infections\n(the band: in the replicate): not drawn" in labels
    plt.close(fig)


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    from typer.testing import CliRunner

    from abm.cli import app

    out = tmp_path_factory.mktemp("r") / "run"
    result = CliRunner().invoke(
        app,
        ["run", "scenarios/king_county/no_intervention.yaml", "--agents", "5000", "--replicates", "3",
         "--days", "150", "--out", str(out)],
        env={"COLUMNS": "200"},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return out, result.output


def test_abm_run_writes_the_reproduction_number(run_folder):
    out, console = run_folder
    ts = pd.read_csv(out / "timeseries.csv")
    summary = json.loads((out / "summary.json").read_text())
    for _, row in ts[ts["reproduction_number"].notna()].iterrows():
        assert row["reproduction_number"] == pytest.approx(row["secondary_infections"] / row["new_infections"])
    per_replicate = ts.groupby("replicate")
    resolved = yaml.safe_load((out / "scenario.resolved.yaml").read_text())
    seeded = sum(resolved["seeding"]["infections"].values())  # a replicate, on day 0
    transmitted = per_replicate["new_infections"].sum() - seeded
    assert per_replicate["secondary_infections"].sum().tolist() == transmitted.astype(int).tolist()
    rn = summary["reproduction_number"]
    new, caused, final = reproduction.arrays(ts)
    first = reproduction.first_week(new, caused, final)
    assert rn["initial"]["mean"] == pytest.approx(np.nanmean(first))
    assert rn["initial"]["replicates"] == int((~np.isnan(first)).sum())
    counts = reproduction.first_week_infections(new)[~np.isnan(first)].astype(int).tolist()
    assert rn["initial"]["infections"] == counts
    # the mean generation interval of each replicate, from the per-day means and counts
    ts["transmitted"] = ts["new_infections"] - np.where(ts["day"] == 0, seeded, 0)
    ts["days"] = ts["generation_interval"].fillna(0) * ts["transmitted"]
    sums = ts.groupby("replicate")[["days", "transmitted"]].sum()
    assert rn["generation_interval_days"]["mean"] == pytest.approx((sums["days"] / sums["transmitted"]).mean())
    # the console prints the summary's table (whose cells may wrap on a narrow terminal)
    table = summary_table(summary).markdown()
    assert f"| reproduction number, first week | {rn['initial']['mean']:.2f} ± " in table
    assert f"| generation interval (days) | {rn['generation_interval_days']['mean']:.1f} ± " in table
    assert f"{rn['initial']['mean']:.2f} ± {rn['initial']['sd']:.2f}" in console
    # 5 seeds in 5,000 agents: a first week of a dozen infections or so, which the row names
    few = few_infections(rn["initial"])[0].strip()
    # (in the table the console prints: a console whose width was fixed before this test may wrap the cell)
    assert bool(few) == (min(counts) < reproduction.PLOTTED_LEAST) and few in " ".join(table.split()), table
    assert (out / "plots" / "reproduction_number.png").is_file()
    assert "reproduction_number.png" in (out / "report.html").read_text()


def test_reproduction_number_off_writes_none(tmp_path):
    from typer.testing import CliRunner

    from abm.cli import app

    out = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        ["run", "scenarios/king_county/no_intervention.yaml", "--agents", "2000", "--replicates", "1",
         "--days", "20", "--set", "outputs.reproduction_number=false", "--out", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    ts = pd.read_csv(out / "timeseries.csv")
    assert "reproduction_number" not in ts.columns and "secondary_infections" not in ts.columns
    summary = json.loads((out / "summary.json").read_text())
    assert summary["reproduction_number"] is None
    assert not (out / "plots" / "reproduction_number.png").exists()
    assert "reproduction number" not in summary_table(summary).markdown()


def test_a_day_is_final_once_its_agents_can_infect_no_one():
    """Agents in hospital (infectiousness 0, and every stage after it too) cannot add to their
    day's count: that day is final; an infection table that sends the hospital back to an
    infectious stage makes it open again."""
    from abm.engine.config import DwellTime
    from abm.engine.disease import STAGE_NAMES, DiseaseModel

    can = DiseaseModel(DiseaseConfig(), 10, torch.device("cpu")).can_still_infect
    open_ = {"susceptible", "asymptomatic", "presymptomatic_mild", "presymptomatic_severe", "mild_symptoms",
             "severe_symptoms"}  # fmt: skip
    assert {n for n, c in zip(STAGE_NAMES, can[4].tolist(), strict=True) if c} == open_
    table = DiseaseConfig().branching
    h, m = STAGE_NAMES.index("hospitalized"), STAGE_NAMES.index("mild_symptoms")
    for rows in table:  # from hospital, back to mild symptoms (a table no one would write; it tests the reach)
        rows[h] = [1.0 if k == m else 0.0 for k in range(len(STAGE_NAMES))]
    back = DwellTime.model_validate(
        {"from": "hospitalized", "to": "mild_symptoms", "distribution": "two_point", "mean": 2}
    )
    cfg = DiseaseConfig(branching=table, dwell_times=[*DiseaseConfig().dwell_times, back])
    looped = DiseaseModel(cfg, 10, torch.device("cpu"))
    assert bool(looped.can_still_infect[4, h]) and not bool(looped.can_still_infect[4, STAGE_NAMES.index("death")])


def test_an_agent_whose_infectiousness_profile_is_spent_counts_as_done():
    """The profile's tail is only zero in the limit: an agent with at most DONE (1e-4) of it left
    counts as done, which with the default profile (gamma, mean 5.5, sd 2.14 days) is from day 18
    after its infection on: 1 - F(17) = 1.16e-4 and 1 - F(18) = 4.7e-5, F the gamma's cdf."""
    from scipy.stats import gamma

    from abm.engine.disease import DiseaseModel
    from abm.engine.recorder import DONE

    left = DiseaseModel(DiseaseConfig(), 60, torch.device("cpu")).profile_left
    shape, scale = 5.5**2 / 2.14**2, 2.14**2 / 5.5
    np.testing.assert_allclose(left[:30].numpy(), gamma.sf(np.arange(30), shape, scale=scale), rtol=1e-5, atol=1e-9)
    assert next(k for k in range(30) if left[k] <= DONE) == 18
    # a run: every agent infected on day 0 of a 19-day run has day 18 behind it, so day 0 is final
    # unless one of them is still in an infectious stage and was infected less than 18 days ago
    pop = make_population([[i] for i in range(50)])
    sim = Simulation(pop, DiseaseConfig(), quiet_contacts(), SeedingConfig(infections={"mild_symptoms": 50}), days=19)
    res = sim.run()
    assert res.unfinished[0, 0] == 0 and res.reproduction_number[0, 0] == 0.0
    short = Simulation(pop, DiseaseConfig(), quiet_contacts(), SeedingConfig(infections={"mild_symptoms": 50}), days=18)
    assert short.run().unfinished[0, 0] > 0  # 17 days on, some are still mildly ill with 1.2e-4 left


def test_compare_report_shows_only_the_plots_it_wrote(tmp_path):
    """abm compare of runs none of which recorded the reproduction number (outputs.reproduction_number:
    false, or folders written before abm had it) writes no reproduction_number.png: its report.html
    showed that figure anyway, a broken image. With one run that has it, the plot is drawn and shown."""
    import re

    import abm

    def run(name: str, on: bool) -> object:
        sets = [f"outputs.reproduction_number={'true' if on else 'false'}"]
        with fixed_seeds_note():
            return abm.run(f"scenarios/king_county/{name}.yaml", agents=1000, days=15, replicates=1, seed=1, sets=sets)

    off = {name: run(name, False).write(tmp_path / name, figures=False) for name in ("ni", "sq")}
    on = run("ni", True).write(tmp_path / "ni_on", figures=False)
    for folders, shown in (([off["ni"], off["sq"]], False), ([on, off["sq"]], True)):
        out = tmp_path / f"cmp_{shown}"
        abm.compare(folders, out=out)
        sources = re.findall(r'src="(plots/[^"]+)"', (out / "report.html").read_text())
        assert len(sources) == 6 + shown
        assert ("plots/reproduction_number.png" in sources) == shown
        for src in sources:
            assert (out / src).is_file(), src


@pytest.mark.parametrize(
    ("scenario", "sets"),
    [
        ("scenarios/king_county/vacc_ct.yaml", ["contacts.same_in_every_replicate=[occupation]"]),
        ("scenarios/reference/ct.yaml", ["interventions.quarantine.blocks=infector"]),
    ],
)
def test_attribution_changes_no_traced_epidemic_and_sums_to_each_force(scenario, sets):
    """Tracing reads the occupation layer's rewiring, which the infectors' look-up reuses (a day's
    new members kept by rewired_to): with tracing, vaccination, shared rewiring, the reference
    population and isolated targets left exposed, every recorded array and count is the same
    with or without attribution; and on every day each infected agent's pairs sum to its force."""
    sc = resolve(
        scenario, {"agents": 2000, "replicates": 2, "days": 45, "seed": 4}, [*sets, "disease.transmission_rate=12"]
    )
    pop = population_of(sc, load_region(sc.population.region) if sc.population.kind != "reference" else None)
    off = simulation_of(sc, pop, device=torch.device("cpu"), attribute_infections=False).run()
    sim = simulation_of(sc, pop, device=torch.device("cpu"))
    exposure, infectors, checked = sim.exposure, sim.infectors, []

    def check(targets: torch.Tensor, day: int) -> torch.Tensor:
        target, force = exposure(day)  # the same force again: exposure draws nothing
        at = torch.searchsorted(target, targets)  # every infected agent was exposed today
        assert bool((target[at.clamp_max(target.shape[0] - 1)] == targets).all())
        owner, partner, value = sim.infector_pairs(targets, day)
        summed = torch.zeros(targets.shape[0], dtype=torch.float64).index_add_(0, owner, value.double())
        torch.testing.assert_close(summed, force[at].double(), rtol=1e-5, atol=0.0)
        assert bool(torch.isin(partner, sim._sources[0]).all())  # each infector infectious today
        checked.append(targets.shape[0])
        return infectors(targets, day)

    sim.infectors = check
    on = sim.run()
    assert sum(checked) == on.transmitted.sum() > 1000
    for key in ("stages_by_tract", "new_by_tract", "stages_by_age", "entries", "introduced", "cost_totals"):
        assert np.array_equal(getattr(off, key), getattr(on, key)), key
    assert off.activity.keys() == on.activity.keys()
    for name, counts in on.activity.items():
        assert np.array_equal(off.activity[name], counts), name
    assert on.activity["app_notifications"].sum() > 0 and on.activity["interviews"].sum() > 0
    assert on.secondary.sum(axis=0).tolist() == on.transmitted.sum(axis=0).tolist()
    assert (on.generation_days >= on.transmitted).all()


def test_a_first_week_of_few_infections_says_what_it_rests_on():
    """A user saw "first-week reproduction number 2.00 ± 0.00" for 2 replicates of 5,000 agents
    and 5 seeds: each replicate's figure is a ratio of small counts (here 16 of 8 and 20 of 10),
    which can agree exactly by chance (King County's no_intervention at 5,000 agents x 2 did for 3
    of seeds 1-40: 18/10 and 27/15, 8/8 and 6/6, 16/10 and 16/10). The sd is right; the row now
    names the infections it rests on, and the caption what chance does to so few."""
    summary = {
        "scenario": "x", "agents": 5000, "days": 40, "replicates": 2,
        "reproduction_number": {
            "initial": {"mean": 2.0, "sd": 0.0, "replicates": 2, "infections": [8, 10]},
            "generation_interval_days": None,
        },
    }  # fmt: skip
    cell, why = few_infections(summary["reproduction_number"]["initial"])
    assert cell == " (first weeks of 8 and 10 infections)"
    assert why == (
        "the first week's reproduction number is a ratio of few infections (under 25 in a replicate's first "
        "week), which chance alone moves by about sqrt(R / n) or more (±0.5 at R = 2.00 and n = 8), so "
        "replicates can agree exactly by chance (± 0.00), not for want of variation"
    )
    # 25 infections or more in every replicate's first week, or a summary written before abm
    # recorded them: nothing added
    assert few_infections({"mean": 2.0, "sd": 0.1, "replicates": 2, "infections": [25, 40]}) == ("", "")
    assert few_infections({"mean": 2.0, "sd": 0.0, "replicates": 2}) == ("", "")
    # one replicate, and several: the range
    assert few_infections({"mean": 1.5, "sd": None, "replicates": 1, "infections": [12]})[0] == (
        " (first week of 12 infections)"
    )
    assert few_infections({"mean": 1.5, "sd": 0.2, "replicates": 3, "infections": [12, 7, 30]})[0] == (
        " (first weeks of 7-30 infections)"
    )
