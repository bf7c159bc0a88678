"""Private calibration over Flower: the institutions as Flower clients of the learning package's runner.

Each Flower client is one institution: it builds its own population, observed series and
simulated pairs from the scenario (:func:`abm.private_calibration.institutions.build_institution`,
random streams from (seed, k) only, so they equal the in-process runner's) and answers the
protocols' client operations through :class:`abm.learning.flower.client.ParticipantClient`. The
server runs every protocol through :func:`abm.learning.runner.execute_protocol` over a Flower
client pool, the same path as the in-process runner (:func:`abm.private_calibration.federation.
run_protocol`); Flower's simulation engine and the loopback deployment are the learning package's
(:mod:`abm.learning.flower.run`). Protocols that run through clients only are carried (local,
fedavg, fedprox, codream, codream_fast), without the privacy wrappers, as in :mod:`abm.learning`.

After each protocol the evaluation harness reads every institution's final calibrator back
(``get_weights``, outside the protocol: it is not on the audited network) and evaluates it as the
in-process runner does. Run as a process: ``python -m abm.private_calibration.flower --address
HOST:PORT --pid K --scenario FILE.json`` (the runner starts these itself).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from flwr.common import Code, Context, GetPropertiesIns, GetPropertiesRes, Status

from abm.learning.flower.client import ParticipantClient
from abm.learning.flower.client import main as client_main
from abm.learning.flower.server import FlowerClients
from abm.learning.messages import AuditNetwork, Network
from abm.learning.models import load_flat_params
from abm.learning.runner import ProtocolResult
from abm.populations import load_region
from abm.private_calibration.federation import (
    CalibratorParticipant,
    ProtocolRun,
    build_participant,
    build_participants,
    calibration_specs,
    calibrator_for,
    protocol_run,
)
from abm.private_calibration.institutions import Institution, build_institution
from abm.private_calibration.observed import CHANNELS, model_scenario
from abm.private_calibration.scenario import CalibratorSpec, PrivateCalibrationScenario, portable
from abm.threads import torch_threads

_INSTITUTIONS: dict[str, dict[int, Institution]] = {}  # per scenario JSON, per process
_LOCK = threading.Lock()


def _institution(scenario_json: str, scenario: PrivateCalibrationScenario, k: int) -> Institution:
    with _LOCK:  # clients of one process may ask in threads
        if scenario_json not in _INSTITUTIONS:
            _INSTITUTIONS.clear()
            _INSTITUTIONS[scenario_json] = {}
        built = _INSTITUTIONS[scenario_json]
    if k not in built:
        with torch_threads(1):
            model = model_scenario(scenario, Path("."))
            built[k] = build_institution(scenario, model, load_region(model.population.region), k)
    return built[k]


class InstitutionClient(ParticipantClient):
    """Institution ``pid`` of a private-calibration scenario, as a Flower client.

    The scenario JSON must be :func:`portable`. State between requests (calibrator, optimizer,
    random streams, the operation's store) is kept by the parent class in Flower's node state.
    """

    KIND = "private_calibration"
    MODULE = "abm.private_calibration.flower"

    @staticmethod
    def members(scenario_json: str) -> int:
        """How many institutions the scenario (resolved, as JSON) has."""
        return len(PrivateCalibrationScenario.model_validate_json(scenario_json).institutions)

    @staticmethod
    def placed(scenario_json: str, folder: Path) -> str:
        """The scenario JSON of a file in ``folder`` with its model scenario's path made full
        (:func:`portable`): a report's ``scenario.json`` names its ``model.resolved.yaml`` beside
        it. A JSON that is no such scenario is left as it is, for :meth:`members` to name."""
        try:
            scenario = PrivateCalibrationScenario.model_validate_json(scenario_json)
        except ValueError:
            return scenario_json
        return portable(scenario, folder).model_dump_json()

    def __init__(self, scenario_json: str, pid: int, context: Context | None = None) -> None:
        # not ParticipantClient.__init__: there is no learning scenario or shared data set here
        self.scenario_json = scenario_json
        self.scenario = PrivateCalibrationScenario.model_validate_json(scenario_json)
        self.pid = pid
        self.node_context = context
        self._local_state: dict[str, Any] = {}
        self.institution = _institution(scenario_json, self.scenario, pid)

    def _models(self, protocol: int) -> list[CalibratorSpec]:
        spec = calibration_specs(self.scenario)[protocol]
        return spec.models or self.scenario.models

    def _template(self, protocol: int, j: int) -> torch.nn.Module:
        models = self._models(protocol)
        with torch.random.fork_rng(devices=[]):
            return calibrator_for(models[j % len(models)], self.scenario.model.weeks, self.scenario.grid().n_classes)

    def _participant(self, protocol: int) -> CalibratorParticipant:
        return build_participant(self.scenario, self.institution, self._models(protocol))

    def get_properties(self, ins: GetPropertiesIns) -> GetPropertiesRes:
        """Public facts: institution index, number of training pairs, input width and classes."""
        props = {
            "pid": self.pid,
            "n_train": len(self.institution.data.train),
            "input_shape": json.dumps([len(CHANNELS) * self.scenario.model.weeks]),
            "n_classes": self.scenario.grid().n_classes,
        }
        return GetPropertiesRes(status=Status(code=Code.OK, message=""), properties=props)


def simulation_client_fn(scenario_json: str) -> Callable[[Context], InstitutionClient]:
    """A ``client_fn`` for Flower's simulation engine: the node's partition id is the institution."""

    def client_fn(context: Context) -> InstitutionClient:
        return InstitutionClient(scenario_json, int(context.node_config["partition-id"]), context)

    return client_fn


class CalibratorClients(FlowerClients):
    """A Flower client pool whose model templates are calibrators (``models`` are CalibratorSpecs)."""

    def model_template(self, pid: int) -> torch.nn.Module:
        spec = self.models[pid % len(self.models)]
        weeks = self.input_shape[0] // len(CHANNELS)
        with torch.random.fork_rng(devices=[]):
            return calibrator_for(spec, weeks, self.n_classes)


Finished = tuple[ProtocolResult, AuditNetwork, dict[int, torch.Tensor]]


def server_work(
    scenario: PrivateCalibrationScenario, done: list[Finished], facts: dict[str, Any]
) -> Callable[[dict[int, tuple[Any, dict]]], None]:
    """The server's work once every institution's client is connected: every protocol through
    :func:`execute_protocol` over a :class:`CalibratorClients` pool, then the final calibrators."""
    from abm.learning.flower.run import serve_protocols

    def record(result: ProtocolResult, network: Network, pool: FlowerClients) -> None:
        final = {pid: r["w"] for pid, r in pool.broadcast("get_weights").items()}
        done.append((result, network, final))  # type: ignore[arg-type]

    return serve_protocols(
        scenario,
        calibration_specs(scenario),
        CalibratorClients,
        record,
        facts,
        AuditNetwork,
        timeout=scenario.flower_timeout,
    )


def run_protocols_flower(
    scenario: PrivateCalibrationScenario,
    base: Path,
    institutions: list[Institution],
    mode: str,
    connect_timeout: float = 120.0,
) -> tuple[list[ProtocolRun], int]:
    """Every protocol of ``scenario`` (local-only first) over Flower; returns the runs, with the
    final calibrators loaded into local participants for evaluation, and the number of
    client-operation requests that went through Flower.

    ``mode`` is ``flower-sim`` (Flower's simulation engine) or ``flower`` (one client process per
    institution on 127.0.0.1).
    """
    from abm.learning.flower import import_flwr
    from abm.learning.flower.run import MODES, raise_server_error, run_processes, run_simulation
    from abm.learning.flower.server import ProtocolServer

    if mode not in MODES:
        raise ValueError(f"unknown Flower mode {mode!r}; allowed: {', '.join(MODES)}")
    import_flwr()
    job = portable(scenario, base)
    done: list[Finished] = []
    facts: dict[str, Any] = {}
    n = len(scenario.institutions)
    server = ProtocolServer(n, server_work(job, done, facts), connect_timeout, scenario.flower_timeout)
    if mode == "flower-sim":
        run_simulation(job, server, client_fn=simulation_client_fn(job.model_dump_json()), n=n)
    else:
        run_processes(job, server, connect_timeout, client_module="abm.private_calibration.flower", n=n)
    raise_server_error(server)
    runs = []
    for spec, (result, network, final) in zip(calibration_specs(scenario), done, strict=True):
        participants = build_participants(scenario, institutions, spec.models or scenario.models)
        for p in participants:
            load_flat_params(p.model, final[p.pid])
        runs.append(protocol_run(result, participants, network))
    return runs, int(facts["requests"])


if __name__ == "__main__":
    client_main(client_cls=InstitutionClient)
