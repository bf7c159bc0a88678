"""Intervention plug-ins end to end (docs/plugins.md): the example plug-in in
examples/plugin_intervention is installed into a temporary folder as pip would (the module and a
dist-info folder with its entry point, without pip or a network) and used through ``python -m abm``
in a subprocess whose PYTHONPATH starts with that folder."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from conftest import make_population, sim_of, tiny_calibration

from abm.engine import Phase, Simulation, Stage
from abm.engine.config import RESULT_COLUMNS
from abm.interventions.quarantine import Quarantine, QuarantineConfig
from abm.interventions.registry import InterventionBase
from abm.outputs.tables import timeseries

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "plugin_intervention"
BASE = ROOT / "scenarios" / "king_county" / "no_intervention.yaml"
CALIBRATION = ROOT / "scenarios" / "king_county" / "calibrate_2020.yaml"
PRIVATE_CALIBRATION = ROOT / "tests" / "private_calibration" / "tiny.yaml"
RUN = ["--agents", "2000", "--days", "30", "--replicates", "2"]
AGENTS = 2000


def entry_point() -> tuple[str, str]:
    """The name and object of the example's one ``abm.interventions`` entry point (pyproject.toml)."""
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    ((name, target),) = project["entry-points"]["abm.interventions"].items()
    return name, target


def install(site: Path, target: str | None = None) -> Path:
    """Install the example plug-in into ``site`` as pip would: its module and a dist-info folder
    whose entry_points.txt declares the ``abm.interventions`` entry point of its pyproject.toml
    (pointing at ``target`` when given)."""
    site.mkdir(parents=True, exist_ok=True)
    shutil.copy(EXAMPLE / "abm_mask_directive.py", site)
    info = site / "abm_mask_directive-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: abm-mask-directive\nVersion: 0.1\n")
    name, declared = entry_point()
    target = target or declared
    (info / "entry_points.txt").write_text(f"[abm.interventions]\n{name} = {target}\n")
    return site


def python(args: list[str], site: Path | None) -> subprocess.CompletedProcess:
    """``python *args`` with ``site`` (when given) first on PYTHONPATH, the rest of it kept."""
    env = dict(os.environ)
    path = [str(site)] if site is not None else []
    path += [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(path)
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, cwd=ROOT, timeout=300)


def abm(site: Path | None, *args: str | Path) -> subprocess.CompletedProcess:
    """``python -m abm *args``, with the plug-in installed when ``site`` is given."""
    return python(["-m", "abm", *map(str, args)], site)


def scenario(folder: Path, name: str, masks: dict | None, **extra: object) -> Path:
    """A scenario file extending King County's no-intervention scenario, with 20 initial
    infections (a clear epidemic in 30 days at 2,000 agents) and ``masks`` as the plug-in's
    settings (absent when None)."""
    data: dict = {"extends": str(BASE), "name": name, "seeding": {"infections": {"asymptomatic": 20}}, **extra}
    if masks is not None:
        data["interventions"] = {"mask_directive": masks}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_example_declares_its_entry_point():
    assert entry_point() == ("mask_directive", "abm_mask_directive:MaskDirective")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    return install(tmp_path_factory.mktemp("site"))


@pytest.fixture(scope="module")
def runs(site, tmp_path_factory) -> dict[str, Path]:
    """Run folders of the same scenario and seed: without the plug-in's key ("off"), with masks
    that change nothing (efficacy 0: the multiplier is exactly 1) and cost $0.5 a mask-day from
    day 5 ("neutral"), and with strong masks ("strong")."""
    folder = tmp_path_factory.mktemp("runs")
    settings = {
        "off": None,
        "neutral": {"start_day": 5, "adoption": 0.7, "efficacy": 0.0, "cost_per_mask_day": 0.5},
        "strong": {"adoption": 1.0, "efficacy": 0.9},
    }
    out = {}
    for name, masks in settings.items():
        out[name] = folder / name
        done = abm(site, "run", scenario(folder, name, masks), *RUN, "--out", out[name])
        assert done.returncode == 0, done.stderr
    return out


