"""Cheap checks of the benchmark scripts in benchmarks/ (the figures in BENCHMARKS.md and
benchmarks/*.md come from them, and reviewers re-run their recorded commands)."""

from __future__ import annotations

import importlib.util
import os
import sys
from datetime import date
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def benchmark(name: str) -> ModuleType:
    """The script benchmarks/NAME.py, loaded as a module (its main() not run)."""
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_learning_benchmarks_header_records_the_run_date_cores_and_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The results file's header says when, where and with which options it was made: a re-run
    must not claim the date of the first run (2026-11-22, once written into the script) or leave
    out the ``--only`` that restricted it."""
    module = benchmark("learning_benchmarks")
    out = tmp_path / "learning.md"
    argv = ["learning_benchmarks.py", "--seeds", "5", "--only", "no_such_scenario", "--results", str(out)]
    monkeypatch.setattr(sys, "argv", argv)
    module.main()  # no scenario matches: only the header is written
    text = out.read_text()
    assert "Command: `python benchmarks/learning_benchmarks.py --seeds 5 --only no_such_scenario`" in text
    assert f"Date: {date.today().isoformat()}." in text
    assert f"Machine: {os.cpu_count()}-core CPU" in text


@pytest.mark.parametrize("complete", [False, True])
def test_reference_tables_writes_benchmarks_md_only_with_every_scenario(
    complete: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--only ni`` (no cache of the others) must not replace BENCHMARKS.md's recorded table of
    eleven scenarios by a table of one; with every scenario the section is written."""
    module = benchmark("reference_tables")
    names = module.NAMES if complete else ["ni"]
    monkeypatch.setattr(module, "ROOT", tmp_path)
    monkeypatch.setattr(module, "run_all", lambda *a: {n: {} for n in names})
    monkeypatch.setattr(module, "markdown", lambda rows, reps: f"new table of {len(rows)}\n")
    recorded = f"# Benchmarks\n\n{module.BEGIN}\nrecorded table of 11\n{module.END}\n"
    (tmp_path / "BENCHMARKS.md").write_text(recorded)
    only = [] if complete else ["--only", "ni"]
    monkeypatch.setattr(sys, "argv", ["reference_tables.py", *only, "--cache", str(tmp_path / "cache.json")])
    module.main()
    text = (tmp_path / "BENCHMARKS.md").read_text()
    if complete:
        assert text == f"# Benchmarks\n\n{module.BEGIN}\nnew table of 11\n{module.END}\n"
    else:
        assert text == recorded
        err = capsys.readouterr().err
        assert "BENCHMARKS.md left as it is" in err and "sq" in err and "vacc_budget" in err


def test_gradient_step_finds_its_default_scenario_from_any_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Like the other scripts, gradient_step.py reads its default scenario from the repository, not
    from the folder it is started in (it stopped with 'cannot read the scenario file')."""
    module = benchmark("gradient_step")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["gradient_step.py", "--seeds", "1"])
    module.main()
    assert capsys.readouterr().out.startswith("calibrate_2020: 100,000 agents x 1 replicate x 151 days")
