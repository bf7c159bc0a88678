"""A CPU run's memory: the estimate against measured peaks, the note before runs that may not fit
this machine, and an allocation that fails ending in one message."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import fixed_seeds_note, write_small_scenario
from typer.testing import CliRunner

import abm
from abm import memory
from abm.cli import app
from abm.engine.config import DEFAULT_COMMUNITY_STUBS, estimate_memory_bytes
from abm.scenario import ScenarioError, load_scenario

ROOT = Path(__file__).resolve().parents[1]
NI = ROOT / "scenarios/king_county/ni.yaml"
CALIBRATION = ROOT / "scenarios/king_county/calibrate_2020.yaml"
runner = CliRunner()

# Peak resident memory of `abm run scenarios/king_county/SCENARIO.yaml --agents N --replicates R
# --days D` measured with /usr/bin/time -v (BENCHMARKS.md, "Peak memory of abm run", 2026-11-28;
# the whole county: "The whole county, command by command", 2026-11-29), in MB of 10^6 bytes:
# (scenario, agents, replicates, days, MB).
MEASURED = [
    ("no_intervention", 2_000, 1, 5, 438),
    ("no_intervention", 100_000, 1, 30, 522),
    ("no_intervention", 100_000, 10, 30, 1_193),
    ("no_intervention", 300_000, 2, 90, 912),
    ("no_intervention", 300_000, 4, 30, 1_383),
    ("no_intervention", 1_000_000, 1, 30, 1_340),
    ("no_intervention", 1_000_000, 2, 30, 2_000),
    ("vacc_ct", 100_000, 10, 30, 1_180),
    ("vacc_ct", 300_000, 2, 30, 912),
    ("vacc_ct", 1_000_000, 2, 180, 1_867),
    ("vacc_ct", 2_252_782, 1, 180, 2_651),
    ("no_intervention", 2_252_782, 1, 180, 2_730),
    ("no_intervention", 2_252_782, 2, 180, 3_951),
]


def text(result) -> str:
    return " ".join(result.output.split())


@pytest.fixture(autouse=True)
def large_machine(tmp_path_factory, monkeypatch) -> None:
    """A machine of 1 TB (/proc/meminfo made up), so that no scenario here is refused as beyond
    all of the test machine's memory; tests set the memory available themselves."""
    meminfo = tmp_path_factory.mktemp("machine") / "meminfo"
    meminfo.write_text("MemTotal:  1000000000 kB\nMemAvailable:  1000000000 kB\nSwapTotal:  0 kB\n")
    monkeypatch.setattr(memory, "MEMINFO", meminfo)


@pytest.fixture
def small(tmp_path) -> Path:
    """The small scenario (2,000 agents, 6 days, one replicate) at ``tmp_path/small.yaml``."""
    return write_small_scenario(tmp_path)


@pytest.mark.parametrize(("scenario", "agents", "replicates", "days", "mb"), MEASURED)
def test_the_estimate_is_above_each_measured_peak_but_not_far(scenario, agents, replicates, days, mb):
    """At least the peak measured, at most 1.5 times it: a note that comes for runs that fit
    easily would be ignored."""
    estimate = estimate_memory_bytes(agents, replicates)
    assert mb * 1e6 <= estimate <= 1.5 * mb * 1e6, estimate


def test_the_estimate_grows_with_agents_replicates_and_contacts():
    sizes = [1_000, 100_000, 2_252_782]
    for agents in sizes:
        by_replicates = [estimate_memory_bytes(agents, r) for r in (1, 2, 10)]
        assert by_replicates == sorted(set(by_replicates))
    for r in (1, 10):
        by_agents = [estimate_memory_bytes(a, r) for a in sizes]
        assert by_agents == sorted(set(by_agents))
    assert estimate_memory_bytes(100_000, 2, DEFAULT_COMMUNITY_STUBS + 100) > estimate_memory_bytes(100_000, 2)


def test_the_available_memory_is_read_from_meminfo(tmp_path, monkeypatch):
    """MemAvailable, in bytes; None (no check) where the file or the line cannot be read."""
    meminfo = tmp_path / "meminfo"
    monkeypatch.setattr(memory, "MEMINFO", meminfo)
    assert memory.available_memory_bytes() is None
    meminfo.write_text("MemTotal:       32000000 kB\nMemFree:         1000000 kB\nMemAvailable:   9800000 kB\n")
    assert memory.available_memory_bytes() == 9_800_000 * 1024
    meminfo.write_text("MemTotal:       32000000 kB\n")
    assert memory.available_memory_bytes() is None


