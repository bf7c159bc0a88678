"""A participant whose update is not finite (NaN or inf: its training diverged) without secure
aggregation. The plain sum added it, so one institution's divergence turned the global model NaN
for every participant of FedAvg, FedProx and CoDream, with only a training-loss warning.
Now the plain sum treats it as the secure sum does: the participant sends nothing and is left out
of the round as a dropout is, recorded in report.json's privacy.withheld and warned about once."""

from __future__ import annotations

import torch
from conftest import diverging_builder, linear_participants
from test_secure_diverged import learn, warnings

from abm.learning.messages import MessageKind, Network
from abm.learning.privacy.aggregation import PlainSum, WithheldSum
from abm.learning.privacy.dp import DifferentiallyPrivateSum


def test_plain_sum_leaves_a_vector_that_is_not_finite_out_as_a_dropout():
    """A NaN in one vector and an inf in another: the sum is the one with both dropped, bit for
    bit, and neither is sent; they are named for the last sum and recorded once."""
    c = {i: torch.full((4,), 0.25 * (i + 1)) for i in range(4)}
    c[1][0], c[3][2] = float("nan"), float("inf")
    agg, net = PlainSum(), Network()
    total = agg.aggregate(c, 5, net)
    dropped_net = Network()
    assert torch.equal(total, PlainSum().aggregate(c, 5, dropped_net, dropped=frozenset({1, 3})))
    assert net.total_bytes() == dropped_net.total_bytes() and net.kinds_sent == dropped_net.kinds_sent
    assert agg.withheld() == frozenset({1, 3})
    assert agg.take_withheld() == [WithheldSum(5, "model_update", (1, 3), True)]
    assert agg.take_withheld() == []
    nan = {i: torch.full((4,), float("nan")) for i in range(2)}
    assert agg.aggregate(nan, 6, net) is None
    assert agg.take_withheld() == [WithheldSum(6, "model_update", (0, 1), False)]


def test_dp_around_the_plain_sum_leaves_a_vector_that_is_not_finite_out_as_a_dropout():
    """DP around the plain sum (in process; scenarios ask for secure aggregation with DP): a NaN
    update stays NaN through the clip and is left out, the sum and the charge those of the run in
    which its sender drops out, bit for bit."""
    c = {i: torch.full((6,), 0.1 * (i + 1)) for i in range(4)}
    c[3][2] = float("nan")
    left = DifferentiallyPrivateSum(PlainSum(), clip=1.0, noise_multiplier=2.0, seed=3)
    dropped = DifferentiallyPrivateSum(PlainSum(), clip=1.0, noise_multiplier=2.0, seed=3)
    total = left.aggregate(c, 0, Network())
    assert torch.equal(total, dropped.aggregate(c, 0, Network(), dropped=frozenset({3})))
    assert left.take_withheld() == [WithheldSum(0, "model_update", (3,), True)]
    assert left.epsilon(1e-5) == dropped.epsilon(1e-5)


def test_one_diverging_participant_is_left_out_of_plain_sums_exactly_as_a_scheduled_dropout(tmp_path):
    """Participant 2 holds 80% of the data: at SGD lr 10^8 its update is not finite in every
    round, the others' stay finite. Without secure aggregation FedAvg and FedProx are now the runs
    in which participant 2 is scheduled to drop out of every round, bit for bit: scores, history
    and bytes. Participant 2 keeps training
    from each new global model (its losses are not finite in every round). The console warns once
    a protocol, report.md says so."""
    every_round = {t: [2] for t in range(3)}
    result, report = learn(
        tmp_path,
        "plain",
        {"optimizer": "sgd", "lr": 1e8, "momentum": 0.0},
        [
            {"name": "fedavg"},
            {"name": "fedavg", "label": "fedavg_dropped", "privacy": {"dropouts": every_round}},
            {"name": "fedprox"},
            {"name": "fedprox", "label": "fedprox_dropped", "privacy": {"dropouts": every_round}},
        ],
        split={"participants": 3, "quantity_skew": {"fractions": [0.1, 0.1, 0.8]}},
    )
    assert result.exit_code == 0, result.output
    protocols = report["protocols"]
    once = [{"round": t, "participants": [2], "sums": 1, "skipped": 0, "discarded": 0} for t in range(3)]
    for key in ("fedavg", "fedprox"):
        left, dropped = protocols[key], protocols[f"{key}_dropped"]
        assert left["privacy"]["withheld"] == once, key
        assert left["privacy"]["secure_aggregation"] is False and left["privacy"]["dropouts"] == [], key
        assert dropped["privacy"]["withheld"] == [], key
        assert left["history"] == dropped["history"], key
        assert [p["collaborative"] for p in left["participants"]] == [
            p["collaborative"] for p in dropped["participants"]
        ]
        assert left["bytes_by_kind"] == dropped["bytes_by_kind"] and left["bytes_total"] == dropped["bytes_total"]
        assert {e["participant"] for e in left["nonfinite_losses"]} == {2}
        assert [e["round"] for e in left["nonfinite_losses"]] == [0, 1, 2]
    assert protocols["fedavg"]["privacy"] == {"secure_aggregation": False, "dropouts": [], "withheld": once, "dp": None}
    assert protocols["local"]["privacy"] is None
    assert warnings(result, "fedavg") == [
        "warning: fedavg: the training loss of participant 2 was not finite (NaN or inf) in round 0 (rounds 0..2): "
        "training diverged (too high a learning rate?); the run goes on, but the scores after it mean little "
        "(report.json: nonfinite_losses)",
        "warning: fedavg: participant 2 held back its vector from the sum in round 0 (rounds 0..2): values the sum "
        "cannot carry (NaN, inf, or so large the sum could overflow: did training diverge?), so it was left out as "
        "dropouts are; the run goes on (report.json: privacy.withheld)",
    ]
    md = (tmp_path / "plain" / "report.md").read_text()
    assert (
        "Warning: fedavg: participant 2 held back vectors the sum cannot carry (NaN, inf, or so large the sum could "
        "overflow: training diverged) in 3 rounds from round 0, left out as dropouts are (privacy.withheld in "
        "report.json)." in md
    )


