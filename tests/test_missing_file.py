"""A scenario path that names no file: the message says what it most likely meant (a close name
beside it, the repository's file when abm runs from another folder), or where it was looked for.
Before, each of these said only "cannot read the scenario file (No such file or directory)"."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from abm.cli import app
from abm.learning.errors import LearningScenarioError
from abm.learning.files import read_yaml
from abm.scenario import ScenarioError, load_raw

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def test_a_misspelt_or_wrongly_suffixed_scenario_file_gets_the_file_beside_it(tmp_path, monkeypatch) -> None:
    """`.yml` for `.yaml`, a letter left out: the file of that folder it most likely meant, given
    as the user's path to it; a name close to none gets no guess, but the working folder it was
    looked for in (a relative path is read from there)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "no_intervention.yaml").write_text("name: ni\n")
    cases = {
        "runs/no_intervention.yml": "; did you mean 'runs/no_intervention.yaml'?",
        "runs/no_interventon.yaml": "; did you mean 'runs/no_intervention.yaml'?",
        "runs/vaccination.yaml": f"; looked for in the working folder {tmp_path}",
    }
    for given, hint in cases.items():
        with pytest.raises(ScenarioError) as err:
            load_raw(Path(given))
        assert str(err.value) == f"{given}: cannot read the scenario file (No such file or directory){hint}"


def test_extends_without_its_suffix_gets_the_file_it_meant(tmp_path) -> None:
    """`extends: vacc` beside vacc.yaml: the value to write, relative as the user wrote it."""
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "vacc.yaml").write_text("name: vacc\n")
    (tmp_path / "late.yaml").write_text("extends: base/vacc\nname: late\n")
    with pytest.raises(ScenarioError, match=re.escape("not found (looked for ")) as err:
        load_raw(tmp_path / "late.yaml")
    assert str(err.value).endswith("; did you mean 'base/vacc.yaml'?")


def test_a_bundled_scenario_run_from_another_folder_names_the_repositorys_file(tmp_path, monkeypatch) -> None:
    """`abm run scenarios/king_county/ni.yaml` from a folder other than the repository's: exit
    code 2, the working folder, the repository's file and the command that copies the examples
    there named, nothing written."""
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["run", "scenarios/king_county/ni.yaml", "--agents", "100", "--days", "2"])
    assert result.exit_code == 2
    assert " ".join(result.output.split()) == (
        "error: scenarios/king_county/ni.yaml: cannot read the scenario file (No such file or directory); looked "
        f"for in the working folder {tmp_path}; the repository's is {ROOT / 'scenarios/king_county/ni.yaml'}: "
        f"run abm from {ROOT}, or give that path; `abm data scenarios` copies abm's example scenarios here, this one "
        "among them"
    )
    assert os.listdir(tmp_path) == []


def test_a_missing_learning_scenario_gets_the_file_beside_it(tmp_path) -> None:
    """abm learn and abm validate read learning scenarios with their own reader: the same guess."""
    (tmp_path / "gmm.yaml").write_text("name: gmm\n")
    with pytest.raises(LearningScenarioError) as err:
        read_yaml(tmp_path / "gmm.yml")
    assert str(err.value) == (
        f"{tmp_path / 'gmm.yml'}: cannot read the file: No such file or directory; did you mean "
        f"'{tmp_path / 'gmm.yaml'}'?"
    )


def test_a_missing_file_in_a_folder_that_cannot_be_listed_gets_the_plain_message(tmp_path, monkeypatch) -> None:
    """A folder one may open files in but not list (execute permission without read): the file it
    names is missing, and the guess at a close name cannot look. That ended in a PermissionError
    traceback with exit code 1; now the message without a guess, exit code 2."""
    locked = tmp_path / "locked"
    locked.mkdir()
    real = Path.iterdir

    def iterdir(self: Path):
        if self == locked:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "iterdir", iterdir)  # chmod does not stop root, who runs the tests here
    result = runner.invoke(app, ["validate", str(locked / "vacc.yml")])
    assert result.exit_code == 2, result.output
    assert " ".join(result.output.split()) == (
        f"error: {locked / 'vacc.yml'}: cannot read the scenario file (No such file or directory)"
    )
