"""Centralized training on pooled data: the upper bound no private protocol may use."""

from __future__ import annotations

import copy

from abm.learning.participant import Participant
from abm.learning.partition import ParticipantData
from abm.learning.protocols.base import Protocol, RunContext


class Centralized(Protocol):
    """One model (participant 0's architecture) trained on everyone's training data pooled.

    Every participant is then scored with that model on its own evaluation data.
    """

    name = "centralized"

    def setup(self, ctx: RunContext) -> None:
        if ctx.pooled_train is None:
            raise ValueError("centralized training needs the pooled training data")
        p0 = ctx.participants[0]
        data = ParticipantData(ctx.pooled_train, p0.data.val, p0.data.test)
        self._pool = Participant(-1, data, copy.deepcopy(p0.model), p0.train_config, ctx.seed)

    def run_round(self, ctx: RunContext, t: int) -> None:
        self._pool.train(ctx.local_epochs)
        diverged = self._pool.losses.take()
        for p in ctx.participants:
            p.model = self._pool.model
            p.losses.nonfinite += diverged  # each is scored with the pooled model: its training is theirs
