"""The Flower client: one participant, answering the server's client-operation requests.

Each request names a client operation (:mod:`abm.learning.clients`) and the protocol it belongs to
(its index in the scenario's protocol list). The client rebuilds its participant from the scenario
(its own share of the data, its own model initialisation: the same as the in-process runner's) and
restores what changed since (weights, optimizer state, random streams, the operation's store) from
Flower's per-node ``context.state``, so the same code runs in Flower's simulation engine, where a
client object lives for one message only, and in a client process of its own.

Run as a process: ``python -m abm.learning.flower.client --address 127.0.0.1:PORT --pid K
--scenario FILE.json`` (the Flower runner starts these itself).
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import math
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import torch
from flwr.client import Client
from flwr.common import (
    Code,
    ConfigRecord,
    Context,
    FitIns,
    FitRes,
    GetPropertiesIns,
    GetPropertiesRes,
    Status,
)
from pydantic import ValidationError

from abm.learning.clients import ClientEnv, run_client_op
from abm.learning.flower.codec import decode_request, encode_tensors
from abm.learning.participant import Participant
from abm.learning.runner import (
    PreparedData,
    build_participant,
    model_for,
    prepare_data,
    protocol_specs,
    scored_on,
)
from abm.learning.scenario import LearningScenario

_STATE_KEY = "abm_participant"
_BUILD_LOCK = threading.Lock()
_DATA: dict[str, PreparedData] = {}  # read-only prepared data, per scenario, cached per process


def _prepared(scenario_json: str, scenario: LearningScenario) -> PreparedData:
    if scenario_json not in _DATA:
        _DATA.clear()
        _DATA[scenario_json] = prepare_data(scenario)
    return _DATA[scenario_json]


def one_line(error: BaseException) -> str:
    """``error`` as one line: its type and message, the message's line breaks made spaces."""
    text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return " ".join(text.split())