def test_a_run_beyond_all_of_the_machines_memory_is_refused_one_that_may_fit_is_not(tmp_path, monkeypatch):
    """Refused when even the least it needs (the estimate over 1.5, the most it was above a
    measured peak) is beyond all of the memory and swap; one that may fit loads (the run gets a
    note instead). On a GPU, or where /proc/meminfo cannot be read, nothing is checked here."""
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:  8000000 kB\nMemAvailable:  2000000 kB\nSwapTotal:  1000000 kB\n")
    monkeypatch.setattr(memory, "MEMINFO", meminfo)
    assert memory.total_memory_bytes() == 9_000_000 * 1024
    load_scenario(NI, ["population.agents=1000000", "simulation.replicates=10"])  # 9.3 GB: 6.2 at least
    with pytest.raises(ScenarioError) as err:
        load_scenario(NI, ["population.agents=1000000", "simulation.replicates=20"])  # 16.8 GB: 11.2 at least
    assert str(err.value).endswith(
        "population.agents: 1000000 agents x 20 replicates need at least about 11.2 GB, but this machine has 9.2 GB "
        "of memory and swap in all; use fewer agents or replicates"
    )
    with pytest.raises(ScenarioError) as err:
        load_scenario(NI, ["population.agents=200000", "contacts.community.mean_contacts=[60, 120, 90]"])
    assert "with 103 community contacts a day over a 10-day cycle need at least" in str(err.value)
    assert str(err.value).endswith("use fewer agents, replicates or community contacts")
    load_scenario(NI, ["population.agents=1000000", "simulation.replicates=20", "simulation.device=cuda"])
    monkeypatch.setattr(memory, "MEMINFO", tmp_path / "missing")
    load_scenario(NI, ["population.agents=1000000", "simulation.replicates=20"])


def test_a_sweep_is_refused_only_where_one_replicate_cannot_fit(tmp_path, monkeypatch):
    """A sweep runs each replicate alone: its runs hold one replicate, whatever the scenario's
    replicates or --replicates. It was refused by the scenario's own batch (ni.yaml's 10
    replicates), naming replicates that never run at once and leaving --replicates out."""
    from abm.sweep import plan

    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:  8000000 kB\nMemAvailable:  2000000 kB\nSwapTotal:  1000000 kB\n")
    monkeypatch.setattr(memory, "MEMINFO", meminfo)
    with pytest.raises(ScenarioError):  # as a run: 2,000,000 agents x 10 replicates need 12.4 GB at least
        load_scenario(NI, ["population.agents=2000000"])
    swept = plan(NI, ["disease.transmission_rate=3,4"], replicates=2, agents=2_000_000)
    assert [sc.population.agents for sc in swept.variants] == [2_000_000, 2_000_000] and swept.replicates == 2
    result = runner.invoke(
        app, ["sweep", str(NI), "--sweep", "disease.transmission_rate=3,4", "--agents", "20000000", "--replicates", "2"]
    )
    assert result.exit_code == 2
    assert " ".join(result.output.split()) == (
        f"error: {NI} (with --agents 20000000): population.agents: 20000000 agents x 1 replicate need at least about "
        "15.0 GB, but this machine has 9.2 GB of memory and swap in all; use fewer agents"
    )


def test_the_note_names_the_size_the_estimate_and_what_is_available(monkeypatch):
    monkeypatch.setattr(memory, "available_memory_bytes", lambda: 9.8e9)
    monkeypatch.setattr(memory, "cuda_available", lambda: False)
    county = load_scenario(NI, ["population.agents=2252782", "simulation.replicates=10"])
    assert memory.memory_note([county]) == (
        "2,252,782 agents x 10 replicates need about 19.2 GB; this machine has 9.8 GB available: the run may be "
        "killed for memory (use fewer replicates or agents)"
    )
    assert memory.memory_note([county], replicates=1) is None  # 3.0 GB
    assert memory.memory_note([county], replicates=1, runs=4, fewer=("agents",)) == (
        "4 runs at once (--workers 4), each of 2,252,782 agents x 1 replicate, need about 12.0 GB; this machine has "
        "9.8 GB available: they may be killed for memory (use fewer --workers or agents)"
    )
    monkeypatch.setattr(memory, "cuda_available", lambda: True)
    assert memory.memory_note([county]).endswith("(use fewer replicates or agents, or --device cuda)")
    monkeypatch.setattr(memory, "available_memory_bytes", lambda: None)  # not Linux: no check
    assert memory.memory_note([county]) is None


