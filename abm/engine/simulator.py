"""The day loop: agent state, phases that interventions hook into, transmission, progression
and recording. No Python loop over agents; R replicates run as one population of R * N."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from abm.engine.config import (
    ABSORBING,
    AGE_CLASS_SHARES,
    DEFAULT_COMMUNITY_STUBS,
    NEVER,
    NUM_AGE_GROUPS,
    NUM_STAGES,
    RESULT_COLUMNS,
    STAGE_NAMES,
    ContactConfig,
    DiseaseConfig,
    Phase,
    SeedingConfig,
    Stage,
    estimate_memory_bytes,
)
from abm.engine.contacts import CommunityLayer, Edges, HouseholdLayer, OccupationLayer, flat_nonzero
from abm.engine.disease import DiseaseModel
from abm.engine.infectors import choose
from abm.engine.ledger import CostLedger
from abm.engine.recorder import Recorder, SimulationResult
from abm.engine.reference_contacts import community_layer
from abm.engine.relaxed import infection_weight
from abm.engine.rng import generator
from abm.populations.population import Population

# The contact layers, as ``Simulation.layer_scale`` names them.
LAYER_NAMES = ("household", "occupation", "community")


class Intervention(Protocol):
    """What the engine needs of an intervention: hooks by phase, called as hook(sim, day)."""

    name: str

    def hooks(self) -> dict[Phase, Callable[[Simulation, int], None]]: ...

    def attach(self, sim: Simulation) -> None: ...


def plugin_failure(name: str, hook: str, day: int | None, exc: Exception) -> Exception | None:
    """What to raise, with ``exc`` as its cause, for the plug-in ``name`` raising ``exc`` in
    ``hook``: a :class:`abm.plugin_errors.PluginFailure` naming it, the hook and the day; None
    (``exc`` goes on as it is) where abm handles it already: a ``ScenarioError`` (a setting the
    population makes impossible: bad input), memory that runs out (the run's size), or an
    interrupt that a library's compiled code turned into another error."""
    from abm.interrupts import interrupted
    from abm.memory import cpu_allocation_failed
    from abm.plugin_errors import PluginFailure
    from abm.scenario import ScenarioError

    if (
        isinstance(exc, (ScenarioError, PluginFailure, torch.OutOfMemoryError, MemoryError))
        or cpu_allocation_failed(exc)
        or interrupted() is not None
    ):
        return None
    return PluginFailure.of(name, hook, day, exc)


def plugin_call(name: str, hook: str, day: int | None, call: Callable[[], Any]) -> Any:
    """``call()`` on behalf of the plug-in ``name`` (in ``hook``, on ``day`` where there is one):
    an exception it raises is reported as the plug-in's (:func:`plugin_failure`)."""
    try:
        return call()
    except Exception as exc:
        failure = plugin_failure(name, hook, day, exc)
        if failure is None:
            raise
        raise failure from exc


def plugin_hook(name: str, phase: Phase, hook: Callable[[Simulation, int], None]) -> Callable[[Simulation, int], None]:
    """``hook`` of the plug-in ``name``, in ``phase``: an exception it raises is reported as the
    plug-in's (:func:`plugin_call`)."""
    label = f"{phase.name} hook ({getattr(hook, '__qualname__', None) or repr(hook)})"

    def call(sim: Simulation, day: int) -> None:
        plugin_call(name, label, day, functools.partial(hook, sim, day))

    return call


@dataclass
class AgentState:
    """Per-agent dynamic state for R * N agents, smallest dtypes that fit."""

    stage: torch.Tensor  # int8
    next_stage: torch.Tensor  # int8
    next_day: torch.Tensor  # int16, NEVER when none
    infected_day: torch.Tensor  # int16, -1 when never infected
    isolated: torch.Tensor  # bool: no contacts in either direction today
    immune: torch.Tensor  # bool: protected from infection (a vaccine, or seeding.prior_immunity)
    susceptibility_scale: torch.Tensor  # float32: leaky protection multiplies susceptibility
    infectiousness_scale: torch.Tensor  # float32: multiplies an agent's infectiousness
    # Differentiable mode only: float32, 1.0 in the forward pass; carries the gradient of each
    # infection draw (abm.engine.relaxed) into the agent's infectiousness and recorded counts.
    weight: torch.Tensor | None = None
    # Differentiable mode only: float32, 0.0 in the forward pass; the sum of log(1 - p) over the
    # agent's infection draws that did not fire, with its gradient (abm.engine.relaxed).
    survival: torch.Tensor | None = None


@dataclass
class Simulation:
    """One batch of R replicates of a population over a number of days."""

    population: Population
    disease_cfg: DiseaseConfig
    contact_cfg: ContactConfig
    seeding: SeedingConfig
    days: int
    replicates: int = 1
    seed: int = 0
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    interventions: list[Intervention] = field(default_factory=list)
    # Differentiable mode (gradient calibration): each infection gets a weight, exactly 1.0
    # forward, whose gradient comes from its draw (``gradient_estimator``, see
    # abm.engine.relaxed); outputs carry gradients to ``daily_rate`` through the weights.
    differentiable: bool = False
    gradient_estimator: str = "score"
    # A community layer built earlier for this population with these settings (its
    # ``built_for`` holds): used instead of a new one. It keeps no state of a run, so the run
    # is the same (:class:`abm.runs.Reuse`, which calibration trials use).
    community_built: CommunityLayer | None = None
    # Put each infection by transmission down to one of the day's infectious contacts
    # (abm.engine.infectors), for the reproduction number; the epidemic is the same without.
    attribute_infections: bool = True

    def __post_init__(self) -> None:
        d, pop, r = self.device, self.population, self.replicates
        self.n = pop.size
        self.total = self.n * r
        self.disease = DiseaseModel(self.disease_cfg, self.days, d)
        self.age_group = torch.as_tensor(pop.age_group, dtype=torch.int64).repeat(r).to(d)
        resident = torch.as_tensor(pop.long_term_care, dtype=torch.bool).repeat(r).to(d)
        # The table each agent's course is drawn from (its age group, or the residents' table).
        self.course_group = self.disease.course_groups(self.age_group, resident)
        self.tract = torch.as_tensor(pop.tract, dtype=torch.int64).repeat(r).to(d)
        self.replicate = torch.arange(r, device=d).repeat_interleave(self.n)
        self.household = HouseholdLayer(pop, self.contact_cfg.household, r, d)
        cfg = self.contact_cfg
        self.occupation = OccupationLayer(pop, cfg.occupation, r, d, self.seed, cfg.shares("occupation"))
        built, shared = self.community_built, cfg.shares("community")
        if built is not None and not built.built_for(pop, cfg.community, r, d, self.seed, shared):
            raise ValueError("community_built: a community layer built for another population, settings or seed")
        self.community = built or community_layer(pop, cfg.community, r, d, self.seed, shared)
        # Per-day multipliers of each layer's weight: 1 at the start of each day (``step``), set
        # or multiplied by contact reductions' hooks before the day's transmission.
        self.layer_scale = dict.fromkeys(LAYER_NAMES, 1.0)
        # The days on which some contacts did not happen, for tracing to skip: day -> (layers
        # whose multiplier was 0, occupation settings closed); set by contact reductions.
        self.closed: dict[int, tuple[tuple[str, ...], tuple[str, ...]]] = {}
        self.state = AgentState(
            stage=torch.zeros(self.total, dtype=torch.int8, device=d),
            next_stage=torch.zeros(self.total, dtype=torch.int8, device=d),
            next_day=torch.full((self.total,), NEVER, dtype=torch.int16, device=d),
            infected_day=torch.full((self.total,), -1, dtype=torch.int16, device=d),
            isolated=torch.zeros(self.total, dtype=torch.bool, device=d),
            immune=torch.zeros(self.total, dtype=torch.bool, device=d),
            susceptibility_scale=torch.ones(self.total, dtype=torch.float32, device=d),
            infectiousness_scale=torch.ones(self.total, dtype=torch.float32, device=d),
        )
        # Agents immune from an earlier infection (seeding.prior_immunity), kept apart from a
        # vaccine's protection, which cannot take it away; None when no one is.
        self.prior_immune = self._prior_immunity()
        if self.prior_immune is not None:
            self.state.immune |= self.prior_immune
            self._check_seeding_room()
        # Per-agent fields interventions share (written by one, read by others), by name.
        self.fields: dict[str, torch.Tensor] = {}
        # Values interventions derive and share (e.g. a day's traced contacts), keyed by what
        # they depend on, the day included.
        self.memo: dict[tuple, object] = {}
        # Whether an isolated agent is also shielded from infection (intended), or only stops
        # infecting others (the reference code; quarantine's ``blocks`` sets it).
        self.isolation_shields = True
        # Per-day transmission rate (a tensor of length ``days``, may require grad); None:
        # the disease config's constant rate.
        self.daily_rate: torch.Tensor | None = None
        # Each day's seasonal factor of the rate (disease.seasonality); empty without a cycle.
        season = self.disease_cfg.seasonality
        self._season = season.factors(self.days) if season.reduction > 0 else []
        if self.differentiable:
            self.state.weight = torch.ones(self.total, dtype=torch.float32, device=d)
            self.state.survival = torch.zeros(self.total, dtype=torch.float32, device=d)
        # Lists that keep each day's work proportional to the epidemic, not to the population:
        # agents infected and not yet recovered or dead (sorted), new ones not merged yet, and
        # the scheduled transitions (agent, day) not yet due. Rebuilt from the state by
        # ``rescan`` (at the first step, and after state is written directly).
        self._infected = torch.zeros(0, dtype=torch.int64, device=d)
        self._infected_new: list[torch.Tensor] = []
        self._pending: dict[int, list[torch.Tensor]] = {}  # day -> agents whose transition is due
        self._scanned = False
        # Each agent's infectiousness today, zero but for the day's sources while exposure is
        # computed (reset after), so no per-day vector over all agents is allocated.
        self._x = torch.zeros(self.total, dtype=torch.float32, device=d)
        self.ledger = CostLedger(r)
        self.recorder = Recorder(self, self.days)
        # Interventions' daily counts per replicate by name ([day, replicate]), declared when
        # they attach: timeseries columns (``declare_activity``, ``count_activity``).
        self.activity: dict[str, torch.Tensor] = {}
        self.layers = (self.household, self.occupation, self.community)
        self._hooks: dict[Phase, list[Callable[[Simulation, int], None]]] = {p: [] for p in Phase}
        for iv in sorted(self.interventions, key=lambda iv: getattr(iv, "order", 0)):
            if not getattr(iv, "plugin_entry_point", ""):
                iv.attach(self)
                for phase, hook in iv.hooks().items():
                    self._hooks[phase].append(hook)
                continue
            # an installed plug-in: what its code raises is reported as its failure
            plugin_call(iv.name, "attach", None, functools.partial(iv.attach, self))
            for phase, hook in plugin_call(iv.name, "hooks()", None, iv.hooks).items():
                self._hooks[phase].append(plugin_hook(iv.name, phase, hook))

    # ----------------------------------------------------------------- public API
    def run(self, progress: Callable[[int], None] | None = None) -> SimulationResult:
        """Run every day; ``progress(day)`` is called after each day."""
        start = time.perf_counter()
        with torch.set_grad_enabled(self.differentiable):
            for day in range(self.days):
                self.step(day)
                if progress is not None:
                    progress(day)
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        return self.recorder.result(seconds, self.ledger)

    def step(self, day: int) -> None:
        """One day, phase by phase."""
        if not self._scanned:
            self.rescan()
        self.layer_scale.update(dict.fromkeys(LAYER_NAMES, 1.0))
        for phase in Phase:
            for hook in self._hooks[phase]:
                hook(self, day)
            if phase == Phase.TRANSMISSION:
                if day == self.seeding.day:
                    self._seed(day)
                self._transmit(day)
            elif phase == Phase.PROGRESSION:
                self._progress(day)
            elif phase == Phase.RECORDING:
                self.recorder.record(day)

    def layer_edges(self, layer: str, day: int) -> Edges:
        """A day's contacts of a layer, re-created from (seed, layer, day)."""
        return {lay.name: lay for lay in self.layers}[layer].edges(day)

    # ----------------------------------------------------------------- engine phases
    def rescan(self) -> None:
        """Rebuild the engine's lists (infected agents, scheduled transitions) from the agent
        state. Called before the first day; call it again after writing ``state`` directly
        (tests and custom hooks that set stages or transition days by hand)."""
        s = self.state
        self._infected = self._scan_infected()
        self._infected_new = []
        due = flat_nonzero(s.next_day != NEVER)
        self._pending = {}
        self._add_pending(due, s.next_day.index_select(0, due))
        self._scanned = True

    def _scan_infected(self) -> torch.Tensor:
        stage = self.state.stage
        return flat_nonzero((stage != Stage.SUSCEPTIBLE) & (stage != ABSORBING[0]) & (stage != ABSORBING[1]))

    def _add_pending(self, agents: torch.Tensor, when: torch.Tensor) -> None:
        """File agents under the day of their next transition."""
        if agents.numel() == 0:
            return
        when, order = torch.sort(when)
        days, counts = torch.unique_consecutive(when, return_counts=True)
        for d, chunk in zip(days.tolist(), agents.index_select(0, order).split(counts.tolist()), strict=True):
            self._pending.setdefault(d, []).append(chunk)

    def infected(self) -> torch.Tensor:
        """Agents (flat indices, ascending) infected and not recovered or dead."""
        if not self._scanned:
            self.rescan()
        s = self.state
        agents = self._infected
        if self._infected_new:
            count = agents.shape[0] + sum(a.shape[0] for a in self._infected_new)
            # Merged in order; when they are many, a scan of all agents is cheaper than a sort.
            agents = (
                self._scan_infected()
                if 16 * count > self.total
                else torch.sort(torch.cat([agents, *self._infected_new])).values
            )
            self._infected_new = []
        stage = s.stage.index_select(0, agents)
        self._infected = agents.index_select(0, flat_nonzero((stage != ABSORBING[0]) & (stage != ABSORBING[1])))
        return self._infected

    def infectiousness(self, day: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Indices of agents able to infect today (ascending) and their infectiousness."""
        s = self.state
        agents = self.infected()
        a = self.disease.infectiousness.index_select(0, s.stage.index_select(0, agents).long())
        able = flat_nonzero((a > 0) & ~s.isolated.index_select(0, agents))
        src = agents.index_select(0, able)
        k = (day - s.infected_day.index_select(0, src).long()).clamp(0, self.disease.profile.shape[0] - 1)
        w = (
            a.index_select(0, able)
            * self.disease.profile.index_select(0, k)
            * s.infectiousness_scale.index_select(0, src)
        )
        if s.weight is not None:
            w = w * s.weight.index_select(0, src)
        return src, w

    def exposure(self, day: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Agents with a contact of an infectious agent today (ascending, distinct) and the
        force of infection on each: the sum over their contacts of layer weight *
        infectiousness / normaliser, layer by layer."""
        src, w = self.infectiousness(day)
        self._sources = (src, w)
        empty = src[:0]
        if src.numel() == 0:
            return empty, w[:0]
        if self.differentiable:  # a fresh vector, so gradients flow through it
            x = torch.zeros(self.total, dtype=w.dtype, device=self.device).index_copy(0, src, w)
        else:
            x = self._x.index_copy_(0, src, w)
        parts = []
        for layer in self.layers:
            scale = self.layer_scale[layer.name]
            if scale > 0:
                parts.append((layer, scale, *layer.contributions(day, src, w, x)))
        if not self.differentiable:
            self._x.index_fill_(0, src, 0.0)
        if not parts:
            return empty, w[:0]
        entries = sum(self.total if t is None else t.shape[0] for *_, t, _ in parts)
        # Many contacts (past 1/8 of the agents, where sorting them costs more than passes over
        # every agent): summed into per-agent vectors.
        return self._sum_force(parts, dense=8 * entries > self.total)

    def _sum_force(self, parts: list[tuple], dense: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """The agents exposed today (ascending, distinct) and the force on each, from the layers'
        ``parts`` (layer, scale, agents or None for every agent, values): summed into per-agent
        vectors (``dense``) or over the distinct agents of the pairs, found by a sort. Both add
        the same values in the same order, so they give the same bits."""
        target = None
        if not dense:
            target, slot = torch.unique(torch.cat([t for *_, t, _ in parts]), return_inverse=True)
        size = self.total if target is None else target.shape[0]
        force, start = None, 0
        for layer, scale, t, v in parts:
            coef = layer.coef if target is None else layer.coef.index_select(0, target)
            if t is not None:
                at = t if target is None else slot[start : start + t.shape[0]]
                v = torch.zeros(size, dtype=v.dtype, device=self.device).index_add_(0, at, v)
                start += t.shape[0]
            v = v.mul_(coef).mul_(scale)  # a new vector (or the layer's, made for this call)
            force = v if force is None else force.add_(v)
        keep = flat_nonzero(force > 0)
        return keep if target is None else target.index_select(0, keep), force.index_select(0, keep)

    def force_of_infection(self, day: int) -> torch.Tensor:
        """The force of infection on every agent today, as a per-agent vector."""
        target, force = self.exposure(day)
        return torch.zeros(self.total, dtype=force.dtype, device=self.device).index_copy(0, target, force)

    def _transmit(self, day: int) -> None:
        target, force = self.exposure(day)
        s = self.state
        ok = s.stage.index_select(0, target) == Stage.SUSCEPTIBLE
        ok &= ~s.immune.index_select(0, target)
        if self.isolation_shields:
            ok &= ~s.isolated.index_select(0, target)
        keep = flat_nonzero(ok)
        cand = target.index_select(0, keep)
        lam = self.disease.susceptibility.index_select(0, self.age_group.index_select(0, cand))
        rate = self.disease_cfg.transmission_rate if self.daily_rate is None else self.daily_rate[day]
        rate = rate * self._season[day] if self._season else rate
        lam = lam * (s.susceptibility_scale.index_select(0, cand) * rate)
        lam = lam * force.index_select(0, keep)
        gen = generator(self.seed, "transmission", day, self.device)
        u = torch.rand(cand.shape[0], generator=gen, device=self.device)
        p = -torch.expm1(-lam)
        hit = u < p
        if s.weight is not None and s.survival is not None:
            score = self.gradient_estimator == "score"  # the only estimator that reads the survival sums
            survival = s.survival[cand[hit]] if score else None
            s.weight[cand[hit]] = infection_weight(p, u, hit, self.gradient_estimator, survival)
            if score:
                missed = ~hit
                s.survival = s.survival.index_add(0, cand[missed], -lam[missed])  # log(1 - p) = -lam
        new = cand.index_select(0, flat_nonzero(hit))
        if self.attribute_infections and new.numel() > 0:
            self.recorder.transmissions(new, self.infectors(new, day), day)
        self._infect(new, None, day, gen, introduced=False)

    def infector_pairs(self, targets: torch.Tensor, day: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The infectious contacts of ``targets`` (distinct agents) today, after the day's
        exposure: pairs (position in ``targets``, contact, what the contact adds to the target's
        force of infection), only pairs that add something. Summed per target, the values are its
        force of infection (:meth:`exposure`)."""
        src, w = self._sources
        x = self._x.index_copy_(0, src, w.detach())
        owners, partners, values = [], [], []
        for layer in self.layers:
            scale = self.layer_scale[layer.name]
            if scale <= 0:
                continue
            pos, partner = layer.contacts_on(targets, day)
            coef = layer.coef.index_select(0, targets.index_select(0, pos))
            v = x.index_select(0, partner) * coef * scale
            keep = flat_nonzero(v > 0)
            owners.append(pos.index_select(0, keep))
            partners.append(partner.index_select(0, keep))
            values.append(v.index_select(0, keep))
        x.index_fill_(0, src, 0.0)
        if not owners:
            empty = targets[:0]
            return empty, empty, torch.zeros(0, device=self.device)
        return torch.cat(owners), torch.cat(partners), torch.cat(values)

    def infectors(self, targets: torch.Tensor, day: int) -> torch.Tensor:
        """For each of ``targets``, infected by transmission today, the contact who infected it:
        one of its infectious contacts, drawn in proportion to what each added to its force of
        infection (:func:`abm.engine.infectors.choose`; stream ``infector``)."""
        owner, partner, value = self.infector_pairs(targets, day)
        u = torch.rand(
            targets.shape[0], generator=generator(self.seed, "infector", day, self.device), device=self.device
        )
        return partner.index_select(0, choose(owner, value, u))

    def infect(
        self, idx: torch.Tensor, stage: torch.Tensor | None, day: int, gen: torch.Generator | None = None
    ) -> None:
        """Infect agents ``idx`` (flat indices over all R * N agents, susceptible) on ``day``.

        Their first infected stage is ``stage`` (one per agent) or, when ``None``, drawn by age as
        for any infection; each then draws its next stage and day, and the recorder counts the
        infections. Random draws come from ``gen``, by default a stream keyed by (seed, "infect",
        day), so a hook that seeds infections (e.g. per replicate) stays deterministic.

        Raises ValueError if an agent is not susceptible or is given twice: its infection would
        be counted again and taken out of the susceptible count it is no longer in.
        """
        infected = flat_nonzero(self.state.stage.index_select(0, idx) != Stage.SUSCEPTIBLE)
        if infected.numel() > 0:
            some = idx.index_select(0, infected[:5]).tolist()
            raise ValueError(f"infect: {infected.numel()} of the agents are not susceptible (e.g. {some})")
        if torch.unique(idx).shape[0] != idx.shape[0]:
            raise ValueError("infect: an agent is given more than once")
        if gen is None:
            gen = generator(self.seed, "infect", day, self.device)
        self._infect(idx, stage, day, gen)

    def _infect(
        self, idx: torch.Tensor, stage: torch.Tensor | None, day: int, gen: torch.Generator, introduced: bool = True
    ) -> None:
        """Infect ``idx`` today; their first stage is ``stage`` or drawn by age. ``introduced``:
        put in from outside (seeding, a hook), not by today's transmission."""
        s = self.state
        if stage is None:
            u = torch.rand(idx.shape[0], generator=gen, device=self.device)
            stage = self.disease.next_stage(self.course_group.index_select(0, idx), torch.zeros_like(idx), u)
        s.stage[idx] = stage.to(torch.int8)
        s.infected_day[idx] = day
        self._infected_new.append(idx)
        self._schedule(idx, stage, day, gen)
        self.recorder.infections(idx, day if introduced else None)
        self.recorder.transitions(idx, torch.zeros_like(idx), stage.long())

    def _schedule(self, idx: torch.Tensor, stage: torch.Tensor, day: int, gen: torch.Generator) -> None:
        """Draw the next stage and its day for agents that entered ``stage`` today."""
        s = self.state
        u = torch.rand(2, idx.shape[0], generator=gen, device=self.device)
        nxt = self.disease.next_stage(self.course_group.index_select(0, idx), stage, u[0])
        dwell = self.disease.dwell(stage, nxt, u[1])
        absorbing = (stage == ABSORBING[0]) | (stage == ABSORBING[1])
        s.next_stage[idx] = nxt.to(torch.int8)
        when = torch.where(absorbing, NEVER, (day + 1 + dwell).clamp_max(NEVER)).to(torch.int16)
        s.next_day[idx] = when
        later = flat_nonzero(when != NEVER)
        self._add_pending(idx.index_select(0, later), when.index_select(0, later).long())

    def _due(self, day: int) -> torch.Tensor:
        """Agents (ascending, distinct) whose scheduled transition is today; the rest stay
        pending. An entry whose agent was rescheduled since is dropped."""
        chunks = self._pending.pop(day, None)
        if chunks is None:
            return self.state.next_day[:0].long()
        due = torch.unique(torch.cat(chunks))
        return due.index_select(0, flat_nonzero(self.state.next_day.index_select(0, due) == day))

    def _progress(self, day: int) -> None:
        s = self.state
        due = self._due(day)
        if due.numel() == 0:
            return
        old = s.stage.index_select(0, due).long()
        new = s.next_stage.index_select(0, due).long()
        s.stage[due] = new.to(torch.int8)
        self._schedule(due, new, day, generator(self.seed, "progression", day, self.device))
        self.recorder.transitions(due, old, new)

    def _prior_immunity(self) -> torch.Tensor | None:
        """Per agent, whether it is immune before day 0 (``seeding.prior_immunity``): in each age
        group its share of the group's agents, rounded half up, chosen at random, per replicate
        or (``resample_per_replicate: false``) one choice for every replicate; None when no one is."""
        d = self.device
        group = self.age_group[: self.n]
        sizes = torch.bincount(group, minlength=NUM_AGE_GROUPS)
        wanted = torch.tensor(self.seeding.immune_counts(sizes.tolist()), dtype=torch.int64, device=d)
        if int(wanted.sum()) == 0:
            return None
        draws = self.replicates if self.seeding.resample_per_replicate else 1
        gen = generator(self.seed, "prior-immunity", 0, d)
        keys = torch.rand(draws, self.n, generator=gen, device=d, dtype=torch.float64)
        first = torch.cumsum(sizes, 0) - sizes  # each age group's first position in the order below
        chosen = []
        for row in keys:
            order = torch.argsort(group * 2 + row)  # by age group, at random within it
            rank = torch.empty_like(order)
            rank[order] = torch.arange(self.n, device=d) - first.index_select(0, group.index_select(0, order))
            chosen.append(rank < wanted.index_select(0, group))
        return torch.cat(chosen if draws > 1 else chosen * self.replicates)

    def _check_seeding_room(self) -> None:
        """The seeding infects agents not immune before day 0 only: there must be as many of
        them as it asks for (:meth:`SeedingConfig.room_problem`)."""
        problem = self.seeding.room_problem(torch.bincount(self.age_group[: self.n], minlength=NUM_AGE_GROUPS).tolist())
        if problem is not None:
            from abm.scenario import ScenarioError  # the scenario module imports the engine

            raise ScenarioError(problem)

    def _seed(self, day: int) -> None:
        """Put the seeding's agents into their stages: drawn per replicate, or one draw shared by
        every replicate (``resample_per_replicate: false``)."""
        gen = generator(self.seed, "seeding", day, self.device)
        # In the stages' order, not the mapping's: the same counts written in another order (a
        # file's keys, --set) draw the same agents into the same stages.
        counts = sorted((STAGE_NAMES.index(k), v) for k, v in self.seeding.counts(self.n).items() if v > 0)
        per_rep = sum(v for _, v in counts)
        if per_rep == 0:
            return
        if per_rep > self.n:
            raise ValueError(f"seeding asks for {per_rep} infections but there are {self.n} agents")
        stage_list = torch.cat([torch.full((v,), k, device=self.device) for k, v in counts])
        # Not an agent whom a vaccine made immune (a seeding day after vaccination has begun).
        susceptible = ((self.state.stage == Stage.SUSCEPTIBLE) & ~self.state.immune).view(self.replicates, self.n)
        picks, stages = [], []
        if not self.seeding.resample_per_replicate:
            candidates = flat_nonzero(susceptible.all(0))
            chosen = candidates[torch.randperm(candidates.shape[0], generator=gen, device=self.device)[:per_rep]]
            offsets = torch.arange(self.replicates, device=self.device) * self.n
            picks.append((chosen[None, :] + offsets[:, None]).reshape(-1))
            stages.append(stage_list[: chosen.shape[0]].repeat(self.replicates))
        else:
            for r in range(self.replicates):
                candidates = flat_nonzero(susceptible[r])
                perm = torch.randperm(candidates.shape[0], generator=gen, device=self.device)
                chosen = candidates[perm[:per_rep]]
                picks.append(chosen + r * self.n)
                stages.append(stage_list[: chosen.shape[0]])
        self._infect(torch.cat(picks), torch.cat(stages).long(), day, gen)

    # ----------------------------------------------------------------- helpers for hooks
    def field(self, name: str, dtype: torch.dtype, fill: float | int | bool = 0) -> torch.Tensor:
        """A shared per-agent field, created filled with ``fill`` on first use."""
        if name not in self.fields:
            self.fields[name] = torch.full((self.total,), fill, dtype=dtype, device=self.device)
        return self.fields[name]

    def rand(self, stream: str, day: int, n: int) -> torch.Tensor:
        """``n`` uniforms from the stream (seed, stream, day)."""
        return torch.rand(n, generator=generator(self.seed, stream, day, self.device), device=self.device)

    def book_cost(self, item: str, day: int, counts: torch.Tensor, unit_cost: float) -> None:
        """Book ``counts`` (per replicate) units of ``item`` at ``unit_cost`` on ``day``."""
        self.ledger.book(item, day, counts, unit_cost)

    def declare_activity(self, name: str) -> None:
        """Add a daily count per replicate to the results (a timeseries column), zero until counted.
        Declared again (by another intervention, say), it is the same count, and both add to it.

        Raises ValueError for the name of a column the engine and the outputs fill
        (:data:`abm.engine.config.RESULT_COLUMNS`), which the count would replace or be replaced by.
        """
        if name in RESULT_COLUMNS:
            raise ValueError(
                f"declare_activity: {name!r} is a column of timeseries.csv that the engine fills; give the daily "
                "count a name of its own"
            )
        if name not in self.activity:
            self.activity[name] = torch.zeros(self.days, self.replicates, dtype=torch.int64, device=self.device)

    def count_activity(self, name: str, day: int, counts: torch.Tensor) -> None:
        """Add ``counts`` (per replicate) to the declared count ``name`` of ``day``."""
        self.activity[name][day] += counts.to(torch.int64)

    def per_replicate(self, idx: torch.Tensor) -> torch.Tensor:
        """How many of the agents ``idx`` belong to each replicate."""
        return torch.bincount(idx // self.n, minlength=self.replicates)


__all__ = [
    "AGE_CLASS_SHARES",
    "DEFAULT_COMMUNITY_STUBS",
    "NUM_AGE_GROUPS",
    "NUM_STAGES",
    "AgentState",
    "Intervention",
    "Phase",
    "SeedingConfig",
    "Simulation",
    "SimulationResult",
    "estimate_memory_bytes",
]  # fmt: skip
