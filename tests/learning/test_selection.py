"""Selection policies, the collaboration record, and the chapter-D collapse simulation."""

import typing

import numpy as np
import pytest

from abm.learning.collaboration import CollaborationRecord
from abm.learning.selection import (
    ConsensusClusterPolicy,
    PolicyName,
    build_policy,
    consensus_clusters,
    profile_correlation,
)
from abm.learning.selection_toy import simulate

POLICIES = [p for p in typing.get_args(PolicyName) if p != "oracle"]  # oracle needs known groups


def _block_sim(seed=0, noise=0.05):
    rng = np.random.default_rng(seed)
    g = np.repeat([0, 1, 2], 4)
    sim = np.where(g[:, None] == g[None, :], 0.9, 0.2) + rng.normal(0, noise, (12, 12))
    np.fill_diagonal(sim, 1.0)
    return sim, g


@pytest.mark.parametrize("name", POLICIES)
def test_every_policy_returns_k_distinct_others(name):
    sim, g = _block_sim()
    policy = build_policy(name, g.tolist())
    rng = np.random.default_rng(0)
    policy.start_round(0, sim)
    for me in range(12):
        for k in (1, 2):
            chosen = policy.select(me, 0, sim, rng, k)
            assert len(chosen) == k and len(set(chosen)) == k and me not in chosen
            assert all(0 <= j < 12 for j in chosen)


def _frequencies(policy, me: int, sim: np.ndarray, draws: int, seed: int = 0) -> np.ndarray:
    """How often ``policy`` picks each user as ``me``'s single collaborator over ``draws`` draws."""
    rng = np.random.default_rng(seed)
    picks = [policy.select(me, 0, sim, rng, 1)[0] for _ in range(draws)]
    return np.bincount(picks, minlength=sim.shape[0]) / draws


def _assert_within_4_binomial_sd(freq: np.ndarray, p: np.ndarray, draws: int) -> None:
    sd = np.sqrt(p * (1 - p) / draws)
    assert np.all(np.abs(freq - p) <= 4 * sd + 1e-12), np.c_[freq, p, sd]


@pytest.mark.parametrize("eps", [0.2, 0.5])
def test_eps_greedy_picks_the_most_similar_with_probability_1_minus_eps_plus_eps_over_n_minus_1(eps):
    """With probability eps a uniform draw among the n - 1 others (the most similar included),
    else the most similar: P(most similar) = 1 - eps + eps / (n - 1), P(any other) = eps / (n - 1);
    each frequency over 20,000 draws within 4 binomial sd, sqrt(p (1 - p) / draws)."""
    sim, _ = _block_sim()
    n, draws = sim.shape[0], 20_000
    for me in (0, 7):
        s = sim[me].copy()
        s[me] = -np.inf
        p = np.full(n, eps / (n - 1))
        p[me] = 0.0
        p[int(np.argmax(s))] += 1 - eps
        freq = _frequencies(build_policy("eps_greedy", eps=eps), me, sim, draws)
        _assert_within_4_binomial_sd(freq, p, draws)


@pytest.mark.parametrize("temperature", [0.3])
def test_sim_sampling_picks_with_softmax_of_similarity_over_temperature(temperature):
    """P(j) = exp(sim[me, j] / T) / sum over the others k != me of exp(sim[me, k] / T), never me;
    each frequency over 20,000 draws within 4 binomial sd."""
    sim, _ = _block_sim()
    n, draws = sim.shape[0], 20_000
    for me in (0, 7):
        others = np.arange(n) != me
        w = np.where(others, np.exp(sim[me] / temperature), 0.0)
        p = w / w.sum()
        freq = _frequencies(build_policy("sim_sampling", temperature=temperature), me, sim, draws)
        _assert_within_4_binomial_sd(freq, p, draws)


def test_sim_sampling_at_a_low_temperature_still_returns_k_collaborators():
    """At a temperature so low that softmax underflows to 0 for all but one user, C = 2
    collaborators are still chosen (it raised numpy's 'Fewer non-zero entries in p than size'):
    the most similar first, then the next by softmax over the rest, as drawing one at a time
    without replacement does. Where enough probabilities are non-zero the draw is unchanged."""
    from abm.learning.selection import SimilaritySamplingPolicy

    sim = np.array([[1.0, 0.9, 0.1, 0.2]] * 4)
    for _ in range(20):
        assert SimilaritySamplingPolicy(1e-4).select(0, 0, sim, np.random.default_rng(_), 2) == [1, 3]
    assert SimilaritySamplingPolicy(1e-4).select(0, 0, sim, np.random.default_rng(0), 3) == [1, 2, 3]
    others = np.array([1, 2, 3])
    p = np.exp((sim[0, others] - 0.9) / 0.3)
    expected = sorted(np.random.default_rng(5).choice(others, size=2, replace=False, p=p / p.sum()).tolist())
    assert SimilaritySamplingPolicy(0.3).select(0, 0, sim, np.random.default_rng(5), 2) == expected


