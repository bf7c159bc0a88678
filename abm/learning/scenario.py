"""The learning-scenario schema (pydantic, unknown keys forbidden) and YAML loading.

A bad file raises :class:`LearningScenarioError` whose message names the file, the key path, the
bad value and what is allowed.
"""

from __future__ import annotations

import math
import typing
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from abm.key_paths import not_finite
from abm.learning.errors import LearningScenarioError
from abm.learning.files import read_yaml
from abm.learning.privacy.accountant import min_epsilon
from abm.learning.protocols.configs import P2PSelectionConfig
from abm.learning.protocols.traits import PROTOCOLS, protocol_traits
from abm.learning.selection import PolicyName
from abm.learning.sources import SKLEARN_CLASSES, SKLEARN_SOURCES
from abm.learning.split import known_groups
from abm.scenario_kinds import PRIVATE_CALIBRATION, learning_kind
from abm.set_options import (
    COMMAND_LINE,
    PYTHON,
    OptionNames,
    ScenarioError,
    apply_set,
    option_texts,
    refuse_repeated_keys,
)
from abm.validation_errors import bool_mixups, error_lines, name_field, seed_field, validated

Runner = Literal["inprocess", "flower-sim", "flower"]
FLOWER_TIMEOUT = 600.0
# 30 days: longer waits are no limit in practice, and beyond about 9.2e9 s Python's waits overflow
FLOWER_TIMEOUT_MAX = 30 * 86_400.0
FLOWER_TIMEOUT_HELP = (
    "seconds the Flower runners wait for the participants' answers to one request (a client operation sent to "
    "them at once, or the first 'who are you'); one still unanswered ends the run; at most 30 days"
)
RUNNERS: tuple[str, ...] = typing.get_args(Runner)  # where the protocols run (docs/learning.md, "Runners")

PROTOCOL_NAMES = tuple(PROTOCOLS)  # the registry's (abm.learning.protocols.traits), in its order


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GaussianMixtureSpec(_Strict):
    """Synthetic Gaussian-mixture classification."""

    source: Literal["gaussian_mixture"]
    n_samples: int = Field(2000, ge=20)
    n_classes: int = Field(10, ge=2)
    n_features: int = Field(20, ge=1)
    modes_per_class: int = Field(2, ge=1)
    separation: float = Field(3.0, gt=0)


class SklearnSpec(_Strict):
    """One of scikit-learn's bundled data sets (no download)."""

    source: Literal[SKLEARN_SOURCES]  # type: ignore[valid-type]


class LabelSkewSpec(_Strict):
    """Dirichlet(alpha) label skew: per class, shares over participants ~ Dir(alpha), redrawn
    until every participant's share holds ``min_size`` samples (a split that cannot is refused)."""

    alpha: float = Field(gt=0)
    min_size: int = Field(10, ge=1)


class QuantitySkewSpec(_Strict):
    """Quantity skew: participant sizes ~ Dir(alpha) (or fixed ``fractions``)."""

    alpha: float | None = Field(None, gt=0)
    fractions: list[Annotated[float, Field(gt=0)]] | None = None
    min_size: int = Field(10, ge=1)

    @model_validator(mode="after")
    def _one(self) -> QuantitySkewSpec:
        if (self.alpha is None) == (self.fractions is None):
            raise ValueError("give exactly one of alpha or fractions")
        if self.fractions is not None and abs(sum(self.fractions) - 1) > 1e-6:
            raise ValueError(
                f"fractions are shares of the data and must sum to 1; these sum to {sum(self.fractions):g}"
            )
        return self


class ClassGroupsSpec(_Strict):
    """Participant k holds only the classes of group ``assignment[k]``."""

    groups: list[list[int]]
    assignment: list[int]


class ConceptShiftSpec(_Strict):
    """Concept shift: the listed participants swap the given label pairs (train, val and test).

    Each swap exchanges two different classes, and a class is in one swap at most: the swaps
    are applied to the original labels one after the other, so [0, 1], [1, 2] would label
    classes 0 and 2 both 1 (and [0, 1], [1, 0] would read as two swaps and be one)."""

    participants: list[int] = Field(min_length=1)
    swaps: list[tuple[int, int]] = Field(min_length=1)

    @field_validator("participants")
    @classmethod
    def _each_once(cls, participants: list[int]) -> list[int]:
        twice = next((k for i, k in enumerate(participants) if k in participants[:i]), None)
        if twice is not None:
            raise ValueError(f"participant {twice} is listed twice; list each once")
        return participants

    @field_validator("swaps")
    @classmethod
    def _disjoint(cls, swaps: list[tuple[int, int]]) -> list[tuple[int, int]]:
        first: dict[int, int] = {}  # class -> the first swap that holds it
        for i, (a, b) in enumerate(swaps):
            if a == b:
                raise ValueError(f"swaps[{i}] swaps class {a} with itself (no change); give two different classes")
            for c in (a, b):
                if c in first:
                    raise ValueError(
                        f"class {c} is in swaps[{first[c]}] and swaps[{i}], so the labels would depend on their "
                        "order; give each class in one swap at most"
                    )
                first[c] = i
        return swaps


