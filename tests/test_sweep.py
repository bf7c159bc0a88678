"""``abm sweep``: variants (cartesian product) and replicates with fixed seeds, the same combined
table on the local and the Ray backend, bad input, and the command end to end."""

from __future__ import annotations

import contextlib
import datetime as dt
import html
import io
import json
import math
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import caller_ray, fixed_seeds_note
from typer.testing import CliRunner

import abm
from abm.cli import app
from abm.outputs.run_folder import MARK
from abm.outputs.sweep_by_age import AGE_COLUMNS, WHERE_BY_AGE
from abm.scenario import ScenarioError
from abm.scenario_notes import ScenarioNote
from abm.sweep import (
    AT_END,
    OUTCOMES,
    SweepTask,
    changes_from_first,
    in_region,
    parse_axis,
    plan,
    run_sweep,
    split_values,
)

SCENARIO = Path("scenarios/king_county/no_intervention.yaml").resolve()
TINY = {"agents": 1500, "days": 15}
runner = CliRunner()


@pytest.fixture(scope="module")
def local_sweep():
    with fixed_seeds_note():
        return run_sweep(SCENARIO, ["contacts.community.weight=0.3,0.6"], replicates=2, **TINY)


@pytest.fixture
def callers_ray():
    """A local Ray of two CPUs started by the caller, as a Python user would, for one test."""
    yield from caller_ray(2)


@pytest.fixture
def one_cpu_ray():
    """As callers_ray, of one CPU."""
    yield from caller_ray(1)


def test_local_and_ray_backends_give_identical_tables(local_sweep, callers_ray):
    with fixed_seeds_note():
        remote = run_sweep(SCENARIO, ["contacts.community.weight=0.3,0.6"], replicates=2, backend="ray", **TINY)
    assert callers_ray.is_initialized()  # an instance the caller started is left to the caller
    pd.testing.assert_frame_equal(remote.table, local_sweep.table, check_exact=True)
    pd.testing.assert_frame_equal(remote.summary, local_sweep.summary, check_exact=True)
    assert remote.table.to_csv(index=False) == local_sweep.table.to_csv(index=False)
    # The table is not trivially the same everywhere: replicates differ.
    assert local_sweep.table["cumulative_infected"].nunique() > 1


def test_rows_are_ordered_and_seeded_by_variant_and_replicate(local_sweep):
    t = local_sweep.table
    assert list(t["variant"]) == [0, 0, 1, 1]
    assert list(t["replicate"]) == [0, 1, 0, 1]
    assert list(t["contacts.community.weight"]) == [0.3, 0.3, 0.6, 0.6]
    # Replicate r runs with the scenario's seed + r, the same in every variant.
    assert list(t["seed"]) == [1234, 1235, 1234, 1235]
    columns = ["agents", *OUTCOMES, *AT_END.values(), "epidemic_over", *AGE_COLUMNS]
    assert list(t.columns[4:]) == columns and (t["agents"] == TINY["agents"]).all()
    # sweep.json records each variant as its replicates ran: one replicate, the capacity used.
    ran = local_sweep.info["variants"][1]["scenario"]
    assert ran["simulation"]["replicates"] == 1 and ran["outputs"]["hospital_beds_per_100k"] == pytest.approx(55, 0.01)
    assert ran["outputs"]["icu_beds_per_100k"] == 6.1  # the region's, as the runs used it
    assert local_sweep.info["agents"] == [TINY["agents"]] and local_sweep.info["region_population"] == [2_252_782]


def test_a_row_is_reproduced_by_abm_run_with_its_seed(local_sweep):
    row = local_sweep.table.iloc[3]
    with fixed_seeds_note():
        again = abm.run(SCENARIO, sets=["contacts.community.weight=0.6"], seed=int(row["seed"]), replicates=1, **TINY)
    s = again.summary
    assert row["cumulative_infected"] == s["cumulative_infected"]["mean"]
    assert row["peak_hospital_occupancy"] == s["peak_hospital_occupancy"]["value"]
    assert row["peak_new_infections"] == s["peak_new_infections"]["value"]
    assert row["peak_icu"] == s["peak_icu"]["value"]
    assert row["days_over_icu_capacity"] == s["icu_capacity"]["days_over_capacity"]
    assert row["deaths"] == s["deaths"]["mean"] and row["total_cost"] == s["total_cost"]["mean"]
    assert row["peak_hospital_at_end"] == s["peak_hospital_occupancy"]["at_end"]
    assert row["peak_new_infections_at_end"] == s["peak_new_infections"]["at_end"]
    rn = s["reproduction_number"]
    assert row["generation_interval"] == rn["generation_interval_days"]["mean"]
    if rn["initial"] is None:  # 15 days: the first week's infections may still be going on
        assert pd.isna(row["reproduction_number_initial"])
    else:
        assert row["reproduction_number_initial"] == rn["initial"]["mean"]


