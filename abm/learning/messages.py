"""Typed, sized messages and the network that carries them and accounts bytes.

A message's size is the byte size of its tensor payload (numel x element size), so communication
is measured, not estimated. The in-process :class:`Network` delivers immediately and keeps a
ledger per round and per participant; :class:`AuditNetwork` also keeps every message, for audits of
what leaves whom. Every exchange between participants (or with the server) of every protocol and
privacy wrapper goes through ``Network.send``, so the ledger's bytes are the sum of the messages.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from enum import StrEnum

import torch

SERVER = -1
"""Participant id used for a server / aggregator."""


class MessageKind(StrEnum):
    """What a message carries.

    ``data_size``: a training-set size (one int64), or the server's total of them, sent once before
    round 0 to whoever weights by size. ``request``: the sender asks the receiver for what the
    protocol exchanges (a peer learns that it was chosen); it carries nothing, so 0 bytes (who asks,
    whom and in which round are the message's envelope, which no message counts).
    """

    MODEL_WEIGHTS = "model_weights"
    MODEL_UPDATE = "model_update"
    INPUT_GRADIENTS = "input_gradients"
    DREAMS = "dreams"
    GENERATOR = "generator"
    LOGITS = "logits"
    SOFT_LABELS = "soft_labels"
    PROTOTYPES = "prototypes"
    CLASSIFIER_HEAD = "classifier_head"
    PREDICTIONS = "predictions"
    PREDICTION_REQUEST = "prediction_request"
    MASKED_VECTOR = "masked_vector"
    PUBLIC_KEY = "public_key"
    MASK_SEED = "mask_seed"
    RECOVERY_REQUEST = "recovery_request"
    TOKEN = "token"
    CHALLENGE = "challenge"
    VALIDATION_ACCURACY = "validation_accuracy"
    DATA_SIZE = "data_size"
    REQUEST = "request"


@dataclass(frozen=True)
class Message:
    """One message from ``sender`` to ``receiver`` (participant ids; ``SERVER`` = -1)."""

    kind: MessageKind
    sender: int
    receiver: int
    payload: dict[str, torch.Tensor]
    round: int = 0
    extra_bytes: int = 0

    @property
    def nbytes(self) -> int:
        """Payload size in bytes."""
        return self.extra_bytes + sum(t.numel() * t.element_size() for t in self.payload.values())


@dataclass
class Network:
    """Delivers messages in process and accounts bytes per participant and per round."""

    sent: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    received: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    per_round: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    per_kind: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    count: int = 0
    kinds_sent: dict[int, set[str]] = field(default_factory=lambda: defaultdict(set))

    def send(self, msg: Message) -> Message:
        """Account ``msg`` and return it (delivery is the caller's hand-over)."""
        n = msg.nbytes
        self.sent[msg.sender] += n
        self.received[msg.receiver] += n
        self.per_round[msg.round] += n
        self.per_kind[msg.kind.value] += n
        self.kinds_sent[msg.sender].add(msg.kind.value)
        self.count += 1
        return msg

    def total_bytes(self) -> int:
        """All bytes sent."""
        return int(sum(self.sent.values()))


@dataclass
class AuditNetwork(Network):
    """A :class:`Network` that also keeps every message (for audits of what leaves whom)."""

    messages: list[Message] = field(default_factory=list)

    def send(self, msg: Message) -> Message:
        self.messages.append(msg)
        return super().send(msg)
