"""The in-process runner: builds participants from a scenario and runs protocols round by round.

Deterministic: the same scenario and seed give the same results (participant k's model init and
data order depend only on the scenario seed and k, so every protocol starts from the same state).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from abm.learning import progress
from abm.learning.data import Dataset, DataSource, tensors
from abm.learning.messages import Network
from abm.learning.metrics import cgs, collaborative_fairness, gains, mcg
from abm.learning.models import build_model
from abm.learning.participant import Participant
from abm.learning.partition import ParticipantData, permute_labels
from abm.learning.privacy.accountant import noise_multiplier_for
from abm.learning.privacy.aggregation import PlainSum, SumAggregator
from abm.learning.privacy.dp import DifferentiallyPrivateSum
from abm.learning.protocols import RunContext, protocol_class
from abm.learning.scenario import LearningScenario, ModelSpec, PrivacySpec, ProtocolSpec
from abm.learning.sources import source_arrays
from abm.learning.split import known_groups, plan_split
from abm.learning.training import TrainConfig
from abm.learning.withheld import WithheldRecord
from abm.plurals import counted, plural
from abm.threads import torch_threads


@dataclass
class PreparedData:
    """The scenario's data, split across participants."""

    source: DataSource
    parts: list[ParticipantData]
    global_test: Dataset
    groups: list[int] | None


@dataclass
class ProtocolResult:
    """Scores and accounting of one protocol run."""

    key: str
    name: str
    scores: list[float]
    history: list[float]
    bytes_sent: list[int]
    bytes_received: list[int]
    bytes_total: int
    bytes_by_kind: dict[str, int]
    wall_time_s: float
    epsilon: float | None = None
    delta: float | None = None
    privacy: dict[str, Any] | None = None  # the privacy wrappers as run (privacy_settings)
    summary: dict[str, Any] = field(default_factory=dict)
    kinds_sent: dict[int, list[str]] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)  # the protocol's params as run, defaults filled in
    nonfinite_losses: list[dict[str, int]] = field(default_factory=list)  # diverged training (NonFinite.record)


def load_source(scenario: LearningScenario) -> DataSource:
    """The scenario's pooled data set."""
    return tensors(source_arrays(scenario.data, scenario.seed))


def prepare_data(scenario: LearningScenario) -> PreparedData:
    """Global test split, partition across participants, per-participant train/val/test
    (:func:`abm.learning.split.plan_split`'s rows of the pooled data; a participant under concept
    shift labels its share as it does, :func:`concept_of`).

    A split that cannot be made raises :class:`LearningScenarioError` naming the key
    (:func:`abm.learning.split.check_split` makes the same checks without running anything)."""
    source = load_source(scenario)
    pool = source.data
    plan = plan_split(scenario, pool.y.numpy())
    global_test, rest = pool.subset(plan.global_test), pool.subset(plan.shared)
    parts = []
    for k, rows in enumerate(plan.parts):
        share = concept_of(scenario, k, rest.subset(rows.share))
        parts.append(ParticipantData(share.subset(rows.train), share.subset(rows.val), share.subset(rows.test)))
    return PreparedData(source, parts, global_test, known_groups(scenario))


def model_for(spec: ModelSpec, input_shape: tuple[int, ...], n_classes: int) -> torch.nn.Module:
    """A fresh model of ``spec``'s architecture (initialised from the global torch stream)."""
    return build_model(spec.kind, input_shape, n_classes, spec.hidden, spec.channels, spec.embed_dim, spec.batchnorm)


def build_participant(scenario: LearningScenario, data: PreparedData, models: list[ModelSpec], k: int) -> Participant:
    """Fresh participant ``k``; its init depends only on (seed, k)."""
    t = scenario.training
    cfg = TrainConfig(t.optimizer, t.lr, t.momentum, t.weight_decay, t.batch_size)
    part = data.parts[k]
    seed = scenario.seed * 1000 + k
    torch.manual_seed(seed)
    model = model_for(models[k % len(models)], data.source.input_shape, data.source.n_classes)
    return Participant(k, part, model, cfg, seed, scored_on(scenario, data, k))


def concept_of(scenario: LearningScenario, k: int, samples: Dataset) -> Dataset:
    """``samples`` labelled as participant ``k`` labels them: with its ``split.concept_shift``
    swaps where the shift lists it, else as they are."""
    shift = scenario.split.concept_shift
    if shift is None or k not in shift.participants:
        return samples
    return permute_labels(samples, [tuple(s) for s in shift.swaps])


