"""Bad input found by a review of the command line: each case gets one message naming the file,
the key and the value, exit code 2, and nothing written or lost."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Literal

import pandas as pd
import pytest
import yaml
from conftest import copy_output, write_small_scenario
from pydantic import BaseModel, ConfigDict
from typer.testing import CliRunner

from abm.calibration.config import CalibrationConfig
from abm.calibration.observed import CalibrationError, load_observed
from abm.cli import app
from abm.outputs.run_folder import MARK
from abm.scenario import Scenario, ScenarioError, apply_set, load_scenario
from abm.set_options import dotted
from abm.sweep import run_sweep as abm_sweep
from abm.yaml_loader import load_yaml

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "scenarios/king_county/base.yaml"
CALIBRATION = ROOT / "scenarios/king_county/calibrate_2020.yaml"
runner = CliRunner()


def text(result) -> str:
    return " ".join(result.output.split())


@pytest.fixture
def small(tmp_path) -> Path:
    """The small scenario (2,000 agents, 6 days, one replicate) at ``tmp_path/small.yaml``."""
    return write_small_scenario(tmp_path)


def test_an_impossible_date_is_refused_with_its_line(tmp_path, small):
    bad = tmp_path / "date.yaml"
    bad.write_text(f"extends: {small}\ndescription: ok\ncalibration:\n  fit_window: [2020-02-28, 2020-04-31]\n")
    result = runner.invoke(app, ["run", str(bad), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "date.yaml: invalid YAML at line 4" in text(result) and "'2020-04-31' is not a calendar date" in text(result)
    assert not (tmp_path / "out").exists()


def observed(tmp_path: Path, frame: pd.DataFrame) -> CalibrationConfig:
    frame.to_csv(tmp_path / "obs.csv", index=False)
    return CalibrationConfig(
        data=str(tmp_path / "obs.csv"),
        targets=["deaths"],
        fit_window=(dt.date(2020, 3, 1), dt.date(2020, 3, 14)),
        holdout_window=None,
    )


def test_calibration_data_that_is_empty_text_or_undated_is_refused(tmp_path):
    days = pd.date_range("2020-03-01", periods=20).strftime("%Y-%m-%d")
    good = pd.DataFrame({"date": days, "deaths": range(20)})
    assert load_observed(observed(tmp_path, good))["deaths"].iloc[3] == 3
    with pytest.raises(CalibrationError, match="has no rows"):
        load_observed(observed(tmp_path, good.iloc[:0]))
    words = good.astype({"deaths": object})
    words.loc[5, "deaths"] = "x"
    with pytest.raises(CalibrationError, match=r"column 'deaths': 'x' on 2020-03-06 is not a number"):
        load_observed(observed(tmp_path, words))
    undated = good.copy()
    undated.loc[2, "date"] = "2020-13-01"
    with pytest.raises(CalibrationError, match="date '2020-13-01' is not a date"):
        load_observed(observed(tmp_path, undated))
    # Day-first and month-first dates cannot be told apart (03/01/2020): ISO dates only.
    us = good.assign(date=pd.date_range("2020-03-01", periods=20).strftime("%m/%d/%Y"))
    with pytest.raises(CalibrationError, match=r"date '03/01/2020' is not a date written YYYY-MM-DD"):
        load_observed(observed(tmp_path, us))
    with pytest.raises(CalibrationError, match="neither a bundled series"):
        load_observed(CalibrationConfig(data="seattle_2021"))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("multiplier\n0.5\nabc\n", "multiplier 'abc' on line 3 is not allowed"),
        ("multiplier\n0.5\n-1\n", "multiplier '-1.0' on line 3 is not allowed"),
        ("multiplier\n", "needs a column 'multiplier'"),
    ],
    ids=["text", "negative", "empty"],
)
def test_a_bad_contact_series_file_is_refused(tmp_path, content, message):
    series = tmp_path / "series.csv"
    series.write_text(content)
    with pytest.raises(ScenarioError, match=message):
        load_scenario(CALIBRATION, [f"interventions.contact_multipliers.series.source={series}"])


def test_bad_outputs_are_refused_before_the_simulation(tmp_path, small):
    for setting, message in (
        (f"outputs.boundaries={tmp_path / 'none.zip'}", "outputs.boundaries: " + repr(str(tmp_path / "none.zip"))),
        ("outputs.map_days=[5, 500]", "outputs.map_days: [500] not allowed"),
    ):
        result = runner.invoke(app, ["run", str(small), "--set", setting, "--out", str(tmp_path / "out")])
        assert result.exit_code == 2 and message in text(result), text(result)
    garbage = tmp_path / "shapes.zip"
    garbage.write_text("not a zip file")
    result = runner.invoke(
        app, ["run", str(small), "--set", f"outputs.boundaries={garbage}", "--out", str(tmp_path / "out")]
    )
    assert result.exit_code == 2 and "outputs.boundaries" in text(result) and "not a readable zip" in text(result)
    assert not (tmp_path / "out").exists()


def test_infinite_numbers_and_unknown_settings_are_refused(tmp_path, small):
    result = runner.invoke(app, ["validate", str(small), "--set", "disease.transmission_rate=.inf"])
    assert result.exit_code == 2 and text(result).count("disease.transmission_rate: inf is not allowed") == 1
    # written as text, which YAML reads as a string and validation would turn into a float
    for written in ("inf", "'+Infinity'"):
        result = runner.invoke(app, ["validate", str(small), "--set", f"disease.transmission_rate={written}"])
        assert result.exit_code == 2, (written, text(result))
        assert "disease.transmission_rate: inf is not allowed: a finite number is expected here" in text(result)
    (tmp_path / "quoted.yaml").write_text(f'extends: {small}\ncontacts: {{occupation: {{degree: {{FOOD: "inf"}}}}}}\n')
    result = runner.invoke(app, ["validate", str(tmp_path / "quoted.yaml")])
    assert result.exit_code == 2 and "contacts.occupation.degree.FOOD: inf is not allowed" in text(result), text(result)
    # a list that validation makes a tuple (three age classes) is looked at again too
    result = runner.invoke(app, ["validate", str(small), "--set", 'contacts.community.mean_contacts=["inf", 1, 1]'])
    assert result.exit_code == 2, text(result)
    assert "contacts.community.mean_contacts[0]: inf is not allowed: a finite number is expected here" in text(result)
    result = runner.invoke(
        app, ["run", str(small), "--set", "contacts.occupation.degree={HEALTHCARES: 5}", "--out", str(tmp_path / "o")]
    )
    assert result.exit_code == 2 and "contacts.occupation.degree: ['HEALTHCARES'] not allowed" in text(result)
    assert "HEALTHCARE," in text(result) and not (tmp_path / "o").exists()
    (tmp_path / "typo.yaml").write_text(f"extends: {small}\nseeding: {{infections: {{asymptomatc: 3}}}}\n")
    result = runner.invoke(app, ["validate", str(tmp_path / "typo.yaml")])
    assert result.exit_code == 2 and "seeding.infections.asymptomatc: 'asymptomatc' is not allowed" in text(result)


def listing(mark: str) -> list[str]:
    """An output folder mark's lines but those of the files' contents (which differ from run to run)."""
    return [line for line in mark.splitlines() if not line.startswith("sha256: ")]


def test_a_folder_is_replaced_only_as_abm_wrote_it(tmp_path, small, small_run_folder):
    user = tmp_path / "user"
    user.mkdir()
    (user / "report.json").write_text("{}")  # a file name abm also writes does not make it abm's
    (user / "thesis.tex").write_text("precious")
    result = runner.invoke(app, ["run", str(small), "--out", str(user)])
    assert result.exit_code == 2 and "was not written by abm" in text(result)
    assert (user / "thesis.tex").read_text() == "precious"
    out = copy_output(small_run_folder, tmp_path / "run")  # `abm run small.yaml --out run`, written once
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.name != MARK)
    assert {"summary.json", "plots", "plots/hospital_occupancy.png", "manifest.json"} <= set(written)
    mark = (out / MARK).read_text()
    digests = [
        f"sha256: {hashlib.sha256((out / n).read_bytes()).hexdigest()} {n}" for n in written if (out / n).is_file()
    ]
    assert mark.splitlines()[1:] == [*(f"  {name}" for name in written), *digests, "kind: run"]  # what abm wrote
    # A file added to the folder, or to its plots/ (which was lost with the folder), is kept.
    for added in ("notes.txt", "plots/annotated.png"):
        (out / added).write_text("mine")
        result = runner.invoke(app, ["run", str(small), "--out", str(out), "--seed", "5"])
        assert result.exit_code == 2 and f"holds ['{added}'], which abm did not write" in text(result)
        assert (out / added).read_text() == "mine" and "running" not in text(result)
        assert json.loads((out / "summary.json").read_text())["seed"] != 5  # the old run, untouched
        (out / added).unlink()
    # Without the addition the folder is abm's again: the new run replaces it.
    assert runner.invoke(app, ["run", str(small), "--out", str(out), "--seed", "5"]).exit_code == 0
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.name != MARK) == written
    assert listing((out / MARK).read_text()) == listing(mark)
    assert json.loads((out / "summary.json").read_text())["seed"] == 5
    assert json.loads((out / "manifest.json").read_text())["seed"] == 5
    # A mark written before marks listed subfolders' entries names plots/ alone: still replaced.
    (out / MARK).write_text(mark.splitlines()[0] + "\n" + "".join(f"  {n}\n" for n in written if "/" not in n))
    (out / "plots" / "older.png").write_text("an older abm's plot")
    assert runner.invoke(app, ["run", str(small), "--out", str(out), "--seed", "6"]).exit_code == 0
    assert listing((out / MARK).read_text()) == listing(mark) and not (out / "plots" / "older.png").exists()


def test_a_folder_with_files_edited_since_abm_wrote_them_is_not_replaced(tmp_path, small, small_run_folder):
    """A file abm wrote and the user then changed (an annotated table) is kept as an added one is:
    the new run is refused (exit 2) naming it, and the folder is left as it was. A file touched but
    not changed, and a folder whose mark predates the record of contents, are replaced."""
    out = copy_output(small_run_folder, tmp_path / "run")  # `abm run small.yaml --out run`, written once
    mark = (out / MARK).read_text()
    assert mark.endswith("\n")  # a final newline
    # Not edited: replaced.
    assert runner.invoke(app, ["run", str(small), "--out", str(out), "--seed", "5"]).exit_code == 0
    assert json.loads((out / "summary.json").read_text())["seed"] == 5
    # Edited: one file grows; a plot is rewritten with as many bytes and its old time.
    (out / "timeseries.csv").write_text((out / "timeseries.csv").read_text() + "my note\n")
    plot = out / "plots" / "hospital_occupancy.png"
    stat = plot.stat()
    plot.write_bytes(bytes(len(plot.read_bytes())))
    os.utime(plot, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    result = runner.invoke(app, ["run", str(small), "--out", str(out), "--seed", "6"])
    assert result.exit_code == 2, text(result)
    assert (
        f"output folder '{out}': holds ['plots/hospital_occupancy.png', 'timeseries.csv'], which changed since abm "
        "wrote them; replacing the folder would lose them: move them out, or give a new folder, or remove this "
        "one yourself"
    ) in text(result)
    assert "running" not in text(result)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before  # untouched
    # Added and edited files are named together.
    (out / "notes.txt").write_text("mine")
    result = runner.invoke(app, ["run", str(small), "--out", str(out), "--seed", "6"])
    assert result.exit_code == 2 and "holds ['notes.txt'], which abm did not write, and ['plots/" in text(result)
    (out / "notes.txt").unlink()
    # A mark without the record (an older abm's) is replaced, edits and all; so is one without a final newline.
    (out / MARK).write_text("\n".join(line for line in mark.splitlines() if line.startswith(("  ", "written", "kind"))))
    assert runner.invoke(app, ["run", str(small), "--out", str(out), "--seed", "6"]).exit_code == 0
    assert json.loads((out / "summary.json").read_text())["seed"] == 6
    # A file touched (its time changed) but not changed is no edit.
    os.utime(out / "summary.json")
    assert runner.invoke(app, ["run", str(small), "--out", str(out), "--seed", "7"]).exit_code == 0
    assert json.loads((out / "summary.json").read_text())["seed"] == 7


@pytest.mark.parametrize(
    "command",
    [
        ["run", "SMALL"],
        ["sweep", "SMALL", "--sweep", "disease.transmission_rate=3,4"],
        ["calibrate", str(CALIBRATION)],
        ["learn", "SMALL"],
        ["compare", "a", "b"],
    ],
)
def test_an_empty_out_is_named_as_given(tmp_path, small, monkeypatch, command):
    """``--out ''`` was read as the working folder and named '.', a value the user did not give."""
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, [str(small) if a == "SMALL" else a for a in command] + ["--out", ""])
    assert result.exit_code == 2, text(result)
    assert "output folder '': give a folder name, not an empty value" in text(result)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["small.yaml"]


def test_a_split_too_small_to_train_is_refused(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(
        "name: tiny\ndata: {source: gaussian_mixture, n_samples: 20, n_classes: 4, n_features: 4}\n"
        "split: {participants: 10, label_skew: {alpha: 0.5}}\nprotocols: [{name: fedavg}]\n"
    )
    result = runner.invoke(app, ["learn", str(path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    # the skew's own minimum is what cannot be met: said first, with its remedy
    assert "tiny.yaml: split.label_skew.min_size: " in text(result) and "give a smaller min_size" in text(result)
    assert not (tmp_path / "out").exists()
    path.write_text(path.read_text().replace(", label_skew: {alpha: 0.5}", ""))  # IID: no skew to blame
    result = runner.invoke(app, ["learn", str(path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert "tiny.yaml: split: participant" in text(result) and "at least 2 training samples" in text(result)
    assert "skew" not in text(result) and not (tmp_path / "out").exists()


def test_options_that_set_the_same_key_twice_are_refused(tmp_path, small):
    result = runner.invoke(app, ["run", str(small), "--agents", "2000", "--set", "population.agents=3000"])
    assert result.exit_code == 2 and "--agents and --set population.agents=... both set" in text(result)
    # a key below (or above) one an option sets is the same clash
    for setting in ("population.agents.x=3", "population={agents: 5}"):
        result = runner.invoke(app, ["run", str(small), "--agents", "2000", "--set", setting])
        assert result.exit_code == 2 and f"--agents and --set {setting.split('=')[0]}=... both set" in text(result)
    result = runner.invoke(
        app,
        ["sweep", str(small), "--sweep", "disease.transmission_rate=3,4", "--set", "disease.transmission_rate=5"],
    )
    assert result.exit_code == 2 and "also set by --set" in text(result)
    result = runner.invoke(app, ["calibrate", str(CALIBRATION), "--ray-address", "x", "--out", str(tmp_path / "c")])
    assert result.exit_code == 2 and "--ray-address: only used with --backend ray, not with --backend local" in text(
        result
    )


@pytest.mark.parametrize("setting", ["simulation.replicates=3", "simulation={replicates: 3, days: 6}"])
def test_sweep_replicates_with_a_set_of_them_is_refused_as_run_refuses_it(tmp_path, small, setting):
    """abm run refuses --replicates beside --set simulation.replicates; abm sweep took --replicates
    and dropped the --set without a word. Both refuse it alike now, nothing written."""
    key = setting.split("=")[0]
    expected = f"error: {small}: --replicates and --set {key}=... both set simulation.replicates; give one"
    for command, more in (("run", []), ("sweep", ["--sweep", "disease.transmission_rate=3,4"])):
        args = [command, str(small), *more, "--replicates", "2", "--set", setting, "--out", str(tmp_path / command)]
        result = runner.invoke(app, args)
        assert result.exit_code == 2 and text(result) == expected, result.output
        assert not (tmp_path / command).exists()
    with pytest.raises(ScenarioError, match=r"replicates=2 and sets item 'simulation\.replicates=\.\.\.' both set"):
        abm_sweep(small, ["disease.transmission_rate=3,4"], replicates=2, sets=["simulation.replicates=3"])


def test_each_command_points_to_the_right_one_for_the_file(tmp_path, small):
    result = runner.invoke(app, ["learn", str(small)])
    assert result.exit_code == 2 and "is an epidemic scenario" in text(result) and "abm run" in text(result)
    learning = ROOT / "scenarios/learning/gmm_fedavg_private.yaml"
    result = runner.invoke(app, ["calibrate", str(learning)])
    assert result.exit_code == 2 and "is a learning scenario" in text(result) and "abm learn" in text(result)


def test_set_reaches_dotted_keys_and_list_items():
    data = yaml.safe_load(CALIBRATION.read_text())
    out = apply_set(data, "calibration.parameters.disease.transmission_rate.low=3")
    assert out["calibration"]["parameters"]["disease.transmission_rate"] == {"low": 3, "high": 8.0}
    assert data["calibration"]["parameters"]["disease.transmission_rate"]["low"] == 2.0  # the input is untouched
    listed = {"disease": {"dwell_times": [{"shape": 1.0}, {"shape": 2.0}]}}
    assert apply_set(listed, "disease.dwell_times.1.shape=5")["disease"]["dwell_times"] == [
        {"shape": 1.0},
        {"shape": 5},
    ]
    assert listed["disease"]["dwell_times"][1] == {"shape": 2.0}
    # the index as error messages print it
    assert apply_set(listed, "disease.dwell_times[0].shape=4")["disease"]["dwell_times"] == [
        {"shape": 4},
        {"shape": 2.0},
    ]
    with pytest.raises(ScenarioError, match=r"a list of 2; '7' is not allowed, give an index 0..1"):
        apply_set(listed, "disease.dwell_times.7.shape=5")
    # a list the file leaves to its default (as every King County scenario does dwell_times, the
    # README's example): the item of the default list, the rest of that list kept
    defaults = Scenario(name="x").model_dump(mode="json", by_alias=True)
    out = apply_set({"disease": {}}, "disease.dwell_times.0.shape=5")["disease"]["dwell_times"]
    assert out == [{**defaults["disease"]["dwell_times"][0], "shape": 5}, *defaults["disease"]["dwell_times"][1:]]
    tests = apply_set({"interventions": {"testing": {}}}, "interventions.testing.tests[0].cost=7")
    assert tests["interventions"]["testing"]["tests"] == [{**defaults_testing()["tests"][0], "cost": 7}]
    ni = ROOT / "scenarios/king_county/ni.yaml"
    assert load_scenario(ni, ["disease.dwell_times[0].shape=2"]).disease.dwell_times[0].shape == 2
    assert runner.invoke(app, ["validate", str(ni), "--set", "disease.dwell_times[0].shape=2"]).exit_code == 0
    with pytest.raises(ScenarioError, match="is not in the file, so it has no item to set"):
        apply_set({}, "outputs.map_days.0=5")  # no default list (none: the default days)
    with pytest.raises(ScenarioError, match=r"changes is an empty list, so it has no item to set; give the whole"):
        apply_set({}, "interventions.contact_multipliers.changes[0].community=0.5")


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (  # the file's value (base.yaml's)
            "simulation.days[0]=5",
            "--set: simulation.days[0]: simulation.days is 180, a single value, not a list, so it has no item 0 to "
            "set; give the whole value: simulation.days=...",
        ),
        (  # the schema's default, the file leaving it out
            "interventions.vaccination.priority[0]=80+",
            "--set: interventions.vaccination.priority[0]: interventions.vaccination.priority is oldest_first (its "
            "default), a single value, not a list, so it has no item 0 to set; give the whole value: "
            "interventions.vaccination.priority=...",
        ),
        (  # a default inside a default list
            "interventions.testing.tests[0].sensitivity[1]=0.5",
            "--set: interventions.testing.tests[0].sensitivity[1]: interventions.testing.tests[0].sensitivity is "
            "0.99 (its default), a single value, not a list, so it has no item 1 to set; give the whole value: "
            "interventions.testing.tests[0].sensitivity=...",
        ),
    ],
)
def test_set_of_an_item_of_a_single_value_names_the_value(tmp_path, setting: str, message: str):
    """--set of a list item where the value is a single one is refused naming that value (it made
    a mapping of it, and the message named a value the user never wrote:
    "interventions.vaccination.priority: {0: '80+'} is not allowed")."""
    result = runner.invoke(
        app, ["run", str(ROOT / "scenarios/king_county/vacc_ct.yaml"), "--set", setting, "--out", str(tmp_path / "o")]
    )
    assert result.exit_code == 2 and text(result) == f"error: {message}", result.output
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("command", ["validate", "run", "sweep"])
def test_an_option_that_sets_extends_is_refused_saying_why(tmp_path, command):
    """--set extends=vacc.yaml (or a sweep over bases, --sweep extends=vacc.yaml,sq.yaml) was
    refused as "extends: unknown key; allowed keys: name, ...", a key every King County file has:
    the base is merged before the options apply, so none can replace it; the message says so."""
    ni = ROOT / "scenarios/king_county/ni.yaml"
    option = ["--sweep", "extends=vacc.yaml,sq.yaml"] if command == "sweep" else ["--set", "extends=vacc.yaml"]
    args = [command, str(ni), *option] + ([] if command == "validate" else ["--out", str(tmp_path / "o")])
    result = runner.invoke(app, args)
    said = "--sweep extends=vacc.yaml: --sweep" if command == "sweep" else "--set"
    assert result.exit_code == 2 and text(result) == (
        f"error: {said}: extends: not allowed; a scenario's base is read from its file before the options change it, "
        "so an option cannot replace it: write a file that extends the base (extends: BASE.yaml) and run it (abm "
        "compare compares the runs)"
    ), result.output
    assert not (tmp_path / "o").exists()


def defaults_testing() -> dict:
    """The testing intervention's settings with every default, as a file would write them."""
    data = {"name": "x", "interventions": {"testing": {}}}
    return Scenario.model_validate(data).model_dump(mode="json", by_alias=True)["interventions"]["testing"]


