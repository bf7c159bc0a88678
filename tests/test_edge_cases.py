"""Edge cases found by a review of sweeps, comparisons and the Python API: tiny and one-day runs,
the same run given twice, runs of different regions, bare strings where lists are expected."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import fixed_seeds_note

import abm
from abm.outputs import plots
from abm.outputs.compare import CompareError, load_runs, scenario_differences, table_note
from abm.scenario import ScenarioError
from abm.sweep import parse_axes, plan

ROOT = Path(__file__).resolve().parents[1]
NI = ROOT / "scenarios/king_county/ni.yaml"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """A 10-agent, 20-day, 2-replicate run folder: most tracts and some age groups have no agents."""
    out = tmp_path_factory.mktemp("edge") / "tiny"
    with fixed_seeds_note():
        abm.run(NI, agents=10, days=20, replicates=2).write(out)
    return out


def test_a_key_and_a_key_inside_it_are_not_swept_together():
    with pytest.raises(ScenarioError, match=r"--sweep seeding.day and --sweep seeding set the same values"):
        parse_axes(["seeding.day=0,2", "seeding={day: 4}"])
    with pytest.raises(ScenarioError, match=r"--sweep simulation: the key is also set by --days"):
        plan(NI, ["simulation={days: 3}"], days=6)
    with pytest.raises(ScenarioError, match=r"--sweep seeding.day: the key is also set by --set"):
        plan(NI, ["seeding.day=1,2"], sets=["seeding={day: 4}"])
    # A list item's index, dotted or bracketed, is the same key.
    changes = "interventions.contact_multipliers.changes"
    with pytest.raises(ScenarioError, match=r"set the same values"):
        parse_axes([f"{changes}.0.household=0.9,0.8", f"{changes}[0].household=0.2,0.3"])
    with pytest.raises(ScenarioError, match=r"the key is also set by --set"):
        plan(NI, [f"{changes}[0].household=0.2,0.3"], sets=[f"{changes}.0.household=0.9"])


def test_single_strings_are_taken_as_lists_of_one():
    sp = plan(NI, "disease.transmission_rate=1,2", sets="simulation.days=3")
    assert [v.disease.transmission_rate for v in sp.variants] == [1.0, 2.0]
    assert {v.simulation.days for v in sp.variants} == {3}
    with pytest.raises(ScenarioError, match=r"--replicates: '2' is not allowed; give a whole number"):
        plan(NI, ["disease.transmission_rate=1,2"], replicates="2")


def test_compare_labels_every_run_apart_and_refuses_a_run_given_twice(tiny, tmp_path):
    other = tmp_path / "other" / "tiny"
    shutil.copytree(tiny, other)
    comp = load_runs([tiny, other])
    # both are ni in folders called tiny: each is labelled with its path
    assert [r.label for r in comp.runs] == [f"ni ({tiny.resolve()})", f"ni ({other.resolve()})"]
    third = tmp_path / "ni_seed7"
    shutil.copytree(tiny, third)
    assert [r.label for r in load_runs([tiny, third]).runs] == ["ni (tiny)", "ni (ni_seed7)"]
    with pytest.raises(CompareError, match="given twice"):
        load_runs([tiny, tiny])
    with pytest.raises(CompareError, match=r"None: not a run; give run folders or results of abm.run"):
        load_runs([tiny, None])
    assert [r.label for r in abm.compare(str(tiny)).runs] == ["ni"]  # one path alone is a list of one


def test_compare_names_a_summary_it_cannot_read_and_notes_different_regions(tiny, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(tiny, old)
    summary = json.loads((old / "summary.json").read_text())
    del summary["hospital_capacity"]
    (old / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(
        CompareError,
        match=r"summary.json lacks the numbers hospital_capacity.beds, hospital_capacity.beds_per_100k, "
        "hospital_capacity.days_over_capacity;",
    ):
        load_runs([tiny, old])
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(tiny, elsewhere)
    summary = json.loads((elsewhere / "summary.json").read_text())
    summary["region"] = "Other County"
    (elsewhere / "summary.json").write_text(json.dumps(summary))
    runs = load_runs([tiny, elsewhere]).runs
    assert "different regions (ni (tiny): King County, WA, ni (elsewhere): Other County)" in table_note(runs)
    assert "different regions" not in table_note(load_runs([tiny]).runs)


def test_compare_notes_scenario_values_that_differ_besides_interventions(tiny, tmp_path):
    """Runs that differ in their epidemic (a rate) are named in the note; runs that differ only
    in interventions, replicates or device are not."""
    other = tmp_path / "other"
    shutil.copytree(tiny, other)
    resolved = yaml.safe_load((other / "scenario.resolved.yaml").read_text())
    resolved["disease"]["transmission_rate"] = 9.5
    resolved["simulation"]["replicates"] = 7
    resolved["interventions"]["vaccination"] = {"start_day": 3}
    (other / "scenario.resolved.yaml").write_text(yaml.safe_dump(resolved))
    runs = load_runs([tiny, other]).runs
    rate = runs[0].scenario["disease"]["transmission_rate"]
    assert scenario_differences(runs) == {"disease.transmission_rate": [rate, 9.5]}
    assert (
        f"differ in more than their interventions: disease.transmission_rate (ni (tiny): {rate}, ni (other): 9.5)"
        in (table_note(runs))
    )
    resolved["disease"]["transmission_rate"] = rate
    (other / "scenario.resolved.yaml").write_text(yaml.safe_dump(resolved))
    assert scenario_differences(load_runs([tiny, other]).runs) == {}
    assert "differ in more" not in table_note(load_runs([tiny, other]).runs)


def test_compare_names_the_entry_of_a_list_that_differs_not_the_whole_list(tiny, tmp_path):
    """A run of the reference profile against a King County run differs in the scales of most
    disease.dwell_times entries: the note printed both lists of 12 entries whole (about 2,500
    characters of JSON); it names each entry's key that differs, as --set writes it, in order."""
    other = tmp_path / "other"
    shutil.copytree(tiny, other)
    resolved = yaml.safe_load((other / "scenario.resolved.yaml").read_text())
    dwell = resolved["disease"]["dwell_times"]
    before = {i: dwell[i]["scale"] for i in (2, 10)}
    for i in before:
        dwell[i]["scale"] = 0.5
    (other / "scenario.resolved.yaml").write_text(yaml.safe_dump(resolved))
    runs = load_runs([tiny, other]).runs
    assert scenario_differences(runs) == {f"disease.dwell_times[{i}].scale": [s, 0.5] for i, s in before.items()}
    note = table_note(runs)
    assert (
        f"differ in more than their interventions: disease.dwell_times[2].scale (ni (tiny): {before[2]}, "
        f"ni (other): 0.5); disease.dwell_times[10].scale (ni (tiny): {before[10]}, ni (other): 0.5); their"
    ) in note
    assert '"from"' not in note


