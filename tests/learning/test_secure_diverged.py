"""A participant whose training diverged under secure aggregation (and so under DP): its update
holds values the masked sum cannot carry (NaN, inf, or beyond SecureSum's range). It ended the
whole run (exit 1, every protocol's results lost); now it withholds the update, is recovered from
exactly as a dropped participant is, and the run goes on; when too few updates arrive the sum is
not released and the round's update is skipped. report.json's privacy.withheld records it."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from conftest import linear_participants
from typer.testing import CliRunner

from abm.cli import app
from abm.learning.messages import MessageKind, Network
from abm.learning.models import flat_params
from abm.learning.privacy.accountant import rdp_epsilon
from abm.learning.privacy.aggregation import PlainSum, WithheldSum
from abm.learning.privacy.dp import DifferentiallyPrivateSum
from abm.learning.privacy.secure_aggregation import SecureSum


def learn(tmp_path: Path, name: str, training: dict[str, Any], protocols: list[dict[str, Any]], **over: Any):
    """``abm learn`` of a small scenario (3 participants, 3 rounds, scored on the global test set):
    the CLI's result and report.json (None when the run failed)."""
    sc = {
        "name": name,
        "seed": 0,
        "data": {"source": "gaussian_mixture", "n_samples": 400, "n_classes": 3, "n_features": 5},
        "split": {"participants": 3},
        "models": [{"kind": "mlp", "hidden": [8], "batchnorm": False}],
        "training": training,
        "rounds": 3,
        "evaluate_on": "global",
        "protocols": protocols,
        **over,
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(sc))
    out = tmp_path / name
    result = CliRunner().invoke(app, ["learn", str(path), "--out", str(out)])
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else None
    return result, report


def warnings(result, key: str) -> list[str]:
    """The console's warnings about protocol ``key``."""
    return [line for line in result.stderr.splitlines() if line.startswith(f"warning: {key}: ")]


def test_one_diverging_participant_is_left_out_exactly_as_a_scheduled_dropout(tmp_path):
    """Participant 2 holds 80% of the data (weight 0.8): at SGD lr 1000 its update leaves the
    fixed-point range in every round, the others' do not. The run used to exit 1; now it exits 0,
    and FedAvg under secure aggregation is the run in which participant 2 is scheduled to drop out
    of every round, bit for bit: scores, history and every byte on the wire (a withheld update is
    not sent, and its masks are recovered as a dropout's are). Against the plain sum of the others
    (plain FedAvg with the same dropouts) it differs by the fixed point's rounding only."""
    every_round = {t: [2] for t in range(3)}
    result, report = learn(
        tmp_path,
        "one",
        {"optimizer": "sgd", "lr": 1000.0, "momentum": 0.0},
        [
            {"name": "fedavg", "label": "withheld", "privacy": {"secure_aggregation": True}},
            {"name": "fedavg", "label": "dropped", "privacy": {"secure_aggregation": True, "dropouts": every_round}},
            {"name": "fedavg", "label": "plain_dropped", "privacy": {"dropouts": every_round}},
        ],
        split={"participants": 3, "quantity_skew": {"fractions": [0.1, 0.1, 0.8]}},
    )
    assert result.exit_code == 0, result.output
    withheld, dropped, plain = (report["protocols"][k] for k in ("withheld", "dropped", "plain_dropped"))
    once = [{"round": t, "participants": [2], "sums": 1, "skipped": 0, "discarded": 0} for t in range(3)]
    assert withheld["privacy"]["withheld"] == once
    assert withheld["privacy"]["dropouts"] == []
    assert dropped["privacy"]["withheld"] == []
    assert withheld["history"] == dropped["history"]
    scores = [[p["collaborative"] for p in prot["participants"]] for prot in (withheld, dropped)]
    assert scores[0] == scores[1]
    assert withheld["bytes_by_kind"] == dropped["bytes_by_kind"] and withheld["bytes_total"] == dropped["bytes_total"]
    assert withheld["bytes_by_kind"]["mask_seed"] == 3 * 2 * 32  # each round 2 survivors reveal a seed each
    assert max(abs(a - b) for a, b in zip(withheld["history"], plain["history"], strict=True)) < 1e-6
    assert warnings(result, "withheld") == [
        "warning: withheld: participant 2 held back its vector from the secure sum in round 0 (rounds 0..2): values "
        "the sum cannot carry (NaN, inf or beyond its range: did training diverge?), so it was left out as dropouts "
        "are; the run goes on (report.json: privacy.withheld)"
    ]
    md = (tmp_path / "one" / "report.md").read_text()
    assert (
        "Warning: withheld: participant 2 held back vectors the secure sum cannot carry (NaN, inf or beyond its "
        "range: training diverged) in 3 rounds from round 0, left out as dropouts are (privacy.withheld in "
        "report.json)." in md
    )


