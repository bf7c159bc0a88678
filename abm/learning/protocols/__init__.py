"""Protocols, one module each, and a registry by name."""

from __future__ import annotations

import importlib

from abm.learning.protocols.base import Protocol, ProtocolConfig, RunContext

_REGISTRY = {
    "local": ("abm.learning.protocols.local", "LocalOnly"),
    "centralized": ("abm.learning.protocols.centralized", "Centralized"),
    "fedavg": ("abm.learning.protocols.fedavg", "FedAvg"),
    "fedprox": ("abm.learning.protocols.fedavg", "FedProx"),
    "codream": ("abm.learning.protocols.codream", "CoDream"),
    "codream_fast": ("abm.learning.protocols.codream", "CoDreamFast"),
    "mapl": ("abm.learning.protocols.mapl", "MAPL"),
    "cycle": ("abm.learning.protocols.cycle", "CYCle"),
    "vpdl": ("abm.learning.protocols.cycle", "VPDL"),
    "ipa": ("abm.learning.protocols.ipa", "IPA"),
    "p2p_selection": ("abm.learning.protocols.p2p_selection", "P2PSelection"),
}


def protocol_class(name: str) -> type[Protocol]:
    """The protocol class registered under ``name``."""
    if name not in _REGISTRY:
        raise KeyError(f"unknown protocol {name!r}; allowed: {', '.join(_REGISTRY)}")
    module, cls = _REGISTRY[name]
    return getattr(importlib.import_module(module), cls)


def protocol_names() -> list[str]:
    """Registered protocol names."""
    return list(_REGISTRY)


__all__ = ["Protocol", "ProtocolConfig", "RunContext", "protocol_class", "protocol_names"]