def test_tracts_and_age_groups_without_agents_are_empty_not_zero(tiny):
    by_tract = pd.read_csv(tiny / "by_tract.csv", dtype={"geoid": str})
    empty = by_tract.agents == 0
    assert empty.any() and (~empty).any()
    assert by_tract.loc[empty, "cumulative_per_100k"].isna().all()
    assert by_tract.loc[~empty, "cumulative_per_100k"].notna().all()
    run = plots.RunTables.from_folder(tiny)
    fig = plots.cumulative_by_age([run])
    for ax, group in zip(fig.axes, plots.AGE_GROUP_LABELS, strict=True):
        has_agents = plots._group_agents(run, group) > 0
        drawn = [line for line in ax.lines if len(line.get_xdata())]
        assert bool(drawn) == has_agents, group
        assert ("no agents of this age" in [t.get_text() for t in ax.texts]) == (not has_agents), group


def test_a_one_day_run_is_drawn_and_has_no_second_difference(tmp_path):
    with fixed_seeds_note():
        res = abm.run(NI, agents=1000, days=1, replicates=1)
    assert res.summary["peak_infection_rate_2nd_difference"] is None
    fig = res.plot("new_infections")
    line = fig.axes[0].lines[0]
    assert line.get_marker() == "o" and list(line.get_ydata()) == pytest.approx([500.0])  # 5 seeds per 1,000
    assert all(float(t).is_integer() for t in fig.axes[0].get_xticks())
    assert "one replicate: no band" in [t.get_text() for t in fig.axes[0].texts]  # under the x label