class ParticipantClient(Client):
    """Participant ``pid`` of the scenario, as a Flower client."""

    KIND: ClassVar[str | None] = None
    """The top-level ``kind`` of the scenarios this client runs (a learning scenario has none)."""
    MODULE: ClassVar[str] = "abm.learning.flower.client"
    """The module whose ``python -m`` starts this client's process."""

    @staticmethod
    def members(scenario_json: str) -> int:
        """How many participants the scenario (resolved, as JSON) has: the valid ``--pid`` are
        0 to that less 1. A ``ValueError`` where it is no such scenario."""
        return LearningScenario.model_validate_json(scenario_json).split.participants

    @staticmethod
    def placed(scenario_json: str, folder: Path) -> str:
        """The scenario JSON of a file in ``folder`` with the paths it names relative to that
        folder made full, so that a client started from any folder reads the same files (a
        learning scenario names none: as it is)."""
        return scenario_json

    def __init__(self, scenario_json: str, pid: int, context: Context | None = None) -> None:
        self.scenario_json = scenario_json
        self.scenario = LearningScenario.model_validate_json(scenario_json)
        self.pid = pid
        self.node_context = context
        self.data = _prepared(scenario_json, self.scenario)
        self._local_state: dict[str, Any] = {}

    # ---- state ------------------------------------------------------------------------------
    def _models(self, protocol: int):
        spec = protocol_specs(self.scenario)[protocol]
        return spec.models or self.scenario.models

    def _template(self, protocol: int, j: int) -> torch.nn.Module:
        models = self._models(protocol)
        with torch.random.fork_rng(devices=[]):
            return model_for(models[j % len(models)], self.data.source.input_shape, self.data.source.n_classes)

    def _participant(self, protocol: int) -> Participant:
        """This client's participant as the protocol starts (subclasses for other tasks override)."""
        return build_participant(self.scenario, self.data, self._models(protocol), self.pid)

    def _load(self, protocol: int) -> ClientEnv:
        with _BUILD_LOCK:  # building seeds the global torch stream; clients may share a process (threads)
            participant = self._participant(protocol)
        env = ClientEnv(participant, lambda j: self._template(protocol, j))
        blob = self._read_blob()
        if blob is not None:
            state = torch.load(io.BytesIO(blob), weights_only=False)
            if state["protocol"] == protocol:
                participant.model.load_state_dict(state["model"])
                participant.optimizer.load_state_dict(state["optimizer"])
                participant.generator.set_state(state["generator"])
                participant.rng.bit_generator.state = state["rng"]
                env.store = state["store"]
        return env

    def _save(self, protocol: int, env: ClientEnv) -> None:
        p = env.participant
        state = {
            "protocol": protocol,
            "model": p.model.state_dict(),
            "optimizer": p.optimizer.state_dict(),
            "generator": p.generator.get_state(),
            "rng": p.rng.bit_generator.state,
            "store": env.store,
        }
        buf = io.BytesIO()
        torch.save(state, buf)
        if self.node_context is not None:
            self.node_context.state[_STATE_KEY] = ConfigRecord({"blob": buf.getvalue()})
        else:
            self._local_state["blob"] = buf.getvalue()

    def _read_blob(self) -> bytes | None:
        if self.node_context is not None:
            rec = self.node_context.state.get(_STATE_KEY) if _STATE_KEY in self.node_context.state else None
            return None if rec is None else bytes(rec["blob"])
        return self._local_state.get("blob")

    # ---- Flower client interface ---------------------------------------------------------------
    def get_properties(self, ins: GetPropertiesIns) -> GetPropertiesRes:
        """Public facts: participant id, training-set size, how many samples it is scored on, data
        shape and classes."""
        props = {
            "pid": self.pid,
            "n_train": len(self.data.parts[self.pid].train),
            "n_scored": len(scored_on(self.scenario, self.data, self.pid)),
            "input_shape": json.dumps(list(self.data.source.input_shape)),
            "n_classes": self.data.source.n_classes,
        }
        return GetPropertiesRes(status=Status(code=Code.OK, message=""), properties=props)

    def fit(self, ins: FitIns) -> FitRes:
        """Run the requested client operation on this participant; reply with its tensors."""
        torch.set_num_threads(1)
        try:
            op, protocol, payload, config = decode_request(ins.parameters, ins.config)
            env = self._load(protocol)
            reply = run_client_op(op, env, payload, config)
            self._save(protocol, env)
        except Exception as e:  # reported to the server, which ends the run with it
            params, names = encode_tensors({})
            return FitRes(
                status=Status(code=Code.FIT_NOT_IMPLEMENTED, message=traceback.format_exc()),
                parameters=params,
                num_examples=0,
                metrics={"names": "[]", "error": one_line(e)},
            )
        params, names = encode_tensors(reply)
        return FitRes(
            status=Status(code=Code.OK, message=""),
            parameters=params,
            num_examples=len(env.participant.data.train),
            metrics={"names": json.dumps(names)},
        )


def simulation_client_fn(scenario_json: str) -> Callable[[Context], Client]:
    """A ``client_fn`` for Flower's simulation engine: the node's partition id is the participant id."""

    def client_fn(context: Context) -> Client:
        pid = int(context.node_config["partition-id"])
        return ParticipantClient(scenario_json, pid, context)

    return client_fn


def other_client(scenario_json: str, cls: type[ParticipantClient]) -> str | None:
    """Where ``scenario_json`` is a resolved scenario of another kind than ``cls`` runs (a private
    calibration's for a learning client, or the other way round), what to say of it: its kind and
    the client that runs it; else None."""
    try:
        kind = json.loads(scenario_json).get("kind")
    except (ValueError, AttributeError):  # no JSON, or no mapping: the schema's message says so
        return None
    if kind == cls.KIND or kind not in (None, "private_calibration"):  # its own, or no scenario's at all
        return None
    module = "abm.private_calibration.flower" if kind == "private_calibration" else ParticipantClient.MODULE
    what = "a private-calibration" if kind == "private_calibration" else "a learning"
    return f"{what} scenario, which this client does not run; start its clients with python -m {module}"