def test_a_variants_saved_scenario_reproduces_its_rows(local_sweep, tmp_path, monkeypatch):
    """sweep.json's scenario of a variant, saved as a file and run from another folder with
    replicate r's seed (its simulation.seed + r), gives that variant's row r: the saved scenario
    alone re-creates the variant, without the sweep's command line. It runs without a note: it
    gave each intervention off by absence as null, which a file reads as a key without a value
    (six notes 'interventions.vaccination has no value, so vaccination is off; write
    `vaccination: {}` ...'); pyproject.toml's filterwarnings make any note fail this test."""
    info = local_sweep.info["variants"][1]
    assert None not in info["scenario"]["interventions"].values()
    path = tmp_path / "variant.yaml"
    path.write_text(yaml.safe_dump(info["scenario"]), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    rows = local_sweep.table[local_sweep.table["variant"] == 1]
    for _, row in rows.iterrows():
        seed = info["scenario"]["simulation"]["seed"] + int(row["replicate"])
        s = abm.run(path, seed=seed).summary
        assert (s["agents"], seed) == (row["agents"], row["seed"])
        assert row["cumulative_infected"] == s["cumulative_infected"]["mean"]
        assert row["peak_new_infections"] == s["peak_new_infections"]["value"]
        assert row["peak_hospital_occupancy"] == s["peak_hospital_occupancy"]["value"]
        assert row["deaths"] == s["deaths"]["mean"] and row["total_cost"] == s["total_cost"]["mean"]
    assert rows["cumulative_infected"].nunique() == 2  # the replicates differ: each seed matters


def test_the_variants_of_a_replicate_share_its_population_and_network(builds):
    """Replicate r of every variant runs on seed + r's population: the tasks run replicate by
    replicate, and a process builds each replicate's population and community network once
    (variants of the disease alone), the rows as fresh runs give them (test above)."""
    import abm.runs as runs

    with fixed_seeds_note():
        result = run_sweep(SCENARIO, ["disease.transmission_rate=3,4,5"], replicates=2, **TINY)
    assert builds == {"population": 2, "community": 2}
    assert len(result.table) == 6 and result.table["cumulative_infected"].nunique() == 6
    assert not runs.TASK_REUSE._populations  # let go once the sweep is done


def test_summary_is_mean_and_sample_sd_per_variant(local_sweep):
    t, s = local_sweep.table, local_sweep.summary
    assert list(s["variant"]) == [0, 1] and list(s["replicates"]) == [2, 2]
    for v in (0, 1):
        x = t.loc[t.variant == v, "cumulative_infected"].to_numpy()
        assert s.loc[v, "cumulative_infected_mean"] == pytest.approx((x[0] + x[1]) / 2)
        assert s.loc[v, "cumulative_infected_sd"] == pytest.approx(abs(x[0] - x[1]) / np.sqrt(2))
        for name in ("reproduction_number_initial", "generation_interval"):  # over the replicates that have one
            x = t.loc[t.variant == v, name].dropna().to_numpy()
            assert s.loc[v, f"{name}_n"] == len(x)
            assert s.loc[v, f"{name}_mean"] == pytest.approx(x.mean()) if len(x) else np.isnan(s.loc[v, f"{name}_mean"])
        assert s.loc[v, "generation_interval_n"] == 2


def test_summary_gives_changes_from_the_first_variant_paired_by_replicate(local_sweep):
    """Replicate r of every variant runs with seed 1234 + r: a variant's change is the mean of
    its replicates' differences from the first variant's, per 100,000 agents, with a t
    interval (3 replicates: 2 degrees of freedom, t 0.975 = 4.302653)."""
    assert local_sweep.summary.filter(like="_change_").iloc[0].isna().all()  # the first variant
    assert local_sweep.summary["changes_by"].tolist() == ["", "paired replicates"]
    table = pd.DataFrame(
        {
            "variant": [0, 0, 0, 1, 1, 1],
            "replicate": [2, 0, 1, 0, 1, 2],  # paired by replicate, not by row order
            "agents": [2000] * 6,
            "cumulative_infected": [900.0, 1000.0, 800.0, 700.0, 1000.0, 500.0],
            "hospitalizations": [10.0, 12.0, 8.0, 7.0, 9.0, 4.0],
            "deaths": [1.0, 2.0, 1.0, 1.0, 1.0, 1.0],
            "total_cost": [0.0] * 3 + [100.0, 160.0, 130.0],
        }
    )
    changes = changes_from_first(table, 1, paired=True)
    # The variant's minus the first's: below 0, fewer than in the first. Infections too (they were
    # left out, though the summary gives the changes of infections by age, which add up to theirs).
    for name, d in (
        ("cumulative_infected", [-300, 200, -400]),
        ("hospitalizations", [-5, 1, -6]),
        ("deaths", [-1, 0, 0]),
        ("total_cost", [100, 160, 130]),
    ):
        d = np.array(d, dtype=float) * 1e5 / 2000
        half = 4.302653 * d.std(ddof=1) / np.sqrt(3)
        got = [changes[f"{name}_change_per_100k"], changes[f"{name}_change_low"], changes[f"{name}_change_high"]]
        assert got == pytest.approx([d.mean(), d.mean() - half, d.mean() + half])
    # For King County: each change and its interval's ends x 2,252,782 residents / 100,000.
    second = local_sweep.summary.iloc[1]
    for name in ("cumulative_infected", "hospitalizations", "deaths", "total_cost"):
        for ends in (("per_100k", "region"), ("low", "region_low"), ("high", "region_high")):
            scaled = second[f"{name}_change_{ends[1]}"]
            assert scaled == pytest.approx(second[f"{name}_change_{ends[0]}"] * 22.52782), (name, ends)
    region = in_region(changes, 1_000_000)  # a region of a million: 10 times the change per 100,000
    assert region["deaths_change_region_low"] == pytest.approx(10 * changes["deaths_change_low"])
    assert all(math.isnan(v) for k, v in in_region(changes, None).items() if "_region" in k)  # residents unknown


def test_several_sweeps_run_the_cartesian_product():
    with fixed_seeds_note(3), fixed_seeds_note(6), fixed_seeds_note(11):  # the file's 2 others and 1, 4 or 9
        result = run_sweep(
            SCENARIO,
            ["contacts.community.weight=0.2,0.5", "seeding.infections.asymptomatic=1,4,9"],
            replicates=1,
            agents=800,
            days=4,
        )
    t = result.table
    pairs = list(zip(t["contacts.community.weight"], t["seeding.infections.asymptomatic"], strict=True))
    assert pairs == [(0.2, 1), (0.2, 4), (0.2, 9), (0.5, 1), (0.5, 4), (0.5, 9)]
    assert list(t["variant"]) == list(range(6)) and set(t["seed"]) == {1234}
    variants = result.info["variants"]
    assert [v["scenario"]["contacts"]["community"]["weight"] for v in variants] == [0.2, 0.2, 0.2, 0.5, 0.5, 0.5]
    assert [v["scenario"]["seeding"]["infections"]["asymptomatic"] for v in variants] == [1, 4, 9, 1, 4, 9]
    assert variants[4]["label"] == "contacts.community.weight=0.5, seeding.infections.asymptomatic=4"
    # Seeding 9 asymptomatic + 2 presymptomatic agents: at least that many are ever infected.
    assert (t.loc[t["seeding.infections.asymptomatic"] == 9, "cumulative_infected"] >= 11).all()
    # One replicate a variant has no sd (it was written as 0, which reads as no variation).
    sds = result.summary.filter(regex="_sd$")
    assert len(sds.columns) == len(OUTCOMES) + len(AGE_COLUMNS) and sds.isna().all().all()


def test_a_section_that_gives_every_variant_the_same_replicates_is_swept():
    """A swept section may hold simulation.replicates where every variant resolves it alike: only
    a forbidden key whose value differs between variants is refused."""
    sp = plan(SCENARIO, ["simulation={replicates: 3, threads: 1},{replicates: 3, threads: 2}"])
    assert sp.replicates == 3 and [v.simulation.threads for v in sp.variants] == [1, 2]
    assert [(t.replicate, t.variant) for t in sp.tasks] == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]


def test_a_value_given_twice_in_two_spellings_is_refused():
    """0.5 and 0.50 (or [1, 2] and [1,2]) are one value: two variants of it would be the same run."""
    cases = (("contacts.community.weight=0.5,0.50", "'0.50'"), ("outputs.map_days=[1, 2],[1,2]", "'[1,2]'"))
    for option, twice in cases:
        with pytest.raises(ScenarioError, match=rf"the value {re.escape(twice)} is given twice; give each value once"):
            parse_axis(option)