class SplitSpec(_Strict):
    """How the pooled data is split across participants."""

    participants: int = Field(ge=2, le=64)
    label_skew: LabelSkewSpec | None = None
    quantity_skew: QuantitySkewSpec | None = None
    class_groups: ClassGroupsSpec | None = None
    concept_shift: ConceptShiftSpec | None = None
    val_fraction: float = Field(0.2, gt=0, lt=0.5)
    test_fraction: float = Field(0.2, gt=0, lt=0.5)

    @model_validator(mode="after")
    def _exclusive(self) -> SplitSpec:
        chosen = [k for k in ("label_skew", "quantity_skew", "class_groups") if getattr(self, k)]
        if len(chosen) > 1:
            raise ValueError(f"choose at most one of label_skew, quantity_skew, class_groups; got {chosen}")
        if self.class_groups and len(self.class_groups.assignment) != self.participants:
            raise ValueError(
                f"class_groups.assignment: {self.class_groups.assignment} is not allowed: needs one group per "
                f"participant ({self.participants})"
            )
        bad = [
            g
            for g in (self.class_groups.assignment if self.class_groups else [])
            if not 0 <= g < len(self.class_groups.groups)
        ]
        if bad:
            raise ValueError(
                f"class_groups.assignment: bad groups {bad}: groups are 0..{len(self.class_groups.groups) - 1} "
                "(one per entry of groups)"
            )
        q = self.quantity_skew
        if q is not None and q.fractions is not None and len(q.fractions) != self.participants:
            raise ValueError(
                f"quantity_skew.fractions needs one share per participant ({self.participants}), not {len(q.fractions)}"
            )
        bad = [
            k for k in (self.concept_shift.participants if self.concept_shift else []) if not 0 <= k < self.participants
        ]
        if bad:
            raise ValueError(f"concept_shift.participants: bad participants {bad}: they are 0..{self.participants - 1}")
        shifted = self.concept_shift.participants if self.concept_shift else []
        if len(shifted) == self.participants:
            raise ValueError(
                f"concept_shift.participants: {shifted} shifts all {self.participants} participants: they would all "
                "learn the same swapped labels, with no shift between them; leave at least one out"
            )
        return self


class ModelSpec(_Strict):
    """A participant model: ``mlp`` (hidden widths) or ``cnn`` (channels, embed_dim)."""

    kind: Literal["mlp", "cnn"] = "mlp"
    hidden: list[Annotated[int, Field(ge=1)]] = [64]
    channels: list[Annotated[int, Field(ge=1)]] = [8, 16]
    embed_dim: int = Field(32, ge=1)
    batchnorm: bool = True

    WIDTH_KEYS: ClassVar[str] = "an mlp's last hidden width, a cnn's embed_dim"
    """What sets :attr:`embedding_width`, for messages."""

    def parameter_count(self, input_shape: tuple[int, ...], n_classes: int) -> int:
        """The values the model of this spec holds (weights, biases, BatchNorm's four per
        feature) on inputs of ``input_shape``, as :func:`abm.learning.models.build_model` builds
        it; computed without torch, so that sizes no machine holds are told before it runs."""
        bn = 4 if self.batchnorm else 0
        count, prev = 0, math.prod(input_shape)
        if self.kind == "mlp":
            for width in self.hidden:
                count += prev * width + width + bn * width
                prev = width
        else:  # 3x3 convolutions (+ BatchNorm), pooled to 2 x 2, then a linear to embed_dim
            prev = input_shape[0]
            for ch in self.channels:
                count += prev * ch * 9 + ch + bn * ch
                prev = ch
            count += prev * 4 * self.embed_dim + self.embed_dim
        return count + self.embedding_width * n_classes + n_classes

    @property
    def embedding_width(self) -> int:
        """The width of the body's output, which the head reads: the last hidden width of an
        ``mlp``, ``embed_dim`` of a ``cnn``."""
        return self.hidden[-1] if self.kind == "mlp" else self.embed_dim


