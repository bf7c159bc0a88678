"""The Python API as a notebook uses it: a result written twice, the reprs a cell shows, pyplot
left as the session set it, and arguments of the wrong kind refused with one message."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from conftest import fixed_seeds_note

import abm
from abm.outputs.run_folder import OutputFolderError
from abm.scenario import ScenarioError

NI = "scenarios/king_county/ni.yaml"
SMALL = {"agents": 2000, "days": 20, "replicates": 2}


@pytest.fixture(scope="module")
def result() -> abm.RunResult:
    with fixed_seeds_note():
        return abm.run(NI, **SMALL)


def test_a_result_written_twice_gives_each_folder_its_own_manifest(result, tmp_path):
    """write() kept its timings and file list in the result's manifest: a second write without
    figures recorded the first write's plot and map timings, for files it did not write."""
    before = json.dumps(result.manifest, sort_keys=True)
    result.write(tmp_path / "full")
    result.write(tmp_path / "tables", figures=False)
    full = json.loads((tmp_path / "full" / "manifest.json").read_text())
    tables = json.loads((tmp_path / "tables" / "manifest.json").read_text())
    assert "plots_seconds" in full["timings"] and "map.html" in full["files"]
    assert not {"plots_seconds", "map_seconds", "map_snapshots_seconds"} & set(tables["timings"])
    assert "map.html" not in tables["files"] and "output_seconds" in tables["timings"]
    assert json.dumps(result.manifest, sort_keys=True) == before  # the result is as abm.run gave it
    result.write(tmp_path / "full")  # a folder abm wrote is replaced
    assert (tmp_path / "full" / "map.html").is_file()


def test_writing_a_result_leaves_pyplots_backend_and_open_figures_alone(result, tmp_path):
    """write() switched pyplot to Agg (closing every open figure with it): a notebook's inline
    backend was gone, and the figures the user had open with it."""
    plt.switch_backend("svg")  # any backend but Agg stands for a notebook's
    try:
        mine = plt.figure()
        # the user's figures: this one, and any an earlier test in this worker left open
        open_before = plt.get_fignums()
        result.write(tmp_path / "run")
        abm.compare([result, result.write(tmp_path / "again")]).write(tmp_path / "cmp")
        assert plt.get_backend() == "svg"
        assert mine.number in open_before
        assert plt.get_fignums() == open_before  # the user's figures open, none of abm's left behind
        figure = result.plot("hospital_occupancy")  # drawn for the user: pyplot's, as before
        assert figure.number in plt.get_fignums()
    finally:
        plt.close("all")
        plt.switch_backend("Agg")


def test_the_reprs_a_notebook_cell_shows_are_one_line(result):
    """A result's repr was the dataclass's: every table, the population and the raw counts (36,000
    characters for 5,000 agents)."""
    text = repr(result)
    assert text == (
        f"<RunResult of 'ni': 2000 agents x 2 replicates, 20 days, seed {result.summary['seed']}, cpu; means over "
        f"replicates: infected {result.summary['cumulative_infected']['mean']:g} "
        f"({result.summary['cumulative_infected']['share']:.1%}), hospitalizations "
        f"{result.summary['hospitalizations']['mean']:g}, deaths {result.summary['deaths']['mean']:g}>"
    )
    assert repr(abm.compare(result)) == "<Comparison of 1 run: 'ni'>"
    with fixed_seeds_note():
        sweep = abm.run_sweep(NI, ["contacts.community.weight=0.2,0.4"], agents=2000, days=5, replicates=1)
    assert repr(sweep) == (
        "<SweepResult of 'ni': 2 variants (contacts.community.weight=[0.2, 0.4]); table 2 rows, summary 2 rows>"
    )
    assert (
        repr(abm.SweepResult(sweep.table, sweep.summary)) == "<SweepResult: 2 variants; table 2 rows, summary 2 rows>"
    )


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda r, _: r.write(3), r"^out: 3 is not allowed; give a path \(a str or a pathlib\.Path\)$"),
        (lambda r, _: r.write(None), r"^out: None is not allowed"),
        (lambda r, tmp: abm.compare([r, r.write(tmp / "a")]).write(7), r"^out: 7 is not allowed"),
        (lambda r, _: r.map(2.5), r"^path: 2\.5 is not allowed"),
    ],
)
def test_an_output_path_of_the_wrong_kind_is_named(result, tmp_path, call, message):
    """write(3) raised pathlib's TypeError ('expected str, bytes or os.PathLike object, not int')."""
    with pytest.raises(OutputFolderError, match=message):
        call(result, tmp_path)


def test_a_reuse_of_the_wrong_kind_is_named_before_anything_runs():
    """reuse=1 raised AttributeError ('int' object has no attribute 'population') once the region
    was loaded."""
    with pytest.raises(ScenarioError, match=r"^reuse: 1 is not allowed; give an abm\.runs\.Reuse\(\), or None$"):
        abm.run(NI, reuse=1, **SMALL)