def test_map_days_outside_the_run_are_refused_by_the_api(tmp_path):
    with fixed_seeds_note():
        res = abm.run(NI, agents=300, days=5, replicates=1)
    for days, message in (
        ([500], r"days: \[500\] not allowed; map days must lie within the 5 simulated days \(0..4\)"),
        ([-1], r"days: \[-1\] not allowed"),
        ("3", r"days: '3' is not allowed; give a list of whole days"),
    ):
        with pytest.raises(ScenarioError, match="^" + message):  # named as map() takes it
            res.map(days=days)
    with pytest.raises(ScenarioError, match=r"^map_days: \[9\] not allowed"):  # as write() takes it
        res.write_figures(tmp_path / "figures", map_days=[9])
    assert not (tmp_path / "figures").exists()  # refused before any plot is drawn
    assert res.map(days=[4]).data.days[-1] == 4


def test_a_county_boundary_file_serves_the_reference_population(tmp_path):
    """The reference population has one pseudo-tract for the county (GEOID 53033): a county
    outline is accepted for it before the run, a file of tracts only is refused, naming the key."""
    from abm.scenario import load_scenario

    def feature(geoid: str) -> dict:
        ring = [[-122.5, 47.1], [-121.0, 47.1], [-121.0, 47.8], [-122.5, 47.8], [-122.5, 47.1]]
        return {
            "type": "Feature",
            "properties": {"GEOID": geoid},
            "geometry": {"type": "Polygon", "coordinates": [ring]},
        }

    reference = ROOT / "scenarios/reference/base.yaml"
    county, tracts = tmp_path / "county.geojson", tmp_path / "tracts.geojson"
    county.write_text(json.dumps({"type": "FeatureCollection", "features": [feature("53033")]}))
    tracts.write_text(json.dumps({"type": "FeatureCollection", "features": [feature("53033000100")]}))
    assert load_scenario(reference, [f"outputs.boundaries={county}"]).outputs.boundaries == str(county)
    with pytest.raises(ScenarioError, match=r"outputs.boundaries: .*none of the region's 1 tract GEOIDs"):
        load_scenario(reference, [f"outputs.boundaries={tracts}"])


def test_a_sweep_may_ask_for_a_gpu_it_will_find_on_the_cluster():
    """Planning does not check the device (a Ray cluster's GPUs are not the planner's); a run does."""
    import torch

    sp = plan(NI, ["seeding.day=0,1"], device="cuda")
    assert {v.simulation.device for v in sp.variants} == {"cuda"}
    if not torch.cuda.is_available():
        with pytest.raises(ScenarioError, match=r"simulation.device: 'cuda' is not allowed here"):
            abm.run(NI, agents=300, days=3, device="cuda")


def test_ray_refuses_a_numbered_gpu_before_it_starts():
    """Ray shows a task only the GPU it assigns (as cuda), so cuda:1 would fail in every task;
    both Ray paths refuse it up front, before Ray starts."""
    from abm.calibration.config import CalibrationConfig
    from abm.calibration.observed import CalibrationError
    from abm.calibration.optimize import trial_runner
    from abm.sweep import SweepTask, run_ray

    task = SweepTask(0, 0, 1, {"name": "ni", "simulation": {"device": "cuda:1"}})
    with pytest.raises(ScenarioError, match=r"ni: simulation.device: 'cuda:1' is not allowed with --backend ray"):
        run_ray([task], lambda *_: None)
    refused = r"c.yaml: simulation.device: 'cuda:1' is not allowed with --backend ray"
    with (
        pytest.raises(CalibrationError, match=refused),
        trial_runner(CalibrationConfig(), {}, "c.yaml", "ray", None, None, "cuda:1"),
    ):
        pass