def test_a_bad_value_names_the_file_of_the_extends_chain_that_set_it(tmp_path, small):
    (tmp_path / "parent.yaml").write_text(f"extends: {small}\nname: parent\npopulation: {{agents: -5}}\n")
    (tmp_path / "child.yaml").write_text("extends: parent.yaml\nname: child\ndescription: mine\n")
    result = runner.invoke(app, ["validate", str(tmp_path / "child.yaml")])
    assert result.exit_code == 2
    assert "population.agents: -5 is not allowed" in text(result) and f"(set in {tmp_path / 'parent.yaml'})" in text(
        result
    )
    result = runner.invoke(app, ["validate", str(tmp_path / "parent.yaml")])
    assert result.exit_code == 2 and "set in" not in text(result)  # the file itself: no pointer
    result = runner.invoke(app, ["validate", str(small), "--set", "population.agents=-7"])
    assert result.exit_code == 2 and "set in" not in text(result) and "--set population.agents=-7" in text(result)


def test_a_bad_region_file_is_named_with_its_row_column_and_value(tmp_path, small):
    region = tmp_path / "region"
    region.mkdir()
    bundled = ROOT / "abm/populations/regions/king_county"
    (region / "region.yaml").write_text((bundled / "region.yaml").read_text())
    tracts = pd.read_csv(bundled / "tracts.csv", dtype=str)
    tracts.loc[3, "age_5_9"] = "-50"
    tracts.to_csv(region / "tracts.csv", index=False)
    for command in ("validate", "run"):
        result = runner.invoke(app, [command, str(small), "--set", f"population.region={region}"])
        assert result.exit_code == 2, result.output
        assert f"small.yaml (with --set population.region={region}): population.region:" in text(result)
        geoid = tracts.geoid[3]
        assert f"tracts.csv: row 5 (tract {geoid}), column age_5_9: -50 is not allowed" in text(result)
    tracts.loc[3, "age_5_9"] = "many"
    tracts.to_csv(region / "tracts.csv", index=False)
    result = runner.invoke(app, ["validate", str(small), "--set", f"population.region={region}"])
    assert result.exit_code == 2 and "column age_5_9: 'many' is not allowed; figures must be numbers" in text(result)
    tracts.loc[3, "age_5_9"] = ""  # an empty cell, which pandas reads as NaN
    tracts.to_csv(region / "tracts.csv", index=False)
    result = runner.invoke(app, ["validate", str(small), "--set", f"population.region={region}"])
    assert result.exit_code == 2 and "column age_5_9: an empty cell is not allowed; figures must" in text(result)


def test_a_count_written_with_a_thousands_comma_is_refused_and_nothing_written(tmp_path, small):
    """1,200 in a tract row makes a cell too many: the first data row's figures were read shifted
    one column (its geoid taken as the row's name) and the message blamed another row's empty cell;
    now validate and run refuse it naming the row, exit 2 and write nothing."""
    region = tmp_path / "region"
    region.mkdir()
    bundled = ROOT / "abm/populations/regions/king_county"
    (region / "region.yaml").write_text((bundled / "region.yaml").read_text())
    header, first, *rest = (bundled / "tracts.csv").read_text().splitlines()
    cells = first.split(",")
    cells[6] = "1,200"  # age_0_4
    (region / "tracts.csv").write_text("\n".join([header, ",".join(cells), *rest]) + "\n")
    out = tmp_path / "out"
    for command in (["validate"], ["run", "--out", str(out)]):
        result = runner.invoke(app, [*command, str(small), "--set", f"population.region={region}"])
        assert result.exit_code == 2, result.output
        assert (
            f"{region / 'tracts.csv'}: row 2: 32 cells is not allowed; every row needs one cell per column, 31 as in "
            "the header (a number written with a comma, 1,200, makes two cells: write 1200)"
        ) in text(result)
        assert not out.exists()


