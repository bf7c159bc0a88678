"""Recorders: daily stage counts, infections, hospital and ICU occupancy and deaths, by
replicate, age group and tract, kept up to date from events (infections and transitions)
rather than by recounting every agent."""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch

from abm.engine.contacts import flat_nonzero
from abm.engine.disease import NUM_AGE_GROUPS, NUM_STAGES, SYMPTOMATIC, Stage
from abm.engine.ledger import CostLedger

if TYPE_CHECKING:
    from abm.engine.simulator import Simulation


@dataclass
class SimulationResult:
    """Everything a run recorded, as numpy arrays indexed [day, replicate, ...].

    ``stages_by_tract[d, r, t, s]`` counts agents of tract t in stage s at the end of day d;
    ``new_by_tract[d, r, t]`` counts infections on day d. The by-age arrays are alike.
    """

    agents: int
    replicates: int
    stages_by_tract: np.ndarray
    new_by_tract: np.ndarray
    stages_by_age: np.ndarray
    new_by_age: np.ndarray
    entries: np.ndarray  # [day, replicate, stage]: agents entering each stage that day
    costs: pd.DataFrame
    cost_totals: np.ndarray
    engine_seconds: float
    # Interventions' daily counts by name, [day, replicate] (tests, doses, agents in quarantine...).
    activity: dict[str, np.ndarray] = field(default_factory=dict)
    # [day, replicate] infections put in by seeding (or a hook's ``Simulation.infect``), not by
    # transmission; they are part of ``new_infections``.
    introduced: np.ndarray | None = None
    # [day, replicate]: infections that the agents infected on that day caused by the end of the
    # run (each infection by transmission is put down to one infector: abm.engine.infectors),
    # how many of those agents may still infect someone at the end (their count may yet grow), and the
    # days from the infector's infection to the infectee's, summed over the day's transmissions.
    # None where infections were not attributed.
    secondary: np.ndarray | None = None
    unfinished: np.ndarray | None = None
    generation_days: np.ndarray | None = None
    # [replicate, stage]: long-term-care residents in each stage at the end of the run; None where
    # the population has none.
    residents_final: np.ndarray | None = None

    @property
    def days(self) -> int:
        return int(self.stages_by_tract.shape[0])

    @property
    def stages(self) -> np.ndarray:
        """[day, replicate, stage] counts."""
        return self.stages_by_age.sum(axis=2)

    @property
    def admissions(self) -> np.ndarray:
        """[day, replicate] hospital admissions (entries into the HOSPITALIZED stage)."""
        return self.entries[:, :, Stage.HOSPITALIZED]

    @property
    def symptomatic_onsets(self) -> np.ndarray:
        """[day, replicate] onsets of symptoms (entries into MILD_SYMPTOMS or SEVERE_SYMPTOMS;
        an initial infection put in a symptomatic stage counts on its day)."""
        return self.entries[:, :, list(SYMPTOMATIC)].sum(axis=2)

    @property
    def new_infections(self) -> np.ndarray:
        """[day, replicate] infections that day (initial infections count on their day)."""
        return self.new_by_age.sum(axis=2)

    @property
    def transmitted(self) -> np.ndarray:
        """[day, replicate] infections by transmission that day (initial infections left out)."""
        new = self.new_infections
        return new if self.introduced is None else new - self.introduced

    @property
    def reproduction_number(self) -> np.ndarray | None:
        """[day, replicate] the case reproduction number by day of infection: the infections
        caused, on average, by the agents infected that day. NaN on a day without infections or
        with agents who may still infect someone at the end (their count is not final); None
        where infections were not attributed."""
        if self.secondary is None or self.unfinished is None:
            return None
        new = self.new_infections.astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            r = self.secondary / new
        return np.where((new > 0) & (self.unfinished == 0), r, np.nan)


# An agent with less than this share of its infectiousness profile left (1 - F(days since its
# infection)) counts as done: its expected further infections are below DONE times its own
# reproduction number (the profile's tail is only zero in the limit).
DONE = 1e-4