def test_when_every_update_is_withheld_fedavg_skips_the_round_and_the_model_stays():
    """SGD at lr 10^15: every participant's round-0 update leaves the range. Nothing is released,
    the global model stays as it was, bit for bit, and every participant starts the next round
    from it; the sum is recorded as not released."""
    from abm.learning.protocols import RunContext
    from abm.learning.protocols.fedavg import FedAvg

    ps = linear_participants([4, 10, 6])
    for p in ps:
        for group in p.optimizer.param_groups:
            group["lr"] = 1e15
    ctx = RunContext(ps, 2, (3,), 1, 1, 0, aggregator=SecureSum([0, 1, 2], seed=0))
    fedavg = FedAvg()
    fedavg.setup(ctx)
    start = fedavg.global_flat.clone()
    fedavg.run_round(ctx, 0)
    assert ctx.aggregator.take_withheld() == [WithheldSum(0, "model_update", (0, 1, 2), False)]
    assert torch.equal(fedavg.global_flat, start)
    for p in ps:
        assert torch.equal(flat_params(p.model), start)


def test_a_run_whose_every_participant_diverges_exits_0_and_says_which_rounds_were_skipped(tmp_path):
    """SGD at lr 10^4: round 0 is summed, then every participant's update leaves the range. The
    run ended with exit 1 and no results; now it exits 0, rounds 1 and 2 are recorded as not
    released (skipped), the model stays as round 0 left it (the same score after every round),
    the console warns once of the participants and once of the skipped sums, report.md says so."""
    result, report = learn(
        tmp_path,
        "div",
        {"optimizer": "sgd", "lr": 1e4, "momentum": 0.0},
        [{"name": "fedavg", "label": "sec", "privacy": {"secure_aggregation": True}}],
    )
    assert result.exit_code == 0, result.output
    sec = report["protocols"]["sec"]
    assert sec["privacy"]["withheld"] == [
        {"round": t, "participants": [0, 1, 2], "sums": 1, "skipped": 1, "discarded": 0} for t in (1, 2)
    ]
    assert sec["history"][0] == sec["history"][1] == sec["history"][2]
    assert warnings(result, "sec") == [
        "warning: sec: participants 0, 1, 2 held back their vectors from the secure sum in round 1 (rounds 0..2): "
        "values the sum cannot carry (NaN, inf or beyond its range: did training diverge?), so they were left out "
        "as dropouts are; the run goes on (report.json: privacy.withheld)",
        "warning: sec: too few vectors arrived for 1 secure sum in round 1 (rounds 0..2) (fewer than two, or than a "
        "DP budget can pay for): nothing was released, and what the sum would have updated (a model, dreams, soft "
        "labels) stays as it was (report.json: privacy.withheld, every round)",
    ]
    assert (
        "2 sums not released (too few vectors arrived): what they would have updated stayed as it was"
        in (tmp_path / "div" / "report.md").read_text()
    )


def test_codream_under_secure_aggregation_runs_on_when_training_diverges(tmp_path):
    """CoDream and CoDream-fast under secure aggregation at SGD lr 10^6 (every participant
    diverges): the run used to exit 1; now it exits 0 with every round scored and the withheld
    vectors recorded."""
    small = {"n_dreams": 8, "dream_steps": 2, "dream_start": 0}
    result, report = learn(
        tmp_path,
        "cd",
        {"optimizer": "sgd", "lr": 1e6},
        [
            {"name": "codream", "params": small, "privacy": {"secure_aggregation": True}},
            {"name": "codream_fast", "params": {**small, "local_steps": 2}, "privacy": {"secure_aggregation": True}},
        ],
    )
    assert result.exit_code == 0, result.output
    for key in ("codream", "codream_fast"):
        prot = report["protocols"][key]
        assert len(prot["history"]) == 3, key
        record = prot["privacy"]["withheld"]
        assert record and all(e["participants"] and 0 <= e["skipped"] <= e["sums"] for e in record), key