def test_values_split_at_top_level_commas_only():
    assert split_values("0.1, 0.2,0.3") == ["0.1", "0.2", "0.3"]
    assert split_values("[1, 2],[3, 4]") == ["[1, 2]", "[3, 4]"]
    assert split_values("'a,b',c") == ["'a,b'", "c"]
    mappings = split_values("{community: 0.5, school: 0},{community: 1}")
    assert mappings == ["{community: 0.5, school: 0}", "{community: 1}"]
    axis = parse_axis("outputs.map_days=[10, 20],[30]")
    assert axis.values == ([10, 20], [30])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sweep", "contacts.community.weight"], "--sweep contacts.community.weight: write key.path=value1,value2"),
        (["--sweep", "contacts.community.weight=0.2,"], "empty value"),
        (
            ["--sweep", "contacts.comunity.weight=0.2,0.4"],
            "contacts.comunity: unknown key; did you mean 'community'? allowed keys:",
        ),
        (
            ["--sweep", "contacts.community.weight=0.2,abc"],
            "--sweep contacts.community.weight=abc: ",
        ),
        (["--sweep", "population.agents=100,-4"], "population.agents: -4 is not allowed"),
        (["--sweep", "simulation.days=5,5"], "the value '5' is given twice"),
        # a date is kept as its text (a day setting reads it as a date); a time of day is no value
        (["--sweep", "name=2020-01-01 10:00:00"], "name: '2020-01-01 10:00:00' is not allowed; give numbers, strings"),
        (["--sweep", "simulation.days=5", "--sweep", "simulation.days=6"], "simulation.days: the key is swept twice"),
        (["--sweep", "simulation.replicates=1,2"], "cannot be swept; give the number of replicates with --replicates"),
        (  # a section holding the replicates: every variant ran variant 0's 2 replicates, without a word
            ["--sweep", "simulation={replicates: 2},{replicates: 3}"],
            "error: --sweep simulation={replicates: 2},{replicates: 3}: simulation.replicates cannot be swept; give "
            "the number of replicates with --replicates",
        ),
        (
            ["--sweep", "simulation={replicates: 2, days: 5},{replicates: 3, days: 5}", "--replicates", "1"],
            "error: --sweep simulation={replicates: 2, days: 5},{replicates: 3, days: 5}: simulation.replicates "
            "cannot be swept; give the number of replicates with --replicates",
        ),
        (["--sweep", "population.agents=100,200", "--agents", "300"], "the key is also set by --agents"),
        (["--sweep", "simulation.days=5", "--replicates", "0"], "--replicates: 0 is not allowed"),
        (
            ["--sweep", "simulation.days=5", "--backend", "dask"],
            "--backend: 'dask' is not allowed; allowed: local, ray",
        ),
        ([], "--sweep: give at least one"),
        (  # variant 1's replicate 0 was variant 0's replicate 1 (seed 2), and the changes were not paired
            ["--sweep", "simulation.seed=1,2"],
            "error: --sweep simulation.seed=1,2: the variants would run with different seeds (1, 2), but the "
            "replicates already draw the seeds: replicate r of every variant runs with seed + r (common random "
            "numbers); give more replicates with --replicates, or the first seed with --seed",
        ),
        (  # a section holding the seed
            ["--sweep", "simulation={seed: 1},{seed: 2}"],
            "error: --sweep simulation={seed: 1},{seed: 2}: the variants would run with different seeds (1, 2)",
        ),
        (  # the changes from the first variant compared totals over different horizons
            ["--sweep", "simulation.days=5,6"],
            "error: --sweep simulation.days=5,6: the variants simulate different numbers of days (5, 6); their "
            "changes from the first variant compare only over the same horizon (as abm compare does): give every "
            "variant the same number of days with --days, and run one sweep per horizon",
        ),
        (  # named by the file and option, as abm run does, not by the scenario's name
            ["--sweep", "contacts.community.weight=0.3,0.6", "--device", "cuda:99"],
            f"error: {SCENARIO} (with --device cuda:99): simulation.device: 'cuda:99' is not allowed here",
        ),
    ],
)
def test_bad_input_gets_one_message_exit_2_and_writes_nothing(tmp_path, args, message):
    out = tmp_path / "sweep"
    result = runner.invoke(app, ["sweep", str(SCENARIO), "--out", str(out), *args])
    assert result.exit_code == 2, result.output
    flat = " ".join(result.output.split())
    assert message in flat
    assert flat.count("error:") == 1
    assert not out.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("sweeps", "given", "cli", "python"),
    [
        (
            ["simulation.days=5"],
            {"replicates": 0},
            "error: --replicates: 0 is not allowed",
            "replicates: 0 is not allowed",
        ),
        (
            ["simulation.days=5,6"],
            {"agents": 0},
            "(with --agents 0): invalid scenario: population.agents: 0",
            "(with agents=0): invalid scenario: population.agents: 0",
        ),
        (
            ["population.agents=100,200"],
            {"agents": 300},
            "error: --sweep population.agents: the key is also set by --agents; give one",
            "sweeps item 'population.agents': the key is also set by agents; give one",
        ),
        (
            ["seeding.day=1,2"],
            {"sets": ["seeding={day: 4}"]},
            "error: --sweep seeding.day: the key is also set by --set seeding={day: 4}; give one",
            "sweeps item 'seeding.day': the key is also set by sets item 'seeding={day: 4}'; give one",
        ),
        (
            ["simulation.replicates=1,2"],
            {},
            "error: --sweep simulation.replicates=1,2: simulation.replicates cannot be swept; give the number of "
            "replicates with --replicates",
            "sweeps item 'simulation.replicates=1,2': simulation.replicates cannot be swept; give the number of "
            "replicates with replicates",
        ),
        (
            ["simulation.seed=1,2"],
            {},
            "error: --sweep simulation.seed=1,2: the variants would run with different seeds (1, 2), but the "
            "replicates already draw the seeds: replicate r of every variant runs with seed + r (common random "
            "numbers); give more replicates with --replicates, or the first seed with --seed",
            "sweeps item 'simulation.seed=1,2': the variants would run with different seeds (1, 2), but the "
            "replicates already draw the seeds: replicate r of every variant runs with seed + r (common random "
            "numbers); give more replicates with replicates, or the first seed with seed",
        ),
        (
            ["simulation.days=5,6"],
            {},
            "error: --sweep simulation.days=5,6: the variants simulate different numbers of days (5, 6)",
            "sweeps item 'simulation.days=5,6': the variants simulate different numbers of days (5, 6); their "
            "changes from the first variant compare only over the same horizon (as abm compare does): give every "
            "variant the same number of days with days, and run one sweep per horizon",
        ),
        (
            ["simulation.days=5", "simulation.days=6"],
            {},
            "error: --sweep simulation.days: the key is swept twice; give all its values in one --sweep option",
            "sweeps item 'simulation.days': the key is swept twice; give all its values in one sweeps item",
        ),
        (
            ["contacts.community.weight=0.2,abc"],
            {},
            "error: --sweep contacts.community.weight=abc: ",
            "sweeps contacts.community.weight=abc: ",
        ),
        (["simulation.days=5"], {"backend": "dask"}, "error: --backend: 'dask' is not", "backend: 'dask' is not"),
        (["simulation.days=5"], {"workers": 0}, "error: --workers: 0 is not allowed", "workers: 0 is not allowed"),
    ],
)
def test_run_sweep_names_its_arguments_where_abm_sweep_names_its_options(tmp_path, sweeps, given, cli, python):
    """run_sweep's errors name the arguments it was given (replicates=, agents=, sets=, sweeps),
    not the options of `abm sweep` its caller never typed (it said "--replicates: 0", "(with
    --agents 0)", "--sweep ..."); `abm sweep` keeps naming its options."""
    with pytest.raises(ScenarioError) as caught:
        run_sweep(SCENARIO, sweeps, **given)
    message = str(caught.value)
    assert message.startswith(python) or f"{SCENARIO} {python}" in message, message
    assert "--" not in message, message
    args = [word for s in sweeps for word in ("--sweep", s)]
    for key, value in given.items():
        args += [word for v in value for word in ("--set", v)] if key == "sets" else [f"--{key}", str(value)]
    out = tmp_path / "sweep"
    result = runner.invoke(app, ["sweep", str(SCENARIO), "--out", str(out), *args])
    flat = " ".join(result.output.split())
    assert result.exit_code == 2 and cli in flat and flat.count("error:") == 1, flat
    assert not out.exists()


@pytest.mark.parametrize(
    ("sweeps", "given", "message"),
    [
        (
            [0.2],
            {},
            "sweeps: [0.2] is not allowed; give a list of 'key.path=value1,value2,...' texts, "
            "e.g. sweeps=['contacts.community.weight=0.2,0.4']",
        ),
        (
            {"contacts.community.weight": [0.2, 0.4]},
            {},
            "sweeps: {'contacts.community.weight': [0.2, 0.4]} is not allowed; give a list of "
            "'key.path=value1,value2,...' texts, e.g. sweeps=['contacts.community.weight=0.2,0.4']",
        ),
        (
            ["contacts.community.weight=0.2,0.4"],
            {"sets": 3},
            "sets: 3 is not allowed; give a list of 'key.path=value' texts, "
            "e.g. sets=['contacts.community.weight=0.3']",
        ),
        (
            ["contacts.community.weight=0.2,0.4"],
            {"progress": True},
            "progress: True is not allowed; give a function progress(done, total), or None",
        ),
    ],
)
def test_run_sweep_refuses_arguments_of_the_wrong_kind_with_one_message(monkeypatch, sweeps, given, message):
    """Arguments only Python can give wrong (a list of numbers for sweeps, a dict, a number for
    sets, a progress that cannot be called) get one ScenarioError naming the argument, before any
    run (they raised TypeError: "argument of type 'float' is not iterable", or failed after the
    first run)."""
    import abm.sweep as sweep_module

    monkeypatch.setattr(sweep_module, "run_task", lambda task: pytest.fail("a run started"))
    with pytest.raises(ScenarioError) as caught:
        run_sweep(SCENARIO, sweeps, replicates=1, **TINY, **given)
    assert str(caught.value) == message


