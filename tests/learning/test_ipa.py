"""IPA: alignment term properties and the ring protocol."""

import numpy as np
import pytest
import torch

from abm.learning.protocols.configs import IPAConfig
from abm.learning.protocols.ipa import alignment
from abm.learning.runner import run_all
from abm.learning.scenario import load_scenario


def test_alignment_gradients_cancel_across_peers():
    """The alignment gradient is antisymmetric, so the mean of theta* moves only through CE."""
    torch.manual_seed(0)
    thetas = [[torch.randn(3, 4, requires_grad=True), torch.randn(4, requires_grad=True)] for _ in range(3)]
    for p in (1, 2):
        total = sum(alignment(thetas[i], thetas[j], p, "sum") for i in range(3) for j in range(3) if i != j)
        grads = torch.autograd.grad(total, [t for th in thetas for t in th])
        w = sum(grads[0::2])
        b = sum(grads[1::2])
        assert torch.allclose(w, torch.zeros_like(w), atol=1e-5)
        assert torch.allclose(b, torch.zeros_like(b), atol=1e-5)


def _scenario(**params):
    return {
        "name": "ipa",
        "seed": 0,
        "data": {
            "source": "gaussian_mixture",
            "n_samples": 600,
            "n_classes": 4,
            "n_features": 6,
            "modes_per_class": 1,
        },
        "split": {"participants": 3},
        "models": [{"kind": "mlp", "hidden": [8], "batchnorm": False}],
        "rounds": 3,
        "evaluate_on": "global",
        "protocols": [{"name": "ipa", "params": params}],
    }


def test_strong_coupling_aligns_models_and_early_stop_freezes():
    weak = run_all(load_scenario(_scenario(lam=0.0, p=2))[0])["protocols"]["ipa"]["summary"]
    strong = run_all(load_scenario(_scenario(lam=1.0, p=2, lr=0.05))[0])["protocols"]["ipa"]
    d_weak = weak["mean_abs_param_distance"][-1]
    d_strong = strong["summary"]["mean_abs_param_distance"][-1]
    assert d_strong < 0.1 * d_weak  # squared coupling with 2 eta lam (N-1) = 0.2 < 1
    stopped = run_all(load_scenario(_scenario(stop_round=1))[0])["protocols"]["ipa"]
    assert stopped["summary"]["stopped_at"] == 1
    assert len(set(stopped["history"])) == 1  # frozen after round 1
    # the token carries all N models: N x |theta| x 4 bytes per hop, N hops per round; before it,
    # peers 1 and 2 send their initial models to peer 0, and at the stop peer 2 (the last of the
    # ring) returns peer 1 its own model
    n_params = 6 * 8 + 8 + 8 * 4 + 4
    assert stopped["bytes_total"] == (3 * 3 + 2 + 1) * n_params * 4


def test_ipa_peers_with_disjoint_classes_approach_centralized():
    """ipa.md E1: each peer alone knows 5 of 10 classes (about 50 % on the global test set); with
    IPA both reach centralized accuracy within 5 points (seeds 0-2: IPA 97.9/94.5/97.8 vs
    centralized 98.8/97.0/98.6; the benchmark gmm_ipa_disjoint)."""
    from pathlib import Path

    import yaml

    path = Path(__file__).resolve().parents[2] / "scenarios" / "learning" / "gmm_ipa_disjoint.yaml"
    sc = yaml.safe_load(path.read_text())
    sc["protocols"] = [{"name": "centralized"}, {"name": "ipa", "params": {"lam": 1.0, "p": 1}}]
    r = run_all(load_scenario(sc)[0])["protocols"]
    assert r["local"]["mean_score"] < 0.55
    central = r["centralized"]["mean_score"]
    assert all(p["collaborative"] > central - 0.05 for p in r["ipa"]["participants"])


def _linear_ring(sizes: list[int]):
    """A RunContext of participants with a linear model on ``sizes`` training rows each."""
    from conftest import linear_participants

    from abm.learning.protocols.base import RunContext

    ps = linear_participants(sizes, holdout=4)
    return RunContext(participants=ps, n_classes=2, input_shape=(3,), rounds=4, local_epochs=1, seed=0)


