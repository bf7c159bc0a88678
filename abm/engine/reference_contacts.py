"""The community-contact construction of the thesis model's reference code (specs: epidemic
model section 2.4 and section 11 Q8), selected by ``contacts.community.construction:
stub_path``.

Each agent keeps its fixed daily number of contacts k_i (negative binomial by age class, as in
:class:`~abm.engine.contacts.CommunityLayer`). Every day the list in which agent i appears k_i
times is shuffled and consecutive entries are joined (x0-x1, x1-x2, ...): a path through the
shuffled stubs, so an agent has about 2 k_i contacts. A contact may join an agent to itself
(it carries nothing). The reference keeps the day's contacts as a simple graph; here a pair
that falls twice on the path counts twice, which at 100,000 agents concerns a handful of the
~344,000 daily contacts (343,820 measured, BENCHMARKS.md).
"""

from __future__ import annotations

import torch

from abm.engine.contacts import (
    CommunityContacts,
    CommunityLayer,
    Edges,
    PooledCommunityLayer,
    expand_rows,
    flat_nonzero,
    other_pairs,
)
from abm.engine.rng import generator
from abm.populations.population import Population


class StubPathCommunityLayer(CommunityLayer):
    """Daily community contacts as a path through each replicate's shuffled stubs."""

    keep_days = 8  # recent days kept (as int32), for tracing's look-back

    def _build(self) -> None:
        """Lay out where each replicate's path may join neighbours; the paths themselves are
        drawn day by day (:meth:`_path`)."""
        self._bounds = [(int(s), int(c)) for s, c in zip(self.starts.tolist(), self.counts.tolist(), strict=True)]
        # A day's path has one position per stub, replicate by replicate (the stubs' own layout):
        # which positions have a neighbour before and after them within their replicate.
        first = torch.repeat_interleave(self.starts, self.counts)
        place = torch.arange(self.stubs.shape[0], device=self.device)
        self._has_left = place > first
        self._has_right = place + 1 < first + torch.repeat_interleave(self.counts, self.counts)
        del first, place
        self._days: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # day: (path, place of each stub)
        self._stubs32 = self.stubs.int()  # the path's agents, gathered as int32

    def _path(self, day: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The day's path (the agent at each position) and each stub's position on it. One
        permutation per replicate (a loop over replicates, not agents): drawing R permutations
        is about 16x faster than one batched sort of R rows of random keys."""
        if day not in self._days:
            gen = generator(self.seed, "community", day, self.device)
            drawn = self._bounds[:1] if self.shared else self._bounds  # shared: replicate 0's, repeated
            order = [
                torch.randperm(count, generator=gen, device=self.device) + start
                if count >= 2
                else torch.arange(start, start + count, device=self.device)
                for start, count in drawn
            ]
            if self.shared:
                order = [order[0] + start for start, _ in self._bounds] if order else []
            stub_at = torch.cat(order) if order else self.stubs[:0]
            # The inverse permutation (scatter_ is several times faster than index_copy_ here).
            place = torch.empty(stub_at.shape[0], dtype=torch.int32, device=self.device)
            place.scatter_(0, stub_at, torch.arange(stub_at.shape[0], dtype=torch.int32, device=self.device))
            if len(self._days) >= self.keep_days:
                self._days.pop(min(self._days))
            self._days[day] = (self._stubs32.index_select(0, stub_at), place)
        return self._days[day]

    def edges(self, day: int) -> Edges:
        """The day's contacts: consecutive positions of the path within each replicate."""
        path, _ = self._path(day)
        return Edges(path[self._has_right].long(), path[self._has_left].long())

    def contacts_of(self, agents: torch.Tensor, day: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Pairs (position in ``agents``, contact) of the agents' contacts on ``day``: the path
        neighbours of each of their stubs, at the cost of their own stubs."""
        path, place = self._path(day)
        stub, owner = expand_rows(self.stub_ptr, agents)
        at = place.index_select(0, stub).long()
        before, after = self._has_left.index_select(0, at), self._has_right.index_select(0, at)
        owner = torch.cat([owner[before], owner[after]])
        partner = torch.cat([path.index_select(0, at[before] - 1), path.index_select(0, at[after] + 1)]).long()
        return other_pairs(agents, owner, partner)

    def contributions(
        self, day: int, src: torch.Tensor, w: torch.Tensor, x: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Read off the day's whole path, keeping the contacts with an infectious end: first
        each contact's later end reached from an infectious earlier end, then the reverse (the
        order of the day's edges, so that sums come out the same)."""
        path, _ = self._path(day)
        xp = x.index_select(0, path)
        on = xp != 0
        ahead = flat_nonzero(on & self._has_right)
        behind = flat_nonzero(on & self._has_left)
        target = torch.cat([path.index_select(0, ahead + 1), path.index_select(0, behind - 1)]).long()
        return target, torch.cat([xp.index_select(0, ahead), xp.index_select(0, behind)])


def community_layer(
    pop: Population, cfg: CommunityContacts, replicates: int, device: torch.device, seed: int, shared: bool = False
) -> CommunityLayer:
    """The community layer the configuration asks for (``construction``); ``shared``: one draw
    of the contacts for every replicate."""
    if cfg.construction == "stub_path":
        return StubPathCommunityLayer(pop, cfg, replicates, device, seed, shared)
    return PooledCommunityLayer(pop, cfg, replicates, device, seed, shared)