class TrainingSpec(_Strict):
    """Local optimizer settings."""

    optimizer: Literal["sgd", "adam"] = "adam"
    lr: float = Field(0.01, gt=0)
    momentum: float = Field(0.9, ge=0, lt=1)
    weight_decay: float = Field(0.0, ge=0)
    batch_size: int = Field(32, ge=2)


class DPSpec(_Strict):
    """Differential privacy on summed updates: give ``noise_multiplier``, or a target ``epsilon``
    (at ``delta``) from which the accountant sets the multiplier for one release per round
    (fedavg and fedprox only; :func:`abm.learning.privacy.noise_multiplier_for`)."""

    clip: float = Field(gt=0)
    noise_multiplier: float | None = Field(None, gt=0)
    epsilon: float | None = Field(None, gt=0, description="target epsilon over the run's rounds")
    delta: float = Field(1e-5, gt=0, lt=1)
    accountant: Literal["rdp", "gdp"] = "rdp"

    @model_validator(mode="after")
    def _one_noise_setting(self) -> DPSpec:
        if (self.noise_multiplier is None) == (self.epsilon is None):
            raise ValueError("give exactly one of noise_multiplier and epsilon (a target for the whole run)")
        return self


class PrivacySpec(_Strict):
    """Privacy wrappers (only for protocols whose aggregation is a sum)."""

    secure_aggregation: bool = False
    dp: DPSpec | None = None
    dropouts: dict[int, list[int]] = Field(
        {},
        description="participants that drop out of the round's sum, by round (both numbered from 0): "
        "``{2: [3]}``; fedavg and fedprox only",
    )


# A label names its protocol's plot files, the longest LABEL_collaboration.png: one file name of at
# most 255 bytes (a longer label ran the whole scenario, then failed writing its plots).
LABEL_MAX = 255 - len("_collaboration.png")


class ProtocolSpec(_Strict):
    """One protocol run; ``params`` are validated by the protocol's own config."""

    name: Literal[PROTOCOL_NAMES]  # type: ignore[valid-type]
    label: str | None = name_field("a name for the protocol's plot files", default=None, max_length=LABEL_MAX)
    params: dict[str, Any] = {}
    models: list[ModelSpec] | None = None
    privacy: PrivacySpec | None = None
    rounds: int | None = Field(None, ge=1)

    @property
    def key(self) -> str:
        """Name shown in reports."""
        return self.label or self.name


class SelectionToySpec(_Strict):
    """The 2-D collaborator-selection simulation of chapter D (Fig. 14)."""

    users_per_domain: int = Field(13, ge=2)
    domains: int = Field(3, ge=2)
    rounds: int = Field(40, ge=1)
    spread: float = Field(0.5, gt=0)
    domain_distance: float = Field(4.0, gt=0)
    noise: float = Field(0.1, ge=0)
    policies: list[PolicyName] = Field(
        [
            "random",
            "greedy",
            "top_k",
            "eps_greedy",
            "sim_sampling",
            "consensus_affinity_propagation",
            "consensus_mean_shift",
        ],
        min_length=1,
    )


class LearningScenario(_Strict):
    """A learning scenario: data, split, models, training budget and the protocols to compare."""

    name: str = name_field("a folder name")  # runs/<name> by default
    description: str = ""
    seed: int = seed_field(0)
    data: Annotated[GaussianMixtureSpec | SklearnSpec, Field(discriminator="source")]
    global_test_fraction: float = Field(0.25, gt=0, lt=0.9)
    split: SplitSpec
    models: list[ModelSpec] = Field([ModelSpec()], min_length=1)
    training: TrainingSpec = TrainingSpec()
    rounds: int = Field(10, ge=1)
    local_epochs: int = Field(1, ge=1)
    evaluate_on: Literal["own", "global"] = "own"
    protocols: list[ProtocolSpec] = Field(min_length=1)  # compared with local-only, always run
    selection_toy: SelectionToySpec | None = None
    runner: Runner = "inprocess"
    flower_timeout: float = Field(FLOWER_TIMEOUT, gt=0, le=FLOWER_TIMEOUT_MAX, description=FLOWER_TIMEOUT_HELP)


