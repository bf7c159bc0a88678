"""Secure aggregation: masks cancel, single vectors are hidden, dropouts recover or fail."""

import numpy as np
import pytest
import torch

from abm.learning.errors import SecureAggregationError
from abm.learning.messages import SERVER, AuditNetwork, MessageKind, Network
from abm.learning.privacy.aggregation import WithheldSum
from abm.learning.privacy.secure_aggregation import SecureSum, _private_key, mask_from_seed, pair_seed


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


def test_every_exchange_is_a_message_of_the_round_it_belongs_to():
    """Secure aggregation's exchanges, each an audited message of its kind, size and round: the
    public keys (32 bytes: each participant's to the server, relayed to each other participant)
    in the round of the first aggregation (7 here, not 0), then per aggregation a masked vector
    per survivor (8 bytes a value); after a dropout the server's recovery request to each survivor
    naming the dropped participants (8 bytes an id) and each survivor's 32-byte pair seed with each.
    The ledger's bytes are the messages' sum."""
    c = _vectors(n=3, d=10)
    agg = SecureSum(list(c), seed=1)
    net = AuditNetwork()
    agg.aggregate(c, 7, net)
    agg.aggregate(c, 8, net, dropped=frozenset({1}))
    got = [(m.kind.value, m.sender, m.receiver, m.round, m.nbytes) for m in net.messages]
    keys = []
    for i in range(3):
        keys += [("public_key", i, SERVER, 7, 32)] + [("public_key", SERVER, j, 7, 32) for j in range(3) if j != i]
    masked = [("masked_vector", i, SERVER, 7, 80) for i in range(3)]
    masked += [("masked_vector", i, SERVER, 8, 80) for i in (0, 2)]
    recovery = [("recovery_request", SERVER, i, 8, 8) for i in (0, 2)] + [
        ("mask_seed", i, SERVER, 8, 32) for i in (0, 2)
    ]
    assert got == keys + masked + recovery
    assert [m.payload["dropped"].tolist() for m in net.messages if m.kind == MessageKind.RECOVERY_REQUEST] == [[1], [1]]
    assert net.total_bytes() == sum(m.nbytes for m in net.messages)


def test_round_fails_loudly_when_recovery_is_impossible():
    c = _vectors()
    agg = SecureSum(list(c), seed=1)
    agg.recovery_failures = frozenset({0})
    with pytest.raises(SecureAggregationError, match="did not answer"):
        agg.aggregate(c, 0, Network(), dropped=frozenset({2}))


def test_below_the_threshold_or_the_quorum_nothing_is_released():
    """Fewer survivors than the threshold (or the caller's quorum): the survivors' masked vectors
    arrive, but the server asks for no seeds and releases nothing (None). It used to raise."""
    c = _vectors(n=5, d=10)
    for agg, kwargs in ((SecureSum(list(c), seed=1, threshold=3), {}), (SecureSum(list(c), seed=1), {"quorum": 3})):
        net = Network()
        assert agg.aggregate(c, 0, net, dropped=frozenset({0, 1, 2}), **kwargs) is None
        assert net.per_kind[MessageKind.MASKED_VECTOR.value] == 2 * 10 * 8
        assert MessageKind.RECOVERY_REQUEST.value not in net.per_kind
        assert MessageKind.MASK_SEED.value not in net.per_kind
        assert agg.take_withheld() == []  # dropouts, not withheld vectors


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


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), 2.0**37])
def test_a_vector_the_sum_cannot_carry_is_withheld_as_a_dropout(bad):
    """A non-finite value, or one so large that the sum of the members' fixed-point vectors wraps
    modulo 2^64 (2^37 is the limit for 4 members at 24 bits), came back as a finite wrong sum (NaN
    and inf as -2^39), then failed the round and with it the whole run. Now its holder checks its
    own vector before masking, sends nothing and is recovered from exactly as a dropped participant
    is: the same sum, bit for bit, the sum of the others (within the fixed point's rounding), and
    the same messages, so the server learns nothing of the vector but that it did not arrive."""
    c = _vectors(n=4, d=6)
    c[2][3] = bad
    net, dropped_net = AuditNetwork(), AuditNetwork()
    agg = SecureSum(list(c), seed=1)
    total = agg.aggregate(c, 0, net)
    assert agg.withheld() == frozenset({2})
    assert agg.take_withheld() == [WithheldSum(0, "model_update", (2,), True)]
    assert agg.take_withheld() == []  # taken once
    dropped = SecureSum(list(c), seed=1).aggregate(c, 0, dropped_net, dropped=frozenset({2}))
    assert torch.equal(total, dropped)
    assert torch.allclose(total, c[0] + c[1] + c[3], atol=3 * 2.0**-25, rtol=0)

    def wire(n):
        return [(m.kind, m.sender, m.receiver, m.round, m.nbytes) for m in n.messages]

    assert wire(net) == wire(dropped_net)
    assert [m.sender for m in net.messages if m.kind == MessageKind.MASKED_VECTOR] == [0, 1, 3]


