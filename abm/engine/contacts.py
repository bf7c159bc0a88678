"""Contact layers: household (static), occupation (daily small-world) and community (daily,
near home). Each layer builds a day's contacts directly from its structure, from a generator
keyed by (seed, layer, day), so a past day can be re-created instead of stored.

R replicates are R disjoint copies of the population: agent ``r * N + i`` is agent ``i`` of
replicate ``r``; no contact crosses copies.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
import torch

from abm.engine.config import CommunityContacts, HouseholdContacts, OccupationContacts
from abm.engine.config import ContactConfig as ContactConfig  # the layers' settings, named here as before
from abm.engine.config import default_degrees as default_degrees
from abm.engine.rng import generator
from abm.populations.population import Population

# Contact ids at or above this need int64 (int32 holds fewer).
INDEX_LIMIT = 2**31
AGE_CLASS_OF_GROUP = [0, 0, 1, 1, 1, 1, 1, 2, 2]  # child 0-19, adult 20-69, elderly 70+


def tile(
    a: np.ndarray, replicates: int, stride: int, device: torch.device, dtype: torch.dtype = torch.int64
) -> torch.Tensor:
    """Repeat index array ``a`` for each replicate, offsetting copy r by ``r * stride``, as
    ``dtype`` (whose range the caller vouches for)."""
    t = torch.as_tensor(a, dtype=dtype)
    off = torch.arange(replicates, dtype=dtype)[:, None] * stride
    return (t[None, :] + off).flatten().to(device)


@dataclass
class Edges:
    """One day's undirected contacts of one layer as two index arrays. A contact may join an
    agent to itself (a rewired or random contact that landed home); such a contact carries no
    infection, since an infectious agent is not susceptible, and tracing skips it."""

    src: torch.Tensor
    dst: torch.Tensor


def flat_nonzero(mask: torch.Tensor) -> torch.Tensor:
    """Positions (ascending, int64) where the 1-D ``mask`` is true, as ``mask.nonzero().squeeze(1)``.

    On the CPU numpy's ``nonzero`` gives the same indices several times faster than torch's
    ``nonzero`` (about 0.5 ms against 4.5 ms over a million agents, torch 2.13, one thread), and
    the engine takes such positions many times a day."""
    if mask.device.type != "cpu":
        return mask.nonzero().squeeze(1)
    where = mask.numpy().nonzero()[0]
    return torch.from_numpy(where if where.dtype == np.int64 else where.astype(np.int64))


def expand_ranges(begin: torch.Tensor, end: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Every position in the ranges [begin_i, end_i) and the index i of its range (int64 bounds).

    On the CPU numpy's ``repeat`` and ``take`` give them 1.2 to 1.8 times as fast as torch's
    ``repeat_interleave`` and ``index_select`` (30 to 350,000 ranges, torch 2.13, one thread),
    and the engine expands ranges several times a day."""
    count = end - begin
    if begin.device.type != "cpu":
        # The indices i, each count_i times: repeat_interleave of the counts alone gives them
        # several times faster than repeating an arange (which gathers from it) over long ranges.
        owner = torch.repeat_interleave(count)
        shift = (begin - torch.cumsum(count, 0) + count).index_select(0, owner)
        return shift.add_(torch.arange(owner.shape[0], device=begin.device)), owner
    n = count.numpy()
    owner = np.repeat(np.arange(n.shape[0], dtype=np.int64), n)
    pos = (begin.numpy() - np.cumsum(n) + n).take(owner)
    pos += np.arange(pos.shape[0], dtype=np.int64)
    return torch.from_numpy(pos), torch.from_numpy(owner)