def test_size_pair_weights_are_n_times_the_data_share():
    """ipa.md's weighted coupling: a_ij = N |D_j| / |D| (mean 1 over j, so lam keeps its scale);
    uniform: a_ij = 1."""
    import numpy as np

    from abm.learning.protocols.ipa import IPA

    ctx = _linear_ring([4, 10, 6])
    sized = IPA(IPAConfig(pair_weights="size"))
    sized.setup(ctx)
    np.testing.assert_allclose(sized.a, np.tile([3 * 4 / 20, 3 * 10 / 20, 3 * 6 / 20], (3, 1)), rtol=1e-12)
    uniform = IPA(IPAConfig())
    uniform.setup(ctx)
    np.testing.assert_array_equal(uniform.a, np.ones((3, 3)))


def test_early_stopping_waits_for_every_peer_to_reach_the_target(monkeypatch):
    """target_accuracy stops the ring at the first round at which every peer's validation
    accuracy reaches it (one peer short keeps it going); after the stop the models are frozen."""
    import abm.learning.protocols.ipa as ipa
    from abm.learning.models import flat_params

    ctx = _linear_ring([6, 6, 6])
    accuracies = iter([[0.9, 0.5, 0.95], [0.9, 0.79, 0.95], [0.8, 0.85, 0.95]])
    round_accuracies: list[float] = []

    def accuracy(model, data):
        if not round_accuracies:
            round_accuracies.extend(next(accuracies))
        return round_accuracies.pop(0)

    monkeypatch.setattr(ipa, "accuracy", accuracy)
    protocol = ipa.IPA(IPAConfig(target_accuracy=0.8))
    protocol.setup(ctx)
    for t in range(2):
        protocol.run_round(ctx, t)
        assert protocol.stopped_at is None, t
    protocol.run_round(ctx, 2)
    assert protocol.stopped_at == 3
    frozen = [flat_params(p.model).clone() for p in ctx.participants]
    protocol.run_round(ctx, 3)
    assert all(torch.equal(flat_params(p.model), f) for p, f in zip(ctx.participants, frozen, strict=True))


def test_a_fixed_stop_round_runs_that_many_rounds():
    """stop_round 2: rounds 0 and 1 train, then the models are frozen (stopped_at 2)."""
    from abm.learning.models import flat_params
    from abm.learning.protocols.ipa import IPA

    ctx = _linear_ring([6, 6, 6])
    protocol = IPA(IPAConfig(stop_round=2))
    protocol.setup(ctx)
    before = [flat_params(p.model).clone() for p in ctx.participants]
    protocol.run_round(ctx, 0)
    assert protocol.stopped_at is None
    after_0 = [flat_params(p.model).clone() for p in ctx.participants]
    protocol.run_round(ctx, 1)
    assert protocol.stopped_at == 2
    after_1 = [flat_params(p.model).clone() for p in ctx.participants]
    protocol.run_round(ctx, 2)
    for b, a0, a1, p in zip(before, after_0, after_1, ctx.participants, strict=True):
        assert not torch.equal(b, a0) and not torch.equal(a0, a1)  # both rounds trained
        assert torch.equal(flat_params(p.model), a1)  # the third did not
    assert len(protocol.distances_l1) == 2


def test_ipa_without_coupling_is_local_training_even_with_a_last_batch_of_one():
    """ipa.md section 6: with lam = 0 IPA equals standalone training (same seeds, batch order and
    optimizer: plain SGD). 90 training samples a participant in batches of 89 leave a last batch
    of one, which local training merges into the one before; IPA skipped it."""
    sc = _scenario(lam=0.0)
    sc["protocols"] = [{"name": "local"}, {"name": "ipa", "params": {"lam": 0.0}}]
    sc["training"] = {"optimizer": "sgd", "momentum": 0.0, "lr": 0.1, "batch_size": 89}
    out = run_all(load_scenario(sc)[0])["protocols"]
    local = [p["collaborative"] for p in out["local"]["participants"]]
    ipa = [p["collaborative"] for p in out["ipa"]["participants"]]
    assert ipa == local


def test_ipa_without_coupling_trains_the_scenarios_local_epochs_each_turn():
    """With ``local_epochs: 2`` local-only makes two passes a round; IPA with lam = 0 must too, or it
    is compared with a baseline trained twice as long (it made one pass a turn, so its round 2
    scored what local-only scored after round 1). Same SGD, batches and seeds: identical scores in
    every round."""
    sc = _scenario(lam=0.0)
    sc["protocols"] = [{"name": "local"}, {"name": "ipa", "params": {"lam": 0.0}}]
    sc["training"] = {"optimizer": "sgd", "momentum": 0.0, "lr": 0.1, "batch_size": 32}
    sc["local_epochs"] = 2
    out = run_all(load_scenario(sc)[0])["protocols"]
    assert out["ipa"]["history"] == out["local"]["history"]
    assert [p["gain"] for p in out["ipa"]["participants"]] == [0.0, 0.0, 0.0]