def test_greedy_and_top_k_follow_similarity():
    sim, g = _block_sim()
    rng = np.random.default_rng(0)
    greedy = build_policy("greedy")
    for me in range(12):
        s = sim[me].copy()
        s[me] = -np.inf
        assert greedy.select(me, 0, sim, rng) == [int(np.argmax(s))]
    topk = build_policy("top_k", k=3)
    topk.start_round(0, sim)
    for me in range(12):
        assert g[topk.select(me, 0, sim, rng)[0]] == g[me]  # the top 3 are same-block peers


def test_consensus_clustering_recovers_blocks():
    sim, g = _block_sim(noise=0.1)
    corr = profile_correlation(sim)
    assert corr.shape == (12, 12) and np.allclose(corr, corr.T)
    for method in ("affinity_propagation", "mean_shift"):
        labels = consensus_clusters(sim, method)
        # same partition as the blocks (label names may differ)
        assert len(set(labels)) == 3
        assert all(len(set(labels[g == b])) == 1 for b in range(3))
    policy = ConsensusClusterPolicy()
    policy.start_round(0, sim)
    rng = np.random.default_rng(1)
    assert all(g[policy.select(me, 0, sim, rng)[0]] == g[me] for me in range(12))


def test_collaboration_record_indicators():
    rec = CollaborationRecord(4)
    for _ in range(10):
        rec.record({0: [1], 1: [0], 2: [3], 3: [2]})
    assert rec.window(10)[0, 1] == 10
    assert rec.distinct_partners(10).tolist() == [1, 1, 1, 1]
    assert len(set(rec.cliques(10).tolist())) == 2
    assert rec.collapse(10)
    assert rec.within_group_rate([0, 0, 1, 1]) == 1.0
    assert rec.within_group_rate([0, 1, 0, 1]) == 0.0


def test_greedy_collapses_into_cliques_while_consensus_recovers_domains():
    """Chapter D, Fig. 14 in 2-D: 39 users, 3 domains, 40 rounds (seeded)."""
    greedy = simulate("greedy", seed=0)
    assert greedy["collapse"]
    assert greedy["mean_distinct_partners_last10"] <= 3.0
    assert greedy["cliques_last10"] >= 6  # many small cliques, not 3 domains
    for method in ("consensus_affinity_propagation", "consensus_mean_shift"):
        cons = simulate(method, seed=0)
        assert cons["cluster_recovery"] == {
            "purity": 1.0,
            "inverse_purity": 1.0,
            "ari": pytest.approx(1.0),
            "clusters": 3,
        }
        assert not cons["collapse"]
        assert cons["within_domain_rate_last10"] >= 0.9
    rand = simulate("random", seed=0)
    assert rand["within_domain_rate_last10"] < 0.5  # 12 of 38 others share the domain


def test_cluster_recovery_scores_purity_splits_and_chance():
    """Six users in domains 0, 0, 0, 1, 1, 1."""
    from abm.learning.metrics import cluster_recovery

    domains = [0, 0, 0, 1, 1, 1]
    exact = cluster_recovery([5, 5, 5, 2, 2, 2], domains)  # labels are names, not numbers
    assert exact == {"purity": 1.0, "inverse_purity": 1.0, "ari": 1.0, "clusters": 2}
    split = cluster_recovery([0, 0, 1, 2, 2, 3], domains)  # each domain split in two: still pure
    assert split["purity"] == 1.0 and split["inverse_purity"] == pytest.approx(4 / 6) and split["clusters"] == 4
    mixed = cluster_recovery([0, 0, 1, 1, 0, 1], domains)  # every cluster 2 of one domain, 1 of the other
    assert mixed["purity"] == pytest.approx(4 / 6) and mixed["ari"] < 0.1


def test_p2p_consensus_selection_recovers_the_domains_and_beats_random():
    """gmm_selection cut to 6 rounds: 8 users, users 4-7 with swapped labels (a second domain).
    Consensus clustering by affinity propagation finds exactly the two domains (purity, inverse
    purity and ARI 1), every pick stays in the user's domain, and averaging within them beats
    random selection, whose picks cross domains and mix the label conventions."""
    from pathlib import Path

    import yaml

    from abm.learning.runner import run_all
    from abm.learning.scenario import load_scenario

    root = Path(__file__).resolve().parents[2]
    sc = yaml.safe_load((root / "scenarios/learning/gmm_selection.yaml").read_text())
    sc.pop("selection_toy")
    sc["rounds"] = 6
    sc["protocols"] = [p for p in sc["protocols"] if p["label"] in ("p2p_random", "p2p_consensus_ap")]
    report = run_all(load_scenario(sc)[0])
    assert report["groups"] == [0, 0, 0, 0, 1, 1, 1, 1]
    consensus, random = report["protocols"]["p2p_consensus_ap"], report["protocols"]["p2p_random"]
    recovery = consensus["summary"]["cluster_recovery"]
    assert recovery == {"purity": 1.0, "inverse_purity": 1.0, "ari": 1.0, "clusters": 2}
    assert consensus["summary"]["within_group_rate"] == 1.0 and random["summary"]["within_group_rate"] < 0.6
    assert "cluster_recovery" not in random["summary"]  # random selection forms no clusters
    assert consensus["mean_score"] > random["mean_score"] + 0.1


