"""DP budgets: the accountant at small noise, sigma from a target epsilon, dropouts, release limits."""

from __future__ import annotations

import math

import pytest
import torch

from abm.learning.errors import LearningScenarioError
from abm.learning.messages import Network
from abm.learning.privacy import DifferentiallyPrivateSum, PlainSum, PrivacyBudgetExceeded, noise_multiplier_for
from abm.learning.privacy.accountant import DPAccountant, gdp_delta, gdp_epsilon, rdp_epsilon
from abm.learning.runner import build_aggregator, prepare_data, run_protocol
from abm.learning.scenario import PrivacySpec, ProtocolSpec, load_scenario


def test_exact_accountant_does_not_overflow_at_small_noise():
    """Before the fix e^eps overflowed in delta(eps) once sigma < ~0.25 over 40 releases."""
    eps = gdp_epsilon(0.05, 40, 1e-5)
    assert math.isfinite(eps)
    mu = math.sqrt(40) / 0.05
    assert gdp_delta(eps, mu) == pytest.approx(1e-5, rel=1e-6)
    # the exact value never exceeds the RDP bound
    assert eps <= rdp_epsilon(0.05, 40, 1e-5)


@pytest.mark.parametrize("method", ["rdp", "gdp"])
@pytest.mark.parametrize(("epsilon", "steps"), [(1.0, 1), (8.0, 40), (100.0, 10)])
def test_noise_multiplier_for_inverts_the_accountant(method, epsilon, steps):
    f = rdp_epsilon if method == "rdp" else gdp_epsilon
    sigma = noise_multiplier_for(epsilon, steps, 1e-5, method)
    assert f(sigma, steps, 1e-5) <= epsilon
    assert f(sigma * (1 - 1e-6), steps, 1e-5) > epsilon  # the smallest such sigma (to 1e-6)


def test_noise_multiplier_for_known_value():
    # one Gaussian release with sigma = 1 is (4.3772, 1e-5)-DP exactly (Balle & Wang 2018)
    assert noise_multiplier_for(4.3772, 1, 1e-5, "gdp") == pytest.approx(1.0, abs=1e-4)
    with pytest.raises(ValueError, match="epsilon > 0"):
        noise_multiplier_for(0.0, 10, 1e-5)


@pytest.mark.parametrize("method", ["rdp", "gdp"])
def test_accountant_composes_releases_of_different_noise(method):
    """Gaussian releases compose by summing 1 / sigma^2: sigma 1 then sigma 2 is one release with
    sigma 1 / sqrt(1.25)."""
    acc = DPAccountant(1.0, method)
    acc.step()
    acc.step(noise_multiplier=2.0)
    f = rdp_epsilon if method == "rdp" else gdp_epsilon
    assert acc.steps == 2
    assert acc.epsilon(1e-5) == pytest.approx(f(1 / math.sqrt(1.25), 1, 1e-5), rel=1e-9)


def test_dropout_leaves_less_noise_and_the_accountant_charges_for_it():
    """Each of 4 participants adds 1/4 of the noise variance; with one dropped the sum carries
    3/4 of it (sd sigma clip sqrt(3/4)), and epsilon is that of the smaller multiplier."""
    contributions = {i: torch.zeros(40000) for i in range(4)}
    dp = DifferentiallyPrivateSum(PlainSum(), clip=1.0, noise_multiplier=2.0, seed=3)
    total = dp.aggregate(contributions, 0, Network(), dropped=frozenset({2}))
    # n = 40,000 coordinates of N(0, 3): the sample sd has relative sd 1 / sqrt(2 (n - 1)) (0.35%),
    # the sample mean sd sqrt(3) / sqrt(n); 4 sd each (3 of 4 shares is 13% below all 4).
    sd, n = 2.0 * math.sqrt(0.75), total.numel()
    assert abs(float(total.std()) / sd - 1) < 4 / math.sqrt(2 * (n - 1))
    assert abs(float(total.mean())) < 4 * sd / math.sqrt(n)
    assert dp.epsilon(1e-5) == pytest.approx(rdp_epsilon(2.0 * math.sqrt(0.75), 1, 1e-5), rel=1e-9)
    assert dp.epsilon(1e-5) > rdp_epsilon(2.0, 1, 1e-5)


def test_release_beyond_the_budget_is_refused_before_anything_is_sent():
    dp = DifferentiallyPrivateSum(PlainSum(), clip=1.0, noise_multiplier=1.0, seed=0, max_releases=2)
    net = Network()
    for r in range(2):
        dp.aggregate({0: torch.ones(3), 1: torch.ones(3)}, r, net)
    sent = net.total_bytes()
    with pytest.raises(PrivacyBudgetExceeded, match="calibrated for 2 releases"):
        dp.aggregate({0: torch.ones(3), 1: torch.ones(3)}, 2, net)
    assert net.total_bytes() == sent
    assert dp.accountant.steps == 2


def _scenario(**over):
    sc = {
        "name": "tiny_dp",
        "seed": 0,
        "data": {"source": "gaussian_mixture", "n_samples": 600, "n_classes": 3, "n_features": 6},
        "split": {"participants": 3},
        "models": [{"kind": "mlp", "hidden": [8], "batchnorm": False}],
        "rounds": 4,
        "evaluate_on": "global",
        "protocols": [{"name": "local"}],  # the tests run their protocols themselves
    }
    sc.update(over)
    return load_scenario(sc)[0]


