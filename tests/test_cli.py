"""The ``abm`` command end to end: output files and their contents, and bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from abm.cli import app
from abm.engine import STAGE_NAMES
from abm.outputs.run_folder import MARK
from abm.scenario import load_scenario

SCENARIO = Path("scenarios/king_county/no_intervention.yaml").resolve()
runner = CliRunner()


def abm_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "abm", *args], capture_output=True, text=True, check=False)


def test_run_writes_a_complete_run_folder(tmp_path):
    out = tmp_path / "ni"
    proc = abm_cli(
        "run",
        str(SCENARIO),
        "--out",
        str(out),
        "--agents",
        "3000",
        "--days",
        "30",
        "--replicates",
        "2",
        "--seed",
        "9",
        "--set",
        "contacts.community.weight=0.3",
    )
    assert proc.returncode == 0, proc.stderr
    assert "cumulative infected" in proc.stdout
    names = {p.name for p in out.iterdir()}
    assert {
        "scenario.resolved.yaml",
        "manifest.json",
        "timeseries.csv",
        "timeseries.parquet",
        "by_age.csv",
        "by_tract.csv",
        "summary.json",
        "costs.csv",
    } <= names
    ts = pd.read_csv(out / "timeseries.csv")
    assert len(ts) == 30 * 2 and set(ts.replicate) == {0, 1} and ts.day.max() == 29
    for col in [
        "day",
        "replicate",
        *STAGE_NAMES,
        "new_infections",
        "cumulative_infected",
        "hospitalized",
        "icu",
        "deaths",
    ]:
        assert col in ts.columns
    assert (ts[STAGE_NAMES].sum(axis=1) == 3000).all()
    assert ts.equals(pd.read_parquet(out / "timeseries.parquet"))
    s = json.loads((out / "summary.json").read_text())
    assert (s["agents"], s["days"], s["replicates"], s["seed"]) == (3000, 30, 2, 9)
    final = ts[ts.day == 29]
    assert s["cumulative_infected"]["mean"] == pytest.approx(final.cumulative_infected.mean())
    assert s["cumulative_infected"]["sd"] == pytest.approx(final.cumulative_infected.std(ddof=1))
    curve = ts.groupby("day").hospitalized.mean()
    assert s["peak_hospitalized"] == {
        "value": pytest.approx(curve.max()),
        "day": int(curve.idxmax()),
        "per_100k": pytest.approx(curve.max() / 3000 * 1e5),
        "at_end": int(curve.idxmax()) == 29,  # the last day: the curve may still be rising
    }
    assert s["deaths"]["mean"] == pytest.approx(final.deaths.mean())
    assert s["total_cost"] == {"mean": 0.0, "sd": 0.0}
    by_tract = pd.read_csv(out / "by_tract.csv", dtype={"geoid": str})
    assert by_tract.geoid.str.startswith("53033").all() and by_tract.day.nunique() == 30
    by_age = pd.read_csv(out / "by_age.csv")
    assert set(by_age.age_group) == {"0-9", "10-19", "20-29", "30-39", "40-49", "50-59", "60-69", "70-79", "80+"}
    # The resolved scenario re-creates the run: same scenario with the overrides applied.
    resolved = load_scenario(out / "scenario.resolved.yaml")
    assert resolved.population.agents == 3000 and resolved.simulation.seed == 9
    assert resolved.contacts.community.weight == 0.3
    beds = resolved.outputs.hospital_beds_per_100k
    assert beds == s["hospital_capacity"]["beds_per_100k"] == pytest.approx(55.0, 0.01)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["seed"] == 9 and manifest["timings"]["engine_seconds"] > 0 and "summary.json" in manifest["files"]
    # Re-running the resolved scenario writes the same files byte for byte (map and plots too);
    # only the manifest's timings differ.
    again = tmp_path / "again"
    assert abm_cli("run", str(out / "scenario.resolved.yaml"), "--out", str(again)).returncode == 0
    files = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file() and p.name != "manifest.json")
    assert sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file() and p.name != "manifest.json") == files
    assert {"map.html", "summary.json", "timeseries.parquet"} <= {p.name for p in files}
    assert [f for f in files if (out / f).read_bytes() != (again / f).read_bytes()] == []


def test_intervention_counts_in_the_timeseries_match_the_costs(tmp_path):
    out = tmp_path / "vacc_ct"
    scenario = SCENARIO.parent / "vacc_ct.yaml"
    args = ["run", str(scenario), "--out", str(out), "--agents", "3000", "--days", "40", "--replicates", "1"]
    proc = abm_cli(*args, "--set", "seeding.infections={mild_symptoms: 20}")
    assert proc.returncode == 0, proc.stderr
    ts = pd.read_csv(out / "timeseries.csv").set_index("day")
    costs = pd.read_csv(out / "costs.csv")
    tests = costs[costs["item"] == "test_rt_pcr"].set_index("day")["count"]
    assert ts["tests"].sum() > 0
    assert ts["tests"].equals(tests.reindex(ts.index, fill_value=0).astype(ts["tests"].dtype))
    # 300 doses per 100,000 a day: 9 a day from day 10 for 30 days, every one given.
    doses = ts["first_doses"] + ts["second_doses"]
    assert doses.loc[:9].sum() == 0 and (doses.loc[10:] == 9).all()
    assert costs.loc[costs["item"] == "vaccine_dose", "cost"].sum() == 270 * 20.0
    # Protection takes 14 days after dose 1; the protected are counted within the susceptible.
    assert ts["vaccine_protected"].loc[:23].sum() == 0 and ts["vaccine_protected"].loc[39] > 0
    assert (ts["vaccine_protected"] <= ts["susceptible"]).all()
    # RT-PCR results come 1-3 days after the test: by each day, no more results than tests the day before
    assert (ts["in_quarantine"] > 0).any() and ts["positive_results"].sum() > 0
    assert (ts["positive_results"].cumsum() <= ts["tests"].cumsum().shift(1, fill_value=0)).all()


def test_an_option_that_turns_an_intervention_on_gets_a_note(tmp_path):
    base = ["--agents", "2000", "--days", "3", "--replicates", "1", "--set", "interventions.vaccination.start_day=1"]
    proc = abm_cli("run", str(SCENARIO), "--out", str(tmp_path / "a"), *base)
    assert proc.returncode == 0, proc.stderr
    note = " ".join(proc.stderr.split())
    assert "--set interventions.vaccination.start_day=1 turns vaccination on" in note
    assert "has no interventions.vaccination" in note
    vacc = SCENARIO.parent / "vacc.yaml"
    proc = abm_cli("run", str(vacc), "--out", str(tmp_path / "b"), *base)
    assert proc.returncode == 0 and "turns vaccination on" not in " ".join(proc.stderr.split())
    # An option that leaves the intervention off gets no note.
    off = [*base[:-1], "interventions.vaccination.enabled=false"]
    proc = abm_cli("run", str(SCENARIO), "--out", str(tmp_path / "c"), *off)
    assert proc.returncode == 0 and "note:" not in proc.stderr


def test_validate_accepts_the_shipped_scenarios():
    for path in Path("scenarios/king_county").glob("*.yaml"):
        result = runner.invoke(app, ["validate", str(path)])
        assert result.exit_code == 0, result.output


def test_validate_checks_learning_and_private_calibration_scenarios(tmp_path):
    for path in Path("scenarios/learning").glob("*.yaml"):
        result = runner.invoke(app, ["validate", str(path)])
        assert result.exit_code == 0, result.output
        kind = "private calibration" if "private_calibration" in path.name else "learning"
        assert f"{kind} scenario" in " ".join(result.output.split())
    bad = tmp_path / "bad.yaml"
    text = Path("scenarios/learning/gmm_mapl.yaml").read_text().replace("rounds:", "roundz:", 1)
    assert "roundz:" in text
    bad.write_text(text)
    result = runner.invoke(app, ["validate", str(bad)])
    assert result.exit_code == 2 and "roundz: unknown key" in " ".join(result.output.split())
    for text, key in (
        ("name: x\ndata: {source: iris}\n", "split"),
        ("kind: private_calibration\nname: x\n", "institutions"),
    ):
        bad.write_text(text)
        result = runner.invoke(app, ["validate", str(bad)])
        assert result.exit_code == 2 and f"invalid scenario: {key}: required key is missing" in " ".join(
            result.output.split()
        )
    bad.write_bytes(bytes(range(128, 256)))
    out = ["--out", str(tmp_path / "out")]
    for args in (["validate", str(bad)], ["run", str(bad), *out], ["learn", str(bad), *out]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2 and "not a text file" in result.output, args
    assert not (tmp_path / "out").exists()
    result = runner.invoke(app, ["validate", "scenarios/learning/gmm_mapl.yaml", "--set", "rounds=3"])
    assert result.exit_code == 2 and "--set applies to epidemic scenarios only" in result.output


def test_learning_commands_name_the_missing_learning_extra(tmp_path, monkeypatch):
    for module in ("scipy", "sklearn"):
        monkeypatch.setitem(sys.modules, module, None)  # as if not installed
    out = tmp_path / "out"
    for args in (
        ["validate", "scenarios/learning/gmm_mapl.yaml"],
        ["learn", "scenarios/learning/gmm_mapl.yaml", "--out", str(out)],
        ["learn", "scenarios/learning/private_calibration.yaml", "--out", str(out)],
    ):
        result = runner.invoke(app, args)
        text = " ".join(result.output.split())
        assert result.exit_code == 2, (args, result.output)
        assert "need the `learning` extra (scipy, scikit-learn not installed): pip install -e '.[learning]'" in text
    assert not out.exists()
    assert runner.invoke(app, ["validate", str(SCENARIO)]).exit_code == 0  # epidemic scenarios do not need it


def test_the_flower_runners_name_the_missing_flower_extra(monkeypatch):
    from abm.learning.errors import LearningScenarioError
    from abm.learning.flower.run import import_flwr

    monkeypatch.setitem(sys.modules, "flwr", None)
    hint = r"need flwr, which is not installed: pip install -e '\.\[flower\]'"
    with pytest.raises(LearningScenarioError, match=hint):
        import_flwr()


def test_extends_and_set(tmp_path):
    base = tmp_path / "base.yaml"
    base.write_text("name: base\nsimulation: {days: 50, replicates: 3}\ncontacts: {household: {weight: 1.5}}\n")
    child = tmp_path / "child.yaml"
    child.write_text("extends: base.yaml\nname: child\nsimulation: {days: 20}\n")
    sc = load_scenario(child, ["contacts.occupation.weight=0.5", "seeding.infections={asymptomatic: 7}"])
    assert (sc.name, sc.simulation.days, sc.simulation.replicates) == ("child", 20, 3)
    assert sc.contacts.household.weight == 1.5 and sc.contacts.occupation.weight == 0.5
    assert sc.seeding.infections == {"asymptomatic": 7}


BAD = [
    ("simulation: {dayz: 10}", "simulation.dayz: unknown key; allowed keys: days, replicates, seed, device"),
    ("simulation: {days: ten}", "simulation.days: 'ten' is not allowed"),
    (
        "contacts: {occupation: {rewire_probability: 1.5}}",
        "contacts.occupation.rewire_probability: 1.5 is not allowed: Input should be less than or equal to 1",
    ),
    ("seeding: {infections: {asymptomatic: -3}}", "seeding.infections.asymptomatic: -3 is not allowed"),
    ("seeding: {day: -1}", "seeding.day: -1 is not allowed: Input should be greater than or equal to 0"),
    ("population: {agents: 900000000000}", "population.agents: 900000000000 agents x 1 replicates need about"),
    ("simulation: [1, 2", "invalid YAML"),
    (
        "population: {region: nowhere}",
        "nowhere' is not allowed: no region folder with region.yaml and tracts.csv there; bundled regions: king_county",
    ),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_bad_input_gets_one_clear_message_exit_2_and_nothing_written(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(f"name: bad\n{text}\n")
    out = tmp_path / "out"
    result = runner.invoke(app, ["run", str(path), "--out", str(out)])
    assert result.exit_code == 2
    flat = " ".join(result.output.split())
    assert str(path) in flat.replace(" ", "") or str(path) in flat
    assert message in flat
    assert not out.exists() and sorted(os.listdir(tmp_path)) == ["bad.yaml"]


def test_unreadable_file_and_bad_set(tmp_path):
    result = runner.invoke(app, ["run", str(tmp_path / "missing.yaml")])
    assert result.exit_code == 2 and "cannot read the scenario file" in result.output
    result = runner.invoke(app, ["validate", str(SCENARIO), "--set", "simulation.days"])
    assert result.exit_code == 2 and "write key.path=value" in result.output
    result = runner.invoke(app, ["run", str(SCENARIO), "--days", "-5", "--out", str(tmp_path / "x")])
    assert result.exit_code == 2 and "simulation.days: -5 is not allowed" in " ".join(result.output.split())
    assert not (tmp_path / "x").exists()


def test_a_crash_mid_run_leaves_no_half_written_folder_and_keeps_the_old_one(tmp_path, monkeypatch):
    out = tmp_path / "run"
    out.mkdir()
    (out / "summary.json").write_text("{}")
    (out / MARK).write_text("")  # an earlier output of abm (only those may be replaced)

    def boom(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr("abm.outputs.tables.by_tract", boom)
    result = runner.invoke(app, ["run", str(SCENARIO), "--agents", "500", "--days", "5", "--out", str(out)])
    assert result.exit_code != 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    assert (out / "summary.json").read_text() == "{}"
    monkeypatch.undo()
    # And an interrupted write (after the tables) also leaves the old folder as it was.
    monkeypatch.setattr("pandas.DataFrame.to_parquet", boom)
    result = runner.invoke(app, ["run", str(SCENARIO), "--agents", "500", "--days", "5", "--out", str(out)])
    assert result.exit_code != 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"] and (out / "summary.json").read_text() == "{}"


def test_resolved_yaml_round_trips(tmp_path):
    """The resolved scenario a run saves loads back as the same scenario, every field."""
    sc = load_scenario(SCENARIO)
    assert yaml.safe_load(sc.resolved_yaml())["disease"]["dwell_times"][0]["from"] == "asymptomatic"
    path = tmp_path / "resolved.yaml"
    path.write_text(sc.resolved_yaml())
    again = load_scenario(path)
    assert again == sc and again.resolved_yaml() == sc.resolved_yaml()


def default_sigint() -> None:
    """In the child: Ctrl-C's default action, whatever the test runner inherited (a shell starts
    background jobs with SIGINT ignored, and children inherit that)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_ctrl_c_or_kill_leaves_no_run_folder(tmp_path, signame):
    """Ctrl-C (SIGINT) or a termination request (SIGTERM, from kill or a batch scheduler)."""
    import signal
    import time

    out = tmp_path / "big"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "abm",
            "run",
            str(SCENARIO),
            "--agents",
            "200000",
            "--replicates",
            "3",
            "--out",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    # Interrupt once the run has started (it announces itself on stderr), not while importing.
    first = proc.stderr.readline()
    assert first.startswith("running "), first
    time.sleep(1.5)
    proc.send_signal(getattr(signal, signame))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + getattr(signal, signame), err  # 130 or 143
    assert "no results were written" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_an_output_folder_where_nothing_can_be_written_is_refused_before_the_run():
    """/proc passes the permission bits for root but takes no folder: abm tries, and refuses."""
    result = runner.invoke(app, ["run", str(SCENARIO), "--agents", "500", "--days", "5", "--out", "/proc/abm-out"])
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "output folder '/proc/abm-out': cannot write in '/proc'" in text, text
    assert "running" not in text