def scored_on(scenario: LearningScenario, data: PreparedData, k: int) -> Dataset:
    """The samples participant ``k``'s scores are measured on: its own test split, or the global
    test set (``evaluate_on``), labelled as ``k`` labels its own data (:func:`concept_of`), so
    that a participant under concept shift is scored on its own task."""
    if scenario.evaluate_on != "global":
        return data.parts[k].test
    return concept_of(scenario, k, data.global_test)


def build_participants(scenario: LearningScenario, data: PreparedData, models: list[ModelSpec]) -> list[Participant]:
    """Fresh participants; participant k's init depends only on (seed, k)."""
    return [build_participant(scenario, data, models, k) for k in range(len(data.parts))]


def build_aggregator(
    privacy: PrivacySpec | None, ids: list[int], seed: int, rounds: int | None = None
) -> SumAggregator:
    """Plain sum, secure sum, and/or DP around it, as the privacy spec asks.

    With a target ``dp.epsilon`` the noise multiplier is the accountant's for ``rounds`` releases
    (one per round), and the DP sum refuses a release beyond them, or one that would spend more
    than they were planned to (:func:`planned_costs`: a participant that holds back a vector the
    secure sum cannot carry takes its noise share with it, as a dropout does).
    """
    agg: SumAggregator = PlainSum()
    if privacy is None:
        return agg
    if privacy.secure_aggregation:
        from abm.learning.privacy.secure_aggregation import SecureSum

        agg = SecureSum(ids, seed)
    if privacy.dp is not None:
        sigma, releases = dp_noise_multiplier(privacy, rounds, len(ids))
        planned = planned_costs(privacy, rounds, len(ids)) if releases is not None else None
        agg = DifferentiallyPrivateSum(agg, privacy.dp.clip, sigma, seed + 17, privacy.dp.accountant, releases, planned)
    return agg


def planned_costs(privacy: PrivacySpec, rounds: int | None, participants: int) -> list[float]:
    """Each round's release in releases at the noise multiplier: a round in which some of the
    ``participants`` drop out (``privacy.dropouts``) adds only the survivors' noise shares, sigma
    sqrt(survivors / n), so it costs n / survivors releases' worth of the budget."""
    if rounds is None:
        raise ValueError("a target epsilon needs the number of rounds")
    return [participants / (participants - len(set(privacy.dropouts.get(t, [])))) for t in range(rounds)]


def dp_noise_multiplier(privacy: PrivacySpec, rounds: int | None, participants: int) -> tuple[float, int | None]:
    """The noise multiplier of a privacy spec's DP and the number of releases it is calibrated
    for: the given ``noise_multiplier`` (no limit), or the accountant's for a target ``epsilon``
    over ``rounds`` releases, one a round, each costing what :func:`planned_costs` says."""
    dp = privacy.dp
    assert dp is not None
    if dp.epsilon is None:
        assert dp.noise_multiplier is not None
        return dp.noise_multiplier, None
    cost = sum(planned_costs(privacy, rounds, participants))
    return noise_multiplier_for(dp.epsilon, cost, dp.delta, dp.accountant), rounds


def privacy_settings(
    spec: Any,
    default_rounds: int,
    participants: int,
    releases: int | None = None,
    withheld: list[dict[str, Any]] | None = None,
) -> dict[str, Any] | None:
    """A protocol's privacy wrappers as run (None without a privacy block, unless a participant held
    back a vector that is not finite from the plain sum: then no wrapper and that record): secure
    aggregation, the participants that dropped out of each round's sum (``dropouts``: one ``{round,
    participants}`` entry a round that had any, rounds from 0 as ``privacy.dropouts`` numbers them,
    the participants' ids in order; the protocols that take dropouts sum once a round), those that
    held back a vector the sum cannot carry (``withheld``: :class:`WithheldRecord`'s
    record, ``[]`` where none did), and for DP
    the clip, delta, the target epsilon (if one was given), the noise multiplier the accountant
    set, the rounds it was set for, and ``releases``, the noisy sums the accountant charged (one
    per round for FedAvg; CoDream releases dream_steps + 1 sums in each round it dreams)."""
    if spec.privacy is None:
        return {"secure_aggregation": False, "dropouts": [], "withheld": withheld, "dp": None} if withheld else None
    rounds = spec.rounds or default_rounds
    dropouts = [
        {"round": r, "participants": sorted(set(who))} for r, who in sorted(spec.privacy.dropouts.items()) if who
    ]
    out: dict[str, Any] = {
        "secure_aggregation": spec.privacy.secure_aggregation,
        "dropouts": dropouts,
        "withheld": withheld or [],
        "dp": None,
    }
    dp = spec.privacy.dp
    if dp is not None:
        sigma, _ = dp_noise_multiplier(spec.privacy, rounds, participants)
        out["dp"] = {
            "clip": dp.clip,
            "delta": dp.delta,
            "target_epsilon": dp.epsilon,
            "noise_multiplier": sigma,
            "rounds": rounds,
            "releases": releases,
            "accountant": dp.accountant,
        }
    return out


