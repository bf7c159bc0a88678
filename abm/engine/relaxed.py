"""Infection weights for the engine's differentiable mode: the value of every infection draw is
exactly the ordinary engine's hard outcome (``u < p``, so a differentiable run follows the same
path as an ordinary run with the same seed), and the weight an infected agent carries is 1.0 in
the forward pass with a gradient that depends on the estimator:

- ``"score"`` (default): p / stop_gradient(p), the per-draw likelihood ratio, gradient
  d(log p). Over one day's draws, summed over those that fired, it has expectation sum dp, the
  derivative of the expected number of infections, and through the weights' effect on later
  infectiousness it carries that derivative down chains of infection. Over several days it is
  biased upwards (about +11% over 21 days on 2,000 agents, docs/calibration.md): it drops the
  score d log(1 - p) of the draws that did not fire, so repeated exposure and the depletion of
  susceptibles are not differentiated.
- ``"straight_through"``: the relaxed Bernoulli with the identity straight-through gradient,
  hard + p - stop_gradient(p), taken on the draws that fired. An agent enters later counts
  only if its draw fired, so this misses the gradient of every draw that did not: on 2,000
  agents over 21 days it gives 1.2 where finite differences give 39.4 and the score weight 44.0
  (d infections / d beta; docs/calibration.md, tests/test_calibration_gradient.py). Kept to
  compare against.
"""

from __future__ import annotations

import torch

ESTIMATORS = ("score", "straight_through")


def infection_weight(p: torch.Tensor, u: torch.Tensor, hit: torch.Tensor, estimator: str = "score") -> torch.Tensor:
    """Weights (all exactly 1.0 in value) of the agents whose draw ``u < p`` fired (``hit``)."""
    p_hit = p[hit]
    if estimator == "score":
        return p_hit / p_hit.detach()
    if estimator == "straight_through":
        return (u[hit] < p_hit.detach()).to(p.dtype) + (p_hit - p_hit.detach())
    raise ValueError(f"gradient estimator {estimator!r} is not allowed; allowed: {', '.join(ESTIMATORS)}")