@pytest.mark.parametrize(
    ("column", "written", "shown"),
    [
        ("age_20_24", "inf", "inf"),
        ("land_km2", "Infinity", "inf"),
        ("hh_2", "1e999", "inf"),
        ("households", "inf", "inf"),
    ],
)
def test_an_infinite_figure_of_a_tract_is_refused_by_validate_and_run(tmp_path, small, column, written, shown):
    """An infinite count or area in tracts.csv: exit 2 naming the row, the column and the value,
    nothing written (validate said ok and the run ended in a traceback, exit 1)."""
    region = region_with(tmp_path, "pupils_per_staff: 17", "pupils_per_staff: 17")
    tracts = pd.read_csv(region / "tracts.csv", dtype=str)
    tracts.loc[3, column] = written
    tracts.to_csv(region / "tracts.csv", index=False)
    out = tmp_path / "out"
    for command in (["validate"], ["run", "--out", str(out)]):
        result = runner.invoke(app, [command[0], str(small), "--set", f"population.region={region}", *command[1:]])
        assert result.exit_code == 2, result.output
        assert (
            f"tracts.csv: row 5 (tract {tracts.geoid[3]}), column {column}: {shown} is not allowed; figures must be "
            "finite numbers, and counts and areas at least 0"
        ) in text(result)
    assert not out.exists()


@pytest.mark.parametrize(
    ("line", "replacement", "message"),
    [
        (
            "population: 2252782",
            "population: true",
            "region.yaml: population: true is not allowed: must be a whole number",
        ),
        (
            "pupils_per_staff: 17",
            "pupils_per_staff: .inf",
            "region.yaml: pupils_per_staff: inf is not allowed: a finite number is expected here",
        ),
        (
            "  AGRICULTURE: 7952\n",
            "  AGRICULTURE: .inf\n",
            "region.yaml: sectors.AGRICULTURE: inf is not allowed: a finite number is expected here",
        ),
        (
            "  residents_per_staff: 9",
            '  residents_per_staff: "nan"',
            "region.yaml: long_term_care.residents_per_staff: nan is not allowed: a finite number is expected here",
        ),
    ],
)
def test_true_or_an_infinite_number_in_region_yaml_is_refused(tmp_path, small, line, replacement, message):
    """region.yaml is read as scenarios are: true is no count (it was read as 1, a region of one
    resident), and an infinite number no figure (pupils per staff .inf gave schools no staff; an
    infinite sector ended the run in a traceback); exit 2, nothing written."""
    region = region_with(tmp_path, line, replacement)
    out = tmp_path / "out"
    for command in (["validate"], ["run", "--out", str(out)]):
        result = runner.invoke(app, [command[0], str(small), "--set", f"population.region={region}", *command[1:]])
        assert result.exit_code == 2, result.output
        assert message in text(result)
    assert not out.exists()


@pytest.mark.parametrize("missing", ["region.yaml", "tracts.csv"])
def test_a_region_folder_missing_one_file_names_that_file(tmp_path, small, missing):
    """A region folder without one of its two files: exit 2 naming the file that is missing
    (the message said only that there was no region folder with both files), nothing written."""
    region = region_with(tmp_path, "pupils_per_staff: 17", "pupils_per_staff: 17")
    (region / missing).unlink()
    out = tmp_path / "out"
    for command in (["validate"], ["run", "--out", str(out)]):
        result = runner.invoke(app, [command[0], str(small), "--set", f"population.region={region}", *command[1:]])
        assert result.exit_code == 2, result.output
        assert f"{region / missing}: not found; a region folder needs region.yaml and tracts.csv" in text(result)
    assert not out.exists()


def region_with(tmp_path, line: str, replacement: str):
    """A copy of the bundled King County region folder whose region.yaml has ``line`` replaced."""
    region = tmp_path / "region"
    region.mkdir()
    bundled = ROOT / "abm/populations/regions/king_county"
    (region / "tracts.csv").write_text((bundled / "tracts.csv").read_text())
    figures = (bundled / "region.yaml").read_text()
    assert line in figures
    (region / "region.yaml").write_text(figures.replace(line, replacement))
    return region


def test_a_bad_region_figure_is_refused_by_validate_and_run(tmp_path, small):
    """An employment share above 1 in region.yaml: exit 2 naming the file, key and row, nothing
    written (it used to pass validate and be drawn as 1; a bad size row crashed the run)."""
    region = region_with(tmp_path, "  - [20, 24, 0.693]", "  - [20, 24, 6.93]")
    out = tmp_path / "out"
    for command in (["validate"], ["run", "--out", str(out)]):
        result = runner.invoke(app, [command[0], str(small), "--set", f"population.region={region}", *command[1:]])
        assert result.exit_code == 2, result.output
        assert f"{region / 'region.yaml'}: " in text(result) and "employment_rate" in text(result)
        assert "row [20, 24, 6.93] is not allowed" in text(result) and "the share between 0 and 1" in text(result)
    assert not out.exists()


@pytest.mark.parametrize("size", ["21", "100000"])
def test_a_household_size_7up_beyond_the_largest_household_is_refused(tmp_path, small, size):
    """household_size_7up had no upper bound: 100000 was read and run, every tract's households of
    7 or more drawn as one household of all its agents (cut to fit). Exit 2 naming the file, the
    key, the value and what is allowed; nothing written."""
    region = region_with(tmp_path, "household_size_7up: 7", f"household_size_7up: {size}")
    out = tmp_path / "out"
    for command in (["validate"], ["run", "--out", str(out)]):
        result = runner.invoke(app, [command[0], str(small), "--set", f"population.region={region}", *command[1:]])
        assert result.exit_code == 2, result.output
        assert (f"{region / 'region.yaml'}: household_size_7up: {size} is not allowed: must be at most 20") in text(
            result
        )
        assert text(result).count("error:") == 1
    assert not out.exists()


def test_a_household_size_7up_of_20_is_read(tmp_path):
    from abm.populations.region import load_region

    region = region_with(tmp_path, "household_size_7up: 7", "household_size_7up: 20")
    assert load_region(region).figures.household_size_7up == 20


def test_a_misspelt_region_key_gets_the_key_it_likely_meant(tmp_path, small):
    """An unknown key of region.yaml is named with the key it most likely meant, as an unknown
    key of a scenario is (at the top and in a section), by validate and run; nothing written."""
    region = region_with(tmp_path, "household_size_7up: 7", "houshold_size_7up: 7")
    figures = (region / "region.yaml").read_text()
    (region / "region.yaml").write_text(figures.replace("  residents_per_staff:", "  residents_per_staf:"))
    out = tmp_path / "out"
    for command in (["validate"], ["run", "--out", str(out)]):
        result = runner.invoke(app, [command[0], str(small), "--set", f"population.region={region}", *command[1:]])
        assert result.exit_code == 2, result.output
        assert f"{region / 'region.yaml'}: " in text(result)
        assert "houshold_size_7up: unknown key; did you mean 'household_size_7up'? allowed keys: name, fips," in (
            text(result)
        )
        assert (
            "long_term_care.residents_per_staf: unknown key; did you mean 'residents_per_staff' (a required key, "
            "which is missing)? allowed keys: "
            "residence_rate, sizes, residents_per_staff"
        ) in text(result)
        assert "required key is missing" not in text(result)
    assert not out.exists()


def test_a_region_sector_without_contacts_is_refused_by_validate_and_run(tmp_path, small):
    """A region of one's own whose sectors are not all in contacts.occupation.degree: exit 2
    naming the key and the sectors, nothing written (validate said ok and the run ended in a
    ValueError traceback, exit 1)."""
    region = region_with(tmp_path, "  AGRICULTURE: 7952\n", "  FARMING: 7952\n")
    out = tmp_path / "out"
    for command in (
        ["validate"],
        ["run", "--out", str(out)],
        ["sweep", "--sweep", "seeding.day=0,1", "--out", str(out)],
    ):
        result = runner.invoke(app, [command[0], str(small), "--set", f"population.region={region}", *command[1:]])
        assert result.exit_code == 2, result.output
        assert "contacts.occupation.degree: no entry for the sectors ['FARMING'] of" in text(result)
        assert str(region / "region.yaml") in text(result) and "Traceback" not in result.output
    assert not out.exists()
    given = ["--set", f"population.region={region}", "--set", "contacts.occupation.degree.FARMING=14"]
    assert runner.invoke(app, ["validate", str(small), *given]).exit_code == 0
    # the reference population's groups are CHILD and ELDERLY, whatever the region
    result = runner.invoke(app, ["validate", str(small), "--set", "population.kind=reference"])
    assert result.exit_code == 2 and "no entry for the sectors ['CHILD', 'ELDERLY'] of the reference population" in (
        text(result)
    )


def test_the_reference_population_with_another_region_is_refused(tmp_path):
    """`population.kind: reference` builds King County's thesis population whatever the region;
    with another region the run scaled it to that region's residents and drew that region's beds
    (here 500,000 residents and 30 beds) beside it. Refused with exit 2, nothing written; King
    County's folder named by its path is the bundled region and passes."""
    region = tmp_path / "other"
    region.mkdir()
    bundled = ROOT / "abm/populations/regions/king_county"
    (region / "tracts.csv").write_text((bundled / "tracts.csv").read_text())
    figures = (bundled / "region.yaml").read_text()
    assert "population: 2252782\n" in figures and "hospital_beds_per_100k: 55.0" in figures
    figures = figures.replace("population: 2252782\n", "population: 500000\n").replace(
        "name: King County, WA", "name: Other"
    )
    (region / "region.yaml").write_text(figures.replace("hospital_beds_per_100k: 55.0", "hospital_beds_per_100k: 30"))
    ref = tmp_path / "ref.yaml"
    ref.write_text(
        f"extends: {ROOT / 'scenarios/reference/ni.yaml'}\nname: ref\n"
        "population: {agents: 2000}\nsimulation: {days: 3, replicates: 1}\n"
    )
    out = tmp_path / "out"
    for command in (["validate"], ["run", "--out", str(out)]):
        result = runner.invoke(app, [command[0], str(ref), "--set", f"population.region={region}", *command[1:]])
        assert result.exit_code == 2, result.output
        assert f"ref.yaml (with --set population.region={region}): population.region: '{region}' is not allowed " in (
            text(result)
        )
        assert "with population.kind: reference; the reference population is King County's" in text(result)
        assert "as Other (500,000 residents, 30 hospital beds per 100,000)" in text(result)
    assert not out.exists()
    for given in ([], ["--set", f"population.region={bundled}"]):
        result = runner.invoke(app, ["validate", str(ref), *given])
        assert result.exit_code == 0, result.output


def test_relative_paths_of_an_extended_file_are_read_beside_that_file(tmp_path, monkeypatch):
    """A base scenario in its own folder names its region folder and its observed series
    relative to itself; a scenario in another folder that extends it reads them there (the
    region used to be looked for beside the extending file: refused, or another folder of that
    name used)."""
    import shutil

    study, runs = tmp_path / "study", tmp_path / "study" / "variants"
    runs.mkdir(parents=True)
    shutil.copytree(ROOT / "abm/populations/regions/king_county", study / "county")
    shutil.copy(ROOT / "abm/calibration/data/king_county_2020.csv", study / "obs.csv")
    (study / "base.yaml").write_text(
        f"extends: {BASE}\nname: base\npopulation: {{region: county, agents: 2000}}\n"
        "calibration: {data: obs.csv, parameters: {disease.transmission_rate: {low: 1, high: 8}}}\n"
    )
    (runs / "late.yaml").write_text("extends: ../base.yaml\nseeding: {day: 5}\n")
    monkeypatch.chdir(tmp_path)
    sc = load_scenario(runs / "late.yaml")
    assert sc.population.region == str(study / "county")
    assert sc.calibration is not None and sc.calibration.data == str(study / "obs.csv")
    result = runner.invoke(app, ["validate", str(runs / "late.yaml")])
    assert result.exit_code == 0, result.output


def test_a_relative_region_given_with_set_is_kept_in_full_in_the_resolved_scenario(tmp_path, monkeypatch):
    """--set population.region=county reads the folder from the working folder; the resolved
    scenario (which README says re-creates the run) kept 'county', which a later run of it looked
    for beside the resolved file, refused or another folder of that name used."""
    import shutil

    from abm.runs import resolve

    shutil.copytree(ROOT / "abm/populations/regions/king_county", tmp_path / "county")
    monkeypatch.chdir(tmp_path)
    sc = resolve(BASE, {}, ["population.region=county"])
    assert sc.population.region == str(tmp_path / "county")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "scenario.resolved.yaml").write_text(sc.resolved_yaml())
    assert load_scenario(tmp_path / "run" / "scenario.resolved.yaml") == sc
    assert resolve(BASE, {}, ["population.region=king_county"]).population.region == "king_county"