def run_protocol(scenario: LearningScenario, data: PreparedData, spec: ProtocolSpec) -> ProtocolResult:
    """Run one protocol from fresh participants in this process; returns scores and accounting."""
    participants = build_participants(scenario, data, spec.models or scenario.models)
    ids = [p.pid for p in participants]
    ctx = RunContext(
        participants=participants,
        n_classes=data.source.n_classes,
        input_shape=data.source.input_shape,
        rounds=spec.rounds or scenario.rounds,
        local_epochs=scenario.local_epochs,
        seed=scenario.seed,
        network=Network(),
        aggregator=build_aggregator(spec.privacy, ids, scenario.seed, spec.rounds or scenario.rounds),
        pooled_train=Dataset.concat([p.data.train for p in participants]) if spec.name == "centralized" else None,
        dropouts={r: frozenset(v) for r, v in (spec.privacy.dropouts if spec.privacy else {}).items()},
        groups=data.groups,
    )
    return execute_protocol(scenario, spec, ctx)


class NonFinite:
    """The training losses that were not finite (NaN or inf: training diverged) of one protocol's
    run, as the participants report them with their scores after each round: ``record``, one
    ``{round, participant, losses}`` entry per round and participant that had any (rounds from
    0), for report.json; and a warning line (:func:`abm.learning.progress.say`) for each round in
    which a participant's training first did so, naming the protocol, the participants (``who``:
    participant, or institution in a private calibration) and the round. The run goes on."""

    def __init__(self, key: str, who: str, rounds: int) -> None:
        self.key, self.who, self.rounds = key, who, rounds
        self.record: list[dict[str, int]] = []
        self.warned: set[int] = set()

    def after_round(self, t: int, counts: dict[int, int]) -> None:
        """Round ``t``'s non-finite losses per participant."""
        bad = [pid for pid, count in counts.items() if count]
        self.record += [{"round": t, "participant": pid, "losses": counts[pid]} for pid in bad]
        first = [pid for pid in bad if pid not in self.warned]
        if first:
            self.warned.update(first)
            whom = f"{plural(self.who, len(first))} {', '.join(map(str, first))}"
            progress.say(
                f"warning: {self.key}: the training loss of {whom} was not finite (NaN or inf) in round {t} (rounds "
                f"0..{self.rounds - 1}): training diverged (too high a learning rate?); the run goes on, but the "
                "scores after it mean little (report.json: nonfinite_losses)"
            )


def execute_protocol(scenario: LearningScenario, spec: ProtocolSpec, ctx: RunContext) -> ProtocolResult:
    """Set up ``spec``'s protocol on ``ctx`` and run its rounds; every runner goes through here.

    Scores are asked of the participants (``score`` client operation) after every round, with
    their training losses that were not finite (:class:`NonFinite`); the vectors held back from a
    sum (not finite, or beyond a secure sum's range) are taken from the aggregator after every
    round (:class:`WithheldRecord`).
    """
    cls = protocol_class(spec.name)
    config = cls.Config.model_validate(spec.params)
    protocol = cls(config)
    ids = ctx.ids

    who = "institution" if hasattr(scenario, "institutions") else "participant"
    diverged = NonFinite(spec.key, who, ctx.rounds)
    withheld = WithheldRecord(spec.key, who, ctx.rounds, ctx.aggregator.secure)

    def scores_now(t: int) -> list[float]:
        replies = ctx.clients.broadcast("score")
        diverged.after_round(t, {pid: int(replies[pid]["nonfinite"][0]) for pid in ids})
        return [float(replies[pid]["acc"][0]) for pid in ids]

    torch.manual_seed(scenario.seed + 99)
    start = time.perf_counter()
    protocol.setup(ctx)
    history = []
    scores: list[float] = []
    for t in range(ctx.rounds):
        protocol.run_round(ctx, t)
        scores = scores_now(t)
        withheld.after_round(t, ctx.aggregator.take_withheld())
        history.append(float(np.mean(scores)))
        progress.step(spec.key, t + 1, ctx.rounds, f"{counted(t + 1, 'round')}, mean score {history[-1]:.3f}")
    wall = time.perf_counter() - start
    net = ctx.network
    delta = spec.privacy.dp.delta if spec.privacy and spec.privacy.dp else None
    return ProtocolResult(
        key=spec.key,
        name=spec.name,
        scores=scores,
        history=history,
        bytes_sent=[int(net.sent.get(i, 0)) for i in ids],
        bytes_received=[int(net.received.get(i, 0)) for i in ids],
        bytes_total=net.total_bytes(),
        bytes_by_kind=dict(net.per_kind),
        wall_time_s=wall,
        epsilon=ctx.aggregator.epsilon(delta) if delta is not None else None,
        delta=delta,
        privacy=privacy_settings(
            spec,
            ctx.rounds,
            len(ids),
            getattr(getattr(ctx.aggregator, "accountant", None), "steps", None),
            withheld.record,
        ),
        summary=protocol.summary(ctx),
        kinds_sent={i: sorted(net.kinds_sent.get(i, set())) for i in ids},
        params=config.model_dump(mode="json"),
        nonfinite_losses=diverged.record,
    )


