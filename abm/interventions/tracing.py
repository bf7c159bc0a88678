"""What digital and manual contact tracing share: finding the contacts of index cases over a
look-back window, and asking the traced to quarantine (and optionally to test)."""

from __future__ import annotations

import torch

from abm.engine.rng import generator
from abm.engine.simulator import Simulation


def unique_pairs(owner: torch.Tensor, partner: torch.Tensor, total: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Distinct (owner, partner) pairs."""
    key = torch.unique(owner * total + partner)
    return key // total, key % total


def bernoulli(sim: Simulation, stream: str, day: int, n: int, p: float) -> torch.Tensor:
    """``n`` independent draws with probability ``p``."""
    return torch.rand(n, generator=generator(sim.seed, stream, day, sim.device), device=sim.device) < p


def notify(
    sim: Simulation, day: int, contacts: torch.Tensor, compliance: float, stream: str, test: bool
) -> torch.Tensor:
    """Traced ``contacts`` (distinct agents) comply with probability ``compliance``: they are
    asked to quarantine (and to test when ``test``). Returns the mask of those who complied."""
    complied = bernoulli(sim, stream, day, contacts.shape[0], compliance)
    sim.field("quarantine_request", torch.bool, False)[contacts[complied]] = True
    if test:
        sim.field("test_request", torch.bool, False)[contacts[complied]] = True
    return complied