def test_a_relative_boundary_file_is_read_beside_the_scenario_and_kept_in_full(tmp_path, monkeypatch):
    """outputs.boundaries named relative to its scenario file was looked for in the working
    folder (refused from any other folder, unlike the other data files README says are read
    beside the file), and the resolved scenario kept it relative, so `abm run` on a run's
    scenario.resolved.yaml failed from any other folder."""
    from abm.populations.region import load_region
    from abm.runs import resolve

    study, elsewhere = tmp_path / "study", tmp_path / "elsewhere"
    study.mkdir()
    elsewhere.mkdir()
    tract = next(load_region("king_county").tracts.itertuples(index=False))
    box = {"type": "Polygon", "coordinates": [[[tract.lon, tract.lat], [tract.lon + 0.01, tract.lat]]]}
    box["coordinates"][0] += [[tract.lon + 0.01, tract.lat + 0.01], [tract.lon, tract.lat]]
    feature = {"type": "Feature", "properties": {"GEOID": str(tract.geoid)}, "geometry": box}
    (study / "tracts.geojson").write_text(json.dumps({"type": "FeatureCollection", "features": [feature]}))
    (study / "s.yaml").write_text(f"extends: {BASE}\nname: s\noutputs: {{boundaries: tracts.geojson}}\n")
    monkeypatch.chdir(elsewhere)
    sc = resolve(study / "s.yaml", {}, [])
    assert sc.outputs.boundaries == str(study / "tracts.geojson")
    (elsewhere / "scenario.resolved.yaml").write_text(sc.resolved_yaml())
    assert load_scenario(elsewhere / "scenario.resolved.yaml") == sc
    monkeypatch.chdir(study)  # given with --set: read from the working folder, kept in full
    assert resolve(BASE, {}, ["outputs.boundaries=tracts.geojson"]).outputs.boundaries == str(study / "tracts.geojson")