def test_validate_accepts_the_plugins_settings_and_shows_them(site, tmp_path):
    masks = {"start_day": 5, "adoption": 0.8, "efficacy": 0.6, "cost_per_mask_day": 0.25}
    done = abm(site, "validate", "--show", scenario(tmp_path, "masks", masks))
    assert done.returncode == 0, done.stderr
    assert "is valid" in done.stderr
    shown = yaml.safe_load(done.stdout)["interventions"]
    assert shown == {"mask_directive": {"enabled": True, **masks}}


def test_validate_refuses_a_bad_value_naming_its_key(site, tmp_path):
    done = abm(site, "validate", scenario(tmp_path, "masks", {"efficacy": 1.5}))
    assert done.returncode == 2
    assert "interventions.mask_directive.efficacy: 1.5 is not allowed" in done.stderr


def test_a_plugins_note_names_its_key(site, tmp_path):
    """A plug-in's class is registered under its entry point's name, which its messages use as
    ``cls.name`` (it was empty for a plug-in: the note read "interventions..adoption")."""
    done = abm(site, "validate", scenario(tmp_path, "masks", {"adoption": 0}))
    assert done.returncode == 0, done.stderr
    assert "interventions.mask_directive.adoption is 0: no one wears a mask" in done.stderr


def test_without_the_plugin_its_key_is_unknown(tmp_path):
    done = abm(None, "validate", scenario(tmp_path, "masks", {"efficacy": 0.5}))
    assert done.returncode == 2
    assert "interventions.mask_directive: unknown key" in done.stderr


@pytest.mark.parametrize(
    ("target", "problem"),
    [
        ("abm_mask_directive:MaskDirectve", "cannot be loaded: AttributeError: module 'abm_mask_directive' has no"),
        ("abm_mask_directive:MaskDirectiveConfig", "is not an intervention: it must name a class whose config_model"),
    ],
)
def test_a_broken_plugin_is_named_in_one_line(tmp_path, target, problem):
    """An entry point that names no intervention class: one line naming the plug-in, exit code 2
    (it was a traceback ending in "cannot import name 'InterventionsConfig'", or in the plug-in's
    own AttributeError)."""
    site = install(tmp_path / "site", target)
    done = abm(site, "validate", scenario(tmp_path, "masks", None))
    assert done.returncode == 2
    expected = f"error: the abm.interventions plug-in 'mask_directive' ({target}, from abm-mask-directive 0.1) "
    assert done.stderr.startswith(expected + problem), done.stderr
    assert "Traceback" not in done.stderr


def test_the_plugin_module_may_be_imported_first(site):
    """A program (or a plug-in's own test) that imports the plug-in before abm's scenario model
    gets the plug-in in the model: loading the entry points while the plug-in module was being
    imported failed ("partially initialized module 'abm_mask_directive'")."""
    code = (
        "import abm_mask_directive\n"
        "from abm.scenario import Scenario\n"
        "section = Scenario.model_fields['interventions'].annotation\n"
        "assert section.model_fields['mask_directive'].annotation == abm_mask_directive.MaskDirectiveConfig | None\n"
    )
    done = python(["-c", code], site)
    assert done.returncode == 0, done.stderr


def test_the_run_keeps_the_plugins_settings(runs):
    resolved = yaml.safe_load((runs["neutral"] / "scenario.resolved.yaml").read_text())
    assert resolved["interventions"] == {
        "mask_directive": {"enabled": True, "start_day": 5, "adoption": 0.7, "efficacy": 0.0, "cost_per_mask_day": 0.5}
    }
    assert "mask_directive" not in yaml.safe_load((runs["off"] / "scenario.resolved.yaml").read_text())["interventions"]