def protocol_param_problems(data: Any) -> list[str]:
    """A line for each problem in the protocols' ``params``, each validated against its protocol's
    own config (protocols of the file with a known name; the schema names the others)."""
    protocols = data.get("protocols") if isinstance(data, dict) else None
    lines: list[str] = []
    for i, spec in enumerate(protocols if isinstance(protocols, list) else []):
        params = spec.get("params") if isinstance(spec, dict) else None
        if not isinstance(params, dict):
            continue
        try:
            config = protocol_traits(spec.get("name")).config
        except (KeyError, TypeError):
            continue
        # true for a number (pydantic reads it as 1), a number for true/false: named, and nothing
        # else of these params
        mixups = bool_mixups(config, params, (f"protocols[{i}]", "params"))
        if mixups:
            lines += mixups
            continue
        try:
            values = config.model_validate(params)
        except ValidationError as e:
            lines += error_lines(e, config, data, ("protocols", i, "params"))
            continue
        # params is a plain mapping in the scenario's schema: a number written as text ("inf") is
        # a float only in the protocol's config, so it is looked at here
        lines += not_finite(values.model_dump(mode="python", by_alias=True), (f"protocols[{i}]", "params"))
    return lines


def check_protocols(
    source: str,
    protocols: list[ProtocolSpec],
    default_models: list[Any],
    runner: str,
    participants: int,
    rounds: int,
    member: str = "participant",
) -> None:
    """Checks of each protocol run that the schema cannot express (its params are checked with
    the schema, :func:`protocol_param_problems`): one architecture where the protocol needs it, what the Flower runners
    carry, privacy wrappers only on summing protocols, DP only under secure aggregation and on
    summed updates, a DP delta below 1 / ``participants`` (the guarantee is per participant) and a
    target epsilon the accountant can reach (:func:`abm.learning.privacy.accountant.min_epsilon`),
    and dropouts only where the protocol simulates them, of existing ``participants`` in existing
    rounds (``rounds``: the scenario's default) that leave two. Raises LearningScenarioError
    naming the file and the key path. ``member``: what a participant is called in messages."""
    seen: dict[str, int] = {}
    for i, spec in enumerate(protocols):
        if spec.key in seen:
            raise LearningScenarioError(
                f"{source}: protocols[{i}]: {spec.key!r} is already protocols[{seen[spec.key]}]'s name in the "
                "report; give one of them a different label"
            )
        seen[spec.key] = i
        if spec.key == "local" and spec.name != "local":
            raise LearningScenarioError(
                f"{source}: protocols[{i}].label: 'local' is not allowed for {spec.name}: it is the name of the "
                "local-only baseline (always run, the standalone score of every gain) in the report; give "
                "another label"
            )
        traits = protocol_traits(spec.name)
        models = spec.models or default_models
        needs_one = traits.needs_one_architecture(spec.params)
        if needs_one and len({m.model_dump_json() for m in models}) > 1:
            # the mixed models are the protocol's own, or the scenario's when it gives none
            key = f"protocols[{i}].models" if spec.models else "models"
            shown = yaml.safe_dump(
                [m.model_dump(exclude_unset=True) for m in models],
                default_flow_style=True,
                sort_keys=False,
                width=10**6,
            ).strip()
            inherited = "" if spec.models else " (which gives no models of its own)"
            raise LearningScenarioError(
                f"{source}: {key}: {shown} is not allowed for protocols[{i}]{inherited}: {needs_one} needs one "
                f"architecture for every {member}; give a single model under protocols[{i}].models"
            )
        widths = sorted({m.embedding_width for m in models})
        if traits.one_embedding_width and len(widths) > 1:
            key = f"protocols[{i}].models" if spec.models else "models"
            raise LearningScenarioError(
                f"{source}: {key}: embedding widths {widths} are not allowed for protocols[{i}]: {spec.name} compares "
                f"every {member}'s embeddings with shared prototypes, so they need one width "
                f"({models[0].WIDTH_KEYS}); give every model the same"
            )
        private = spec.privacy and (spec.privacy.secure_aggregation or spec.privacy.dp)
        if spec.name == "p2p_selection":
            check_selection(f"{source}: protocols[{i}].params", spec.params, participants, member)
        stop = spec.params.get("stop_round") if spec.name == "ipa" else None
        last = spec.rounds or rounds
        where = f"protocols[{i}].rounds" if spec.rounds else "rounds"
        if stop is not None and stop > last:
            raise LearningScenarioError(
                f"{source}: protocols[{i}].params.stop_round: {stop!r} is not allowed: the run has {last} rounds "
                f"({where}); stop_round is the number of rounds trained before the models are frozen: 1..{last}"
            )
        never = switched_off(spec.name, spec.params, last, member)
        if never:
            key, value, off, instead = never[0]
            raise LearningScenarioError(
                f"{source}: protocols[{i}].params.{key}: {value!r} is not allowed: the run has {last} rounds "
                f"({where}), counted from 0, and {off}: 0..{last - 1}{instead}"
            )
        if runner != "inprocess" and not traits.runs_on_clients:
            allowed = ", ".join(n for n, t in PROTOCOLS.items() if t.runs_on_clients)
            raise LearningScenarioError(
                f"{source}: protocols[{i}].name: {spec.name!r} is not allowed for runner {runner!r}: "
                f"the Flower runners carry only {allowed}; use runner: inprocess"
            )
        if spec.privacy and spec.privacy.dropouts and not traits.simulates_dropouts:
            allowed = ", ".join(n for n, t in PROTOCOLS.items() if t.simulates_dropouts)
            raise LearningScenarioError(
                f"{source}: protocols[{i}].privacy.dropouts: not allowed for {spec.name}: dropouts are "
                f"simulated for {allowed}"
            )
        for round_, who in (spec.privacy.dropouts if spec.privacy else {}).items():
            key, last = f"{source}: protocols[{i}].privacy.dropouts", (spec.rounds or rounds) - 1
            if not 0 <= round_ <= last:
                raise LearningScenarioError(f"{key}: bad round {round_}: rounds are 0..{last}")
            bad = [k for k in who if not 0 <= k < participants]
            if bad:
                raise LearningScenarioError(f"{key}[{round_}]: bad {member}s {bad}: 0..{participants - 1}")
            if participants - len(set(who)) < 2:
                needs = "secure aggregation needs" if spec.privacy.secure_aggregation else "the round's sum needs"
                raise LearningScenarioError(
                    f"{key}[{round_}]: {who} is not allowed: {needs} at least two {member}s left"
                )
        dp = spec.privacy.dp if spec.privacy else None
        if dp is not None and dp.delta >= 1 / participants:
            raise LearningScenarioError(
                f"{source}: protocols[{i}].privacy.dp.delta: {dp.delta!r} is not allowed: the guarantee is per "
                f"{member}, so delta must be below 1 / {participants} (usually far below: 1e-5, say)"
            )
        if runner != "inprocess" and spec.privacy is not None:
            raise LearningScenarioError(
                f"{source}: protocols[{i}].privacy: not allowed for runner {runner!r}: the Flower "
                "runners do not carry the privacy wrappers (secure aggregation, DP, dropouts); "
                "use runner: inprocess"
            )
        if dp is not None and dp.epsilon is not None and not traits.one_release_per_round:
            allowed = ", ".join(n for n, t in PROTOCOLS.items() if t.one_release_per_round)
            raise LearningScenarioError(
                f"{source}: protocols[{i}].privacy.dp.epsilon: {dp.epsilon!r} is not allowed for "
                f"{spec.name}: a target epsilon is allowed for {allowed} (one release per round); "
                "give noise_multiplier instead"
            )
        if dp is not None and dp.epsilon is not None:
            floor = min_epsilon(dp.delta, dp.accountant)
            if dp.epsilon <= floor:
                raise LearningScenarioError(
                    f"{source}: protocols[{i}].privacy.dp.epsilon: {dp.epsilon!r} is not allowed with accountant "
                    f"{dp.accountant} at delta {dp.delta!r}: it must be above {floor:.6g}, which no noise multiplier "
                    "goes below; ask for a larger epsilon, or use accountant: gdp (exact, any epsilon > 0)"
                )
        if private and not traits.uses_aggregator:
            allowed = ", ".join(n for n, t in PROTOCOLS.items() if t.uses_aggregator)
            raise LearningScenarioError(
                f"{source}: protocols[{i}].privacy: not allowed for {spec.name}: privacy "
                f"wrappers apply only to protocols whose aggregation is a sum ({allowed})"
            )
        if dp is not None and not spec.privacy.secure_aggregation:
            raise LearningScenarioError(
                f"{source}: protocols[{i}].privacy.dp: not allowed without secure_aggregation: true: each "
                f"{member} adds a 1/sqrt(n) share of the noise, which hides its vector only inside the masked "
                "sum; add secure_aggregation: true"
            )
        if dp is not None and not traits.sums_updates:
            raise LearningScenarioError(
                f"{source}: protocols[{i}].privacy.dp: not allowed for {spec.name}: it sums the generator's "
                "weights, BatchNorm statistics and latents, not updates, and clipping and noise on them break "
                "the generator; use secure_aggregation alone, or codream"
            )
        params = spec.params or {}
        if spec.name == "codream_fast" and params.get("collaborate") is False:
            raise LearningScenarioError(
                f"{source}: protocols[{i}].params.collaborate: false is not allowed for codream_fast: it has no "
                "independent-dreams ablation (its clients always optimise one shared generator and latents "
                "together, so the run would be the collaborative method under an ablation's label); use "
                "name: codream with collaborate: false"
            )
        if dp is not None and params.get("bn_stats") == "shared":  # FedAvg's setup raised it: a traceback
            raise LearningScenarioError(
                f"{source}: protocols[{i}].params.bn_stats: 'shared' is not allowed with privacy.dp: BatchNorm "
                "running statistics would either be noised (corrupting them) or leave without noise (outside the "
                "guarantee); use bn_stats: auto (the default) or local, which keep them with each "
                f"{member} under DP"
            )
        if spec.name == "codream_fast" and params.get("n_dreams", 2) < 2:  # it ended in torch's traceback
            raise LearningScenarioError(
                f"{source}: protocols[{i}].params.n_dreams: {params['n_dreams']!r} is not allowed for codream_fast: "
                "its generator (Linear-BatchNorm-ReLU-Linear) makes each batch of dreams at once, and BatchNorm "
                "needs at least 2 in a batch; give at least 2"
            )
        if private and params.get("collaborate") is False and params.get("independent_labels", "dreamer") == "dreamer":
            raise LearningScenarioError(
                f"{source}: protocols[{i}].privacy: not allowed for {spec.name} with collaborate: false: its "
                "dreams and their labels are shared in the clear, nothing is summed, so no privacy wrapper "
                "covers it; remove privacy (or use independent_labels: all)"
            )


