"""The protocols of :mod:`abm.learning` applied to the institutions' calibrators.

Each institution becomes an :class:`abm.learning.participant.Participant` whose private data are
its (observed-window features -> joint parameter bin) pairs and whose score is the mean
per-parameter recovery accuracy on its held-out simulations. The protocol classes run
unchanged through :func:`abm.learning.runner.execute_protocol` (their round logic is shared, not
copied); this module only builds the participants and the run context, and records every message
an institution sends (:class:`AuditNetwork`), so tests can check what leaves an institution. The
Flower runner (:mod:`abm.private_calibration.flower`) builds the same participants inside Flower
clients and goes through the same ``execute_protocol``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from abm.learning.data import Dataset
from abm.learning.messages import AuditNetwork
from abm.learning.models import Classifier
from abm.learning.participant import Participant
from abm.learning.privacy.aggregation import SumAggregator
from abm.learning.protocols import RunContext
from abm.learning.runner import ProtocolResult, build_aggregator, execute_protocol, protocol_specs
from abm.learning.training import TrainConfig, predict
from abm.private_calibration.institutions import Institution
from abm.private_calibration.models import build_calibrator
from abm.private_calibration.observed import CHANNELS
from abm.private_calibration.parameters import BinGrid
from abm.private_calibration.scenario import CalibrationProtocolSpec, CalibratorSpec, PrivateCalibrationScenario

_INIT_LOCK = threading.Lock()


@dataclass
class CalibratorParticipant(Participant):
    """A participant scored by parameter recovery (mean over parameters of marginal accuracy).

    ``score`` is recovery on the held-out simulations over the full parameter range (the
    headline); ``own_score`` is recovery on held-out simulations under the institution's own
    prior (its own range; ``nan`` when the scenario draws none).
    """

    grid: BinGrid | None = None
    own_test: Dataset | None = None

    def recovery(self, data: Dataset | None = None) -> dict[str, float]:
        """Per-parameter recovery accuracy on ``data`` (default: the held-out simulations)."""
        d = data if data is not None else (self.eval_data if self.eval_data is not None else self.data.test)
        assert self.grid is not None
        return self.grid.marginal_accuracy(predict(self.model, d.x), d.y)

    def score(self) -> float:
        return float(np.mean(list(self.recovery().values())))

    def own_score(self) -> float:
        """Mean recovery on held-out simulations under the institution's own prior."""
        if self.own_test is None:
            return float("nan")
        return float(np.mean(list(self.recovery(self.own_test).values())))


@dataclass
class ProtocolRun:
    """One protocol run over the institutions: final participants and the accounting."""

    key: str
    name: str
    participants: list[CalibratorParticipant]
    history: list[float]
    network: AuditNetwork
    wall_time_s: float
    epsilon: float | None
    delta: float | None
    summary: dict[str, Any]
    privacy: dict[str, Any] | None = None  # the privacy wrappers as run (learning's privacy_settings)
    params: dict[str, Any] = field(default_factory=dict)  # the protocol's params as run, defaults filled in
    nonfinite_losses: list[dict[str, int]] = field(default_factory=list)  # learning's ProtocolResult's


def calibration_specs(scenario: PrivateCalibrationScenario) -> list[CalibrationProtocolSpec]:
    """The scenario's protocols, with local-only (the standalone baseline) first unless listed."""
    return protocol_specs(scenario, CalibrationProtocolSpec)


def calibrator_for(spec: CalibratorSpec, weeks: int, n_classes: int) -> Classifier:
    """A fresh calibrator of ``spec``'s architecture (initialised from the global torch stream)."""
    return build_calibrator(
        spec.kind, len(CHANNELS), weeks, n_classes, spec.hidden, spec.channels, spec.embed_dim, spec.batchnorm
    )


def build_participant(
    scenario: PrivateCalibrationScenario, institution: Institution, models: list[CalibratorSpec]
) -> CalibratorParticipant:
    """A fresh calibrator for ``institution``; its initialisation depends only on (seed, k)."""
    t = scenario.training
    cfg = TrainConfig(t.optimizer, t.lr, t.momentum, t.weight_decay, t.batch_size)
    grid = scenario.grid()
    k = institution.index
    seed = scenario.seed * 1000 + k
    with _INIT_LOCK:  # Flower clients may build participants in threads of one process
        torch.manual_seed(seed)
        model = calibrator_for(models[k % len(models)], scenario.model.weeks, grid.n_classes)
    return CalibratorParticipant(
        k, institution.data, model, cfg, seed, institution.data.test, grid=grid, own_test=institution.own_test
    )


def build_participants(
    scenario: PrivateCalibrationScenario, institutions: list[Institution], models: list[CalibratorSpec]
) -> list[CalibratorParticipant]:
    """Fresh calibrators; institution k's initialisation depends only on (seed, k)."""
    return [build_participant(scenario, inst, models) for inst in institutions]


def protocol_run(
    result: ProtocolResult, participants: list[CalibratorParticipant], network: AuditNetwork
) -> ProtocolRun:
    """A :class:`ProtocolRun` from the learning runner's result and the final calibrators."""
    return ProtocolRun(
        key=result.key,
        name=result.name,
        participants=participants,
        history=result.history,
        network=network,
        wall_time_s=result.wall_time_s,
        epsilon=result.epsilon,
        delta=result.delta,
        summary=result.summary,
        privacy=result.privacy,
        params=result.params,
        nonfinite_losses=result.nonfinite_losses,
    )


def run_protocol(
    scenario: PrivateCalibrationScenario,
    institutions: list[Institution],
    spec: CalibrationProtocolSpec,
    aggregator: SumAggregator | None = None,
) -> ProtocolRun:
    """Run one protocol from fresh calibrators, round by round, in process.

    ``aggregator`` replaces the sum aggregator that ``spec.privacy`` asks for (benchmarks use it
    to observe the updates of a run, e.g. their norms for choosing a DP clip).
    """
    participants = build_participants(scenario, institutions, spec.models or scenario.models)
    ids = [p.pid for p in participants]
    network = AuditNetwork()
    ctx = RunContext(
        participants=list(participants),
        n_classes=scenario.grid().n_classes,
        input_shape=(len(CHANNELS) * scenario.model.weeks,),
        rounds=spec.rounds or scenario.rounds,
        local_epochs=scenario.local_epochs,
        seed=scenario.seed,
        network=network,
        aggregator=aggregator or build_aggregator(spec.privacy, ids, scenario.seed, spec.rounds or scenario.rounds),
        pooled_train=Dataset.concat([p.data.train for p in participants]) if spec.name == "centralized" else None,
        dropouts={r: frozenset(v) for r, v in (spec.privacy.dropouts if spec.privacy else {}).items()},
    )
    return protocol_run(execute_protocol(scenario, spec, ctx), participants, network)  # type: ignore[arg-type]