def test_the_plugins_costs_and_daily_counts(runs):
    """From day 5, floor(0.7 x living agents) masks a day per replicate, counted in the timeseries
    column masks_worn and booked at $0.5 each in costs.csv and the total cost."""
    ts = pd.read_csv(runs["neutral"] / "timeseries.csv")
    costs = pd.read_csv(runs["neutral"] / "costs.csv")
    # The hook runs before the day's progression: the dead are those at the end of the day before.
    dead_before = ts.groupby("replicate")["deaths"].shift(1, fill_value=0)
    expected = [
        0 if day < 5 else math.floor((AGENTS - dead) * 0.7) for day, dead in zip(ts["day"], dead_before, strict=True)
    ]
    assert ts["masks_worn"].tolist() == expected
    assert set(costs["item"]) == {"mask_day"}
    booked = ts[ts["day"] >= 5].merge(costs, on=["day", "replicate"], how="outer", validate="1:1")
    assert len(booked) == 2 * 25
    assert (booked["count"] == booked["masks_worn"]).all()
    assert (booked["unit_cost"] == 0.5).all()
    assert (booked["cost"] == booked["count"] * 0.5).all()
    summary = json.loads((runs["neutral"] / "summary.json").read_text())
    assert summary["total_cost"]["mean"] == pytest.approx(costs["cost"].sum() / 2)


def test_masks_that_change_no_contact_leave_the_epidemic_as_it_was(runs):
    """Efficacy 0 multiplies the layers by exactly 1: the same seed gives the same epidemic, count
    for count, as the run without the plug-in."""
    off = pd.read_csv(runs["off"] / "timeseries.csv")
    neutral = pd.read_csv(runs["neutral"] / "timeseries.csv").drop(columns="masks_worn")
    pd.testing.assert_frame_equal(neutral, off)
    assert off["new_infections"].sum() > 100  # an epidemic to compare


def test_strong_masks_mean_fewer_infections(runs):
    """Contacts outside the home at a tenth of their weight: far fewer infections in each replicate
    (about 55 against 275 at this seed)."""
    infected = {k: pd.read_csv(runs[k] / "timeseries.csv").groupby("replicate")["new_infections"].sum() for k in runs}
    assert (infected["strong"] < 0.5 * infected["off"]).all(), infected


def test_the_scenario_reference_documents_the_plugin(site):
    """The docs' reference generator lists a plug-in's section with its bounds."""
    done = python(["-m", "abm.outputs.schema_doc"], site)
    assert done.returncode == 0, done.stderr
    assert "## `interventions.mask_directive`" in done.stdout
    assert "| `efficacy` | float | `0.5` | >= 0, < 1 |" in done.stdout


def test_data_schema_holds_the_installed_plugins_settings(site):
    """`abm data schema` gives an editor the plug-in's section, with its bounds and its key
    refused where misspelt; the schema the examples carry (built-in interventions only) is the
    same with the plug-in installed."""
    done = abm(site, "data", "schema")
    assert done.returncode == 0, done.stderr
    schema = json.loads(done.stdout)
    section = schema["definitions"]["InterventionsConfig"]
    assert "mask_directive" in section["properties"] and section["additionalProperties"] is False
    masks = next(d for d in schema["definitions"].values() if "cost_per_mask_day" in d.get("properties", {}))
    assert masks["properties"]["efficacy"]["minimum"] == 0 and masks["properties"]["efficacy"]["exclusiveMaximum"] == 1
    shipped = (ROOT / "scenarios" / "schemas" / "epidemic.schema.json").read_text(encoding="utf-8")
    code = "import sys; from abm.scenario_schemas import schema_text; sys.stdout.write(schema_text('epidemic', False))"
    built_in = python(["-c", code], site)
    assert built_in.returncode == 0, built_in.stderr
    assert built_in.stdout == shipped and "mask_directive" not in shipped


class HalveCommunity(InterventionBase):
    """A hook that halves the community layer's multiplier each day, as a plug-in may."""

    name = "halve_community"

    def __init__(self) -> None:
        super().__init__(None)
        self.seen: list[float] = []

    def hooks(self) -> dict:
        return {Phase.TRANSMISSION: self.halve}

    def halve(self, sim: Simulation, day: int) -> None:
        sim.layer_scale["community"] *= 0.5
        self.seen.append(sim.layer_scale["community"])


def test_layer_multipliers_start_each_day_at_1():
    """A hook may multiply a layer's multiplier: it applies to that day only (without
    contact_multipliers, which set every layer each day, it compounded: 0.5, 0.25, 0.125...)."""
    halve = HalveCommunity()
    sim_of(make_population([[0, 1], [2, 3]]), [halve], days=4).run()
    assert halve.seen == [0.5] * 4


