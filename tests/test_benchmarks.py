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
