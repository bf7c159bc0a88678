"""FedAvg / FedProx / centralized / local-only through the in-process runner."""

from typing import Any

import torch
from conftest import linear_participants

from abm.learning.models import flat_params
from abm.learning.runner import build_participants, prepare_data, run_all, run_protocol
from abm.learning.scenario import ProtocolSpec, load_scenario


def _scenario(**over):
    sc = {
        "name": "tiny",
        "seed": 0,
        "data": {
            "source": "gaussian_mixture",
            "n_samples": 1200,
            "n_classes": 4,
            "n_features": 8,
            "modes_per_class": 2,
            "separation": 3.0,
        },
        "split": {"participants": 4},
        "models": [{"kind": "mlp", "hidden": [16], "batchnorm": False}],
        "rounds": 8,
        "evaluate_on": "global",
        "protocols": [{"name": "local"}],  # the tests run their protocols themselves
    }
    sc.update(over)
    return load_scenario(sc)[0]


def test_fedavg_of_identical_models_is_the_model():
    """With a zero learning rate every local model stays at the shared init, so the average
    must reproduce it exactly (up to float32 rounding of the weighted sum)."""
    s = _scenario(training={"optimizer": "sgd", "lr": 1e-12, "momentum": 0.0}, rounds=2)
    data = prepare_data(s)
    init = flat_params(build_participants(s, data, s.models)[0].model)
    from abm.learning.protocols import RunContext
    from abm.learning.protocols.fedavg import FedAvg

    ps = build_participants(s, data, s.models)
    ctx = RunContext(ps, 4, (8,), 2, 1, 0)
    fa = FedAvg()
    fa.setup(ctx)
    fa.run_round(ctx, 0)
    assert torch.allclose(fa.global_flat, init, atol=1e-6)
    for p in ps:
        assert torch.allclose(flat_params(p.model), init, atol=1e-6)


def test_fedavg_on_iid_data_approaches_centralized_and_beats_local():
    s = _scenario(
        rounds=15,
        local_epochs=2,
        protocols=[{"name": "centralized"}, {"name": "fedavg"}, {"name": "fedprox"}],
    )
    r = run_all(s)["protocols"]
    central = r["centralized"]["mean_score"]
    # IID shares of 180 training rows: FedAvg within 4 points of pooled training (measured gap
    # 0 points at 15 rounds), and above the local-only average (measured +2.5 points).
    assert r["fedavg"]["mean_score"] >= central - 0.04
    assert r["fedavg"]["mean_score"] > r["local"]["mean_score"]
    assert r["fedprox"]["mean_score"] >= central - 0.04
    # bytes: each participant's data size to the server and the total back (8 bytes each), participant
    # 0's initial model to the server, its broadcast to 4 participants, then 15 rounds x 4
    # participants x (upload of the update + download of the new global model)
    n_params = 8 * 16 + 16 + 16 * 4 + 4
    assert r["fedavg"]["bytes_total"] == 2 * 4 * 8 + (1 + 4 + 15 * 4 * 2) * n_params * 4
    assert r["local"]["bytes_total"] == 0


def test_secure_aggregation_does_not_change_fedavg_and_survives_dropout():
    s = _scenario(rounds=3)
    data = prepare_data(s)
    plain = run_protocol(s, data, ProtocolSpec(name="fedavg"))
    secure = run_protocol(s, data, ProtocolSpec(name="fedavg", privacy={"secure_aggregation": True}))
    assert max(abs(a - b) for a, b in zip(plain.scores, secure.scores, strict=True)) < 1e-6
    dropped = run_protocol(
        s,
        data,
        ProtocolSpec(name="fedavg", privacy={"secure_aggregation": True, "dropouts": {1: [2]}}),
    )
    # Round 1 averages the 3 survivors' updates: the same result as a plain sum without participant 2.
    plain_dropped = run_protocol(s, data, ProtocolSpec(name="fedavg", privacy={"dropouts": {1: [2]}}))
    assert max(abs(a - b) for a, b in zip(plain_dropped.scores, dropped.scores, strict=True)) < 1e-6
    assert plain_dropped.scores != plain.scores, "the dropout changed the model"
    assert dropped.bytes_by_kind["mask_seed"] == 3 * 32  # 3 survivors reveal one seed each


