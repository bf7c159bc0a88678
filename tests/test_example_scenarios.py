"""`abm data scenarios [DIR]`: abm's example scenarios copied to a folder of the user's, for a user
who installed abm from its wheel, which holds no scenarios/ beside it. Before, README's first
command said only "cannot read the scenario file ... looked for in the working folder" there, and
nothing said where to get the scenarios. The wheel's copy of them is checked in
tests/test_packaging.py."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from abm import example_copy
from abm.cli import app
from abm.examples import example_files, examples_folder
from abm.outputs.run_folder import MARK, atomic_folder

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def one_line(text: str) -> str:
    """Console output with rich's wrapping undone."""
    return " ".join(text.split())


def tree(folder: Path) -> dict[str, bytes]:
    """Every file below ``folder`` (relative path -> content): what a test compares before and after."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_examples_are_every_file_of_the_repositorys_scenarios():
    """The files the wheel carries and `abm data scenarios` copies are those of scenarios/, all
    of them: a scenario added there in a kind of file the selection leaves out (a .yml, a data
    file it reads) would be missing for a user of the wheel."""
    assert examples_folder() == ROOT / "scenarios"  # a checkout's, where abm runs from it
    files = example_files(ROOT / "scenarios")
    assert {"king_county/no_intervention.yaml", "learning/private_calibration.yaml", "reference/base.yaml"} <= set(
        files
    )
    assert files == sorted(tree(ROOT / "scenarios"))


def test_copied_examples_validate_from_a_folder_outside_the_checkout(tmp_path, monkeypatch):
    """From an empty folder: the examples are copied with their layout (no mark of an output
    folder, nothing left beside them), what was written is listed, and a copied scenario validates,
    as does a learning one whose model.scenario is ../king_county/calibrate_2020.yaml."""
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["data", "scenarios", "mine"])
    assert result.exit_code == 0, result.output
    assert tree(tmp_path / "mine") == tree(ROOT / "scenarios")
    assert sorted(os.listdir(tmp_path)) == ["mine"]
    lines = result.output.splitlines()
    assert lines[0] == f"wrote {len(example_files(ROOT / 'scenarios'))} example files to mine{os.sep}:"
    assert lines[1].startswith("  king_county/ (") and " base.yaml, calibrate_2020.yaml, " in lines[1]
    assert lines[-1] == "run one: abm run mine/king_county/no_intervention.yaml"
    for scenario in ("mine/king_county/no_intervention.yaml", "mine/learning/private_calibration.yaml"):
        checked = runner.invoke(app, ["validate", scenario])
        assert checked.exit_code == 0, checked.output


def test_the_default_folder_is_scenarios_and_makes_readmes_command_work(tmp_path, monkeypatch):
    """Without DIR: ./scenarios, so that README's `abm run scenarios/king_county/...` finds its
    file; an empty folder of that name is written into."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scenarios").mkdir()
    assert runner.invoke(app, ["data", "scenarios"]).exit_code == 0
    assert tree(tmp_path / "scenarios") == tree(ROOT / "scenarios")
    assert not (tmp_path / "scenarios" / MARK).exists()


@pytest.mark.parametrize("inside", ["mine.yaml", "empty_folder/"])
def test_a_folder_that_is_not_empty_is_refused_without_force(tmp_path, monkeypatch, inside):
    """A DIR that holds anything (a file, an empty folder) is left as it was: one line, exit code 2."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scenarios").mkdir()
    entry = tmp_path / "scenarios" / inside
    entry.mkdir() if inside.endswith("/") else entry.write_text("name: mine\n")
    result = runner.invoke(app, ["data", "scenarios"])
    assert result.exit_code == 2
    assert one_line(result.output) == (
        f"error: 'scenarios' exists and is not empty ({inside.rstrip('/')}); abm data scenarios writes into a new "
        "or empty folder: give another folder, or --force to write the examples over the files of their names "
        "there (its other files are kept)"
    )
    assert sorted(os.listdir(tmp_path)) == ["scenarios"]
    assert os.listdir(tmp_path / "scenarios") == [inside.rstrip("/")]


def test_force_writes_the_examples_over_their_namesakes_and_keeps_other_files(tmp_path, monkeypatch):
    """--force: an edited example is put back, a file of the user's stays, and both are said."""
    monkeypatch.chdir(tmp_path)
    assert runner.invoke(app, ["data", "scenarios"]).exit_code == 0
    (tmp_path / "scenarios" / "mine.yaml").write_text("extends: king_county/vacc.yaml\nname: mine\n")
    (tmp_path / "scenarios" / "king_county" / "vacc.yaml").write_text("name: edited\n")
    result = runner.invoke(app, ["data", "scenarios", "--force"])
    assert result.exit_code == 0, result.output
    assert "wrote over 1 file that differed: king_county/vacc.yaml" in result.output.splitlines()
    assert "kept 1 other file: mine.yaml" in result.output.splitlines()
    assert tree(tmp_path / "scenarios") == {
        **tree(ROOT / "scenarios"),
        "mine.yaml": b"extends: king_county/vacc.yaml\nname: mine\n",
    }
    assert sorted(os.listdir(tmp_path)) == ["scenarios"]