def test_a_scenario_given_as_a_dict_may_extend_a_file(tmp_path, monkeypatch):
    """Plain data "as a file holds it" (abm.run's docstring) may name a base with ``extends``, a path
    relative to the working folder (it was refused: 'extends: unknown key'); the dict given is left
    as it was, and a base that is missing is named."""
    data = {"extends": NI, "name": "mine", "simulation": {"seed": 7}}
    with fixed_seeds_note():
        got = abm.run(data, agents=2000, days=5, replicates=1)
    assert data == {"extends": NI, "name": "mine", "simulation": {"seed": 7}}
    assert (got.scenario.name, got.scenario.simulation.seed) == ("mine", 7)
    with fixed_seeds_note():
        assert got.scenario.disease == abm.run(NI, agents=2000, days=5, replicates=1).scenario.disease
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ScenarioError, match=r"^scenario: extends: 'ni\.yaml' not found \(looked for .*ni\.yaml\)$"):
        abm.run({"extends": "ni.yaml", "name": "x"})
    assert Path(data["extends"]).name == "ni.yaml"


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((3, "out"), {}, r"^path_or_dict: 3 is not allowed; give a scenario file's path or its data \(a dict\)$"),
        (
            ("scenarios/learning/digits_codream.yaml", "out"),
            {"sets": 5},
            r"^sets: 5 is not allowed; give a list of 'key\.path=value' texts, e\.g\. sets=\['rounds=5'\]$",
        ),
    ],
)
def test_learning_arguments_of_the_wrong_kind_are_named(tmp_path, monkeypatch, args, kwargs, message):
    """abm.learning.run_scenario(3, ...) and sets=5 raised TypeError from deep inside."""
    from abm.learning import LearningScenarioError, run_scenario

    monkeypatch.chdir(tmp_path)
    path, out = args
    path = path if not isinstance(path, str) else Path(__file__).resolve().parents[1] / path
    with pytest.raises(LearningScenarioError, match=message):
        run_scenario(path, out, **kwargs)
    assert list(tmp_path.iterdir()) == []


def test_a_learning_set_given_as_one_text_is_a_list_of_one():
    """sets='rounds=0' was read letter by letter ('r', 'o', ...); it is one set, as for abm.run."""
    from abm.learning import LearningScenarioError
    from abm.learning.scenario import load_scenario

    with pytest.raises(LearningScenarioError, match=r"rounds: 0 is not allowed: must be at least 1"):
        load_scenario("scenarios/learning/digits_codream.yaml", sets="rounds=0")


@pytest.mark.parametrize("entry", ["learning", "private_calibration"])
@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (["rounds=0"], r" \(with sets=\['rounds=0'\]\): invalid scenario: rounds: 0 is not allowed: must be at least"),
        (["rounds"], r": sets: 'rounds' is not allowed; write key\.path=value$"),
    ],
)
def test_learning_sets_are_named_as_the_python_argument(tmp_path, entry, sets, message):
    """abm.learning.run_scenario and run_private_calibration named a bad ``sets`` item as the
    command line's option ("FILE (with --set rounds=0)", "FILE: --set: 'rounds' ..."), which a
    Python caller never typed; they name ``sets=[...]`` as abm.run does (abm learn keeps --set)."""
    from abm.learning import LearningScenarioError, run_scenario
    from abm.private_calibration.report import run_private_calibration

    run, name = {
        "learning": (run_scenario, "digits_codream.yaml"),
        "private_calibration": (run_private_calibration, "private_calibration.yaml"),
    }[entry]
    path = f"scenarios/learning/{name}"
    with pytest.raises(LearningScenarioError, match="^" + path.replace(".", r"\.") + message):
        run(path, tmp_path / "out", sets=sets)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["digits_codream.yaml", "private_calibration.yaml"])
def test_abm_learn_still_names_its_set_option(tmp_path, name):
    """The command line's messages keep naming ``--set`` (only the Python entry points say sets=)."""
    from typer.testing import CliRunner

    from abm.cli import app

    path = f"scenarios/learning/{name}"
    for sets, message in ((["rounds=0"], f"{path} (with --set rounds=0): invalid"), (["rounds"], "--set: 'rounds'")):
        result = CliRunner().invoke(app, ["learn", path, "--out", str(tmp_path / "out"), "--set", *sets])
        assert result.exit_code == 2 and message in " ".join(result.stderr.split()), result.output
    assert not (tmp_path / "out").exists()


def test_a_run_says_which_part_of_its_work_it_is_in():
    """The whole county spends 15-20 s before its first day with nothing said; `stage` is told
    each part as it starts, in order, and the days come after the last one. A stage argument that
    cannot be called is refused before any work."""
    from abm.runs import STAGES

    told: list[str] = []
    with fixed_seeds_note():
        abm.run(NI, **SMALL, stage=told.append, progress=lambda day, days: told.append(f"day {day}"))
    assert told[:3] == list(STAGES) and told[3] == "day 1" and told[-1] == f"day {SMALL['days']}"
    with pytest.raises(ScenarioError, match=r"^stage: 'later' is not allowed; give a function stage\(text\), or None$"):
        abm.run(NI, **SMALL, stage="later")


def test_abm_run_shows_the_part_of_its_work_on_its_bar(tmp_path, monkeypatch):
    """On a terminal, abm run's bar says what the run does before and after its days: building the
    population and contacts, then writing the files."""
    import io

    from rich.console import Console
    from typer.testing import CliRunner

    from abm import cli

    screen = io.StringIO()
    monkeypatch.setattr(cli, "err_console", Console(file=screen, force_terminal=True, width=200, markup=False))
    args = ["run", NI, "--agents", "2000", "--days", "5", "--replicates", "1", "--out", str(tmp_path / "run")]
    done = CliRunner().invoke(cli.app, args)
    assert done.exit_code == 0, done.output
    shown = screen.getvalue()
    for text in ("building the population", "building contacts and interventions", "writing files"):
        assert f"ni: 2,000 agents x 1: {text}" in shown