def test_alignment_mean_reduction_divides_each_layer_by_its_size():
    """Layer 1: a 2 x 3 difference of ones (L1 sum 6, squared sum 6, 6 elements); layer 2:
    difference (2, 0, 0, 0) (L1 sum 2, squared sum 4, 4 elements). ``sum``: 8 (p = 1), 10 (p = 2);
    ``mean``: 6/6 + 2/4 = 1.5 (p = 1), 6/6 + 4/4 = 2 (p = 2)."""
    import pytest

    a = [torch.ones(2, 3), torch.tensor([2.0, 0.0, 0.0, 0.0])]
    b = [torch.zeros(2, 3), torch.zeros(4)]
    assert float(alignment(a, b, 1, "sum")) == pytest.approx(8.0)
    assert float(alignment(a, b, 2, "sum")) == pytest.approx(10.0)
    assert float(alignment(a, b, 1, "mean")) == pytest.approx(1.5)
    assert float(alignment(a, b, 2, "mean")) == pytest.approx(2.0)


def test_a_turn_pulls_each_other_copy_with_its_own_pair_weight():
    """Peer 0's turn (one full batch, plain SGD lr 0.1) with p = 2, lam 0.5 and size weights for
    sizes 4, 10, 6: a_0j = 3 |D_j| / 20, so a_01 = 1.5 and a_02 = 0.9 (a_10 = a_20 = 0.6 would be the
    transposed weight). Copy j != 0 enters only the term lam a_0j ||theta_0 - theta_j||^2, whose
    gradient is 2 lam a_0j (theta_j - theta_0): one step moves it to
    theta_j - 0.1 * 2 * 0.5 * a_0j (theta_j - theta_0)."""
    from abm.learning.models import flat_params
    from abm.learning.protocols.ipa import IPA

    ctx = _linear_ring([4, 10, 6])
    protocol = IPA(IPAConfig(lam=0.5, p=2, pair_weights="size", lr=0.1))
    protocol.setup(ctx)
    before = [flat_params(p.model).clone() for p in ctx.participants]
    protocol._turn(ctx, 0)
    for j, a_0j in ((1, 1.5), (2, 0.9)):
        expected = before[j] - 0.1 * 2 * 0.5 * a_0j * (before[j] - before[0])
        assert torch.allclose(flat_params(ctx.participants[j].model), expected, atol=1e-6), j


def _controlled_fair_stop(monkeypatch, fair_stop: dict, phi: list[float], rounds_xi: list[list[float]]):
    """IPA with ``fair_stop`` on a 3-peer linear ring of 4 rounds whose standalone validation
    accuracies are ``phi`` and whose validation accuracy after round t is ``rounds_xi[t]`` (the
    models train for real; only the accuracies are given)."""
    import abm.learning.protocols.ipa as ipa

    ctx = _linear_ring([6, 6, 6])
    accuracies = iter(rounds_xi)
    round_accuracies: list[float] = []

    def accuracy(model, data):
        if not round_accuracies:
            round_accuracies.extend(next(accuracies))
        return round_accuracies.pop(0)

    monkeypatch.setattr(ipa, "standalone_val_accuracy", lambda ctx: list(phi))
    monkeypatch.setattr(ipa, "accuracy", accuracy)
    protocol = ipa.IPA(IPAConfig(fair_stop=fair_stop))
    protocol.setup(ctx)
    return ctx, protocol


