"""Self-quarantine: after a positive test (and, when tracing asks, after a notice), an agent
stays home for a number of days with a daily dropout; a quarantined agent has no contacts in
either direction.

A positive result that arrives during a quarantine starts its days again. With ``persistence:
full`` an agent in hospital (HOSPITALIZED, CRITICAL_ICU, HOSPITALIZED_RECOVERING) is isolated
there, not in quarantine: it does not enter, leaves on admission, and is neither counted nor
billed; its days in hospital count as isolated in ``isolated_history``, so tracing finds no
contacts on them, as on days in quarantine (with ``blocks: infector``, as the index case's
only). (``entry_day`` reproduces the reference code, which quarantines positives whatever their
stage.)

Fields read: ``positive_day`` (testing), ``quarantine_request`` (tracing; cleared here).
Written: ``isolated_history`` (int32 bits: isolated on each of the last 30 days, bit 0 the
latest), which tracing reads. Daily count (timeseries column): ``in_quarantine``, the agents
in quarantine that day.
"""

from __future__ import annotations

import torch

from abm.engine.config import Phase, Stage
from abm.engine.contacts import flat_nonzero
from abm.engine.rng import generator
from abm.engine.simulator import Simulation
from abm.interventions.config.quarantine import QuarantineConfig as QuarantineConfig  # named here as before
from abm.interventions.config.quarantine import QuarantineSpec
from abm.interventions.testing import positives_today


class Quarantine(QuarantineSpec):
    """Sets ``isolated`` on the agents in quarantine."""

    def attach(self, sim: Simulation) -> None:
        sim.isolation_shields = self.cfg.blocks == "both"
        # Bit k: isolated on the k-th latest day this phase ran (bit 0: the latest), for tracing.
        self.history = sim.field("isolated_history", torch.int32, 0)
        self.until = torch.full((sim.total,), -1, dtype=torch.int16, device=sim.device)
        sim.field("positive_day", torch.int16, -1)  # read through positives_today; exists from the start
        self.request = sim.field("quarantine_request", torch.bool, False)
        # The agents it isolated, ascending: only these does it release (others, a plug-in's, say,
        # are not its to release, nor to quarantine).
        self.members = torch.zeros(0, dtype=torch.int64, device=sim.device)
        sim.declare_activity("in_quarantine")
        # Per stage, whether an agent in it is away (:meth:`_away`): one look-up instead of a
        # comparison per stage, on every call.
        away = [Stage.DEATH]
        if self.cfg.persistence == "full":
            away += [Stage.HOSPITALIZED, Stage.CRITICAL_ICU, Stage.HOSPITALIZED_RECOVERING]
        self.away_stage = torch.zeros(len(Stage), dtype=torch.bool, device=sim.device)
        self.away_stage[[int(s) for s in away]] = True

    def hooks(self) -> dict:
        if self.cfg.persistence == "entry_day":
            return {Phase.QUARANTINE: self.step, Phase.CONTACT_LOGGING: self.lift}
        return {Phase.QUARANTINE: self.step}

    def _away(self, stage: torch.Tensor) -> torch.Tensor:
        """Agents not in quarantine because they are dead or, with ``persistence: full``, in
        hospital (a mask over ``stage``)."""
        return self.away_stage.index_select(0, stage.long())

    def lift(self, sim: Simulation, day: int) -> None:
        """Entry-day persistence: today's quarantines end once the day's contacts are over."""
        # A one-day quarantine is not a completed one: no reset of infectiousness.
        sim.state.isolated[self.members] = False
        self.members = self.members[:0]

    def step(self, sim: Simulation, day: int) -> None:
        """Quarantines end, positives (and those asked to) enter, some drop out. Works on the
        agents concerned only: the isolated, today's positives and today's requests."""
        st, c = sim.state, self.cfg
        gen = generator(sim.seed, "quarantine", day, sim.device)

        def draw(idx: torch.Tensor, p: float) -> torch.Tensor:
            return idx[torch.rand(idx.shape[0], generator=gen, device=sim.device) < p]

        members = self.members
        ends = self.until.index_select(0, members) <= day
        ending = members[ends]
        if c.reset_infectiousness:
            st.infectiousness_scale[ending[st.stage.index_select(0, ending) != Stage.SUSCEPTIBLE]] = 0.0
        st.isolated[ending] = False
        members = members[~ends]
        positives = positives_today(sim, day)
        enter = draw(positives, c.enter_probability)
        # A positive already in quarantine starts its days again; a traced agent or housemate
        # already in quarantine keeps its end (its contact happened before it began, or at home).
        restart = enter[st.isolated.index_select(0, enter)]
        if c.household:  # each housemate of a positive decides for itself, with the same probability
            _, mates = sim.household.contacts_of(positives, day)
            mates = torch.unique(mates)
            mates = mates[~torch.isin(mates, positives)]
            enter = torch.unique(torch.cat([enter, draw(mates, c.enter_probability)]))
        requested = flat_nonzero(self.request)  # one scan (numpy's on the CPU), not any() then nonzero()
        if requested.numel() > 0:
            enter = torch.unique(torch.cat([enter, requested]))
            self.request.index_fill_(0, requested, False)
        enter = enter[~self._away(st.stage.index_select(0, enter)) & ~st.isolated.index_select(0, enter)]
        st.isolated[enter] = True
        self.until[torch.cat([enter, restart])] = day + c.days
        both = torch.unique(torch.cat([members, enter]))
        leave = draw(both if c.persistence == "entry_day" else members, c.daily_dropout)
        members = both[~torch.isin(both, leave)]
        away = self._away(st.stage.index_select(0, members))
        st.isolated[torch.cat([leave, members[away]])] = False
        members = members[~away]
        self.members = members
        counted = sim.per_replicate(members)
        sim.count_activity("in_quarantine", day, counted)
        history = self.history.bitwise_left_shift_(1).bitwise_and_((1 << 30) - 1)
        history.index_copy_(0, members, history.index_select(0, members) | 1)
        if c.persistence == "full":  # a day in hospital is a day isolated, for tracing
            ill = sim.infected()
            hospital = ill[self._away(st.stage.index_select(0, ill))]
            history.index_copy_(0, hospital, history.index_select(0, hospital) | 1)
        sim.book_cost("quarantine_day", day, counted, c.cost_per_day)