def test_an_interrupt_once_the_results_are_written_is_ignored(monkeypatch):
    """Ctrl-C or SIGTERM while a command prints, its output complete: no exit code 130 that
    would tell a script the results were not written."""
    import signal

    from abm import entry, interrupts

    monkeypatch.setattr(interrupts, "_written", [])
    monkeypatch.setattr(entry, "_signal_received", [])
    with pytest.raises(KeyboardInterrupt):
        entry._interrupt(signal.SIGTERM, None)
    assert entry._interrupted_code() == 143
    interrupts.results_written()
    assert entry._interrupt(signal.SIGINT, None) is None and entry._signal_received == [signal.SIGTERM]


def test_an_output_path_that_abm_did_not_write_is_never_replaced(tmp_path, monkeypatch):
    """`--out` on a folder of the user's, on a file, or on the working folder: one message, exit
    code 2, before anything runs, and the user's files are untouched."""
    small = ["--agents", "500", "--days", "5", "--replicates", "1"]
    mine = tmp_path / "thesis"
    mine.mkdir()
    (mine / "thesis.tex").write_text("chapter 1")
    result = runner.invoke(app, ["run", str(SCENARIO), *small, "--out", str(mine)])
    assert result.exit_code == 2 and "was not written by abm" in " ".join(result.output.split())
    assert [p.name for p in mine.iterdir()] == ["thesis.tex"]
    notes = tmp_path / "notes.txt"
    notes.write_text("keep")
    result = runner.invoke(app, ["run", str(SCENARIO), *small, "--out", str(notes)])
    assert result.exit_code == 2 and "is a file" in result.output and notes.read_text() == "keep"
    monkeypatch.chdir(mine)
    for out in (".", "..", str(tmp_path)):
        result = runner.invoke(app, ["run", str(SCENARIO), *small, "--out", out])
        assert result.exit_code == 2, (out, result.output)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "thesis"]
    # An abm output (its mark) is replaced; so is an empty folder.
    runs = tmp_path / "runs"
    result = runner.invoke(app, ["run", str(SCENARIO), *small, "--out", str(runs / "a")])
    assert result.exit_code == 0 and (runs / "a" / MARK).is_file()
    result = runner.invoke(app, ["run", str(SCENARIO), *small, "--out", str(runs / "a")])
    assert result.exit_code == 0
    # A comparison may not be written over the folder that holds its runs.
    result = runner.invoke(app, ["compare", str(runs / "a"), str(runs / "a"), "--out", str(runs)])
    assert result.exit_code == 2 and (runs / "a" / "summary.json").is_file()