def switched_off(
    name: str, params: dict[str, Any], rounds: int, member: str = "participant"
) -> list[tuple[str, Any, str, str]]:
    """The round settings written in protocol ``name``'s ``params`` that would switch its mechanism
    off for a whole run of ``rounds`` rounds (counted from 0: a start at ``rounds`` or later is never
    reached): each key, its value, what would happen, in words, and what to write instead of the
    range ("" or "; or ..."). A default that does so (a short test run) is left alone, as is a
    setting whose mechanism the params switch off anyway. ``params`` are valid; ``member``: what a
    participant is called."""
    config = protocol_traits(name).config.model_validate(params)
    starts: dict[str, tuple[str, str]] = {}
    if name in ("cycle", "vpdl"):
        starts["warmup_rounds"] = (
            f"the {member}s share no prediction before round warmup_rounds, so they would never share",
            "",
        )
    if name == "mapl" and config.learn_graph and config.aggregate_prototypes:
        starts["warmup_rounds"] = (
            "the graph is learned from round warmup_rounds, so it would never be learned (the prototypes stay "
            "averaged with equal weights)",
            "",
        )
    if name in ("codream", "codream_fast"):
        starts["dream_start"] = (
            "dreams are made from round dream_start, so none would be (every round local training)",
            "",
        )
        if config.w_adv > 0:
            starts["adv_start"] = (
                "the adversarial term applies from round adv_start, so it would never apply",
                "; or w_adv: 0 for no adversarial term",
            )
    values = {key: getattr(config, key) for key in starts if key in params}  # as read: "3" is 3
    return [
        (key, values[key], off, instead)
        for key, (off, instead) in starts.items()
        if values.get(key) is not None and values[key] >= rounds
    ]


