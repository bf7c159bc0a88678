"""Secure aggregation: masks cancel, single vectors are hidden, dropouts recover or fail."""

import numpy as np
import pytest
import torch

from abm.learning.errors import SecureAggregationError
from abm.learning.messages import MessageKind, Network
from abm.learning.privacy.secure_aggregation import SecureSum, _private_key, pair_seed


def _vectors(n=5, d=2000, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {i: torch.randn(d, generator=g) * 3 for i in range(n)}


def test_masked_sum_equals_plain_sum_and_single_vectors_are_hidden():
    c = _vectors()
    agg = SecureSum(list(c), seed=3)
    total = agg.aggregate(c, 0, Network())
    plain = sum(c.values())
    # fixed point with 24 fractional bits: rounding error <= 5 * 2^-25 per element
    assert torch.allclose(total, plain, atol=1e-5, rtol=0)
    for pid, y in agg.last_masked.items():
        seen = torch.from_numpy(y.view(np.int64).astype(np.float64) / 2**24)
        # a masked vector is uniform over the int64 range: nowhere near the plain values
        assert (seen - c[pid].double()).abs().median() > 1e6


def test_pair_seeds_agree_from_both_sides_and_change_per_round():
    a, b = _private_key(0, 1), _private_key(0, 2)
    s_ab = pair_seed(a, b.public_key(), 1, 2, 7)
    assert s_ab == pair_seed(b, a.public_key(), 2, 1, 7)
    assert s_ab != pair_seed(a, b.public_key(), 1, 2, 8)


def test_dropped_participant_is_recovered():
    c = _vectors()
    agg = SecureSum(list(c), seed=1)
    net = Network()
    total = agg.aggregate(c, 0, net, dropped=frozenset({2, 4}))
    expected = c[0] + c[1] + c[3]
    assert torch.allclose(total, expected, atol=1e-5, rtol=0)
    assert net.per_kind[MessageKind.MASK_SEED.value] == 3 * 2 * 32  # 3 survivors x 2 seeds


def test_round_fails_loudly_when_recovery_is_impossible():
    c = _vectors()
    agg = SecureSum(list(c), seed=1)
    agg.recovery_failures = frozenset({0})
    with pytest.raises(SecureAggregationError, match="did not answer"):
        agg.aggregate(c, 0, Network(), dropped=frozenset({2}))
    agg = SecureSum(list(c), seed=1, threshold=3)
    with pytest.raises(SecureAggregationError, match="below the threshold"):
        agg.aggregate(c, 0, Network(), dropped=frozenset({0, 1, 2}))


def test_without_dropout_nothing_is_recovered():
    c = _vectors(n=3, d=10)
    agg = SecureSum(list(c), seed=1)
    agg.recovery_failures = frozenset({0})  # irrelevant when nobody drops
    net = Network()
    agg.aggregate(c, 0, net)
    assert net.per_kind.get(MessageKind.MASK_SEED.value, 0) == 0
    # public keys: 3 uploads + 3 x 2 relays of 32 bytes; masked vectors 3 x 10 x 8 bytes
    assert net.per_kind[MessageKind.PUBLIC_KEY.value] == 9 * 32
    assert net.per_kind[MessageKind.MASKED_VECTOR.value] == 3 * 10 * 8
