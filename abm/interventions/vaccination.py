"""Two-dose vaccination: oldest first (or a custom order of age groups, age ranges such as 65 and
over, long-term care residents and occupation settings, such as health care workers first), first
doses before second doses, a daily supply with a shelf life, delayed protection with an efficacy per dose,
a dose-2 gap and a dose-2 dropout drawn once per agent; all-or-nothing or leaky protection.

Writes ``immune`` (all-or-nothing) or ``susceptibility_scale`` (leaky) of the agent state.
Daily counts (timeseries columns): ``first_doses`` and ``second_doses`` given that day, and
``vaccine_protected``, the susceptible agents whose protection is in effect (under
all-or-nothing protection they stay in the susceptible stage for good).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from abm.engine.config import Phase, Stage
from abm.engine.rng import generator
from abm.engine.simulator import AgentState, Simulation
from abm.interventions.config.age_ranges import bands_problem, parse_range
from abm.interventions.config.vaccination import RESIDENTS, VaccinationSpec
from abm.interventions.config.vaccination import VaccinationConfig as VaccinationConfig  # named here as before
from abm.populations.population import Population


class _Scan(NamedTuple):
    """A window of each replicate's queue: the agents, their queue positions ([replicate,
    entry]) and the mask of the candidates taken from it."""

    agents: torch.Tensor
    pos: torch.Tensor
    take: torch.Tensor


@dataclass
class _DoseRules:
    """One day's tests on agents (flat indices), read off the programme's dose records as they
    stand when called: who may have a dose today, and whose queue entry is done with for good."""

    vacc: Vaccination
    state: AgentState
    day: int
    returns: torch.Tensor  # bool per agent: comes back for dose 2 (today's draw under "daily")

    def open_to_a_dose(self, a: torch.Tensor) -> torch.Tensor:
        """Neither in hospital (or beyond) nor isolated."""
        st = self.state
        return (st.stage.index_select(0, a) < Stage.HOSPITALIZED) & ~st.isolated.index_select(0, a)

    def first_ok(self, a: torch.Tensor) -> torch.Tensor:
        """Eligible for a first dose today."""
        return (self.vacc.doses.index_select(0, a) == 0) & self.open_to_a_dose(a)

    def second_ok(self, a: torch.Tensor) -> torch.Tensor:
        """Eligible for a second dose today: one dose so far, returning, the gap since dose 1 past."""
        v = self.vacc
        gap = (self.day - v.dose1_day.index_select(0, a)) >= v.cfg.dose2_gap_days
        return (v.doses.index_select(0, a) == 1) & self.returns.index_select(0, a) & gap & self.open_to_a_dose(a)

    def first_done(self, a: torch.Tensor) -> torch.Tensor:
        """Done with for good by the first-dose queue: dosed, or in hospital or beyond."""
        return (self.vacc.doses.index_select(0, a) > 0) | (self.state.stage.index_select(0, a) >= Stage.HOSPITALIZED)

    def second_done(self, a: torch.Tensor) -> torch.Tensor:
        """Done with for good by the second-dose queue: two doses, in hospital or beyond, or (a
        return drawn once) not coming back."""
        v = self.vacc
        doses = v.doses.index_select(0, a)
        done = (doses >= 2) | (self.state.stage.index_select(0, a) >= Stage.HOSPITALIZED)
        if v.cfg.dose2_dropout_draw == "once":  # those who do not return never will
            done |= (doses == 1) & ~v.returns.index_select(0, a)
        return done


def priority_classes(pop: Population, entries: list[int | str]) -> np.ndarray:
    """Each agent's priority class: the position of the first of ``entries`` (age groups, age
    ranges such as ``65+``, :data:`RESIDENTS`, occupation settings) that it belongs to; -1 for
    none (no dose). A setting the population does not have, or an age range its ages cannot
    tell exactly (an end inside one of its ``age_bands``), is a ``ValueError``."""
    group = np.maximum(pop.group, 0)
    rank = np.full(pop.size, -1, dtype=np.int64)
    for i, entry in enumerate(entries):
        ages = parse_range(entry) if isinstance(entry, str) else None
        if isinstance(entry, int):
            member = pop.age_group == entry
        elif ages is not None:
            problem = bands_problem(ages, pop.age_bands, f"the population of {pop.region_name}")
            if problem is not None:
                raise ValueError(f"interventions.vaccination.priority: {problem}")
            member = (pop.age >= ages.first) & (ages.last is None or pop.age <= ages.last)
        elif entry == RESIDENTS:
            member = pop.long_term_care
        elif entry in pop.categories:
            member = (pop.group >= 0) & (pop.group_category[group] == pop.categories.index(entry))
        else:
            raise ValueError(
                f"interventions.vaccination.priority: {entry!r} is no occupation setting of the population; "
                f"allowed: {RESIDENTS}, {', '.join(pop.categories)}"
            )
        rank[(rank < 0) & member] = i
    return rank


class Vaccination(VaccinationSpec):
    """Allocates each day's doses by priority class and applies protection."""

    def attach(self, sim: Simulation) -> None:
        c, d = self.cfg, sim.device
        self.doses = torch.zeros(sim.total, dtype=torch.int8, device=d)
        self.dose1_day = torch.full((sim.total,), -10_000, dtype=torch.int32, device=d)
        self.protect_day = torch.full((sim.total,), -1, dtype=torch.int16, device=d)
        self.protect_level = torch.zeros(sim.total, dtype=torch.float32, device=d)
        # Leaky protection: a dose-2 protection that starts after a dose-1 protection still to
        # come waits here (day, level) until that one has started (-1: none waiting).
        self.next_protect_day = torch.full((sim.total,), -1, dtype=torch.int16, device=d)
        self.next_protect_level = torch.zeros(sim.total, dtype=torch.float32, device=d)
        self.pending: dict[int, torch.Tensor] = {}  # agents whose protection starts on a day
        gen = generator(sim.seed, "vaccination", -1, d)
        self.returns = torch.rand(sim.total, generator=gen, device=d) >= c.dose2_dropout
        # Priority key: class + a uniform within the class (float64 keeps the order exact).
        entries = list(c.priority) if isinstance(c.priority, list) else list(range(9))
        if c.priority == "oldest_first":
            entries.reverse()
        rank = torch.as_tensor(priority_classes(sim.population, entries)).repeat(sim.replicates).to(d)
        self.in_program = rank >= 0
        u = torch.rand(sim.total, generator=gen, device=d, dtype=torch.float64)
        groups = len(entries)
        first_cls = rank if c.first_doses_first else 2 * rank + 1
        second_cls = rank + groups if c.first_doses_first else 2 * rank
        self.first_key = first_cls.double() + u
        self.second_key = second_cls.double() + u
        # The queue: each replicate's agents in the programme by priority (class, then the
        # uniform), the order of both keys. Doses go down the queue; ``head`` passes the
        # entries done with first doses, ``head2`` those done with second doses, and ``front``
        # bounds the entries that have had any dose (no second dose is due beyond it).
        r, n = sim.replicates, sim.n
        key = torch.where(self.in_program, self.first_key, torch.inf).view(r, n)
        order = torch.argsort(key, dim=1, stable=True)
        self.queued = int(self.in_program[:n].sum())
        self.queue = order[:, : self.queued] + torch.arange(r, device=d)[:, None] * n
        self.head = torch.zeros(r, dtype=torch.int64, device=d)
        self.head2 = torch.zeros(r, dtype=torch.int64, device=d)
        self.front = torch.zeros(r, dtype=torch.int64, device=d)
        self.steps = torch.arange(self.queued, device=d)
        self.passed = torch.zeros(0, dtype=torch.int64, device=d)  # passed by the head while isolated
        # Doses produced per day; a fractional rate (per 100,000 on another population size)
        # is kept exactly over time: day k of production makes floor((k+1)x) - floor(kx).
        self.per_day = float(c.daily_doses if c.daily_doses is not None else c.daily_doses_per_100k * sim.n / 1e5)
        self.protected = torch.zeros(sim.total, dtype=torch.bool, device=d)
        self.protected_count = torch.zeros(sim.replicates, dtype=torch.int64, device=d)
        for name in ("first_doses", "second_doses", "vaccine_protected"):
            sim.declare_activity(name)
        self.stock = torch.zeros(sim.replicates, c.shelf_life_days + 1, dtype=torch.int64, device=d)
        self.given = torch.zeros(sim.replicates, dtype=torch.int64, device=d)

    def hooks(self) -> dict:
        return {Phase.VACCINATION: self.step}

    def production(self, day: int) -> int:
        """Doses produced on ``day`` (from the start day)."""
        k = day - self.cfg.start_day
        if k < 0:
            return 0
        return math.floor((k + 1) * self.per_day + 1e-9) - math.floor(k * self.per_day + 1e-9)

    def step(self, sim: Simulation, day: int) -> None:
        """The day's vaccination: protection of earlier doses takes effect, then today's doses."""
        self.protect(sim, day)
        if day >= self.cfg.start_day:
            self.allocate(sim, day)
        if self.cfg.protection == "leaky":  # protected agents can be infected: count again
            r = sim.replicates
            self.protected_count = (self.protected & (sim.state.stage == Stage.SUSCEPTIBLE)).view(r, -1).sum(1)
        sim.count_activity("vaccine_protected", day, self.protected_count)

    def allocate(self, sim: Simulation, day: int) -> None:
        """Today's doses, by priority class, to the agents eligible.

        Priority classes: (dose to give, entry of the priority list in order); within a class, a random
        order drawn once per agent. Today's doses go to the eligible agents first in that order,
        so a class is served whole before the next while doses last. Steps: restock; read the
        candidates off the queue; give the doses to the first of them; move the queue past the
        entries done with for good; take the doses given out of the stock.
        """
        available = self._restock(day)
        rules = _DoseRules(self, sim.state, day, self._returns_today(sim, day))
        k = min(int(available.max()), sim.n)
        if k == 0 or self.queued == 0:
            return
        end = torch.full_like(self.head, self.queued)
        first, second, agents, key = self._candidates(sim, end, available, rules)
        chosen = self._choose(sim, agents, key, k, available)
        if chosen.numel() > 0:
            self.administer(sim, day, chosen)
        self._advance_first_doses(first, end, rules)
        if second is not None:  # the second-dose head passes the entries done with for good
            self.head2 += self._finished(second.agents, second.pos, self.front, rules.second_done)
        if chosen.numel() > 0:
            self._use_stock(sim, day, chosen)

    def _restock(self, day: int) -> torch.Tensor:
        """Today's production joins the stock and doses older than the shelf life expire; the
        doses available per replicate."""
        self.stock = torch.roll(self.stock, 1, dims=1)
        self.stock[:, 0] = self.production(day)
        return self.stock.sum(1)

    def _returns_today(self, sim: Simulation, day: int) -> torch.Tensor:
        """Whether each agent comes back for dose 2 today: the draw made once per agent, or
        (``dose2_dropout_draw: daily``) a draw of the day."""
        if self.cfg.dose2_dropout_draw == "daily":
            gen = generator(sim.seed, "vaccination-return", day, sim.device)
            return torch.rand(sim.total, generator=gen, device=sim.device) >= self.cfg.dose2_dropout
        return self.returns

    def _candidates(
        self, sim: Simulation, end: torch.Tensor, available: torch.Tensor, rules: _DoseRules
    ) -> tuple[_Scan, _Scan | None, torch.Tensor, torch.Tensor]:
        """Today's candidates read off the queue: the first ``available`` eligible for a first
        dose from the head on, the agents the head passed while isolated who are eligible again,
        and, unless first doses come first and fill the day, the first ``available`` eligible for
        a second dose. Returns the first-dose scan, the second-dose scan (None when not made),
        and the candidates as rows per replicate with their priority keys (inf for padding)."""
        first = self._scan(self.head, end, available, rules.first_ok)
        parts = [(first.agents, first.take, self.first_key)]  # (agents, candidates, key) per replicate row
        if self.passed.numel() > 0:
            parts.append((*self._by_replicate(sim, self.passed, rules.first_ok(self.passed)), self.first_key))
        short = sum(t.sum(1) for _, t, _ in parts) < available
        second = None
        if not self.cfg.first_doses_first or bool(short.any()):
            second = self._scan(self.head2, self.front, available, rules.second_ok)
            parts.append((second.agents, second.take, self.second_key))
        r = sim.replicates
        agents = torch.cat([a for a, _, _ in parts], 1)
        key = torch.cat(
            [torch.where(t, kk.index_select(0, a.view(-1)).view(r, -1), torch.inf) for a, t, kk in parts], 1
        )
        return first, second, agents, key

    def _choose(
        self, sim: Simulation, agents: torch.Tensor, key: torch.Tensor, k: int, available: torch.Tensor
    ) -> torch.Tensor:
        """The agents (flat indices) given a dose today: per replicate, the candidates with the
        smallest keys, as many as the doses available (at most ``k``)."""
        k = min(k, key.shape[1])
        best, pos = torch.topk(key, k, dim=1, largest=False, sorted=True)
        take = (best < torch.inf) & (torch.arange(k, device=sim.device)[None, :] < available[:, None])
        return agents.gather(1, pos)[take]

    def _advance_first_doses(self, first: _Scan, end: torch.Tensor, rules: _DoseRules) -> None:
        """After today's doses: extend the front past the entries that had a first dose, and
        move the head past the entries done with for good and the isolated ones, which wait in
        ``passed``."""
        a1, p1 = first.agents, first.pos
        flat = a1.view(-1)
        given1 = first.take & (self.doses.index_select(0, flat).view(a1.shape) > 0)
        self.front = torch.maximum(self.front, torch.where(given1, p1 + 1, 0).amax(1))
        waiting = (self.doses.index_select(0, flat) == 0) & rules.state.isolated.index_select(0, flat)
        lead = self._finished(a1, p1, end, lambda a: rules.first_done(a) | waiting)
        behind = (self.steps[None, : a1.shape[1]] < lead[:, None]) & waiting.view(a1.shape)
        # A passed agent may have its first dose later, from ``passed``: the front must cover its
        # entry, or its second dose would never be scanned (it is past the head for good).
        self.front = torch.maximum(self.front, torch.where(behind, p1 + 1, 0).amax(1))
        if self.passed.numel() > 0 or bool(behind.any()):
            self.passed = torch.cat([self.passed, a1[behind]])
            self.passed = torch.sort(self.passed[~rules.first_done(self.passed)]).values
        self.head += lead

    def _use_stock(self, sim: Simulation, day: int, chosen: torch.Tensor) -> None:
        """Take the doses given to ``chosen`` out of the stock, the oldest first, and book them."""
        used = sim.per_replicate(chosen)
        # Per replicate, each column (the oldest first) gives what the older ones left to take,
        # up to its doses: in one pass over the columns instead of a loop.
        oldest_first = self.stock.flip(1)
        older = torch.cumsum(oldest_first, 1) - oldest_first
        take = (used[:, None] - older).clamp_min_(0).minimum(oldest_first)
        self.stock -= take.flip(1)
        self.given += used
        sim.book_cost("vaccine_dose", day, used, self.cfg.price_per_dose)

    def _scan(
        self, head: torch.Tensor, end: torch.Tensor, want: torch.Tensor, ok: Callable[[torch.Tensor], torch.Tensor]
    ) -> _Scan:
        """Per replicate, queue entries from ``head`` (before ``end``) far enough to hold the
        first ``want`` agents that ``ok`` accepts, or all of them: the agents and their
        positions ([replicate, entry]) and the mask of those first accepted ones."""
        width = int(want.max()) + 64
        limit = int((end - head).max())
        while True:
            width = min(width, max(limit, 1))
            pos = head[:, None] + self.steps[None, :width]
            inside = pos < end[:, None]
            agents = self.queue.gather(1, pos.clamp_max(self.queue.shape[1] - 1))
            good = ok(agents.view(-1)).view(agents.shape) & inside
            if width >= limit or bool((good.sum(1) >= want).all()):
                break
            width *= 2
        take = good & (good.cumsum(1) <= want[:, None])
        return _Scan(agents, pos, take)

    def _by_replicate(
        self, sim: Simulation, agents: torch.Tensor, ok: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Agents (ascending) as rows per replicate, padded: the agents and the mask of those
        ``ok``."""
        rep = agents // sim.n
        counts = torch.bincount(rep, minlength=sim.replicates)
        col = torch.arange(agents.shape[0], device=agents.device) - (torch.cumsum(counts, 0) - counts).index_select(
            0, rep
        )
        width = int(counts.max()) if agents.numel() else 0
        rows = torch.zeros(sim.replicates, width, dtype=torch.int64, device=agents.device)
        mask = torch.zeros(sim.replicates, width, dtype=torch.bool, device=agents.device)
        rows[rep, col] = agents
        mask[rep, col] = ok
        return rows, mask

    def _finished(
        self, agents: torch.Tensor, pos: torch.Tensor, end: torch.Tensor, done: Callable[[torch.Tensor], torch.Tensor]
    ) -> torch.Tensor:
        """How many leading entries of each replicate's scanned window are ``done`` for good."""
        mask = done(agents.view(-1)).view(agents.shape) & (pos < end[:, None])
        return mask.to(torch.int32).cumprod(1).sum(1)

    def administer(self, sim: Simulation, day: int, idx: torch.Tensor) -> None:
        """Give the next dose to ``idx`` and draw its protection."""
        c = self.cfg
        dose = self.doses.index_select(0, idx) + 1
        self.doses[idx] = dose
        one = dose == 1
        sim.count_activity("first_doses", day, sim.per_replicate(idx[one]))
        sim.count_activity("second_doses", day, sim.per_replicate(idx[~one]))
        self.dose1_day[idx[one]] = day
        gen = generator(sim.seed, "vaccination-effect", day, sim.device)
        u = torch.rand(idx.shape[0], generator=gen, device=sim.device)
        eff = torch.where(one, c.dose1_efficacy, c.dose2_efficacy)
        delay = torch.where(one, c.dose1_delay_days, c.dose2_delay_days)
        if c.protection == "all_or_nothing":
            level = (u < eff).float()
            if c.dose2_combine == "either":  # protected if either dose's draw protects
                level = torch.maximum(level, self.protect_level.index_select(0, idx) * (~one).float())
        else:
            level = eff.float()
        take = level > 0
        if c.protection == "leaky" or c.dose2_combine == "overwrite":
            # Dose 2 replaces dose 1's protection even with none of its own: leaky, the latest
            # dose's efficacy is the one in effect (0 too); overwrite, a failed draw removes it.
            take |= ~one
        start = day + delay
        if c.protection == "all_or_nothing" and c.dose2_combine == "either":
            # A dose-1 protection still to come keeps its day unless dose 2's draw protects sooner.
            first = self.protect_day.index_select(0, idx).long()
            pending = ~one & (self.protect_level.index_select(0, idx) > 0) & (first > day)
            start = torch.where(pending & ((u >= eff) | (first < start)), first, start)
        if c.protection == "leaky":
            # A dose-1 protection still to come keeps its day; a later dose-2 protection follows it.
            first = self.protect_day.index_select(0, idx).long()
            pending = ~one & take & (self.protect_level.index_select(0, idx) > 0) & (day < first) & (first < start)
            follow = idx[pending]
            self.next_protect_day[follow] = start[pending].to(torch.int16)
            self.next_protect_level[follow] = level[pending]
            take &= ~pending
            for d in torch.unique(start[pending]).tolist():
                due = idx[pending][start[pending] == d]
                self.pending[d] = due if d not in self.pending else torch.cat([self.pending[d], due])
        starts = start[take].to(torch.int16)
        self.protect_day[idx[take]] = starts
        self.protect_level[idx[take]] = level[take]
        for d in torch.unique(starts).tolist():
            due = idx[take][starts == d]
            self.pending[d] = due if d not in self.pending else torch.cat([self.pending[d], due])
        self.protect(sim, day)

    def protect(self, sim: Simulation, day: int) -> None:
        """Protection that starts today takes effect."""
        due = self.pending.pop(day, None)
        if due is None:
            return
        due = torch.unique(due)  # both doses' protection may start on the same day
        follow = due[self.next_protect_day.index_select(0, due) == day]  # leaky dose 2 after dose 1
        if follow.numel() > 0:
            self.protect_day[follow] = day
            self.protect_level[follow] = self.next_protect_level.index_select(0, follow)
            self.next_protect_day[follow] = -1
        due = due[self.protect_day.index_select(0, due) == day]  # a later dose may have moved it
        level = self.protect_level.index_select(0, due)
        before = self.protected.index_select(0, due)
        if self.cfg.protection == "all_or_nothing" and self.cfg.dose2_combine == "overwrite":
            prior = sim.prior_immune
            # a dose that fails takes away the vaccine's protection, not an earlier infection's
            sim.state.immune[due] = (level > 0) | (prior.index_select(0, due) if prior is not None else False)
            now = level > 0
        elif self.cfg.protection == "all_or_nothing":
            sim.state.immune[due[level > 0]] = True
            now = before | (level > 0)
        else:
            sim.state.susceptibility_scale[due] = 1 - level
            now = level > 0
        now &= sim.state.stage.index_select(0, due) == Stage.SUSCEPTIBLE
        self.protected[due] = now
        self.protected_count += sim.per_replicate(due[now & ~before]) - sim.per_replicate(due[before & ~now])