def check_selection(key: str, params: dict[str, Any], participants: int, member: str = "participant") -> None:
    """p2p_selection's ``params`` (``key``: their path, file named) against the ``participants``:
    a k_regular ``degree`` below their number, and no more ``collaborators`` (nor, for top_k, a
    larger ``k``) than the neighbours the topology gives each (they were silently fewer); top_k's
    ``collaborators`` at most its ``k``. Raises LearningScenarioError."""
    from abm.learning.topology import build_topology

    config = P2PSelectionConfig.model_validate(params)  # the params are valid: the schema checked them

    def given(name: str) -> str:
        value = getattr(config, name)
        return f"{value!r} is" if name in params else f"{value!r} (the default, as none is given) is"

    if config.topology == "k_regular" and config.degree >= participants:
        raise LearningScenarioError(
            f"{key}.degree: {given('degree')} not allowed with {participants} {member}s: topology k_regular "
            f"needs an even degree below the number of {member}s"
        )
    neighbours = int(build_topology(config.topology, participants, config.degree)[0].sum())  # a regular graph
    for name in ("collaborators", "k") if config.policy == "top_k" else ("collaborators",):
        if getattr(config, name) > neighbours:
            raise LearningScenarioError(
                f"{key}.{name}: {given(name)} not allowed with topology {config.topology}: each of the "
                f"{participants} {member}s has {neighbours} neighbour{'s' if neighbours != 1 else ''} to choose "
                f"from; give at most {neighbours}"
            )
    if config.policy == "top_k" and config.collaborators > config.k:
        raise LearningScenarioError(
            f"{key}.collaborators: {given('collaborators')} not allowed with policy top_k and k {config.k}: the "
            f"collaborators are drawn among the k most similar neighbours; give at most {config.k}, or a larger k"
        )


