"""What a scenario's checks know of each protocol without loading its round logic (torch): the
class that implements it, its params' config and what it needs and does. The registry of
protocols by name (:data:`PROTOCOLS`): :func:`abm.learning.protocols.protocol_class` imports a
protocol's class from it, and that class takes its config from here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from abm.learning.protocols.configs import (
    CoDreamConfig,
    CYCleConfig,
    FedAvgConfig,
    FedProxConfig,
    IPAConfig,
    MAPLConfig,
    P2PSelectionConfig,
    ProtocolConfig,
)


@dataclass(frozen=True)
class ProtocolTraits:
    """One protocol: its ``name`` in scenarios, the ``implementation`` (module of
    :mod:`abm.learning.protocols`, class), its params' ``config``, and:

    * ``same_architecture``: every participant needs the same model architecture;
    * ``one_architecture_with``: (a param, who needs it) where that param, when true, makes the
      protocol average models, which then need one architecture;
    * ``uses_aggregator``: what it aggregates is a sum (the privacy wrappers apply);
    * ``runs_on_clients``: it touches participants only through the run's clients, so it runs on
      every runner (the Flower ones too);
    * ``one_release_per_round``: one noisy sum a round, so a target DP epsilon can be set;
    * ``simulates_dropouts``: it reads the participants that drop out (privacy.dropouts);
    * ``sums_updates``: what it sums are updates (DP noise may go on them);
    * ``one_embedding_width``: it compares every participant's embeddings (the bodies' outputs)
      in one space, so they need one width."""

    name: str
    implementation: tuple[str, str]
    config: type[ProtocolConfig] = ProtocolConfig
    same_architecture: bool = False
    one_architecture_with: tuple[str, str] | None = None
    uses_aggregator: bool = False
    runs_on_clients: bool = False
    one_release_per_round: bool = False
    simulates_dropouts: bool = False
    sums_updates: bool = True
    one_embedding_width: bool = False

    def needs_one_architecture(self, params: dict[str, Any]) -> str | None:
        """Who needs one architecture for every participant in a run with these ``params`` (the
        protocol, or the protocol with the params that make it average models), or None."""
        if self.same_architecture:
            return self.name
        if self.one_architecture_with is not None and params.get(self.one_architecture_with[0]):
            return self.one_architecture_with[1]
        return None


_FEDAVG = {
    "same_architecture": True,
    "uses_aggregator": True,
    "runs_on_clients": True,
    "one_release_per_round": True,
    "simulates_dropouts": True,
}
_CODREAM = {"config": CoDreamConfig, "uses_aggregator": True, "runs_on_clients": True}
# MAPL takes mixed architectures; MAPL+ averages the feature bodies and needs one.
_MAPL_PLUS = (
    "aggregate_backbone",
    "mapl with params.aggregate_backbone: true (MAPL+, which averages the feature bodies)",
)

PROTOCOLS: dict[str, ProtocolTraits] = {
    t.name: t
    for t in (
        ProtocolTraits("local", ("local", "LocalOnly"), runs_on_clients=True),
        ProtocolTraits("centralized", ("centralized", "Centralized")),
        ProtocolTraits("fedavg", ("fedavg", "FedAvg"), FedAvgConfig, **_FEDAVG),
        ProtocolTraits("fedprox", ("fedavg", "FedProx"), FedProxConfig, **_FEDAVG),
        ProtocolTraits("codream", ("codream", "CoDream"), **_CODREAM),
        # its sums are the generator's weights and BatchNorm statistics, and the latents
        ProtocolTraits("codream_fast", ("codream", "CoDreamFast"), **_CODREAM, sums_updates=False),
        ProtocolTraits(
            "mapl", ("mapl", "MAPL"), MAPLConfig, one_architecture_with=_MAPL_PLUS, one_embedding_width=True
        ),
        ProtocolTraits("cycle", ("cycle", "CYCle"), CYCleConfig),
        ProtocolTraits("vpdl", ("cycle", "VPDL"), CYCleConfig),
        ProtocolTraits("ipa", ("ipa", "IPA"), IPAConfig, same_architecture=True),
        ProtocolTraits("p2p_selection", ("p2p_selection", "P2PSelection"), P2PSelectionConfig, same_architecture=True),
    )
}


def protocol_traits(name: str) -> ProtocolTraits:
    """The protocol registered under ``name``; KeyError naming the registered ones otherwise."""
    if name not in PROTOCOLS:
        raise KeyError(f"unknown protocol {name!r}; allowed: {', '.join(PROTOCOLS)}")
    return PROTOCOLS[name]
