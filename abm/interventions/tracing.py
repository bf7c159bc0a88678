"""What digital and manual contact tracing share: finding the contacts of index cases over a
look-back window, and asking the traced to quarantine (and optionally to test)."""

from __future__ import annotations

import torch

from abm.engine.config import Stage
from abm.engine.simulator import Simulation
from abm.interventions.testing import positives_to_trace


def keep_window(sim: Simulation, window_days: int) -> None:
    """Have the occupation layer keep the rewiring of a tracing window's days and of today, so
    that each day's rewiring is drawn once: a window longer than the days kept drew most of
    its days again every day (the same contacts, at several times the cost)."""
    sim.occupation.keep_days = max(sim.occupation.keep_days, window_days + 1)


def unique_pairs(owner: torch.Tensor, partner: torch.Tensor, total: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Distinct (owner, partner) pairs."""
    key = torch.unique(owner * total + partner)
    return key // total, key % total


def bernoulli(sim: Simulation, stream: str, day: int, n: int, p: float) -> torch.Tensor:
    """``n`` independent draws with probability ``p`` from the stream (seed, stream, day)."""
    return sim.rand(stream, day, n) < p


def can_be_asked(sim: Simulation, contacts: torch.Tensor) -> torch.Tensor:
    """The traced ``contacts`` a tracer can ask to quarantine: not isolated already (in
    quarantine, they keep their end) and alive."""
    st = sim.state
    return contacts[~st.isolated.index_select(0, contacts) & (st.stage.index_select(0, contacts) != Stage.DEATH)]


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

    ``index`` must be among today's index cases (``positives_to_trace``): the contacts of all of
    them are found once per day and layer, and shared by the tracers. Days on which an index case
    was isolated are skipped (it met nobody then; field ``isolated_history``), and so are days on
    which the contact was, where isolation shields both ends (``quarantine.blocks: both``; the
    reference code checks the index case only). Contacts that did not happen are skipped too: on
    a layer whose multiplier was 0 that day, or in an occupation setting closed that day
    (``sim.closed``; a multiplier between 0 and 1 weakens contacts but keeps them). With
    ``tested`` (the field ``last_test_day``), a contact of day d who has taken a test on day d or
    later is skipped.
    """
    found = [_positives_contacts(sim, layer, day, window_days, tested) for layer in layers]
    owner = torch.cat([index[:0]] + [o for o, _ in found])
    partner = torch.cat([index[:0]] + [p for _, p in found])
    keep = torch.isin(owner, index).nonzero().squeeze(1)
    return unique_pairs(owner.index_select(0, keep), partner.index_select(0, keep), sim.total)


def _positives_contacts(
    sim: Simulation, layer: object, day: int, window_days: int, tested: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(index case, contact) on one layer over the window, for every index case of today
    (``positives_to_trace``); kept in ``sim.memo`` for the day."""
    key = ("tracing", layer.name, day, window_days, tested is not None)
    if key in sim.memo:
        return sim.memo[key]
    for old in [k for k in sim.memo if k[0] == "tracing" and k[2] != day]:
        del sim.memo[old]
    index = positives_to_trace(sim, day)
    history = sim.fields.get("isolated_history")
    both_ends = history is not None and sim.isolation_shields  # an isolated contact met nobody either
    first = max(0, day - window_days)
    shut = [d for d in range(first, day) if layer.name in sim.closed.get(d, ((), ()))[0]]
    if getattr(layer, "static", False):
        # The same contacts every day: looked up once, kept when the two met on a day of the
        # window (not isolated, the layer not shut) and, with ``tested``, the contact had not
        # tested by the last such day.
        bits = None if history is None else history.index_select(0, index)
        if shut:  # a day the layer was shut counts as a day isolated
            mask = sum(1 << (day - 1 - d) for d in shut)
            bits = (torch.zeros_like(index, dtype=torch.int32) if bits is None else bits) | mask
        last = last_free_day(bits, first, day, index)
        active = (last >= 0).nonzero().squeeze(1)
        o, p = layer.contacts_of(index.index_select(0, active), day)
        last = last.index_select(0, active.index_select(0, o))
        if both_ends:
            last = last_free_day(
                bits.index_select(0, active.index_select(0, o)) | history.index_select(0, p), first, day, p
            )
        keep = last >= 0
        if tested is not None:
            keep &= tested.index_select(0, p) < last
        keep = keep.nonzero().squeeze(1)
        o, p = o.index_select(0, keep), p.index_select(0, keep)
        sim.memo[key] = (index.index_select(0, active.index_select(0, o)), p)
        return sim.memo[key]
    # Every (index case, day it met anyone) in the window, looked up in one call where the
    # layer takes a day per agent.
    days = torch.arange(first, day, device=sim.device)
    if history is None:
        met = torch.ones(days.shape[0], index.shape[0], dtype=torch.bool, device=sim.device)
    else:
        met = ((history.index_select(0, index)[None, :] >> (day - 1 - days)[:, None]) & 1) == 0
    if shut:
        met[torch.tensor(shut, device=sim.device) - first] = False
    which, who = met.nonzero().unbind(1)
    agents, when = index.index_select(0, who), days.index_select(0, which)
    if getattr(layer, "days_at_once", False):
        o, p = layer.contacts_of(agents, when)
        found = [(o, p)]
    else:
        found = []
        for d in range(first, day):
            sel = (when == d).nonzero().squeeze(1)
            o, p = layer.contacts_of(agents.index_select(0, sel), d)
            found.append((sel.index_select(0, o), p))
    o = torch.cat([x for x, _ in found] or [index[:0]])
    p = torch.cat([y for _, y in found] or [index[:0]])
    on = when.index_select(0, o)
    keep = torch.ones_like(p, dtype=torch.bool)
    if both_ends:
        keep &= ((history.index_select(0, p) >> (day - 1 - on)) & 1) == 0
    if tested is not None:
        keep &= tested.index_select(0, p) < on
    if hasattr(layer, "in_settings"):  # a closed setting's members met nobody there that day
        for d in range(first, day):
            settings = sim.closed.get(d, ((), ()))[1]
            if settings:
                keep &= ~((on == d) & layer.in_settings(agents.index_select(0, o), settings))
    keep = keep.nonzero().squeeze(1)
    o, p = o.index_select(0, keep), p.index_select(0, keep)
    sim.memo[key] = (agents.index_select(0, o), p)
    return sim.memo[key]


def last_free_day(bits: torch.Tensor | None, first: int, day: int, like: torch.Tensor) -> torch.Tensor:
    """Per agent (or pair), the last day in [first, day) whose bit in the isolation history
    ``bits`` (bit k: isolated on day ``day - 1 - k``) is clear, -1 when none (all days when
    ``bits`` is None); shaped like ``like``.

    Found in a few operations whatever the window: the lowest clear bit k among the window's
    ``day - first`` bits (isolated its lowest set bit, ``free & -free``, a power of two whose
    exponent ``frexp`` reads exactly) is the day ``day - 1 - k``."""
    width = day - first
    if width <= 0:
        return torch.full_like(like, -1)
    if bits is None:
        return torch.full_like(like, day - 1)
    free = ~bits & ((1 << width) - 1)  # bit k set: free on day day - 1 - k
    lowest = (free & -free).double()  # 2**k, or 0 when no day of the window is free
    k = torch.frexp(lowest).exponent - 1  # frexp(2**k) = (0.5, k + 1)
    return torch.where(free != 0, day - 1 - k.to(like.dtype), -1).to(like.dtype)