def test_force_does_not_write_into_an_output_folder(tmp_path, monkeypatch):
    """A run folder (abm's mark) is no folder of scenarios: refused even with --force, unchanged."""
    monkeypatch.chdir(tmp_path)
    with atomic_folder(tmp_path / "run", "run") as tmp:
        (tmp / "summary.json").write_text("{}")
    before = tree(tmp_path / "run")
    result = runner.invoke(app, ["data", "scenarios", "run", "--force"])
    assert result.exit_code == 2
    assert one_line(result.output) == (
        "error: output folder 'run': holds a run abm wrote, which this would be written into; give another folder"
    )
    assert tree(tmp_path / "run") == before


@pytest.mark.parametrize("earlier", [False, True])
def test_a_failing_file_system_writes_nothing(tmp_path, monkeypatch, earlier):
    """A full disk after some files are written: exit code 1, no DIR (or DIR as it was, with
    --force), nothing left beside it."""
    monkeypatch.chdir(tmp_path)
    if earlier:
        (tmp_path / "scenarios").mkdir()
        (tmp_path / "scenarios" / "mine.yaml").write_text("name: mine\n")
    real, written = shutil.copyfile, []

    def copyfile(source, target, **options):
        if len(written) == 5:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target))
        written.append(target)
        return real(source, target, **options)

    monkeypatch.setattr(example_copy.shutil, "copyfile", copyfile)
    result = runner.invoke(app, ["data", "scenarios", *(["--force"] if earlier else [])])
    assert result.exit_code == 1, result.output
    assert one_line(result.output).startswith(
        "error: output folder 'scenarios': writing failed (No space left on device"
    )
    assert sorted(os.listdir(tmp_path)) == (["scenarios"] if earlier else [])
    if earlier:
        assert tree(tmp_path / "scenarios") == {"mine.yaml": b"name: mine\n"}


def test_a_missing_example_names_the_command_that_copies_it(tmp_path, monkeypatch):
    """README's first command from an empty folder, an example's bare name, and an example's
    path below another folder: each message says what `abm data scenarios` writes; once run,
    README's path validates. A name of no example, and a scenarios/ that is taken, get no such
    hint (the command would refuse that folder)."""
    monkeypatch.chdir(tmp_path)
    looked = f"cannot read the scenario file (No such file or directory); looked for in the working folder {tmp_path}"
    cases = {
        "scenarios/king_county/no_intervention.yaml": "`abm data scenarios` copies abm's example scenarios here, "
        "this one among them",
        "scenarios/mine.yaml": "`abm data scenarios` copies abm's example scenarios here (to scenarios/)",
        "ni.yaml": "abm's example scenarios hold scenarios/king_county/ni.yaml and scenarios/reference/ni.yaml: "
        "`abm data scenarios` copies them here",
        "kc/learning/gmm_mapl.yaml": "`abm data scenarios kc` copies abm's example scenarios there, this one "
        "among them",
    }
    for given, hint in cases.items():
        result = runner.invoke(app, ["validate", given])
        assert result.exit_code == 2
        assert one_line(result.output).startswith(f"error: {given}: {looked}")
        assert one_line(result.output).endswith(f"; {hint}"), result.output
    assert one_line(runner.invoke(app, ["validate", "mine.yaml"]).output) == f"error: mine.yaml: {looked}"
    assert os.listdir(tmp_path) == []
    assert runner.invoke(app, ["data", "scenarios"]).exit_code == 0
    assert runner.invoke(app, ["validate", "scenarios/king_county/no_intervention.yaml"]).exit_code == 0
    taken = runner.invoke(app, ["validate", "scenarios/king_county/lockdown.yaml"])
    assert "abm data scenarios" not in taken.output and taken.exit_code == 2


def test_an_interrupt_writes_nothing(tmp_path, monkeypatch):
    """Ctrl-C while the files are copied: exit code 130, one line, no DIR and nothing beside it."""
    monkeypatch.chdir(tmp_path)
    real, written = shutil.copyfile, []

    def copyfile(source, target, **options):
        if len(written) == 5:
            raise KeyboardInterrupt
        written.append(target)
        return real(source, target, **options)

    monkeypatch.setattr(example_copy.shutil, "copyfile", copyfile)
    result = runner.invoke(app, ["data", "scenarios"])
    assert result.exit_code == 130, result.output
    assert result.output.splitlines()[-1] == "interrupted: nothing was written to scenarios"
    assert os.listdir(tmp_path) == []