def test_each_built_in_is_registered_by_its_settings_and_built_as_its_runner():
    """The built-ins are registered by classes that hold their settings and checks only
    (abm.interventions.config, without torch, for `abm validate`); a run builds the subclass their
    runner_path names, with their name, order and needs. A class without runner_path (a plug-in),
    or a subclass of a runner (a plug-in built on a built-in), runs itself."""
    from abm.interventions import registered
    from abm.interventions.testing import Testing
    from abm.scenario import validate

    for name, spec in registered().items():
        runner = spec.runner()
        assert issubclass(runner, spec) and runner.runner() is runner, name
        assert (runner.name, runner.order, runner.needs) == (name, spec.order, spec.needs)
        assert spec.__module__.startswith("abm.interventions.config.") == (runner is not spec), name
    sc = validate({"name": "x", "interventions": {"testing": {}, "quarantine": {}}}, "x.yaml")
    assert [type(iv).__name__ for iv in sc.interventions.build()] == ["Quarantine", "Testing"]
    assert HalveCommunity.runner() is HalveCommunity

    class RetestingPlugin(Testing):
        pass

    assert RetestingPlugin.runner() is RetestingPlugin


class DailyCount(InterventionBase):
    """A hook that declares the daily count ``column`` and counts 1 a day in every replicate."""

    def __init__(self, column: str) -> None:
        super().__init__(None)
        self.column = column

    def attach(self, sim: Simulation) -> None:
        sim.declare_activity(self.column)

    def hooks(self) -> dict:
        return {Phase.RECORDING: self.count}

    def count(self, sim: Simulation, day: int) -> None:
        sim.count_activity(self.column, day, torch.ones(sim.replicates, dtype=torch.int64))


@pytest.mark.parametrize("column", ["day", "date", "deaths", "susceptible", "reproduction_number"])
def test_a_daily_count_may_not_take_a_column_the_engine_fills(column):
    """docs/plugins.md: a plug-in's count named as an engine column is refused (it replaced the
    column, "day" or "deaths" say, was replaced by it, reproduction_number, or made writing the
    run folder fail with "cannot insert date, already exists" under simulation.start_date)."""
    with pytest.raises(ValueError, match=f"declare_activity: '{column}' is a column of timeseries.csv"):
        sim_of(make_population([[0, 1]]), [DailyCount(column)], days=2)


def test_the_engine_columns_are_those_of_the_timeseries():
    """RESULT_COLUMNS, which declare_activity refuses, names every column the timeseries has
    besides the interventions' counts (date: only with a start date)."""
    res = sim_of(make_population([[0, 1]]), [DailyCount("plugin_count")], replicates=2, days=3).run()
    columns = list(timeseries(res).columns)
    assert columns.count("plugin_count") == 1
    assert [c for c in columns if c != "plugin_count"] == [c for c in RESULT_COLUMNS if c != "date"]


def test_two_interventions_that_declare_one_count_add_to_it():
    """docs/plugins.md: a count declared by two interventions is one column, their sum."""
    res = sim_of(make_population([[0, 1]]), [DailyCount("shared"), DailyCount("shared")], days=3).run()
    assert timeseries(res)["shared"].tolist() == [2, 2, 2]


class IsolateAgentOne(InterventionBase):
    """A plug-in that isolates agent 1 before day 0 and keeps it isolated (it never releases it)."""

    order = -1

    def __init__(self) -> None:
        super().__init__(None)

    def attach(self, sim: Simulation) -> None:
        sim.state.isolated[1] = True