def test_dates_given_on_the_command_line_are_checked(tmp_path, small):
    result = runner.invoke(app, ["run", str(small), "--set", "description=2020-13-01", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "--set: description: '2020-13-01' is not a valid value ('2020-13-01' is not a calendar date" in text(result)
    result = runner.invoke(
        app, ["sweep", str(small), "--sweep", "calibration.fit_window=[2020-02-30,2020-03-01]", "--out", str(tmp_path)]
    )
    assert result.exit_code == 2 and "'2020-02-30' is not a calendar date (day is out of range" in text(result)
    assert not (tmp_path / "o").exists()


def test_settings_and_devices_are_checked_by_validate(small):
    result = runner.invoke(app, ["validate", str(small), "--set", "contacts.occupation.degree.SCHOL=5"])
    assert result.exit_code == 2 and "small.yaml (with --set contacts.occupation.degree.SCHOL=5): " in text(result)
    assert "contacts.occupation.degree: ['SCHOL'] not allowed" in text(result)
    result = runner.invoke(app, ["validate", str(small), "--set", "simulation.device=cuda:3"])
    import torch

    if torch.cuda.device_count() <= 3:
        assert result.exit_code == 2 and "simulation.device: 'cuda:3' is not allowed here" in text(result)


def test_a_section_written_as_true_or_left_empty(tmp_path, small):
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"extends: {small}\ninterventions: {{vaccination: true}}\n")
    result = runner.invoke(app, ["validate", str(bad)])
    assert result.exit_code == 2
    assert "interventions.vaccination: true is not allowed: a section of settings is expected here" in text(result)
    empty = tmp_path / "empty.yaml"
    empty.write_text(f"extends: {small}\ninterventions:\n  vaccination:\n")
    result = runner.invoke(app, ["run", str(empty), "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert "note: interventions.vaccination has no value, so vaccination is off" in text(result)
    assert "first_doses" not in pd.read_csv(tmp_path / "o" / "timeseries.csv").columns


def test_one_kind_of_output_is_not_written_over_another(tmp_path, small, small_run_folder):
    runs = tmp_path / "runs"
    for name in ("a", "b", "c"):  # `abm run small.yaml --out runs/NAME`, written once
        copy_output(small_run_folder, runs / name)
    before = sorted(p.name for p in (runs / "c").iterdir())
    result = runner.invoke(app, ["compare", str(runs / "a"), str(runs / "b"), "--out", str(runs / "c")])
    assert result.exit_code == 2 and "holds a run, which a comparison would replace" in text(result)
    assert sorted(p.name for p in (runs / "c").iterdir()) == before
    assert runner.invoke(app, ["compare", str(runs / "a"), str(runs / "b"), "--out", str(runs / "cmp")]).exit_code == 0
    comparison = {p.name: p.read_bytes() for p in (runs / "cmp").iterdir() if p.is_file()}
    assert {MARK, "comparison.csv", "comparison.md", "report.html"} <= comparison.keys()
    assert "kind: comparison" in comparison[MARK].decode()
    result = runner.invoke(app, ["run", str(small), "--out", str(runs / "cmp")])
    assert result.exit_code == 2 and "holds a comparison, which a run would replace" in text(result)
    assert {p.name: p.read_bytes() for p in (runs / "cmp").iterdir() if p.is_file()} == comparison
    # A run over a run: the new one replaces it (another seed here), with the same entries.
    assert json.loads((runs / "c" / "summary.json").read_text())["seed"] != 8
    assert runner.invoke(app, ["run", str(small), "--out", str(runs / "c"), "--seed", "8"]).exit_code == 0
    assert sorted(p.name for p in (runs / "c").iterdir()) == before
    assert json.loads((runs / "c" / "summary.json").read_text())["seed"] == 8
    assert (runs / "c" / MARK).read_text().endswith("kind: run\n")


def test_population_draws_are_refused_by_the_gradient_method(tmp_path):
    result = runner.invoke(
        app,
        ["calibrate", str(CALIBRATION), "--method", "gradient", "--set", "calibration.population_draws=2",
         "--out", str(tmp_path / "g")],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "calibration.population_draws: 2 is not used by --method gradient" in text(result)
    assert not (tmp_path / "g").exists()


@pytest.mark.parametrize("method", ["gradient", "optuna"])
def test_calibrate_checks_the_device_before_anything_runs(tmp_path, method):
    """Both methods run on this machine (Optuna's trials and re-ranked trials in this process or
    its worker processes), so a CUDA device the machine lacks is refused up front, naming the file
    and its --set."""
    import torch

    cuda = f"cuda:{torch.cuda.device_count()}"  # one past the last device, on any machine
    out = tmp_path / "c"
    result = runner.invoke(
        app,
        [
            "calibrate",
            str(CALIBRATION),
            "--method",
            method,
            "--trials",
            "1",
            "--set",
            f"simulation.device={cuda}",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 2, result.output
    assert (
        f"calibrate_2020.yaml (with --set simulation.device={cuda}): simulation.device: '{cuda}' is not allowed here"
        in text(result)
    )
    assert not out.exists()


def test_a_run_that_does_not_fit_the_device_gets_one_message(tmp_path, small, monkeypatch):
    """Out of device memory (here raised where the day loop would raise it) is one message
    naming the size and what to change, exit code 2, and no output folder."""
    import torch

    from abm.engine import Simulation

    def out_of_memory(self, progress=None):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(Simulation, "run", out_of_memory)
    out = tmp_path / "o"
    result = runner.invoke(app, ["run", str(small), "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert (
        f"{small}: population.agents: 2000 agents x 1 replicate do not fit in the memory of cpu; use fewer agents "
        "or replicates"
    ) in text(result)
    assert "simulation.device: cpu" not in text(result), "the run is on the CPU already"
    assert "Traceback" not in result.output
    assert not out.exists()


def test_a_key_of_several_forms_is_named_by_its_key_path_and_brackets_survive(small):
    """contacts.same_in_every_replicate is true/false or a list of layers, vaccination.priority a
    name or a list of age groups: an error names the user's key path (not pydantic's names of the
    forms), with what each form allows on one line, or only the item at fault in a list; a --set
    value in brackets is printed as given (rich would read `[schools]` as markup)."""

    def error(setting: str) -> str:
        result = runner.invoke(app, ["validate", str(small), "--set", setting])
        assert result.exit_code == 2, result.output
        return text(result)

    out = error("contacts.same_in_every_replicate=[schools]")
    assert "(with --set contacts.same_in_every_replicate=[schools])" in out
    assert out.endswith(
        "contacts.same_in_every_replicate[0]: 'schools' is not allowed: must be 'occupation' or 'community'"
    )
    assert "boolean" not in out and ".bool" not in out and "list[literal" not in out
    assert error("contacts.same_in_every_replicate=1").endswith(
        "contacts.same_in_every_replicate: 1 is not allowed: write true or false, or a list"
    )
    assert error("interventions.vaccination.priority=bogus").endswith(
        "interventions.vaccination.priority: 'bogus' is not allowed: must be 'oldest_first' or "
        "'youngest_first'; or must be a list"
    )
    assert error("interventions.vaccination.priority=[1, [2], 3]").endswith(
        "interventions.vaccination.priority[1]: [2] is not allowed: must be a whole number; or must be text"
    )
    assert error("interventions.vaccination.priority=[1, x, 3]").endswith(  # text, but no entry's name
        "long_term_care_residents or an occupation setting (upper case, a key of contacts.occupation.degree); not 'x'"
    )
    result = runner.invoke(app, ["validate", str(small), "--set", "contacts.same_in_every_replicate=[occupation]"])
    assert result.exit_code == 0, result.output


def test_errors_at_one_key_of_a_mapping_are_each_named(small):
    """A bad key and its bad value, and keys that YAML reads as numbers, are each named."""
    result = runner.invoke(app, ["validate", str(small), "--set", "seeding.infections={bogus: -1}"])
    assert result.exit_code == 2
    out = text(result)
    assert "seeding.infections.bogus: 'bogus' is not allowed: must be 'asymptomatic'," in out
    assert "seeding.infections.bogus: -1 is not allowed: must be at least 0" in out
    result = runner.invoke(app, ["validate", str(small), "--set", "seeding.infections={1: 2, 2: 3}"])
    assert result.exit_code == 2
    assert "seeding.infections.1: 1 is not allowed" in text(result)
    assert "seeding.infections.2: 2 is not allowed" in text(result)


def test_an_unknown_key_in_a_list_item_or_a_named_entry_gets_the_keys_allowed_there(small):
    """The keys allowed beside an unknown key are found through a list of sections (by its item)
    and a mapping of sections (by its entry's name), not only through sections."""
    result = runner.invoke(
        app, ["validate", str(small), "--set", "interventions.contact_multipliers.changes=[{from_day: 3, bogus: 1}]"]
    )
    assert result.exit_code == 2
    assert (
        "interventions.contact_multipliers.changes[0].bogus: unknown key; allowed keys: from_day, until_day, "
        "household, occupation, community"
    ) in text(result)
    bounds = "calibration.parameters={disease.transmission_rate: {low: 1, high: 2, bogus: 3}}"
    result = runner.invoke(app, ["validate", str(small), "--set", bounds])
    assert result.exit_code == 2
    assert (
        "calibration.parameters.disease.transmission_rate.bogus: unknown key; allowed keys: low, high, integer"
    ) in text(result)


def test_a_gradient_calibration_that_does_not_fit_the_device_gets_one_message(tmp_path, monkeypatch):
    """The gradient method builds its differentiable runs itself: out of memory there (raised
    here where the day loop would raise it) is one message, exit code 2, and no folder."""
    import torch

    from abm.engine import Simulation

    def out_of_memory(self, progress=None):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(Simulation, "run", out_of_memory)
    out = tmp_path / "g"
    result = runner.invoke(
        app, ["calibrate", str(CALIBRATION), "--method", "gradient", "--trials", "1", "--out", str(out)]
    )
    assert result.exit_code == 2, result.output
    assert (
        "calibrate_2020: population.agents: 100000 agents x 2 replicates of a differentiable run do not fit in the "
        "memory of cpu"
    ) in text(result)
    assert "Traceback" not in result.output
    assert not out.exists()


def test_a_section_written_as_a_list_a_number_or_nothing_is_named_with_its_keys(tmp_path, small):
    """pydantic's "a valid dictionary or instance of SimulationConfig" becomes what to write; an
    option that goes into such a section (--days) does not take the blame for the file."""
    keys = "(allowed keys: days, replicates, seed, device, threads, start_date)"
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"extends: {small}\nsimulation:\n  - days: 10\ninterventions: {{testing: 5}}\n")
    result = runner.invoke(app, ["validate", str(bad)])
    assert result.exit_code == 2
    assert (
        f"bad.yaml: invalid scenario: simulation: [{{days: 10}}] is not allowed: a section of settings is expected "
        f"here, written as key: value lines under it {keys}"
    ) in text(result)
    assert "interventions.testing: 5 is not allowed: a section of settings is expected here" in text(result)
    assert "instance of" not in text(result)
    result = runner.invoke(app, ["run", str(bad), "--days", "5", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and text(result).startswith(f"error: {bad}: invalid scenario: simulation: [")
    assert "--days" not in text(result) and not (tmp_path / "o").exists()
    bad.write_text(f"extends: {small}\nsimulation:\n")
    result = runner.invoke(app, ["validate", str(bad)])
    assert result.exit_code == 2 and (
        f"bad.yaml: invalid scenario: simulation: has no value; a section of settings is expected here, written as "
        f"key: value lines under it {keys}, or leave the key out for the defaults"
    ) in text(result)


@pytest.mark.parametrize(
    ("setting", "said"),
    [
        ("simulation.days=", "simulation.days: has no value; must be a whole number"),
        ("simulation.days.x=3", "simulation.days: {x: 3} is not allowed: must be a whole number"),
        ("simulation.days=true", "simulation.days: true is not allowed: must be a whole number"),
        (
            "population.agents=1e4",
            "population.agents: '1e4' is not allowed: must be a whole number; YAML reads 1e4 as text: write 10000",
        ),
        ("population.agents=abc", "population.agents: 'abc' is not allowed: must be a whole number"),
        (  # no number hint where no number is expected
            "calibration.start_date='2020'",
            "calibration.start_date: '2020' is not allowed: must be a date, written YYYY-MM-DD (e.g. 2020-02-01)",
        ),
    ],
)
def test_values_are_shown_as_yaml_writes_them(small, setting, said):
    """Not as Python's repr (None, {'x': 3}, True); a whole number that YAML read as text says how
    to write it."""
    result = runner.invoke(app, ["validate", str(small), "--set", setting])
    assert result.exit_code == 2
    assert text(result).endswith(f"invalid scenario: {said}"), text(result)


def test_a_date_in_another_format_and_a_mapping_for_a_list_name_what_to_write(tmp_path, small):
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"extends: {small}\ncalibration: {{start_date: 02/01/2020}}\ndisease: {{dwell_times: {{a: 1}}}}\n")
    result = runner.invoke(app, ["validate", str(bad)])
    assert result.exit_code == 2
    assert (
        "calibration.start_date: '02/01/2020' is not allowed: must be a date, written YYYY-MM-DD (e.g. 2020-02-01)"
    ) in text(result)
    assert "disease.dwell_times: {a: 1} is not allowed: must be a list" in text(result)


@pytest.mark.parametrize("index", ["x", "-1", "first"])
def test_a_list_index_that_is_no_whole_number_is_named_as_such(small, index):
    """It was taken as a key of the section ("disease.dwell_times[x]: unknown key; allowed keys:
    transmission_rate, ..."), which hid that the index was at fault."""
    result = runner.invoke(app, ["validate", str(small), "--set", f"disease.dwell_times[{index}].shape=2"])
    assert result.exit_code == 2
    assert text(result) == (
        f"error: --set: disease.dwell_times[{index}].shape: 'dwell_times[{index}]' is not allowed; a list item is "
        "given by its index, a whole number from 0, in brackets: e.g. disease.dwell_times[0].shape"
    )


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("simulation.device=gpu", "simulation.device: 'gpu' is not allowed: write cpu, cuda or cuda:N"),
        ("name=my run", "name: 'my run' is not allowed: write a folder name: letters, digits, _, - and . (not first)"),
        (
            "interventions.testing.tests=[{name: RT-PCR, sensitivity: 0.9, result_delay_days: [1], "
            "result_delay_probs: [1]}]",
            "interventions.testing.tests[0].name: 'RT-PCR' is not allowed: write lower-case letters, digits and _",
        ),
    ],
)
def test_a_text_that_does_not_match_its_pattern_is_told_what_to_write(small, option, message):
    """Not "String should match pattern '^(cpu|cuda(:\\d+)?)$'"."""
    result = runner.invoke(app, ["validate", str(small), "--set", option])
    assert result.exit_code == 2 and message in text(result) and "pattern" not in text(result), text(result)


def test_a_file_name_that_cannot_name_the_run_says_where_the_name_came_from(tmp_path, small):
    spaced = tmp_path / "my study.yaml"
    spaced.write_text(f"extends: {small}\n")
    result = runner.invoke(app, ["run", str(spaced), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and not (tmp_path / "o").exists()
    assert "name: 'my study' is not allowed: write a folder name" in text(result)
    assert "(a file without a name: line is named after its file name)" in text(result)


def test_a_date_where_a_window_is_expected_is_shown_as_written(small):
    """Not "calibration.fit_window: datetime.date(2020, 2, 28) is not allowed: Input should be a
    valid tuple"."""
    result = runner.invoke(app, ["validate", str(small), "--set", "calibration.fit_window=2020-02-28"])
    assert result.exit_code == 2
    assert "calibration.fit_window: 2020-02-28 is not allowed: must be a list" in text(result)
    result = runner.invoke(app, ["validate", str(small), "--set", "calibration.fit_window=[2020-02-28, 3, x]"])
    assert result.exit_code == 2 and "calibration.fit_window: has 3 items; give at most 2" in text(result)


def test_a_list_of_the_wrong_length_is_named_with_its_length(small):
    result = runner.invoke(app, ["validate", str(small), "--set", "disease.susceptibility_by_age=[1, 1, 1]"])
    assert result.exit_code == 2
    assert text(result).endswith("disease.susceptibility_by_age: has 3 items; give at least 9")


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("simulation.days=abc", "simulation.days: 'abc' is not allowed: must be a whole number"),
        (
            "simulation.days=2.5",
            "simulation.days: 2.5 is not allowed: must be a whole number, without a fractional part",
        ),
        ("contacts.occupation.rewire_probability=1.5", "rewire_probability: 1.5 is not allowed: must be at most 1"),
        ("disease.transmission_rate=x", "disease.transmission_rate: 'x' is not allowed: must be a number"),
        (
            "calibration.start_date=soon",
            "calibration.start_date: 'soon' is not allowed: must be a date, written YYYY-MM-DD",
        ),
        ("calibration.targets=[]", "calibration.targets: has 0 items; give at least 1"),
        ("calibration.parameters={}", "calibration.parameters: has 0 entries; give at least 1"),
        (
            "calibration.targets=[deaths, x]",
            "calibration.targets[1]: 'x' is not allowed: must be 'hospital_admissions', ",
        ),
    ],
)
def test_schema_errors_are_said_in_plain_words(small, setting, message):
    """What the schema refuses is said in the words of a scenario's author ("must be at least 1",
    "has 0 items; give at least 1"), not in pydantic's ("Input should be greater than or equal
    to 1", "List should have at least 1 item after validation, not 0"); a list is counted, not
    printed back whole."""
    result = CliRunner().invoke(app, ["validate", str(small), "--set", setting])
    assert result.exit_code == 2, result.output
    out = text(result)
    assert out.startswith(f"error: {small} (with --set {setting}): invalid scenario: ") and message in out, out
    assert "Input should" not in out and "after validation" not in out


@pytest.mark.parametrize(
    ("setting", "key"),
    [
        ("seeding.infections.asymptomatic=true", "seeding.infections.asymptomatic"),
        ("contacts.occupation.degree.SCHOOL=true", "contacts.occupation.degree.SCHOOL"),
        ("disease.susceptibility_by_age=[true, 1, 1, 1, 1, 1, 1, 1, 1]", "disease.susceptibility_by_age[0]"),
        ("disease.infectiousness_by_stage.asymptomatic=true", "disease.infectiousness_by_stage.asymptomatic"),
        ("contacts.community.mean_contacts=[2, false, 3]", "contacts.community.mean_contacts[1]"),
        (
            "calibration={parameters: {disease.transmission_rate: {low: true, high: 2}}}",
            "calibration.parameters.disease.transmission_rate.low",
        ),
    ],
)
def test_true_or_false_for_a_number_in_a_list_or_mapping_is_refused(small, setting, key):
    """YAML's true/false in a list or mapping of numbers is refused as it is for a number key
    (pydantic would read it as 1 or 0: `asymptomatic: true` seeded one infection)."""
    result = runner.invoke(app, ["validate", str(small), "--set", setting])
    assert result.exit_code == 2, result.output
    value = "false" if "false" in setting else "true"
    kind = "a whole number" if key.startswith("seeding.infections") else "a number"  # counts are whole
    assert f"{key}: {value} is not allowed: must be {kind}" in text(result)


@pytest.mark.parametrize("written", ["NaN", "nan", "'-inf'", "Infinity", "1e999"])
@pytest.mark.parametrize("key", ["disease.transmission_rate", "contacts.occupation.rewire_probability"])
def test_nan_or_infinity_written_as_text_is_named_as_not_finite(small, key, written):
    """NaN or infinity in a form YAML keeps as text is refused as YAML's .nan and .inf are ("a finite
    number is expected here"), not with the key's bound ("must be at least 0" said of NaN misleads)."""
    result = runner.invoke(app, ["validate", str(small), "--set", f"{key}={written}"])
    assert result.exit_code == 2, result.output
    value = written.strip("'")
    shown = f"'{value}'|{float(value)}"  # as written, or as the number pydantic read it as
    assert re.search(rf"{key}: ({shown}) is not allowed: a finite number is expected here", text(result))
    assert "must be at" not in text(result)


@pytest.mark.parametrize(
    ("written", "count"), [("[1, 2]", "has 2 items"), ("[1]", "has 1 item"), ("[]", "has 0 items")]
)
def test_a_fixed_length_list_given_too_few_items_is_named_with_its_length(small, written, count):
    """contacts.community.mean_contacts takes 3 numbers: a shorter list is named once with how many
    it has and needs, not as a 'required key' missing at an index the user never wrote."""
    result = runner.invoke(app, ["validate", str(small), "--set", f"contacts.community.mean_contacts={written}"])
    assert result.exit_code == 2, result.output
    assert text(result).endswith(f"invalid scenario: contacts.community.mean_contacts: {count}; give 3")
    assert "required key" not in text(result)


@pytest.mark.parametrize("written", ["0", "20200201"])
def test_a_number_where_a_date_is_expected_is_refused(written):
    """A number for a date (calibration.start_date: 20200201) is refused; pydantic read it as
    seconds since 1970 (1970-08-23), and validate said ok or blamed the simulated days."""
    setting = f"calibration.start_date={written}"
    result = runner.invoke(app, ["validate", str(CALIBRATION), "--set", setting])
    assert result.exit_code == 2, result.output
    assert f"calibration.start_date: {written} is not allowed: must be a date, written YYYY-MM-DD" in text(result)
    assert "1970" not in text(result)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (
            "disease.infectiousness_by_stage.mild_symptoms=-1",
            "disease.infectiousness_by_stage: infectiousness must be >= 0; mild_symptoms is -1",
        ),
        (
            "disease.susceptibility_by_age=[1, -0.5, 1, 1, 1, 1, 1, 1, 1]",
            "susceptibility must be >= 0; [1] (age group 10-19) is -0.5",
        ),
    ],
)
def test_a_negative_entry_of_a_table_of_rates_is_named_with_its_value(small, setting, message):
    """A negative infectiousness or susceptibility names the stage or age group and its value (the
    message named the key alone, so a table of several entries had to be searched by hand)."""
    result = runner.invoke(app, ["validate", str(small), "--set", setting])
    assert result.exit_code == 2, result.output
    assert message in text(result)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("disease.branching[0][0]=[0, 1]", "branching[0][0] has 2 entries, not 11"),
        ("disease.branching[3]=[[1]]", "branching[3] has 1 entry, not 11"),
    ],
)
def test_a_branching_table_of_the_wrong_shape_names_the_row(small, setting, message):
    """A ragged branching table names the row of the wrong length; torch's 'expected sequence of
    length 2 at dim 2 (got 11)' reached the user."""
    result = runner.invoke(app, ["validate", str(small), "--set", setting])
    assert result.exit_code == 2, result.output
    assert f"disease.branching: branching must be a 9 x 11 x 11 table; {message}" in text(result)


def test_a_file_of_comments_only_is_named_as_such(tmp_path):
    """A scenario file that holds only comments is refused as an empty one is, not as 'got NoneType'."""
    path = tmp_path / "comments.yaml"
    path.write_text("# a scenario to be written\n\n# later\n")
    for command in ("validate", "run"):
        result = runner.invoke(app, [command, str(path)])
        assert result.exit_code == 2, result.output
        assert text(result) == (
            f"error: {path}: the file holds only comments; a scenario needs at least a name or an `extends:` line"
        )


@pytest.mark.parametrize(
    "setting",
    [
        "disease.infectiousness_by_stage.asymptomatic=1.0e+39",  # overflowed the engine's 32-bit table (exit 1)
        "disease.infectiousness_profile_mean=1.0e+300",  # overflowed building the profile (exit 1)
        "contacts.community.weight=1.0e+300",
    ],
)
def test_a_number_beyond_32_bit_floats_is_refused_before_the_run(small, setting):
    """A number beyond the largest 32-bit float passed validate and ended `abm run` with a
    traceback; it is refused with its key path, by validate and by run, and nothing is written."""
    key, out = setting.split("=")[0], small.parent / "out"
    for args in (["validate", str(small)], ["run", str(small), "--out", str(out)]):
        result = runner.invoke(app, [*args, "--set", setting])
        assert result.exit_code == 2, result.output
        assert f"{key}: 1e+" in text(result) or f"{key}[0]: 1e+" in text(result)
        assert "is not allowed: too large; numbers must lie within" in text(result)
    assert not out.exists()


@pytest.mark.parametrize("value", ["1.0e+19", "1.0e+30", "1001"])  # YAML 1.1 reads 1.0e19 as text
def test_community_contacts_beyond_a_thousand_a_day_are_refused_before_the_run(small, value):
    """A mean of 1e19 to 3.4e38 community contacts a day passed validate (below the 32-bit
    limit) and ended `abm run` in numpy's 'lam value too large' traceback; contact surveys give
    means of 10-20 a day, so more than 1,000 is refused with its key path, nothing written."""
    out = small.parent / "out"
    setting = f"contacts.community.mean_contacts=[{value}, 4, 3]"
    for args in (["validate", str(small)], ["run", str(small), "--out", str(out)]):
        result = runner.invoke(app, [*args, "--set", setting])
        assert result.exit_code == 2, result.output
        assert "contacts.community.mean_contacts[0]:" in text(result) and "must be at most 1000" in text(result)
    assert not out.exists()


@pytest.mark.parametrize(
    ("key", "meant"),
    [
        ("dayz", "days"),  # one letter off
        ("replicatez", "replicates"),
        ("tracing_digital", "digital_tracing"),  # the same words in another order
        ("dose_per_day", None),  # close to dose2_gap_days by letters, but not what was meant: no guess
        ("bogus", None),
        ("muu", "mu"),
    ],
)
def test_an_unknown_key_is_given_the_key_it_most_likely_meant_or_no_guess(key, meant):
    from abm.validation_errors import likely_meant

    allowed = ["days", "replicates", "digital_tracing", "daily_doses", "dose2_gap_days", "mu", "low"]
    assert likely_meant(key, allowed) == meant


def test_validate_suggests_the_key_a_typo_meant(tmp_path):
    """`abm validate` names the unknown key, suggests the close one, and lists the allowed keys."""
    path = tmp_path / "typo.yaml"
    path.write_text(f"extends: {BASE}\ncontacts:\n  comunity:\n    weight: 0.2\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["validate", str(path)])
    text = " ".join(result.output.split())
    assert result.exit_code == 2, text
    assert (
        "contacts.comunity: unknown key; did you mean 'community'? allowed keys: household, occupation, community"
        in text
    )


TOP_KEYS = "name, description, population, simulation, disease, contacts, seeding, interventions, outputs, calibration"


@pytest.mark.parametrize(
    ("written", "line"),
    [
        ("days: 30\n", f"days: unknown key; did you mean 'simulation.days'? allowed keys: {TOP_KEYS}"),
        (
            "vaccination:\n  start_day: 30\n",
            f"vaccination: unknown key; did you mean 'interventions.vaccination'? allowed keys: {TOP_KEYS}",
        ),
        (  # start_day one indent short, under a vaccination: left empty: the vaccination's
            "interventions:\n  vaccination:\n  start_day: 30\n",
            "interventions.start_day: unknown key; did you mean 'interventions.vaccination.start_day'? allowed keys: "
            "contact_multipliers, digital_tracing, manual_tracing, quarantine, testing, vaccination",
        ),
        (  # no intervention written: every one that has the key
            "interventions:\n  start_day: 30\n",
            "interventions.start_day: unknown key; it is a key of interventions.testing, interventions.vaccination: "
            "indent it under one of them; allowed keys: contact_multipliers, digital_tracing, manual_tracing, "
            "quarantine, testing, vaccination",
        ),
        ("colour: red\n", f"colour: unknown key; allowed keys: {TOP_KEYS}"),  # a key of no section: no guess
    ],
)
def test_a_key_written_one_section_too_high_is_given_its_section(tmp_path, written, line):
    """A key of a section written without it (`days:` at the top, `vaccination:` outside
    `interventions:`, `start_day:` indented one step short) got only "unknown key" and the keys of
    where it was written, which name none that it could mean; now the key path it most likely
    meant. Likewise from --set."""
    path = tmp_path / "high.yaml"
    path.write_text(f"extends: {BASE}\n{written}", encoding="utf-8")
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 2
    assert " ".join(result.output.split()) == f"error: {path}: invalid scenario: {line}"
    if written.startswith("days"):
        result = CliRunner().invoke(app, ["validate", str(BASE), "--set", "days=30"])
        assert " ".join(result.output.split()) == f"error: {BASE} (with --set days=30): invalid scenario: {line}"


@pytest.mark.parametrize("bound", ["low", "high"])
def test_a_nan_calibration_bound_is_named_as_no_number(bound):
    """A bound written as nan is refused as no finite number, at its own key, not as out of order
    with the other bound (a NaN compares as neither below nor above it)."""
    key = f"calibration.parameters.disease.transmission_rate.{bound}"
    result = runner.invoke(app, ["validate", str(CALIBRATION), "--set", f"{key}=nan"])
    assert result.exit_code == 2, text(result)
    assert f"{key}: nan is not allowed: a finite number is expected here" in text(result), text(result)
    assert "must be below" not in text(result)


def test_a_closure_of_no_settings_is_refused(tmp_path, small):
    """`settings: []` closed nothing and the run went on as if the closure were there."""
    setting = "interventions.contact_multipliers={closures: [{from_day: 1, settings: []}]}"
    result = runner.invoke(app, ["run", str(small), "--out", str(tmp_path / "out"), "--set", setting])
    assert result.exit_code == 2, result.output
    assert text(result).endswith(
        "invalid scenario: interventions.contact_multipliers.closures[0].settings: has 0 items; give at least 1"
    )
    assert not (tmp_path / "out").exists()


def test_two_test_types_of_one_name_are_refused(tmp_path, small):
    """A test type's name names its cost item: two of one name were booked as one item, test_x,
    at two prices (two rows a day in costs.csv, summed in any total by item)."""
    tests = (
        "[{name: x, sensitivity: 0.8, result_delay_days: [0], result_delay_probs: [1], cost: 2}, "
        "{name: x, sensitivity: 0.99, result_delay_days: [1], result_delay_probs: [1], cost: 7}]"
    )
    setting = f"interventions.testing={{tests: {tests}}}"
    result = runner.invoke(app, ["run", str(small), "--out", str(tmp_path / "out"), "--set", setting])
    assert result.exit_code == 2, result.output
    assert text(result).endswith(
        "invalid scenario: interventions.testing: tests[0] and tests[1] are both named 'x'; each test type needs a "
        "name of its own (it names the cost item test_<name>)"
    )
    assert not (tmp_path / "out").exists()


LEARNING = ROOT / "scenarios/learning/gmm_selection.yaml"
VACCINATION = ROOT / "scenarios/king_county/vacc.yaml"


@pytest.mark.parametrize(
    ("scenario", "setting", "message"),
    [
        (
            BASE,
            "population.kind=true",
            "population.kind: true is not allowed: must be 'region' or 'reference'",
        ),
        (
            VACCINATION,
            "interventions.vaccination.priority=false",
            "interventions.vaccination.priority: false is not allowed: must be 'oldest_first' or 'youngest_first'; "
            "or must be a list",
        ),
        (BASE, "outputs.map_days=true", "outputs.map_days: true is not allowed: must be a list"),
        (
            CALIBRATION,
            "calibration.start_date=true",
            "calibration.start_date: true is not allowed: must be a date, written YYYY-MM-DD (e.g. 2020-02-01)",
        ),
        (
            LEARNING,
            "runner: true",
            "runner: true is not allowed: must be 'inprocess', 'flower-sim' or 'flower'",
        ),
        (
            LEARNING,
            "policy: true",
            "protocols[0].params.policy: true is not allowed: must be 'random', 'oracle', 'greedy', 'eps_greedy', "
            "'sim_sampling', 'top_k', 'consensus_affinity_propagation' or 'consensus_mean_shift'",
        ),
    ],
)
def test_true_or_false_for_a_choice_is_told_the_choices(tmp_path, scenario, setting, message):
    """true/false for a key of named choices (a learning scenario's runner, a p2p policy, an
    epidemic scenario's population.kind) is told the choices, as a wrong name is; a list or a
    date is told so (all of them were told "must be a number or text")."""
    if scenario == LEARNING:  # --set is for epidemic scenarios: the file itself is changed
        path = tmp_path / "learning.yaml"
        written = LEARNING.read_text()
        path.write_text(
            written + "runner: true\n"
            if setting.startswith("runner")
            else written.replace("policy: random}", setting + "}")
        )
        result = runner.invoke(app, ["validate", str(path)])
    else:
        result = runner.invoke(app, ["validate", str(scenario), "--set", setting])
    assert result.exit_code == 2, result.output
    assert text(result).endswith(f"invalid scenario: {message}"), text(result)


def test_a_misspelt_required_key_is_named_once_with_the_key_it_meant(tmp_path, small):
    """A required key misspelt (region.yaml's population, a learning scenario's data) was named
    twice: as an unknown key with the key it likely meant, and as a required key missing. It is
    one message now, by validate and run; nothing written."""
    region = region_with(tmp_path, "population: 2252782", "populaton: 2252782")
    out = tmp_path / "out"
    for command in (["validate"], ["run", "--out", str(out)]):
        result = runner.invoke(app, [command[0], str(small), "--set", f"population.region={region}", *command[1:]])
        assert result.exit_code == 2, result.output
        assert text(result).endswith(
            f"{region / 'region.yaml'}: populaton: unknown key; did you mean 'population' (a required key, which is "
            "missing)? allowed keys: name, fips, population, age_bands, household_size_7up, school_enrollment, "
            "school_types, school_size_brackets, school_size_shares, pupils_per_staff, employment_rate, sectors, "
            "workplace_sizes, long_term_care, hospital_beds_per_100k, icu_beds_per_100k, bounds"
        ), text(result)
    assert not out.exists()
    path = tmp_path / "learning.yaml"
    path.write_text(LEARNING.read_text().replace("\ndata:", "\ndatas:"))
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    assert text(result) == (
        f"error: {path}: invalid scenario: datas: unknown key; did you mean 'data' (a required key, which is "
        "missing)? allowed keys: name, description, seed, data, global_test_fraction, split, models, training, "
        "rounds, local_epochs, evaluate_on, protocols, selection_toy, runner, flower_timeout"
    )


def test_a_code_written_as_a_number_is_told_to_quote_it(tmp_path, small):
    """`fips: 53033` is read by YAML as a number: the message says to write it in quotes; and
    `fips: 06037`, which YAML 1.1 reads as the octal 3103, is refused by the reader, naming both
    readings and the line. Validate and run, nothing written."""
    out = tmp_path / "out"
    for written, ending in (
        ("53033", "fips: 53033 is not allowed: must be text; write it in quotes: '53033'"),
        (
            "06037",
            "06037 has a leading 0, which YAML reads as the octal number 3103: write it without the 0 for the "
            "number 6037, or in quotes ('06037') for a code",
        ),
    ):
        (tmp_path / written).mkdir()
        region = region_with(tmp_path / written, 'fips: "53033"', f"fips: {written}")
        for command in (["validate"], ["run", "--out", str(out)]):
            result = runner.invoke(app, [command[0], str(small), "--set", f"population.region={region}", *command[1:]])
            assert result.exit_code == 2, result.output
            assert str(region / "region.yaml") in text(result), text(result)
            assert ending in text(result), text(result)
    assert not out.exists()


def test_a_number_with_a_leading_zero_is_refused_not_read_as_octal(tmp_path):
    """YAML 1.1 reads `days: 010` as 8: the scenario is refused with the line and both readings
    (it ran 8 days without a word); 0, 10, 0x1F and 1_000 read as before."""
    scenario = tmp_path / "octal.yaml"
    scenario.write_text(f"name: octal\nextends: {BASE}\nsimulation:\n  days: 010\n", encoding="utf-8")
    result = runner.invoke(app, ["validate", str(scenario)])
    assert result.exit_code == 2, result.output
    assert text(result) == (
        f"error: {scenario}: invalid YAML at line 4, column 9: 010 has a leading 0, which YAML reads as the octal "
        "number 8: write it without the 0 for the number 10, or in quotes ('010') for a code"
    )
    assert load_yaml("a: 0\nb: 10\nc: 0x1F\nd: 1_000\ne: -0\nf: '010'") == {
        "a": 0,
        "b": 10,
        "c": 31,
        "d": 1000,
        "e": 0,
        "f": "010",
    }


NEEDED_COLUMNS = (
    "a tract table needs the columns geoid, name, lat, lon, land_km2, one per age band of region.yaml (age_0_4, "
    "age_5_9, age_10_14, age_15_19, age_20_24, age_25_29, age_30_34, age_35_39, age_40_44, age_45_49, age_50_54, "
    "age_55_59, age_60_64, age_65_69, age_70_74, age_75_79, age_80_84, age_85_plus) and hh_1, hh_2, hh_3, hh_4, "
    "hh_5, hh_6, hh_7up (households by size)"
)


@pytest.mark.parametrize(
    ("renamed", "message"),
    [
        ({"hh_4": "hh4"}, "missing columns ['hh_4'] (did you mean 'hh_4' for the column 'hh4'?); "),
        (
            {"lat": "latitude", "age_5_9": "age_5_10"},
            "missing columns ['lat', 'age_5_9'] (did you mean 'age_5_9' for the column 'age_5_10'?); ",
        ),
        ({"land_km2": "area"}, "missing columns ['land_km2']; "),
    ],
)
def test_a_tract_table_missing_a_column_names_the_columns_it_needs(tmp_path, small, renamed, message):
    """tracts.csv without a column needed: the message lists the columns a tract table needs and,
    for a column close to a missing one, the one it likely meant (it said only "missing columns
    ['hh_4']"); validate and run, exit 2, nothing written."""
    region = region_with(tmp_path, "pupils_per_staff: 17", "pupils_per_staff: 17")
    tracts = pd.read_csv(region / "tracts.csv", dtype=str).rename(columns=renamed)
    tracts.to_csv(region / "tracts.csv", index=False)
    out = tmp_path / "out"
    for command in (["validate"], ["run", "--out", str(out)]):
        result = runner.invoke(app, [command[0], str(small), "--set", f"population.region={region}", *command[1:]])
        assert result.exit_code == 2, result.output
        assert text(result).endswith(f"{region / 'tracts.csv'}: {message}{NEEDED_COLUMNS}"), text(result)
    assert not out.exists()


def test_spaces_around_a_tract_column_name_are_ignored(tmp_path):
    """A header written with spaces after its commas ("geoid, name, lat") was refused as missing
    the columns: the names are read without the spaces (geoid still as text), and the region is
    the bundled one."""
    from abm.populations.region import load_region

    region = region_with(tmp_path, "pupils_per_staff: 17", "pupils_per_staff: 17")
    lines = (region / "tracts.csv").read_text().split("\n", 1)
    (region / "tracts.csv").write_text(" " + lines[0].replace(",", " , ") + " \n" + lines[1])
    bundled, spaced = load_region("king_county").tracts, load_region(region).tracts
    pd.testing.assert_frame_equal(spaced, bundled)
    assert spaced.geoid.iloc[0] == bundled.geoid.iloc[0] and isinstance(spaced.geoid.iloc[0], str)


@pytest.mark.parametrize("written", ["NaN", "nan", "NA", "null"])
def test_a_nan_in_a_tract_table_is_named_as_written(tmp_path, small, written):
    """The text NaN (or NA, null) in tracts.csv was named "an empty cell" (pandas reads it as a
    missing value): it is named as written; validate and run, exit 2, nothing written."""
    region = region_with(tmp_path, "pupils_per_staff: 17", "pupils_per_staff: 17")
    tracts = pd.read_csv(region / "tracts.csv", dtype=str)
    tracts.loc[3, "age_5_9"] = written
    tracts.to_csv(region / "tracts.csv", index=False)
    out = tmp_path / "out"
    for command in (["validate"], ["run", "--out", str(out)]):
        result = runner.invoke(app, [command[0], str(small), "--set", f"population.region={region}", *command[1:]])
        assert result.exit_code == 2, result.output
        assert text(result).endswith(
            f"tracts.csv: row 5 (tract {tracts.geoid[3]}), column age_5_9: {written!r} is not allowed; figures must "
            "be numbers, and counts and areas at least 0"
        ), text(result)
    assert not out.exists()


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        # The dose stock is a table of shelf_life_days + 1 columns: 1e9 days took 23 GB and the
        # run was killed for memory (validate said valid).
        (
            "interventions.vaccination.shelf_life_days=1000000000",
            "interventions.vaccination.shelf_life_days: 1000000000 is not allowed: must be at most 10000",
        ),
        # Counts beyond 64-bit integers (or near them, for the dose stock) ended the run in a
        # traceback: "Overflow when unpacking long long", "int too big to convert".
        (
            "interventions.vaccination.daily_doses=100000000000000000000",
            "interventions.vaccination.daily_doses: 100000000000000000000 is not allowed: must be at most 1000000000",
        ),
        (
            "interventions.vaccination.daily_doses_per_100k=3.0e+38",  # YAML 1.1 reads 3.0e38 as text
            "interventions.vaccination.daily_doses_per_100k: 3e+38 is not allowed: must be at most 100000",
        ),
        (
            "interventions.testing.tests[0].daily_capacity=100000000000000000000",
            "interventions.testing.tests[0].daily_capacity: 100000000000000000000 is not allowed: must be at most "
            "1000000000",
        ),
        (
            "interventions.manual_tracing.daily_capacity=100000000000000000000",
            "interventions.manual_tracing.daily_capacity: 100000000000000000000 is not allowed: must be at most "
            "1000000000",
        ),
    ],
)
def test_a_daily_count_or_shelf_life_too_large_to_run_is_refused_before_the_run(small, setting, message):
    """Validate called these valid and `abm run` then failed (exit 1 with a traceback, or killed
    for memory); both refuse them now with the key path and the bound, and nothing is written."""
    out = small.parent / "out"
    on = "--set=interventions.testing={} --set=interventions.manual_tracing={} --set=interventions.quarantine={}"
    for args in (["validate", str(small)], ["run", str(small), "--out", str(out)]):
        result = runner.invoke(app, [*args, *on.split(), "--set", setting])
        assert result.exit_code == 2, result.output
        assert message in text(result)
    assert not out.exists()