def test_sweep_result_plot_is_sweep_png_and_leaves_pyplot_alone(tmp_path, local_sweep):
    """SweepResult.plot() gives the figure that write() saves as sweep.png, as RunResult.plot()
    does for a run; neither changes pyplot's backend (write switched it to Agg: a notebook's
    inline figures stopped showing) nor leaves a pyplot figure open. A table built by hand has no
    variants to draw: one message."""
    import matplotlib
    import matplotlib.pyplot as plt

    backend, open_before = matplotlib.get_backend(), plt.get_fignums()
    fig = local_sweep.plot()
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == [
        "infected (% of agents)",
        "peak hospital beds in use per 100,000 agents",
        "deaths per 100,000 agents",
        "total cost per 100,000 agents ($)",
        "reproduction number, first week",
        "generation interval (days)",
    ]
    assert [ax.get_xlabel() for ax in fig.axes] == ["contacts.community.weight"] * 6
    # The first panel's points are the variants' mean infected shares, in percent.
    points = fig.axes[0].lines[0].get_ydata()
    expected = local_sweep.table.groupby("variant")["cumulative_infected_share"].mean().to_numpy() * 100
    assert np.allclose(points, expected)
    keep = local_sweep.kept_in
    plt.switch_backend("svg")  # a backend other than Agg, as a notebook's inline one is
    try:
        local_sweep.kept_in = None  # the module's fixture: nothing of it to remove
        local_sweep.write(tmp_path / "sw")
        assert matplotlib.get_backend() == "svg"
    finally:
        local_sweep.kept_in = keep
        plt.switch_backend(backend)
    assert (tmp_path / "sw" / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plt.get_fignums() == open_before
    bare = abm.SweepResult(local_sweep.table, local_sweep.summary)
    with pytest.raises(ValueError, match=r"^this SweepResult has no info\['variants'\] to draw"):
        bare.plot()


def test_import_abm_alone_reaches_the_sweep_and_the_error_class():
    """After `import abm` alone, a notebook reaches abm.sweep.run_sweep (also abm.run_sweep) and
    abm.scenario.ScenarioError, as README and the docstrings name them (abm.sweep raised
    AttributeError until something else imported the module); abm itself still imports no torch."""
    code = (
        "import sys, abm\n"
        "assert 'torch' not in sys.modules\n"
        "assert abm.sweep.run_sweep is abm.run_sweep and abm.SweepResult is abm.sweep.SweepResult\n"
        "assert issubclass(abm.scenario.ScenarioError, ValueError)\n"
        "print(sorted(abm.__all__))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(
        [
            "CalibrationResult",
            "Comparison",
            "LearningResult",
            "ResultNote",
            "RunResult",
            "ScenarioNote",
            "SweepResult",
            "__version__",
            "calibrate",
            "compare",
            "learn",
            "run",
            "run_sweep",
        ]
    )


def test_a_full_disk_while_the_sweep_is_written_gets_one_message_exit_1_and_writes_nothing(tmp_path, monkeypatch):
    """A write that fails part-way (the disk is full) ends `abm sweep` with one line naming the
    folder and the cause and exit code 1, not a traceback; no folder, staging or complete, is left.
    The line says that the finished runs are kept for the same command (it did not)."""
    import errno

    real = pd.DataFrame.to_csv

    def full_on_the_summary(self, path, *args, **kwargs):
        if Path(path).name == "sweep_summary.csv":
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(self, path, *args, **kwargs)

    monkeypatch.setattr(pd.DataFrame, "to_csv", full_on_the_summary)
    out = tmp_path / "sweep"
    args = ["--sweep", "contacts.community.weight=0.3,0.6", "--replicates", "1", "--agents", "1500", "--days", "15"]
    result = runner.invoke(app, ["sweep", str(SCENARIO), "--out", str(out), *args])
    flat = " ".join(result.output.split())
    assert result.exit_code == 1, result.output
    kept = tmp_path / ".sweep.runs.jsonl"
    assert flat.endswith(
        f"error: output folder '{out}': writing failed (No space left on device: sweep_summary.csv); "
        f"nothing was written; 2 finished runs are kept in {kept}; the same command continues from them"
    ), flat
    assert flat.count("error:") == 1 and "Traceback" not in result.output
    # Only the finished runs are left, hidden, for the same command once there is room.
    assert [p.name for p in tmp_path.iterdir()] == [".sweep.runs.jsonl"]


def test_a_sweep_folder_taken_while_the_runs_ran_gets_one_line_and_keeps_the_runs(tmp_path, monkeypatch):
    """``--out`` is checked before the runs and again as the folder is written. A folder someone
    made there meanwhile, with a file of their own, ends `abm sweep` with one line naming it, that
    the finished runs are kept, and exit code 2 (it ended with an OutputFolderError traceback and
    exit code 1); the line says too that no results were written there, in `abm run`'s words (it said
    only what was kept); once the folder is free, the same command writes the sweep without running again."""
    import abm.sweep as sweep_module

    out, real_sweep, real_task, ran = tmp_path / "sweep", sweep_module.run_sweep, sweep_module.run_task, []

    def sweep_then_take_the_folder(*args, **kwargs):
        result = real_sweep(*args, **kwargs)
        out.mkdir()
        (out / "notes.txt").write_text("mine")
        return result

    def run_task(task):
        ran.append(task.variant)
        return real_task(task)

    monkeypatch.setattr(sweep_module, "run_sweep", sweep_then_take_the_folder)
    monkeypatch.setattr(sweep_module, "run_task", run_task)
    args = ["sweep", str(SCENARIO), "--sweep", "contacts.community.weight=0.3,0.6", "--replicates", "1"]
    args += ["--agents", str(TINY["agents"]), "--days", str(TINY["days"]), "--out", str(out)]
    first = runner.invoke(app, args)
    said = " ".join(first.output.split())
    kept = tmp_path / ".sweep.runs.jsonl"
    assert first.exit_code == 2, first.output
    assert f"error: output folder '{out}': exists and was not written by abm" in said, said
    assert said.endswith(
        f"remove this one yourself; no results were written to {out}; 2 finished runs are kept in {kept}; "
        "the same command continues from them"
    ), said
    assert said.count("error:") == 1 and (out / "notes.txt").read_text() == "mine" and kept.exists()
    (out / "notes.txt").unlink()
    monkeypatch.setattr(sweep_module, "run_sweep", real_sweep)
    ran.clear()
    again = runner.invoke(app, args)
    assert again.exit_code == 0, again.output
    assert ran == [] and (out / "sweep.csv").exists() and not kept.exists()


def test_a_sweep_interrupted_as_its_folder_is_written_says_its_runs_are_kept(tmp_path, monkeypatch):
    """Ctrl-C once every run is done, as the folder is written: the runs are kept for the same
    command, and it says so, as when stopped during the runs (it kept them without a word)."""
    import abm.sweep as sweep_module

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep_module, "sweep_figure", interrupted)
    out = tmp_path / "sweep"
    args = ["sweep", str(SCENARIO), "--sweep", "contacts.community.weight=0.3,0.6", "--replicates", "1"]
    args += ["--agents", str(TINY["agents"]), "--days", str(TINY["days"]), "--out", str(out)]
    result = runner.invoke(app, args)
    said = " ".join(result.output.split())
    kept = tmp_path / ".sweep.runs.jsonl"
    assert result.exit_code == 130, result.output
    assert said.endswith(
        f"note: 2 finished runs are kept in {kept}; the same command continues from them "
        f"interrupted: no results were written to {out}"
    ), said
    assert [p.name for p in tmp_path.iterdir()] == [kept.name]


def test_an_interrupted_sweep_continues_where_it_stopped(tmp_path, monkeypatch, local_sweep):
    """Stopped after 3 of its 4 runs, `abm sweep` keeps them (and says so); the same command
    then runs only the fourth, and writes the tables an uninterrupted sweep gives."""
    import abm.sweep as sweep_module

    real, ran = sweep_module.run_task, []

    def run_task(task):
        if len(ran) == stop[0]:
            raise KeyboardInterrupt
        ran.append((task.variant, task.replicate))
        return real(task)

    stop = [3]
    monkeypatch.setattr(sweep_module, "run_task", run_task)
    out = tmp_path / "sweep"
    args = ["sweep", str(SCENARIO), "--sweep", "contacts.community.weight=0.3,0.6", "--replicates", "2"]
    args += ["--agents", str(TINY["agents"]), "--days", str(TINY["days"]), "--out", str(out)]
    first = runner.invoke(app, args)
    said = " ".join(first.output.split())
    assert first.exit_code == 130, first.output
    kept = tmp_path / ".sweep.runs.jsonl"
    assert f"note: 3 finished runs are kept in {kept}; the same command continues from them" in said
    assert not out.exists() and len(kept.read_text().splitlines()) == 1 + 3
    stop[0], ran[:] = None, []
    again = runner.invoke(app, args)
    assert again.exit_code == 0, again.output
    assert ran == [(1, 1)]  # replicate by replicate: (0, 0), (1, 0), (0, 1) were kept
    said = " ".join(again.output.split())
    assert f"note: continuing an interrupted run: 3 finished runs are kept in {kept}" in said
    assert not kept.exists()
    table = pd.read_csv(out / "sweep.csv")
    whole = pd.read_csv(io.StringIO(local_sweep.table.astype({"peak_hospital_day": "Int64"}).to_csv(index=False)))
    pd.testing.assert_frame_equal(table, whole)
    # sweep.json says how many runs were reused (its wall time is the fourth run's only)
    assert json.loads((out / "sweep.json").read_text())["timings"]["runs_reused"] == 3


def test_a_sweep_stopped_before_its_first_run_leaves_no_kept_runs(tmp_path, monkeypatch):
    """Ctrl-C before any run finished left a file holding only its header, and the same command
    then said it "held the runs of other work (another scenario or abm version); replaced". Now
    nothing is left; and a header alone (a process killed before its first run finished) is taken
    without a word."""
    import abm.sweep as sweep_module
    from abm.outputs.journal import Journal

    real, stop = sweep_module.run_task, [True]

    def run_task(task):
        if stop[0]:
            raise KeyboardInterrupt
        return real(task)

    monkeypatch.setattr(sweep_module, "run_task", run_task)
    out = tmp_path / "sweep"
    args = ["sweep", str(SCENARIO), "--sweep", "contacts.community.weight=0.3,0.6", "--replicates", "1"]
    args += ["--agents", str(TINY["agents"]), "--days", str(TINY["days"]), "--out", str(out)]
    first = runner.invoke(app, args)
    assert first.exit_code == 130, first.output
    said = [line for line in first.output.splitlines() if not line.startswith("note: seeding.infections")]
    assert said == [f"interrupted: no results were written to {out}"]
    assert list(tmp_path.iterdir()) == []
    with monkeypatch.context() as killed:  # as after a SIGKILL: nothing is cleaned up
        killed.setattr(Journal, "remove", lambda self: None)
        assert runner.invoke(app, args).exit_code == 130
    kept = tmp_path / ".sweep.runs.jsonl"
    assert len(kept.read_text().splitlines()) == 1
    stop[0] = False
    again = runner.invoke(app, args)
    assert again.exit_code == 0, again.output
    notes = [line for line in again.output.splitlines() if line.startswith("note:")]
    assert all(line.startswith("note: seeding.infections") for line in notes), again.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sweep"]


