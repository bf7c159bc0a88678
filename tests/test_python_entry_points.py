"""The Python entry points against the commands they stand for: ``abm.run``, ``abm.calibrate`` and
``abm.learn`` write what ``abm run``, ``abm calibrate`` and ``abm learn`` write for the same
scenario (byte for byte, times apart), print nothing, and raise the one-line message the command
prints; every public function's docstring lists its arguments as its signature has them."""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import fixed_seeds_note, tiny_calibration, tiny_learning
from typer.testing import CliRunner

import abm
from abm.cli import app
from abm.learning import LearningScenarioError
from abm.outputs.run_folder import MARK
from abm.scenario import ScenarioError

ROOT = Path(__file__).resolve().parents[1]
NI = ROOT / "scenarios/king_county/ni.yaml"
TINY_PRIVATE = ROOT / "tests/private_calibration/tiny.yaml"
runner = CliRunner()

# What differs between two runs of the same scenario: how long they took and when.
TIMES_JSON = {"seconds", "wall_time_s", "timings_s", "created_utc", "timings", "command"}
TIMES_CSV = {"datetime_start", "datetime_complete", "duration"}


def without_times(value: object) -> object:
    """``value`` (parsed JSON) without the keys of :data:`TIMES_JSON`, at any depth."""
    if isinstance(value, dict):
        return {k: without_times(v) for k, v in value.items() if k not in TIMES_JSON}
    if isinstance(value, list):
        return [without_times(v) for v in value]
    return value


def unhashed(marker: Path) -> list[str]:
    """The lines of an output folder's marker file but the hashes of its files."""
    return [line for line in marker.read_text().splitlines() if not line.startswith("sha256:")]


def differing(api: Path, cli: Path) -> list[str]:
    """The files of two output folders that differ: the same names, the same bytes, except for
    the times in JSON files, the trials' times in trials.csv and so the hashes of the marker file
    (:data:`abm.outputs.run_folder.MARK`)."""
    names = sorted(p.name for p in api.iterdir())
    assert names == sorted(p.name for p in cli.iterdir())
    out = []
    for name in names:
        a, c = api / name, cli / name
        if a.is_dir() or a.read_bytes() == c.read_bytes():
            continue
        if name.endswith(".json") and without_times(json.loads(a.read_text())) == without_times(
            json.loads(c.read_text())
        ):
            continue
        if name == MARK and unhashed(a) == unhashed(c):  # the hashes of files with their times differ
            continue
        if name == "trials.csv" and pd.read_csv(a).drop(columns=list(TIMES_CSV)).equals(
            pd.read_csv(c).drop(columns=list(TIMES_CSV))
        ):
            continue
        out.append(name)
    return out


