"""Private calibration through the learning package's Flower runner gives the in-process result.

Each Flower client builds its own institution from the scenario (population, observed series,
simulated pairs) and answers the protocols' client operations; the server runs the same
``execute_protocol``. Recovery after every round, the final calibrators' recovery and estimates,
and every audited message's kind and size must be identical, not merely close.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

pytest.importorskip("flwr")

from flower_proxies import DirectProxy

from abm.learning.errors import LearningScenarioError
from abm.learning.models import flat_params
from abm.private_calibration.federation import calibration_specs, run_protocol
from abm.private_calibration.flower import InstitutionClient, portable, server_work
from abm.private_calibration.institutions import build_institutions
from abm.private_calibration.report import run_private_calibration
from abm.private_calibration.scenario import load_scenario

TINY = Path(__file__).parent / "tiny.yaml"
MLP = {"kind": "mlp", "hidden": [16], "embed_dim": 8}


def _flower_tiny() -> dict:
    data = yaml.safe_load(TINY.read_text())
    data["model"]["scenario"] = str((TINY.parent / data["model"]["scenario"]).resolve())
    data["rounds"] = 2
    data["protocols"] = [{"name": "fedavg", "models": [MLP]}]
    return data


@pytest.fixture(scope="module")
def inprocess():
    scenario, base = load_scenario(_flower_tiny())
    institutions, _ = build_institutions(scenario, base)
    runs = [run_protocol(scenario, institutions, s) for s in calibration_specs(scenario)]
    return scenario, base, institutions, runs


def _messages(run) -> list[tuple]:
    return [(m.kind, m.sender, m.receiver, m.round, m.nbytes) for m in run.network.messages]


def direct_proxy(scenario_json: str, pid: int) -> DirectProxy:
    """Participant ``pid``'s proxy to a fresh InstitutionClient per message."""
    return DirectProxy(InstitutionClient, scenario_json, pid)


def test_flower_clients_reproduce_the_inprocess_federation(inprocess):
    """The Flower client pool, codec and per-node state (institution clients rebuilt for every
    message, each building its own institution) give the in-process FedAvg and local-only runs."""
    from abm.learning.flower.server import identify

    scenario, base, _, runs = inprocess
    job = portable(scenario, base)
    proxies = [direct_proxy(job.model_dump_json(), pid) for pid in (2, 0, 1)]
    done, facts = [], {}
    server_work(job, done, facts)(identify(proxies))
    assert [r.key for r, _, _ in done] == [r.key for r in runs] == ["local", "fedavg"]
    for run, (result, network, final) in zip(runs, done, strict=True):
        assert result.history == run.history
        assert _messages(run) == [(m.kind, m.sender, m.receiver, m.round, m.nbytes) for m in network.messages]
        # the final calibrators, read back from the clients, are the in-process ones bit for bit
        for p in run.participants:
            assert torch.equal(final[p.pid], flat_params(p.model))
    fedavg = runs[1]
    assert fedavg.history[-1] > 0 and any(m.kind.value == "model_update" for m in fedavg.network.messages)
    assert facts["requests"] > 3 * (2 + 2)  # score and work requests of both protocols went through the pool


@pytest.mark.slow
def test_flower_simulation_report_equals_inprocess(tmp_path, inprocess):
    """`runner: flower-sim` (Flower's simulation engine, Ray actors) writes the in-process report."""
    a = run_private_calibration(_flower_tiny(), tmp_path / "a")
    b = run_private_calibration(_flower_tiny(), tmp_path / "b", runner="flower-sim")
    assert b["runner"] == "flower-sim" and b["flower_requests"] > 0
    for key in ("local", "fedavg"):
        pa, pb = a["protocols"][key], b["protocols"][key]
        assert pb["history"] == pa["history"]
        assert pb["bytes_by_kind"] == pa["bytes_by_kind"]
        for ra, rb in zip(pa["institutions"], pb["institutions"], strict=True):
            # Compared as text: float reprs round-trip exactly, and an ND with no observed counts
            # is nan on both sides (nan != nan as a value).
            assert repr((rb["recovery"], rb["estimate"], rb["nd"])) == repr((ra["recovery"], ra["estimate"], ra["nd"]))