def class_count(data: GaussianMixtureSpec | SklearnSpec) -> int:
    """How many classes a scenario's data have (a Gaussian mixture's ``n_classes``, or the
    scikit-learn set's), known without building them."""
    return data.n_classes if isinstance(data, GaussianMixtureSpec) else SKLEARN_CLASSES[data.source]


def check_indices(source: str, scenario: LearningScenario) -> None:
    """Class numbers in the split and participant/round numbers in dropouts must exist."""
    data = scenario.data
    n_classes = class_count(data)
    split = scenario.split
    named: list[tuple[str, int]] = []
    if split.class_groups is not None:
        named += [
            (f"split.class_groups.groups[{g}]", c) for g, grp in enumerate(split.class_groups.groups) for c in grp
        ]
    if split.concept_shift is not None:
        named += [
            (f"split.concept_shift.swaps[{i}]", c) for i, pair in enumerate(split.concept_shift.swaps) for c in pair
        ]
    for key, c in named:
        if not 0 <= c < n_classes:
            raise LearningScenarioError(f"{source}: {key}: {c} is not allowed: classes are 0..{n_classes - 1}")


def check_held_classes(source: str, scenario: LearningScenario) -> None:
    """Under ``evaluate_on: global`` every class of the data must be held by some participant:
    ``split.class_groups`` gives a participant only its group's classes, and a class in no
    assigned group was scored in the global test set though no protocol could learn it (the
    pooled upper bound included). Raises LearningScenarioError naming the classes."""
    groups = scenario.split.class_groups
    if groups is None or scenario.evaluate_on != "global":
        return
    data = scenario.data
    n_classes = class_count(data)
    held = {c for g in set(groups.assignment) for c in groups.groups[g]}
    missing = sorted(set(range(n_classes)) - held)
    if missing:
        raise LearningScenarioError(
            f"{source}: split.class_groups: classes {missing} are in no group a participant is assigned "
            f"(assignment {groups.assignment}), so no participant holds them, while with evaluate_on: global "
            "everyone is scored on the global test set, which has them: no protocol could learn them; put every "
            f"class 0..{n_classes - 1} in an assigned group, or use evaluate_on: own"
        )


def check_classes(source: str, data: GaussianMixtureSpec | SklearnSpec) -> None:
    """A Gaussian mixture draws each sample's class uniformly: with fewer samples than classes
    some class surely has none, and the participants would be scored on classes nobody could
    learn (it ran, scoring 0 with 500 classes and 300 samples). Raises LearningScenarioError
    naming ``data.n_classes``."""
    if isinstance(data, GaussianMixtureSpec) and data.n_samples < data.n_classes:
        raise LearningScenarioError(
            f"{source}: data.n_classes: {data.n_classes} is not allowed with n_samples {data.n_samples}: each "
            "sample's class is drawn uniformly, so with fewer samples than classes some classes would have no "
            f"sample; give at most {data.n_samples} classes, or more samples"
        )


def check_known_groups(source: str, scenario: LearningScenario) -> None:
    """p2p_selection's oracle policy picks within a participant's known group: the split must give
    the groups (class groups or concept shift); it failed once the protocols had run."""
    for i, spec in enumerate(scenario.protocols):
        if spec.name == "p2p_selection" and spec.params.get("policy") == "oracle" and known_groups(scenario) is None:
            raise LearningScenarioError(
                f"{source}: protocols[{i}].params.policy: 'oracle' is not allowed without known groups: it picks "
                "within a participant's group, given by split.class_groups or split.concept_shift; give one, or "
                "another policy"
            )


