"""Contact layers: household (static), occupation (daily small-world) and community (daily,
near home). Each layer builds a day's contacts directly from its structure, from a generator
keyed by (seed, layer, day), so a past day can be re-created instead of stored.

R replicates are R disjoint copies of the population: agent ``r * N + i`` is agent ``i`` of
replicate ``r``; no contact crosses copies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field

from abm.engine.rng import generator
from abm.populations.population import LONG_TERM_CARE, SCHOOL, Population

AGE_CLASS_OF_GROUP = [0, 0, 1, 1, 1, 1, 1, 2, 2]  # child 0-19, adult 20-69, elderly 70+


def default_degrees() -> dict[str, float]:
    """Mean daily contacts inside a school, workplace or facility, by setting (thesis model)."""
    return {
        "AGRICULTURE": 14, "MINING": 7, "UTILITIES": 7, "CONSTRUCTION": 7, "MANUFACTURING": 7,
        "WHOLESALETRADE": 1.75, "RETAILTRADE": 4.69, "TRANSPORTATION": 8.75, "INFORMATION": 1.75,
        "FINANCEINSURANCE": 4.69, "REALESTATERENTAL": 3.5, "SCIENTIFICTECHNICAL": 3.5,
        "ENTERPRISEMANAGEMENT": 3.5, "WASTEMANAGEMENT": 5.6, "EDUCATION": 2.31, "HEALTHCARE": 19.95,
        "ART": 3.5, "FOOD": 5.46, "OTHER": 4.69, SCHOOL: 10, LONG_TERM_CARE: 3,
    }  # fmt: skip


class HouseholdContacts(BaseModel):
    """Everyone in a household meets everyone else every day."""

    model_config = ConfigDict(extra="forbid")
    weight: float = Field(2.0, ge=0, description="relative weight of a household contact")


class OccupationContacts(BaseModel):
    """Schools, workplaces and care facilities: a Watts-Strogatz graph per group each day."""

    model_config = ConfigDict(extra="forbid")
    weight: float = Field(1.0, ge=0, description="relative weight of a school or work contact")
    rewire_probability: float = Field(0.1, ge=0, le=1, description="share of ring contacts rewired daily")
    degree: dict[str, float] = Field(
        default_factory=default_degrees,
        description="mean daily contacts by setting (sector, SCHOOL, LONG_TERM_CARE)",
    )


class CommunityContacts(BaseModel):
    """Random daily contacts, each agent with a fixed daily number, mostly near home."""

    model_config = ConfigDict(extra="forbid")
    weight: float = Field(0.25, ge=0, description="relative weight of a community contact")
    mean_contacts: tuple[float, float, float] = Field(
        (2.0, 4.0, 3.0), description="mean daily contacts of children (0-19), adults, elderly (70+)"
    )
    sd_contacts: tuple[float, float, float] = Field(
        (2.0, 4.0, 3.0), description="sd of daily contacts by age class (negative binomial, sd^2 > mean)"
    )
    local_share: float = Field(0.7, ge=0, le=1, description="share of contacts made near home")
    local_spread_tracts: float = Field(
        2.0, gt=0, description="sd, in tracts along the map's space-filling order, of a local contact"
    )


class ContactConfig(BaseModel):
    """The three contact layers."""

    model_config = ConfigDict(extra="forbid")
    household: HouseholdContacts = HouseholdContacts()
    occupation: OccupationContacts = OccupationContacts()
    community: CommunityContacts = CommunityContacts()


def tile(a: np.ndarray, replicates: int, stride: int, device: torch.device) -> torch.Tensor:
    """Repeat index array ``a`` for each replicate, offsetting copy r by ``r * stride``."""
    t = torch.as_tensor(a, dtype=torch.int64)
    off = torch.arange(replicates, dtype=torch.int64)[:, None] * stride
    return (t[None, :] + off).flatten().to(device)


@dataclass
class Edges:
    """One day's undirected contacts of one layer as two index arrays. A contact may join an
    agent to itself (a rewired or random contact that landed home); such a contact carries no
    infection, since an infectious agent is not susceptible, and tracing skips it."""

    src: torch.Tensor
    dst: torch.Tensor


class HouseholdLayer:
    """Complete graph per household, computed as per-household sums (no edges)."""

    name = "household"

    def __init__(self, pop: Population, cfg: HouseholdContacts, replicates: int, device: torch.device) -> None:
        self.index = tile(pop.household, replicates, pop.num_households, device)
        self.num = pop.num_households * replicates
        size = torch.as_tensor(pop.household_size[pop.household], dtype=torch.float32)
        self.coef = (cfg.weight / size).repeat(replicates).to(device)

    def pressure(self, x: torch.Tensor) -> torch.Tensor:
        """Sum of infectiousness over each agent's household members other than itself."""
        total = torch.zeros(self.num, dtype=x.dtype, device=x.device).index_add_(0, self.index, x)
        return total[self.index] - x

    def edges(self, day: int) -> Edges:
        """Explicit household pairs (for tracing), built from the contiguous household ranges."""
        n = self.index.shape[0]
        idx = torch.arange(n, device=self.index.device)
        src, dst = [], []
        lag = 1
        while lag < n:
            same = self.index[lag:] == self.index[:-lag]
            if not bool(same.any()):
                break
            src.append(idx[:-lag][same])
            dst.append(idx[lag:][same])
            lag += 1
        if not src:
            empty = torch.zeros(0, dtype=torch.int64, device=self.index.device)
            return Edges(empty, empty)
        return Edges(torch.cat(src), torch.cat(dst))