def address_ok(address: str) -> bool:
    """Whether ``address`` reads as a server's ``host:port`` (an IPv6 host in brackets), the port
    1 to 65535, with no URL scheme or path."""
    host, sep, port = address.rpartition(":")
    return bool(sep and host) and "/" not in address and port.isdigit() and 1 <= int(port) <= 65535


def fail(message: str, code: int) -> None:
    """End the client process with ``message`` as one line on stderr (the runner reads a client's
    last line) and exit ``code``."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(code)


def main(argv: list[str] | None = None, client_cls: type[ParticipantClient] | None = None) -> None:
    """Start one participant's Flower client process and serve until the server ends the run.

    ``client_cls`` (default :class:`ParticipantClient`) is built as ``client_cls(scenario_json, pid,
    context)``; other tasks (private calibration) pass their own subclass. A scenario file that
    cannot be read or is not a resolved scenario, or a ``--pid`` the scenario does not have, ends
    it with one line and exit code 2; a server that cannot be reached within ``--max-wait``
    seconds (or that goes away), with one line naming the address and exit code 1."""
    import grpc
    from flwr.client import start_client

    from abm.learning.flower.run import flower_notices_quiet

    cls = client_cls or ParticipantClient
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--address", required=True, help="server address, host:port")
    ap.add_argument("--pid", type=int, required=True, help="participant id, 0 to the participants less 1")
    ap.add_argument("--scenario", required=True, help="resolved scenario JSON file")
    ap.add_argument("--max-wait", type=float, default=120.0, help="seconds to keep trying to reach the server")
    args = ap.parse_args(argv)
    if not address_ok(args.address):  # Flower printed its own lines (and a web link) for it, exit 1
        fail(f"--address: {args.address!r} is not allowed: give host:port, a port 1 to 65535 (127.0.0.1:8080)", 2)
    if not (math.isfinite(args.max_wait) and args.max_wait > 0):  # it said 'within -1 s', 'within nan s'
        fail(f"--max-wait: {args.max_wait:g} is not allowed: give the seconds to keep trying, a number above 0", 2)
    logging.getLogger("flwr").setLevel(logging.WARNING)
    torch.set_num_threads(1)
    try:
        with open(args.scenario, encoding="utf-8") as f:
            scenario_json = f.read()
    except (OSError, UnicodeDecodeError) as e:
        fail(f"--scenario {args.scenario}: cannot read the file: {getattr(e, 'strerror', None) or one_line(e)}", 2)
    other = other_client(scenario_json, cls)
    if other is not None:  # it said 'data: Field required' of a private calibration's scenario.json
        fail(f"--scenario {args.scenario}: {other}", 2)
    scenario_json = cls.placed(scenario_json, Path(args.scenario).parent)
    try:
        n = cls.members(scenario_json)
    except ValueError as e:  # pydantic's ValidationError is one
        problem = e.errors()[0] if isinstance(e, ValidationError) else None
        reason = (
            one_line(e) if problem is None else f"{'.'.join(map(str, problem['loc'])) or 'top level'}: {problem['msg']}"
        )
        fail(
            f"--scenario {args.scenario}: not a resolved scenario JSON file (the Flower runner writes one): {reason}", 2
        )
    if not 0 <= args.pid < n:
        fail(f"--pid: {args.pid} is not allowed: the scenario has {n} participants; give 0 to {n - 1}", 2)
    connected = threading.Event()

    def client_fn(context: Context) -> Client:
        connected.set()
        return cls(scenario_json, args.pid, context)

    try:
        with flower_notices_quiet():  # its log's last line tells the runner why a client ended
            start_client(server_address=args.address, client_fn=client_fn, insecure=True, max_wait_time=args.max_wait)
    except grpc.RpcError as e:
        details = e.details() if isinstance(e, grpc.Call) else str(e)
        what = (
            f"lost the Flower server at {args.address}"
            if connected.is_set()
            else f"could not reach the Flower server at {args.address} within {args.max_wait:g} s"
        )
        fail(f"{what} ({' '.join(str(details).split())})", 1)


if __name__ == "__main__":
    main()
