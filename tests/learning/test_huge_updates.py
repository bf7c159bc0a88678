"""Finite but huge vectors in the sums. Every value finite, the plain sum of two of 2e38 was inf
in float32 (and FedAvg wrote it into every model); a server_lr above 1 turned a finite average
into an inf global model; DP's clip scaled a vector whose float32 norm overflows (beyond about
1.8e19) to zero instead of to its clip. Now each participant checks its own vector against
float32's range over the sum's members (as the secure sum's participants check theirs against the
fixed point's), a new global model or generator that would not be finite is discarded (the models
keep theirs, recorded and warned), and the clip takes such a norm in float64."""

from __future__ import annotations

import copy
import math

import numpy as np
import torch
from conftest import linear_participants

from abm.learning import progress
from abm.learning.messages import MessageKind, Network
from abm.learning.models import build_model, flat_params
from abm.learning.privacy.aggregation import FLOAT32_MAX, PlainSum, WithheldSum, finite_or_discarded
from abm.learning.privacy.dp import DifferentiallyPrivateSum, clip_l2
from abm.learning.privacy.secure_aggregation import SecureSum
from abm.learning.protocols import RunContext
from abm.learning.protocols.configs import CoDreamConfig, FedAvgConfig
from abm.learning.protocols.fedavg import FedAvg
from abm.learning.withheld import WithheldRecord, withheld_lines


def test_the_plain_sum_leaves_out_vectors_so_large_the_sum_could_overflow():
    """Three members: 2e38 is beyond float32's largest value / 3 (1.13e38), so participants 0
    and 1 send nothing and the sum is participant 2's vector, as with both dropped (it was inf).
    Values just below the bound are summed, and no sum of them overflows."""
    c = {0: torch.tensor([2e38, 1.0]), 1: torch.tensor([2e38, 2.0]), 2: torch.tensor([0.5, 3.0])}
    agg = PlainSum()
    total = agg.aggregate(c, 4, Network())
    assert torch.equal(total, PlainSum().aggregate(c, 4, Network(), dropped=frozenset({0, 1})))
    assert agg.take_withheld() == [WithheldSum(4, "model_update", (0, 1), True)]
    edge = float(np.nextafter(np.float32(FLOAT32_MAX / 3), np.float32(0)))
    full = {k: torch.tensor([edge, -edge]) for k in range(3)}
    total = agg.aggregate(full, 5, Network())
    assert bool(torch.isfinite(total).all()) and agg.take_withheld() == []


def test_the_secure_sum_already_bounds_what_it_sums():
    """The secure sum's own check is the tighter one (2^39 / members for 24 fractional bits):
    the huge vectors are withheld there too, and its sum is participant 2's up to the fixed point."""
    c = {0: torch.tensor([2e38, 1.0]), 1: torch.tensor([2e38, 2.0]), 2: torch.tensor([0.5, 3.0])}
    agg = SecureSum([0, 1, 2], seed=0)
    assert agg.aggregate(c, 0, Network()) is None  # one survivor: below the threshold of two
    assert agg.take_withheld() == [WithheldSum(0, "model_update", (0, 1), False)]


def test_the_dp_clip_scales_a_vector_whose_float32_norm_overflows_to_its_clip():
    """[3e20, 4e20] has norm 5e20, whose square overflows float32: it was scaled by clip / inf,
    to zero, so a diverging participant added only noise. Now it is clipped to norm 1, the
    direction kept."""
    clipped = clip_l2(torch.tensor([3e20, 4e20]), 1.0)
    assert torch.allclose(clipped, torch.tensor([0.6, 0.8]), rtol=1e-6, atol=0)
    assert math.isclose(float(clipped.norm()), 1.0, rel_tol=1e-6)
    small = torch.tensor([0.3, 0.4])
    assert torch.equal(clip_l2(small, 1.0), small) and torch.equal(clip_l2(small * 10, 1.0), small * 10 * 0.2)
    dp = DifferentiallyPrivateSum(PlainSum(), clip=1.0, noise_multiplier=1e-9, seed=0)  # noise ~1e-9
    c = {0: torch.tensor([3e20, 4e20]), 1: torch.tensor([0.0, 0.5])}
    assert torch.allclose(dp.aggregate(c, 0, Network()), torch.tensor([0.6, 1.3]), rtol=0, atol=1e-6)


def fedavg_round(server_lr: float, big: float) -> tuple[FedAvg, RunContext, torch.Tensor]:
    """One FedAvg round of three linear participants in which participant 2's (weighted) update
    is ``big`` in every value; the protocol, its context and the global model before the round."""
    ps = linear_participants([4, 10, 6])
    ctx = RunContext(ps, 2, (3,), 1, 1, 0)
    protocol = FedAvg(FedAvgConfig(server_lr=server_lr))
    protocol.setup(ctx)
    before = protocol.global_flat.clone()
    call = ctx.clients.call

    def huge(op, payloads, config=None):
        replies = call(op, payloads, config)
        if op == "fedavg.fit":
            replies[2]["update"] = torch.full_like(replies[2]["update"], big)
        return replies

    ctx.clients.call = huge
    protocol.run_round(ctx, 0)
    return protocol, ctx, before


