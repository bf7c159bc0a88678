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

from abm.engine.contacts import CommunityContacts, CommunityLayer, Edges
from abm.engine.rng import generator
from abm.populations.population import Population


class StubPathCommunityLayer(CommunityLayer):
    """Daily community contacts as a path through each replicate's shuffled stubs."""

    def __init__(
        self, pop: Population, cfg: CommunityContacts, replicates: int, device: torch.device, seed: int
    ) -> None:
        super().__init__(pop, cfg, replicates, device, seed)
        self._bounds = [(int(s), int(c)) for s, c in zip(self.starts.tolist(), self.counts.tolist(), strict=True)]

    def edges(self, day: int) -> Edges:
        """The day's path through the shuffled stubs of each replicate. One permutation per
        replicate (a loop over replicates, not agents): drawing R permutations is about 16x
        faster than one batched sort of R rows of random keys."""
        if self._day == day:
            return self._edges
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
        self._edges = Edges(torch.cat(src) if src else empty, torch.cat(dst) if dst else empty)
        self._day = day
        return self._edges


def community_layer(
    pop: Population, cfg: CommunityContacts, replicates: int, device: torch.device, seed: int
) -> CommunityLayer:
    """The community layer the configuration asks for (``construction``)."""
    if cfg.construction == "stub_path":
        return StubPathCommunityLayer(pop, cfg, replicates, device, seed)
    return CommunityLayer(pop, cfg, replicates, device, seed)