def find_sorted(table: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Where each of ``values`` is in the ascending ``table``, and whether it is there."""
    if table.numel() == 0:
        return torch.zeros_like(values), torch.zeros_like(values, dtype=torch.bool)
    at = torch.searchsorted(table, values).clamp_max_(table.shape[0] - 1)
    return at, table.index_select(0, at) == values


def expand_rows(ptr: torch.Tensor, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions of every entry of CSR ``rows`` (given row pointers ``ptr``, int32 or int64)
    and each position's index into ``rows``."""
    return expand_ranges(ptr.index_select(0, rows).long(), ptr.index_select(0, rows + 1).long())


class ContactLayer(ABC):
    """What every contact layer offers: its contacts of given agents on a day, its whole day's
    contacts, and the infectiousness its contacts carry from today's infectious agents."""

    name = ""
    coef: torch.Tensor  # per agent: the layer's weight over the agent's normaliser

    @abstractmethod
    def contacts_of(self, agents: torch.Tensor, day: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Pairs (position in ``agents``, contact) of the agents' contacts on ``day``."""

    def contacts_on(self, agents: torch.Tensor, day: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The pairs of :meth:`contacts_of` for one day and distinct ``agents``, in any order
        (a layer may find them faster so)."""
        return self.contacts_of(agents, day)

    @abstractmethod
    def edges(self, day: int) -> Edges:
        """The day's contacts, each once."""

    @abstractmethod
    def contributions(
        self, day: int, src: torch.Tensor, w: torch.Tensor, x: torch.Tensor
    ) -> tuple[torch.Tensor | None, torch.Tensor]:
        """(agent, infectiousness) pairs, one per contact of today's infectious agents ``src``
        (infectiousness ``w``; ``x`` is the same as a per-agent vector, zero elsewhere). Summed
        per agent, in order, they are the agent's raw exposure on this layer; pairs that carry
        nothing may be left out. A layer may instead give every agent's sum at once, as agent
        ``None`` and a per-agent vector (a new one: the engine scales it in place)."""

    def pressure(self, day: int, src: torch.Tensor, w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Sum of infectiousness over each agent's contacts today, as a per-agent vector."""
        target, value = self.contributions(day, src, w, x)
        return value if target is None else torch.zeros_like(x).index_add_(0, target, value)


def other_pairs(agents: torch.Tensor, owner: torch.Tensor, partner: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The pairs (position in ``agents``, contact) whose contact is not the agent itself, in order
    (positions and a gather: several times faster than ``masked_select`` on the CPU)."""
    kept = flat_nonzero(partner != agents.index_select(0, owner))
    return owner.index_select(0, kept), partner.index_select(0, kept)


def nonzero_pairs(target: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The pairs whose value is not zero (in order)."""
    keep = flat_nonzero(value != 0)
    return target.index_select(0, keep), value.index_select(0, keep)


def member_list_string_length(household_start: np.ndarray, household_size: np.ndarray) -> np.ndarray:
    """Length of the text ``str(list_of_member_ids)`` of each household of consecutive ids,
    e.g. 14 for ``"[12345, 12346]"``: brackets, the digits of every id and ", " between ids. The
    reference code divides household contacts by it (``contacts.household.normalizer:
    member_list_string``)."""
    start = np.asarray(household_start, dtype=np.int64)
    size = np.asarray(household_size, dtype=np.int64)
    ids = np.repeat(start, size) + (np.arange(int(size.sum())) - np.repeat(np.cumsum(size) - size, size))
    digits = np.ones(ids.shape[0], dtype=np.int64)
    power = 10
    while power <= max(int(ids.max(initial=0)), 0):
        digits += ids >= power
        power *= 10
    owner = np.repeat(np.arange(size.shape[0]), size)
    id_digits = np.bincount(owner, weights=digits, minlength=size.shape[0]).astype(np.int64)
    return 2 + id_digits + 2 * np.maximum(size - 1, 0)


class HouseholdLayer(ContactLayer):
    """Complete graph per household, computed as per-household sums (no edges)."""

    name = "household"
    static = True  # the same contacts every day

    def __init__(self, pop: Population, cfg: HouseholdContacts, replicates: int, device: torch.device) -> None:
        self.index = tile(pop.household, replicates, pop.num_households, device)
        self.num = pop.num_households * replicates
        if cfg.normalizer == "member_list_string":
            size = torch.as_tensor(
                member_list_string_length(pop.household_start, pop.household_size)[pop.household], dtype=torch.float32
            )
        else:
            size = torch.as_tensor(pop.household_size[pop.household], dtype=torch.float32)
        self.coef = (cfg.weight / size).repeat(replicates).to(device)
        self.start = tile(pop.household_start, replicates, pop.size, device)
        self.size = torch.as_tensor(pop.household_size, dtype=torch.int64).repeat(replicates).to(device)
        self.ptr = torch.cat([self.start, torch.tensor([pop.size * replicates], device=device)])
        self._edges: Edges | None = None

    def contacts_of(self, agents: torch.Tensor, day: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Pairs (position in ``agents``, contact) of the agents' household contacts."""
        pos, owner = expand_rows(self.ptr, self.index.index_select(0, agents))
        return other_pairs(agents, owner, pos)

    def contributions(
        self, day: int, src: torch.Tensor, w: torch.Tensor, x: torch.Tensor
    ) -> tuple[torch.Tensor | None, torch.Tensor]:
        """Every member of a household with infectious members gets the household's total
        infectiousness less its own."""
        home = self.index.index_select(0, src)
        if 8 * src.shape[0] > self.num:  # many households: every agent, from all households' sums
            total = torch.zeros(self.num, dtype=w.dtype, device=w.device).index_add_(0, home, w)
            return None, total.index_select(0, self.index) - x
        house, slot = torch.unique(home, return_inverse=True)
        total = torch.zeros(house.shape[0], dtype=w.dtype, device=w.device).index_add_(0, slot, w)
        member, owner = expand_rows(self.ptr, house)
        return member, total.index_select(0, owner) - x.index_select(0, member)

    def edges(self, day: int) -> Edges:
        """Explicit household pairs (the same every day), from the contiguous household ranges."""
        if self._edges is None:
            n = self.index.shape[0]
            idx = torch.arange(n, device=self.index.device)
            src, dst = [idx[:0]], [idx[:0]]
            lag = 1
            while lag < n:
                same = self.index[lag:] == self.index[:-lag]
                if not bool(same.any()):
                    break
                src.append(idx[:-lag][same])
                dst.append(idx[lag:][same])
                lag += 1
            self._edges = Edges(torch.cat(src), torch.cat(dst))
        return self._edges


def ring_order(pop: Population) -> np.ndarray:
    """Every group's members, group after group, in the order of its ring: home order (agent
    ids), except that where a group holds long-term-care residents and others (a facility's
    staff) the two kinds are spread evenly over the ring, each in home order (member i of a kind
    of n at position (i + 1/2) / n). Residents' ids all come after everyone else's, so in home
    order a facility's staff stood in one arc of its ring, apart from its residents."""
    members = np.flatnonzero(pop.group >= 0)
    g = pop.group[members].astype(np.int64)
    kind = g * 2 + pop.long_term_care[members]
    order = np.argsort(kind, kind="stable")  # by group, then kind, each in home order
    counts = np.bincount(kind, minlength=2 * pop.num_groups)
    rank = np.empty_like(order)
    rank[order] = np.arange(order.shape[0]) - (np.cumsum(counts) - counts)[kind[order]]
    place = (rank + 0.5) / counts[kind]
    return members[np.lexsort((kind, place, g))]


class OccupationLayer(ContactLayer):
    """Per group, a ring lattice over its members (:func:`ring_order`) with k = 2 * (min(round(mu),
    n - 1) // 2) neighbours (k/2 on each side: an odd mu gives one fewer, a group of 2 none),
    each ring contact rewired daily with probability p to a random member.

    Transmission pushes from infectious agents along their static ring contacts (kept as
    compressed rows per agent), skipping today's rewired ones, plus today's rewired contacts
    in their groups (contact ids are laid out group by group), so a day costs drawing the
    rewiring (about p * E) plus the contacts of the infectious, not E.
    """

    name = "occupation"
    days_at_once = True  # contacts_of takes one day per agent
    keep_days = 16  # days of rewiring kept, for tracing (a tracer with a longer window raises it)

    def __init__(
        self,
        pop: Population,
        cfg: OccupationContacts,
        replicates: int,
        device: torch.device,
        seed: int,
        shared: bool = False,
    ) -> None:
        self.seed, self.p, self.device = seed, cfg.rewire_probability, device
        self.replicates, self.shared = replicates, shared
        n = pop.size
        missing = [c for c in pop.categories if c not in cfg.degree]
        if missing:
            raise ValueError(f"contacts.occupation.degree has no entry for settings {missing}")
        degree = np.array([cfg.degree[c] for c in pop.categories], dtype=np.float64)
        members = ring_order(pop)
        g = pop.group[members]
        sizes = np.bincount(g, minlength=pop.num_groups)
        start = np.cumsum(sizes) - sizes
        mu = degree[pop.group_category]
        # Clipped to the group before the cast: a degree beyond int64 (1e19) would wrap negative.
        half = np.rint(np.minimum(mu, np.maximum(sizes - 1, 0))).astype(np.int64) // 2
        pos = np.arange(members.shape[0]) - start[g]
        h = half[g]
        owner = np.repeat(np.arange(members.shape[0]), h)
        offset = np.arange(owner.shape[0]) - np.repeat(np.cumsum(h) - h, h) + 1
        gg = g[owner]
        dst_pos = start[gg] + (pos[owner] + offset) % sizes[gg]
        src_a, dst_a = members[owner], members[dst_pos]
        e = src_a.shape[0]
        self.src = tile(src_a, replicates, n, device)
        self.dst = tile(dst_a, replicates, n, device)
        # The tables a day's transmission reads for every infectious agent hold agent and contact
        # ids as int32 where they fit (read back as int64): half the memory, and half the bytes
        # to read when many agents are infectious, where reading them is most of the layer's time.
        ids = torch.int64 if max(n, 2 * e) * replicates >= INDEX_LIMIT else torch.int32
        # Incident ring contacts per agent (compressed rows), for pushing from the infectious.
        ends = np.concatenate([src_a, dst_a])
        order = np.argsort(ends, kind="stable")
        counts = np.bincount(ends, minlength=n)
        self.inc_edge = tile(np.concatenate([np.arange(e), np.arange(e)])[order], replicates, e, device, ids)
        self.inc_nbr = tile(np.concatenate([dst_a, src_a])[order], replicates, n, device, ids)
        ptr = np.concatenate([[0], np.cumsum(np.tile(counts, replicates))])
        self.mean_incident = 2 * e / max(1, int((counts > 0).sum()))
        self.inc_ptr = torch.as_tensor(ptr, dtype=ids, device=device)
        # For rewiring: the first member slot of each edge's group and the group size.
        self.members = tile(members, replicates, n, device, ids)
        self.group_start = tile(start[gg], replicates, members.shape[0], device, ids)
        self.group_size = torch.as_tensor(sizes[gg], dtype=ids).repeat(replicates).to(device)
        norm = np.ones(n, dtype=np.float32)
        norm[members] = mu[g]
        # A setting of mean degree 0 has no contacts: its normaliser is kept off 0 (else 0 x inf = NaN
        # in the force, which read as no force at all, on every layer).
        self.coef = (cfg.weight / torch.as_tensor(np.maximum(norm, 1e-9))).repeat(replicates).to(device)
        setting = np.full(n, -1, dtype=np.int64)
        setting[members] = pop.group_category[g]
        self.setting = torch.as_tensor(setting).repeat(replicates).to(device)
        self.categories = list(pop.categories)
        self._base_coef = self.coef
        # Each agent's group (over all replicates; -1: none) and each group's ring contacts,
        # a range of contact ids (contacts are laid out group by group).
        ng = pop.num_groups
        per_group = sizes * half
        agent_group = np.where(pop.group >= 0, pop.group, -1)
        rep = torch.arange(replicates, dtype=torch.int64)[:, None]
        self.agent_group = (
            torch.where(
                torch.as_tensor(agent_group)[None, :] >= 0, torch.as_tensor(agent_group)[None, :] + rep * ng, -1
            )
            .flatten()
            .to(device)
        )
        self.group_edges = tile(np.cumsum(per_group) - per_group, replicates, e, device)
        self.group_edges_end = tile(np.cumsum(per_group), replicates, e, device)
        self._rewired_by_day: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self._ends: tuple[int, torch.Tensor] | None = None  # a day's new members of all its rewired contacts
        self._moved: tuple[int, torch.Tensor] | None = None  # a day's rewired contacts, as a mask over all
        # Per agent-replicate, whether it is among the agents of a contacts_of call (all false
        # between calls).
        self._mark = torch.zeros(self.agent_group.shape[0], dtype=torch.bool, device=device)

    def scale_settings(self, scale: dict[str, float]) -> None:
        """Multiply the weight of contacts in the named settings (e.g. SCHOOL: 0 closes
        schools); settings not named go back to 1."""
        factor = torch.ones(len(self.categories) + 1, device=self.coef.device)
        for name, value in scale.items():
            if name in self.categories:
                factor[self.categories.index(name)] = value
        self.coef = self._base_coef * factor.index_select(0, self.setting.clamp_min(-1) % (len(self.categories) + 1))

    def in_settings(self, agents: torch.Tensor, names: tuple[str, ...]) -> torch.Tensor:
        """Whether each of ``agents`` belongs to a group of one of the named settings."""
        codes = torch.tensor([self.categories.index(x) for x in names if x in self.categories], dtype=torch.int64)
        return torch.isin(self.setting.index_select(0, agents), codes.to(self.setting.device))

    def contacts_of(self, agents: torch.Tensor, day: int | torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Pairs (position in ``agents``, contact) of the agents' contacts on ``day`` (one day,
        or one day per agent; an agent may appear once per day): their ring contacts not
        rewired that day, and that day's rewired contacts with the agent at either end.

        All days are looked up at once: each day's rewired contacts within the agents' groups
        (binary searches in that day's rewiring; the rest of it is not touched) are laid end to
        end as keys ``(day - first) * E + contact`` (ascending), and each agent-day finds its own
        in them."""
        e, total, groups = self.src.shape[0], self.agent_group.shape[0], self.group_edges.shape[0]
        days = torch.as_tensor(day, device=agents.device).long().expand(agents.shape)
        if agents.numel() == 0:
            return agents[:0], agents[:0]
        first, last = int(days.min()), int(days.max())
        rel = days - first
        # The agents' (day, group) cells: an agent's ring contacts and the rewired contacts
        # that can reach it are all in its group's range of contact ids.
        group = self.agent_group.index_select(0, agents)
        member = flat_nonzero(group >= 0)
        cells = torch.unique(rel.index_select(0, member) * groups + group.index_select(0, member))
        cell_day, cell_group = cells // groups, cells % groups
        begin = self.group_edges.index_select(0, cell_group)
        end = self.group_edges_end.index_select(0, cell_group)
        # The rewired contacts in the agents' groups on their days, day by day.
        edges, uniforms, sizes, done = [self.src[:0]], [torch.zeros(0, device=agents.device)], [], 0
        for offset, count in enumerate(torch.bincount(cell_day, minlength=last + 1 - first).tolist()):
            if count == 0:
                sizes.append(0)
                continue
            ids, us = self._rewiring_of(first + offset)
            lo = torch.searchsorted(ids, begin[done : done + count])
            hi = torch.searchsorted(ids, end[done : done + count])
            j = expand_ranges(lo, hi)[0]
            edges.append(ids.index_select(0, j))
            uniforms.append(us.index_select(0, j))
            sizes.append(j.shape[0])
            done += count
        edge, u = torch.cat(edges), torch.cat(uniforms)
        when = torch.arange(last + 1 - first, device=agents.device).repeat_interleave(
            torch.tensor(sizes, device=agents.device)
        )
        keys = when * e + edge  # ascending: day by day, each day's ids ascending
        # Ring contacts that stay: the agent's incident contacts not rewired on its day.
        pos, owner = expand_rows(self.inc_ptr, agents)
        moved = find_sorted(keys, rel.index_select(0, owner) * e + self.inc_edge.index_select(0, pos))[1]
        stays = flat_nonzero(~moved)
        owners = [owner.index_select(0, stays)]
        partners = [self.inc_nbr.index_select(0, pos.index_select(0, stays)).long()]
        # Rewired contacts: the first end meets the new member instead, from either side.
        a, b = self.src.index_select(0, edge), self.new_ends(edge, u)
        mine, order = torch.sort(rel * total + agents)
        # Only the contacts with an end among the agents (a mark per agent, read by one gather)
        # are searched for on their day, not every rewired contact of the agents' groups.
        self._mark[agents] = True  # set and cleared in place: O(agents) work, no new tensor
        near = [flat_nonzero(self._mark.index_select(0, one)) for one in (a, b)]
        self._mark[agents] = False
        for one, other, at_end in ((a, b, near[0]), (b, a, near[1])):
            at, hit = find_sorted(mine, when.index_select(0, at_end) * total + one.index_select(0, at_end))
            hit = flat_nonzero(hit)
            owners.append(order.index_select(0, at.index_select(0, hit)))
            partners.append(other.index_select(0, at_end.index_select(0, hit)))
        return other_pairs(agents, torch.cat(owners), torch.cat(partners))

    def contacts_on(self, agents: torch.Tensor, day: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The pairs of :meth:`contacts_of` for one day and distinct ``agents``, in another
        order: their incident ring contacts, each kept, or, if rewired today, kept by its first
        end with the new member; then the day's rewired contacts whose new member is one of them."""
        if agents.numel() == 0:
            return agents[:0], agents[:0]
        pos, owner = expand_rows(self.inc_ptr, agents)
        edge = self.inc_edge.index_select(0, pos).long()
        idx = self.rewired_ids(day)
        moved = self.rewired(day, edge)
        stays, went = flat_nonzero(~moved), flat_nonzero(moved)
        owners = [owner.index_select(0, stays)]
        partners = [self.inc_nbr.index_select(0, pos.index_select(0, stays)).long()]
        # A rewired contact stays with its first end, who meets the new member instead.
        went = went.index_select(
            0,
            flat_nonzero(
                self.src.index_select(0, edge.index_select(0, went))
                == agents.index_select(0, owner.index_select(0, went))
            ),
        )
        owners.append(owner.index_select(0, went))
        partners.append(self.rewired_to(day, find_sorted(idx, edge.index_select(0, went))[0]))
        # The rewired contacts whose new member is one of the agents: among all of the day's,
        # if the day's transmission found their new members, else among their groups'.
        if self._ends is not None and self._ends[0] == day:
            ends, first_ends = self._ends[1], idx
        else:
            j = self.rewired_in_groups(day, agents)
            ends, first_ends = self.rewired_to(day, j), idx.index_select(0, j)
        self._mark[agents] = True
        hit = flat_nonzero(self._mark.index_select(0, ends))
        self._mark[agents] = False
        mine, order = torch.sort(agents)
        owners.append(order.index_select(0, find_sorted(mine, ends.index_select(0, hit))[0]))
        partners.append(self.src.index_select(0, first_ends.index_select(0, hit)))
        return other_pairs(agents, torch.cat(owners), torch.cat(partners))

    def _rewiring_of(self, day: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The day's rewired contacts (sorted ids) and the uniforms that place their new ends."""
        self.rewired_ids(day)
        return self._rewired_by_day[day]

    def rewired(self, day: int, edges: torch.Tensor) -> torch.Tensor:
        """Whether each of the ring contacts ``edges`` is rewired on ``day``: by binary search
        in the day's rewiring when they are very few, else through a mask over all contacts,
        kept for the day (a binary search costs as much as the mask from about 1/256 of the
        contacts on, and 20 times as much at 1/8: searchsorted, torch 2.13, one thread)."""
        idx = self.rewired_ids(day)
        if 256 * edges.shape[0] < self.src.shape[0]:
            return find_sorted(idx, edges)[1]
        if self._moved is None or self._moved[0] != day:
            mask = torch.zeros(self.src.shape[0], dtype=torch.bool, device=self.device).index_fill_(0, idx, True)
            self._moved = (day, mask)
        return self._moved[1].index_select(0, edges)

    def rewired_in_groups(self, day: int, agents: torch.Tensor) -> torch.Tensor:
        """Positions (ascending) in the day's rewiring of the contacts rewired in the groups
        of ``agents``: every rewired contact with one of them at either end is among them."""
        idx = self.rewired_ids(day)
        group = self.agent_group.index_select(0, agents)
        group = torch.unique(group[group >= 0])
        lo = torch.searchsorted(idx, self.group_edges.index_select(0, group))
        hi = torch.searchsorted(idx, self.group_edges_end.index_select(0, group))
        return expand_ranges(lo, hi)[0]

    def rewiring(self, day: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Today's rewired ring contacts (sorted distinct edge ids) and their new other ends."""
        return self.rewired_ids(day), self.rewired_to(day, None)

    def rewired_ids(self, day: int) -> torch.Tensor:
        """Today's rewired ring contacts, as sorted distinct edge ids.

        Each ring contact is rewired with probability p: the ids are drawn as running sums of
        geometric gaps, which costs about p * E draws instead of E; the uniforms that place
        their new ends are drawn with them and turned into members only when asked for.
        """
        if day in self._rewired_by_day:
            return self._rewired_by_day[day][0]
        copies = self.replicates if self.shared else 1  # shared: replicate 0's draw, repeated
        e = self.src.shape[0] // copies
        idx, u = self.src[:0], torch.zeros(0, device=self.device)
        if e > 0 and self.p > 0:
            gen = generator(self.seed, "occupation", day, self.device)
            if self.p >= 1:
                idx = torch.arange(e, device=self.device)
            else:
                log_q = math.log1p(-self.p)
                chunks, end = [], -1
                while end < e - 1:
                    want = int(self.p * (e - 1 - end) + 6 * math.sqrt(self.p * e + 1) + 16)
                    gaps = torch.rand(want, generator=gen, device=self.device, dtype=torch.float64)
                    gaps = gaps.neg_().log1p_().div_(log_q).floor_().long().add_(1)
                    pos = torch.cumsum(gaps, 0).add_(end)
                    end = int(pos[-1])
                    # pos ascends: the ids below e are a prefix (no mask over all of them)
                    chunks.append(pos[: int(torch.searchsorted(pos, e))] if end >= e else pos)
                idx = torch.cat(chunks)
            u = torch.rand(idx.shape[0], generator=gen, device=self.device)
            if copies > 1:
                idx = (idx[None, :] + torch.arange(copies, device=self.device)[:, None] * e).flatten()
                u = u.repeat(copies)
        if len(self._rewired_by_day) >= self.keep_days:  # keep the last days, for tracing
            self._rewired_by_day.pop(min(self._rewired_by_day))
        self._rewired_by_day[day] = (idx, u)
        return idx

    def rewired_to(self, day: int, j: torch.Tensor | None) -> torch.Tensor:
        """The new other ends of the day's rewired contacts at positions ``j`` of
        :meth:`rewired_ids` (all when ``None``): a member of the contact's group."""
        idx, u = self._rewiring_of(day)
        if j is not None:
            return self.new_ends(idx.index_select(0, j), u.index_select(0, j))
        ends = self.new_ends(idx, u)
        self._ends = (day, ends)  # kept for the day: who infected whom reads them again
        return ends

    def new_ends(self, edges: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """The new other ends of rewired contacts ``edges`` placed by uniforms ``u``: a member
        of the contact's group."""
        size = self.group_size.index_select(0, edges)
        slot = self.group_start.index_select(0, edges) + (u * size).long().clamp_max(size - 1)
        return self.members.index_select(0, slot).long()

    def edges(self, day: int) -> Edges:
        """The day's contacts: the ring lattice with today's rewiring."""
        idx, new = self.rewiring(day)
        dst = self.dst.clone()
        dst[idx] = new
        return Edges(self.src, dst)

    def contributions(
        self, day: int, src: torch.Tensor, w: torch.Tensor, x: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Pushed from the infectious along their ring contacts not rewired today, plus today's
        rewired contacts with an infectious end; when the infectious are many, read off every
        contact of the day instead."""
        if src.shape[0] * self.mean_incident > self.src.shape[0]:
            e = self.edges(day)
            return torch.cat([e.dst, e.src]), torch.cat([x.index_select(0, e.src), x.index_select(0, e.dst)])
        idx = self.rewired_ids(day)
        pos, owner = expand_rows(self.inc_ptr, src)
        moved = self.rewired(day, self.inc_edge.index_select(0, pos))
        # Many infectious (incident contacts past a quarter of the day's rewiring, where reading
        # every rewired contact costs less than finding those in their groups): every one.
        if 4 * pos.shape[0] > idx.shape[0]:
            a, b = self.src.index_select(0, idx), self.rewired_to(day, None)
        else:
            j = self.rewired_in_groups(day, src)
            a, b = self.src.index_select(0, idx.index_select(0, j)), self.rewired_to(day, j)
        t1, v1 = nonzero_pairs(b, x.index_select(0, a))
        t2, v2 = nonzero_pairs(a, x.index_select(0, b))
        return (  # the cat makes int32 neighbours int64 as it copies them (t1 and t2 are int64)
            torch.cat([self.inc_nbr.index_select(0, pos), t1, t2]),
            torch.cat([w.index_select(0, owner).masked_fill_(moved, 0.0), v1, v2]),
        )


class CommunityLayer(ContactLayer):
    """Random community contacts. Each agent has a fixed daily number of contacts k_i (negative
    binomial by age class), held as k_i "stubs" laid out in home order; what varies is how a
    day's stubs are joined, which each construction prepares in its :meth:`_build`
    (:class:`PooledCommunityLayer`, or the reference code's
    :class:`~abm.engine.reference_contacts.StubPathCommunityLayer`)."""

    name = "community"

    def __init__(
        self,
        pop: Population,
        cfg: CommunityContacts,
        replicates: int,
        device: torch.device,
        seed: int,
        shared: bool = False,
    ) -> None:
        self.seed, self.device, self.cfg, self.shared = seed, device, cfg, shared
        self.replicates, self.agents = replicates, pop.size
        n = pop.size
        rng = np.random.default_rng([seed, 0xC0])
        cls = np.asarray(AGE_CLASS_OF_GROUP)[pop.age_group]
        mean = np.asarray(cfg.mean_contacts, dtype=np.float64)[cls]
        sd = np.asarray(cfg.sd_contacts, dtype=np.float64)[cls]
        if shared:
            ks = [negative_binomial(rng, mean, sd)] * replicates
        else:
            ks = [negative_binomial(rng, mean, sd) for _ in range(replicates)]
        k = torch.as_tensor(np.concatenate(ks), dtype=torch.int64, device=device)
        # stubs[j]: the agent (over all R * N) of stub j; stub_ptr: each agent's stubs (CSR).
        self.stubs = torch.repeat_interleave(torch.arange(n * replicates, device=device), k)
        self.stub_ptr = torch.cat([k.new_zeros(1), torch.cumsum(k, 0)])
        self.counts = torch.as_tensor([int(x.sum()) for x in ks], dtype=torch.int64, device=device)
        self.starts = torch.cumsum(self.counts, 0) - self.counts
        per_tract = max(1.0, float(self.counts.double().mean()) / max(1, len(pop.tracts)))
        self.spread = cfg.local_spread_tracts * per_tract
        norm = np.asarray(cfg.mean_contacts, dtype=np.float32)[cls]
        self.coef = (cfg.weight / torch.as_tensor(np.maximum(norm, 1e-9))).repeat(replicates).to(device)
        self._build()

    @abstractmethod
    def _build(self) -> None:
        """What the construction makes of the stubs, once they are drawn: its network, or what it
        needs to join a day's stubs (the settings and the stubs are on ``self``)."""

    def built_for(
        self, pop: Population, cfg: CommunityContacts, replicates: int, device: torch.device, seed: int, shared: bool
    ) -> bool:
        """Whether this layer is the one these arguments build (for a population of its size:
        the caller vouches that it is the same population). The layer keeps no state of a run,
        so such a layer can serve another run instead of a new one."""
        return (self.agents, self.cfg, self.replicates, self.device, self.seed, self.shared) == (
            pop.size,
            cfg,
            replicates,
            device,
            seed,
            shared,
        )

    def other_ends(self, first: torch.Tensor, count: int, u: torch.Tensor) -> torch.Tensor:
        """The other end of contacts whose first ends are the stub positions ``first`` (within a
        replicate of ``count`` stubs), placed by uniforms ``u``: with probability local_share a
        stub near the first (uniformly within +-sqrt(3) sd of it, so the sd is the local spread,
        reflected at the ends of the stubs), otherwise any stub."""
        share, last = self.cfg.local_share, float(count - 1)
        local = u < share
        # first + round((u / share - 0.5) * width) where local, else floor((u - share) / (1 -
        # share) * last); computed in place (the same operations in the same order), as the
        # network of a whole county is built from tens of millions of these.
        if share > 0:
            near = u.div(share).sub_(0.5).mul_(2 * math.sqrt(3) * self.spread).round_().add_(first)
            # A position beyond an end is reflected back (-1 -> 0, count -> count - 1), which keeps
            # every stub's expected share of local contacts equal; clamped, the draws beyond an end
            # all fell on its stub, whose agent met about 0.09 sqrt(3) spread people a day.
            period = 2.0 * count
            near.remainder_(period)
            near = torch.where(near < count, near, (period - 1) - near)
        else:
            near = first.to(u.dtype)
        far = u.sub(share).div_(max(1 - share, 1e-12)).mul_(last).floor_()
        return near.where(local, far).clamp_(0, last).long()

    def contributions(
        self, day: int, src: torch.Tensor, w: torch.Tensor, x: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Pushed from the infectious along their contacts of the day."""
        owner, partner = self.contacts_of(src, day)
        return partner, w.index_select(0, owner)


class PooledCommunityLayer(CommunityLayer):
    """Community contacts that recur on a cycle of ``cycle_days`` days (``construction:
    local_mix``).

    At setup every stub starts ``cycle_days / 2`` potential contacts, each ending at a stub near
    home (local_share) or anywhere, one on every other day of the cycle (on the even or the odd
    days, drawn per stub). So each day a stub starts a contact with probability 1/2 and receives
    about 1/2: an agent's expected daily degree is k_i, and over a cycle it meets about
    ``cycle_days * k_i`` different people, the same ones again in the next cycle.

    Potential contact e joins the agent of stub e // h (h = cycle_days / 2) to the agent
    ``partner[e]`` on the days d with d mod cycle_days = parity(stub) + 2 (e mod h). The
    contacts that end at an agent are indexed by (agent, day of the cycle), so a day's contacts
    of any agents are read off directly: transmission pushes from the infectious and tracing
    looks up index cases, each at the cost of the contacts themselves.
    """

    days_at_once = True  # contacts_of takes one day per agent

    def _build(self) -> None:
        """Draw every stub's potential contacts of the cycle and index them by the agent they
        end at and the day of the cycle."""
        agents, replicates, device, shared = self.agents, self.replicates, self.device, self.shared
        m = self.cycle = self.cfg.cycle_days
        h = self.per_stub = m // 2
        gen = generator(self.seed, "community-cycle", -1, device)
        copies = replicates if shared else 1  # shared: replicate 0's network, repeated
        drawn = self.stubs.shape[0] // copies
        self.parity = (torch.rand(drawn, generator=gen, device=device) < 0.5).to(torch.int8).repeat(copies)
        partner = []
        chunk = 1 << 20  # stubs per draw, to bound the memory of building the network
        bounds = list(zip(self.starts.tolist(), self.counts.tolist(), strict=True))
        for start, count in bounds[: len(bounds) // copies]:
            for lo in range(0, count, chunk):
                first = torch.arange(lo, min(lo + chunk, count), device=device).repeat_interleave(h)
                u = torch.rand(first.shape[0], generator=gen, device=device, dtype=torch.float64)
                partner.append(self.stubs.index_select(0, self.other_ends(first, count, u) + start).int())
        if copies > 1:
            partner = [torch.cat(partner) + r * agents for r in range(copies)]
        self.partner = torch.cat(partner) if partner else torch.zeros(0, dtype=torch.int32, device=device)
        del partner
        # Contacts ending at each agent, by (agent, day of the cycle): rows agent * m + day.
        rows = agents * replicates * m
        wide = torch.int64 if rows >= INDEX_LIMIT else torch.int32
        phase = self.parity.to(wide).repeat_interleave(h) + (2 * torch.arange(h, dtype=wide, device=device)).repeat(
            self.stubs.shape[0]
        )
        key = self.partner.to(wide) * m + phase
        del phase
        # Sorted replicate by replicate: contacts never cross replicates and are laid out
        # replicate by replicate, so this is the stable sort of all the keys, while no sort is
        # longer than one replicate's contacts (torch sorts at most INT_MAX elements at once).
        # rev_from: the agent that starts each of them (the stub's agent), in that order, kept
        # instead of the contacts' ids so that a day's look-up is one gather, not two.
        wide_agent = torch.int64 if agents * replicates >= INDEX_LIMIT else torch.int32
        self.rev_from = torch.empty(key.shape[0], dtype=wide_agent, device=device)
        for start, count in zip(self.starts.tolist(), self.counts.tolist(), strict=True):
            lo, hi = start * h, (start + count) * h
            stub = torch.sort(key[lo:hi], stable=True).indices.add_(lo).div_(h, rounding_mode="floor")
            self.rev_from[lo:hi] = self.stubs.index_select(0, stub)
            del stub
        counts = torch.bincount(key, minlength=rows)
        # The pointers run to the number of contacts (about 17 per agent-replicate at the
        # defaults, more than the 10 rows): int64 once either passes int32.
        ptr = torch.int64 if max(rows, key.shape[0]) >= INDEX_LIMIT else torch.int32
        del key
        self.rev_ptr = torch.cat([counts.new_zeros(1), torch.cumsum(counts, 0)]).to(ptr)

    def edges(self, day: int) -> Edges:
        """The day's contacts, each once: those started today."""
        p = day % self.cycle
        s = flat_nonzero(self.parity == p % 2)
        e = s * self.per_stub + p // 2
        return Edges(self.stubs.index_select(0, s), self.partner.index_select(0, e).long())

    def contacts_of(self, agents: torch.Tensor, day: int | torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Pairs (position in ``agents``, contact) of the agents' contacts on ``day`` (one day,
        or one day per agent): those they start that day and those that end at them."""
        p = day % self.cycle
        pos, own1 = expand_rows(self.stub_ptr, agents)
        pe = p.index_select(0, own1) if torch.is_tensor(p) else p
        started = flat_nonzero(self.parity.index_select(0, pos) == pe % 2)
        own1 = own1.index_select(0, started)
        pe = pe.index_select(0, started) if torch.is_tensor(pe) else pe
        to = self.partner.index_select(0, pos.index_select(0, started) * self.per_stub + pe // 2).long()
        pos2, own2 = expand_rows(self.rev_ptr, agents * self.cycle + p)
        frm = self.rev_from.index_select(0, pos2).long()
        return other_pairs(agents, torch.cat([own1, own2]), torch.cat([to, frm]))


def negative_binomial(rng: np.random.Generator, mean: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """Counts with the given mean and sd: negative binomial where sd^2 > mean, Poisson where
    0 < sd^2 <= mean, and exactly round(mean) where sd is 0. A mean of 0 gives 0 whatever the sd
    (Poisson, not a negative binomial, whose n = mean^2 / (sd^2 - mean) must be above 0)."""
    var = sd**2
    over = (var > mean + 1e-12) & (mean * mean > 0)
    out = np.where(sd > 0, rng.poisson(mean), np.rint(mean).astype(np.int64))
    if over.any():
        m, v = mean[over], var[over]
        out[over] = rng.negative_binomial(m**2 / (v - m), m / v)
    return out.astype(np.int64)
