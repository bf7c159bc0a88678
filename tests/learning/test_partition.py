"""Partitions and messages."""

import numpy as np
import torch

from abm.learning.data import Dataset, sklearn_dataset
from abm.learning.messages import Message, MessageKind, Network
from abm.learning.partition import (
    class_group_indices,
    dirichlet_label_indices,
    permute_labels,
    quantity_indices,
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


def test_topologies():
    assert build_topology("ring", 5).sum(1).tolist() == [2] * 5
    assert build_topology("k_regular", 6, 4).sum(1).tolist() == [4] * 6
    assert build_topology("fully_connected", 4).sum() == 12
    assert build_topology("star", 4).sum() == 0