@pytest.mark.parametrize(
    ("written", "line", "problem"),
    [
        ("? [a, b]\n: 3\n", 3, "column 3: a key must be a name (text), not a list"),
        ("? {a: 1}\n: 3\n", 3, "column 3: a key must be a name (text), not a mapping"),
        (
            "days: &d [1, *d]\n",
            3,
            "column 14: *d refers to the value &d that holds it, a value without end; write the value out",
        ),
        (
            "days: " + "[" * 60 + "]" * 60 + "\n",
            3,
            "column 56: values nested more than 50 levels deep; no scenario needs that many",
        ),
    ],
)
def test_a_key_that_is_a_list_or_a_value_that_holds_itself_is_refused_with_its_line(tmp_path, written, line, problem):
    """A list or mapping as a key ended validate and run with a TypeError traceback (exit 1), and
    a value that holds itself through an alias, or lists nested hundreds deep, with a
    RecursionError; all are YAML mistakes, named by their line, in epidemic and learning
    scenarios alike."""
    yaml_refused_everywhere(tmp_path, written, f"line {line}, {problem}")
    assert load_yaml("a: &x {b: 1}\nc: *x\nd: [&y 1, *y]\ne: {<<: *x, f: 2}") == {
        "a": {"b": 1},
        "c": {"b": 1},
        "d": [1, 1],
        "e": {"b": 1, "f": 2},
    }


