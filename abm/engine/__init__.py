"""The simulator core: agent state, disease, contact layers, transmission, the day loop and
recorders. It knows nothing of YAML or files."""

from abm.engine.contacts import ContactConfig
from abm.engine.disease import STAGE_NAMES, DiseaseConfig, Stage
from abm.engine.recorder import SimulationResult
from abm.engine.simulator import Intervention, Phase, SeedingConfig, Simulation, estimate_memory_bytes

__all__ = [
    "STAGE_NAMES", "ContactConfig", "DiseaseConfig", "Intervention", "Phase", "SeedingConfig",
    "Simulation", "SimulationResult", "Stage", "estimate_memory_bytes",
]  # fmt: skip
