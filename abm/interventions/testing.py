"""Testing: several test types at once, each with sensitivity, specificity, a result delay, a
daily capacity and a price; symptomatic agents (and, optionally, traced contacts) are tested.

Fields written: ``positive_day`` (int16, day of the latest positive result, -1 none) and
``last_test_day`` (int16, day of the latest test taken; ``never_tested_day`` before any).
Fields read: ``test_request`` (bool, set by tracing to ask for a test; cleared here).
Daily counts (timeseries columns): ``tests`` taken, ``positive_results`` received.
"""

from __future__ import annotations

import torch

from abm.engine.config import Phase, Stage
from abm.engine.contacts import flat_nonzero
from abm.engine.rng import generator
from abm.engine.simulator import Simulation
from abm.interventions.config.testing import TestingConfig as TestingConfig  # the settings, named here as before
from abm.interventions.config.testing import TestingSpec
from abm.interventions.config.testing import TestType as TestType
from abm.interventions.config.testing import rt_pcr as rt_pcr
from abm.interventions.selection import first_per_replicate

NOT_INFECTED = (Stage.SUSCEPTIBLE, Stage.RECOVERED, Stage.DEATH)


def is_symptomatic(stage: torch.Tensor) -> torch.Tensor:
    """Whether each stage has symptoms that lead to a test (mild or severe)."""
    return (stage == Stage.MILD_SYMPTOMS) | (stage == Stage.SEVERE_SYMPTOMS)


def positives_today(sim: Simulation, day: int) -> torch.Tensor:
    """Agents (ascending) whose positive result arrived on ``day`` (field ``positive_day``),
    shared by quarantine and the tracers: the list testing keeps, or else found once a day."""
    known = sim.memo.get(("positives", day))
    if known is None:
        known = keep_positives(sim, day, (sim.field("positive_day", torch.int16, -1) == day).nonzero().squeeze(1))
    return known


def positives_to_trace(sim: Simulation, day: int) -> torch.Tensor:
    """Index cases tracing acts on today (ascending): the agents whose positive result arrived
    today (``positives_today``), and those whose same-day result (a test with no delay) arrived in
    yesterday's testing, after yesterday's tracing had run."""
    today = positives_today(sim, day)
    late = sim.memo.get(("same_day_positives", day - 1))
    if late is None or late.numel() == 0:
        return today
    return torch.unique(torch.cat([today, late]))


def keep_positives(sim: Simulation, day: int, agents: torch.Tensor) -> torch.Tensor:
    """Store ``agents`` (ascending) as the day's positives, dropping earlier days' lists."""
    for old in [k for k in sim.memo if k[0] == "positives" and k[1] != day]:
        del sim.memo[old]
    sim.memo[("positives", day)] = agents
    return agents


