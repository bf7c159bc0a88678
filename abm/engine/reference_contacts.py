"""The community-contact construction of the thesis model's reference code (specs: epidemic
model section 2.4 and section 11 Q8), selected by ``contacts.community.construction:
stub_path``.

Each agent keeps its fixed daily number of contacts k_i (negative binomial by age class, as in
:class:`~abm.engine.contacts.CommunityLayer`). Every day the list in which agent i appears k_i
times is shuffled and consecutive entries are joined (x0-x1, x1-x2, ...): a path through the
shuffled stubs, so an agent has about 2 k_i contacts. A contact may join an agent to itself
(it carries nothing). The reference keeps the day's contacts as a simple graph; here a pair
that falls twice on the path counts twice, which at 100,000 agents concerns a handful of the
~337,000 daily contacts.
"""

from __future__ import annotations

import torch

from abm.engine.contacts import CommunityContacts, CommunityLayer, Edges, PooledCommunityLayer, nonzero_pairs
from abm.engine.rng import generator
from abm.populations.population import Population


class StubPathCommunityLayer(CommunityLayer):
    """Daily community contacts as a path through each replicate's shuffled stubs."""

    keep_days = 8  # recent days kept (as int32), for tracing's look-back

    def __init__(
        self, pop: Population, cfg: CommunityContacts, replicates: int, device: torch.device, seed: int
    ) -> None:
        super().__init__(pop, cfg, replicates, device, seed)
        self._bounds = [(int(s), int(c)) for s, c in zip(self.starts.tolist(), self.counts.tolist(), strict=True)]
        self._days: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def edges(self, day: int) -> Edges:
        """The day's path through the shuffled stubs of each replicate. One permutation per
        replicate (a loop over replicates, not agents): drawing R permutations is about 16x
        faster than one batched sort of R rows of random keys."""
        if day not in self._days:
            gen = generator(self.seed, "community", day, self.device)
            src, dst = [], []
            for start, count in self._bounds:
                if count < 2:
                    continue
                order = self.stubs[start : start + count].index_select(
                    0, torch.randperm(count, generator=gen, device=self.device)
                )
                src.append(order[:-1])
                dst.append(order[1:])
            empty = self.stubs[:0]
            a, b = (torch.cat(src), torch.cat(dst)) if src else (empty, empty)
            if len(self._days) >= self.keep_days:
                self._days.pop(min(self._days))
            self._days[day] = (a.int(), b.int())
        a, b = self._days[day]
        return Edges(a.long(), b.long())

    def contacts_of(self, agents: torch.Tensor, day: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Pairs (position in ``agents``, contact) of the agents' contacts on ``day``, found by
        scanning the day's path from both ends (``agents`` distinct)."""
        e = self.edges(day)
        slot = torch.full((self.coef.shape[0],), -1, dtype=torch.int64, device=self.device)
        slot[agents] = torch.arange(agents.shape[0], device=self.device)
        owners, partners = [], []
        for a, b in ((e.src, e.dst), (e.dst, e.src)):
            hit = (slot.index_select(0, a) >= 0).nonzero().squeeze(1)
            owners.append(slot.index_select(0, a.index_select(0, hit)))
            partners.append(b.index_select(0, hit))
        owner, partner = torch.cat(owners), torch.cat(partners)
        keep = partner != agents.index_select(0, owner)
        return owner[keep], partner[keep]

    def contributions(
        self, day: int, src: torch.Tensor, w: torch.Tensor, x: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Read off the day's whole path, keeping the contacts with an infectious end."""
        e = self.edges(day)
        return nonzero_pairs(torch.cat([e.dst, e.src]), torch.cat([x.index_select(0, e.src), x.index_select(0, e.dst)]))


def community_layer(
    pop: Population, cfg: CommunityContacts, replicates: int, device: torch.device, seed: int
) -> CommunityLayer:
    """The community layer the configuration asks for (``construction``)."""
    if cfg.construction == "stub_path":
        return StubPathCommunityLayer(pop, cfg, replicates, device, seed)
    return PooledCommunityLayer(pop, cfg, replicates, device, seed)
