"""Differential privacy for summed updates: L2 clipping and Gaussian noise.

Each participant clips its vector to L2 norm ``clip`` and adds N(0, (sigma * clip)^2 / n) noise,
so the sum of n contributions carries N(0, (sigma * clip)^2) noise in total; this works under
secure aggregation because no one sees an individual vector. The guarantee is participant-level
for "zero-out" neighbours (Kairouz et al. 2021): one participant's contribution set to zero while it
still adds its noise share changes the sum by at most ``clip`` against the full noise. (Were the
participant absent altogether, its noise share would be missing too and the same sigma would give a
weaker guarantee.) What the releases spend is counted by :mod:`abm.learning.privacy.accountant`.

A :class:`DifferentiallyPrivateSum` given ``max_releases`` refuses
(:class:`PrivacyBudgetExceeded`) a release beyond the budget it was calibrated for. Participants
that drop out, or hold back a vector the inner sum cannot carry (:class:`SumAggregator`), take
their noise shares with them: the release is charged at sigma sqrt(survivors / n), n / survivors
releases at sigma. Given the ``planned`` cost of each release (in releases at sigma, for a target
epsilon), a release is made only if its cost keeps the spend within what the planned releases so
far allow: otherwise the inner sum is asked for a quorum no survivors can meet, nothing is released
and nothing charged, so that epsilon never passes the target.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from abm.learning.messages import MessageKind, Network
from abm.learning.privacy.accountant import DPAccountant
from abm.learning.privacy.aggregation import SumAggregator, WithheldSum


class PrivacyBudgetExceeded(RuntimeError):
    """A release was asked of a DP aggregator whose planned number of releases is spent."""


def clip_l2(vec: torch.Tensor, clip: float) -> torch.Tensor:
    """Scale ``vec`` down to L2 norm at most ``clip``. A finite vector whose norm overflows float32
    (beyond about 1.8e19, where its square does) has its norm taken in float64, so it is clipped to
    ``clip`` like any other (it was scaled by clip / inf: to zero)."""
    n = float(vec.norm())
    if math.isinf(n):
        n = float(vec.double().norm())  # inf again only where vec holds inf (then NaN: withheld)
    return vec * min(1.0, clip / n) if n > 0 else vec


class DifferentiallyPrivateSum(SumAggregator):
    """Clip + distributed Gaussian noise around any inner sum aggregator.

    ``max_releases``: the number of sums the noise multiplier was calibrated for (``None``: no
    limit); one more raises :class:`PrivacyBudgetExceeded` before anything is sent. ``planned``:
    each of those sums' cost in releases at the noise multiplier (n / the survivors scheduled), the
    budget a release must fit (module docstring); ``None``: any release is made.
    """

    adds_noise = True

    def __init__(
        self,
        inner: SumAggregator,
        clip: float,
        noise_multiplier: float,
        seed: int,
        accountant: str = "rdp",
        max_releases: int | None = None,
        planned: list[float] | None = None,
    ) -> None:
        self.inner = inner
        self.secure = inner.secure
        self.planned = planned
        self.calls = 0  # sums asked for, released or not
        self.clip = clip
        self.noise_multiplier = noise_multiplier
        self.max_releases = max_releases
        self.accountant = DPAccountant(noise_multiplier, accountant)
        self._rng = np.random.default_rng(seed)

    def aggregate(
        self,
        contributions: dict[int, torch.Tensor],
        round_: int,
        network: Network,
        kind: MessageKind = MessageKind.MODEL_UPDATE,
        dropped: frozenset[int] = frozenset(),
        quorum: int = 1,
    ) -> torch.Tensor | None:
        if self.max_releases is not None and self.calls >= self.max_releases:
            raise PrivacyBudgetExceeded(
                f"release {self.calls + 1} asked, but the noise was calibrated for {self.max_releases} "
                "releases (the privacy budget is spent)"
            )
        n = len(contributions)
        std = self.noise_multiplier * self.clip / math.sqrt(n)
        noisy = {}
        for pid in sorted(contributions):
            v = clip_l2(contributions[pid].float(), self.clip)
            noise = torch.from_numpy(self._rng.normal(0.0, std, size=v.numel())).float()
            noisy[pid] = v + noise
        quorum = max(quorum, self._affordable(n))
        self.calls += 1
        total = self.inner.aggregate(noisy, round_, network, kind, dropped, quorum)
        if total is None:  # nothing released: nothing spent
            return None
        # only the survivors' noise shares reach the sum: sigma_eff = sigma sqrt(survivors / n)
        survivors = n - len((dropped & set(contributions)) | self.inner.withheld())
        self.accountant.step(noise_multiplier=self.noise_multiplier * math.sqrt(survivors / n))
        return total

    def _affordable(self, n: int) -> int:
        """The fewest survivors of ``n`` whose release (n / survivors releases at sigma) keeps the
        spend within the planned releases up to this one (1 without a plan; n + 1: none)."""
        if self.planned is None:
            return 1
        allowed = sum(self.planned[: self.calls + 1]) * (1 + 1e-9)
        spent = self.accountant.spent() * self.noise_multiplier**2
        return next((s for s in range(1, n + 1) if spent + n / s <= allowed), n + 1)

    def withheld(self) -> frozenset[int]:
        return self.inner.withheld()

    def take_withheld(self) -> list[WithheldSum]:
        return self.inner.take_withheld()

    def hold_back(self, round_: int, kind: MessageKind, participants: tuple[int, ...]) -> None:
        self.inner.hold_back(round_, kind, participants)

    def discard(self, round_: int, kind: MessageKind) -> None:
        self.inner.discard(round_, kind)

    def epsilon(self, delta: float) -> float:
        return self.accountant.epsilon(delta)