class OccupationLayer:
    """Per group, a ring lattice over its members (in home order) with k = min(round(mu),
    n - 1) neighbours, each ring contact rewired daily with probability p to a random member."""

    name = "occupation"

    def __init__(self, pop: Population, cfg: OccupationContacts, replicates: int, device: torch.device, seed: int) -> None:
        self.seed, self.p, self.device = seed, cfg.rewire_probability, device
        n = pop.size
        missing = [c for c in pop.categories if c not in cfg.degree]
        if missing:
            raise ValueError(f"contacts.occupation.degree has no entry for settings {missing}")
        degree = np.array([cfg.degree[c] for c in pop.categories], dtype=np.float64)
        members = np.flatnonzero(pop.group >= 0)
        members = members[np.argsort(pop.group[members], kind="stable")]
        g = pop.group[members]
        sizes = np.bincount(g, minlength=pop.num_groups)
        start = np.cumsum(sizes) - sizes
        mu = degree[pop.group_category]
        half = np.minimum(np.rint(mu).astype(np.int64), np.maximum(sizes - 1, 0)) // 2
        pos = np.arange(members.shape[0]) - start[g]
        h = half[g]
        owner = np.repeat(np.arange(members.shape[0]), h)
        offset = np.arange(owner.shape[0]) - np.repeat(np.cumsum(h) - h, h) + 1
        gg = g[owner]
        dst_pos = start[gg] + (pos[owner] + offset) % sizes[gg]
        self.src = tile(members[owner], replicates, n, device)
        self.dst = tile(members[dst_pos], replicates, n, device)
        # For rewiring: the first member slot of each edge's group and the group size.
        self.members = tile(members, replicates, n, device)
        self.group_start = tile(start[gg], replicates, members.shape[0], device)
        self.group_size = torch.as_tensor(sizes[gg], dtype=torch.int64).repeat(replicates).to(device)
        norm = np.ones(n, dtype=np.float32)
        norm[members] = mu[g]
        self.coef = (cfg.weight / torch.as_tensor(norm)).repeat(replicates).to(device)
        self.coef_mask = torch.as_tensor(pop.group >= 0).repeat(replicates).to(device)

    def edges(self, day: int) -> Edges:
        """The day's contacts: the ring lattice with today's rewiring.

        Each ring contact is hit by Poisson(-ln(1 - p)) rewiring draws at uniform positions,
        so it is rewired with probability exactly p, at the cost of p * E draws, not E.
        """
        e = self.src.shape[0]
        if e == 0 or self.p == 0:
            return Edges(self.src, self.dst)
        gen = generator(self.seed, "occupation", day, self.device)
        rate = torch.tensor([-math.log1p(-min(self.p, 1 - 1e-12)) * e], dtype=torch.float64, device=self.device)
        k = int(torch.poisson(rate, generator=gen).item())
        hits = torch.randint(e, (k,), generator=gen, device=self.device)
        u = torch.rand(k, generator=gen, device=self.device)
        # An edge hit more than once is rewired once, by its first draw (deterministic).
        idx, inverse = torch.unique(hits, return_inverse=True)
        first = torch.full_like(idx, k).scatter_reduce_(0, inverse, torch.arange(k, device=self.device), "amin")
        u = u[first]
        size = self.group_size[idx]
        slot = self.group_start[idx] + (u * size).long().clamp_max(size - 1)
        dst = self.dst.clone()
        dst[idx] = self.members[slot]
        return Edges(self.src, dst)