def scenario_data(
    path_or_dict: str | Path | dict[str, Any],
    sets: list[str] | None = None,
    names: OptionNames | None = None,
    runner: str | None = None,
) -> tuple[dict[str, Any], str]:
    """A learning or private-calibration scenario's mapping (read from its file, or the dict
    given) with ``sets``, ``key.path=value`` overrides as ``abm run --set`` takes them
    (:func:`abm.set_options.apply_set`), applied in order; and its name for messages: the file
    path or '<dict>', followed by the sets so that an error a set caused is not blamed on the
    file alone. Messages name the sets as ``names`` says: as ``abm learn`` takes them
    (``FILE (with --set rounds=2)``; the default, :data:`abm.set_options.COMMAND_LINE`) or as the
    Python entry points do (``PYTHON``: ``FILE (with sets=['rounds=2'])``), and a ``runner`` that
    overrides the file's (``--runner flower``), which the caller applies. A bad set raises
    :class:`LearningScenarioError`."""
    names = names or COMMAND_LINE

    # Arguments of the wrong kind come only from Python (abm learn gives a path and a list of
    # texts), so those messages name the Python arguments.
    if isinstance(path_or_dict, dict):
        data, source = path_or_dict, "<dict>"
    elif isinstance(path_or_dict, str | Path):
        data, source = read_yaml(path_or_dict), str(path_or_dict)
    else:
        raise LearningScenarioError(
            f"path_or_dict: {path_or_dict!r} is not allowed; give a scenario file's path or its data (a dict)"
        )
    try:
        sets = option_texts(sets, "set", PYTHON, example="rounds=5")
    except ScenarioError as e:
        raise LearningScenarioError(str(e)) from None
    try:
        refuse_repeated_keys(sets, names)
    except ScenarioError as e:
        raise LearningScenarioError(f"{source}: {e}") from None
    for i, item in enumerate(sets):
        try:
            data = apply_set(data, item, names.set_item(i), defaults_shown="a report's scenario.json")
        except ScenarioError as e:
            raise LearningScenarioError(f"{source}: {e}") from None
    return data, names.scenario(source, sets, [] if runner is None else [("runner", runner)])


def load_scenario(
    path_or_dict: str | Path | dict[str, Any],
    runner: str | None = None,
    sets: list[str] | None = None,
    names: OptionNames | None = None,
) -> tuple[LearningScenario, str]:
    """Read and validate a scenario; returns it with its name for messages (file path or
    '<dict>', with the sets: :func:`scenario_data`).

    ``runner`` overrides the scenario's ``runner`` key (validated the same way); ``sets``
    (``key.path=value``) override any key, as ``abm learn --set`` does; messages name them as
    ``names`` says (:func:`scenario_data`; default: as ``abm learn`` takes them).
    """
    data, source = scenario_data(path_or_dict, sets, names, runner)
    if learning_kind(data) == PRIVATE_CALIBRATION:  # it was refused key by key, as a learning scenario
        raise LearningScenarioError(
            f"{source}: this is a private calibration scenario (kind: private_calibration), not a learning one; "
            "run it with abm.learn (`abm learn`), or abm.private_calibration.report.run_private_calibration"
        )
    if runner is not None:
        data = {**data, "runner": runner}
    scenario = validated(LearningScenario, data, source, LearningScenarioError, extra=protocol_param_problems(data))
    check_protocols(
        source, scenario.protocols, scenario.models, scenario.runner, scenario.split.participants, scenario.rounds
    )
    check_indices(source, scenario)
    check_held_classes(source, scenario)
    check_classes(source, scenario.data)
    check_known_groups(source, scenario)
    # the scenario's models and every protocol's own (they were built only when the protocol ran,
    # which then failed with a traceback)
    models = [(f"models[{i}]", m) for i, m in enumerate(scenario.models)] + [
        (f"protocols[{j}].models[{i}]", m)
        for j, spec in enumerate(scenario.protocols)
        for i, m in enumerate(spec.models or [])
    ]
    for key, m in models:
        if m.kind == "cnn" and scenario.data.source != "digits":
            raise LearningScenarioError(
                f"{source}: {key}.kind: 'cnn' is not allowed: a CNN needs image data (data.source: digits); use mlp"
            )
    return scenario, source
