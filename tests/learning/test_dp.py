"""Differential privacy: clipping, noise, and the epsilon accountant."""

import itertools
import math

import pytest
import torch
from scipy import integrate
from scipy.optimize import minimize_scalar
from scipy.stats import norm

from abm.learning.messages import Network
from abm.learning.privacy import DifferentiallyPrivateSum, PlainSum, clip_l2
from abm.learning.privacy.accountant import DPAccountant, gdp_delta, gdp_epsilon, rdp_epsilon


def test_clip_bounds_norm_and_keeps_small_vectors():
    v = torch.tensor([3.0, 4.0])
    assert float(clip_l2(v, 1.0).norm()) == pytest.approx(1.0)
    assert torch.equal(clip_l2(v, 10.0), v)


def test_epsilon_decreases_with_more_noise_and_grows_with_steps():
    eps = [rdp_epsilon(s, 10, 1e-5) for s in (0.5, 1.0, 2.0, 4.0)]
    assert all(a > b for a, b in itertools.pairwise(eps))
    assert rdp_epsilon(1.0, 20, 1e-5) > rdp_epsilon(1.0, 10, 1e-5)
    assert gdp_epsilon(1.0, 10, 1e-5) > gdp_epsilon(2.0, 10, 1e-5)


def test_gdp_matches_privacy_loss_integral():
    """delta(eps) of the Gaussian mechanism, by integrating its privacy-loss distribution.

    For sensitivity 1 and noise sigma, the privacy loss L ~ N(mu^2/2, mu^2) with mu = 1/sigma and
    delta(eps) = E[(1 - e^(eps - L))_+].
    """
    mu, eps = 1.0, 2.0

    def f(loss: float) -> float:
        return (1 - math.exp(eps - loss)) * norm.pdf(loss, mu**2 / 2, mu)

    numeric, _ = integrate.quad(f, eps, 50)
    assert gdp_delta(eps, mu) == pytest.approx(numeric, rel=1e-6)


def balle_2020_epsilon(rho: float, delta: float, alpha: float) -> float:
    """Balle et al. 2020 (Thm 21): an (alpha, alpha rho)-RDP mechanism is (eps, delta)-DP with
    eps = alpha rho + log(1 - 1/alpha) - (log delta + log alpha) / (alpha - 1)."""
    return alpha * rho + math.log1p(-1 / alpha) - (math.log(delta) + math.log(alpha)) / (alpha - 1)


@pytest.mark.parametrize("sigma, steps", [(1.0, 1), (0.8, 5), (1.5, 50), (4.0, 100), (10.0, 1)])
def test_rdp_epsilon_is_the_balle_2020_bound_minimised_over_orders(sigma, steps):
    """T Gaussian releases with noise multiplier sigma are (alpha, alpha rho)-RDP for every
    alpha > 1, rho = T / (2 sigma^2). The best bound is the minimum over all alpha (here by
    scipy on log(alpha - 1)); the code minimises over a grid of orders (step 0.1 below 11, 1 up to
    63), so it can exceed that minimum by at most the bound's rise half a grid step from the
    optimum, and can never go below it."""
    delta = 1e-5
    rho = steps / (2 * sigma**2)
    res = minimize_scalar(
        lambda x: balle_2020_epsilon(rho, delta, 1 + math.exp(x)),
        bounds=(-12, 9),
        method="bounded",
        options={"xatol": 1e-10},
    )
    alpha = 1 + math.exp(res.x)
    best = balle_2020_epsilon(rho, delta, alpha)
    half = (0.1 if alpha < 11 else 1.0) / 2
    assert alpha - half > 1.1 and alpha + half < 63  # inside the grid's fine parts
    slack = max(balle_2020_epsilon(rho, delta, alpha - half), balle_2020_epsilon(rho, delta, alpha + half)) - best
    got = rdp_epsilon(sigma, steps, delta)
    assert best - 1e-9 <= got <= best + slack, (got, best, slack, alpha)


def test_known_accountant_values():
    # Gaussian mechanism, sigma = 1, one release, delta = 1e-5: exact epsilon 4.377 (analytic
    # Gaussian mechanism, Balle & Wang 2018); RDP with the Balle et al. 2020 conversion is looser
    # (4.7284 at its best order, 5.43; the test above derives it).
    exact = gdp_epsilon(1.0, 1, 1e-5)
    assert exact == pytest.approx(4.3772, abs=1e-3)
    assert rdp_epsilon(1.0, 1, 1e-5) > exact
    # RDP is an upper bound on the exact value for any composition
    for sigma, steps in [(0.8, 5), (1.5, 50), (3.0, 200)]:
        assert rdp_epsilon(sigma, steps, 1e-5) >= gdp_epsilon(sigma, steps, 1e-5) - 1e-9
    # zCDP closed form: rho = T/(2 sigma^2) gives eps <= rho + 2 sqrt(rho log(1/delta))
    rho = 100 / (2 * 4.0**2)
    assert rdp_epsilon(4.0, 100, 1e-5) <= rho + 2 * math.sqrt(rho * math.log(1e5)) + 1e-9