def test_target_epsilon_sets_sigma_and_the_run_spends_exactly_it():
    s = _scenario()
    dp = {"clip": 0.5, "epsilon": 3.0, "delta": 1e-5}
    r = run_protocol(s, prepare_data(s), ProtocolSpec(name="fedavg", rounds=6, privacy={"dp": dp}))
    sigma = noise_multiplier_for(3.0, 6, 1e-5)
    assert r.epsilon == pytest.approx(rdp_epsilon(sigma, 6, 1e-5), rel=1e-12)
    assert 3.0 - 1e-6 < r.epsilon <= 3.0
    agg = build_aggregator(PrivacySpec(dp=dp), [0, 1, 2], 0, rounds=6)
    assert isinstance(agg, DifferentiallyPrivateSum)
    assert agg.noise_multiplier == sigma and agg.max_releases == 6 and agg.clip == 0.5


def test_a_target_epsilon_holds_when_participants_drop_out():
    """A round with dropouts adds only the survivors' noise (sigma sqrt(2/3) with one of three
    gone), which spends more: sigma is set for that, so the run still spends the target."""
    s = _scenario()
    privacy = {"secure_aggregation": True, "dp": {"clip": 0.5, "epsilon": 3.0, "delta": 1e-5}, "dropouts": {1: [0]}}
    r = run_protocol(s, prepare_data(s), ProtocolSpec(name="fedavg", rounds=6, privacy=privacy))
    sigma = noise_multiplier_for(3.0, 5 + 3 / 2, 1e-5)  # 5 full rounds, and one that costs 3/2 of one
    assert r.privacy["dp"]["noise_multiplier"] == sigma > noise_multiplier_for(3.0, 6, 1e-5)
    assert 3.0 - 1e-6 < r.epsilon <= 3.0


@pytest.mark.parametrize(
    ("dp", "name", "message"),
    [
        ({"clip": 1.0}, "fedavg", "exactly one of noise_multiplier and epsilon"),
        ({"clip": 1.0, "noise_multiplier": 1.0, "epsilon": 8.0}, "fedavg", "exactly one of noise_multiplier"),
        ({"clip": 1.0, "epsilon": 8.0}, "codream", "protocols[0].privacy.dp.epsilon: 8.0 is not allowed for codream"),
    ],
)
def test_bad_dp_settings_are_refused_with_the_key(dp, name, message):
    with pytest.raises(LearningScenarioError) as e:
        _scenario(protocols=[{"name": name, "privacy": {"dp": dp}}])
    assert message in str(e.value) and "<dict>" in str(e.value)
    assert "privacy" in str(e.value)


def test_an_epsilon_the_rdp_accountant_cannot_reach_is_refused_not_an_overflow():
    """RDP's conversion never gives less than about 0.0084 at delta 1e-5 however large sigma is:
    asking for less doubled sigma until the float overflowed (OverflowError)."""
    from abm.learning.privacy.accountant import min_epsilon

    floor = min_epsilon(1e-5, "rdp")
    assert 0.008 < floor < 0.009
    assert rdp_epsilon(1e12, 4, 1e-5) == pytest.approx(floor, rel=1e-6)
    assert min_epsilon(1e-5, "gdp") == 0.0
    assert min_epsilon(0.1, "rdp") == 0.0  # a large delta: every epsilon > 0 is reachable
    with pytest.raises(ValueError, match="no noise multiplier"):
        noise_multiplier_for(0.005, 4, 1e-5, "rdp")
    assert gdp_epsilon(noise_multiplier_for(0.005, 4, 1e-5, "gdp"), 4, 1e-5) <= 0.005
    sigma = noise_multiplier_for(floor * 1.01, 4, 1e-5, "rdp")
    assert rdp_epsilon(sigma, 4, 1e-5) <= floor * 1.01


def test_a_target_epsilon_below_the_accountants_reach_is_refused_when_loaded():
    dp = {"clip": 1.0, "epsilon": 0.005}
    with pytest.raises(LearningScenarioError) as e:
        _scenario(protocols=[{"name": "fedavg", "privacy": {"secure_aggregation": True, "dp": dp}}])
    message = str(e.value)
    assert "<dict>: protocols[0].privacy.dp.epsilon: 0.005 is not allowed" in message
    assert "0.008367" in message and "gdp" in message
    # the exact accountant reaches it
    exact = {**dp, "accountant": "gdp"}
    _scenario(protocols=[{"name": "fedavg", "privacy": {"secure_aggregation": True, "dp": exact}}])


def test_dropouts_outside_the_release_do_not_lower_the_charged_noise():
    """``dropped`` may name participants that have no contribution in this release (a round's
    dropouts are per round, a release may be among a subset); only the 1 of 4 members that
    dropped takes its noise share away: sigma_eff = sigma sqrt(3/4), not sigma sqrt(2/4)."""
    contributions = {i: torch.zeros(8) for i in range(4)}
    dp = DifferentiallyPrivateSum(PlainSum(), clip=1.0, noise_multiplier=2.0, seed=0)
    dp.aggregate(contributions, 0, Network(), dropped=frozenset({2, 7}))
    assert dp.epsilon(1e-5) == pytest.approx(rdp_epsilon(2.0 * math.sqrt(0.75), 1, 1e-5), rel=1e-9)