def test_a_scenario_name_must_be_a_folder_name(tmp_path):
    bad = tmp_path / "dot.yaml"
    bad.write_text(f"extends: {SCENARIO}\nname: '..'\n")
    result = runner.invoke(app, ["validate", str(bad)])
    assert result.exit_code == 2 and "name: '..' is not allowed" in result.output


@pytest.mark.parametrize(
    ("text", "sets", "message"),
    [
        ("simulation:\n  days: 30\nsimulation:\n  replicates: 3\n", [], "key 'simulation' appears twice"),
        ("", [], "the file is empty"),
        ("{}", ["simulation.days=true"], "simulation.days: true is not allowed: a number or text is expected here"),
        ("{}", ["disease.dwell_times=true"], "disease.dwell_times: true is not allowed: a list is expected here"),
        (
            "disease:\n  dwell_times:\n    - {from: asymptomatic, to: recovered, distribution: gamma, shape: 2, "
            "scale: 1}\n",
            ["disease.dwell_times[0].shape=true"],
            "disease.dwell_times[0].shape: true is not allowed: a number or text is expected here",
        ),
        (
            "{}",
            ["interventions.quarantine={household: 1}"],
            "quarantine.household: 1 is not allowed: write true or false",
        ),
        ("{}", ["contacts.community.mean_contacts=[-1,4,3]"], "contacts.community.mean_contacts[0]: -1 is not allowed"),
        (
            "{}",
            ["seeding.infections.asymptomatic=50000", "population.agents=2000"],
            "seeding.infections: 50000 infections",
        ),
        ("{}", ["seeding.day=90", "simulation.days=60"], "seeding.day: 90 is not within the 60 simulated days"),
        (
            "{}",
            ["interventions.contact_multipliers={closures: [{from_day: 5, settings: [SCHOOLZ]}]}"],
            "unknown settings ['SCHOOLZ']",
        ),
        (
            "{}",
            ["interventions.contact_multipliers={changes: [{from_day: 10, until_day: 5, community: 0.5}]}"],
            "until_day (5) must come after from_day (10)",
        ),
    ],
)
def test_bad_epidemic_scenarios_are_refused_by_validate_and_run(tmp_path, text, sets, message):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    args = [x for s in sets for x in ("--set", s)]
    checked = runner.invoke(app, ["validate", str(path), *args])
    ran = runner.invoke(app, ["run", str(path), *args, "--out", str(tmp_path / "out")])
    for result in (checked, ran):
        assert result.exit_code == 2 and message in " ".join(result.output.split()), result.output
    assert not (tmp_path / "out").exists()