def test_dp_sum_is_noisy_with_the_right_scale_and_reports_epsilon():
    contributions = {i: torch.full((20000,), 0.001) for i in range(4)}
    dp = DifferentiallyPrivateSum(PlainSum(), clip=1.0, noise_multiplier=2.0, seed=0)
    total = dp.aggregate(contributions, 0, Network())
    noise = total - 0.004
    # total noise N(0, (sigma * clip)^2) = N(0, 4) in each of n = 20,000 coordinates: the sample
    # sd has relative sd 1 / sqrt(2 (n - 1)) (0.5%), the sample mean sd sigma / sqrt(n); 4 sd each.
    n = noise.numel()
    assert abs(float(noise.std()) / 2.0 - 1) < 4 / math.sqrt(2 * (n - 1))
    assert abs(float(noise.mean())) < 4 * 2.0 / math.sqrt(n)
    assert dp.epsilon(1e-5) == pytest.approx(rdp_epsilon(2.0, 1, 1e-5))
    acc = DPAccountant(2.0, "gdp")
    acc.step()
    assert acc.epsilon(1e-5) == pytest.approx(gdp_epsilon(2.0, 1, 1e-5))


def test_the_dp_sum_clips_each_contribution_before_adding():
    """Each participant's vector is clipped to L2 norm ``clip`` before the sum (the sensitivity
    the noise is calibrated to): with clip 1, a vector of norm 10 counts one tenth, one of norm
    0.5 counts whole. The noise (sigma 1e-9) is far below the 1e-6 tolerance."""
    big, small = torch.tensor([6.0, 8.0, 0.0]), torch.tensor([0.0, 0.3, 0.4])
    dp = DifferentiallyPrivateSum(PlainSum(), clip=1.0, noise_multiplier=1e-9, seed=0)
    total = dp.aggregate({0: big, 1: small}, 0, Network())
    assert torch.allclose(total, big / 10 + small, atol=1e-6)


def test_accountant_zero_steps_is_zero():
    assert DPAccountant(1.0).epsilon(1e-5) == 0.0
    assert gdp_epsilon(1.0, 0, 1e-5) == 0.0


def test_gdp_epsilon_inverts_the_gdp_privacy_curve():
    """3 releases at noise 0.5 are mu-GDP with mu = sqrt(3) / 0.5; the epsilon returned for delta
    1e-6 is the one where the exact delta(epsilon) curve of that mu crosses 1e-6."""
    eps = gdp_epsilon(0.5, 3, 1e-6)
    mu = math.sqrt(3) / 0.5
    assert gdp_delta(eps, mu) == pytest.approx(1e-6, rel=1e-6)
    assert gdp_delta(0.99 * eps, mu) > 1e-6 > gdp_delta(1.01 * eps, mu)


def test_the_report_counts_the_noisy_releases_that_epsilon_is_spent_on():
    """FedAvg releases one noisy sum a round; CoDream one per dream step and one for the soft
    labels. The report's epsilon is the accountant's for exactly the releases it lists."""
    from abm.learning.runner import run_all
    from abm.learning.scenario import load_scenario

    dp = {"secure_aggregation": True, "dp": {"clip": 1.0, "noise_multiplier": 1.0, "delta": 1e-5}}
    scenario = {
        "name": "dp_releases",
        "seed": 0,
        "data": {"source": "iris"},
        "split": {"participants": 2},
        "models": [{"kind": "mlp", "hidden": [8], "batchnorm": True}],
        "rounds": 3,
        "protocols": [
            {"name": "fedavg", "privacy": dp},
            {"name": "codream", "params": {"dream_steps": 2, "n_dreams": 16, "dream_start": 0}, "privacy": dp},
        ],
    }
    report = run_all(load_scenario(scenario)[0])["protocols"]
    for name, releases in (("fedavg", 3), ("codream", 3 * (2 + 1))):
        settings = report[name]["privacy"]["dp"]
        assert settings["rounds"] == 3 and settings["releases"] == releases, name
        assert report[name]["epsilon"] == pytest.approx(rdp_epsilon(1.0, releases, 1e-5)), name
    assert report["codream"]["summary"]["soft_labels"]["teacher_columns_null"] == (
        "the server takes only the sum of the teachers' logits (secure aggregation, DP: each clipped and noised)"
    )


def test_noise_scale_is_sigma_times_the_clip_norm_not_sigma_alone():
    """Clip 0.5 with sigma 2: the sum carries N(0, (sigma clip)^2) = N(0, 1) noise in total (each
    of the 4 participants adds sd sigma clip / sqrt(4) = 0.5), not sd sigma = 2 (the sensitivity is
    the clip norm). Zero inputs, so the sum is pure noise; n = 20,000 coordinates: the sample sd has
    relative sd 1 / sqrt(2 (n - 1)) (0.5%), 4 sd of it is 2.8%, far from the factor 2 a missing clip
    would give."""
    contributions = {i: torch.zeros(20000) for i in range(4)}
    dp = DifferentiallyPrivateSum(PlainSum(), clip=0.5, noise_multiplier=2.0, seed=1)
    noise = dp.aggregate(contributions, 0, Network())
    n = noise.numel()
    assert abs(float(noise.std()) / 1.0 - 1) < 4 / math.sqrt(2 * (n - 1))
    assert abs(float(noise.mean())) < 4 * 1.0 / math.sqrt(n)


@pytest.mark.parametrize("method", ["rdp", "gdp"])
def test_accountant_step_n_records_n_releases(method):
    """step(3) is three releases: the same epsilon as three step() calls, and as one release at
    sigma / sqrt(3) (summed 1 / sigma^2 = 3 / 4 at sigma 2)."""
    once, thrice = DPAccountant(2.0, method), DPAccountant(2.0, method)
    once.step(3)
    for _ in range(3):
        thrice.step()
    f = rdp_epsilon if method == "rdp" else gdp_epsilon
    assert once.steps == 3
    assert once.epsilon(1e-5) == pytest.approx(thrice.epsilon(1e-5), rel=1e-12)
    assert once.epsilon(1e-5) == pytest.approx(f(2.0 / math.sqrt(3), 1, 1e-5), rel=1e-9)
