"""Partitions and messages."""

import numpy as np
import pytest
import torch

from abm.learning.data import Dataset, sklearn_dataset
from abm.learning.messages import Message, MessageKind, Network
from abm.learning.partition import (
    class_group_indices,
    dirichlet_label_indices,
    permute_labels,
    quantity_indices,
    train_val_test_rows,
)
from abm.learning.topology import build_topology


def test_dirichlet_label_skew_partitions_every_row_once_and_skews_labels():
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(5), 200)
    parts = dirichlet_label_indices(labels, 4, 0.1, rng)
    allidx = np.concatenate(parts)
    assert sorted(allidx.tolist()) == list(range(1000))
    # alpha = 0.1: each participant is dominated by few classes
    top_share = [np.bincount(labels[p], minlength=5).max() / len(p) for p in parts]
    assert np.mean(top_share) > 0.5
    iid_like = dirichlet_label_indices(labels, 4, 1000.0, rng)
    assert max(np.bincount(labels[p], minlength=5).max() / len(p) for p in iid_like) < 0.3


def test_dirichlet_label_skew_redraws_until_every_part_holds_min_size():
    """alpha = 0.05 over 5 parts leaves some part nearly empty in most draws: the shares are drawn
    again until every part holds at least min_size (40) rows, so the parts returned all do."""
    labels = np.repeat(np.arange(5), 100)
    rng = np.random.default_rng(1)
    parts = dirichlet_label_indices(labels, 5, 0.05, rng, min_size=40)
    assert min(len(p) for p in parts) >= 40
    assert sorted(np.concatenate(parts).tolist()) == list(range(500))


def test_train_validation_and_test_rows_are_disjoint_and_cover_every_row():
    """100 rows, 20% validation and 10% test: 70 / 20 / 10 rows, no row in two sets, every row in one."""
    train, val, test = train_val_test_rows(100, 0.2, 0.1, np.random.default_rng(0))
    assert (len(train), len(val), len(test)) == (70, 20, 10)
    assert sorted(np.concatenate([train, val, test]).tolist()) == list(range(100))


def test_quantity_skew_and_class_groups():
    parts = quantity_indices(1000, 5, 0.5, np.random.default_rng(0), min_size=20)
    # The sizes are min_size plus the Dirichlet(0.5) shares of the other 900 rows (floored).
    share = np.random.default_rng(0).dirichlet(np.full(5, 0.5))
    assert [len(p) for p in parts] == (20 + np.floor(share * 900)).astype(int).tolist()
    rows = np.concatenate(parts)
    assert len(set(rows.tolist())) == len(rows) and rows.min() >= 0 and rows.max() < 1000  # disjoint rows
    assert 1000 - 5 < len(rows) <= 1000  # at most one row per part lost to the floor
    labels = np.repeat(np.arange(4), 10)
    parts = class_group_indices(labels, [[0, 1], [2, 3]], [0, 0, 1], np.random.default_rng(0))
    # Participants 0 and 1 split the rows of classes 0 and 1 equally; participant 2 has all of 2 and 3.
    assert sorted(np.concatenate([parts[0], parts[1]]).tolist()) == list(range(20))
    assert len(parts[0]) == len(parts[1]) == 10 and parts[2].tolist() == list(range(20, 40))


def test_concept_shift_swaps_labels_only():
    d = Dataset(torch.zeros(4, 2), torch.tensor([0, 1, 2, 3]))
    s = permute_labels(d, [(0, 1)])
    assert s.y.tolist() == [1, 0, 2, 3]
    assert torch.equal(s.x, d.x)


def test_sklearn_digits_is_bundled_and_image_shaped():
    src = sklearn_dataset("digits")
    assert src.input_shape == (1, 8, 8) and src.n_classes == 10 and len(src.data) == 1797


def test_message_bytes_and_ledger():
    net = Network()
    m = Message(MessageKind.LOGITS, 0, 1, {"z": torch.zeros(10, 3), "i": torch.zeros(4, dtype=torch.int64)})
    assert m.nbytes == 10 * 3 * 4 + 4 * 8
    net.send(m)
    assert net.sent[0] == net.received[1] == 152 and net.total_bytes() == 152


def _circulant(n: int, offsets: set[int]) -> np.ndarray:
    """a[i, j] exactly when j - i (mod n) is one of ``offsets``."""
    d = (np.arange(n)[None, :] - np.arange(n)[:, None]) % n
    return np.isin(d, list(offsets))


def test_topologies():
    ring5 = np.array(
        [
            [0, 1, 0, 0, 1],
            [1, 0, 1, 0, 0],
            [0, 1, 0, 1, 0],
            [0, 0, 1, 0, 1],
            [1, 0, 0, 1, 0],
        ],
        dtype=bool,
    )
    np.testing.assert_array_equal(build_topology("ring", 5), ring5)
    for n in (2, 3, 7):  # neighbours i +- 1; for n = 2 both are the one other participant
        np.testing.assert_array_equal(build_topology("ring", n), _circulant(n, {1, n - 1}))
    np.testing.assert_array_equal(build_topology("ring", 1), np.zeros((1, 1), dtype=bool))
    for n, k in ((6, 4), (7, 2), (9, 6), (10, 8)):  # offsets 1..k/2 either way
        half = k // 2
        want = _circulant(n, {*range(1, half + 1), *range(n - half, n)})
        got = build_topology("k_regular", n, k)
        np.testing.assert_array_equal(got, want)
        assert not got.diagonal().any() and (got == got.T).all() and (got.sum(1) == k).all()
    for n, k in ((6, 3), (6, 6)):
        with pytest.raises(ValueError, match="k must be even and below n"):
            build_topology("k_regular", n, k)
    np.testing.assert_array_equal(build_topology("fully_connected", 4), ~np.eye(4, dtype=bool))
    np.testing.assert_array_equal(build_topology("star", 4), np.zeros((4, 4), dtype=bool))
