"""How a learning scenario's data are split: the global test set, each participant's share
(IID, label or quantity skew, class groups) and its train / validation / test rows, as rows of
the pooled data, with the checks of the split (each participant's share, the skews'
``min_size``). Free of torch: ``abm validate`` checks a split on the data themselves
(:func:`check_split`), and a run takes the same rows of its tensors
(:func:`abm.learning.runner.prepare_data`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from abm.learning.errors import LearningScenarioError
from abm.learning.partition import (
    DIRICHLET_TRIES,
    class_group_indices,
    dirichlet_label_indices,
    fixed_fraction_indices,
    iid_indices,
    quantity_indices,
    train_val_test_rows,
)
from abm.learning.sources import source_labels

if TYPE_CHECKING:
    from abm.learning.scenario import LearningScenario, SplitSpec


@dataclass(frozen=True)
class ShareRows:
    """One participant's ``share`` (rows of the data shared among the participants) and the
    ``train``, ``val`` and ``test`` rows of that share."""

    share: np.ndarray
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray


@dataclass(frozen=True)
class SplitPlan:
    """Rows of the pooled data: the ``global_test`` set and the ``shared`` rest, and each
    participant's rows of the rest (``parts``)."""

    global_test: np.ndarray
    shared: np.ndarray
    parts: list[ShareRows]


def plan_split(scenario: LearningScenario, labels: np.ndarray) -> SplitPlan:
    """The split of pooled data with these ``labels`` (one per sample) across the scenario's
    participants, drawn from the scenario's seed. A split that cannot be made raises
    :class:`LearningScenarioError` naming the key."""
    rng = np.random.default_rng(scenario.seed + 1)
    perm = rng.permutation(len(labels))
    n_test = int(scenario.global_test_fraction * len(labels))
    global_test, shared = np.sort(perm[:n_test]), np.sort(perm[n_test:])
    sp = scenario.split
    n = sp.participants
    rest = labels[shared]
    if sp.label_skew:
        check_min_size(sp, "label_skew", sp.label_skew.min_size, len(rest))
        idx = dirichlet_label_indices(rest, n, sp.label_skew.alpha, rng, sp.label_skew.min_size)
        check_label_skew_min_size(sp, [len(i) for i in idx], len(rest))
    elif sp.quantity_skew and sp.quantity_skew.fractions:
        idx = fixed_fraction_indices(len(rest), sp.quantity_skew.fractions, rng)
    elif sp.quantity_skew:
        check_min_size(sp, "quantity_skew", sp.quantity_skew.min_size, len(rest))
        idx = quantity_indices(len(rest), n, sp.quantity_skew.alpha or 1.0, rng, sp.quantity_skew.min_size)
    elif sp.class_groups:
        idx = class_group_indices(rest, sp.class_groups.groups, sp.class_groups.assignment, rng)
    else:
        idx = iid_indices(len(rest), n, rng)
    parts = [
        ShareRows(idx[k], *train_val_test_rows(len(idx[k]), sp.val_fraction, sp.test_fraction, rng)) for k in range(n)
    ]
    check_part_sizes(parts, len(rest), skew_advice(sp))
    return SplitPlan(global_test, shared, parts)


def check_split(scenario: LearningScenario) -> tuple[int, ...]:
    """The checks of the split a run makes (:func:`plan_split`), without running anything: it
    splits the labels of the data (all sources are generated or bundled with scikit-learn, so
    this is quick and needs no network: :func:`abm.learning.sources.source_labels`). Raises
    :class:`LearningScenarioError` naming the key, as ``abm learn`` would. Returns the shape of
    one sample (the models' input)."""
    labels, input_shape = source_labels(scenario.data, scenario.seed)
    plan_split(scenario, labels)
    return input_shape


def check_min_size(split: SplitSpec, skew: str, min_size: int, pool: int) -> None:
    """A skew (``label_skew`` or ``quantity_skew``) that gives every participant at least
    ``min_size`` samples needs ``participants x min_size`` of the ``pool`` samples shared;
    otherwise :class:`LearningScenarioError` naming the key ``split.SKEW.min_size``."""
    need = split.participants * min_size
    if need > pool:
        raise LearningScenarioError(
            f"split.{skew}.min_size: {min_size} is not allowed: {split.participants} "
            f"participants x {min_size} samples each is {need}, more than the {pool} samples "
            "shared (the data less the global test set); give a smaller min_size, fewer participants "
            "(split.participants) or more samples (data.n_samples)"
        )


def check_label_skew_min_size(split: SplitSpec, sizes: list[int], pool: int) -> None:
    """Dirichlet label skew redraws until every participant's share (``sizes``) holds
    ``min_size`` samples; when no draw did, :class:`LearningScenarioError` naming the key (the
    partition would otherwise go on with the smaller shares without a word)."""
    skew = split.label_skew
    assert skew is not None
    k = int(np.argmin(sizes))
    if sizes[k] < skew.min_size:
        raise LearningScenarioError(
            f"split.label_skew.min_size: {skew.min_size} is not allowed here: in {DIRICHLET_TRIES} draws of "
            f"Dirichlet({skew.alpha:g}) label shares none gave each of the {split.participants} participants at "
            f"least {skew.min_size} of the {pool} samples shared (participant {k} got {sizes[k]}); give a smaller "
            "min_size, a larger alpha, fewer participants (split.participants) or more samples (data.n_samples)"
        )


def skew_advice(split: SplitSpec) -> str:
    """What to change in ``split``'s skew when a participant's share is too small; empty where
    the split has no skew that makes shares unequal (IID, class groups)."""
    if split.label_skew:
        return "a milder label skew (a larger split.label_skew.alpha or split.label_skew.min_size)"
    if split.quantity_skew and split.quantity_skew.fractions:
        return "larger small shares (split.quantity_skew.fractions)"
    if split.quantity_skew:
        return "a milder quantity skew (a larger split.quantity_skew.alpha or split.quantity_skew.min_size)"
    return ""


def check_part_sizes(parts: Sequence[ShareRows], pool: int, advice: str = "") -> None:
    """Every participant needs two training samples (a minibatch for BatchNorm) and a validation
    and a test sample; otherwise :class:`LearningScenarioError` naming the split, with
    ``advice`` (:func:`skew_advice`) among the remedies where there is a skew to change."""
    small = [k for k, p in enumerate(parts) if len(p.train) < 2 or len(p.val) < 1 or len(p.test) < 1]
    if small:
        k = small[0]
        remedies = ["more samples (data.n_samples)", "fewer participants (split.participants)"]
        remedies += [advice] if advice else []
        raise LearningScenarioError(
            f"split: participant {k} gets {len(parts[k].train)} training, {len(parts[k].val)} validation and "
            f"{len(parts[k].test)} test samples ({len(small)} of {len(parts)} participants are that small; "
            f"{pool} samples shared); each needs at least 2 training samples and 1 of each other: use "
            f"{', '.join(remedies[:-1])} or {remedies[-1]}"
        )


def known_groups(scenario: LearningScenario) -> list[int] | None:
    """Known domain / cluster labels of the participants (class groups or concept shift), for metrics."""
    sp = scenario.split
    if sp.concept_shift:
        return [1 if k in sp.concept_shift.participants else 0 for k in range(sp.participants)]
    if sp.class_groups:
        return list(sp.class_groups.assignment)
    return None