class Testing(TestingSpec):
    """Tests symptomatic agents (and traced contacts who are asked to test)."""

    def attach(self, sim: Simulation) -> None:
        self.result_day = torch.full((sim.total,), -1, dtype=torch.int16, device=sim.device)
        self.result_positive = torch.zeros(sim.total, dtype=torch.bool, device=sim.device)
        self.last_result_day = torch.full((sim.total,), -10_000, dtype=torch.int32, device=sim.device)
        self.positive_day = sim.field("positive_day", torch.int16, -1)
        self.last_test_day = sim.field("last_test_day", torch.int16, -1).fill_(self.cfg.never_tested_day)
        self.pending: dict[int, torch.Tensor] = {}  # agents whose result arrives on a day
        self.request = sim.field("test_request", torch.bool, False)
        sim.declare_activity("tests")
        sim.declare_activity("positive_results")
        # Per stage: symptomatic (tested as such) and infected (tests positive with the sensitivity).
        self.symptomatic_stage = is_symptomatic(torch.arange(len(Stage), device=sim.device))
        self.infected_stage = torch.ones(len(Stage), dtype=torch.bool, device=sim.device)
        self.infected_stage[[int(s) for s in NOT_INFECTED]] = False
        self.delays = [
            (
                torch.tensor(t.result_delay_days, device=sim.device),
                torch.tensor(t.result_delay_probs, device=sim.device).cumsum(0),
            )
            for t in self.cfg.tests
        ]

    def hooks(self) -> dict:
        return {Phase.TEST_RESULTS: self.results, Phase.TESTING: self.test}

    def results(self, sim: Simulation, day: int, same_day: bool = False) -> None:
        """Results due today arrive (``same_day``: those of today's tests with no delay, which
        arrive after today's tracing; tracing acts on them tomorrow, ``positives_to_trace``)."""
        due = self.pending.pop(day, None)
        if due is None and same_day:
            return  # none of today's tests is without delay: no result arrives now
        if due is None:  # no result today: today's list of positives is empty
            positive = self.result_day[:0].long()
        else:
            positive = due.index_select(0, self.result_positive.index_select(0, due).nonzero().squeeze(1))
            self.positive_day.index_fill_(0, positive, day)
            sim.count_activity("positive_results", day, sim.per_replicate(positive))
        for old in [k for k in sim.memo if k[0] == "same_day_positives" and k[1] < day - 1]:
            del sim.memo[old]
        if same_day:
            sim.memo[("same_day_positives", day)] = positive
        # Today's list of positives: testing writes every result, so it keeps the list (same-day
        # results join it later) and nobody has to scan all agents for it.
        known = sim.memo.get(("positives", day))
        keep_positives(sim, day, torch.unique(positive if known is None else torch.cat([known, positive])))
        if due is not None:
            self.last_result_day.index_fill_(0, due, day)
            self.result_day.index_fill_(0, due, -1)

    def test(self, sim: Simulation, day: int) -> None:
        """Today's tests: eligible agents, each test type in order, within capacity."""
        if day < self.cfg.start_day:
            self.request.zero_()
            return
        st = sim.state
        stage = st.stage
        # Candidates first (few: the symptomatic among the infected, and the requests), then the
        # eligibility checks on them only.
        infected = sim.infected()
        cand = infected[self.symptomatic_stage.index_select(0, stage.index_select(0, infected).long())]
        requested = flat_nonzero(self.request)  # one scan (numpy's on the CPU), not any() then nonzero()
        if requested.numel() > 0:
            cand = torch.unique(torch.cat([cand, requested]))
        s = stage.index_select(0, cand)
        valid = self.cfg.validity_days
        waited = (day - self.last_result_day.index_select(0, cand)) > (valid if valid is not None else -1)
        ok = (self.result_day.index_select(0, cand) < 0) & waited & (s != Stage.DEATH) & (s < Stage.HOSPITALIZED)
        if not self.cfg.test_quarantined:
            ok &= ~st.isolated.index_select(0, cand)
        if not self.cfg.retest_positives:  # no retest after a positive, unless infected since
            # Infected on the day of the positive result counts as since: the result arrives at
            # the start of the day, an infection in its transmission (so that positive was false).
            pos = self.positive_day.index_select(0, cand)
            ok &= (pos < 0) | (pos <= st.infected_day.index_select(0, cand))
        cand = cand.index_select(0, ok.nonzero().squeeze(1))
        cand_symptomatic = self.symptomatic_stage.index_select(0, stage.index_select(0, cand).long())
        cand_request = self.request.index_select(0, cand)
        untested = torch.ones_like(cand, dtype=torch.bool)
        gen = generator(sim.seed, "testing", day, sim.device)
        for i, test in enumerate(self.cfg.tests):
            who = torch.zeros_like(untested)
            if "symptomatic" in test.given_to:
                who |= cand_symptomatic
            if "traced" in test.given_to:
                who |= cand_request
            pick = (untested & who).nonzero().squeeze(1)
            if test.daily_capacity is not None:
                limit = torch.full((sim.replicates,), test.daily_capacity, device=sim.device)
                key = torch.rand(pick.shape[0], generator=gen, device=sim.device)
                pick = pick[first_per_replicate(sim.replicate.index_select(0, cand.index_select(0, pick)), key, limit)]
            if pick.numel() == 0:
                continue
            idx = cand.index_select(0, pick)
            untested.index_fill_(0, pick, False)
            self.last_test_day.index_fill_(0, idx, day)
            infected = self.infected_stage.index_select(0, stage.index_select(0, idx).long())
            u = torch.rand(2, idx.shape[0], generator=gen, device=sim.device)
            p_pos = torch.where(infected, test.sensitivity, 1 - test.specificity)
            self.result_positive[idx] = u[0] < p_pos
            days, cum = self.delays[i]
            k = torch.searchsorted(cum, u[1], right=True).clamp_max(days.shape[0] - 1)
            delay = days.index_select(0, k)
            self.result_day[idx] = (day + delay).to(torch.int16)
            for dd in torch.unique(delay).tolist():
                ready = idx[delay == dd]
                prev = self.pending.get(day + dd)
                self.pending[day + dd] = ready if prev is None else torch.cat([prev, ready])
            tested = sim.per_replicate(idx)
            sim.count_activity("tests", day, tested)
            sim.book_cost(f"test_{test.name}", day, tested, test.cost)
        self.request.index_fill_(0, requested, False)  # the requests read above, all of them
        # Same-day results (delay 0) arrive at once.
        self.results(sim, day, same_day=True)