def test_fedavg_discards_a_global_model_that_would_not_be_finite():
    """server_lr 10 on an average update of about 1e38: the new global model was inf, broadcast
    into every participant's model. Now the round's aggregate is discarded: the global model and
    every participant's model stay as they were (bit for bit), recorded as a sum discarded that
    names no participant. At server_lr 1 the same update is applied."""
    protocol, ctx, before = fedavg_round(10.0, 1e38)
    assert torch.equal(protocol.global_flat, before)
    for p in ctx.participants:
        assert torch.equal(flat_params(p.model), before)
    assert ctx.aggregator.take_withheld() == [WithheldSum(0, "model_update", (), False)]
    applied, ctx, before = fedavg_round(1.0, 1e38)
    assert not torch.equal(applied.global_flat, before) and bool(torch.isfinite(applied.global_flat).all())
    assert ctx.aggregator.take_withheld() == []


def test_codream_fast_discards_a_reptile_step_that_would_not_be_finite():
    """CoDream-fast's Reptile step g0 + meta_lr (g_avg - g0) with meta_lr 10 and one client's
    (weighted) generator of 1e38: the meta generator turned inf. Now the step is discarded, the
    generator stays as it was, and the record names no participant."""
    from abm.learning.data import Dataset
    from abm.learning.participant import Participant
    from abm.learning.partition import ParticipantData
    from abm.learning.protocols.codream import CoDreamFast
    from abm.learning.training import TrainConfig

    torch.manual_seed(0)
    model = build_model("mlp", (6,), 3, hidden=[16])
    data = ParticipantData(*(Dataset(torch.randn(8, 6), torch.arange(8) % 3) for _ in range(3)))
    ps = [Participant(k, data, copy.deepcopy(model), TrainConfig(), seed=k) for k in range(2)]
    ctx = RunContext(participants=ps, n_classes=3, input_shape=(6,), rounds=1, local_epochs=1, seed=0)
    cfg = CoDreamConfig(n_dreams=8, noise_dim=4, generator_hidden=8, w_adv=0.0, local_steps=1, meta_lr=10.0)
    protocol = CoDreamFast(cfg)
    protocol.setup(ctx)
    g0 = flat_params(protocol.meta)
    call = ctx.clients.call

    def huge(op, payloads, config=None):
        replies = call(op, payloads, config)
        if op == "codream_fast.step":
            replies[1]["g"] = torch.full_like(replies[1]["g"], 1e38)
        return replies

    ctx.clients.call = huge
    assert protocol._fast_batch(ctx, 0, None) is not None  # the batch is still released
    assert torch.equal(flat_params(protocol.meta), g0)
    assert ctx.aggregator.take_withheld() == [WithheldSum(0, "generator", (), False)]


def test_finite_or_discarded_passes_finite_values_through():
    agg = PlainSum()
    value = torch.tensor([1.0, -FLOAT32_MAX])
    assert finite_or_discarded(agg, value, 0, MessageKind.MODEL_UPDATE) is value
    assert finite_or_discarded(agg, torch.tensor([math.inf]), 1, MessageKind.MODEL_UPDATE) is None
    assert agg.take_withheld() == [WithheldSum(1, "model_update", (), False)]


def test_a_discarded_aggregate_is_recorded_warned_once_and_reported():
    """report.json's entry counts it as ``discarded`` (not ``skipped``, which is for sums too few
    vectors reached), the console warns at its first round, report.md says so."""
    heard: list[str] = []
    record = WithheldRecord("fedavg", "participant", 3, secure=False)
    with progress.listening(lambda label, done, total, note: heard.append(note)):
        record.after_round(0, [WithheldSum(0, "model_update", (), False)])
        record.after_round(2, [WithheldSum(2, "model_update", (), False), WithheldSum(2, "model_update", (1,), True)])
    assert record.record == [
        {"round": 0, "participants": [], "sums": 1, "skipped": 0, "discarded": 1},
        {"round": 2, "participants": [1], "sums": 2, "skipped": 0, "discarded": 1},
    ]
    assert heard[0] == (
        "warning: fedavg: what 1 sum in round 0 (rounds 0..2) would have been written as was not finite (a finite "
        "sum scaled past float32's range: a server_lr or meta_lr above 1 on a huge update?), so it was discarded, "
        "and what it would have updated (the global model, the generator) stays as it was (report.json: "
        "privacy.withheld, every round)"
    )
    assert len(heard) == 2 and heard[1].startswith("warning: fedavg: participant 1 held back its vector")
    protocols = {"fedavg": {"protocol": "fedavg", "privacy": {"secure_aggregation": False, "withheld": record.record}}}
    assert withheld_lines(protocols) == [
        "Warning: fedavg: participant 1 held back vectors the sum cannot carry (NaN, inf, or so large the sum could "
        "overflow: training diverged) in 1 round from round 2, left out as dropouts are; 2 aggregates not finite "
        "from round 0 (a finite sum scaled past float32's range), discarded: what they would have updated stayed "
        "as it was (privacy.withheld in report.json)."
    ]
