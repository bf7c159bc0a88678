"""MAPL: simplex projection, losses, graph learning on block similarities, end to end."""

import numpy as np
import pytest
import torch

from abm.learning.protocols.mapl import (
    MAPLConfig,
    graph_step,
    project_simplex,
    uniformity_loss,
    within_cluster_mass,
)
from abm.learning.runner import run_all
from abm.learning.scenario import load_scenario


def test_simplex_projection():
    rng = np.random.default_rng(0)
    for _ in range(50):
        v = rng.normal(0, 2, size=7)
        w = project_simplex(v)
        assert w.sum() == pytest.approx(1.0) and np.all(w >= 0)
        assert np.allclose(project_simplex(w), w)  # idempotent
        # optimality: w is the closest simplex point among random candidates
        cand = rng.dirichlet(np.ones(7), size=200)
        assert np.linalg.norm(v - w) <= np.min(np.linalg.norm(v - cand, axis=1)) + 1e-12


def test_uniformity_minimised_by_regular_simplex():
    k = 4
    simplex = torch.eye(k) - 1.0 / k  # centred one-hot vectors: pairwise cosine -1/(k-1)
    assert float(uniformity_loss(simplex)) == pytest.approx(-1.0 / (k - 1), abs=1e-6)
    assert float(uniformity_loss(torch.randn(k, 8))) > -1.0 / (k - 1)


def test_graph_learning_concentrates_on_own_cluster():
    """mapl.md 2.7: 10 clients, 2 clusters, similarity 0.7 within / 0.1 across, code-faithful
    sign step: the row ends on exactly its own cluster."""
    m = 10
    g = np.repeat([0, 1], 5)
    s = np.where(g[:, None] == g[None, :], 0.7, 0.1)
    np.fill_diagonal(s, 1.0)
    gamma = np.full(m, 1.0 / m)
    w = np.full((m, m), 1.0 / m)
    cfg = MAPLConfig()
    for _ in range(30):
        w = np.stack([graph_step(w[i], s[i], gamma, i, cfg) for i in range(m)])
    assert np.allclose(w.sum(1), 1.0)
    assert within_cluster_mass(w, g.tolist()) >= 0.99
    assert ((w > 0) & ~np.eye(m, dtype=bool)).sum(1).max() <= 4


def test_one_graph_step_by_hand():
    """mapl.md 2.7, one code-faithful step for row 0 of 4 (defaults mu1 0.5, mu2 0.1, beta 0.5,
    lr 0.1), from w = 1/4 each with gamma = 1/4 each. The peers' similarities 0.1, 0.05, 0.01 are
    max-normalised to 1, 0.5, 0.1 (s_00 = 1), so grad_j = -0.5 * 0.25 * s_j + 0.1 * 0.5 * w_j / ||w||
    = -0.125 s_j + 0.025: negative for s = 1, 1, 0.5, positive for 0.1. The sign step gives
    0.35, 0.35, 0.35, 0.15, and the projection onto the simplex takes 0.05 off each:
    0.3, 0.3, 0.3, 0.1. (Without the max-normalisation the peers' terms would all be positive.)"""
    w = graph_step(np.full(4, 0.25), np.array([1.0, 0.1, 0.05, 0.01]), np.full(4, 0.25), 0, MAPLConfig())
    np.testing.assert_allclose(w, [0.3, 0.3, 0.3, 0.1], rtol=1e-12)


def test_mapl_learned_graph_puts_weight_on_same_cluster_peers():
    sc = {
        "name": "mapl",
        "seed": 0,
        "data": {
            "source": "gaussian_mixture",
            "n_samples": 800,
            "n_classes": 6,
            "n_features": 10,
            "modes_per_class": 1,
            "separation": 2.0,
        },
        "split": {
            "participants": 6,
            "class_groups": {"groups": [[0, 1, 2], [3, 4, 5]], "assignment": [0, 0, 0, 1, 1, 1]},
        },
        "models": [{"kind": "mlp", "hidden": [16]}, {"kind": "mlp", "hidden": [32, 16]}],
        "rounds": 15,
        "evaluate_on": "own",
        "protocols": [{"name": "mapl"}],
    }
    r = run_all(load_scenario(sc)[0])["protocols"]["mapl"]
    assert r["summary"]["within_cluster_mass"] >= 0.8  # measured 1.0 for seeds 0-2
    w = np.array(r["summary"]["graph"])
    assert np.allclose(w.sum(1), 1.0)
    # only prototypes and classifier heads travel, with the requests for them and the data sizes
    for p in r["participants"]:
        assert set(p["kinds_sent"]) <= {"prototypes", "classifier_head", "request", "data_size"}


