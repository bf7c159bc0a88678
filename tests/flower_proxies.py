"""A Flower client proxy for tests that hands each request straight to a fresh client object
(as Flower's simulation makes one per message) built from a scenario's JSON, with a node context
that persists across messages. Shared by the learning and private-calibration Flower tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flwr.common import Context, RecordDict
from flwr.server.client_proxy import ClientProxy


class DirectProxy(ClientProxy):
    """Participant ``pid``'s proxy: ``make_client(scenario_json, pid, context)`` builds the client
    for each message (``ParticipantClient`` or ``InstitutionClient``)."""

    def __init__(self, make_client: Callable[[str, int, Context], Any], scenario_json: str, pid: int) -> None:
        super().__init__(cid=str(pid))
        self.make_client = make_client
        self.scenario_json = scenario_json
        self.pid = pid
        self.context = Context(run_id=0, node_id=pid, node_config={}, state=RecordDict(), run_config={})

    def _client(self) -> Any:
        return self.make_client(self.scenario_json, self.pid, self.context)

    def get_properties(self, ins, timeout, group_id):
        return self._client().get_properties(ins)

    def fit(self, ins, timeout, group_id):
        return self._client().fit(ins)

    def get_parameters(self, ins, timeout, group_id):  # pragma: no cover - not used
        raise NotImplementedError

    def evaluate(self, ins, timeout, group_id):  # pragma: no cover - not used
        raise NotImplementedError

    def reconnect(self, ins, timeout, group_id):  # pragma: no cover - not used
        raise NotImplementedError