@pytest.mark.parametrize(
    ("written", "problem"),
    [
        (
            "simulation:\n\tdays: 30\n",
            "line 4, column 1: found character '\\t' that cannot start any token; YAML indents with spaces, not "
            "tabs: replace the tab",
        ),
        (
            "simulation:\n    days: 30\n   seed: 2\n",
            "line 5, column 4: expected <block end>, but found '<block mapping start>'; this line's indentation "
            "matches no line above it: line it up with the others of its section",
        ),
        (
            "outputs:\n  map_days:\n    - 10\n   - 20\n",
            "line 6, column 4: expected <block end>, but found '<block sequence start>'; this line's indentation "
            "matches no line above it: line it up with the others of its section",
        ),
        ("name: 'x' y\n", "line 3, column 11: expected <block end>, but found '<scalar>'"),  # no indentation slip
    ],
)
def test_a_tab_or_a_line_indented_to_nothing_is_told_what_it_means(tmp_path, written, problem):
    """A tab in the indentation and a line indented between two levels were told in YAML's words
    alone ("found character '\\t' that cannot start any token", "expected <block end>, but found
    '<block mapping start>'"), which name no fix; epidemic and learning scenarios alike."""
    yaml_refused_everywhere(tmp_path, written, problem)


@pytest.mark.parametrize(
    ("written", "problem"),
    [
        ("a: [\n", "invalid YAML at line 2, column 1: expected the node content, but found '<stream end>'"),
        ("[1, 2]\n", "holds a list, not the mapping of keys `abm run` writes"),
        ("just text\n", "holds the single value 'just text', not the mapping of keys `abm run` writes"),
        ("", "holds nothing, not the mapping of keys `abm run` writes"),
    ],
)
def test_compare_names_a_damaged_resolved_scenario_on_one_line(tmp_path, small_run_folder, written, problem):
    """A run folder's scenario.resolved.yaml that is no mapping ended `abm compare` with an
    AttributeError traceback (exit 1); invalid YAML was told with YAML's copy of the line, over
    several lines. Nothing is written."""
    damaged = copy_output(small_run_folder, tmp_path / "damaged")
    (damaged / "scenario.resolved.yaml").write_text(written, encoding="utf-8")
    out = tmp_path / "comparison"
    result = runner.invoke(app, ["compare", str(small_run_folder), str(damaged), "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert text(result) == f"error: {damaged}: cannot read the run (scenario.resolved.yaml: {problem})"
    assert not out.exists()


@pytest.mark.parametrize(
    ("command", "scenario", "key"),
    [
        ("calibrate", CALIBRATION, "calibration.seed"),
        ("learn", ROOT / "scenarios/learning/gmm_mapl.yaml", "seed"),
        ("learn", ROOT / "scenarios/learning/private_calibration.yaml", "seed"),
    ],
)
def test_a_seed_beyond_what_the_generators_take_is_refused_before_anything_runs(tmp_path, command, scenario, key):
    """A sampler seed of 2**32 or more passed validate and ended `abm calibrate` with numpy's
    "Seed must be between 0 and 2**32 - 1" traceback (exit 1); a learning seed of 2**64 ended
    `abm learn` with torch's "Overflow when unpacking long long"."""
    for args in (
        ["validate", str(scenario)],
        [command, str(scenario), "--out", str(tmp_path / "out")],
    ):
        result = runner.invoke(app, [*args, "--set", f"{key}=4294967296"])
        assert result.exit_code == 2, result.output
        assert text(result) == (
            f"error: {scenario} (with --set {key}=4294967296): invalid scenario: {key}: 4294967296 is not allowed: "
            "must be at most 4294967295"
        )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (
            "disease.transmission_rate='3'",
            "disease.transmission_rate: '3' is not allowed: must be a number; write the number without quotes: 3",
        ),
        (
            'simulation.days="6"',
            "simulation.days: '6' is not allowed: must be a whole number; write the number without quotes: 6",
        ),
        (
            "seeding.infections={asymptomatic: '3'}",
            "seeding.infections.asymptomatic: '3' is not allowed: must be a whole number; write the number without "
            "quotes: 3",
        ),
        (
            "disease.susceptibility_by_age=['0.5', 1, 1, 1, 1, 1, 1, 1, 1]",
            "disease.susceptibility_by_age[0]: '0.5' is not allowed: must be a number; write the number without "
            "quotes: 0.5",
        ),
        (
            "calibration.parameters={disease.transmission_rate: {low: '2', high: 6}}",
            "calibration.parameters.disease.transmission_rate.low: '2' is not allowed: must be a number; write the "
            "number without quotes: 2",
        ),
        # YAML 1.1 reads an exponent without a dot and a sign as text: the number YAML reads is named
        (
            "disease.transmission_rate=1e-3",
            "disease.transmission_rate: '1e-3' is not allowed: must be a number; YAML reads 1e-3 as text: write 0.001",
        ),
        (
            "contacts.community.weight=2.5e19",
            "contacts.community.weight: '2.5e19' is not allowed: must be a number; YAML reads 2.5e19 as text: write "
            "2.5e+19",
        ),
        (
            "disease.transmission_rate='010'",
            "disease.transmission_rate: '010' is not allowed: must be a number; write 10.0",
        ),
        ("disease.transmission_rate='three'", "disease.transmission_rate: 'three' is not allowed: must be a number"),
    ],
)
def test_a_number_written_as_text_is_refused_with_how_to_write_it(small, setting, message):
    """pydantic's lax mode read `transmission_rate: "3"` as 3 without a word (and `1e-3`, which
    YAML 1.1 reads as text, as 0.001); a number in quotes reads as text to the file's readers and
    to other YAML readers, and a test of this file once took '3.0e38' for a number. Every key
    that takes numbers only refuses text, in one place (abm.validation_errors), saying how to
    write the number; validate and run alike, nothing written."""
    out = small.parent / "out"
    for args in (["validate", str(small)], ["run", str(small), "--out", str(out)]):
        result = runner.invoke(app, [*args, "--set", setting])
        assert result.exit_code == 2, result.output
        assert text(result) == f"error: {small} (with --set {setting}): invalid scenario: {message}"
    assert not out.exists()


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("rounds='4'", "rounds: '4' is not allowed: must be a whole number; write the number without quotes: 4"),
        (
            "protocols[0].params.lr='0.1'",
            "protocols[0].params.lr: '0.1' is not allowed: must be a number; write the number without quotes: 0.1",
        ),
    ],
)
def test_a_number_written_as_text_in_a_learning_scenario_is_refused(tmp_path, setting, message):
    """As in epidemic scenarios, and in a protocol's params (validated by the protocol's own config)."""
    scenario = ROOT / "scenarios/learning/gmm_mapl.yaml"
    for args in (["validate", str(scenario)], ["learn", str(scenario), "--out", str(tmp_path / "out")]):
        result = runner.invoke(app, [*args, "--set", setting])
        assert result.exit_code == 2, result.output
        assert text(result) == f"error: {scenario} (with --set {setting}): invalid scenario: {message}"
    assert not (tmp_path / "out").exists()