def test_ray_refusing_a_numbered_gpu_names_the_backend_as_the_caller_gave_it(tmp_path):
    """From Python (calibrate, run_sweep) the refusal names the argument, backend='ray', not an
    option --backend the caller never typed (it did); abm calibrate and abm sweep keep --backend
    ray. Nothing starts Ray and nothing is written."""
    from conftest import tiny_calibration
    from typer.testing import CliRunner

    from abm.calibration.optimize import calibrate
    from abm.cli import app
    from abm.sweep import run_sweep

    path = tiny_calibration(tmp_path, trials=2, rerank_trials=0)
    gpu = ["simulation.device=cuda:1"]
    calls = [
        lambda: calibrate(path, tmp_path / "py", sets=gpu, backend="ray"),
        lambda: run_sweep(path, ["contacts.community.weight=0.1,0.2"], sets=gpu, backend="ray"),
    ]
    refused = r"simulation\.device: 'cuda:1' is not allowed with backend='ray': "
    for call in calls:
        with pytest.raises(ValueError, match=refused) as err:
            call()
        assert "--" not in str(err.value), str(err.value)
    commands = [
        ["calibrate", str(path), "--out", str(tmp_path / "cli")],
        ["sweep", str(path), "--sweep", "contacts.community.weight=0.1,0.2", "--out", str(tmp_path / "cli")],
    ]
    for command in commands:
        result = CliRunner().invoke(app, [*command, "--backend", "ray", "--set", gpu[0]])
        text = " ".join(result.output.split())
        assert result.exit_code == 2 and "'cuda:1' is not allowed with --backend ray: Ray assigns" in text, text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny.yaml"]


def test_out_of_gpu_memory_names_the_size_and_the_cpu(monkeypatch):
    """A run that does not fit in a GPU's memory (torch.OutOfMemoryError, raised here where
    building the simulation would raise it) is one ScenarioError naming the size and the way out."""
    import torch

    from abm import runs

    def out_of_memory(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

    monkeypatch.setattr(runs, "check_device", lambda sc, source: None)
    monkeypatch.setattr(runs, "simulation_of", out_of_memory)
    with pytest.raises(ScenarioError) as err, fixed_seeds_note():
        abm.run(NI, agents=300, replicates=7, days=3, device="cuda")
    assert str(err.value) == (
        "ni: population.agents: 300 agents x 7 replicates do not fit in the memory of cuda; "
        "use fewer agents or replicates, or simulation.device: cpu"
    )


def test_map_days_may_be_numpy_integers():
    with fixed_seeds_note():
        res = abm.run(NI, agents=300, days=5, replicates=1)
    assert res.map(days=np.array([2, 4])).data.days[-2:] == [2, 4]


def test_a_run_beyond_all_of_a_gpus_memory_is_refused_before_it_starts(monkeypatch):
    """On a GPU the least memory a run takes (400 bytes per agent and 600 per agent and replicate)
    is checked against the device's whole memory where the run happens; here a 16 GB device is
    pretended."""
    import types

    import torch

    from abm.scenario import check_device, load_scenario

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: types.SimpleNamespace(total_memory=16e9))
    big = load_scenario(NI, ["simulation.device=cuda", "population.agents=1000000", "simulation.replicates=27"])
    with pytest.raises(ScenarioError) as err:
        check_device(big, "ni.yaml")
    assert str(err.value) == (
        "ni.yaml: population.agents: 1000000 agents x 27 replicates need at least about 16.6 GB, but cuda has "
        "16.0 GB; use fewer agents or replicates, or simulation.device: cpu"
    )
    fits = load_scenario(NI, ["simulation.device=cuda", "population.agents=1000000", "simulation.replicates=26"])
    check_device(fits, "ni.yaml")  # 0.4 + 15.6 GB, all of the device: allowed


