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
    rng = np.random.default_rng(0)
    parts = quantity_indices(1000, 5, 0.5, rng, min_size=20)
    assert min(len(p) for p in parts) >= 20
    assert len(set(np.concatenate(parts).tolist())) == sum(len(p) for p in parts)
    labels = np.repeat(np.arange(4), 10)
    parts = class_group_indices(labels, [[0, 1], [2, 3]], [0, 0, 1], rng)
    assert set(labels[parts[2]].tolist()) == {2, 3}
    assert set(labels[parts[0]].tolist()) <= {0, 1}


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