def test_greedy_breaks_ties_at_random_not_by_number():
    """Similarities come from accuracy on a small validation set, so ties are common: the three
    users tied at the top are each picked a third of the time (3,000 rounds: 3 binomial sds are
    0.026), not always the lowest-numbered one."""
    from abm.learning.selection import GreedyPolicy

    sim = np.array([[1.0, 0.5, 0.9, 0.9, 0.9, 0.1]] * 6)
    rng = np.random.default_rng(3)
    picks = [GreedyPolicy().select(0, r, sim, rng)[0] for r in range(3000)]
    shares = np.bincount(picks, minlength=6) / 3000
    assert shares[[0, 1, 5]].sum() == 0
    assert np.abs(shares[2:5] - 1 / 3).max() < 3 * np.sqrt(1 / 3 * 2 / 3 / 3000)


@pytest.mark.parametrize("name", [p for p in POLICIES if not p.startswith("consensus")] + ["oracle"])
def test_policies_restricted_to_a_ring_choose_only_ring_neighbours(name):
    """On a ring of 12 users a policy may pick only i - 1 and i + 1, whatever the similarities say
    (the block similarities make users two or more steps away within the block more attractive)."""
    from abm.learning.topology import build_topology

    sim, g = _block_sim()
    policy = build_policy(name, g.tolist())
    policy.restrict(build_topology("ring", 12))
    rng = np.random.default_rng(0)
    policy.start_round(0, sim)
    for me in range(12):
        for k in (1, 2, 5):
            chosen = policy.select(me, 0, sim, rng, k)
            assert set(chosen) <= {(me - 1) % 12, (me + 1) % 12}, (me, chosen)
            same = [j for j in ((me - 1) % 12, (me + 1) % 12) if g[j] == g[me]]
            if name == "oracle" and same:  # only neighbours in me's own block qualify
                assert set(chosen) <= set(same) and len(chosen) == min(k, len(same))
            else:
                assert len(chosen) == min(k, 2)


def test_random_on_a_k_regular_topology_is_uniform_over_the_neighbours():
    """k-regular, degree 4, 10 users: user 0's neighbours are 1, 2, 8, 9, each picked with
    probability 1/4 (4,000 draws; 4 binomial sds are 0.027)."""
    from abm.learning.selection import RandomPolicy
    from abm.learning.topology import build_topology

    policy = RandomPolicy()
    policy.restrict(build_topology("k_regular", 10, 4))
    freq = _frequencies(policy, 0, np.eye(10), 4000)
    p = np.zeros(10)
    p[[1, 2, 8, 9]] = 0.25
    _assert_within_4_binomial_sd(freq, p, 4000)


def _p2p_scenario(participants: int = 6, **params):
    from abm.learning.scenario import load_scenario

    sc = {
        "name": "p2p_ring",
        "seed": 0,
        "data": {"source": "gaussian_mixture", "n_samples": 600, "n_classes": 3, "n_features": 4},
        "split": {"participants": participants},
        "models": [{"kind": "mlp", "hidden": [8], "batchnorm": False}],
        "rounds": 3,
        "protocols": [{"name": "p2p_selection", "label": "p2p", "params": params}],
    }
    return load_scenario(sc)[0]


def test_p2p_selection_on_a_ring_exchanges_only_with_ring_neighbours():
    """6 users on a ring: every choice in every round is a ring neighbour, and each user sends its
    challenge to 2 neighbours instead of 5 others, so challenge bytes are exactly 2/5 of the fully
    connected run's (same data, same challenge size)."""
    from abm.learning.runner import run_all

    ring = run_all(_p2p_scenario(policy="greedy", topology="ring"))["protocols"]["p2p"]
    full = run_all(_p2p_scenario(policy="greedy"))["protocols"]["p2p"]
    assert ring["summary"]["topology"] == "ring" and ring["summary"]["neighbours"] == 2
    assert full["summary"]["neighbours"] == 5
    for m in ring["summary"]["collaboration"]:
        for i, row in enumerate(m):
            assert [j for j, v in enumerate(row) if v] in ([(i - 1) % 6], [(i + 1) % 6]), (i, row)
    assert ring["bytes_by_kind"]["challenge"] * 5 == full["bytes_by_kind"]["challenge"] * 2
    assert ring["bytes_by_kind"]["predictions"] * 5 == full["bytes_by_kind"]["predictions"] * 2