def test_a_bad_value_names_the_file_key_value_and_what_is_allowed():
    with pytest.raises(ScenarioError) as info:
        plan(SCENARIO, ["contacts.community.weight=0.2,abc"])
    msg = str(info.value)
    assert msg.startswith("--sweep contacts.community.weight=abc: ")
    assert str(SCENARIO) in msg and "contacts.community.weight: 'abc' is not allowed" in msg


def test_a_day_swept_as_a_date_takes_the_start_date_swept_beside_it():
    """simulation.start_date swept over dates with a day setting given as a date: each value was
    first checked alone, and the date alone, without the swept start date, was refused ('give
    simulation.start_date'), though it was given. A value valid with some values of the other
    swept keys passes that check; a combination that is invalid is named whole, and a value that
    is invalid with every other value is named alone, as before."""
    vacc = SCENARIO.parent / "vacc.yaml"
    day = "interventions.vaccination.start_day=2020-02-15"
    sp = plan(vacc, ["simulation.start_date=2020-02-01,2020-02-10", day], replicates=1, agents=2000, days=30)
    assert [sc.interventions.vaccination.start_day for sc in sp.variants] == [14, 5]
    with pytest.raises(ScenarioError) as caught:
        plan(vacc, ["simulation.start_date=2020-02-01,2020-02-20", day], replicates=1, agents=2000, days=30)
    assert str(caught.value).startswith(
        "--sweep simulation.start_date=2020-02-20, interventions.vaccination.start_day=2020-02-15: "
    ) and "it is before simulation.start_date (2020-02-20)" in str(caught.value)
    with pytest.raises(ScenarioError) as caught:
        plan(vacc, ["contacts.community.weight=0.5,-1", day], replicates=1, agents=2000, days=30)
    assert str(caught.value).startswith("--sweep contacts.community.weight=-1: "), caught.value
    with pytest.raises(ScenarioError, match=r"^--sweep interventions.vaccination.start_day=2020-02-15: .* is a date"):
        plan(vacc, ["contacts.community.weight=0.5,0.6", day], replicates=1, agents=2000, days=30)


def test_a_bad_swept_value_is_named_by_the_sweep_not_as_a_set_nobody_gave(tmp_path):
    """A swept value is applied as a set, and the message named it so ("--sweep k=abc: FILE (with
    --set k="abc")"; from Python "(with sets=[...])" with no sets given): the prefix names the value
    and the scenario's name keeps only the sets the user gave."""
    sweep, bad = ["contacts.community.weight=0.2,abc"], "contacts.community.weight: 'abc' is not allowed"
    with pytest.raises(ScenarioError) as caught:
        run_sweep(SCENARIO, sweep)
    assert str(caught.value).startswith(f"sweeps contacts.community.weight=abc: {SCENARIO}: invalid scenario: {bad}")
    with pytest.raises(ScenarioError) as caught:
        run_sweep(SCENARIO, ["outputs.map_days.3=1"], sets=["simulation.days=30"])
    assert str(caught.value).startswith("sweeps outputs.map_days.3=1: sweeps: outputs.map_days.3: "), caught.value
    with pytest.raises(ScenarioError) as caught:
        run_sweep(SCENARIO, sweep, sets=["simulation.days=30"], agents=100)
    given = "(with sets=['simulation.days=30'], agents=100)"
    assert str(caught.value).startswith(f"sweeps contacts.community.weight=abc: {SCENARIO} {given}: invalid"), (
        caught.value
    )
    result = runner.invoke(app, ["sweep", str(SCENARIO), "--sweep", sweep[0], "--out", str(tmp_path / "o")])
    flat = " ".join(result.output.split())
    assert result.exit_code == 2 and "--set" not in flat, flat
    assert f"error: --sweep contacts.community.weight=abc: {SCENARIO}: invalid scenario: {bad}" in flat, flat
    assert list(tmp_path.iterdir()) == []


def test_a_variant_its_population_refuses_is_found_before_anything_runs(tmp_path, monkeypatch):
    """An app adoption that one variant's population cannot reach (age weights of 0) is refused
    when the sweep is planned, naming the variant, its replicate and the options; nothing runs."""
    import abm.sweep

    def no_run(*_args, **_kwargs):
        raise AssertionError("a variant ran")

    monkeypatch.setattr(abm.sweep, "run_scenario", no_run)
    zero = "interventions.digital_tracing.age_weights=[0,0,1,1,1,1,1,1,1]"
    src = SCENARIO.parent / "vacc_ct.yaml"
    args = ["sweep", str(src), "--agents", "2000", "--days", "5", "--replicates", "2", "--set", zero]
    args += ["--sweep", "interventions.digital_tracing.app_adoption=0.5,0.95", "--out", str(tmp_path / "o")]
    result = runner.invoke(app, args)
    flat = " ".join(result.output.split())
    assert result.exit_code == 2 and list(tmp_path.iterdir()) == [], flat
    assert (
        f"error: --sweep interventions.digital_tracing.app_adoption=0.95 (replicate 0, seed 1234): {src} "
        f"(with --set {zero} --agents 2000 --days 5): interventions.digital_tracing.app_adoption: 0.95 cannot be "
        "reached" in flat
    ), flat