def pretend_gpu(monkeypatch, total: float = 16e9) -> None:
    """A CUDA device of ``total`` bytes, as torch would report it."""
    import types

    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: types.SimpleNamespace(total_memory=total))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (  # the options gave the agents and replicates: named (it said "(with --device cuda)" alone)
            ["run", NI, "--agents", "1000000", "--replicates", "27", "--device", "cuda"],
            f"{NI} (with --agents 1000000 --replicates 27 --device cuda): population.agents: 1000000 agents x 27 "
            "replicates need at least about 16.6 GB, but cuda has 16.0 GB; use fewer agents or replicates, or "
            "simulation.device: cpu",
        ),
        (  # the device given by --set: named (it was blamed on the file)
            [
                "validate",
                NI,
                "--set",
                "simulation.device=cuda",
                "--set",
                "simulation.replicates=27",
                "--set",
                "population.agents=1000000",
            ],
            f"{NI} (with --set simulation.device=cuda --set simulation.replicates=27 --set population.agents=1000000): "
            "population.agents: 1000000 agents x 27 replicates need at least about 16.6 GB, but cuda has 16.0 GB; "
            "use fewer agents or replicates, or simulation.device: cpu",
        ),
        (  # a sweep runs each replicate alone: one replicate counts (it counted ni.yaml's 10)
            ["sweep", NI, "--sweep", "disease.transmission_rate=3,4", "--agents", "17000000", "--device", "cuda"],
            f"{NI} (with --agents 17000000 --device cuda): population.agents: 17000000 agents x 1 replicate need at "
            "least about 17.0 GB, but cuda has 16.0 GB; use fewer agents, or simulation.device: cpu",
        ),
    ],
)
def test_a_gpu_run_refused_for_its_memory_names_the_options_that_sized_it(monkeypatch, tmp_path, args, message):
    """The device check names the scenario with every option that changed it, as the other checks
    do, and counts a sweep's runs as they run; here a 16 GB device is pretended."""
    from typer.testing import CliRunner

    from abm.cli import app

    pretend_gpu(monkeypatch)
    result = CliRunner().invoke(
        app, [str(a) for a in args] + (["--out", str(tmp_path / "o")] if args[0] != "validate" else [])
    )
    assert result.exit_code == 2 and " ".join(result.output.split()) == f"error: {message}", result.output
    assert not (tmp_path / "o").exists()


def test_a_sweep_on_a_gpu_fits_where_one_replicate_fits(monkeypatch):
    """1,000,000 agents take 1.0 GB a replicate on a GPU: a sweep of ni.yaml's 10 replicates fits a
    2 GB device, since they run one at a time (one batch of 10 would need 6.4 GB)."""
    from abm.scenario import check_device

    pretend_gpu(monkeypatch, 2e9)
    swept = plan(NI, ["disease.transmission_rate=3,4"], agents=1_000_000, device="cuda")
    for sc in swept.variants:
        check_device(sc, "ni.yaml", batch=1)
        with pytest.raises(ScenarioError, match=r"1000000 agents x 10 replicates need at least about 6\.4 GB"):
            check_device(sc, "ni.yaml")


def test_the_summary_counts_replicates_that_went_over_capacity():
    """Days over capacity are of the mean curve; the summary also counts the replicates whose own
    occupancy crossed the line on some day (the mean can stay under it)."""
    sets = ["disease.transmission_rate=5", "outputs.hospital_beds_per_100k=40"]
    with fixed_seeds_note():
        run = abm.run(NI, agents=3000, days=60, replicates=4, sets=sets)
    cap = run.summary["hospital_capacity"]
    peaks = run.timeseries.groupby("replicate")["hospital_occupancy"].max()
    assert cap["replicates_over_capacity"] == int((peaks > cap["beds"]).sum())
    assert 0 < cap["replicates_over_capacity"] <= 4


def test_a_run_written_from_python_records_no_command_line(tiny):
    """The manifest's command is the `abm` command line; a run made with abm.run(...).write()
    has none (the host program's arguments, pytest's here, say nothing about the run)."""
    manifest = json.loads((tiny / "manifest.json").read_text())
    assert manifest["command"] is None and manifest["agents"] == 10


