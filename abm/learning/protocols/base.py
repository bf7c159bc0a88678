"""The protocol interface: round logic as plain methods over participant state and messages."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from abm.learning.clients import ClientPool, InProcessClients
from abm.learning.data import Dataset
from abm.learning.messages import Network
from abm.learning.participant import Participant
from abm.learning.privacy.aggregation import PlainSum, SumAggregator
from abm.learning.protocols.configs import ProtocolConfig
from abm.learning.protocols.traits import ProtocolTraits, protocol_traits


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
    traits: ClassVar[ProtocolTraits]  # the registry's entry for ``name`` (:mod:`abm.learning.protocols.traits`)
    Config: ClassVar[type[ProtocolConfig]] = ProtocolConfig

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A protocol's traits and config are the registry's for its name (one source for the
        scenario checks and the run)."""
        super().__init_subclass__(**kwargs)
        cls.traits = protocol_traits(cls.name)
        cls.Config = cls.traits.config

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
