"""The protocols' parameters (a protocol's ``params`` in a scenario), one config class each,
apart from their round logic: a scenario's params are checked with them without loading torch
(``abm validate``). Each protocol module uses its own (:mod:`abm.learning.protocols.traits` says
which is whose)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from abm.learning.selection import PolicyName


class ProtocolConfig(BaseModel):
    """Base for protocol parameters (unknown keys forbidden)."""

    model_config = ConfigDict(extra="forbid")


class FedAvgConfig(ProtocolConfig):
    """FedAvg / FedProx parameters."""

    mu: float = Field(0.0, ge=0)  # proximal coefficient; 0 = FedAvg
    server_lr: float = Field(1.0, gt=0)
    weighting: Literal["size", "uniform"] = "size"
    bn_stats: Literal["auto", "shared", "local"] = "auto"  # BatchNorm running statistics: see fedavg.py


class FedProxConfig(FedAvgConfig):
    """FedProx parameters: FedAvg's, with a proximal term by default (mu = 0.01)."""

    mu: float = Field(0.01, ge=0)


class CoDreamConfig(ProtocolConfig):
    """CoDream parameters (defaults scaled down for small tabular data)."""

    n_dreams: int = Field(128, ge=1)
    dream_steps: int = Field(60, ge=1)
    dream_lr: float = Field(0.05, gt=0)
    w_entropy: float = Field(1.0, ge=0)
    w_feature: float = Field(1.0, ge=0)
    w_adv: float = Field(1.0, ge=0)
    adv_start: int = Field(2, ge=0)
    collaborate: bool = True
    independent_labels: Literal["dreamer", "all"] = "dreamer"  # who labels independent dreams (collaborate: false)
    dream_start: int = Field(1, ge=0)
    kd_temperature: float = Field(3.0, gt=0)
    kd_weight: float = Field(1.0, ge=0)
    kd_epochs: int = Field(1, ge=1)
    buffer_batches: int = Field(10, ge=1)
    weighting: Literal["size", "uniform"] = "size"
    freeze_bn_on_dreams: bool = True  # distillation on dreams leaves BatchNorm running statistics alone
    # CoDream-fast
    local_steps: int = Field(5, ge=1)
    fast_batches: int = Field(2, ge=1)
    generator_hidden: int = Field(64, ge=1)
    noise_dim: int = Field(16, ge=1)
    generator_lr: float = Field(0.005, gt=0)
    noise_lr: float = Field(0.01, gt=0)
    meta_lr: float = Field(0.5, gt=0)


class MAPLConfig(ProtocolConfig):
    """MAPL parameters (mapl.md section 2.9, toy-scale recommendations)."""

    proto_dim: int = Field(32, ge=1)
    projector_hidden: int = Field(64, ge=1)
    tau: float = Field(0.1, gt=0)
    mu1: float = Field(0.5, ge=0)
    mu2: float = Field(0.1, ge=0)
    beta: float = Field(0.5, ge=0)
    eps: float = Field(1e-6, gt=0)
    graph_lr: float = Field(0.1, gt=0)
    graph_step: Literal["adam_reset", "pgd"] = "adam_reset"
    warmup_rounds: int | None = Field(None, ge=0)  # default: a fifth of the rounds
    use_confidence: bool = True
    learn_graph: bool = True
    aggregate_prototypes: bool = True
    # MAPL+ (mapl.md 3.4): also average the feature bodies with the same rows W (one architecture)
    aggregate_backbone: bool = False
    # noise sd as a fraction of each feature's sd in the own training data (mapl.md 5.4)
    jitter: float = Field(0.1, ge=0)
    mask_fraction: float = Field(0.15, ge=0, lt=1)
    lr: float | None = Field(None, gt=0)  # default: the scenario's training lr


class CYCleConfig(ProtocolConfig):
    """CYCle / VPDL parameters (cycle.md defaults)."""

    lambda0: float = Field(50.0, ge=0)
    alpha: float = Field(0.5, ge=0, le=1)
    tau_opt: float = 0.25
    tau_max: float = 0.75
    period: int = Field(5, ge=1)
    temperature: float = Field(5.0, gt=0)
    normalize: bool = True
    warmup_rounds: int | None = Field(None, ge=0)  # default: a quarter of the rounds
    reputation_samples: int = Field(512, ge=1)

    @model_validator(mode="after")
    def _thresholds(self) -> CYCleConfig:
        if self.tau_opt >= self.tau_max:
            raise ValueError(
                f"tau_opt ({self.tau_opt}) must be below tau_max ({self.tau_max}): h(s) gives full trust "
                "at s <= tau_opt and none at s >= tau_max (s = (1 - cos) / 2, misalignment)"
            )
        return self


class FairStop(BaseModel):
    """IPA's fairness-based early stopping (ipa.md 4.6 and 7.7): a round is fair when
    rho(phi, xi(t)) >= ``rho_min``, rho being the Pearson correlation of the peers' standalone
    validation accuracies phi and their IPA validation accuracies xi(t) after round t (NaN, when
    either is constant, is not fair).

    ``last_fair`` (7.7 (b)): run every round, then give each peer back its model of the last fair
    round, t* = max{t : rho >= rho_min} (the final models when no round was fair).
    ``first_all_gain`` (7.7 (c)): stop, freezing the models, at the first round that is fair and
    in which every peer's xi_i >= phi_i.
    """

    model_config = ConfigDict(extra="forbid")

    rule: Literal["last_fair", "first_all_gain"] = "last_fair"
    rho_min: float = Field(0.8, ge=-1, le=1)


class IPAConfig(ProtocolConfig):
    """IPA parameters (ipa.md section 8)."""

    lam: float = Field(0.01, ge=0)
    p: Literal[1, 2] = 1
    reduction: Literal["sum", "mean"] = "sum"
    update_others: bool = True
    lr: float | None = Field(None, gt=0)  # plain SGD; default: the scenario's training lr
    pair_weights: Literal["uniform", "size"] = "uniform"
    stop_round: int | None = Field(None, ge=1)
    target_accuracy: float | None = Field(None, ge=0, le=1)
    fair_stop: FairStop | None = None

    @model_validator(mode="after")
    def _one_stopping_rule(self) -> IPAConfig:
        if self.fair_stop is not None and (self.stop_round is not None or self.target_accuracy is not None):
            raise ValueError(
                "fair_stop is an early-stopping rule of its own: give it without stop_round and target_accuracy"
            )
        return self


class P2PSelectionConfig(ProtocolConfig):
    """Selection policy and its parameters."""

    policy: PolicyName = "random"
    collaborators: int = Field(1, ge=1)
    k: int = Field(3, ge=1)  # top_k
    eps: float = Field(0.5, ge=0, le=1)  # eps_greedy
    temperature: float = Field(0.1, gt=0)  # sim_sampling
    topology: Literal["fully_connected", "ring", "k_regular"] = "fully_connected"
    degree: int = Field(4, ge=2)  # k_regular: neighbours of each user, even, below the participants

    @model_validator(mode="after")
    def _topology_fits_policy(self) -> P2PSelectionConfig:
        if self.topology == "k_regular" and self.degree % 2:
            raise ValueError(f"degree must be even (degree / 2 ring neighbours either way); got {self.degree}")
        if self.policy.startswith("consensus") and self.topology != "fully_connected":
            raise ValueError(
                f"policy {self.policy} clusters every user's similarity to every other user: it needs "
                f"topology fully_connected, not {self.topology}"
            )
        return self