def test_last_fair_gives_back_the_models_of_the_last_round_with_rho_at_least_rho_min(monkeypatch):
    """ipa.md 7.7 (b): phi = (0.2, 0.5, 0.8). Round 1: xi = phi + 0.1, rho = 1 (fair). Round 2:
    xi = (0.5, 0.4, 0.9): centred phi (-0.3, 0, 0.3), centred xi (-0.1, -0.2, 0.3), so rho =
    0.12 / sqrt(0.18 * 0.14) = 0.7559 < 0.8 (not fair). Round 3: xi = (0.7, 0.8, 0.9), rho = 1
    (fair). Round 4: every xi 0.9, constant: rho NaN, not fair. All four rounds train; the peers
    end with their models of round 3, the last fair one."""
    from abm.learning.models import flat_params

    xi = [[0.3, 0.6, 0.9], [0.5, 0.4, 0.9], [0.7, 0.8, 0.9], [0.9, 0.9, 0.9]]
    ctx, protocol = _controlled_fair_stop(monkeypatch, {"rho_min": 0.8}, [0.2, 0.5, 0.8], xi)
    after = []
    for t in range(4):
        protocol.run_round(ctx, t)
        after.append([flat_params(p.model).clone() for p in ctx.participants])
        assert protocol.stopped_at is None, t
    assert protocol.kept_round == 3
    np.testing.assert_allclose(protocol.rho[:3], [1.0, 0.12 / np.sqrt(0.18 * 0.14), 1.0], rtol=1e-9)
    assert np.isnan(protocol.rho[3])
    assert protocol.val_accuracy == xi
    for k, p in enumerate(ctx.participants):
        assert not torch.equal(after[1][k], after[2][k])  # round 3 trained
        assert torch.equal(flat_params(p.model), after[2][k])  # and its models are the ones kept
    summary = protocol.summary(ctx)["fair_stop"]
    assert summary["rule"] == "last_fair" and summary["rho_min"] == 0.8 and summary["kept_round"] == 3
    assert summary["standalone_val_accuracy"] == [0.2, 0.5, 0.8] and summary["val_accuracy"] == xi


def test_a_round_whose_rho_equals_rho_min_is_fair(monkeypatch):
    """rho_min 1 asks for rounds whose accuracies rank and space the peers as standalone training
    does: round 2 gives back phi exactly (rho 1, at least rho_min), so it is the round kept; the
    other rounds' rho is below 1 or NaN."""
    phi = [0.2, 0.5, 0.8]
    xi = [[0.5, 0.4, 0.9], list(phi), [0.5, 0.4, 0.9], [0.9, 0.9, 0.9]]
    ctx, protocol = _controlled_fair_stop(monkeypatch, {"rho_min": 1.0}, phi, xi)
    for t in range(4):
        protocol.run_round(ctx, t)
    assert protocol.rho[1] == 1.0 and protocol.kept_round == 2


def test_last_fair_keeps_the_final_models_when_no_round_is_fair(monkeypatch):
    """A constant phi gives rho NaN in every round, which is never fair: nothing is restored
    (the final models stay, round 4's training included) and kept_round is None."""
    from abm.learning.models import flat_params

    xi = [[0.3, 0.6, 0.9]] * 4
    ctx, protocol = _controlled_fair_stop(monkeypatch, {"rule": "last_fair", "rho_min": -1.0}, [0.5] * 3, xi)
    for t in range(3):
        protocol.run_round(ctx, t)
    before_last = [flat_params(p.model).clone() for p in ctx.participants]
    protocol.run_round(ctx, 3)
    assert protocol.kept_round is None and all(np.isnan(protocol.rho))
    assert all(not torch.equal(flat_params(p.model), b) for p, b in zip(ctx.participants, before_last, strict=True))
    assert protocol.summary(ctx)["fair_stop"]["kept_round"] is None


def test_first_all_gain_stops_at_the_first_fair_round_in_which_every_peer_gains(monkeypatch):
    """ipa.md 7.7 (c): phi = (0.2, 0.5, 0.8). Round 1: xi = phi - 0.1, rho = 1 but nobody gains.
    Round 2: xi = (0.9, 0.6, 0.8), everyone at or above phi but rho < 0 (centred xi (0.133,
    -0.167, 0.033): covariance -0.03). Round 3: xi = (0.3, 0.6, 0.8): every xi_i >= phi_i (peer 3
    ties) and rho = 0.15 / sqrt(0.18 * 0.12667) = 0.9934: stop, stopped_at 3. Round 4 is frozen
    and records nothing."""
    from abm.learning.models import flat_params

    xi = [[0.1, 0.4, 0.7], [0.9, 0.6, 0.8], [0.3, 0.6, 0.8]]
    ctx, protocol = _controlled_fair_stop(monkeypatch, {"rule": "first_all_gain"}, [0.2, 0.5, 0.8], xi)
    for t in range(2):
        protocol.run_round(ctx, t)
        assert protocol.stopped_at is None, t
    protocol.run_round(ctx, 2)
    assert protocol.stopped_at == 3 and protocol.kept_round == 3
    assert protocol.rho[0] == pytest.approx(1.0) and protocol.rho[1] < 0
    assert protocol.rho[2] == pytest.approx(0.15 / np.sqrt(0.18 * 0.38 / 3), rel=1e-9)
    frozen = [flat_params(p.model).clone() for p in ctx.participants]
    protocol.run_round(ctx, 3)
    assert all(torch.equal(flat_params(p.model), f) for p, f in zip(ctx.participants, frozen, strict=True))
    assert len(protocol.rho) == 3 and protocol.val_accuracy == xi


