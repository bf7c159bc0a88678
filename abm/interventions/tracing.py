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


def window_contacts(
    sim: Simulation, index: torch.Tensor, day: int, window_days: int, layers: tuple, tested: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Distinct (index case, contact) pairs on ``layers`` over the days [day - window_days, day).

    Days on which an index case was isolated are skipped (it met nobody then; field
    ``isolated_history``). With ``tested`` (the field ``last_test_day``), a contact of day d who
    has taken a test on day d or later is skipped.
    """
    history = sim.fields.get("isolated_history")
    owners, partners = [index[:0]], [index[:0]]
    for d in range(max(0, day - window_days), day):
        active = index if history is None else index[((history.index_select(0, index) >> (day - 1 - d)) & 1) == 0]
        for layer in layers:
            o, p = layer.contacts_of(active, d)
            if tested is not None:
                fresh = (tested.index_select(0, p) < d).nonzero().squeeze(1)
                o, p = o.index_select(0, fresh), p.index_select(0, fresh)
            owners.append(active.index_select(0, o))
            partners.append(p)
    return unique_pairs(torch.cat(owners), torch.cat(partners), sim.total)
