"""The protocol interface: round logic as plain methods over participant state and messages."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict

from abm.learning.clients import ClientPool, InProcessClients
from abm.learning.data import Dataset
from abm.learning.messages import Network
from abm.learning.participant import Participant
from abm.learning.privacy.aggregation import PlainSum, SumAggregator


class ProtocolConfig(BaseModel):
    """Base for protocol parameters (unknown keys forbidden)."""

    model_config = ConfigDict(extra="forbid")


@dataclass
class RunContext:
    """Everything a protocol's round logic may use.

    ``pooled_train`` is only for the centralized upper bound; other protocols must not read it.
    ``dropouts`` maps a round to participants that drop out of that round's secure aggregation.
    ``clients`` is where participants' own computations run (by default the ``participants`` in
    this process; the Flower runner passes a pool of remote clients and no ``participants``).
    Protocols that go through ``clients`` only (``runs_on_clients``) run on every runner.
    ``clients.sizes`` are each participant's own training-set size: another party learns one only
    from a ``data_size`` message (:mod:`abm.learning.protocols.sizes`).
    """

    participants: list[Participant]
    n_classes: int
    input_shape: tuple[int, ...]
    rounds: int
    local_epochs: int
    seed: int
    network: Network = field(default_factory=Network)
    aggregator: SumAggregator = field(default_factory=PlainSum)
    pooled_train: Dataset | None = None
    dropouts: dict[int, frozenset[int]] = field(default_factory=dict)
    rng: np.random.Generator = field(init=False)
    groups: list[int] | None = None  # known domain / cluster labels (for metrics only)
    clients: ClientPool = None  # type: ignore[assignment]  # set in __post_init__ when not given

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)
        if self.clients is None:
            self.clients = InProcessClients(self.participants)

    @property
    def n(self) -> int:
        """Number of participants."""
        return len(self.clients.ids)

    @property
    def ids(self) -> list[int]:
        """Participant ids, in order."""
        return list(self.clients.ids)


class Protocol(ABC):
    """One collaboration protocol; the runner calls ``setup`` then ``run_round`` per round."""

    name: ClassVar[str] = "protocol"
    Config: ClassVar[type[ProtocolConfig]] = ProtocolConfig
    same_architecture: ClassVar[bool] = False
    uses_aggregator: ClassVar[bool] = False
    runs_on_clients: ClassVar[bool] = False  # touches participants only through ``ctx.clients``
    one_release_per_round: ClassVar[bool] = False  # one noisy sum a round: a target DP epsilon can be set
    simulates_dropouts: ClassVar[bool] = False  # reads ``ctx.dropouts`` (privacy.dropouts)
    sums_updates: ClassVar[bool] = True  # what it sums are updates (DP noise may go on them)

    @classmethod
    def needs_one_architecture(cls, params: dict[str, Any]) -> str | None:
        """Who needs one architecture for every participant in a run with these ``params`` (the
        protocol, or the protocol with the params that make it average models), or None."""
        return cls.name if cls.same_architecture else None

    def __init__(self, config: ProtocolConfig | None = None) -> None:
        self.config = config if config is not None else self.Config()

    def setup(self, ctx: RunContext) -> None:  # noqa: B027 - optional hook
        """Before the first round (warm-up, shared initialisation, key exchange)."""

    @abstractmethod
    def run_round(self, ctx: RunContext, t: int) -> None:
        """One communication round."""

    def summary(self, ctx: RunContext) -> dict[str, Any]:
        """Protocol-specific results for the report (graphs, reputations, records)."""
        return {}