class Recorder:
    """Keeps [replicate, tract, stage] and [replicate, age, stage] counts and daily snapshots."""

    def __init__(self, sim: Simulation, days: int) -> None:
        self.sim = weakref.proxy(sim)  # no reference cycle: a finished simulation is freed at once
        r, d, dev = sim.replicates, days, sim.device
        self.num_tracts = len(sim.population.tracts)
        t = self.num_tracts
        pop = sim.population
        tract_counts = np.bincount(pop.tract, minlength=t).astype(np.int32)
        age_counts = np.bincount(pop.age_group, minlength=NUM_AGE_GROUPS).astype(np.int32)
        self.by_tract = torch.zeros(r, t, NUM_STAGES, dtype=torch.int32, device=dev)
        self.by_tract[:, :, Stage.SUSCEPTIBLE] = torch.as_tensor(tract_counts, device=dev)
        self.by_age = torch.zeros(r, NUM_AGE_GROUPS, NUM_STAGES, dtype=torch.int32, device=dev)
        self.by_age[:, :, Stage.SUSCEPTIBLE] = torch.as_tensor(age_counts, device=dev)
        self.new_tract = torch.zeros(r * t, dtype=torch.int32, device=dev)
        self.new_age = torch.zeros(r * NUM_AGE_GROUPS, dtype=torch.int32, device=dev)
        self.hist_introduced = torch.zeros(d, r, dtype=torch.int32, device=dev)
        self.hist_tract = torch.zeros(d, r, t, NUM_STAGES, dtype=torch.int32, device=dev)
        self.hist_age = torch.zeros(d, r, NUM_AGE_GROUPS, NUM_STAGES, dtype=torch.int32, device=dev)
        self.hist_new_tract = torch.zeros(d, r, t, dtype=torch.int32, device=dev)
        self.hist_new_age = torch.zeros(d, r, NUM_AGE_GROUPS, dtype=torch.int32, device=dev)
        self.entered = torch.zeros(r * NUM_STAGES, dtype=torch.int32, device=dev)
        self.hist_entries = torch.zeros(d, r, NUM_STAGES, dtype=torch.int32, device=dev)
        # Differentiable mode: per day, the [replicate, stage] entries summed over the agents'
        # infection weights (equal to the counts in value, carrying their gradients).
        self.weighted_entries: list[torch.Tensor] = []
        # Per agent, the infections it caused (none kept where infections are not attributed);
        # per day and replicate, the generation intervals' sum (infections by transmission that
        # day, days since their infector's infection).
        self.secondary = torch.zeros(sim.total if sim.attribute_infections else 0, dtype=torch.int32, device=dev)
        self.hist_generation = torch.zeros(d, r, dtype=torch.int32, device=dev)
        self._weighted_today = torch.zeros(r * NUM_STAGES, dtype=torch.float32, device=dev)

    def _keys(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        sim = self.sim
        rep = sim.replicate.index_select(0, idx)
        return (
            rep * self.num_tracts + sim.tract.index_select(0, idx),
            rep * NUM_AGE_GROUPS + sim.age_group.index_select(0, idx),
        )

    def infections(self, idx: torch.Tensor, introduced_on: int | None = None) -> None:
        """Count infections of agents ``idx`` today; ``introduced_on``: the day, for infections
        put in (seeding), not transmitted."""
        kt, ka = self._keys(idx)
        one = torch.ones_like(kt, dtype=torch.int32)
        self.new_tract.index_add_(0, kt, one)
        self.new_age.index_add_(0, ka, one)
        if introduced_on is not None:  # rare (seeding days): counted straight into the history
            self.hist_introduced[introduced_on].index_add_(0, self.sim.replicate.index_select(0, idx), one)

    def transmissions(self, infectees: torch.Tensor, infectors: torch.Tensor, day: int) -> None:
        """Count today's infections of ``infectees``, each by its infector in ``infectors``."""
        self.secondary.index_add_(0, infectors, torch.ones_like(infectors, dtype=torch.int32))
        days = day - self.sim.state.infected_day.index_select(0, infectors).int()
        self.hist_generation[day].index_add_(0, self.sim.replicate.index_select(0, infectees), days)

    def transitions(self, idx: torch.Tensor, old: torch.Tensor, new: torch.Tensor) -> None:
        """Move agents ``idx`` from stage ``old`` to ``new`` in the counts."""
        kt, ka = self._keys(idx)
        one = torch.ones_like(kt, dtype=torch.int32)
        flat_t, flat_a = self.by_tract.view(-1), self.by_age.view(-1)
        flat_t.index_add_(0, kt * NUM_STAGES + old, -one)
        flat_t.index_add_(0, kt * NUM_STAGES + new, one)
        flat_a.index_add_(0, ka * NUM_STAGES + old, -one)
        flat_a.index_add_(0, ka * NUM_STAGES + new, one)
        self.entered.index_add_(0, self.sim.replicate.index_select(0, idx) * NUM_STAGES + new, one)
        weight = self.sim.state.weight
        if weight is not None:
            key = self.sim.replicate.index_select(0, idx) * NUM_STAGES + new
            self._weighted_today = self._weighted_today.index_add(0, key, weight.index_select(0, idx))

    def record(self, day: int) -> None:
        """Snapshot the counts at the end of ``day``."""
        r = self.sim.replicates
        self.hist_tract[day] = self.by_tract
        self.hist_age[day] = self.by_age
        self.hist_new_tract[day] = self.new_tract.view(r, -1)
        self.hist_new_age[day] = self.new_age.view(r, -1)
        self.hist_entries[day] = self.entered.view(r, -1)
        self.new_tract.zero_()
        self.new_age.zero_()
        self.entered.zero_()
        if self.sim.state.weight is not None:
            self.weighted_entries.append(self._weighted_today.view(r, -1))
            self._weighted_today = torch.zeros_like(self._weighted_today)

    def by_infection_day(self) -> tuple[np.ndarray, np.ndarray]:
        """[day, replicate] the infections caused by the agents infected that day, and how many
        of those agents may still infect someone: in an infectious stage, or one that may lead to
        one (not recovered, dead or in hospital), with more than :data:`DONE` of their
        infectiousness profile still ahead."""
        sim, r = self.sim, self.sim.replicates
        s = sim.state
        infected = flat_nonzero(s.infected_day >= 0)
        key = s.infected_day.index_select(0, infected).long() * r + sim.replicate.index_select(0, infected)
        size = self.hist_generation.numel()
        caused = torch.zeros(size, dtype=torch.int64, device=key.device)
        caused.index_add_(0, key, self.secondary.index_select(0, infected).long())
        stage = s.stage.index_select(0, infected).long()
        course = sim.course_group.index_select(0, infected)
        left = sim.disease.profile_left
        since = (sim.days - 1 - s.infected_day.index_select(0, infected).long()).clamp(0, left.shape[0] - 1)
        going = (sim.disease.can_still_infect[course, stage] & (left.index_select(0, since) > DONE)).long()
        still = torch.zeros(size, dtype=torch.int64, device=key.device).index_add_(0, key, going)
        shape = tuple(self.hist_generation.shape)
        return caused.view(shape).cpu().numpy(), still.view(shape).cpu().numpy()

    def result(self, seconds: float, ledger: CostLedger) -> SimulationResult:
        """Move the history to the CPU as numpy arrays."""
        attributed = self.sim.attribute_infections
        secondary, unfinished = self.by_infection_day() if attributed else (None, None)
        return SimulationResult(
            agents=self.sim.n,
            replicates=self.sim.replicates,
            stages_by_tract=self.hist_tract.cpu().numpy(),
            new_by_tract=self.hist_new_tract.cpu().numpy(),
            stages_by_age=self.hist_age.cpu().numpy(),
            new_by_age=self.hist_new_age.cpu().numpy(),
            entries=self.hist_entries.cpu().numpy(),
            costs=ledger.table(),
            cost_totals=ledger.totals(),
            engine_seconds=seconds,
            activity={name: v.cpu().numpy() for name, v in self.sim.activity.items()},
            introduced=self.hist_introduced.cpu().numpy(),
            secondary=secondary,
            unfinished=unfinished,
            generation_days=self.hist_generation.cpu().numpy() if attributed else None,
            residents_final=self.residents_final(),
        )

    def residents_final(self) -> np.ndarray | None:
        """[replicate, stage] long-term-care residents in each stage now; None where there are none."""
        sim = self.sim
        care = np.flatnonzero(sim.population.long_term_care)
        if care.size == 0:
            return None
        r = sim.replicates
        stage = sim.state.stage.view(r, sim.n).index_select(1, torch.as_tensor(care, device=sim.device)).long()
        key = torch.arange(r, device=sim.device)[:, None] * NUM_STAGES + stage
        return torch.bincount(key.reshape(-1), minlength=r * NUM_STAGES).view(r, NUM_STAGES).cpu().numpy()