def test_cli_end_to_end_writes_the_combined_tables(tmp_path):
    out = tmp_path / "sw"
    result = runner.invoke(
        app,
        ["sweep", str(SCENARIO), "--sweep", "contacts.household.weight=0.5,1.5",
         "--replicates", "3", "--agents", "1000", "--days", "10", "--seed", "40", "--out", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "6 runs (3 per variant)" in result.output and f"resultsin{out}" in "".join(result.output.split())
    assert "".join(WHERE_BY_AGE.split()) in "".join(result.output.split())  # where the columns by age are
    files = [MARK, "report.html", "sweep.csv", "sweep.json", "sweep.png", "sweep_summary.csv"]
    assert sorted(p.name for p in out.iterdir()) == files
    assert (out / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["sw"]  # no temporary folder left
    table = pd.read_csv(out / "sweep.csv")
    assert len(table) == 6
    assert list(table["contacts.household.weight"]) == [0.5] * 3 + [1.5] * 3
    assert list(table["seed"]) == [40, 41, 42] * 2
    assert (table["cumulative_infected"] >= 5).all()  # the 5 seeded agents count
    assert np.allclose(table["cumulative_infected_share"], table["cumulative_infected"] / 1000)
    summary = pd.read_csv(out / "sweep_summary.csv")
    assert list(summary["replicates"]) == [3, 3]
    for v, group in table.groupby("variant"):
        assert summary.loc[v, "deaths_mean"] == pytest.approx(group["deaths"].mean())
        assert summary.loc[v, "total_cost_sd"] == pytest.approx(group["total_cost"].std(ddof=1), abs=1e-9)
    info = json.loads((out / "sweep.json").read_text())
    assert info["sweeps"] == {"contacts.household.weight": [0.5, 1.5]} and info["replicates"] == 3
    assert info["backend"] == "local"
    sc = info["variants"][1]["scenario"]
    assert sc["contacts"]["household"]["weight"] == 1.5
    assert sc["population"]["agents"] == 1000 and sc["simulation"]["days"] == 10 and sc["simulation"]["seed"] == 40
    assert [v["short_label"] for v in info["variants"]] == ["weight=0.5", "weight=1.5"]
    # The changes for the county: the CSV's per-100k change and interval x 2,252,782 / 100,000, as
    # the console's second table and report.html show them in whole numbers.
    second = summary.iloc[1]
    for name in ("hospitalizations", "deaths", "total_cost"):
        for per_100k, region in (("per_100k", "region"), ("low", "region_low"), ("high", "region_high")):
            assert second[f"{name}_change_{region}"] == pytest.approx(second[f"{name}_change_{per_100k}"] * 22.52782)
    deaths = [f"{second[f'deaths_change_{e}']:,.0f}" for e in ("region", "region_low", "region_high")]
    same = deaths[0] == deaths[1] == deaths[2]  # no spread to show (no deaths in either variant, say)
    cell = f"{deaths[0]} (the same in every replicate)" if same else f"{deaths[0]} ({deaths[1]} to {deaths[2]})"
    assert "changes in the region from the first variant (weight=0.5)" in " ".join(result.output.split())
    page = (out / "report.html").read_text()
    rows = [[html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", r)] for r in re.findall(r"<tr>(.*?)</tr>", page)]
    rows = [r for r in rows if r]  # the header rows have no <td>
    assert rows[3][0] == "weight=1.5" and rows[3][2] == cell  # means: rows 0-1; changes: rows 2-3
    assert rows[2] == ["weight=0.5", "", "", ""] and rows[0][0] == "weight=0.5"
    assert '<img src="sweep.png"' in page and "contacts.household.weight: 0.5, 1.5" in page


def test_cli_notes_hospital_peaks_held_to_the_last_day(tmp_path):
    """sweep.csv's peak day of a replicate whose hospital curve is still at its peak on the last
    day is a lower bound (summary.json's at_end); the sweep dropped that flag and said nothing."""
    out = tmp_path / "sw"
    result = runner.invoke(
        app,
        ["sweep", str(SCENARIO), "--sweep", "disease.transmission_rate=5.02", "--replicates", "2",
         "--agents", "2000", "--days", "30", "--seed", "40", "--out", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    table = pd.read_csv(out / "sweep.csv")
    late = int(table["peak_hospital_at_end"].sum())
    assert late > 0 and pd.read_csv(out / "sweep_summary.csv")["peak_hospital_at_end_n"].tolist() == [late]
    note = (
        f"note: in {late} of 2 runs the hospital curve is at its maximum on the last simulated day "
        "(peak_hospital_at_end in sweep.csv): the peak may come later, after the run, so it is a lower bound; "
        "run more days"
    )
    assert note in " ".join(result.output.split())


def test_worker_processes_write_the_same_tables(tmp_path):
    """--workers 2 runs the 4 runs in two worker processes, which finish in any order: sweep.csv
    and sweep_summary.csv are the same bytes as with --workers 1 (one after the other here), and
    sweep.json differs only in when and how it ran."""
    texts, infos = [], []
    for workers in ("1", "2"):
        out = tmp_path / f"w{workers}"
        args = ["sweep", str(SCENARIO), "--sweep", "contacts.community.weight=0.3,0.6", "--replicates", "2",
                "--agents", "1500", "--days", "15", "--workers", workers, "--out", str(out)]  # fmt: skip
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        texts.append([(out / name).read_text() for name in ("sweep.csv", "sweep_summary.csv")])
        infos.append(json.loads((out / "sweep.json").read_text()))
    assert texts[0] == texts[1]
    assert pd.read_csv(tmp_path / "w1" / "sweep.csv")["cumulative_infected"].nunique() > 1  # runs differ
    assert (infos[0]["workers"], infos[1]["workers"]) == (1, 2)
    for info in infos:
        for key in ("created_utc", "command", "timings", "workers"):
            del info[key]
    assert infos[0] == infos[1]


def test_sweep_json_records_the_runs_that_could_run_at_once():
    """--workers 8 with 2 runs: at most 2 ran at once, and sweep.json said 8; now 2. (On a machine
    of fewer than 8 CPUs, workers=8 gets its note too.)"""
    from abm.parallel import usable_cpus

    crowded = r"^workers=8 is more than the \d+ CPUs? this process may use"
    workers_note = pytest.warns(ScenarioNote, match=crowded) if usable_cpus() < 8 else contextlib.nullcontext()
    with workers_note, fixed_seeds_note():
        result = run_sweep(
            SCENARIO, ["contacts.community.weight=0.3,0.6"], replicates=1, workers=8, agents=1000, days=5
        )
    assert result.info["workers"] == 2 and "ray_cpus" not in result.info


@pytest.mark.slow  # starting a local Ray takes about 20 s on 2 cores
def test_sweep_json_records_the_runs_the_ray_cluster_ran_at_once(one_cpu_ray):
    """2 runs on a Ray of one CPU run one at a time: sweep.json said null (no --workers) or 3
    (--workers 3); now 1, and the cluster's CPUs as ray_cpus, as calibration.json has them."""
    with fixed_seeds_note():
        infos = [
            run_sweep(SCENARIO, ["contacts.community.weight=0.3,0.6"], replicates=1, backend="ray", workers=workers,
                      agents=1000, days=5).info
            for workers in (None, 3)
        ]  # fmt: skip
    assert [(info["workers"], info["ray_cpus"]) for info in infos] == [(1, 1), (1, 1)]


def test_short_keys_keep_keys_distinct():
    from abm.key_paths import short_keys

    assert short_keys(["contacts.community.weight", "interventions.vaccination.start_day"]) == ["weight", "start_day"]
    assert short_keys(["contacts.community.weight", "contacts.household.weight"]) == [
        "community.weight",
        "household.weight",
    ]
    assert short_keys(["seed"]) == ["seed"]


def test_a_curve_that_stays_at_zero_has_no_peak_day():
    """5 days are too few for anyone to reach hospital: the run's summary, the comparison and the
    sweep give no peak day for hospital occupancy (not day 0). The 5 seeded infections of day 0
    count among the day's new infections but not in the peak of new infections (by transmission,
    which cannot happen on day 0: infectiousness is 0 on the day of infection)."""
    import math

    import abm
    from abm.outputs.compare import comparison_table, format_cell
    from abm.outputs.plots import RunTables

    with fixed_seeds_note():
        run = abm.run(SCENARIO, agents=2000, days=5, replicates=2)
    occ = run.summary["peak_hospital_occupancy"]
    assert occ == {"value": 0.0, "day": None, "per_100k": 0.0, "at_end": False}
    new, transmitted = run.result.new_infections, run.result.transmitted
    assert (new[0] == 5).all() and (transmitted[0] == 0).all() and (new[1:] == transmitted[1:]).all()
    assert run.summary["peak_new_infections"]["value"] == transmitted.mean(axis=1).max() > 0
    assert run.summary["peak_new_infections"]["day"] == int(transmitted.mean(axis=1).argmax()) > 0
    row = comparison_table([RunTables.from_result(run)]).iloc[0]
    assert math.isnan(row["peak_hospital_day"]) and format_cell("peak_hospital_day", row["peak_hospital_day"]) == ""
    # 32 seeded infections, so that both replicates transmit within the 5 days (5 need not)
    with fixed_seeds_note(32):
        result = run_sweep(SCENARIO, ["seeding.infections.asymptomatic=30"], replicates=2, agents=2000, days=5)
    assert result.table["peak_hospital_day"].isna().all()
    assert math.isnan(result.summary["peak_hospital_day_mean"].iloc[0])
    first = result.summary.iloc[0]
    assert first["peak_hospital_day_n"] == 0 and first["peak_new_infections_day_n"] == 2
    assert (result.table["peak_new_infections_day"] > 0).all()


def test_sweep_csv_writes_days_as_days_when_some_replicate_has_no_peak(tmp_path):
    """A day column with a missing peak becomes float in pandas; sweep.csv still writes 54, not
    54.0, and nothing where there is no peak."""
    from abm.sweep import SweepResult

    table = pd.DataFrame({"seed": [1, 2], "peak_hospital_day": [54, None], "deaths": [1.5, 0.0]})
    assert table["peak_hospital_day"].dtype == float  # what pandas makes of the missing peak
    SweepResult(table, pd.DataFrame({"v": [1]})).write(tmp_path / "s")
    lines = (tmp_path / "s" / "sweep.csv").read_text().splitlines()
    assert lines == ["seed,peak_hospital_day,deaths", "1,54,1.5", "2,,0.0"]


def test_combine_of_hand_made_results():
    """The combined tables from hand-made task results given out of order: rows sorted by
    variant and replicate with the seed (the variant's + r) and the variant's agents; per variant
    the mean and sample sd of each outcome, a peak day's mean over the replicates that have a
    peak (``_n`` of them), and the changes from the first variant per 100,000 of each variant's
    own agents: as independent runs (Welch), since runs of different agents draw different
    populations and random streams from one seed (abm compare does the same)."""
    from types import SimpleNamespace

    from abm.sweep import SweepAxis, SweepPlan, combine

    def variant(agents: int) -> SimpleNamespace:
        data = {"simulation": {"seed": 10, "device": "cpu"}, "population": {"agents": agents, "region": "x"}}
        return SimpleNamespace(
            simulation=SimpleNamespace(seed=10, start_date=None),
            population=SimpleNamespace(agents=agents),
            model_dump=lambda **_: data,
        )

    sweep_plan = SweepPlan(
        "x.yaml",
        [SweepAxis("population.agents", (1000, 2000), ("1000", "2000"))],
        2,
        [variant(1000), variant(2000)],
        [{"values": [1000], "texts": ["1000"]}, {"values": [2000], "texts": ["2000"]}],
    )

    def result(v: int, r: int, hosp: float, cost: float, day: int | None) -> dict:
        outcomes = dict.fromkeys(OUTCOMES, 1.0) | {"hospitalizations": hosp, "total_cost": cost, "deaths": 0.0}
        at_end = {"peak_hospital_at_end": day == 7, "peak_new_infections_at_end": False}  # day 7: the last
        return {"variant": v, "replicate": r, "outcomes": outcomes | {"peak_hospital_day": day} | at_end}

    results = [result(1, 1, 30.0, 50.0, None), result(0, 1, 20.0, 0.0, 7), result(1, 0, 10.0, 30.0, 4),
               result(0, 0, 10.0, 0.0, 5)]  # fmt: skip
    table, summary = combine(sweep_plan, results)
    assert table[["variant", "replicate", "seed", "agents"]].values.tolist() == [
        [0, 0, 10, 1000], [0, 1, 11, 1000], [1, 0, 10, 2000], [1, 1, 11, 2000]]  # fmt: skip
    assert table["population.agents"].tolist() == [1000, 1000, 2000, 2000]
    assert summary["hospitalizations_mean"].tolist() == [15.0, 20.0]
    assert summary["hospitalizations_sd"].tolist() == pytest.approx([np.sqrt(50), np.sqrt(200)])
    days = summary.filter(like="peak_hospital_day_")
    assert days["peak_hospital_day_mean"].tolist() == [6.0, 4.0] and days["peak_hospital_day_n"].tolist() == [2, 1]
    assert days["peak_hospital_day_sd"][0] == pytest.approx(np.sqrt(2)) and np.isnan(days["peak_hospital_day_sd"][1])
    # The replicates whose curve is at its peak on the last day (the peak a lower bound) are counted.
    assert summary["peak_hospital_at_end_n"].tolist() == [1, 0]
    assert summary["peak_new_infections_at_end_n"].tolist() == [0, 0]
    # Per 100,000: variant 0 admits 1,000 and 2,000, variant 1 500 and 1,500: -500 in the means. Welch:
    # se = sqrt(2 x 500,000 / 2), 2 degrees of freedom, t 0.975 = 4.302653 (paired, it was -500 to -500).
    one = summary.iloc[1]
    half = 4.302653 * np.sqrt(500_000)
    assert (one.hospitalizations_change_per_100k, one.hospitalizations_change_low, one.hospitalizations_change_high) \
        == pytest.approx((-500.0, -500.0 - half, -500.0 + half))  # fmt: skip
    assert summary["changes_by"].tolist() == ["", "independent runs"]
    assert one.total_cost_change_per_100k == pytest.approx(2000.0)  # 1,500 and 2,500 per 100,000
    assert summary.iloc[0].filter(like="_change_").isna().all()
    # Results without counts by age (made by hand) leave those columns empty.
    assert list(table.columns[-len(AGE_COLUMNS) :]) == list(AGE_COLUMNS) and table[list(AGE_COLUMNS)].isna().all().all()
    assert summary[[f"{c}_mean" for c in AGE_COLUMNS]].isna().all().all()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (  # ignored before: the sweep ran here, on --backend local
            ["--ray-address", "127.0.0.1:6379"],
            "error: --ray-address: only used with --backend ray, not with --backend local",
        ),
        (  # a traceback from Ray before (exit 1)
            ["--backend", "ray", "--ray-address", "notanaddress"],
            "error: --ray-address notanaddress: not an address; give host:port",
        ),
        (  # Ray retried it for about 12 minutes before, deaf to Ctrl-C meanwhile
            ["--backend", "ray", "--ray-address", "127.0.0.1:1"],
            "error: --ray-address 127.0.0.1:1: no Ray cluster answers there",
        ),
    ],
)
def test_a_ray_address_that_cannot_be_used_is_refused_before_ray_starts(tmp_path, args, message):
    out = tmp_path / "sweep"
    result = runner.invoke(app, ["sweep", str(SCENARIO), "--sweep", "simulation.days=5", "--out", str(out), *args])
    assert result.exit_code == 2, result.output
    flat = " ".join(result.output.split())
    assert message in flat and flat.count("error:") == 1
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_a_ray_address_without_ray_is_refused_from_python():
    with pytest.raises(ScenarioError, match=r"^ray_address: only used with backend='ray', not with backend='local'$"):
        run_sweep(SCENARIO, ["simulation.days=5"], ray_address="127.0.0.1:6379", **TINY)


def dies_in_variant_1(task: SweepTask) -> dict:
    """A sweep's run whose worker process dies (SIGKILL, as out of memory) in variant 1,
    replicate 0, once the file $DIES_ONCE names is written; the other runs run."""
    from abm.sweep import run_task

    if (task.variant, task.replicate) == (1, 0):
        Path(os.environ["DIES_ONCE"]).touch()
        os.kill(os.getpid(), signal.SIGKILL)
    return run_task(task)


def test_a_local_worker_that_dies_names_its_run_as_ray_does(tmp_path, monkeypatch):
    """`abm sweep --workers 2`: a worker process killed during a run said "a worker process ended
    before its run did", where --backend ray names the run (variant and replicate); now the local
    backend names it the same way. Exit 1, one message, nothing written."""
    marker, out = tmp_path / "died", tmp_path / "sweep"
    monkeypatch.setenv("DIES_ONCE", str(marker))
    monkeypatch.setattr("abm.sweep.run_task", dies_in_variant_1)  # the workers import it from this module
    args = ["sweep", str(SCENARIO), "--sweep", "contacts.community.weight=0.3,0.6", "--replicates", "1",
            "--agents", "1000", "--days", "5", "--workers", "2", "--out", str(out)]  # fmt: skip
    result = runner.invoke(app, args)
    flat = " ".join(result.output.split())
    assert marker.exists() and result.exit_code == 1, (result.exit_code, flat, result.exception)
    assert flat.count("error:") == 1, flat
    assert (
        "error: --workers 2: the worker process of variant 1 (contacts.community.weight=0.6), replicate 0 ended "
        "before its run did (killed, or out of memory); give fewer --workers"
    ) in flat, flat
    assert not out.exists()


@pytest.mark.slow  # starting a local Ray takes about 20 s on 2 cores
def test_a_ray_worker_that_dies_fails_the_sweep_as_on_the_local_backend(tmp_path, monkeypatch, ray_temp):
    """Ray ran the task again in a new worker and the sweep ended with exit 0, as if nothing had
    happened, where a dead worker process of the local backend fails the command; now the same:
    exit 1, one message naming the run, nothing written (nor Ray's session folder left)."""
    pytest.importorskip("ray")
    from abm.sweep import run_task

    marker, out = tmp_path / "died", tmp_path / "sweep"

    def dies_once(task: SweepTask) -> dict:  # its worker process dies in its first run of variant 1, replicate 0
        if (task.variant, task.replicate) == (1, 0) and not marker.exists():
            marker.touch()
            os._exit(3)
        return run_task(task)

    monkeypatch.setattr("abm.sweep.run_task", dies_once)
    args = ["sweep", str(SCENARIO), "--sweep", "contacts.community.weight=0.3,0.6", "--replicates", "1",
            "--agents", "1000", "--days", "5", "--backend", "ray", "--workers", "1", "--out", str(out)]  # fmt: skip
    result = runner.invoke(app, args)
    flat = " ".join(result.output.split())
    assert marker.exists(), (result.exit_code, flat, result.exception)  # the worker did die
    assert result.exit_code == 1, flat
    assert flat.count("error:") == 1, flat
    assert (
        "error: --backend ray: the Ray worker process of variant 1 (contacts.community.weight=0.6), replicate 0 "
        "ended before its run did (killed, out of memory, or its node was lost); Ray does not run it again"
    ) in flat, flat
    assert not out.exists() and list(ray_temp.iterdir()) == []


def test_peak_dates_of_a_sweep_with_a_start_date(tmp_path):
    """A sweep whose variants have ``simulation.start_date`` writes each peak day's date beside
    it (the date summary.json gives the same run) and the date of the mean peak day in the summary;
    a sweep without one writes neither (``local_sweep``'s columns, tested above)."""
    from abm.outputs.calendar import date_of

    with fixed_seeds_note():
        result = run_sweep(
            SCENARIO, ["contacts.community.weight=0.3"], replicates=2, sets=["simulation.start_date=2020-03-01"], **TINY
        )
    t = result.table
    cols = list(t.columns)
    assert cols[cols.index("peak_new_infections_day") + 1] == "peak_new_infections_date"
    assert cols[cols.index("peak_hospital_day") + 1] == "peak_hospital_date"
    for _, row in t.iterrows():
        dated = ["contacts.community.weight=0.3", "simulation.start_date=2020-03-01"]  # the variant, dated
        with fixed_seeds_note():
            again = abm.run(SCENARIO, sets=dated, seed=int(row["seed"]), replicates=1, **TINY)
        peak = again.summary["peak_new_infections"]
        assert row["peak_new_infections_date"] == peak["date"] == date_of(dt.date(2020, 3, 1), peak["day"])
    mean_day = t["peak_new_infections_day"].mean()
    expected = date_of(dt.date(2020, 3, 1), int(np.floor(mean_day + 0.5)))
    assert result.summary["peak_new_infections_day_mean_date"].tolist() == [expected]
    written = pd.read_csv(result.write(tmp_path / "s") / "sweep.csv")
    assert written["peak_new_infections_date"].tolist() == t["peak_new_infections_date"].tolist()


def test_peak_dates_of_hand_made_results_half_up_and_missing():
    """Dates from hand-made results: a mean day of 5.5 is dated day 6; a variant without a start
    date and a replicate without a peak get no date."""
    from types import SimpleNamespace

    from abm.sweep import SweepAxis, SweepPlan, combine

    def variant(start: dt.date | None) -> SimpleNamespace:
        data = {"simulation": {"seed": 10, "device": "cpu", "start_date": start and start.isoformat()}}
        return SimpleNamespace(
            simulation=SimpleNamespace(seed=10, start_date=start),
            population=SimpleNamespace(agents=1000),
            model_dump=lambda **_: data,
        )

    starts = [dt.date(2020, 2, 27), None]
    texts = ("2020-02-27", "null")
    plan_ = SweepPlan(
        "x.yaml",
        [SweepAxis("simulation.start_date", ("2020-02-27", None), texts)],
        2,
        [variant(s) for s in starts],
        [{"values": [v], "texts": [x]} for v, x in zip(("2020-02-27", None), texts, strict=True)],
    )

    def result(v: int, r: int, day: int | None) -> dict:
        outcomes = dict.fromkeys(OUTCOMES, 1.0) | {"peak_hospital_day": day, "peak_new_infections_day": 3}
        return {"variant": v, "replicate": r, "outcomes": outcomes | dict.fromkeys(AT_END.values(), False)}

    table, summary = combine(plan_, [result(0, 0, 5), result(0, 1, 6), result(1, 0, 5), result(1, 1, None)])
    # 2020 is a leap year: day 3 after 2020-02-27 is 2020-03-01.
    assert table["peak_new_infections_date"].tolist()[:2] == ["2020-03-01", "2020-03-01"]
    assert table["peak_hospital_date"].tolist()[:2] == ["2020-03-03", "2020-03-04"]
    assert table.loc[2:, ["peak_new_infections_date", "peak_hospital_date"]].isna().all().all()
    assert summary["peak_hospital_day_mean_date"].iloc[0] == "2020-03-04"  # day 5.5 -> 6
    assert pd.isna(summary["peak_hospital_day_mean_date"].iloc[1])


def changes_summary(replicates: int, ends: dict[str, float]) -> pd.DataFrame:
    """A sweep_summary of two variants with ``replicates`` each whose second variant changes every
    outcome of the changes table by ``ends`` (``per_100k``, ``low``, ``region``...: the value)."""
    nan = math.nan
    return pd.DataFrame(
        {
            "replicates": [replicates, replicates],
            "cumulative_infected_share_mean": [0.1, 0.1],
            "peak_hospital_occupancy_mean": [2.0, 2.0],
            "deaths_mean": [1.0, 1.0],
            "total_cost_mean": [0.0, 100.0],
            **{
                f"{name}_change_{end}": [nan, value]
                for name in ("hospitalizations", "deaths", "total_cost")
                for end, value in ends.items()
            },
        }
    )


def test_changes_table_shows_no_minus_zero():
    """A change or an interval's end that rounds to 0 whole people reads 0, not -0."""
    from abm.outputs.sweep_report import sweep_tables

    ends = {"per_100k": -0.01, "low": -0.02, "high": 1.0, "region": -0.3, "region_low": -0.45, "region_high": 22.5}
    changes = sweep_tables(changes_summary(3, ends), ["a", "b"], [5000], [2252782])[1]
    assert changes.rows[1][1:] == ["0 (0 to 22)"] * 3
    unknown = ends | {"region": math.nan, "region_low": math.nan, "region_high": math.nan}  # residents not known
    per_100k = sweep_tables(changes_summary(3, unknown), ["a", "b"], [5000], [2252782])[1]
    assert per_100k.rows[1][1:] == ["0.0 (0.0 to 1.0)"] * 3


def test_changes_table_of_one_replicate_says_nothing_of_intervals():
    """With one replicate a variant's changes have no interval, and the caption does not explain one."""
    from abm.outputs.sweep_report import sweep_tables

    nan = math.nan
    ends = {"per_100k": 2.0, "low": nan, "high": nan, "region": 45.1, "region_low": nan, "region_high": nan}
    summary = changes_summary(1, ends)
    changes = sweep_tables(summary, ["a", "b"], [5000], [2252782])[1]
    assert changes.rows[1][1:] == ["45"] * 3 and "no intervals" in changes.title
    assert "interval" not in changes.caption
    summary["replicates"] = 2
    assert "an interval that includes 0" in sweep_tables(summary, ["a", "b"], [5000], [2252782])[1].caption


def test_a_sweep_of_one_variant_prints_no_changes_table(tmp_path):
    """One variant has no change from the first: its table of changes held the first variant's
    empty row under a title that said "per 100,000 agents" where two variants' says "in the
    region" (the region's column of the first is always empty). The means table stays."""
    from abm.outputs.sweep_report import sweep_tables

    ends = {"per_100k": 2.0, "low": 1.0, "high": 3.0, "region": 45.1, "region_low": 22.0, "region_high": 67.0}
    one = changes_summary(3, ends).iloc[:1]
    tables = sweep_tables(one, ["a"], [5000], [2252782])
    assert [t.title for t in tables] == ["3 runs (3 per variant); means over replicates"]
    assert len(sweep_tables(changes_summary(3, ends), ["a", "b"], [5000], [2252782])) == 2


def test_means_table_gives_the_first_weeks_reproduction_number_where_replicates_have_it():
    """The means table's last column: the mean over the replicates with a final first week, saying
    how many when not all; empty when none has one, or for a summary written before sweeps had it."""
    from abm.outputs.sweep_report import sweep_tables

    ends = {"per_100k": 2.0, "low": 1.0, "high": 3.0, "region": 45.1, "region_low": 22.0, "region_high": 67.0}
    summary = changes_summary(3, ends)
    means = sweep_tables(summary, ["a", "b"], [5000], [2252782])[0]
    assert means.columns[-1] == "R first week" and [r[-1] for r in means.rows] == ["", ""]
    summary["reproduction_number_initial_mean"] = [1.234, 0.9]
    summary["reproduction_number_initial_n"] = [3, 1]
    means = sweep_tables(summary, ["a", "b"], [5000], [2252782])[0]
    assert [r[-1] for r in means.rows] == ["1.23", "0.90 (1 of 3)"]
    summary["reproduction_number_initial_n"] = [0, 3]
    assert sweep_tables(summary, ["a", "b"], [5000], [2252782])[0].rows[0][-1] == ""


def test_each_row_says_whether_its_epidemic_is_over_and_the_summary_counts_them():
    """With no transmission the seeded infections end within the run: every replicate's epidemic
    is over by its last day (summary.json's replicates_epidemic_over of the row's own run), and
    none transmits, so there is no generation interval either; with transmission it goes on."""
    with fixed_seeds_note():
        result = run_sweep(SCENARIO, ["disease.transmission_rate=0,3.137"], replicates=2, agents=1500, days=60)
    t, s = result.table, result.summary
    assert t["epidemic_over"].tolist() == [True, True, False, False]
    assert s["epidemic_over_n"].tolist() == [2, 0]
    assert s["generation_interval_n"].tolist() == [0, 2] and t.loc[t.variant == 0, "generation_interval"].isna().all()
    row = t.iloc[2]
    with fixed_seeds_note():
        again = abm.run(
            SCENARIO,
            sets=["disease.transmission_rate=3.137"],
            seed=int(row["seed"]),
            replicates=1,
            agents=1500,
            days=60,
        )
    assert row["epidemic_over"] == bool(again.summary["replicates_epidemic_over"])


def test_means_table_shows_a_small_mean_down_to_its_first_significant_digit():
    """A sweep of vacc_ct printed "0.0%" infected beside 0.4 deaths per variant: a mean that would
    read as 0 at one decimal is shown down to its first significant digit, as the run's table does;
    a true 0 stays 0."""
    from abm.outputs.sweep_report import sweep_tables

    ends = {"per_100k": 2.0, "low": 1.0, "high": 3.0, "region": 45.1, "region_low": 22.0, "region_high": 67.0}
    summary = changes_summary(3, ends)
    summary["cumulative_infected_share_mean"] = [0.000324, 0.1786]
    summary["peak_hospital_occupancy_mean"] = [0.04, 1234.5]
    summary["deaths_mean"] = [0.0, 0.02]
    means = sweep_tables(summary, ["a", "b"], [5000], [2252782])[0]
    assert [r[1:4] for r in means.rows] == [["0.03%", "0.04", "0.0"], ["17.9%", "1,234.5", "0.02"]]