class CommunityLayer:
    """Each agent has a fixed daily number of contacts k_i (negative binomial by age class).
    Each day, half as many contacts as stubs are drawn: one end a uniformly random stub, the
    other a stub near it in home order (local) or a uniformly random stub; so an agent's
    expected degree is k_i."""

    name = "community"

    def __init__(self, pop: Population, cfg: CommunityContacts, replicates: int, device: torch.device, seed: int) -> None:
        self.seed, self.device, self.cfg = seed, device, cfg
        n = pop.size
        rng = np.random.default_rng([seed, 0xC0])
        cls = np.asarray(AGE_CLASS_OF_GROUP)[pop.age_group]
        mean = np.asarray(cfg.mean_contacts, dtype=np.float64)[cls]
        sd = np.asarray(cfg.sd_contacts, dtype=np.float64)[cls]
        stubs_per_rep, counts = [], []
        for r in range(replicates):
            k = negative_binomial(rng, mean, sd)
            stubs_per_rep.append(np.repeat(np.arange(n), k) + r * n)
            counts.append(int(k.sum()))
        self.stubs = torch.as_tensor(np.concatenate(stubs_per_rep), dtype=torch.int64, device=device)
        self.counts = torch.as_tensor(counts, dtype=torch.int64, device=device)
        self.starts = torch.cumsum(self.counts, 0) - self.counts
        per_tract = max(1.0, float(np.mean(counts)) / max(1, len(pop.tracts)))
        self.spread = cfg.local_spread_tracts * per_tract
        norm = np.asarray(cfg.mean_contacts, dtype=np.float32)[cls]
        self.coef = (cfg.weight / torch.as_tensor(np.maximum(norm, 1e-9))).repeat(replicates).to(device)
        # Edge slots per replicate: floor(stubs / 2).
        edge_rep = torch.repeat_interleave(torch.arange(replicates, device=device), self.counts // 2)
        self.edge_count = self.counts[edge_rep].to(torch.float32)
        self.edge_start = self.starts[edge_rep]

    def edges(self, day: int) -> Edges:
        """The day's contacts: two uniforms per contact. The first picks one end's stub; the
        second decides local or not and, rescaled, places the other end (uniformly within
        +-sqrt(3) sd stubs of the first, or anywhere)."""
        gen = generator(self.seed, "community", day, self.device)
        u = torch.rand(2, self.edge_count.shape[0], generator=gen, device=self.device)
        last = self.edge_count - 1
        a = (u[0] * self.edge_count).floor_().clamp_max_(last)
        share = self.cfg.local_share
        v = u[1]
        local = v < share
        if share > 0:
            jump = (v / share - 0.5) * (2 * math.sqrt(3) * self.spread)
        else:
            jump = torch.zeros_like(v)
        far = ((v - share) / max(1 - share, 1e-12)) * self.edge_count
        b = torch.where(local, a + jump.round_(), far.floor_()).clamp_(min=0).minimum(last)
        return Edges(self.stubs[self.edge_start + a.long()], self.stubs[self.edge_start + b.long()])


def negative_binomial(rng: np.random.Generator, mean: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """Counts with the given mean and sd: negative binomial where sd^2 > mean, Poisson where
    0 < sd^2 <= mean, and exactly round(mean) where sd is 0."""
    var = sd**2
    over = var > mean + 1e-12
    out = np.where(sd > 0, rng.poisson(mean), np.rint(mean).astype(np.int64))
    if over.any():
        m, v = mean[over], var[over]
        out[over] = rng.negative_binomial(m**2 / (v - m), m / v)
    return out.astype(np.int64)
