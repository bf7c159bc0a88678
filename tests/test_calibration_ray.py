"""Optuna trials as Ray tasks: every trial's loss is what the scenario gives when run here."""

from __future__ import annotations

import json
import os
import re

import pandas as pd
import pytest
import yaml
from conftest import caller_ray, tiny_calibration
from typer.testing import CliRunner

from abm.calibration.observed import load_observed
from abm.calibration.optimize import fit_value, simulate_values
from abm.cli import app
from abm.runs import TASK_REUSE
from abm.scenario import read_scenario_data, validate


@pytest.mark.slow  # starting a local Ray and its workers takes about 20 s on 2 cores
def test_ray_trials_are_the_local_runs_of_their_parameters(tmp_path):
    """Four trials, two at a time, on a local Ray: trials.csv holds four trials whose losses
    equal the losses of running the same parameters in this process (the engine is
    deterministic), and the best trial's values are in calibrated.yaml."""
    pytest.importorskip("ray")  # an optional extra; the dev install has it
    path = tiny_calibration(tmp_path, trials=4, rerank_trials=0)
    out = tmp_path / "out"
    args = ["calibrate", str(path), "--backend", "ray", "--workers", "2", "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    trials = pd.read_csv(out / "trials.csv")
    assert len(trials) == 4 and trials["state"].eq("COMPLETE").all()
    data = read_scenario_data(path)
    cfg = validate(data, str(path)).calibration
    observed = load_observed(cfg)
    for _, row in trials.iterrows():
        values = {"disease.transmission_rate": row["params_disease.transmission_rate"]}
        assert row["value"] == pytest.approx(
            fit_value(simulate_values(data, values, str(path)), observed, cfg), abs=1e-12
        )
    summary = json.loads((out / "calibration.json").read_text())
    assert summary["backend"] == "ray" and summary["trials"] == 4
    assert (summary["parallel_trials"], summary["workers"]) == (4, 2)  # a batch of 4, 2 at a time
    # The same trials as in this process (Optuna's timing columns aside).
    local = tmp_path / "local"
    result = CliRunner().invoke(app, ["calibrate", str(path), "--workers", "1", "--out", str(local)])
    assert result.exit_code == 0, result.output
    timings = ["datetime_start", "datetime_complete", "duration"]
    assert pd.read_csv(local / "trials.csv").drop(columns=timings).equals(trials.drop(columns=timings))
    assert not TASK_REUSE._populations  # the trials in this process reused one population, let go at the end
    best = trials.loc[trials["value"].idxmin()]
    calibrated = yaml.safe_load((out / "calibrated.yaml").read_text())
    assert calibrated["disease"]["transmission_rate"] == best["params_disease.transmission_rate"]


def test_unknown_backend_is_refused(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump({"name": "x", "calibration": {}}))
    result = CliRunner().invoke(app, ["calibrate", str(path), "--backend", "dask", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "--backend: 'dask' is not allowed; allowed: local, ray" in result.output
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ray-address", "127.0.0.1:6379"], "error: --ray-address: only used with --backend ray, not with"),
        (["--backend", "ray", "--ray-address", "notanaddress"], "error: --ray-address notanaddress: not an"),
        (["--backend", "ray", "--ray-address", "127.0.0.1:1"], "error: --ray-address 127.0.0.1:1: no Ray cluster"),
    ],
)
def test_a_ray_address_that_cannot_be_used_is_refused_before_ray_starts(tmp_path, args, message):
    """A malformed address gave Ray's traceback (exit 1), an unreachable one 12 minutes of Ray's
    retries during which Ctrl-C waited; now one message, exit 2, nothing written."""
    path = tiny_calibration(tmp_path, trials=2, rerank_trials=0)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["calibrate", str(path), "--out", str(out), *args])
    assert result.exit_code == 2, result.output
    flat = " ".join(result.output.split())
    assert message in flat and flat.count("error:") == 1
    assert not out.exists()


def test_a_ray_address_without_ray_is_refused_from_python(tmp_path):
    from abm.calibration.observed import CalibrationError
    from abm.calibration.optimize import calibrate

    path = tiny_calibration(tmp_path, trials=2, rerank_trials=0)
    only = r"^ray_address: only used with backend='ray', not with backend='local'$"
    with pytest.raises(CalibrationError, match=only):
        calibrate(path, tmp_path / "out", ray_address="127.0.0.1:6379")
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def one_cpu_ray():
    """A local Ray of one CPU, started by the caller (the tests), so that calibrate uses it."""
    yield from caller_ray(1)


@pytest.mark.slow  # starting a local Ray takes about 20 s on 2 cores
def test_a_ray_worker_that_dies_fails_the_calibration_naming_its_trial(tmp_path, monkeypatch, one_cpu_ray):
    """Ray ran a trial whose worker process died again, unseen, and the calibration went on as if
    nothing had happened, where a dead worker of the local backend fails it; now the same: the
    error names the trial, nothing is written."""
    from abm.calibration.optimize import calibrate
    from abm.parallel import WorkerLost

    path = tiny_calibration(tmp_path, trials=2, rerank_trials=0)
    marker, out = tmp_path / "died", tmp_path / "out"

    def dies_once(data, values, source):  # its worker process dies in the first trial it runs
        if not marker.exists():
            marker.touch()
            os._exit(3)
        return simulate_values(data, values, source)

    monkeypatch.setattr("abm.calibration.optimize.simulate_values", dies_once)
    with pytest.raises(WorkerLost) as info:
        calibrate(path, out, backend="ray", workers=1)
    assert marker.exists()
    assert re.fullmatch(
        r"backend='ray': the Ray worker process of the trial of disease\.transmission_rate=[0-9.]+ ended before its "
        r"run did \(killed, out of memory, or its node was lost\); Ray does not run it again",
        str(info.value),
    ), info.value
    assert not out.exists()


@pytest.mark.slow
def test_calibration_json_records_the_workers_the_ray_cluster_ran_at_once(tmp_path, one_cpu_ray):
    """--workers 3 on a Ray of one CPU runs one trial at a time: calibration.json said 3; now it
    says 1 (how many ran at once, as its documentation has it) and the cluster's CPUs."""
    from abm.calibration.optimize import calibrate

    path = tiny_calibration(tmp_path, trials=2, rerank_trials=0)
    summary = calibrate(path, tmp_path / "out", backend="ray", workers=3)
    recorded = json.loads((tmp_path / "out" / "calibration.json").read_text())
    assert (recorded["parallel_trials"], recorded["workers"], recorded["ray_cpus"]) == (4, 1, 1), recorded
    assert summary["workers"] == 1


@pytest.mark.slow
def test_the_address_of_a_running_ray_passes_the_check(one_cpu_ray):
    """The check that tells another service apart (it must speak gRPC) lets Ray's own head through."""
    from abm.parallel import check_ray_reachable

    address = one_cpu_ray.get_runtime_context().gcs_address
    assert check_ray_reachable(address, f"--ray-address {address}", ValueError) is None
