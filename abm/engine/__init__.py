"""The simulator core: agent state, disease, contact layers, transmission, the day loop and
recorders. It knows nothing of YAML or files.

The settings and the plain values (:mod:`abm.engine.config`) are imported with the package; the
engine's classes, which need torch, on first use, so that a scenario loads and is checked
(``abm validate``) without loading torch."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from abm.engine.config import (
    STAGE_NAMES,
    ContactConfig,
    DiseaseConfig,
    Phase,
    SeedingConfig,
    Stage,
    estimate_memory_bytes,
)

if TYPE_CHECKING:
    from abm.engine.recorder import SimulationResult
    from abm.engine.simulator import Intervention, Simulation

# The names that need torch, by the module that holds them.
_ENGINE = {
    "Intervention": "abm.engine.simulator",
    "Simulation": "abm.engine.simulator",
    "SimulationResult": "abm.engine.recorder",
}


def __getattr__(name: str) -> Any:
    """The engine's classes (:data:`_ENGINE`), imported on first use."""
    if name in _ENGINE:
        return getattr(importlib.import_module(_ENGINE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "STAGE_NAMES", "ContactConfig", "DiseaseConfig", "Intervention", "Phase", "SeedingConfig",
    "Simulation", "SimulationResult", "Stage", "estimate_memory_bytes",
]  # fmt: skip