def test_a_vector_the_sum_cannot_carry_is_never_masked():
    """The last guard: masking refuses a vector the fixed-point sum cannot carry."""
    c = _vectors(n=4, d=6)
    agg = SecureSum(list(c), seed=1)
    agg.aggregate(c, 0, Network())  # the keys
    c[2][3] = float("nan")
    with pytest.raises(SecureAggregationError, match=r"participant 2's vector has value nan at index 3"):
        agg.mask(2, c[2], 1, list(c))


def test_when_every_vector_is_withheld_nothing_is_released():
    """All participants' vectors out of range: none is sent, nothing is released (None), and the
    record says the sum was not released."""
    c = {i: torch.full((3,), float("inf")) for i in range(3)}
    agg = SecureSum(list(c), seed=1)
    net = Network()
    assert agg.aggregate(c, 4, net, MessageKind.LOGITS) is None
    assert MessageKind.MASKED_VECTOR.value not in net.per_kind
    assert agg.take_withheld() == [WithheldSum(4, "logits", (0, 1, 2), False)]


def test_values_just_inside_the_fixed_point_range_sum_exactly():
    """Four vectors at just under the per-member limit 2^37 sum to just under 2^39 without wrapping."""
    big = 2.0**37 - 1.0
    c = {i: torch.tensor([big, -big, 0.5], dtype=torch.float64) for i in range(4)}
    total = SecureSum(list(c), seed=1).aggregate(c, 0, Network())
    assert total.tolist() == [float(torch.tensor(4 * big).float()), float(torch.tensor(-4 * big).float()), 2.0]


def test_a_dropped_participants_bad_vector_is_never_encoded():
    """Only the survivors' vectors are encoded: a dropped participant's NaN does not fail the round."""
    c = _vectors(n=4, d=6)
    c[1][0] = float("nan")
    total = SecureSum(list(c), seed=1).aggregate(c, 0, Network(), dropped=frozenset({1}))
    assert torch.allclose(total, c[0] + c[2] + c[3], atol=1e-5, rtol=0)


def _byte_uniformity_pvalue(y: np.ndarray) -> float:
    """Chi-square p-value (255 degrees of freedom) that the bytes of ``y`` are uniform."""
    from scipy.stats import chisquare

    return float(chisquare(np.bincount(y.view(np.uint8), minlength=256)).pvalue)


def test_the_server_view_is_uniform_even_after_a_dropout_recovery():
    """What the server receives from a survivor is uniform over Z_2^64 however structured the
    input (here all zeros but one spike), also after it removed every mask it can compute from
    the seeds revealed for the dropped participant: the survivors' masks among themselves remain.
    12,000 bytes per vector against 256 cells: p-values below 1e-6 would mean non-uniform
    (8 tests at that level: a false alarm has probability below 1e-5)."""
    d = 1500
    c = {i: torch.zeros(d) for i in range(4)}
    c[1][7] = 1000.0
    net = Network()
    received = []
    send = net.send
    net.send = lambda m: (received.append(m), send(m))[1]
    agg = SecureSum(list(c), seed=2)
    agg.aggregate(c, 0, net, dropped=frozenset({3}))
    masked = {m.sender: m.payload["y"].numpy().view(np.uint64) for m in received if m.kind == MessageKind.MASKED_VECTOR}
    seeds = [bytes(m.payload["seed"].numpy().tobytes()) for m in received if m.kind == MessageKind.MASK_SEED]
    assert sorted(masked) == [0, 1, 2] and len(seeds) == 3
    to_server = {m.kind for m in received if m.receiver == SERVER}
    assert to_server == {MessageKind.PUBLIC_KEY, MessageKind.MASKED_VECTOR, MessageKind.MASK_SEED}
    for pid, y in masked.items():
        assert _byte_uniformity_pvalue(y) > 1e-6, pid
        # the server's best unmasking of pid: remove the masks of pid's pair with the dropped participant
        own = pair_seed(agg._keys[pid], agg._public[3], pid, 3, 0)
        assert own in seeds
        with np.errstate(over="ignore"):
            peeled = y - mask_from_seed(own, d)  # 3 > pid: pid added this mask
        assert _byte_uniformity_pvalue(peeled) > 1e-6, pid
        assert not np.array_equal(peeled, agg.encode(c[pid]))
