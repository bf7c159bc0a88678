"""The sum-aggregation interface and its plain (non-private) implementation."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import torch

from abm.learning.messages import SERVER, Message, MessageKind, Network


@dataclass(frozen=True)
class WithheldSum:
    """One sum that some participants held their vectors back from, because the sum could not carry
    them (:meth:`SumAggregator.aggregate`): its round (from 0), what was summed (a message kind's
    value), the participants that held back (in order), and whether the sum of the others was
    released (``False``: too few vectors arrived, the sum was skipped)."""

    round: int
    kind: str
    participants: tuple[int, ...]
    released: bool


class SumAggregator(ABC):
    """Computes the sum of participants' vectors for the aggregator ("server").

    ``contributions`` maps participant id -> 1-D float tensor; ``dropped`` are participants that
    fail after the round started (their vector never arrives). ``adds_noise`` says whether the
    returned sum carries DP noise (protocols then keep values that must not be noised, such as
    BatchNorm running statistics, out of the sum).

    An aggregator whose sum cannot carry every value (secure aggregation's fixed point: no NaN,
    no infinity, a bounded range) has each participant check its own vector before it sends
    anything: one that holds a value the sum cannot carry sends nothing and is left out of the sum
    exactly as a dropped participant is. :meth:`withheld` names them for the last sum, and
    :meth:`take_withheld` returns each such sum once, for the run's record.
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
        quorum: int = 1,
    ) -> torch.Tensor | None:
        """Return the sum over the participants whose vectors arrived (neither dropped nor
        withheld), or ``None`` when fewer than ``quorum`` of them (or fewer than the aggregator
        needs) arrived: then nothing is released and the caller skips what the sum was for."""

    def withheld(self) -> frozenset[int]:
        """The participants that held their vectors back from the last sum (none by default: a sum
        that carries every value)."""
        return frozenset()

    def take_withheld(self) -> list[WithheldSum]:
        """The sums since the last call that participants held their vectors back from."""
        return []

    def epsilon(self, delta: float) -> float | None:
        """Privacy loss spent so far (``None`` when the aggregator adds no DP noise)."""
        return None


def arrived_weight(weights: list[float], ids: list[int], left_out: frozenset[int]) -> float:
    """The total weight (``weights[k]`` for participant ``ids[k]``) of the participants whose
    vectors entered a sum: all but ``left_out`` (dropped or withheld)."""
    return sum(w for w, pid in zip(weights, ids, strict=True) if pid not in left_out)


class PlainSum(SumAggregator):
    """Every participant sends its vector in the clear; the server adds them (any value, NaN too)."""

    def aggregate(
        self,
        contributions: dict[int, torch.Tensor],
        round_: int,
        network: Network,
        kind: MessageKind = MessageKind.MODEL_UPDATE,
        dropped: frozenset[int] = frozenset(),
        quorum: int = 1,
    ) -> torch.Tensor | None:
        total: torch.Tensor | None = None
        arrived = 0
        for pid in sorted(contributions):
            if pid in dropped:
                continue
            vec = contributions[pid]
            network.send(Message(kind, pid, SERVER, {"v": vec}, round_))
            total = vec.clone().double() if total is None else total + vec.double()
            arrived += 1
        if total is None or arrived < quorum:
            return None
        return total.float()
