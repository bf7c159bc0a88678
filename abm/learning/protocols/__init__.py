"""Protocols, one module each, and a registry by name (:mod:`abm.learning.protocols.traits`).

The registry, the protocols' configs and what the scenario checks read of them load without
torch; a protocol's class (its round logic) and :class:`Protocol` and :class:`RunContext` are
imported on first use."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from abm.learning.protocols.configs import ProtocolConfig
from abm.learning.protocols.traits import PROTOCOLS, protocol_traits

if TYPE_CHECKING:
    from abm.learning.protocols.base import Protocol, RunContext


def protocol_class(name: str) -> type[Protocol]:
    """The protocol class registered under ``name``."""
    module, cls = protocol_traits(name).implementation
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)


def protocol_names() -> list[str]:
    """Registered protocol names."""
    return list(PROTOCOLS)


def __getattr__(name: str) -> Any:
    if name in ("Protocol", "RunContext"):
        from abm.learning.protocols import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Protocol", "ProtocolConfig", "RunContext", "protocol_class", "protocol_names"]
