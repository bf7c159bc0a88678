"""The sum-aggregation interface and its plain (non-private) implementation."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import torch

from abm.learning.messages import SERVER, Message, MessageKind, Network

FLOAT32_MAX = float(torch.finfo(torch.float32).max)  # the largest finite value a model holds


@dataclass(frozen=True)
class WithheldSum:
    """One sum that some participants held their vectors back from, because the sum could not carry
    them (:meth:`SumAggregator.aggregate`): its round (from 0), what was summed (a message kind's
    value), the participants that held back (in order), and whether the sum of the others was
    released (``False``: too few vectors arrived, the sum was skipped). A sum whose aggregate was
    not finite, and was discarded (:meth:`SumAggregator.discard`), names no participant and is
    not released."""

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

    Each participant checks its own vector before it sends anything (:meth:`carries`): one that
    holds a value the sum cannot carry (NaN or infinity, which would turn the sum and every model it
    updates NaN: training diverged; a finite value so large that the sum of as many could overflow
    float32; under secure aggregation a value beyond the fixed point's range) sends nothing and is
    left out of the sum exactly as a dropped participant is.
    :meth:`withheld` names them for the last sum, and :meth:`take_withheld` returns each such sum
    once, for the run's record. Implementations call :meth:`screen` before they sum and
    :meth:`note_withheld` once they know whether the sum is released.
    """

    adds_noise: bool = False
    secure: bool = False  # whether the server learns only the sum (secure aggregation)
    _withheld: frozenset[int] = frozenset()  # the last sum's (screen)
    _withheld_sums: tuple[WithheldSum, ...] = ()  # since the last take_withheld

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

    def carries(self, vec: torch.Tensor, members: int) -> bool:
        """Whether the sum of ``members`` vectors can carry every value of ``vec``: a participant's
        own check before it sends it (here: every value finite and below float32's largest value
        divided by ``members`` in magnitude, so that no sum of ``members`` such vectors overflows,
        whatever the others hold)."""
        x = vec.detach()  # a NaN's largest magnitude is NaN, and NaN < limit is False
        return x.numel() == 0 or float(x.abs().max()) < FLOAT32_MAX / members

    def screen(self, contributions: dict[int, torch.Tensor], dropped: frozenset[int] = frozenset()) -> list[int]:
        """The participants (not ``dropped``, in order) whose vector the sum cannot carry
        (:meth:`carries`): they send nothing. Remembered as the last sum's (:meth:`withheld`)."""
        members = sorted(contributions)
        held = [p for p in members if p not in dropped and not self.carries(contributions[p], len(members))]
        self._withheld = frozenset(held)
        return held

    def note_withheld(self, round_: int, kind: MessageKind, released: bool) -> None:
        """Record the last :meth:`screen`'s sum (of ``kind``, in ``round_``; ``released`` or not)
        if any participant held its vector back from it."""
        if self._withheld:
            self._withheld_sums += (WithheldSum(round_, kind.value, tuple(sorted(self._withheld)), released),)

    def hold_back(self, round_: int, kind: MessageKind, participants: tuple[int, ...]) -> None:
        """Record that ``participants`` held back, in ``round_``, what they share outside any sum
        (``kind``: IPA's token), their training having diverged: they are left out of what is
        shared from then on, and it goes on without them (a :class:`WithheldSum` released)."""
        self._withheld_sums += (WithheldSum(round_, kind.value, tuple(sorted(participants)), True),)

    def discard(self, round_: int, kind: MessageKind) -> None:
        """Record that what the last sum (of ``kind``, in ``round_``) would have been written as
        was not finite (a finite sum scaled past float32's range, as by a server learning rate
        above 1), so it was discarded and what it would have updated stays as it was: a sum not
        released that names no participant (:func:`finite_or_discarded`)."""
        self._withheld_sums += (WithheldSum(round_, kind.value, (), False),)

    def withheld(self) -> frozenset[int]:
        """The participants that held their vectors back from the last sum."""
        return self._withheld

    def take_withheld(self) -> list[WithheldSum]:
        """The sums since the last call that participants held their vectors back from."""
        taken, self._withheld_sums = self._withheld_sums, ()
        return list(taken)

    def epsilon(self, delta: float) -> float | None:
        """Privacy loss spent so far (``None`` when the aggregator adds no DP noise)."""
        return None


def finite_or_discarded(
    aggregator: SumAggregator, value: torch.Tensor, round_: int, kind: MessageKind
) -> torch.Tensor | None:
    """``value``, what a released sum is about to be written into models as (a new global model, a
    meta step), if every value of it is finite; else ``None``, recorded as discarded
    (:meth:`SumAggregator.discard`): the caller keeps what it would have replaced. No participant
    is named: every one checked its own vector (:meth:`SumAggregator.carries`), and under secure
    aggregation no one sees another's."""
    if bool(torch.isfinite(value).all()):
        return value
    aggregator.discard(round_, kind)
    return None


def arrived_weight(weights: list[float], ids: list[int], left_out: frozenset[int]) -> float:
    """The total weight (``weights[k]`` for participant ``ids[k]``) of the participants whose
    vectors entered a sum: all but ``left_out`` (dropped or withheld)."""
    return sum(w for w, pid in zip(weights, ids, strict=True) if pid not in left_out)


class PlainSum(SumAggregator):
    """Every participant sends its vector in the clear and the server adds them (in float64); a
    participant whose vector is not finite (NaN or inf), or so large that the sum could overflow
    float32, sends nothing, as a dropout (:meth:`SumAggregator.screen`): the sum is always finite."""

    def aggregate(
        self,
        contributions: dict[int, torch.Tensor],
        round_: int,
        network: Network,
        kind: MessageKind = MessageKind.MODEL_UPDATE,
        dropped: frozenset[int] = frozenset(),
        quorum: int = 1,
    ) -> torch.Tensor | None:
        left_out = dropped | frozenset(self.screen(contributions, dropped))
        total: torch.Tensor | None = None
        arrived = 0
        for pid in sorted(contributions):
            if pid in left_out:
                continue
            vec = contributions[pid]
            network.send(Message(kind, pid, SERVER, {"v": vec}, round_))
            total = vec.clone().double() if total is None else total + vec.double()
            arrived += 1
        released = total is not None and arrived >= quorum
        self.note_withheld(round_, kind, released)
        return total.float() if released and total is not None else None