def test_report_json_names_the_participants_that_dropped_out_of_each_round():
    """report.json's privacy section gave secure aggregation and DP but not the dropouts the
    scenario simulates: it gives them per round (rounds from 0, as privacy.dropouts numbers them),
    an empty list where none dropped out."""
    dropouts = {"secure_aggregation": True, "dropouts": {2: [3, 1], 0: [2], 1: []}}
    s = _scenario(
        rounds=3,
        protocols=[
            {"name": "fedavg", "label": "dropped", "privacy": dropouts},
            {"name": "fedavg", "label": "secure", "privacy": {"secure_aggregation": True}},
            {"name": "fedavg", "label": "plain"},
        ],
    )
    report = run_all(s)["protocols"]
    assert report["dropped"]["privacy"] == {
        "secure_aggregation": True,
        "dropouts": [{"round": 0, "participants": [2]}, {"round": 2, "participants": [1, 3]}],
        "withheld": [],
        "dp": None,
    }
    assert report["secure"]["privacy"]["dropouts"] == []
    assert report["plain"]["privacy"] is None  # no privacy block: no wrapper, no dropouts


def test_runs_are_deterministic():
    s = _scenario(rounds=2, protocols=[{"name": "fedavg"}])
    a = run_all(s)["protocols"]["fedavg"]["participants"]
    b = run_all(s)["protocols"]["fedavg"]["participants"]
    assert a == b


def test_dp_reports_epsilon_through_the_runner():
    s = _scenario(rounds=3)
    data = prepare_data(s)
    r = run_protocol(
        s,
        data,
        ProtocolSpec(name="fedavg", privacy={"dp": {"clip": 1.0, "noise_multiplier": 1.0, "delta": 1e-5}}),
    )
    from abm.learning.privacy.accountant import rdp_epsilon

    assert r.epsilon == rdp_epsilon(1.0, 3, 1e-5)


def test_codream_dp_accounts_the_logits_as_well_as_the_dream_gradients():
    """CoDream's soft labels are a sum of private logits: with DP each round releases them too,
    so 3 rounds with dreaming from round 1 and 4 dream steps spend 2 x (4 + 1) releases."""
    s = _scenario(rounds=3)
    data = prepare_data(s)
    dp = {"clip": 1.0, "noise_multiplier": 2.0, "delta": 1e-5}
    spec = ProtocolSpec(name="codream", params={"dream_steps": 4, "n_dreams": 8, "dream_start": 1}, privacy={"dp": dp})
    r = run_protocol(s, data, spec)
    from abm.learning.privacy.accountant import rdp_epsilon

    assert r.epsilon == rdp_epsilon(2.0, 2 * (4 + 1), 1e-5)
    assert r.privacy == {
        "secure_aggregation": False,
        "dropouts": [],
        "withheld": [],
        "dp": {
            "clip": 1.0,
            "delta": 1e-5,
            "target_epsilon": None,
            "noise_multiplier": 2.0,
            "rounds": 3,
            "releases": 2 * (4 + 1),
            "accountant": "rdp",
        },
    }


def test_privacy_switched_off_changes_nothing():
    """A privacy block with every wrapper off gives bit-identical results to no block at all, for
    a sum-aggregating protocol (FedAvg) and for CoDream (input-gradient sums)."""
    off = {"secure_aggregation": False, "dp": None}
    s = _scenario(
        rounds=2,
        models=[{"kind": "mlp", "hidden": [16]}],
        protocols=[
            {"name": "fedavg"},
            {"name": "fedavg", "label": "fedavg_off", "privacy": off},
            {"name": "codream", "params": {"dream_steps": 5, "n_dreams": 16}},
            {"name": "codream", "label": "codream_off", "params": {"dream_steps": 5, "n_dreams": 16}, "privacy": off},
        ],
    )
    r = run_all(s)["protocols"]
    for name in ("fedavg", "codream"):
        a = [p["collaborative"] for p in r[name]["participants"]]
        b = [p["collaborative"] for p in r[f"{name}_off"]["participants"]]
        assert a == b
        assert r[f"{name}_off"]["epsilon"] is None


def local_sgd_by_hand(p, w_g: list[torch.Tensor], mu: float = 0.0) -> list[torch.Tensor]:
    """Participant ``p``'s linear model after two full-batch SGD epochs (lr 0.1) from ``w_g`` on
    CE + (mu/2)||w - w_g||^2, computed by hand."""
    import torch.nn.functional as F

    w = [q.clone().requires_grad_(True) for q in w_g]
    for _ in range(2):
        loss = F.cross_entropy(p.data.train.x @ w[0].T + w[1], p.data.train.y)
        loss = loss + 0.5 * mu * sum(((a - b) ** 2).sum() for a, b in zip(w, w_g, strict=True))
        grads = torch.autograd.grad(loss, w)
        w = [(a - 0.1 * g).detach().requires_grad_(True) for a, g in zip(w, grads, strict=True)]
    return [a.detach() for a in w]