def test_codream_sums_the_parts_that_arrive_over_their_weight():
    """Participant 2's model turned NaN: its logits are withheld from the secure sum, and the soft
    labels are those of participants 0 and 1 (4 and 10 training rows) over their weight 14/20:
    (4 z_0 + 10 z_1) / 14, within the fixed point's rounding. With every model NaN no labels are
    released: a round dreams, labels nothing, distils nothing and goes on."""
    from abm.learning.protocols import RunContext
    from abm.learning.protocols.codream import CoDream
    from abm.learning.protocols.configs import CoDreamConfig
    from abm.learning.training import predict

    ps = linear_participants([4, 10, 6])
    with torch.no_grad():
        ps[2].model.weight.fill_(float("nan"))
    ctx = RunContext(ps, 2, (3,), 1, 1, 0, aggregator=SecureSum([0, 1, 2], seed=0))
    protocol = CoDream(CoDreamConfig(n_dreams=5, dream_steps=1, w_adv=0.0, w_feature=0.0))
    protocol.setup(ctx)
    x = torch.randn(5, 3, generator=torch.Generator().manual_seed(1))
    labels = protocol._soft_labels(ctx, x, 0)
    expected = (4 * predict(ps[0].model, x) + 10 * predict(ps[1].model, x)) / 14
    assert torch.allclose(labels, expected, atol=1e-6, rtol=0)
    assert ctx.aggregator.take_withheld() == [WithheldSum(0, "logits", (2,), True)]

    for p in ps:
        with torch.no_grad():
            p.model.weight.fill_(float("nan"))
    assert protocol._soft_labels(ctx, x, 0) is None
    protocol.run_round(ctx, 0)
    assert protocol.buffer == [] and protocol.label_quality == []
    assert {s.released for s in ctx.aggregator.take_withheld()} == {False}


def _dp(inner, **kwargs) -> DifferentiallyPrivateSum:
    return DifferentiallyPrivateSum(inner, clip=1.0, noise_multiplier=2.0, seed=3, **kwargs)


def test_dp_charges_a_withheld_participant_as_a_dropout():
    """Under DP a participant whose clipped, noised vector is NaN (a NaN update stays NaN through
    the clip) withholds it: the sum is the one with that participant scheduled to drop out, bit
    for bit, and the release is charged as that one is, at sigma sqrt(3/4) for 3 of 4 noise
    shares."""
    c = {i: torch.full((6,), 0.1 * (i + 1)) for i in range(4)}
    c[3][2] = float("nan")
    withheld = _dp(SecureSum(list(c), seed=1))
    total = withheld.aggregate(c, 0, Network())
    dropped = _dp(SecureSum(list(c), seed=1))
    assert torch.equal(total, dropped.aggregate(c, 0, Network(), dropped=frozenset({3})))
    assert withheld.withheld() == frozenset({3})
    assert withheld.take_withheld() == [WithheldSum(0, "model_update", (3,), True)]
    assert (
        withheld.epsilon(1e-5)
        == dropped.epsilon(1e-5)
        == pytest.approx(rdp_epsilon(2.0 * math.sqrt(0.75), 1, 1e-5), rel=1e-12)
    )


def test_dp_releases_nothing_and_spends_nothing_when_every_vector_is_withheld():
    c = {i: torch.full((6,), float("nan")) for i in range(3)}
    dp = _dp(SecureSum(list(c), seed=1))
    assert dp.aggregate(c, 0, Network()) is None
    assert dp.accountant.steps == 0 and dp.epsilon(1e-5) == 0.0


def test_a_target_epsilon_is_never_passed_when_participants_withhold():
    """A budget planned for 4 full releases (4 participants, none scheduled to drop out): with
    participant 3 withholding every time a release costs 4/3 releases' worth. The first would
    pass the plan, so nothing is released (the survivors' masked vectors arrive, no seed is asked
    for); then the skipped release's share pays: 3 releases of 4/3 spend exactly the 4 planned.
    Without the plan (a given noise multiplier) every release is made and charged."""
    c = {i: torch.full((6,), 0.1) for i in range(4)}
    c[3][0] = float("nan")
    planned = _dp(SecureSum(list(c), seed=1), max_releases=4, planned=[1.0] * 4)
    net = Network()
    released = [planned.aggregate(c, r, net) is not None for r in range(4)]
    assert released == [False, True, True, True]
    assert planned.accountant.steps == 3
    assert planned.accountant.spent() * 2.0**2 == pytest.approx(4.0, rel=1e-12)
    assert planned.epsilon(1e-5) <= rdp_epsilon(2.0, 4, 1e-5) * (1 + 1e-9)
    assert net.per_kind[MessageKind.MASK_SEED.value] == 3 * 3 * 32  # recovered 3 times, not 4
    free = _dp(SecureSum(list(c), seed=1))
    assert all(free.aggregate(c, r, Network()) is not None for r in range(4))
    assert free.epsilon(1e-5) > rdp_epsilon(2.0, 4, 1e-5)


def test_a_planned_dropout_is_paid_for_by_the_plan():
    """The plan counts a scheduled dropout (4/3 in release 1): every release is made."""
    c = {i: torch.full((6,), 0.1) for i in range(4)}
    dp = _dp(PlainSum(), max_releases=2, planned=[1.0, 4 / 3])
    assert dp.aggregate(c, 0, Network()) is not None
    assert dp.aggregate(c, 1, Network(), dropped=frozenset({1})) is not None
    assert dp.accountant.steps == 2