def test_one_occupation_degree_keeps_the_other_defaults(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("contacts:\n  occupation:\n    degree: {SCHOOL: 5}\n")
    degree = load_scenario(path).contacts.occupation.degree
    assert degree["SCHOOL"] == 5 and degree["HEALTHCARE"] == 19.95


def test_errors_caused_by_options_name_the_options(tmp_path):
    result = runner.invoke(app, ["validate", str(SCENARIO), "--set", "interventions.vaccination.strat_day=3"])
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "(with --set interventions.vaccination.strat_day=3)" in text
    assert "allowed keys: enabled, start_day" in text
    result = runner.invoke(app, ["run", str(SCENARIO), "--agents", "0", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "(with --agents 0)" in " ".join(result.output.split())
    result = runner.invoke(
        app, ["sweep", str(SCENARIO), "--sweep", "contacts.community.weight=0.2,0.4", "--set", "foo.bar=1"]
    )
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "(with --set foo.bar=1)" in text and "--sweep contacts" not in text


def test_a_learning_scenario_given_to_run_points_to_learn():
    result = runner.invoke(app, ["run", "scenarios/learning/gmm_mapl.yaml"])
    assert result.exit_code == 2 and "run it with `abm learn" in " ".join(result.output.split())


def test_ctrl_c_while_starting_ends_with_one_line(tmp_path):
    """Ctrl-C while the libraries load (or just after): exit code 130, a one-line notice, no traceback."""
    import signal
    import time

    proc = subprocess.Popen(
        [sys.executable, "-m", "abm", "run", str(SCENARIO), "--agents", "1000", "--out", str(tmp_path / "o")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    # 130, or -2 (ended by the signal itself, which a shell also reports as 130)
    assert proc.returncode in (130, -2) and "interrupted" in err and "Traceback" not in err, err
    assert not (tmp_path / "o").exists()


def test_agents_with_absolute_doses_gets_a_note(tmp_path):
    vacc = Path("scenarios/reference/vacc.yaml").resolve()
    args = ["run", str(vacc), "--agents", "2000", "--days", "3", "--replicates", "1", "--out", str(tmp_path / "v")]
    result = runner.invoke(app, args)
    text = " ".join(result.output.split())
    assert result.exit_code == 0 and "300 doses a day whatever the population: 15,000 per 100,000" in text
    # Vaccination starts on day 10, after the 3 days run: the run goes without it, and says so.
    assert "note: interventions.vaccination starts on day 10, after the 3 simulated days (0..2)" in text
    assert (tmp_path / "v" / "summary.json").is_file()


def test_interventions_that_could_never_act_are_named(tmp_path):
    """Tracing and quarantine act on positive tests: with testing off they do nothing, and a run
    says so (as a sweep's variant without testing may well be meant); contact changes that all
    start after the last day get a note."""
    ct = Path("scenarios/king_county/vacc_ct.yaml").resolve()
    out = ["--agents", "1000", "--days", "20", "--replicates", "1", "--out", str(tmp_path / "ct")]
    result = runner.invoke(app, ["run", str(ct), *out, "--set", "interventions.testing=null"])
    text = " ".join(result.output.split())
    assert result.exit_code == 0 and (tmp_path / "ct" / "summary.json").is_file()
    for name in ("quarantine", "digital_tracing", "manual_tracing"):
        assert f"interventions.{name} acts on the results of testing, which is off: it does nothing" in text
    from abm.sweep import plan

    sq = Path("scenarios/king_county/sq.yaml").resolve()
    assert len(plan(sq, ["interventions.testing.enabled=true,false"]).variants) == 2  # a sweep may turn it off
    late = "interventions.contact_multipliers.changes=[{from_day: 25, household: 0.5}, {from_day: 40}]"
    result = runner.invoke(app, ["run", str(SCENARIO), *out, "--set", late])
    text = " ".join(result.output.split())
    assert result.exit_code == 0 and "interventions.contact_multipliers starts on day 25, after the 20" in text
    result = runner.invoke(app, ["validate", str(SCENARIO), "--set", "simulation.days=20", "--set", late])
    assert result.exit_code == 0 and "contact_multipliers starts on day 25" in " ".join(result.output.split())
    early = "interventions.contact_multipliers.changes=[{from_day: 19, household: 0.5}, {from_day: 40}]"
    result = runner.invoke(app, ["run", str(SCENARIO), *out, "--set", early])
    assert result.exit_code == 0 and "contact_multipliers starts" not in result.output


def test_a_name_is_not_inherited_from_the_file_extended(tmp_path):
    base = Path("scenarios/reference/base.yaml").resolve()
    assert load_scenario(base).name == "reference_base"  # not 'base', as the King County base.yaml is named
    child = tmp_path / "my_study.yaml"
    child.write_text(f"extends: {base}\n")
    assert load_scenario(child).name == "my_study"


def test_a_killed_writers_staging_folder_is_removed_by_the_next_write(tmp_path):
    """A process killed outright (SIGKILL) leaves its hidden ``.NAME.partial-HOST-PID`` folder;
    the next write of NAME on the same machine removes it when no process PID exists, and keeps
    a live one's and any other machine's (a shared disk: its PIDs mean nothing here)."""
    import os
    import socket

    from abm.outputs.run_folder import atomic_folder

    host = socket.gethostname().replace("-", "_")
    dead = tmp_path / f".out.partial-{host}-999999999"  # above any Linux pid_max: no such process
    live = tmp_path / f".out.partial-{host}-{os.getppid()}"
    elsewhere = tmp_path / ".out.partial-othernode-999999999"
    for stale in (dead, live, elsewhere):
        stale.mkdir()
        (stale / "timeseries.csv").write_text("half")
    with atomic_folder(tmp_path / "out", "run") as tmp:
        (tmp / "summary.json").write_text("{}")
    assert not dead.exists() and live.exists() and elsewhere.exists()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [".abm-output", "summary.json"]


@pytest.mark.parametrize("delay", [1.0, 2.5])
def test_ctrl_c_at_any_moment_of_abm_learn_says_so(tmp_path, delay):
    """Ctrl-C while the learning libraries load (the moment that used to exit silently) or while
    the data are built: one line, exit code 130, no folder. Both moments once ended by the signal
    (-2) after their line: CPython marks an interrupt unhandled when it lands in code an extension
    runs through PyRun_*, even once caught, and kills itself at exit (1 of 24 tries at 0.3-2.6 s
    before abm.entry leaves with os._exit; 0 of 24 after)."""
    import signal
    import time

    scenario = SCENARIO.parents[1] / "learning/gmm_fedavg_private.yaml"
    out = tmp_path / "learn"
    proc = subprocess.Popen(
        [sys.executable, "-m", "abm", "learn", str(scenario), "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.startswith("interrupted") and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []


def test_version_names_the_installed_package_and_torch():
    from importlib.metadata import version

    import torch

    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0
    assert res.output.strip() == f"abm {version('abm-epidemic')} (torch {torch.__version__})"