def test_flower_runner_refuses_what_it_does_not_carry():
    data = _flower_tiny()
    with pytest.raises(
        LearningScenarioError, match=r"protocols\[0\]\.name: 'cycle' is not allowed for runner 'flower-sim'"
    ):
        load_scenario({**data, "protocols": [{"name": "cycle"}]}, runner="flower-sim")
    private = [{"name": "fedavg", "models": [MLP], "privacy": {"secure_aggregation": True}}]
    with pytest.raises(LearningScenarioError, match=r"protocols\[0\]\.privacy: not allowed for runner 'flower'"):
        load_scenario({**data, "protocols": private, "runner": "flower"})
    with pytest.raises(LearningScenarioError, match=r"runner: 'grpc' is not allowed: must be 'inprocess'"):
        load_scenario(data, runner="grpc")


def test_a_client_given_the_other_kind_of_scenario_names_the_client_that_runs_it(tmp_path, capsys):
    """A private calibration's scenario.json given to the learning client (the one docs/learning.md
    shows started by hand) said 'not a resolved scenario JSON file ...: data: Field required', and a
    learning scenario's given to an institution's client 'kind: Field required': both are resolved
    scenarios the Flower runners write. Each now says what it is and which client runs it (exit 2)."""
    from abm.learning.flower.client import main
    from abm.learning.scenario import load_scenario as load_learning

    calibration = tmp_path / "pc.json"
    calibration.write_text(portable(*load_scenario(_flower_tiny())).model_dump_json(), encoding="utf-8")
    learning = tmp_path / "learning.json"
    data = {"name": "t", "data": {"source": "iris"}, "split": {"participants": 2}, "protocols": [{"name": "fedavg"}]}
    learning.write_text(load_learning(data)[0].model_dump_json(), encoding="utf-8")
    cases = [
        (None, calibration, "a private-calibration", "abm.private_calibration.flower"),
        (InstitutionClient, learning, "a learning", "abm.learning.flower.client"),
    ]
    for cls, path, what, module in cases:
        with pytest.raises(SystemExit) as e:
            main(["--address", "127.0.0.1:1", "--pid", "0", "--scenario", str(path)], client_cls=cls)
        assert (e.value.code, capsys.readouterr().err) == (
            2,
            f"error: --scenario {path}: {what} scenario, which this client does not run; start its clients with "
            f"python -m {module}\n",
        )


def test_a_client_started_by_hand_on_a_reports_scenario_json_finds_its_model_from_any_folder(tmp_path, monkeypatch):
    """docs/learning.md shows a client started by hand on a run's scenario.json. A report's names
    its model scenario beside it (model.resolved.yaml, relative to the report's folder), so the
    client reads that path from the file's folder, not from its own working folder."""
    import json

    import flwr.client

    from abm.learning.flower.client import main
    from abm.private_calibration.scenario import saved

    report, elsewhere = tmp_path / "report", tmp_path / "elsewhere"
    report.mkdir()
    elsewhere.mkdir()
    (report / "scenario.json").write_text(saved(load_scenario(_flower_tiny())[0]).model_dump_json(), encoding="utf-8")
    seen = []

    class Recorded(InstitutionClient):
        def __init__(self, scenario_json: str, pid: int, context: object = None) -> None:
            seen.append(json.loads(scenario_json)["model"]["scenario"])

    monkeypatch.setattr(flwr.client, "start_client", lambda **kw: kw["client_fn"](None))
    monkeypatch.chdir(elsewhere)
    main(["--address", "127.0.0.1:1", "--pid", "0", "--scenario", "../report/scenario.json"], client_cls=Recorded)
    assert seen == [str(report / "model.resolved.yaml")]
