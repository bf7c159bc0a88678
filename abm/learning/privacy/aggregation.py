"""The sum-aggregation interface and its plain (non-private) implementation."""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch

from abm.learning.messages import SERVER, Message, MessageKind, Network


class SumAggregator(ABC):
    """Computes the sum of participants' vectors for the aggregator ("server").

    ``contributions`` maps participant id -> 1-D float tensor; ``dropped`` are participants that
    fail after the round started (their vector never arrives). ``adds_noise`` says whether the
    returned sum carries DP noise (protocols then keep values that must not be noised, such as
    BatchNorm running statistics, out of the sum).
    """

    adds_noise: bool = False

    @abstractmethod
    def aggregate(
        self,
        contributions: dict[int, torch.Tensor],
        round_: int,
        network: Network,
        kind: MessageKind = MessageKind.MODEL_UPDATE,
        dropped: frozenset[int] = frozenset(),
    ) -> torch.Tensor:
        """Return the sum over the participants that did not drop out."""

    def epsilon(self, delta: float) -> float | None:
        """Privacy loss spent so far (``None`` when the aggregator adds no DP noise)."""
        return None


class PlainSum(SumAggregator):
    """Every participant sends its vector in the clear; the server adds them."""

    def aggregate(
        self,
        contributions: dict[int, torch.Tensor],
        round_: int,
        network: Network,
        kind: MessageKind = MessageKind.MODEL_UPDATE,
        dropped: frozenset[int] = frozenset(),
    ) -> torch.Tensor:
        total: torch.Tensor | None = None
        for pid in sorted(contributions):
            if pid in dropped:
                continue
            vec = contributions[pid]
            network.send(Message(kind, pid, SERVER, {"v": vec}, round_))
            total = vec.clone().double() if total is None else total + vec.double()
        if total is None:
            raise RuntimeError("no contribution arrived")
        return total.float()