class _NumberOrWord(BaseModel):
    """Keys that take a number or a word, as a schema may hold them."""

    model_config = ConfigDict(extra="forbid")
    day: int | Literal["end"] = 0
    share: float | str = 0.0
    start: int | dt.date = 0
    days: list[int | Literal["end"]] = []


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"day": "30"},
            "day: '30' is not allowed: must be a whole number or 'end'; write the number without quotes: 30",
        ),
        (
            {"share": "0.5"},
            "share: '0.5' is not allowed: must be a number or a word; write the number without quotes: 0.5",
        ),
        (
            {"start": "30"},
            "start: '30' is not allowed: must be a whole number or a date; write the number without quotes: 30",
        ),
        (
            {"days": [3, "4"]},
            "days[1]: '4' is not allowed: must be a whole number or 'end'; write the number without quotes: 4",
        ),
    ],
)
def test_a_number_written_as_text_is_refused_where_a_key_takes_a_number_or_a_word(data, message):
    """pydantic read `day: "30"` as 30 without a word where the key takes a number or a word
    (``int | Literal[...]``, ``float | str``, a day or a date): the check that refuses a quoted
    number for keys of numbers only (abm.validation_errors) covers those keys too."""
    from abm.validation_errors import validated

    with pytest.raises(ScenarioError) as caught:
        validated(_NumberOrWord, data, "f.yaml", ScenarioError)
    assert str(caught.value) == f"f.yaml: invalid scenario: {message}"


@pytest.mark.parametrize(
    "data",
    [{"day": "end"}, {"share": "half"}, {"start": "2020-03-01"}, {"days": [3, "end"]}, {"day": 30}, {"share": "inf"}],
)
def test_words_and_dates_are_kept_where_a_key_takes_a_number_or_a_word(data):
    """Only a quoted number is refused: the key's words and dates, and numbers, are read as before."""
    from abm.validation_errors import validated

    validated(_NumberOrWord, data, "f.yaml", ScenarioError)


def test_a_quoted_age_group_in_a_vaccination_priority_list_is_refused_with_how_to_write_it(small):
    """A priority entry (an age group or a setting's name) written '8' was named only as no
    setting of the population: it says to write the age group without quotes."""
    setting = "interventions.vaccination.priority=[HEALTHCARE, '8']"
    result = runner.invoke(app, ["validate", str(small), "--set", setting])
    assert result.exit_code == 2, result.output
    assert (
        "interventions.vaccination.priority[1]: '8' is not allowed: must be a whole number or a word; write the "
        "number without quotes: 8"
    ) in text(result)
    ok = runner.invoke(app, ["validate", str(small), "--set", "interventions.vaccination.priority=[HEALTHCARE, 8]"])
    assert ok.exit_code == 0, ok.output


def test_a_nan_in_a_protocols_params_is_named_once(tmp_path):
    """A YAML .nan for a protocol's learning rate was named twice: as no finite number, and by the
    protocol's config as not above 0."""
    scenario = ROOT / "scenarios/learning/gmm_mapl.yaml"
    result = runner.invoke(app, ["validate", str(scenario), "--set", "protocols[0].params.lr=.nan"])
    assert result.exit_code == 2, result.output
    assert text(result) == (
        f"error: {scenario} (with --set protocols[0].params.lr=.nan): invalid scenario: protocols[0].params.lr: nan "
        "is not allowed: a finite number is expected here"
    )


@pytest.mark.parametrize(
    ("written", "key", "read_as"),
    [
        ("null: 3", "null", "null (no value)"),
        ("true: 3", "true", "true or false"),
        ("3: 4", "3", "a number"),
        ("2020-01-01: 4", "2020-01-01", "a date"),
    ],
)
def test_a_key_that_yaml_reads_as_no_name_is_named_as_written(tmp_path, small, written, key, read_as):
    """A key YAML reads as null, true, a number or a date was named as pydantic names it ("None",
    "datetime.date(2020, 1, 1)", true as "1") with pydantic's "Keys should be strings"."""
    scenario = tmp_path / "keys.yaml"
    scenario.write_text(f"extends: {small}\n{written}\n", encoding="utf-8")
    nested = tmp_path / "nested.yaml"
    nested.write_text(f"extends: {small}\ndisease: {{{written}}}\n", encoding="utf-8")
    allowed = {
        scenario: "name, description, population, simulation, disease, contacts, seeding, interventions, outputs, "
        "calibration",
        nested: "transmission_rate, seasonality, susceptibility_by_age, infectiousness_by_stage, "
        "infectiousness_profile_mean, infectiousness_profile_sd, branching, dwell_times, "
        "long_term_care_branching",
    }
    for path, where in ((scenario, key), (nested, f"disease.{key}")):
        for args in (["validate", str(path)], ["run", str(path), "--out", str(tmp_path / "out")]):
            result = runner.invoke(app, args)
            assert result.exit_code == 2, result.output
            assert text(result) == (
                f"error: {path}: invalid scenario: {where}: unknown key (YAML reads it as {read_as}, not as a name); "
                f"allowed keys: {allowed[path]}"
            )
    assert not (tmp_path / "out").exists()


def test_extends_naming_a_folder_says_so(tmp_path):
    """`extends:` naming a folder was told "not found" though the folder is there."""
    (tmp_path / "base").mkdir()
    scenario = tmp_path / "child.yaml"
    scenario.write_text("extends: base\n", encoding="utf-8")
    result = runner.invoke(app, ["run", str(scenario), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert text(result) == (
        f"error: {scenario}: extends: 'base' is a folder ({tmp_path / 'base'}); give the path of a scenario file"
    )
    assert not (tmp_path / "out").exists()


def yaml_refused_everywhere(tmp_path: Path, written: str, problem: str) -> None:
    """``written`` after an epidemic scenario's and a learning scenario's first lines is refused by
    validate, run and learn with exit 2 and "invalid YAML at ``problem``", and nothing is written."""
    scenario = tmp_path / "odd.yaml"
    scenario.write_text(f"name: odd\nextends: {BASE}\n{written}", encoding="utf-8")
    learning = tmp_path / "odd_learning.yaml"
    learning.write_text(f"name: odd\nseed: 0\n{written}", encoding="utf-8")
    for args, path in (
        (["validate", str(scenario)], scenario),
        (["run", str(scenario), "--out", str(tmp_path / "out")], scenario),
        (["learn", str(learning), "--out", str(tmp_path / "out")], learning),
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        assert text(result) == f"error: {path}: invalid YAML at {problem}"
    assert not (tmp_path / "out").exists()


def test_validate_run_and_sweep_refuse_a_calibration_its_days_do_not_cover_with_one_message(tmp_path):
    """calibrate_2020.yaml's windows need 151 days: with --set simulation.days=60, abm validate
    refused it (it made abm calibrate's checks) while abm run and abm sweep ran it. Every command
    that reads a scenario now checks its calibration section alike (abm.overrides.resolve): the
    same line, exit code 2, nothing written; without the calibration section all accept it."""
    days = ["--set", "simulation.days=60"]
    expected = (
        f"error: {CALIBRATION} (with --set simulation.days=60): simulation.days: 60 is too short; the windows need "
        "151 days from 2020-02-01; a run of fewer days needs no calibration section: set calibration: null"
    )
    commands = {
        "validate": ["validate", str(CALIBRATION), *days],
        "run": ["run", str(CALIBRATION), *days, "--out", str(tmp_path / "run")],
        "sweep": ["sweep", str(CALIBRATION), *days, "--sweep", "seeding.day=1,2", "--out", str(tmp_path / "sweep")],
    }
    for command, args in commands.items():
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (command, result.output)
        assert text(result) == expected, command
    assert not any(tmp_path.iterdir())
    without = runner.invoke(app, ["validate", str(CALIBRATION), *days, "--set", "calibration=null"])
    assert without.exit_code == 0, without.output


MAPL = ROOT / "scenarios/learning/gmm_mapl.yaml"


@pytest.mark.parametrize(
    ("command", "file", "first", "second", "extra"),
    [
        ("validate", BASE, "simulation.days=60", "simulation.days=90", []),
        ("run", BASE, "simulation.days=60", "simulation.days = 90", ["--out", "OUT"]),
        ("sweep", BASE, "simulation.days=60", "simulation.days=90", ["--sweep", "seeding.day=1,2", "--out", "OUT"]),
        ("calibrate", CALIBRATION, "simulation.days=160", "simulation.days=170", ["--out", "OUT"]),
        ("run", BASE, "disease.dwell_times[0].shape=2", "disease.dwell_times.0.shape=3", ["--out", "OUT"]),
        ("learn", MAPL, "rounds=3", "rounds=5", ["--out", "OUT"]),
        ("validate", MAPL, "protocols[0].params.lr=0.1", "protocols.0.params.lr=0.2", []),
    ],
)
def test_a_key_set_twice_with_two_values_is_refused_naming_both(tmp_path, command, file, first, second, extra):
    """The same key given twice to --set with two values: the last one won without a word. Every
    command that takes --set now refuses it with one line naming the file, the key (as messages
    write it, a list index in brackets) and both values; exit code 2, nothing written."""
    out = tmp_path / "out"
    args = [command, str(file), "--set", first, "--set", second, *[str(out) if a == "OUT" else a for a in extra]]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    key = dotted(first.partition("=")[0]).replace(".0.", "[0].")
    values = first.partition("=")[2].strip(), second.partition("=")[2].strip()
    assert (
        text(result) == f"error: {file}: --set: {key} is given twice, as {values[0]} and as {values[1]}; give it once"
    )
    assert not out.exists()


def test_a_key_set_twice_to_the_same_value_changes_nothing_and_passes():
    result = runner.invoke(app, ["validate", str(BASE), "--set", "simulation.days=60", "--set", "simulation.days=60"])
    assert result.exit_code == 0, result.output


def test_validate_refuses_more_seeds_than_the_prior_immunity_leaves_as_run_does(tmp_path):
    """At 100 agents a prior immunity of 0.99 leaves none of them to seed: abm run refused it once
    the population was built, while abm validate said the scenario was valid. Both now refuse it
    with the same line (SeedingConfig.room_problem); at 0.9 both accept it."""
    sets = ["--set", "population.agents=100", "--set", "seeding.prior_immunity=0.99"]
    sets += ["--set", "simulation.days=2", "--set", "simulation.replicates=1"]
    expected = (
        f"error: {BASE} (with --set population.agents=100 --set seeding.prior_immunity=0.99 --set simulation.days=2 "
        "--set simulation.replicates=1): seeding: 5 initial infections a replicate, but seeding.prior_immunity "
        "leaves 0 of the 100 agents not immune to infect; lower the infections or the prior immunity"
    )
    for args in (["validate", str(BASE), *sets], ["run", str(BASE), *sets, "--out", str(tmp_path / "run")]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        assert [line for line in result.stderr.splitlines() if line.startswith("error:")] == [expected], args[0]
    assert not (tmp_path / "run").exists()
    fewer = runner.invoke(app, ["validate", str(BASE), *[s.replace("0.99", "0.9") for s in sets]])
    assert fewer.exit_code == 0, fewer.output