def assert_one_round_moves_everyone_to(ps: list, cfg: Any, want: list[torch.Tensor], dropouts: Any = None) -> None:
    """One FedAvg round of config ``cfg`` over the linear participants ``ps`` (two local epochs;
    ``dropouts`` as RunContext takes them) leaves every participant's model at ``want``."""
    from abm.learning.protocols.base import RunContext
    from abm.learning.protocols.fedavg import FedAvg

    ctx = RunContext(
        participants=ps, n_classes=2, input_shape=(3,), rounds=1, local_epochs=2, seed=0, dropouts=dropouts or {}
    )
    protocol = FedAvg(cfg)
    protocol.setup(ctx)
    protocol.run_round(ctx, 0)
    for p in ps:
        for q, w in zip(p.model.parameters(), want, strict=True):
            assert torch.allclose(q.detach(), w, atol=1e-6)


def test_one_fedprox_round_matches_the_update_computed_by_hand():
    """Two participants (4 and 10 samples), a linear model, two local SGD epochs: every
    participant starts from participant 0's weights w_g, descends CE + (mu/2)||w - w_g||^2, and the
    new global model is w_g + sum_k |D_k|/sum_j |D_j| (w_k - w_g); mu = 0 is FedAvg, and FedProx's
    default mu (0.01) takes the proximal term as any other mu does."""

    from abm.learning.protocols.configs import FedAvgConfig

    for mu in (0.0, 0.01, 0.5):
        ps = linear_participants([4, 10])
        w_g = [q.detach().clone() for q in ps[0].model.parameters()]
        expected = [torch.zeros_like(q) for q in w_g]
        for p in ps:
            for e, a, b in zip(expected, local_sgd_by_hand(p, w_g, mu), w_g, strict=True):
                e += p.n_train / 14 * (a - b)
        assert_one_round_moves_everyone_to(ps, FedAvgConfig(mu=mu), [b + e for b, e in zip(w_g, expected, strict=True)])


def test_a_dropped_participants_weight_leaves_the_average():
    """Three participants (4, 10 and 6 samples), participant 1 drops out of round 0: the new global
    model is w_g + server_lr * sum over the survivors of |D_k| / (4 + 6) (w_k - w_g), the
    survivors' size-weighted mean (normalised by the survivors' weight, not by everyone's) scaled
    by the server's step (0.5 here), each w_k computed by hand (two full-batch SGD epochs from
    w_g, lr 0.1)."""

    from abm.learning.protocols.configs import FedAvgConfig

    ps = linear_participants([4, 10, 6])
    w_g = [q.detach().clone() for q in ps[0].model.parameters()]
    expected = [torch.zeros_like(q) for q in w_g]
    for p in (ps[0], ps[2]):
        for e, a, b in zip(expected, local_sgd_by_hand(p, w_g), w_g, strict=True):
            e += p.n_train / 10 * (a - b)
    want = [b + 0.5 * e for b, e in zip(w_g, expected, strict=True)]
    assert_one_round_moves_everyone_to(ps, FedAvgConfig(server_lr=0.5), want, dropouts={0: frozenset({1})})


def test_uniform_weighting_averages_updates_equally_whatever_the_sizes():
    """``weighting: uniform``: two participants of 4 and 10 samples each count 1/2 (size weighting
    would give 4/14 and 10/14), so the new global model is w_g + (d_0 + d_1) / 2, with each d_k =
    w_k - w_g computed by hand (two full-batch SGD epochs at lr 0.1 from w_g)."""

    from abm.learning.protocols.configs import FedAvgConfig

    ps = linear_participants([4, 10])
    w_g = [q.detach().clone() for q in ps[0].model.parameters()]
    expected = [torch.zeros_like(q) for q in w_g]
    for p in ps:
        for e, a, b in zip(expected, local_sgd_by_hand(p, w_g), w_g, strict=True):
            e += 0.5 * (a - b)
    want = [b + e for b, e in zip(w_g, expected, strict=True)]
    assert_one_round_moves_everyone_to(ps, FedAvgConfig(weighting="uniform"), want)


def test_fedprox_by_default_has_a_proximal_term():
    """FedProx without a proximal term (mu = 0) is FedAvg; its default must keep one (mu > 0),
    while FedAvg's default is mu = 0."""
    from abm.learning.protocols.fedavg import FedAvg, FedProx

    assert FedProx.Config().mu > 0
    assert FedAvg.Config().mu == 0
