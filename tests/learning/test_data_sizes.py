"""Data sizes reach whoever weights by them as messages (``data_size``: one int64, 8 bytes, once,
before round 0), and the weights are computed from what those messages carry."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from abm.learning import clients
from abm.learning.clients import contribution_weight
from abm.learning.messages import SERVER, AuditNetwork, Message, MessageKind
from abm.learning.protocols import protocol_class
from abm.learning.protocols.base import RunContext
from abm.learning.protocols.sizes import server_size_weights, sizes_to_peers

SIZES = [4, 10, 6]
UP = [("data_size", k, SERVER, -1, 8) for k in range(3)]  # each participant's size to the server
DOWN = [("data_size", SERVER, k, -1, 8) for k in range(3)]  # the total back to each participant
PEERS = [("data_size", j, i, -1, 8) for j in range(3) for i in range(3) if i != j]  # to every other


class _Inflating(AuditNetwork):
    """An audit network on which the size ``sender`` sends ``receiver`` arrives 10 larger."""

    def __init__(self, sender: int, receiver: int) -> None:
        super().__init__()
        self.route = (sender, receiver)

    def send(self, msg: Message) -> Message:
        if msg.kind == MessageKind.DATA_SIZE and (msg.sender, msg.receiver) == self.route:
            msg = dataclasses.replace(msg, payload={"n": msg.payload["n"] + 10})
        return super().send(msg)


def _ctx(network: AuditNetwork | None = None) -> RunContext:
    """Three participants with one MLP architecture (embedding width 8) on 4, 10 and 6 rows."""
    from abm.learning.data import Dataset
    from abm.learning.models import build_model
    from abm.learning.participant import Participant
    from abm.learning.partition import ParticipantData
    from abm.learning.training import TrainConfig

    parts = []
    for k, n in enumerate(SIZES):
        y = torch.arange(n) % 3
        data = Dataset(torch.randn(n, 4, generator=torch.Generator().manual_seed(k)) + y[:, None], y)
        torch.manual_seed(k)
        model = build_model("mlp", (4,), 3, hidden=[8], embed_dim=8, batchnorm=False)
        parts.append(Participant(k, ParticipantData(data, data, data), model, TrainConfig(batch_size=32), k))
    ctx = RunContext(participants=parts, n_classes=3, input_shape=(4,), rounds=2, local_epochs=1, seed=0)
    ctx.network = network if network is not None else AuditNetwork()
    return ctx


def _audited(net: AuditNetwork) -> list[tuple]:
    return [(m.kind.value, m.sender, m.receiver, m.round, m.nbytes) for m in net.messages]


def test_the_server_gets_every_size_and_sends_back_their_total():
    """Each participant's size to the server, then the total to each participant (each weights its
    own contribution by its size over the total): the weights |D_k| / sum |D_j|, from the messages
    (a size that arrives 10 larger raises the total the server sends back to 30)."""
    ctx = _ctx()
    assert server_size_weights(ctx) == [4 / 20, 10 / 20, 6 / 20]
    assert _audited(ctx.network) == UP + DOWN
    assert [int(m.payload["n"]) for m in ctx.network.messages] == [*SIZES, 20, 20, 20]
    assert all(m.payload["n"].dtype == torch.int64 for m in ctx.network.messages)
    assert server_size_weights(_ctx(_Inflating(1, SERVER))) == [4 / 30, 10 / 30, 6 / 30]


def test_every_peer_gets_every_other_peers_size():
    """Row i: what peer i knows, its own size and those it received (the size peer 1 sends peer 0
    arriving 10 larger changes row 0 only)."""
    ctx = _ctx()
    np.testing.assert_array_equal(sizes_to_peers(ctx), np.tile(SIZES, (3, 1)))
    assert _audited(ctx.network) == PEERS
    inflated = sizes_to_peers(_ctx(_Inflating(1, 0)))
    np.testing.assert_array_equal(inflated, [[4, 20, 6], SIZES, SIZES])


def _weights(protocol) -> np.ndarray:
    """The size-derived weights a protocol uses: its sums' weights (FedAvg, CoDream), MAPL's
    confidences gamma (row i: peer i's) or IPA's pair weights a (row i: peer i's)."""
    for name in ("contribution_weights", "gamma", "a"):
        if hasattr(protocol, name):
            return np.asarray(getattr(protocol, name))
    raise AssertionError(protocol)


SERVER_SIDE = [("fedavg", {}), ("fedprox", {}), ("codream", {}), ("codream_fast", {})]
SERVER_SIDE += [("codream", {"collaborate": False, "independent_labels": "all"})]


@pytest.mark.parametrize(("name", "params"), SERVER_SIDE)
def test_a_server_weighting_by_size_learns_the_sizes_from_messages(name, params):
    """FedAvg, FedProx and CoDream (its sums: dream gradients and logits) weight by size: the sizes
    go up and their total down before round 0, and the weights follow what arrived."""
    cls = protocol_class(name)
    ctx = _ctx()
    protocol = cls(cls.Config(**params))
    protocol.setup(ctx)
    assert [a for a in _audited(ctx.network) if a[0] == "data_size"] == UP + DOWN
    assert _weights(protocol).tolist() == [4 / 20, 10 / 20, 6 / 20]
    inflated = cls(cls.Config(**params))
    inflated.setup(_ctx(_Inflating(1, SERVER)))
    assert _weights(inflated).tolist() == [4 / 30, 10 / 30, 6 / 30]


FAST = {"n_dreams": 4, "dream_steps": 2, "dream_start": 0, "local_steps": 2, "fast_batches": 1}
WEIGHTED_OPS = {"fedavg.fit", "codream.grad", "codream_fast.step"}


@pytest.mark.parametrize(
    ("name", "params", "weights"),
    [
        ("fedavg", {}, [4 / 20, 10 / 30, 6 / 20]),
        ("fedprox", {}, [4 / 20, 10 / 30, 6 / 20]),
        ("codream", {"n_dreams": 4, "dream_steps": 2, "dream_start": 0}, [4 / 20, 10 / 30, 6 / 20]),
        ("codream_fast", FAST, [4 / 20, 10 / 30, 6 / 20]),
        ("fedavg", {"weighting": "uniform"}, [1 / 3] * 3),
        ("codream", {"n_dreams": 4, "dream_steps": 2, "dream_start": 0, "weighting": "uniform"}, [1 / 3] * 3),
    ],
)
def test_each_client_computes_its_own_weight_and_no_operation_config_carries_it(name, params, weights, monkeypatch):
    """A client's weight is its own size over the total its ``data_size`` message brought (the
    total to participant 1 arrives 10 larger: 10 / 30) or 1 / N (uniform); it never travels in
    the configuration of a client operation (seen at the clients' entry point, over a round)."""
    seen: list[tuple[str, dict]] = []
    run = clients.run_client_op

    def spy(op, env, payload, config):
        seen.append((op, dict(config)))
        return run(op, env, payload, config)

    monkeypatch.setattr(clients, "run_client_op", spy)
    cls = protocol_class(name)
    ctx = _ctx(_Inflating(SERVER, 1))
    protocol = cls(cls.Config(**params))
    protocol.setup(ctx)
    protocol.run_round(ctx, 0)
    assert WEIGHTED_OPS & {op for op, _ in seen}
    assert all("weight" not in config for _, config in seen)
    assert [contribution_weight(ctx.clients.envs[pid]) for pid in ctx.ids] == weights
    assert _weights(protocol).tolist() == weights  # the server's: the same sizes over the same totals


@pytest.mark.parametrize(("name", "params", "row"), [("mapl", {}, 1.0), ("ipa", {"pair_weights": "size"}, 3.0)])
def test_peers_weighting_by_size_learn_the_sizes_from_messages(name, params, row):
    """MAPL's confidences gamma_j = |D_j| / sum |D| and IPA's pair weights a_ij = N |D_j| / |D|: every
    peer's size to every other before round 0; each peer's row is from what it received."""
    cls = protocol_class(name)
    ctx = _ctx()
    protocol = cls(cls.Config(**params))
    protocol.setup(ctx)
    assert [a for a in _audited(ctx.network) if a[0] == "data_size"] == PEERS
    np.testing.assert_array_equal(_weights(protocol), np.tile(row * np.array(SIZES) / 20, (3, 1)))
    inflated = cls(cls.Config(**params))
    inflated.setup(_ctx(_Inflating(1, 0)))
    expected = np.array([row * np.array([4, 20, 6]) / 30, row * np.array(SIZES) / 20, row * np.array(SIZES) / 20])
    np.testing.assert_array_equal(_weights(inflated), expected)


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("fedavg", {"weighting": "uniform"}),
        ("codream", {"weighting": "uniform"}),
        ("codream", {"collaborate": False}),  # independent dreams labelled by their dreamers: no sum
        ("mapl", {"use_confidence": False}),
        ("mapl", {"learn_graph": False}),
        ("mapl", {"aggregate_prototypes": False}),
        ("ipa", {}),  # uniform pair weights
    ],
)
def test_no_sizes_travel_where_nothing_weights_by_them(name, params):
    cls = protocol_class(name)
    ctx = _ctx()
    cls(cls.Config(**params)).setup(ctx)
    assert all(m.kind != MessageKind.DATA_SIZE for m in ctx.network.messages)