def test_the_note_counts_community_contacts_beyond_the_defaults(monkeypatch):
    """Community contacts take 16 bytes per contact over a cycle and agent-replicate (measured
    100-160 bytes per extra daily contact and agent-replicate): 30 times the default contacts
    raise 100,000 x 10 from 1.3 GB to about 17 GB, and the note names them. Loading the
    scenario does not refuse it (the estimate only warns)."""
    monkeypatch.setattr(memory, "available_memory_bytes", lambda: 3e9)
    monkeypatch.setattr(memory, "cuda_available", lambda: False)
    extra = estimate_memory_bytes(100_000, 10, DEFAULT_COMMUNITY_STUBS + 100) - estimate_memory_bytes(100_000, 10)
    assert extra == 16 * 100 * 100_000 * 10
    sets = ["population.agents=100000", "simulation.replicates=10"]
    assert memory.memory_note([load_scenario(NI, sets)]) is None
    crowded = load_scenario(NI, [*sets, "contacts.community.mean_contacts=[60, 120, 90]"])
    assert memory.memory_note([crowded]) == (
        "100,000 agents x 10 replicates with 103 community contacts a day over a 10-day cycle need about 17.3 GB; "
        "this machine has 3.0 GB available: the run may be killed for memory (use fewer replicates, agents or "
        "community contacts)"
    )


def test_a_gpu_run_gets_no_note(monkeypatch):
    monkeypatch.setattr(memory, "available_memory_bytes", lambda: 1e6)
    sc = load_scenario(NI, ["population.agents=300"])
    assert memory.memory_note([sc]) is not None
    gpu = sc.model_copy(update={"simulation": sc.simulation.model_copy(update={"device": "cuda"})})
    assert memory.memory_note([gpu]) is None