@pytest.mark.parametrize("persistence", ["full", "entry_day"])
def test_quarantine_leaves_alone_the_agents_a_plugin_isolated(persistence):
    """docs/plugins.md: quarantine keeps its own list of the agents it isolated and releases only
    those. Agent 1 (infectious, mild) is isolated by a plug-in; quarantine has no one to hold.
    Quarantine took every agent isolated before its first day for its own, with a quarantine
    already over (so it released agent 1 on day 0 and made it no longer infectious), and entry_day
    quarantine released every isolated agent at the end of each day."""
    q = Quarantine(QuarantineConfig(persistence=persistence, daily_dropout=0.0))
    sim = sim_of(make_population([[0], [1]]), [q, IsolateAgentOne()], days=3)
    sim.state.stage[1] = int(Stage.MILD_SYMPTOMS)
    sim.state.infected_day[1] = 0
    sim.state.next_day[1] = 10_000
    sim.rescan()
    for day in range(3):
        sim.step(day)
        assert sim.state.isolated.tolist() == [False, True], day
    assert sim.state.infectiousness_scale[1] == 1.0
    assert sim.activity["in_quarantine"][:, 0].tolist() == [0, 0, 0]


FAILING_PLUGIN = """
from pydantic import BaseModel, ConfigDict

from abm.engine import Phase
from abm.interventions.registry import InterventionBase


class SickLeaveConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    fail_in: str = "hook"
    day: int = 3


class SickLeave(InterventionBase):
    config_model = SickLeaveConfig

    def attach(self, sim):
        if self.cfg.fail_in == "attach":
            raise RuntimeError("no sick-leave register")
        if self.cfg.fail_in == "scenario":
            from abm.scenario import ScenarioError

            raise ScenarioError("interventions.sick_leave.day: too late for this population")

    def hooks(self):
        return {Phase.TRANSMISSION: self.apply}

    def apply(self, sim, day):
        if day == self.cfg.day:
            raise ValueError(f"no beds for agent {day + 4}")
"""


@pytest.fixture(scope="module")
def failing_site(tmp_path_factory) -> Path:
    """A plug-in ``sick_leave`` whose code raises: in attach, or in its TRANSMISSION hook on a day."""
    site = tmp_path_factory.mktemp("failing_site")
    (site / "abm_sick_leave.py").write_text(FAILING_PLUGIN)
    info = site / "abm_sick_leave-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: abm-sick-leave\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[abm.interventions]\nsick_leave = abm_sick_leave:SickLeave\n")
    return site


def sick_leave(folder: Path, **settings: object) -> Path:
    path = folder / "sick.yaml"
    path.write_text(yaml.safe_dump({"extends": str(BASE), "name": "sick", "interventions": {"sick_leave": settings}}))
    return path


FAILURES = {
    "hook": (
        {"day": 3},
        "the plug-in 'sick_leave' failed in its TRANSMISSION hook (SickLeave.apply) on day 3: "
        "ValueError: no beds for agent 7",
        ['    raise ValueError(f"no beds for agent {day + 4}")', "ValueError: no beds for agent 7"],
    ),
    "attach": (
        {"fail_in": "attach"},
        "the plug-in 'sick_leave' failed in attach, before day 0: RuntimeError: no sick-leave register",
        ['    raise RuntimeError("no sick-leave register")', "RuntimeError: no sick-leave register"],
    ),
}


def assert_plugin_failure(
    done: subprocess.CompletedProcess, command: str, out: Path, where: str, run: str | None = None
) -> None:
    """One line naming the plug-in, the run it failed in where the command runs several (``run``,
    a regular expression: a sweep's variant, a calibration's trial), its hook, the day and the
    error; what became of the output; then the plug-in's traceback as Python prints it, from its
    own frame (no rich traceback with local variables, no frame of abm's engine above it); exit
    code 1 and no output folder."""
    _, line, ending = FAILURES[where]
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    head, tail = line.split(" failed in ", 1)
    expected = re.escape(f"abm {command}: {head} failed in ") + (f"{run}, in " if run else "") + re.escape(tail)
    start = next((i for i, x in enumerate(lines) if re.fullmatch(expected, x)), None)
    assert start is not None, (expected, done.stderr)
    assert lines[start + 1] == f"no results were written to {out}; the plug-in's traceback follows"
    assert lines[start + 2] == "Traceback (most recent call last):"
    assert lines[start + 3].startswith('  File "') and "abm_sick_leave.py" in lines[start + 3]
    assert lines[-2:] == ending
    assert "simulator.py" not in done.stderr and "locals" not in done.stderr
    assert not out.exists()
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(".")] == []  # nothing kept beside


