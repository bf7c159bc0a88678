"""IPA with one peer whose training diverges. With ``update_others`` its turn wrote NaN into every
copy on the token, and without it the others aligned with its NaN parameters: every peer's model
turned NaN. Now a peer whose turn diverges (a loss or a parameter not finite) is left out of the
ring's coupling from then on, as a peer that dropped out: its turn's changes to the others' copies
are undone, its own copy stays as it is, and the others go on without it, recorded in
report.json's privacy.withheld (kind token) and warned about once."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from conftest import diverging_builder, linear_participants
from test_secure_diverged import learn, warnings

from abm.learning.privacy.aggregation import WithheldSum
from abm.learning.protocols import RunContext
from abm.learning.protocols.configs import IPAConfig
from abm.learning.protocols.ipa import IPA

SIZES = [6, 10, 8]


def ring(participants: list, rounds: int, update_others: bool) -> tuple[IPA, RunContext]:
    """IPA (lam 0.5, squared distance) run for ``rounds`` rounds of two epochs on ``participants``."""
    ctx = RunContext(participants, 2, (3,), rounds, 2, 0)
    protocol = IPA(IPAConfig(lam=0.5, p=2, update_others=update_others))
    protocol.setup(ctx)
    for t in range(rounds):
        protocol.run_round(ctx, t)
    return protocol, ctx


@pytest.mark.parametrize("update_others", [True, False])
def test_a_peer_diverging_on_the_first_turn_leaves_the_others_as_if_it_were_absent(update_others):
    """Peer 0, first on the ring, trains at SGD lr inf: its first step makes every copy it updates
    inf or NaN. The other two peers end, bit for bit, as the two-peer ring of them alone (the same
    data, initial models and minibatch streams): their parameters, the distances between them, and
    no non-finite loss; peer 0's own copy is left as it diverged, and the record names it once, in
    round 0. The old code turned all three models NaN."""
    ps = linear_participants(SIZES)
    ps[0].train_config = dataclasses.replace(ps[0].train_config, lr=float("inf"))
    protocol, ctx = ring(ps, 3, update_others)
    alone, _ = ring(absent := linear_participants(SIZES)[1:], 3, update_others)
    for p, q in zip(ps[1:], absent, strict=True):
        for a, b in zip(p.model.parameters(), q.model.parameters(), strict=True):
            assert torch.equal(a, b)
        assert p.losses.nonfinite == 0
    assert protocol.distances_l1 == alone.distances_l1
    assert protocol.left_out == {0} and ps[0].losses.nonfinite == 1
    assert not bool(torch.isfinite(ps[0].model.weight).all())
    assert ctx.aggregator.take_withheld() == [WithheldSum(0, "token", (0,), True)]


def test_the_token_skips_a_left_out_peer_and_carries_only_the_coupled_sets():
    """Peer 1 diverges on its turn in round 0: it still passes the token it holds (peers 0 and 2's
    sets) on to peer 2; from round 1 the ring is 0 -> 2 -> 0 with two sets, and at the end peer 2,
    the last coupled peer, returns no set (peer 0 has the token, and no coupled peer lies between)."""
    ps = linear_participants(SIZES)
    ps[1].train_config = dataclasses.replace(ps[1].train_config, lr=float("inf"))
    _, ctx = ring(ps, 2, True)
    n_params = 3 * 2 + 2
    tokens = ctx.network.per_kind["token"]
    assert tokens == (3 + 2 + 2) * n_params * 4 + 2 * 2 * n_params * 4  # round 0: 3, 2, 2 sets; round 1: 2, 2
    weights = ctx.network.per_kind["model_weights"]
    assert weights == 2 * n_params * 4  # theta* assembled before round 1 only


def test_one_diverging_participant_is_left_out_of_the_ring_as_a_dropout(tmp_path, monkeypatch):
    """Participant 2 holds 80% of the data and trains at SGD lr 10^8 (the others at 0.1): its loss
    is not finite on its first turn. The old code turned every model NaN (all three scored 0.24,
    the distances NaN); now participants 0 and 1 score, bit for bit, as in the run in which
    participant 2 drops out as its first turn starts, with and without update_others, and the
    console, report.json and report.md say so once."""
    import abm.learning.runner as runner

    built = runner.build_participant
    protocols = [
        {"name": "ipa", "params": {"lam": 0.5, "p": 2}},
        {"name": "ipa", "label": "ipa_own", "params": {"lam": 0.5, "p": 2, "update_others": False}},
    ]
    split = {"participants": 3, "quantity_skew": {"fractions": [0.1, 0.1, 0.8]}}
    training = {"optimizer": "sgd", "lr": 0.1, "momentum": 0.0}
    monkeypatch.setattr(runner, "build_participant", diverging_builder(2))
    result, report = learn(tmp_path, "diverges", training, protocols, split=split)
    assert result.exit_code == 0, result.output
    monkeypatch.setattr(runner, "build_participant", built)
    turn = IPA._turn
    monkeypatch.setattr(IPA, "_turn", lambda self, ctx, i: True if i == 2 else turn(self, ctx, i))
    _, dropped = learn(tmp_path, "dropped", training, protocols, split=split)
    once = [{"round": 0, "participants": [2], "sums": 1, "skipped": 0, "discarded": 0}]
    for key in ("ipa", "ipa_own"):
        left, gone = report["protocols"][key], dropped["protocols"][key]
        scores = [p["collaborative"] for p in left["participants"]]
        assert scores[:2] == [p["collaborative"] for p in gone["participants"]][:2], key
        assert left["summary"]["mean_abs_param_distance"] == gone["summary"]["mean_abs_param_distance"], key
        assert left["privacy"] == {"secure_aggregation": False, "dropouts": [], "withheld": once, "dp": None}, key
        assert left["nonfinite_losses"] == [{"round": 0, "participant": 2, "losses": 1}], key
    assert warnings(result, "ipa")[-1] == (
        "warning: ipa: participant 2 diverged on its turn in round 0 (rounds 0..2) (a training loss or parameters "
        "not finite: too high a learning rate?), so it was left out of the ring's coupling from then on, its own "
        "model as it was; the run goes on (report.json: privacy.withheld)"
    )
    md = (tmp_path / "diverges" / "report.md").read_text()
    assert (
        "Warning: ipa: training diverged on a turn (a loss or parameters not finite) for participant 2 from round 0: "
        "left out of the ring's coupling from then on, their own models as they were (privacy.withheld in "
        "report.json)." in md
    )