def _record_views(mapl_config):
    """Run one MAPL local epoch on data whose two features have sd 10 and 0.01; return the
    differences between the two augmented views of every sample the body saw."""
    from abm.learning.data import Dataset
    from abm.learning.models import build_model
    from abm.learning.participant import Participant
    from abm.learning.partition import ParticipantData
    from abm.learning.protocols.base import RunContext
    from abm.learning.protocols.mapl import MAPL
    from abm.learning.training import TrainConfig

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(512, 2, generator=gen) * torch.tensor([10.0, 0.01])
    data = Dataset(x, torch.arange(512) % 2)
    parts = []
    for k in range(2):
        torch.manual_seed(k)
        model = build_model("mlp", (2,), 2, hidden=[8], batchnorm=False)
        parts.append(Participant(k, ParticipantData(data, data, data), model, TrainConfig(batch_size=64), k))
    ctx = RunContext(participants=parts, n_classes=2, input_shape=(2,), rounds=1, local_epochs=1, seed=0)
    proto = MAPL(mapl_config)
    proto.setup(ctx)
    seen = []
    parts[0].model.body.register_forward_pre_hook(lambda _m, args: seen.append(args[0].detach().clone()))
    proto._local(ctx, 0)
    diffs = [v[: len(v) // 2] - v[len(v) // 2 :] for v in seen]  # view a minus view b, same samples
    return torch.cat(diffs)


def test_augmentation_jitter_scales_with_each_feature_sd():
    """mapl.md 5.4: jitter sd = 0.1 x the feature's sd (own training data). The difference of the
    two views of one sample is N(0, 2 (0.1 sd)^2): sd 1.414 for the sd-10 feature and 0.001414
    for the sd-0.01 feature (1,024 samples per feature: the sample sd is within 5 % with
    probability > 0.99). Before the fix the jitter was an absolute 0.1 (sd 0.141 for both)."""
    d = _record_views(MAPLConfig(mask_fraction=0.0))
    sd = d.std(0)
    assert float(sd[0]) == pytest.approx(np.sqrt(2) * 1.0, rel=0.05)
    assert float(sd[1]) == pytest.approx(np.sqrt(2) * 0.001, rel=0.05)
    # masking still zeroes about mask_fraction of the entries of each view
    d = _record_views(MAPLConfig(jitter=0.0, mask_fraction=0.25))
    assert float((d != 0).float().mean()) == pytest.approx(2 * 0.25 * 0.75, abs=0.03)


@pytest.mark.slow
def test_mapl_beats_local_ce_and_recovers_clusters_on_the_spec_experiment():
    """mapl.md 5.4's scaled-down experiment (`gmm_mapl_scarce`, seed 1): the learned graph puts
    all of each participant's weight on its own cluster and MAPL beats local-only CE training
    (benchmarks/learning_results.md, seeds 1-3: 89.7 vs 86.9; seed 1: 83.4 vs 82.0). It does not
    beat MAPL with W = I (the same losses, nothing exchanged: 89.8), which is why that claim of
    issue #7 is recorded as not shown; this test covers the part that holds."""
    from pathlib import Path

    import yaml

    path = Path(__file__).resolve().parents[2] / "scenarios" / "learning" / "gmm_mapl_scarce.yaml"
    raw = yaml.safe_load(path.read_text())
    raw["protocols"] = [p for p in raw["protocols"] if p.get("label") is None]
    r = run_all(load_scenario({**raw, "seed": 1})[0])["protocols"]
    assert r["mapl"]["summary"]["within_cluster_mass"] >= 0.8
    assert r["mapl"]["mean_score"] > r["local"]["mean_score"] + 0.005


def _mapl_context(hiddens: list[list[int]], batchnorm: bool = True):
    """Participants with their own data (class means shifted by participant) and the given MLP
    bodies (width 8 at the end), in a context of one round."""
    from abm.learning.data import Dataset
    from abm.learning.models import build_model
    from abm.learning.participant import Participant
    from abm.learning.partition import ParticipantData
    from abm.learning.protocols.base import RunContext
    from abm.learning.training import TrainConfig

    parts = []
    for k, hidden in enumerate(hiddens):
        gen = torch.Generator().manual_seed(k)
        y = torch.arange(96) % 3
        x = torch.randn(96, 4, generator=gen) + 3.0 * y[:, None] + 5.0 * k
        data = Dataset(x, y)
        torch.manual_seed(k)
        model = build_model("mlp", (4,), 3, hidden=hidden, batchnorm=batchnorm)
        parts.append(Participant(k, ParticipantData(data, data, data), model, TrainConfig(batch_size=32), k))
    return RunContext(participants=parts, n_classes=3, input_shape=(4,), rounds=1, local_epochs=1, seed=0)


def test_mapl_plus_replaces_each_body_by_its_graph_row_of_the_trained_bodies():
    """MAPL+ (mapl.md 3.4): after the round's training, body_i <- sum_j w_ij body_j over the
    trainable parameters, with the pre-aggregation bodies of every participant; BatchNorm running
    statistics, heads and projectors stay as each participant trained them; a body travels only
    along an edge with w_ij > 0 (three participants, a fixed row matrix with two zeros)."""
    from abm.learning.models import trainable_flat
    from abm.learning.protocols.mapl import MAPL

    ctx = _mapl_context([[16, 8]] * 3)
    proto = MAPL(MAPLConfig(aggregate_backbone=True, learn_graph=False))
    proto.setup(ctx)
    w = np.array([[0.5, 0.5, 0.0], [0.0, 1.0, 0.0], [0.2, 0.3, 0.5]])
    proto.W = w.copy()
    trained, buffers, heads = [], [], []
    original = proto._local

    def local_and_record(c, k):
        original(c, k)
        m = c.participants[k].model
        trained.append(trainable_flat(m.body))
        buffers.append([b.clone() for b in m.body.buffers()])
        heads.append(m.head.weight.detach().clone())

    proto._local = local_and_record
    proto.run_round(ctx, 0)
    for i, p in enumerate(ctx.participants):
        expected = sum(float(w[i, j]) * trained[j] for j in range(3))
        assert torch.allclose(trainable_flat(p.model.body), expected, atol=1e-6)
        assert all(torch.equal(a, b) for a, b in zip(p.model.body.buffers(), buffers[i], strict=True))
        assert torch.equal(p.model.head.weight, heads[i])
    assert not torch.allclose(trained[0], trained[1])  # the bodies did differ before
    assert not torch.allclose(buffers[0][0], buffers[2][0])  # running means of different data
    body_bytes = trained[0].numel() * 4
    # edges with w_ij > 0 and i != j: 0<-1, 2<-0, 2<-1
    assert ctx.network.per_kind["model_weights"] == 3 * body_bytes
    assert ctx.network.sent[1] == 2 * body_bytes + 2 * 3 * proto.config.proto_dim * 4


def test_a_peer_learns_it_was_chosen_from_a_request():
    """A peer sends its prototypes (and, under MAPL+, its body) only to those whose row gives it
    weight: each such i first asks it, a 0-byte request in the round, so the sender learns that it
    was chosen from a message. A fixed row matrix with two zeros: edges 0<-1, 2<-0, 2<-1 only."""
    from abm.learning.messages import AuditNetwork
    from abm.learning.models import trainable_flat
    from abm.learning.protocols.mapl import MAPL

    ctx = _mapl_context([[16, 8]] * 3)
    ctx.network = AuditNetwork()
    proto = MAPL(MAPLConfig(aggregate_backbone=True, learn_graph=False))
    proto.setup(ctx)
    proto.W = np.array([[0.5, 0.5, 0.0], [0.0, 1.0, 0.0], [0.2, 0.3, 0.5]])
    proto.run_round(ctx, 0)
    xi = 3 * proto.config.proto_dim * 4
    body = trainable_flat(ctx.participants[0].model.body).numel() * 4
    expected = []
    for i, j in [(0, 1), (2, 0), (2, 1)]:
        expected += [("request", i, j, 0, 0), ("prototypes", j, i, 0, xi), ("model_weights", j, i, 0, body)]
    assert [(m.kind.value, m.sender, m.receiver, m.round, m.nbytes) for m in ctx.network.messages] == expected
    assert all(m.payload == {} for m in ctx.network.messages if m.kind.value == "request")


def test_with_a_learned_graph_every_prototype_answers_a_request_of_its_round():
    """Two rounds with the graph learned (a step each round): each prototypes message j -> i comes
    right after i's request to j in the same round, and i asks exactly the peers its row weights."""
    from abm.learning.messages import AuditNetwork
    from abm.learning.protocols.mapl import MAPL

    ctx = _mapl_context([[16, 8]] * 3)
    ctx.network, ctx.rounds = AuditNetwork(), 2
    proto = MAPL(MAPLConfig(warmup_rounds=0, graph_lr=0.5))
    proto.setup(ctx)
    for t in range(2):
        proto.run_round(ctx, t)
        edges = {(i, j) for i in range(3) for j in range(3) if i != j and proto.W[i, j] > 0}
        at = [m for m in ctx.network.messages if m.round == t]
        requests = [(m.sender, m.receiver) for m in at if m.kind.value == "request"]
        assert sorted(requests) == sorted(edges)
        for k, m in enumerate(at):
            if m.kind.value == "prototypes":
                ask = at[k - 1]
                assert (ask.kind.value, ask.sender, ask.receiver, ask.nbytes) == ("request", m.receiver, m.sender, 0)
    assert sum(proto.active_edges) < 12  # the graph step did zero some edges: not every peer was asked


def test_mapl_without_backbone_aggregation_keeps_bodies_local():
    from abm.learning.models import trainable_flat
    from abm.learning.protocols.mapl import MAPL

    ctx = _mapl_context([[16, 8]] * 2)
    proto = MAPL(MAPLConfig(learn_graph=False))
    proto.setup(ctx)
    proto.run_round(ctx, 0)
    a, b = (trainable_flat(p.model.body) for p in ctx.participants)
    assert not torch.allclose(a, b)
    assert "model_weights" not in ctx.network.per_kind


def test_mapl_plus_refuses_mixed_architectures_naming_the_models_key_and_value():
    """MAPL+ averages the bodies, so it needs one architecture (setup refuses others). In a
    scenario the mixed models come from the scenario's ``models`` when the protocol gives none: the
    message names that key, its value and the protocol's own index (not a literal ``[i]``)."""
    from abm.learning.errors import LearningScenarioError
    from abm.learning.protocols.mapl import MAPL

    with pytest.raises(ValueError, match="MAPL\\+"):
        MAPL(MAPLConfig(aggregate_backbone=True)).setup(_mapl_context([[16, 8], [8]]))

    sc = {
        "name": "mapl_plus",
        "data": {"source": "gaussian_mixture", "n_samples": 200, "n_classes": 3, "n_features": 4},
        "split": {"participants": 2},
        "models": [{"kind": "mlp", "hidden": [16]}, {"kind": "mlp", "hidden": [32, 16]}],
        "rounds": 2,
        "protocols": [{"name": "mapl"}, {"name": "mapl", "label": "plus", "params": {"aggregate_backbone": True}}],
    }
    with pytest.raises(LearningScenarioError) as err:
        load_scenario(sc)
    assert str(err.value) == (
        "<dict>: models: [{kind: mlp, hidden: [16]}, {kind: mlp, hidden: [32, 16]}] is not allowed for "
        "protocols[1] (which gives no models of its own): mapl with params.aggregate_backbone: true (MAPL+, "
        "which averages the feature bodies) needs one architecture for every participant; give a single "
        "model under protocols[1].models"
    )
    own = {**sc, "protocols": [{**sc["protocols"][1], "models": sc["models"]}]}
    with pytest.raises(LearningScenarioError) as err:
        load_scenario(own)
    assert str(err.value).startswith(
        "<dict>: protocols[0].models: [{kind: mlp, hidden: [16]}, {kind: mlp, hidden: [32, 16]}] is not "
        "allowed for protocols[0]: mapl with"
    )
    load_scenario({**sc, "models": [{"kind": "mlp", "hidden": [16]}]})  # one architecture: accepted


@pytest.mark.slow
def test_mapl_plus_beats_the_same_losses_without_exchange_on_one_architecture():
    """mapl.md 3.4 / 5.4 (`gmm_mapl_homogeneous`, seed 1): with one architecture, MAPL+ (bodies
    averaged with the learned rows) beats MAPL with W = I, the same losses with nothing
    exchanged, and its graph keeps all weight on the own cluster (benchmarks/learning_results.md,
    seeds 1-8: +2.2 +- 0.5 points, positive on every seed; seed 1: 89.6 vs 84.8)."""
    from pathlib import Path

    import yaml

    path = Path(__file__).resolve().parents[2] / "scenarios" / "learning" / "gmm_mapl_homogeneous.yaml"
    raw = yaml.safe_load(path.read_text())
    raw["protocols"] = [p for p in raw["protocols"] if p.get("label") in ("mapl_plus", "mapl_local")]
    r = run_all(load_scenario({**raw, "seed": 1})[0])["protocols"]
    assert r["mapl_plus"]["summary"]["within_cluster_mass"] >= 0.8
    assert r["mapl_plus"]["mean_score"] > r["mapl_local"]["mean_score"] + 0.02
    sent = {k for p in r["mapl_plus"]["participants"] for k in p["kinds_sent"]}
    # its size (for the confidences) and its requests for prototypes are messages too (session 37)
    assert sent == {"data_size", "request", "prototypes", "classifier_head", "model_weights"}


def test_one_pgd_graph_step_by_hand_without_confidence():
    """mapl.md 2.7, Algorithm 2 as written (``pgd``), row 0 of 3, defaults mu1 0.5, mu2 0.1, beta
    0.5, eps 1e-6, lr 0.1, ``use_confidence: false`` (gamma = 1/3 each), from w = (0.5, 0.3, 0.2)
    with similarities (1, 0.2, 0.1): max-normalised over the peers to (1, 0.5) and s_00 = 1, so
    s = (1, 1, 0.5). ||w|| = sqrt(0.38) = 0.616441; the degree d = 1 - w_00 = 0.5 gives the
    -log(d + eps) term gradient -1 / 0.500001 on each peer (none on the self-loop):
      grad_0 = -0.5/3 * 1   + 0.05 * 0.5 / 0.616441                  = -0.126111
      grad_1 = -0.5/3 * 1   + 0.05 * 0.3 / 0.616441 - 0.1 / 0.500001 = -0.342333
      grad_2 = -0.5/3 * 0.5 + 0.05 * 0.2 / 0.616441 - 0.1 / 0.500001 = -0.267111
    w - 0.1 grad = (0.512611, 0.334233, 0.226711), sum 1.073556; the simplex projection takes
    0.024519 off each: (0.488093, 0.309715, 0.202193)."""
    cfg = MAPLConfig(graph_step="pgd", use_confidence=False)
    w = graph_step(np.array([0.5, 0.3, 0.2]), np.array([1.0, 0.2, 0.1]), np.array([0.7, 0.2, 0.1]), 0, cfg)
    np.testing.assert_allclose(w, [0.4880926, 0.3097148, 0.2021926], atol=1e-6)


def test_head_similarity_is_the_mean_over_classes_of_row_cosines():
    """mapl.md 2.5: s_ij = mean over the K classes of cos(Phi_i^k, Phi_j^k). Heads (2 classes, 2
    features): A = [[1, 0], [0, 1]], B = [[1, 0], [1, 0]], C = [[3, 4], [0, -2]] (rows normalised
    to (0.6, 0.8) and (0, -1)). s_AB = (1 + 0) / 2 = 0.5, s_AC = (0.6 - 1) / 2 = -0.2,
    s_BC = (0.6 + 0) / 2 = 0.3; s_ii = 1."""
    from abm.learning.protocols.mapl import head_similarity

    heads = [
        np.array([[1.0, 0.0], [0.0, 1.0]]),
        np.array([[1.0, 0.0], [1.0, 0.0]]),
        np.array([[3.0, 4.0], [0.0, -2.0]]),
    ]
    expected = np.array([[1.0, 0.5, -0.2], [0.5, 1.0, 0.3], [-0.2, 0.3, 1.0]])
    np.testing.assert_allclose(head_similarity(heads), expected, atol=1e-12)


def test_confidence_is_each_participants_share_of_the_data():
    """mapl.md 2.6: gamma_j = n_j / sum_k n_k; training sets of 12, 36 and 24 rows give
    (1/6, 1/2, 1/3)."""
    from abm.learning.data import Dataset
    from abm.learning.models import build_model
    from abm.learning.participant import Participant
    from abm.learning.partition import ParticipantData
    from abm.learning.protocols.base import RunContext
    from abm.learning.protocols.mapl import MAPL
    from abm.learning.training import TrainConfig

    parts = []
    for k, n in enumerate([12, 36, 24]):
        y = torch.arange(n) % 3
        data = Dataset(torch.randn(n, 4, generator=torch.Generator().manual_seed(k)) + y[:, None], y)
        torch.manual_seed(k)
        model = build_model("mlp", (4,), 3, hidden=[8], batchnorm=False)
        parts.append(Participant(k, ParticipantData(data, data, data), model, TrainConfig(batch_size=32), k))
    ctx = RunContext(participants=parts, n_classes=3, input_shape=(4,), rounds=1, local_epochs=1, seed=0)
    proto = MAPL(MAPLConfig())
    proto.setup(ctx)
    # row i: participant i's view, from the sizes the others sent it (tests/learning/test_data_sizes.py)
    np.testing.assert_allclose(proto.gamma, np.tile([1 / 6, 1 / 2, 1 / 3], (3, 1)), rtol=1e-12)


def test_a_peer_whose_prototypes_or_body_are_not_finite_is_left_out_of_every_row():
    """Participant 2's prototypes turned NaN (its training diverged): every row's average, MAPL+'s
    bodies too, used to take them in and turn NaN for everyone. Now participant 2 sends none; each
    row is the average of those that arrived over their weight (row 0: 0.5 and 0.5 of 0 and 1;
    row 2 takes 0 and 1 at 0.2 and 0.3 over 0.5, so participant 2 trains on from its peers'), a
    row with only itself (row 1) is as before, and privacy.withheld's record names it."""
    from abm.learning.models import trainable_flat
    from abm.learning.privacy.aggregation import WithheldSum
    from abm.learning.protocols.mapl import MAPL

    ctx = _mapl_context([[16, 8]] * 3)
    proto = MAPL(MAPLConfig(aggregate_backbone=True, learn_graph=False))
    proto.setup(ctx)
    w = np.array([[0.5, 0.5, 0.0], [0.0, 1.0, 0.0], [0.2, 0.3, 0.5]])
    proto.W = w.copy()
    protos, bodies = [], []
    original = proto._local

    def local_and_record(c, k):
        original(c, k)
        if k == 2:
            with torch.no_grad():
                proto.extra[2].prototypes.fill_(float("nan"))
        protos.append(proto.extra[k].prototypes.detach().clone())
        bodies.append(trainable_flat(c.participants[k].model.body))

    proto._local = local_and_record
    proto.run_round(ctx, 0)
    rows = {0: (0.5 * protos[0] + 0.5 * protos[1], 0.5 * bodies[0] + 0.5 * bodies[1]), 1: (protos[1], bodies[1])}
    rows[2] = ((0.2 * protos[0] + 0.3 * protos[1]) / 0.5, (0.2 * bodies[0] + 0.3 * bodies[1]) / 0.5)
    for i, (xi, body) in rows.items():
        assert torch.allclose(proto.extra[i].prototypes, xi, atol=1e-6), i
        assert torch.allclose(trainable_flat(ctx.participants[i].model.body), body, atol=1e-6), i
    assert ctx.aggregator.take_withheld() == [WithheldSum(0, "prototypes", (2,), True)]
    # edges with w_ij > 0 and i != j: 0<-1, 2<-0, 2<-1; participant 2 answers no request
    assert ctx.network.per_kind["prototypes"] == 3 * protos[0].numel() * 4