@pytest.mark.parametrize("where", FAILURES)
def test_a_plugin_that_fails_in_a_run_is_named_in_one_line(failing_site, tmp_path, where):
    """docs/plugins.md, "When a plug-in fails": an exception of the plug-in's own code ended
    `abm run` with a rich traceback of abm's frames and their local variables (tensors included)."""
    out = tmp_path / "runs" / "sick"
    out.parent.mkdir()
    done = abm(
        failing_site, "run", sick_leave(tmp_path, **FAILURES[where][0]), "--agents", "500", "--days", "6", "--out", out
    )
    assert_plugin_failure(done, "run", out, where)


def test_a_plugin_that_fails_in_a_sweep_is_named_in_one_line(failing_site, tmp_path):
    """The same in `abm sweep`, with worker processes (the failure crosses a process): no sweep
    folder, and no finished runs kept beside it (they were made by the failing plug-in). The line
    names the variant by its swept value, its replicate and its seed (the line named neither, so
    which of the variants failed was left to guess)."""
    out = tmp_path / "runs" / "sick-sweep"
    out.parent.mkdir()
    args = ["--sweep", "interventions.sick_leave.day=9,3", "--agents", "500", "--days", "6", "--replicates", "1"]
    done = abm(failing_site, "sweep", sick_leave(tmp_path), *args, "--seed", "7", "--workers", "2", "--out", out)
    assert_plugin_failure(
        done, "sweep", out, "hook", re.escape("variant 1 (interventions.sick_leave.day=3), replicate 0 (seed 7)")
    )


def test_a_plugin_that_fails_in_a_calibration_is_named_in_one_line(failing_site, tmp_path):
    """`abm calibrate` ended with a rich traceback of abm's frames and their local variables where
    a plug-in of the scenario failed in a trial; now as `abm run` does, naming the trial's values,
    with the trials in worker processes too. No calibration folder, and no trials kept beside it."""
    out = tmp_path / "runs" / "sick-calibration"
    out.parent.mkdir()
    file = tiny_calibration(tmp_path, trials=2, agents=500, rerank_trials=0)
    data = yaml.safe_load(file.read_text())
    file.write_text(yaml.safe_dump({**data, "interventions": {"sick_leave": {"day": 3}}}))
    done = abm(failing_site, "calibrate", file, "--workers", "2", "--out", out)
    assert_plugin_failure(done, "calibrate", out, "hook", r"a calibration trial \(disease\.transmission_rate=[0-9.]+\)")


def test_a_plugin_that_fails_in_a_private_calibration_is_named_in_one_line(failing_site, tmp_path):
    """`abm learn` of a private calibration whose model scenario has a plug-in (every institution
    simulates it) ended with a rich traceback of abm's frames and their local variables; now as
    `abm run` does. A learning scenario of another kind runs no simulation, so no plug-in."""
    model = tmp_path / "model.yaml"
    model.write_text(yaml.safe_dump({"extends": str(CALIBRATION), "interventions": {"sick_leave": {"day": 3}}}))
    data = yaml.safe_load(PRIVATE_CALIBRATION.read_text())
    data["model"]["scenario"] = str(model)
    data["institutions"] = data["institutions"][:2]
    data["protocols"] = [{"name": "centralized"}]
    file = tmp_path / "private.yaml"
    file.write_text(yaml.safe_dump(data))
    out = tmp_path / "runs" / "sick-learn"
    out.parent.mkdir()
    done = abm(failing_site, "learn", file, "--out", out)
    assert_plugin_failure(done, "learn", out, "hook")


def test_a_scenario_error_of_a_plugins_attach_is_still_bad_input(failing_site, tmp_path):
    """A ScenarioError raised in attach is bad input (docs/plugins.md): exit code 2, named by the file."""
    file = sick_leave(tmp_path, fail_in="scenario")
    done = abm(failing_site, "run", file, "--agents", "500", "--days", "6", "--out", tmp_path / "out")
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"error: {file} (with --agents 500 --days 6): interventions.sick_leave.day: too late for this population"
    )
    assert not (tmp_path / "out").exists()