def test_abm_run_notes_a_run_beyond_the_available_memory_and_goes_on(tmp_path, small, monkeypatch):
    """Made small, the available memory gets the note on stderr before the run, which is then
    done and written; with plenty, no note."""
    monkeypatch.setattr(memory, "cuda_available", lambda: False)
    monkeypatch.setattr(memory, "available_memory_bytes", lambda: 100e6)
    out = tmp_path / "small-run"
    result = runner.invoke(app, ["run", str(small), "--days", "5", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert (
        "note: 2,000 agents x 1 replicate need about 0.6 GB; this machine has 0.1 GB available: the run may be "
        "killed for memory (use fewer replicates or agents)"
    ) in text(result)
    assert (out / "summary.json").is_file()
    monkeypatch.setattr(memory, "available_memory_bytes", lambda: 64e9)
    result = runner.invoke(app, ["run", str(small), "--days", "5", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "killed for memory" not in result.output and "GB available" not in result.output


def test_abm_sweep_notes_its_workers_runs_at_once(small, monkeypatch):
    """A sweep's runs are one replicate each, --workers of them at once: the note counts them
    all (the sweep itself is stopped here once the note is out)."""
    import abm.sweep

    def stop(*args, **kwargs):
        raise ScenarioError("stopped after the note")

    monkeypatch.setattr(memory, "cuda_available", lambda: False)
    monkeypatch.setattr(memory, "available_memory_bytes", lambda: 1e9)
    monkeypatch.setattr(abm.sweep, "run_sweep", stop)
    args = ["sweep", str(small), "--sweep", "contacts.community.weight=0.1,0.2", "--replicates", "2"]
    result = runner.invoke(app, [*args, "--workers", "2", "--out", str(small.parent / "sw")])
    assert result.exit_code == 2 and "stopped after the note" in text(result), result.output
    assert (
        "note: 2 runs at once (--workers 2), each of 2,000 agents x 1 replicate, need about 1.1 GB; this machine "
        "has 1.0 GB available: they may be killed for memory (use fewer --workers or agents)"
    ) in text(result)
    result = runner.invoke(app, [*args, "--out", str(small.parent / "sw")])
    assert result.exit_code == 2 and "killed for memory" not in result.output, result.output


def test_abm_calibrate_notes_its_workers_largest_runs(tmp_path, monkeypatch):
    """A calibration's largest runs are its re-ranked trials (calibration.rerank_replicates: 10
    here, against 2 a trial), --workers of them at once (the trials are stopped here once the
    note is out)."""
    from abm.calibration import optimize
    from abm.calibration.observed import CalibrationError

    def stop(*args, **kwargs):
        raise CalibrationError("stopped after the note")

    monkeypatch.setattr(memory, "cuda_available", lambda: False)
    monkeypatch.setattr(memory, "available_memory_bytes", lambda: 1e9)
    monkeypatch.setattr(optimize, "_run_study", stop)
    args = ["calibrate", str(CALIBRATION), "--agents", "2000", "--workers", "2", "--out", str(tmp_path / "cal")]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "stopped after the note" in text(result), result.output
    assert (
        "note: 2 runs at once (--workers 2), each of 2,000 agents x 10 replicates, need about 1.1 GB; this machine "
        "has 1.0 GB available: they may be killed for memory (use fewer --workers, agents or "
        "calibration.rerank_replicates)"
    ) in text(result)


def test_abm_calibrate_gives_the_note_on_its_workers_largest_runs_before_they_start(tmp_path, monkeypatch):
    """abm.calibrate told that note (above) to its note= callback only, as the workers started.
    Now it gives it, with the command's text (the argument named as given here), as a
    ScenarioNote at this line before anything runs: an error filter stops there, before the
    workers start; note= is not told it. With memory enough, no such note."""
    import contextlib
    import warnings

    from abm.calibration import optimize
    from abm.calibration.observed import CalibrationError
    from abm.scenario_notes import ScenarioNote

    started: list[int] = []

    def stop(*args, **kwargs):
        started.append(1)
        raise CalibrationError("stopped after the note")

    monkeypatch.setattr(memory, "cuda_available", lambda: False)
    monkeypatch.setattr(memory, "available_memory_bytes", lambda: 1e9)
    monkeypatch.setattr(optimize, "_run_study", stop)
    monkeypatch.setattr(optimize, "ProcessPool", lambda *a: pytest.fail("the workers started"))
    out = tmp_path / "cal"
    with warnings.catch_warnings():
        warnings.simplefilter("error", ScenarioNote)
        with pytest.raises(ScenarioNote) as raised:
            abm.calibrate(CALIBRATION, out, agents=2000, workers=2)
    assert str(raised.value) == (
        "2 runs at once (workers=2), each of 2,000 agents x 10 replicates, need about 1.1 GB; this machine has 1.0 "
        "GB available: they may be killed for memory (use fewer workers, agents or calibration.rerank_replicates)"
    )
    assert started == [] and not out.exists()

    monkeypatch.setattr(optimize, "ProcessPool", lambda *a: contextlib.nullcontext())  # _run_study stops
    for available, notes in ((1e9, [str(raised.value)]), (64e9, [])):
        monkeypatch.setattr(memory, "available_memory_bytes", lambda available=available: available)
        told: list[str] = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(CalibrationError, match="stopped after the note"):
                abm.calibrate(CALIBRATION, out, agents=2000, workers=2, note=told.append)
        given = [w for w in caught if issubclass(w.category, ScenarioNote)]
        assert [str(w.message) for w in given] == notes and all(w.filename == __file__ for w in given)
        assert told == []


CPU_ALLOCATOR = "DefaultCPUAllocator: can't allocate memory: you tried to allocate 123 bytes"


def test_a_failed_cpu_allocation_is_one_message_and_nothing_written(small, monkeypatch):
    """torch's CPU allocator failing (a RuntimeError, known by its message) is the GPU's one
    message naming the size, exit code 2, and no output folder (nor a staging one)."""
    from abm.engine import Simulation

    def cannot_allocate(self, progress=None):
        raise RuntimeError(f"[enforce fail at alloc_cpu.cpp:127] err == 0. {CPU_ALLOCATOR}. Error code 12")

    monkeypatch.setattr(Simulation, "run", cannot_allocate)
    out = small.parent / "o"
    result = runner.invoke(app, ["run", str(small), "--days", "5", "--out", str(out)])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: {small} (with --days 5): population.agents: 2000 agents x 1 replicate do not fit in the memory of "
        "cpu; use fewer agents or replicates"
    ], result.output
    assert "Traceback" not in result.output
    assert sorted(p.name for p in small.parent.iterdir()) == ["small.yaml"]


def test_a_memory_error_building_the_population_is_the_same_message(monkeypatch):
    from abm import runs

    def cannot_allocate(*args, **kwargs):
        raise MemoryError("Unable to allocate 1.90 GiB for an array with shape (255494377,) and data type int64")

    monkeypatch.setattr(runs, "population_of", cannot_allocate)
    with pytest.raises(ScenarioError) as err, fixed_seeds_note():
        abm.run(NI, agents=300, replicates=3, days=3)
    assert str(err.value) == (
        "ni: population.agents: 300 agents x 3 replicates do not fit in the memory of cpu; use fewer agents or "
        "replicates"
    )


def test_another_runtime_error_keeps_its_traceback(small, monkeypatch):
    from abm.engine import Simulation

    def fails(self, progress=None):
        raise RuntimeError("shape mismatch: value tensor of shape [3] cannot be broadcast to [4]")

    monkeypatch.setattr(Simulation, "run", fails)
    result = runner.invoke(app, ["run", str(small), "--days", "5", "--out", str(small.parent / "o")])
    assert isinstance(result.exception, RuntimeError) and "shape mismatch" in str(result.exception)
    assert "do not fit in the memory" not in result.output
    assert memory.cpu_allocation_failed(RuntimeError(CPU_ALLOCATOR))
    assert not memory.cpu_allocation_failed(RuntimeError("CUDA error: an illegal memory access was encountered"))
    assert not memory.cpu_allocation_failed(ValueError(CPU_ALLOCATOR))