def test_abm_run_writes_what_the_command_writes(tmp_path, capfd):
    """abm.run(...).write() and `abm run` with the same options: the same tables, summary and
    resolved scenario, byte for byte; abm.run and write() print nothing."""
    with fixed_seeds_note():
        result = abm.run(NI, agents=1500, days=8, replicates=2, seed=11)
    result.write(tmp_path / "api", figures=False)
    assert capfd.readouterr() == ("", "")
    args = ["run", str(NI), "--agents", "1500", "--days", "8", "--replicates", "2", "--seed", "11"]
    done = runner.invoke(app, [*args, "--out", str(tmp_path / "cli")])
    assert done.exit_code == 0, done.output
    tables = ("timeseries.csv", "timeseries.parquet", "by_age.csv", "by_tract.csv", "costs.csv", "summary.json")
    for name in (*tables, "scenario.resolved.yaml"):
        assert (tmp_path / "api" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes(), name
    assert isinstance(result.timeseries, pd.DataFrame) and result.summary["agents"] == 1500


def test_abm_calibrate_writes_what_the_command_writes_and_returns_its_figures(tmp_path, capfd):
    """abm.calibrate did not exist (abm.calibration.optimize.calibrate returned a dict); it is what
    `abm calibrate` calls: the same folder (times apart), nothing printed, and the key figures
    (calibrated values, losses, the trials) as attributes."""
    path = tiny_calibration(tmp_path, trials=1, rerank_trials=0)
    result = abm.calibrate(path, tmp_path / "api")
    assert capfd.readouterr() == ("", "")
    done = runner.invoke(app, ["calibrate", str(path), "--out", str(tmp_path / "cli")])
    assert done.exit_code == 0, done.output
    assert differing(tmp_path / "api", tmp_path / "cli") == []
    written = json.loads((tmp_path / "api/calibration.json").read_text())
    assert result.folder == tmp_path / "api" and result.summary["folder"] == str(tmp_path / "api")
    assert result.best_parameters == written["best_parameters"]
    assert list(result.best_parameters) == ["disease.transmission_rate"]
    assert result.loss_fit == written["loss_fit"] and result.fit_losses == written["fit"]
    assert result.holdout_losses is None  # tiny has no held-out window
    assert len(result.table) == 1 and result.table["chosen"].tolist() == [True]
    assert yaml.safe_load(result.calibrated_yaml.read_text())["disease"]["transmission_rate"] == pytest.approx(
        result.best_parameters["disease.transmission_rate"]
    )
    value = result.best_parameters["disease.transmission_rate"]
    assert repr(result) == (
        f"<CalibrationResult of 'tiny' (optuna, 1 trial): disease.transmission_rate={value:g}; "
        f"loss_fit {result.loss_fit:.4g}; in {tmp_path / 'api'}>"
    )


def test_abm_learn_writes_what_the_command_writes_and_returns_the_report(tmp_path, capfd):
    """abm.learn did not exist (abm.learning.run_scenario needed a folder and returned a dict); it
    is what `abm learn` calls: the same report folder (times apart), nothing printed, the report
    and a table of the protocols' figures; ``progress`` is told of each protocol's rounds, as `abm learn`'s bars are."""
    path = tiny_learning(tmp_path)
    told: list[tuple[str, int, int, str]] = []
    result = abm.learn(path, tmp_path / "api", progress=lambda *step: told.append(step))
    assert capfd.readouterr() == ("", "")
    assert [(label, done, total) for label, done, total, _ in told if label == "fedavg"] == [
        ("fedavg", 1, 2),
        ("fedavg", 2, 2),
    ]
    done = runner.invoke(app, ["learn", str(path), "--out", str(tmp_path / "cli")])
    assert done.exit_code == 0, done.output
    assert differing(tmp_path / "api", tmp_path / "cli") == []
    assert result.report == json.loads((tmp_path / "api/report.json").read_text())
    assert (result.folder, result.kind) == (tmp_path / "api", "learning")
    assert result.table.index.tolist() == ["local", "fedavg"]
    assert result.table.loc["fedavg", "mean_score"] == result.report["protocols"]["fedavg"]["mean_score"]
    where = tmp_path / "api"
    assert repr(result) == f"<LearningResult of 'tiny' (learning): protocols ['local', 'fedavg']; in {where}>"


def cli_error(args: list[str]) -> str:
    """The message `abm ARGS` prints after ``error:`` (exit code 2), as one line."""
    done = runner.invoke(app, args)
    assert done.exit_code == 2, done.output
    text = " ".join(done.stderr.split())
    assert text.startswith("error: "), text
    return text.removeprefix("error: ")


def test_a_bad_key_raises_the_message_the_command_prints_and_writes_nothing(tmp_path, capfd):
    """A scenario file with an unknown key: abm.run, abm.calibrate and abm.learn raise the error
    the documentation names, with the message of `abm run`, `abm calibrate` and `abm learn`; they
    neither print nor write."""
    epidemic = tiny_calibration(tmp_path, trials=1, rerank_trials=0)
    data = yaml.safe_load(epidemic.read_text())
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**data, "populaton": {"agents": 10}}))
    learning = yaml.safe_load(tiny_learning(tmp_path).read_text())
    bad_learning = tmp_path / "bad_learning.yaml"
    bad_learning.write_text(yaml.safe_dump({**learning, "roundz": 3}))
    out = tmp_path / "out"
    calls = [
        (lambda: abm.run(bad), ["run", str(bad), "--out", str(out)], ScenarioError),
        (lambda: abm.calibrate(bad, out), ["calibrate", str(bad), "--out", str(out)], ScenarioError),
        (lambda: abm.learn(bad_learning, out), ["learn", str(bad_learning), "--out", str(out)], LearningScenarioError),
    ]
    for call, args, error in calls:
        with pytest.raises(error) as caught:
            call()
        assert capfd.readouterr() == ("", "")
        assert " ".join(str(caught.value).split()) == cli_error(args)
        assert "unknown key" in str(caught.value) and "\n" not in str(caught.value)
    assert not out.exists()


def test_learn_takes_a_private_calibration_and_refuses_an_epidemic_scenario(tmp_path):
    """abm.learn runs `abm learn`'s two kinds: a private calibration (kind: private_calibration)
    goes to its own loader, whose message names the Python argument; an epidemic scenario or
    calibrate's plain data are refused with a pointer to the function that takes them."""
    with pytest.raises(LearningScenarioError, match=r"\(with sets=\['rounds=0'\]\): invalid scenario: rounds: 0"):
        abm.learn(TINY_PRIVATE, tmp_path / "out", sets=["rounds=0"])
    with pytest.raises(LearningScenarioError, match=r"ni\.yaml: this is an epidemic scenario, not a learning one"):
        abm.learn(NI, tmp_path / "out")
    with pytest.raises(ScenarioError, match=r"^scenario: \{'name': 'x'\} is not allowed; give the path of a scenario"):
        abm.calibrate({"name": "x"}, tmp_path / "out")
    with pytest.raises(LearningScenarioError, match=r"^scenario: 3 is not allowed"):
        abm.learn(3)
    assert list(tmp_path.iterdir()) == []


PUBLIC = ["run", "compare", "run_sweep", "calibrate", "learn"]