def test_the_python_api_raises_its_documented_error_without_printing_or_writing(tmp_path, monkeypatch, capsys):
    """abm.run on bad input raises ScenarioError (a ValueError) with the message the command line
    prints, naming the arguments given to abm.run (agents=0, sets=[...]), not options of `abm run`
    the caller never typed (it said "(with --agents 0)"), and neither prints, exits nor writes; its
    docstring says so and names its options."""
    monkeypatch.chdir(tmp_path)
    cases = [
        ((tmp_path / "missing.yaml",), {}, r"missing\.yaml: cannot read the scenario file"),
        ((NI,), {"agents": 0}, r"ni\.yaml \(with agents=0\): invalid scenario: population\.agents: 0"),
        (
            (NI,),
            {"days": -1, "sets": ["simulation.replicates=1"]},
            r"ni\.yaml \(with sets=\['simulation\.replicates=1'\], days=-1\): invalid scenario: simulation\.days: -1",
        ),
        ((NI,), {"device": "tpu"}, r"ni\.yaml \(with device='tpu'\): invalid scenario: simulation\.device"),
        (
            (NI,),
            {"agents": 5, "sets": ["population.agents=3"]},
            r"ni\.yaml: agents=5 and sets item 'population\.agents=\.\.\.' both set population\.agents; give one",
        ),
        ((NI,), {"sets": ["simulation.days"]}, r"^sets: 'simulation\.days' is not allowed; write key\.path=value"),
        ((NI,), {"sets": ["simulation.dayz=3"]}, r"simulation\.dayz: unknown key"),
        (  # an index into a list that is empty, or not in the file: it said "so --set cannot index into it"
            (NI,),
            {"sets": ["interventions.contact_multipliers.changes[0].community=0.5"]},
            r"^sets: interventions\.contact_multipliers\.changes\[0\]\.community: interventions\.contact_multipliers"
            r"\.changes is an empty list, so it has no item to set; give the whole list",
        ),
        (
            (NI,),
            {"sets": ["outputs.map_days.0=5"]},
            r"^sets: outputs\.map_days\.0: outputs\.map_days is not in the file, so it has no item to set",
        ),
        # Arguments of the wrong kind: one message each, not a TypeError from deep inside (sets=5 said
        # "'int' object is not iterable"; sets={...} was read as its keys; progress=5 failed after the
        # population was built).
        (
            (NI,),
            {"sets": 5},
            r"^sets: 5 is not allowed; give a list of 'key\.path=value' texts, "
            r"e\.g\. sets=\['contacts\.community\.weight=0\.3'\]$",
        ),
        ((NI,), {"sets": {"simulation.days": 3}}, r"^sets: \{'simulation\.days': 3\} is not allowed; give a list of"),
        ((NI,), {"sets": ["simulation.days=3", 4]}, r"^sets: \['simulation\.days=3', 4\] is not allowed; give a list"),
        (
            (5,),
            {},
            r"^scenario: 5 is not allowed; give a scenario file's path, plain data as a file holds it \(a dict\) "
            r"or a Scenario$",
        ),
        ((NI,), {"progress": 5}, r"^progress: 5 is not allowed; give a function progress\(day, days\), or None$"),
    ]
    for args, kwargs, message in cases:
        with pytest.raises(ScenarioError, match=message) as caught:
            abm.run(*args, **kwargs)
        assert isinstance(caught.value, ValueError) and "--" not in str(caught.value), str(caught.value)
    # a keyword abm.run does not take is refused by Python as the call is made, naming it (agents,
    # days, replicates, seed and device are keyword arguments of their own, with their types)
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'speed'"):
        abm.run(NI, speed=2)
    assert capsys.readouterr() == ("", "") and list(tmp_path.iterdir()) == []
    doc = abm.run.__doc__ or ""
    for word in ("agents", "days", "replicates", "seed", "device", "sets", "progress", "ScenarioError"):
        assert word in doc, word
    assert "CompareError" in (abm.compare.__doc__ or "")


def _hand_edited(tiny: Path, dest: Path, table: str, edit, summary: dict | None = None) -> Path:
    """A copy of ``tiny`` whose ``table`` (timeseries.csv, by_age.csv or costs.csv; the parquet
    timeseries removed) is replaced by ``edit`` of it, and whose summary.json gets ``summary``."""
    shutil.copytree(tiny, dest)
    (dest / "timeseries.parquet").unlink()
    frame = pd.read_csv(dest / table, dtype={"age_group": str})
    edit(frame).to_csv(dest / table, index=False)
    if summary:
        (dest / "summary.json").write_text(json.dumps(json.loads((dest / "summary.json").read_text()) | summary))
    return dest