def test_a_chosen_peer_learns_it_was_chosen_from_a_request():
    """A user fetches the models of the peers it chose: it asks each (a 0-byte request), which
    answers with its model, so a peer sends its model only to those whose request it got. 4 users,
    2 collaborators each, 3 rounds: the requests are exactly the recorded choices."""
    from conftest import linear_participants

    from abm.learning.messages import AuditNetwork
    from abm.learning.protocols.base import RunContext
    from abm.learning.protocols.configs import P2PSelectionConfig
    from abm.learning.protocols.p2p_selection import P2PSelection

    ps = linear_participants([8, 8, 8, 8], holdout=4)
    ctx = RunContext(participants=ps, n_classes=2, input_shape=(3,), rounds=3, local_epochs=1, seed=0)
    ctx.network = AuditNetwork()
    protocol = P2PSelection(P2PSelectionConfig(policy="random", collaborators=2))
    protocol.setup(ctx)
    for t in range(3):
        protocol.run_round(ctx, t)
    model = 4 * (3 * 2 + 2)  # the linear model's 8 parameters
    for t, chosen in enumerate(protocol.record.matrices):
        at = [m for m in ctx.network.messages if m.round == t and m.kind.value in ("request", "model_weights")]
        expected = []
        for i, j in zip(*np.nonzero(chosen), strict=True):
            expected += [("request", int(i), int(j), 0), ("model_weights", int(j), int(i), model)]
        assert [(m.kind.value, m.sender, m.receiver, m.nbytes) for m in at] == expected
        assert len(expected) == 2 * 4 * 2


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"policy": "consensus_affinity_propagation", "topology": "ring"},
            "needs topology fully_connected, not ring",
        ),
        ({"topology": "k_regular", "degree": 3}, "degree must be even"),
        ({"topology": "k_regular", "degree": 6}, "protocols[0].params.degree: 6 is not allowed with 6 participants"),
        ({"topology": "star"}, "topology"),
        (
            {"topology": "k_regular", "participants": 4},
            "protocols[0].params.degree: 4 (the default, as none is given) is not allowed with 4 participants",
        ),
        # more collaborators than a participant has neighbours: they were silently fewer
        (
            {"topology": "ring", "collaborators": 3},
            "protocols[0].params.collaborators: 3 is not allowed with topology ring: each of the 6 participants "
            "has 2 neighbours to choose from; give at most 2",
        ),
        (
            {"collaborators": 6},
            "protocols[0].params.collaborators: 6 is not allowed with topology fully_connected: each of the 6 "
            "participants has 5 neighbours to choose from; give at most 5",
        ),
        (
            {"topology": "ring", "collaborators": 2, "participants": 2},
            "protocols[0].params.collaborators: 2 is not allowed with topology ring: each of the 2 participants "
            "has 1 neighbour to choose from; give at most 1",
        ),
        (
            {"topology": "k_regular", "degree": 2, "collaborators": 4},
            "protocols[0].params.collaborators: 4 is not allowed with topology k_regular: each of the 6 "
            "participants has 2 neighbours to choose from; give at most 2",
        ),
        # top_k draws among the k most similar neighbours: k as many as there are is random selection
        (
            {"policy": "top_k", "topology": "ring"},
            "protocols[0].params.k: 3 (the default, as none is given) is not allowed with topology ring: each of "
            "the 6 participants has 2 neighbours to choose from; give at most 2",
        ),
        (
            {"policy": "top_k", "k": 2, "collaborators": 3},
            "protocols[0].params.collaborators: 3 is not allowed with policy top_k and k 2: the collaborators are "
            "drawn among the k most similar neighbours; give at most 2, or a larger k",
        ),
    ],
)
def test_p2p_topologies_that_cannot_work_are_refused(params, message):
    from abm.learning.errors import LearningScenarioError

    with pytest.raises(LearningScenarioError) as e:
        _p2p_scenario(**params)
    assert message in str(e.value)


def test_an_odd_degree_is_ignored_where_the_topology_has_no_degree():
    """degree is read by k_regular only: with a ring it may be anything."""
    _p2p_scenario(topology="ring", degree=3)


def test_as_many_collaborators_as_neighbours_are_allowed():
    """The largest allowed collaborators is the neighbour count; k is read by top_k only."""
    assert _p2p_scenario(topology="ring", collaborators=2, k=9).protocols[0].params["collaborators"] == 2
    assert _p2p_scenario(policy="top_k", k=5, collaborators=5).protocols[0].params["k"] == 5