def test_first_all_gain_never_stops_on_a_nan_rho(monkeypatch):
    """Every peer gains in every round, but xi is constant: rho is NaN, so the rule never fires
    even at rho_min -1."""
    ctx, protocol = _controlled_fair_stop(
        monkeypatch, {"rule": "first_all_gain", "rho_min": -1.0}, [0.2, 0.5, 0.8], [[0.9, 0.9, 0.9]] * 4
    )
    for t in range(4):
        protocol.run_round(ctx, t)
    assert protocol.stopped_at is None and protocol.kept_round is None and len(protocol.rho) == 4


def test_fair_stop_config_is_validated():
    """rho_min is a correlation, within [-1, 1]; the rule is one of two; fair_stop is a rule of
    its own, refused beside stop_round or target_accuracy; a scenario names the key."""
    from pydantic import ValidationError

    from abm.learning.errors import LearningScenarioError
    from abm.learning.protocols.configs import FairStop

    assert FairStop() == FairStop(rule="last_fair", rho_min=0.8)
    FairStop(rho_min=-1.0)
    FairStop(rho_min=1.0)
    for bad in (1.5, -1.01, float("nan")):
        with pytest.raises(ValidationError, match="rho_min"):
            FairStop(rho_min=bad)
    with pytest.raises(ValidationError, match="rule"):
        FairStop(rule="first_fair")
    with pytest.raises(ValidationError, match="rhomin"):
        IPAConfig(fair_stop={"rhomin": 0.5})
    for other in ({"stop_round": 2}, {"target_accuracy": 0.9}):
        with pytest.raises(ValidationError, match="fair_stop is an early-stopping rule of its own"):
            IPAConfig(fair_stop={}, **other)
    with pytest.raises(LearningScenarioError, match=r"protocols\[0\]\.params\.fair_stop\.rho_min: 2"):
        load_scenario(_scenario(fair_stop={"rho_min": 2}))


def test_fair_stop_report_phi_is_local_onlys_validation_accuracy_and_last_fair_restores():
    """Through the runner (3 peers with 10 / 30 / 60 % of the data, lam 0.1, 5 rounds, rho_min
    0.5): phi in the report is exactly what the local-only baseline of the run scores on each
    peer's validation split; rho(t) is the Pearson of phi and the recorded xi(t); the rule trains
    as IPA without it does (same history up to the last round), and the last fair round is round
    2 (rho 0.66; later rounds below 0.5), so the final scores are round 2's."""
    from abm.learning.metrics import collaborative_fairness
    from abm.learning.protocols.base import RunContext
    from abm.learning.runner import build_participants, execute_protocol, prepare_data
    from abm.learning.scenario import ProtocolSpec
    from abm.learning.training import accuracy

    sc = _scenario(lam=0.1, fair_stop={"rho_min": 0.5})
    sc["protocols"].append({"name": "ipa", "label": "ipa_plain", "params": {"lam": 0.1}})
    sc["split"] = {"participants": 3, "quantity_skew": {"fractions": [0.1, 0.3, 0.6]}}
    sc["rounds"] = 5
    sc["training"] = {"optimizer": "sgd", "momentum": 0.0, "lr": 0.1, "batch_size": 16}
    scenario = load_scenario(sc)[0]
    out = run_all(scenario)["protocols"]
    fair = out["ipa"]["summary"]["fair_stop"]
    assert "fair_stop" not in out["ipa_plain"]["summary"]

    data = prepare_data(scenario)
    local = build_participants(scenario, data, scenario.models)
    ctx = RunContext(participants=local, n_classes=4, input_shape=(6,), rounds=5, local_epochs=1, seed=0)
    execute_protocol(scenario, ProtocolSpec(name="local"), ctx)
    assert fair["standalone_val_accuracy"] == [accuracy(p.model, p.data.val) for p in local]

    assert len(fair["val_accuracy"]) == len(fair["rho"]) == 5
    expected = [collaborative_fairness(fair["standalone_val_accuracy"], xi) for xi in fair["val_accuracy"]]
    assert fair["rho"] == expected
    assert fair["kept_round"] == 2 == 1 + max(t for t, r in enumerate(fair["rho"]) if r >= 0.5)
    assert out["ipa"]["summary"]["stopped_at"] is None
    assert out["ipa"]["history"][:4] == out["ipa_plain"]["history"][:4]
    assert out["ipa"]["history"][4] == out["ipa"]["history"][1] != out["ipa_plain"]["history"][4]