@pytest.mark.parametrize(
    ("table", "edit", "summary", "problem"),
    [
        (  # replicate 1's rows deleted: its admissions and deaths were paired with nothing
            "timeseries.csv",
            lambda t: t[t.replicate != 1],
            None,
            "timeseries.parquet (or .csv) lacks replicate 1 of summary.json's 2 replicates (0 to 1)",
        ),
        (  # a summary that counts more replicates than the tables hold
            "by_age.csv",
            lambda t: t,
            {"replicates": 3},
            "timeseries.parquet (or .csv) lacks replicate 2 of summary.json's 3 replicates (0 to 2); "
            "by_age.csv lacks replicate 2 of summary.json's 3 replicates (0 to 2)",
        ),
        (
            "timeseries.csv",
            lambda t: t.assign(replicate=t.replicate.replace(1, 4)),
            None,
            "timeseries.parquet (or .csv) holds replicate 4 beyond summary.json's 2 replicates (0 to 1)",
        ),
        (  # one day of one replicate deleted: its admissions summed over 19 days
            "timeseries.csv",
            lambda t: t[(t.replicate != 0) | (t.day != 5)],
            None,
            "timeseries.parquet (or .csv) lacks 1 row, the first of replicate 0, day 5: every replicate needs "
            "one row for each day 0 to 19",
        ),
        (
            "by_age.csv",
            lambda t: t[(t.replicate != 1) | (t.age_group != "20-29")],
            None,
            "by_age.csv lacks 20 rows, the first of replicate 1, age_group 20-29, day 0: every replicate needs "
            "one row for each day 0 to 19 (and each age_group)",
        ),
        (
            "timeseries.csv",
            lambda t: pd.concat([t, t[(t.replicate == 0) & (t.day == 3)]]),
            None,
            "timeseries.parquet (or .csv) holds the row of replicate 0, day 3 more than once",
        ),
        (
            "timeseries.csv",
            lambda t: t.assign(day=t.day.replace(19, 25)),
            None,
            "timeseries.parquet (or .csv) holds day 25 beyond summary.json's 20 days (0 to 19)",
        ),
        (  # counted as 2 replicates and 20 days, and the share of days over capacity taken of 20.5 days
            "costs.csv",
            lambda t: t,
            {"replicates": 2.5, "days": 20.5},
            "summary.json lacks the numbers days (a whole number), replicates (a whole number)",
        ),
        (  # costs.csv holds the booked items only, but no replicate or day the run did not have
            "costs.csv",
            lambda t: pd.DataFrame({"item": ["test"], "day": [3], "replicate": [2], "count": [1], "unit_cost": [5.0]}),
            None,
            "costs.csv holds replicate 2 beyond summary.json's 2 replicates (0 to 1)",
        ),
    ],
)
def test_compare_refuses_tables_whose_replicates_or_days_disagree_with_the_summary(
    tiny, tmp_path, table, edit, summary, problem
):
    """A hand-edited run folder whose tables lack a replicate or a day, hold one more than its
    summary.json, or a row twice was compared: the replicates were paired wrong and the totals
    summed over the rows left, without a word. Exit 2 naming the folder, the file and what is
    wrong; nothing written."""
    from typer.testing import CliRunner

    from abm.cli import app

    bad = _hand_edited(tiny, tmp_path / "edited", table, edit, summary)
    out = tmp_path / "cmp"
    result = CliRunner().invoke(app, ["compare", str(tiny), str(bad), "--out", str(out)])
    flat = " ".join(result.output.split())
    assert result.exit_code == 2, flat
    assert f"error: {bad}: cannot be compared: {problem}; it was not written by this version" in flat
    assert flat.count("error:") == 1 and not out.exists()


def test_compare_takes_a_run_whose_costs_book_some_replicates_and_days_only(tiny, tmp_path):
    """costs.csv has rows for the booked items only: a replicate or a day without any is no fault."""
    booked = pd.DataFrame({"item": ["test"], "day": [3], "replicate": [1], "count": [2], "unit_cost": [5.0]})
    edited = _hand_edited(tiny, tmp_path / "booked", "costs.csv", lambda t: booked)
    from abm.outputs.differences import replicate_costs

    assert replicate_costs(load_runs([tiny, edited]).runs[1]).tolist() == [0.0, 10.0]