def run_all(scenario: LearningScenario, runner: str | None = None) -> dict[str, Any]:
    """Run local-only (the standalone baseline) and every listed protocol; compute gains.

    ``runner`` (default: the scenario's) is ``inprocess``, ``flower-sim`` (Flower's simulation
    engine) or ``flower`` (a Flower server here and one client process per participant on
    loopback); see :mod:`abm.learning.flower`. Runs with one torch thread (the models are tiny;
    more threads only add contention) and restores the previous setting afterwards.
    """
    runner = runner or scenario.runner
    if runner != "inprocess":
        from abm.learning.flower import run_all_flower

        return run_all_flower(scenario, runner)
    with torch_threads(1):
        return _run_all(scenario)


def protocol_specs(scenario: Any, spec_class: type = ProtocolSpec) -> list[Any]:
    """The scenario's protocols, with local-only (the standalone baseline) first unless listed
    (as a ``spec_class``: the learning scenario's, or another task's such as private calibration).

    The baseline is the protocol whose report key is ``local`` (``name: local`` with no label, or
    labelled ``local``): the gains are measured against it, so it runs once."""
    specs = list(scenario.protocols)
    if not any(s.key == "local" for s in specs):
        specs.insert(0, spec_class(name="local"))
    return specs


def _run_all(scenario: LearningScenario) -> dict[str, Any]:
    data = prepare_data(scenario)
    results = [run_protocol(scenario, data, s) for s in protocol_specs(scenario)]
    sizes = [len(p.train) for p in data.parts]
    scored = [len(scored_on(scenario, data, k)) for k in range(len(data.parts))]
    return build_report(scenario, results, sizes, data.groups, "inprocess", scored)


def build_report(
    scenario: LearningScenario,
    results: list[ProtocolResult],
    train_sizes: list[int],
    groups: list[int] | None,
    runner: str,
    test_sizes: list[int],
) -> dict[str, Any]:
    """The report dict: per protocol and participant, scores against local-only, bytes, gains;
    ``test_sizes``, the samples each participant is scored on (:func:`scored_on`)."""
    base = next(r for r in results if r.key == "local")
    report: dict[str, Any] = {
        "scenario": scenario.name,
        "seed": scenario.seed,
        "runner": runner,
        "participants": scenario.split.participants,
        "evaluate_on": scenario.evaluate_on,
        "train_sizes": train_sizes,
        "test_sizes": test_sizes,
        "groups": groups,
        "protocols": {},
    }
    for r in results:
        g = gains(r.scores, base.scores)
        report["protocols"][r.key] = {
            "protocol": r.name,
            "params": r.params,
            "participants": [
                {
                    "id": i,
                    "standalone": base.scores[i],
                    "collaborative": r.scores[i],
                    "gain": float(g[i]),
                    "bytes_sent": r.bytes_sent[i],
                    "bytes_received": r.bytes_received[i],
                    "kinds_sent": r.kinds_sent.get(i, []),
                }
                for i in range(len(r.scores))
            ],
            "mean_score": float(np.mean(r.scores)),
            "min_gain": float(g.min()),
            "mcg": mcg(g),
            "cgs": cgs(g),
            "cgs_sample": cgs(g, ddof=1) if len(g) > 1 else None,
            "cf": None if np.isnan(cf := collaborative_fairness(base.scores, r.scores)) else cf,
            "bytes_total": r.bytes_total,
            "bytes_by_kind": r.bytes_by_kind,
            "wall_time_s": r.wall_time_s,
            "epsilon": r.epsilon,
            "delta": r.delta,
            "privacy": r.privacy,
            "history": r.history,
            "nonfinite_losses": r.nonfinite_losses,
            "summary": r.summary,
        }
    if scenario.selection_toy is not None:
        from abm.learning.selection_toy import run_selection_toy

        report["selection_toy"] = run_selection_toy(scenario.selection_toy, scenario.seed)
    return report