W, TOKEN, ACC = "model_weights", "token", "validation_accuracy"


def _ring_messages(config, rounds: int = 3):
    """An IPA run of ``rounds`` rounds of 3 linear peers (8 parameters each): (kind, sender, receiver, round, bytes) of
    every message, the messages, and the protocol. The ledger's total is the messages' sum."""
    from abm.learning.messages import AuditNetwork
    from abm.learning.protocols.ipa import IPA

    ctx = _linear_ring([6, 6, 6])
    ctx.network, ctx.rounds = AuditNetwork(), rounds
    protocol = IPA(config)
    protocol.setup(ctx)
    for t in range(rounds):
        protocol.run_round(ctx, t)
    messages = ctx.network.messages
    got = [(m.kind.value, m.sender, m.receiver, m.round, m.nbytes) for m in messages]
    assert ctx.network.total_bytes() == sum(m.nbytes for m in messages)
    return got, messages, protocol


def _ring(t: int) -> list[tuple]:
    """One round's token: every peer's turn ends with all 3 x 8 parameters to the next peer."""
    return [(TOKEN, i, (i + 1) % 3, t, 3 * 8 * 4) for i in range(3)]


def _published(t: int) -> list[tuple]:
    """Every peer's validation accuracy (one float64) to every other peer."""
    return [(ACC, i, j, t, 8) for i in range(3) for j in range(3) if j != i]


ASSEMBLY = [(W, 1, 0, -1, 32), (W, 2, 0, -1, 32)]  # theta*: the initial models to the first peer


def test_every_exchange_of_the_ring_is_a_message():
    """Nothing reaches a peer outside a message: theta* assembled from the peers' initial models
    (ipa.md 3, step 1), the token each turn, and the last peer's return of each middle peer's own
    model once training ends (with update_others the later turns changed it; peer 0 gets the token).
    Without update_others only a peer's own turn changes its model, so nothing is returned."""
    from abm.learning.protocols.configs import IPAConfig

    got = _ring_messages(IPAConfig())[0]
    assert got == ASSEMBLY + _ring(0) + _ring(1) + _ring(2) + [(W, 2, 1, 2, 32)]
    got = _ring_messages(IPAConfig(stop_round=2))[0]
    assert got == ASSEMBLY + _ring(0) + _ring(1) + [(W, 2, 1, 1, 32)]  # returned at the stop; frozen after
    got = _ring_messages(IPAConfig(update_others=False))[0]
    assert got == ASSEMBLY + _ring(0) + _ring(1) + _ring(2)


def test_the_stopping_rules_publish_each_peers_validation_accuracy_as_a_message():
    """fair_stop and target_accuracy decide on every peer's validation accuracy: each peer gets its
    own model back after every round (to measure it on its own validation data) and sends the
    number, 8 bytes, to every other peer, which applies the rule itself (no decision travels);
    fair_stop's standalone accuracies phi go the same way before round 1. The published numbers
    are the ones the rule used (phi and xi in the summary)."""
    from abm.learning.protocols.configs import FairStop, IPAConfig

    got, messages, protocol = _ring_messages(IPAConfig(fair_stop=FairStop(rho_min=-1.0)))
    expected = ASSEMBLY + _published(-1)
    for t in range(3):
        expected += [*_ring(t), (W, 2, 1, t, 32), *_published(t)]
    assert got == expected
    rows = [protocol.phi, *protocol.val_accuracy]
    published = [m.payload["accuracy"].tolist() for m in messages if m.kind.value == ACC]
    assert published == [[row[i]] for row in rows for i in range(3) for j in range(3) if j != i]
    # target 0: every peer has reached it after round 1, so the ring stops there
    got = _ring_messages(IPAConfig(target_accuracy=0.0))[0]
    assert got == ASSEMBLY + _ring(0) + [(W, 2, 1, 0, 32)] + _published(0)
