"""Where participants' own computations run: named client operations and the pools that call them.

A protocol's server-side logic asks a :class:`ClientPool` to run a named operation on some
participants, with tensors in and tensors out. The operation itself (``@client_op``) runs where
the participant lives and sees only its :class:`ClientEnv`: its own data, model, optimizer and
random streams, plus whatever it chose to keep between rounds in ``store``. The in-process pool
calls the operation directly; the Flower runner (:mod:`abm.learning.flower`) carries the same
call over Flower to a client process, so both runners execute the same code on the same state.
A protocol's operations are named ``<protocol>.<operation>`` (``fedavg.fit``), so that a client
process imports the protocol's module, which registers them, when first asked for one.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from abm.learning.models import flat_params, load_flat_params
from abm.learning.participant import Participant

Payload = dict[str, torch.Tensor]


@dataclass
class ClientEnv:
    """What a client operation may touch: its own participant, its own store, model templates.

    ``model_template(j)`` returns a fresh module with participant ``j``'s architecture (public
    information: used to hold a server model such as CoDream's student); building it never
    touches the global torch random stream.
    """

    participant: Participant
    model_template: Callable[[int], nn.Module]
    store: dict[str, Any] = field(default_factory=dict)


ClientOp = Callable[[ClientEnv, Payload, dict[str, Any]], Payload]
_OPS: dict[str, ClientOp] = {}


def client_op(name: str) -> Callable[[ClientOp], ClientOp]:
    """Register a client operation under ``name``."""

    def register(fn: ClientOp) -> ClientOp:
        if name in _OPS and _OPS[name] is not fn:
            raise ValueError(f"client operation {name!r} is already registered")
        _OPS[name] = fn
        return fn

    return register


def run_client_op(name: str, env: ClientEnv, payload: Payload, config: dict[str, Any]) -> Payload:
    """Run the registered operation ``name`` on ``env``."""
    if name not in _OPS and "." in name:  # a protocol's operation: its module registers it on import
        from abm.learning.protocols import protocol_class, protocol_names

        if name.split(".")[0] in protocol_names():
            protocol_class(name.split(".")[0])
    if name not in _OPS:
        raise KeyError(f"unknown client operation {name!r}; known: {', '.join(sorted(_OPS))}")
    return _OPS[name](env, payload, config)


class ClientPool(ABC):
    """The participants as the server sees them: ids, public sizes, and remote operations."""

    ids: list[int]
    sizes: list[int]

    @abstractmethod
    def call(
        self, op: str, payloads: Mapping[int, Payload], config: Mapping[str, Any] | None = None
    ) -> dict[int, Payload]:
        """Run ``op`` on every participant in ``payloads``; returns their replies by id.

        ``config`` (JSON-able) goes to every participant alike: what is one participant's own (its
        weight, say) it computes or keeps itself (:func:`contribution_weight`).
        """

    @abstractmethod
    def model_template(self, pid: int) -> nn.Module:
        """A fresh module with participant ``pid``'s architecture (weights arbitrary)."""

    def broadcast(
        self, op: str, payload: Payload | None = None, config: Mapping[str, Any] | None = None
    ) -> dict[int, Payload]:
        """Run ``op`` on every participant with the same payload."""
        return self.call(op, {pid: dict(payload or {}) for pid in self.ids}, config)


class InProcessClients(ClientPool):
    """Participants living in this process; operations are plain calls (deterministic order)."""

    def __init__(self, participants: list[Participant]) -> None:
        self.participants = {p.pid: p for p in participants}
        self.ids = [p.pid for p in participants]
        self.sizes = [p.n_train for p in participants]
        self.envs = {p.pid: ClientEnv(p, self._template) for p in participants}

    def _template(self, pid: int) -> nn.Module:
        return copy.deepcopy(self.participants[pid].model)

    def model_template(self, pid: int) -> nn.Module:
        return self._template(pid)

    def call(
        self, op: str, payloads: Mapping[int, Payload], config: Mapping[str, Any] | None = None
    ) -> dict[int, Payload]:
        out = {}
        for pid in sorted(payloads):
            out[pid] = run_client_op(op, self.envs[pid], dict(payloads[pid]), dict(config or {}))
        return out


# ---- operations every protocol may use ---------------------------------------------------------
@client_op("train")
def _train(env: ClientEnv, payload: Payload, config: dict[str, Any]) -> Payload:
    env.participant.train(int(config["epochs"]))
    return {}


@client_op("score")
def _score(env: ClientEnv, payload: Payload, config: dict[str, Any]) -> Payload:
    """The participant's score, and its training losses that were not finite since it was last
    scored (``nonfinite``: :class:`abm.learning.training.LossWatch`)."""
    p = env.participant
    return {
        "acc": torch.tensor([p.score()], dtype=torch.float64),
        "nonfinite": torch.tensor([p.losses.take()], dtype=torch.int64),
    }


@client_op("get_weights")
def _get_weights(env: ClientEnv, payload: Payload, config: dict[str, Any]) -> Payload:
    return {"w": flat_params(env.participant.model)}


@client_op("set_weights")
def _set_weights(env: ClientEnv, payload: Payload, config: dict[str, Any]) -> Payload:
    load_flat_params(env.participant.model, payload["w"])
    return {}


_CONTRIBUTION_WEIGHT = "contribution_weight"


@client_op("set_contribution_weight")
def _set_contribution_weight(env: ClientEnv, payload: Payload, config: dict[str, Any]) -> Payload:
    """The participant computes its weight in a server's sums and keeps it: its own size over the
    total in the payload (``n``, as the ``data_size`` message brought it) or, without a payload,
    1 / ``config["participants"]`` (uniform weighting)."""
    own, total = (env.participant.n_train, int(payload["n"].item())) if "n" in payload else (1, config["participants"])
    env.store[_CONTRIBUTION_WEIGHT] = own / int(total)
    return {}


def contribution_weight(env: ClientEnv) -> float:
    """The participant's own weight in a server's sums, as ``set_contribution_weight`` computed it
    (the protocol's setup asks for it: :func:`abm.learning.protocols.sizes.contribution_weights`)."""
    if _CONTRIBUTION_WEIGHT not in env.store:
        raise RuntimeError(
            f"participant {env.participant.pid} has no contribution weight: set_contribution_weight never ran"
        )
    return float(env.store[_CONTRIBUTION_WEIGHT])