@pytest.mark.parametrize("name", PUBLIC)
def test_each_public_function_documents_every_argument_with_its_type(name):
    """help(abm.X) lists each argument under "Arguments:" in the signature's order (run and
    run_sweep hid agents, days, seed and device in **overrides, and run_sweep's sets, names and
    sweep_plan were not described); every argument and the result have a type hint."""
    function = getattr(abm, name)
    doc = inspect.getdoc(function) or ""
    section = doc.split("Arguments:\n", 1)[1].split("\n\n", 1)[0]
    listed = re.findall(r"^    (\w+): ", section, flags=re.M)
    parameters = inspect.signature(function).parameters
    assert listed == list(parameters)
    assert all(p.annotation is not inspect.Parameter.empty for p in parameters.values())
    assert inspect.signature(function).return_annotation is not inspect.Signature.empty


def test_import_abm_loads_no_engine_until_a_function_is_called():
    """`import abm` and looking up abm.calibrate and abm.learn (help, tab completion) load neither
    torch nor pandas nor Optuna."""
    import subprocess
    import sys

    code = (
        "import sys, abm; abm.calibrate, abm.learn, abm.CalibrationResult, abm.LearningResult; "
        "print(sorted(m for m in ('torch', 'pandas', 'optuna', 'sklearn') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "call",
    [
        lambda path: abm.run(path),
        lambda path: abm.run(yaml.safe_load(Path(path).read_text())),
        lambda path: abm.run_sweep(path, ["rounds=1,2"]),
        lambda path: abm.calibrate(path),
    ],
)
@pytest.mark.parametrize(
    ("path", "kind"),
    [("scenarios/learning/gmm_mapl.yaml", "learning"), ("tests/private_calibration/tiny.yaml", "private calibration")],
)
def test_a_learning_scenario_given_where_an_epidemic_one_is_needed_is_named_in_one_line(call, path, kind):
    """abm.run, run_sweep and calibrate on a learning or private-calibration scenario raised a line
    per key an epidemic scenario lacks ("seed: unknown key ...", 7 to 11 of them), where `abm run`
    says in one line what it is and what runs it; they say so too, naming abm.learn."""
    with pytest.raises(ScenarioError) as caught:
        call(ROOT / path)
    message = str(caught.value)
    assert message.endswith(f": this is a {kind} scenario, not an epidemic one; run it with abm.learn")
    assert "\n" not in message and "unknown key" not in message


RESULTS = {
    "run": "RunResult",
    "compare": "Comparison",
    "run_sweep": "SweepResult",
    "calibrate": "CalibrationResult",
    "learn": "LearningResult",
}


def test_readme_shows_each_function_with_arguments_it_takes_and_attributes_its_result_has():
    """README's "From Python" has an example of each public function; each call binds to the
    function's signature (no argument it lacks), each scenario file it names exists, and each
    attribute read from a result is one its class has."""
    import ast

    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## From Python\n") :]
    section = section[: section.index("\n## ")]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    tree = ast.parse(code)
    called, kinds = set(), {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            if isinstance(func, ast.Attribute) and func.attr in RESULTS:
                kinds[node.targets[0].id] = getattr(abm, RESULTS[func.attr])
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if isinstance(owner, ast.Name) and owner.id == "abm":
                called.add(node.func.attr)
                args = [None] * len(node.args)
                inspect.signature(getattr(abm, node.func.attr)).bind(*args, **{k.arg: None for k in node.keywords})
                files = [a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).endswith(".yaml")]
                assert all((ROOT / f).is_file() for f in files), files
    assert called == set(RESULTS)
    read = {
        (node.value.id, node.attr)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in kinds
    }
    fields = {cls: {f for f in getattr(cls, "__dataclass_fields__", {})} | set(dir(cls)) for cls in kinds.values()}
    assert sorted((var, attr) for var, attr in read if attr not in fields[kinds[var]]) == []
    assert len(read) >= len(RESULTS)


def test_abm_learn_leaves_pyplots_backend_and_open_figures_as_they_were(tmp_path):
    """The learning and private-calibration reports switched the process to matplotlib's Agg
    backend as they drew (``matplotlib.use``), which closes every open pyplot figure: abm.learn in
    a notebook lost the notebook's figures and its inline backend. They now draw on figures of
    their own; a bar chart of the private-calibration report is no pyplot figure either."""
    from abm.private_calibration.report import institution_bars

    path = tiny_learning(tmp_path)
    code = (
        "import matplotlib\n"
        "matplotlib.use('svg')\n"
        "import matplotlib.pyplot as plt\n"
        "mine = plt.figure()\n"
        "import abm\n"
        f"abm.learn({str(path)!r}, {str(tmp_path / 'out')!r})\n"
        "print(matplotlib.get_backend(), plt.get_fignums() == [mine.number])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["svg", "True"]
    assert sorted(p.name for p in (tmp_path / "out").glob("*.png")) == ["curves.png", "gains.png", "scores.png"]
    report = {
        "scenario": "s",
        "protocols": {"local": {"institutions": [{"recovery": 0.5}, {"recovery": 0.7}]}},
    }
    fig = institution_bars(report, ["North", "South"], "recovery")
    assert fig.canvas.manager is None  # not pyplot's
    assert [bar.get_height() for bar in fig.axes[0].patches] == [0.5, 0.7]
