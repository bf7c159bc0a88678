"""Training-set sizes as messages, for the protocols that weight by them.

Whoever weights by |D_k| learns it from a ``data_size`` message (one int64, 8 bytes), sent once
before round 0 (round -1) and read from the message: FedAvg's and CoDream's server and clients
(:func:`server_size_weights`), MAPL's and IPA's peers (:func:`sizes_to_peers`). A participant's
own size is its own (``ctx.clients.sizes``: the in-process participants', or those each Flower
client states when it connects).
"""

from __future__ import annotations

import numpy as np
import torch

from abm.learning.clients import Payload
from abm.learning.messages import SERVER, Message, MessageKind
from abm.learning.protocols.base import RunContext

SIZES_ROUND = -1
"""The round the sizes travel in: before round 0."""


def _send(ctx: RunContext, sender: int, receiver: int, size: int) -> Payload:
    """Send ``size`` from ``sender`` to ``receiver``; the payload as the receiver reads it."""
    payload = {"n": torch.tensor([size], dtype=torch.int64)}
    return ctx.network.send(Message(MessageKind.DATA_SIZE, sender, receiver, payload, SIZES_ROUND)).payload


def _send_size(ctx: RunContext, sender: int, receiver: int, size: int) -> int:
    """Send ``size`` from ``sender`` to ``receiver``; the value as the receiver reads it."""
    return int(_send(ctx, sender, receiver, size)["n"].item())


def server_size_weights(ctx: RunContext) -> list[float]:
    """Weights |D_k| / sum_j |D_j|, in id order, as a server and its participants learn them.

    Every participant sends the server its size; the server sends every participant the total, and
    each participant computes its own weight from its size and the total it received (client
    operation ``set_contribution_weight``; the weight itself never travels). The server knows every
    weight: the same sizes over the same totals. 2 x N messages of 8 bytes.
    """
    sizes = [_send_size(ctx, pid, SERVER, size) for pid, size in zip(ctx.ids, ctx.clients.sizes, strict=True)]
    total = sum(sizes)
    received = {pid: _send(ctx, SERVER, pid, total) for pid in ctx.ids}
    ctx.clients.call("set_contribution_weight", received)
    return [own / int(received[pid]["n"].item()) for pid, own in zip(ctx.ids, ctx.clients.sizes, strict=True)]


def contribution_weights(ctx: RunContext, weighting: str) -> list[float]:
    """The weights of a server's sum, in id order: 1 / N each (``uniform``: no sizes travel; each
    participant is told N, public) or :func:`server_size_weights` (``size``). Each participant
    keeps its own (read by the client operations with :func:`abm.learning.clients.contribution_weight`)."""
    if weighting == "uniform":
        ctx.clients.broadcast("set_contribution_weight", config={"participants": ctx.n})
        return [1.0 / ctx.n] * ctx.n
    return server_size_weights(ctx)


def sizes_to_peers(ctx: RunContext) -> np.ndarray:
    """Every participant sends its size to every other (N (N - 1) messages of 8 bytes).

    Row i holds the sizes participant i knows, in id order: its own, and those it received.
    """
    n = ctx.n
    known = np.zeros((n, n))
    for j, (sender, size) in enumerate(zip(ctx.ids, ctx.clients.sizes, strict=True)):
        for i, receiver in enumerate(ctx.ids):
            known[i, j] = size if i == j else _send_size(ctx, sender, receiver, size)
    return known
