"""Local-only training: no communication (the standalone baseline B_n)."""

from __future__ import annotations

from abm.learning.protocols.base import Protocol, RunContext


class LocalOnly(Protocol):
    """Each participant trains on its own data, ``local_epochs`` per round."""

    name = "local"

    def run_round(self, ctx: RunContext, t: int) -> None:
        ctx.clients.broadcast("train", config={"epochs": ctx.local_epochs})