def test_codream_plain_soft_labels_leave_out_a_client_whose_logits_are_not_finite():
    """Without secure aggregation the server reads each client's logits. Participant 2's model
    turned NaN: it sends none, and the soft labels are those of participants 0 and 1 (4 and 10
    training rows) over their weight 14/20; they were NaN for every client. With every model NaN
    no labels are released."""
    from abm.learning.protocols import RunContext
    from abm.learning.protocols.codream import CoDream
    from abm.learning.protocols.configs import CoDreamConfig
    from abm.learning.training import predict

    ps = linear_participants([4, 10, 6])
    with torch.no_grad():
        ps[2].model.weight.fill_(float("nan"))
    ctx = RunContext(ps, 2, (3,), 1, 1, 0)
    protocol = CoDream(CoDreamConfig(n_dreams=5, dream_steps=1, w_adv=0.0, w_feature=0.0))
    protocol.setup(ctx)
    x = torch.randn(5, 3, generator=torch.Generator().manual_seed(1))
    before = ctx.network.per_kind.get(MessageKind.LOGITS.value, 0)
    labels = protocol._soft_labels(ctx, x, 0)
    expected = (4 * predict(ps[0].model, x) + 10 * predict(ps[1].model, x)) / 14
    assert torch.allclose(labels, expected, atol=1e-6, rtol=0)
    assert ctx.network.per_kind[MessageKind.LOGITS.value] - before == 2 * 5 * 2 * 4  # two clients' logits sent
    assert ctx.aggregator.take_withheld() == [WithheldSum(0, "logits", (2,), True)]
    for p in ps:
        with torch.no_grad():
            p.model.weight.fill_(float("nan"))
    assert protocol._soft_labels(ctx, x, 0) is None
    assert ctx.aggregator.take_withheld() == [WithheldSum(0, "logits", (0, 1, 2), False)]


def test_codream_runs_on_when_one_participant_alone_diverges(monkeypatch):
    """Participant 2 alone trains at SGD lr 10^8 (the others at 0.1): its dream gradients and
    logits are not finite from round 1. They turned the dreams and soft labels NaN, and every
    client that distilled on them; now CoDream and CoDream-fast leave them out of every sum, the
    others' training stays finite, and the record names participant 2 alone."""
    import abm.learning.runner as runner
    from abm.learning.scenario import load_scenario

    monkeypatch.setattr(runner, "build_participant", diverging_builder(2))
    small = {"n_dreams": 8, "dream_steps": 2, "dream_start": 0}
    scenario, _ = load_scenario(
        {
            "name": "one",
            "seed": 0,
            "data": {"source": "gaussian_mixture", "n_samples": 400, "n_classes": 3, "n_features": 5},
            "split": {"participants": 3},
            "models": [{"kind": "mlp", "hidden": [8], "batchnorm": False}],
            "training": {"optimizer": "sgd", "lr": 0.1, "momentum": 0.0},
            "rounds": 3,
            "evaluate_on": "global",
            "protocols": [{"name": "codream", "params": small}, {"name": "codream_fast", "params": small}],
        }
    )
    report = runner.run_all(scenario)
    for key in ("codream", "codream_fast"):
        prot = report["protocols"][key]
        assert {e["participant"] for e in prot["nonfinite_losses"]} == {2}, key
        record = prot["privacy"]["withheld"]
        assert [e["round"] for e in record] == [1, 2], key
        assert all(e["participants"] == [2] and e["skipped"] == 0 for e in record), key
