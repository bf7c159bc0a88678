"""Shared builders for tests: tiny hand-made populations and quiet engine settings."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from abm.engine import ContactConfig, DiseaseConfig, SeedingConfig, Simulation
from abm.engine.contacts import default_degrees
from abm.populations import Population, build_population, load_region
from abm.populations.population import LONG_TERM_CARE, SCHOOL
from abm.scenario_notes import ScenarioNote

ROOT = Path(__file__).resolve().parents[1]

# Tests name scenario files relative to the repository root (scenarios/king_county/...), as the
# README's commands do; running pytest from another folder (`pytest /path/to/repo/tests`) works too.
os.chdir(ROOT)


@pytest.fixture(scope="session", autouse=True)
def _torch_cache_in_tmp(tmp_path_factory) -> Iterator[None]:
    """torch's compile cache under pytest's temporary folder, for this process and the commands
    the tests start: torch makes it (``$TMPDIR/torchinductor_$USER``, empty) as soon as an
    optimizer is built, in every learning run."""
    if "TORCHINDUCTOR_CACHE_DIR" in os.environ or "torch._dynamo" in sys.modules:  # the user's, or set already
        yield
        return
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(tmp_path_factory.mktemp("torchinductor"))
    try:
        yield
    finally:
        os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)


@pytest.fixture(scope="module", autouse=True)
def _private_calibration_on_one_torch_thread(request) -> Iterator[None]:
    """Private calibration's tests run torch on one thread (their figures were measured so),
    each module from its first fixture on, and the worker's setting is put back after the
    module: they set it and left it, so that every later test of the worker ran on one thread,
    and a test of another module of theirs ran on one or on all, as the order of the tests had it."""
    if "private_calibration" not in request.path.parts:
        yield
        return
    from abm.threads import torch_threads

    with torch_threads(1):
        yield


@pytest.fixture(autouse=True)
def _close_pyplot_figures() -> Iterator[None]:
    """Each test's pyplot figures are closed after it (``RunResult.plot()`` draws through pyplot, and
    writing a run no longer switches pyplot's backend, which used to close them), so figures do not
    pile up in a worker process from one test to the next."""
    yield
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        pyplot.close("all")


def fixed_seeds_note(seeds: int = 5) -> pytest.WarningsRecorder:
    """Expect the note that a scenario's ``seeds`` initial infections stay ``seeds`` at any number
    of agents, which :func:`abm.run` and :func:`abm.run_sweep` give on a King County file of 100,000
    agents run at the fewer agents a test asks for speed (``with fixed_seeds_note(): ...``). Any
    other note still fails the test (pyproject.toml's filterwarnings make ScenarioNote an error)."""
    return pytest.warns(ScenarioNote, match=rf"^seeding\.infections seeds {seeds} agents whatever the population: ")


def make_population(
    households: list[list[int]], groups: list[list[int]] | None = None, ages: list[int] | None = None
) -> Population:
    """A population from explicit households (lists of consecutive agent ids, in order) and
    occupation groups (lists of agent ids). Everyone is 30 unless ``ages`` says otherwise, and
    lives in one tract."""
    n = sum(len(h) for h in households)
    assert [a for h in households for a in h] == list(range(n)), "households must list 0..n-1 in order"
    age = np.array(ages if ages is not None else [30] * n, dtype=np.int16)
    size = np.array([len(h) for h in households], dtype=np.int32)
    group = np.full(n, -1, dtype=np.int32)
    for g, members in enumerate(groups or []):
        group[members] = g
    return Population(
        age=age,
        age_group=np.minimum(age // 10, 8).astype(np.int8),
        tract=np.zeros(n, dtype=np.int32),
        household=np.repeat(np.arange(len(households)), size).astype(np.int32),
        household_start=(np.cumsum(size) - size).astype(np.int64),
        household_size=size,
        long_term_care=np.zeros(n, dtype=bool),
        group=group,
        group_category=np.zeros(len(groups or []), dtype=np.int16),
        categories=["OFFICE", SCHOOL, LONG_TERM_CARE],
        tracts=pd.DataFrame(
            {
                "geoid": ["00000000001"],
                "name": ["1"],
                "lat": [47.6],
                "lon": [-122.3],
                "land_km2": [1.0],
                "residents": [n],
                "agents": [n],
            }
        ),
        region_name="test",
    )


def tiny_learning(folder: Path, **over: Any) -> Path:
    """A learning scenario file of a second in ``folder``: iris, two participants, two rounds of
    FedAvg scored on the global test set; ``over`` replaces top-level keys."""
    scenario = {
        "name": "tiny",
        "seed": 0,
        "data": {"source": "iris"},
        "split": {"participants": 2},
        "models": [{"kind": "mlp", "hidden": [8], "batchnorm": False}],
        "rounds": 2,
        "evaluate_on": "global",
        "protocols": [{"name": "fedavg"}],
        **over,
    }
    path = folder / "tiny.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path


def tiny_calibration(tmp_path: Path, trials: int = 14, agents: int = 3000, rerank_trials: int = 2) -> Path:
    """A calibration scenario file with one free parameter (the transmission rate), fitted to
    the shipped King County admissions over 60 days of 3,000 agents: a trial takes a fraction of
    a second. ``rerank_trials`` best trials are re-run with 2 replicates."""
    calibration = {
        "targets": ["hospital_admissions"],
        "fit_window": ["2020-03-01", "2020-03-31"],
        "holdout_window": None,
        "parameters": {"disease.transmission_rate": {"low": 2.0, "high": 6.0}},
        "trials": trials,
        "seed": 3,
    }
    if rerank_trials:
        calibration.update(rerank_trials=rerank_trials, rerank_replicates=2)
    scenario = {
        "name": "tiny",
        "population": {"agents": agents},
        "simulation": {"days": 60, "replicates": 1, "seed": 5},
        "seeding": {"day": 3, "infections": {"asymptomatic": 30}},
        "calibration": calibration,
    }
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path


def calibration_names_unlisted(out: Path) -> list[str]:
    """The keys of a calibration folder's calibration.json and the columns of its CSV files that
    docs/calibration.md's table of files does not name in backticks (trials.csv's per-parameter
    columns as the table names them: `params_<key>`, `user_attrs_*`, `rerank_<key>`)."""
    import json
    import re

    doc = (Path(__file__).resolve().parents[1] / "docs" / "calibration.md").read_text()
    table = doc[: doc.index("## Methods")]
    info = json.loads((out / "calibration.json").read_text())
    names = set(info) | {"weekly_transmission_multipliers"} & set(info["best_parameters"])
    names |= {k for window in ("fit", "holdout") for losses in (info[window] or {}).values() for k in losses}
    names |= {k for entry in info.get("reranked") or [] for k in entry}
    for csv in ("trials.csv", "steps.csv", "fit_weekly.csv"):
        if (out / csv).exists():
            names |= set(pd.read_csv(out / csv, nrows=0).columns)
    patterns = {
        r"^params_.+": "params_<key>",
        r"^user_attrs_.+": "user_attrs_*",
        r"^rerank_(?!loss_fit$).+": "rerank_<key>",
    }
    named = {next((v for k, v in patterns.items() if re.match(k, n)), n) for n in names}
    return sorted(n for n in named if f"`{n}`" not in table)


def quiet_contacts(**layers: dict) -> ContactConfig:
    """Contact settings with every layer off unless given."""
    base = {
        "household": {"weight": 0.0},
        "occupation": {"weight": 0.0, "rewire_probability": 0.0, "degree": {**default_degrees(), "OFFICE": 2}},
        "community": {"weight": 0.0, "mean_contacts": (0, 0, 0), "sd_contacts": (0, 0, 0)},
    }
    for name, cfg in layers.items():
        base[name] = {**base[name], **cfg}
    return ContactConfig.model_validate(base)


NO_SEEDS = SeedingConfig(infections={})


def sim_of(pop, interventions, replicates=1, days=30, contacts=None, seed=1, disease=None) -> Simulation:
    """A simulation of ``pop`` with ``interventions``, no seeded infections and (unless given)
    every contact layer off and the default disease."""
    return Simulation(
        pop,
        disease or DiseaseConfig(),
        contacts or quiet_contacts(),
        NO_SEEDS,
        days=days,
        replicates=replicates,
        seed=seed,
        interventions=interventions,
    )


def caller_ray(num_cpus: int) -> Iterator[ModuleType]:
    """A local Ray of ``num_cpus`` CPUs started by the caller, as a Python user would, so that
    abm uses it and leaves it running; shut down at the end (a module fixture's body). A new
    local one ("local"), whatever RAY_ADDRESS or a `ray start` cluster on this machine says (Ray
    would join that, and refuse ``num_cpus``). Its session folder is removed after it."""
    ray = pytest.importorskip("ray")
    from abm.ray_sessions import ray_sessions_removed

    with ray_sessions_removed(ray):  # Ray's session folder goes with it
        ray.init(
            address="local",
            num_cpus=num_cpus,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.WARNING,
        )
        try:
            yield ray
        finally:
            ray.shutdown()


@pytest.fixture
def ray_temp(monkeypatch) -> Iterator[Path]:
    """An empty folder for the temporary files of the Rays the test starts (RAY_TMPDIR; a new
    local Ray, whatever RAY_ADDRESS says), removed after the test. A short one in /tmp rather
    than under tmp_path: the paths of Ray's sockets in it must stay within 107 bytes (AF_UNIX)."""
    folder = Path(tempfile.mkdtemp(prefix="abm-", dir="/tmp"))
    monkeypatch.setenv("RAY_TMPDIR", str(folder))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def king_county():
    return load_region("king_county")


@pytest.fixture(scope="session")
def kc_100k(king_county):
    return build_population(king_county, 100_000, seed=7)


@pytest.fixture(autouse=True)
def _interrupt_state_restored() -> Iterator[None]:
    """Each test starts with nothing noted in abm.interrupts, and ends with it cleared and with
    Ctrl-C and SIGTERM handled as before the test: a command run in the test process (typer's
    CliRunner, abm.cli.main, abm.entry's handler called directly) notes there that it wrote its
    output, was interrupted or said so, and a note left by an earlier test made a later one's
    output look interrupted (removed at the end of its write) or its Ctrl-C ignored."""
    from abm import interrupts

    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    interrupts.reset()
    yield
    interrupts.reset()
    for signum, handler in handlers.items():
        if handler is not None:
            signal.signal(signum, handler)


@pytest.fixture(autouse=True)
def _no_fast_exit(monkeypatch):
    """abm's console script ends its process without the interpreter's teardown (abm.entry):
    a test that ran it in the test process would end pytest, with exit code 0 and tests unrun.
    Here that exit raises SystemExit instead, as a normal exit would."""
    import abm.entry

    def leave(code: int) -> None:
        raise SystemExit(code)

    monkeypatch.setattr(abm.entry, "_leave", leave)


def linear_participants(sizes: list[int], holdout: int = 2) -> list:
    """Learning participants with a linear model on ``sizes`` training rows each (``holdout``
    validation and test rows), one full batch per epoch and plain SGD (lr 0.1)."""
    import torch
    from torch import nn

    from abm.learning.data import Dataset
    from abm.learning.participant import Participant
    from abm.learning.partition import ParticipantData
    from abm.learning.training import TrainConfig

    def data(n: int, seed: int) -> Dataset:
        g = torch.Generator().manual_seed(seed)
        return Dataset(torch.randn(n, 3, generator=g), torch.randint(0, 2, (n,), generator=g))

    out = []
    for k, n in enumerate(sizes):
        torch.manual_seed(100 + k)
        part = ParticipantData(data(n, k), data(holdout, 10 + k), data(holdout, 20 + k))
        out.append(Participant(k, part, nn.Linear(3, 2), TrainConfig("sgd", 0.1, 0.0, 0.0, 64), seed=k))
    return out


def diverging_builder(k: int, lr: float = 1e8):
    """A stand-in for ``abm.learning.runner.build_participant`` (set it with monkeypatch) that
    builds every participant as the runner does, but participant ``k`` trains at learning rate
    ``lr`` (the others' kept): with 10^8 its training diverges in its first round."""
    import dataclasses

    import abm.learning.runner as runner
    from abm.learning.training import make_optimizer

    built = runner.build_participant

    def build(scenario, data, models, i):
        p = built(scenario, data, models, i)
        if i == k:
            p.train_config = dataclasses.replace(p.train_config, lr=lr)
            p.optimizer = make_optimizer(p.model.parameters(), p.train_config)
        return p

    return build


def write_small_scenario(folder: Path) -> Path:
    """``folder/small.yaml``: King County's base scenario with 2,000 agents, 6 days and one
    replicate (a run of it takes a few seconds, most of them drawing its plots and map)."""
    path = folder / "small.yaml"
    base = ROOT / "scenarios/king_county/base.yaml"
    path.write_text(
        f"extends: {base}\nname: small\npopulation: {{agents: 2000}}\nsimulation: {{days: 6, replicates: 1}}\n"
    )
    return path


def _abm(*args: str | Path) -> None:
    """``abm ARGS`` run in this process (typer's CliRunner), which must succeed."""
    from typer.testing import CliRunner

    from abm.cli import app

    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="session")
def small_run_folder(tmp_path_factory) -> Path:
    """A run folder written once by ``abm run small.yaml`` (write_small_scenario, its own seed),
    for tests that need an earlier run in place. Read-only: a test that changes it, or writes
    over it, works on a copy (copy_output)."""
    root = tmp_path_factory.mktemp("small_run")
    _abm("run", write_small_scenario(root), "--out", root / "a")
    return root / "a"


@pytest.fixture(scope="session")
def small_comparison(small_run_folder) -> dict[str, Path]:
    """Two runs of the small scenario, ``a`` (small_run_folder) and ``b`` (seed 2), side by side
    with ``cmp``, written once by ``abm compare a b``. Read-only, as small_run_folder is."""
    root = small_run_folder.parent
    _abm("run", root / "small.yaml", "--seed", "2", "--out", root / "b")
    _abm("compare", root / "a", root / "b", "--out", root / "cmp")
    return {name: root / name for name in ("a", "b", "cmp")}


def copy_output(folder: Path, dest: Path) -> Path:
    """A copy of the output folder ``folder`` at ``dest``, as abm wrote it: the mark lists entries
    by their paths within the folder and records their contents, which a copy keeps."""
    shutil.copytree(folder, dest, symlinks=True)
    return dest


@pytest.fixture
def builds(monkeypatch) -> dict[str, int]:
    """How many populations and community networks abm.runs builds from here on (those of
    :class:`abm.runs.Reuse` among them), by ``population`` and ``community``."""
    import abm.runs as runs

    built = {"population": 0, "community": 0}

    def counted(name, fn):
        def wrapper(*args, **kwargs):
            built[name] += 1
            return fn(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(runs, "population_of", counted("population", runs.population_of))
    monkeypatch.setattr(runs, "community_layer", counted("community", runs.community_layer))
    return built


def running(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, ended but not yet reaped, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def marked_processes(marker: str) -> list[int]:
    """The running processes whose environment holds ``ABM_TEST_MARK=marker``: a command started
    with it, and every process it started, Ray's too (they inherit the environment, whatever
    process group or session they are in)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and f"ABM_TEST_MARK={marker}".encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:  # ended meanwhile, or another user's
            continue
    return [pid for pid in found if running(pid)]


def assert_marked_end(marker: str, seconds: float) -> None:
    """No process marked ``marker`` (:func:`marked_processes`) runs ``seconds`` from now, at the latest
    (those that do are killed, and the test fails)."""
    deadline = time.monotonic() + seconds
    while alive := marked_processes(marker):
        if time.monotonic() > deadline:
            for pid in alive:
                os.kill(pid, signal.SIGKILL)
            raise AssertionError(f"processes of the command outlived it: {alive}")
        time.sleep(0.2)


def command_line(pid: int) -> str:
    """Process ``pid``'s name as it shows it (Ray's workers: ``ray::IDLE``, ...); empty once it has ended."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return ""
