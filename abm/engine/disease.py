"""Disease progression as tensors: branching by age, dwell times and infectiousness drawn on a
device from the disease settings (:class:`abm.engine.config.DiseaseConfig`, with the stages and
the thesis model's defaults; named here too, as before).
"""

from __future__ import annotations

import torch

from abm.engine.config import (
    ABSORBING,
    AGE_GROUP_LABELS,
    MAX_DAYS,
    NEVER,
    NUM_AGE_GROUPS,
    NUM_STAGES,
    STAGE_NAMES,
    SYMPTOMATIC,
    DiseaseConfig,
    DwellTime,
    InfectedStageName,
    Seasonality,
    Stage,
    StageName,
    default_branching,
    default_dwell_times,
)

__all__ = [
    "ABSORBING", "AGE_GROUP_LABELS", "MAX_DAYS", "NEVER", "NUM_AGE_GROUPS", "NUM_STAGES", "STAGE_NAMES",
    "SYMPTOMATIC", "DiseaseConfig", "DiseaseModel", "DwellTime", "InfectedStageName", "Seasonality", "Stage",
    "StageName", "default_branching", "default_dwell_times", "discrete_gamma_cdf",
]  # fmt: skip


def discrete_gamma_cdf(shape: float, scale: float, days: int) -> torch.Tensor:
    """P(round(G) <= d) for d = 0..days, G ~ Gamma(shape, scale)."""
    edges = torch.arange(days + 1, dtype=torch.float64) + 0.5
    return torch.special.gammainc(torch.tensor(shape, dtype=torch.float64), edges / scale)


class DiseaseModel:
    """The disease configuration as tensors on a device, with samplers for progression."""

    def __init__(self, cfg: DiseaseConfig, horizon: int, device: torch.device) -> None:
        self.cfg = cfg
        self.device = device
        # One table per course group: the age groups, then long-term-care residents where given.
        branching = torch.tensor(cfg.course_tables(), dtype=torch.float64)
        # The cdf is 1 from a row's last stage of positive probability on: a row may sum to 1
        # within 1e-6 only (validation), and a cdf ending below 1 there would send the draws above
        # it to the row's last column (recovered), a stage of probability 0.
        positive = branching > 0
        tail = positive.cumsum(-1) == positive.sum(-1, keepdim=True)
        cdf = torch.where(tail & positive.any(-1, keepdim=True), 1.0, branching.cumsum(-1))
        self.branch_cdf = cdf.to(device=device, dtype=torch.float32)
        self.infectiousness = torch.zeros(NUM_STAGES, dtype=torch.float32)
        for name, value in cfg.infectiousness_by_stage.items():
            self.infectiousness[STAGE_NAMES.index(name)] = value
        self.infectiousness = self.infectiousness.to(device)
        # [course group, stage]: whether an agent there may still infect anyone: its stage is
        # infectious, or one it may move on to is (a stage in hospital, say, leads only to others
        # that are not).
        can = (self.infectiousness.cpu() > 0).expand(branching.shape[0], NUM_STAGES).clone()
        for _ in range(NUM_STAGES):
            can = can | ((branching > 0) & can[:, None, :]).any(-1)
        self.can_still_infect = can.to(device)
        self.susceptibility = torch.tensor(cfg.susceptibility_by_age, dtype=torch.float32, device=device)
        # Infectiousness profile g(k) = F(k) - F(k-1), k days since infection; g(0) = 0.
        m, s = cfg.infectiousness_profile_mean, cfg.infectiousness_profile_sd
        k = torch.arange(horizon + 2, dtype=torch.float64)
        f = torch.special.gammainc(torch.tensor(m**2 / s**2, dtype=torch.float64), k * m / s**2)
        self.profile = torch.diff(f, prepend=torch.zeros(1, dtype=torch.float64)).to(device, torch.float32)
        # The share of the profile left after day k (1 - F(k)): what an agent infected k days ago
        # may still pass on, relative to its whole infectiousness.
        self.profile_left = (1 - f).clamp_min(0).to(device, torch.float32)
        # Dwell times: one discrete cdf row per (from, to) pair, over 0..max_days.
        self.max_days = max(horizon, 1) + 60
        pair = torch.full((NUM_STAGES, NUM_STAGES), -1, dtype=torch.long)
        rows = []
        for i, d in enumerate(cfg.dwell_times):
            pair[STAGE_NAMES.index(d.from_stage), STAGE_NAMES.index(d.to_stage)] = i
            if d.distribution == "gamma":
                rows.append(discrete_gamma_cdf(d.shape, d.scale, self.max_days))
            else:
                base, frac = int(d.mean // 1), float(d.mean % 1)
                row = torch.zeros(self.max_days + 1, dtype=torch.float64)
                row[base:] = 1 - frac
                row[base + 1 :] = 1.0
                rows.append(row)
        cdf_rows = torch.stack(rows) if rows else torch.ones(1, self.max_days + 1, dtype=torch.float64)
        cdf_rows[:, -1] = 1.0
        # Offset each row by its index so one sorted 1-D array serves every pair.
        self.dwell_flat = (
            (cdf_rows + torch.arange(cdf_rows.shape[0], dtype=torch.float64)[:, None]).flatten().to(device)
        )
        self.dwell_pair = pair.to(device)
        self.dwell_width = self.max_days + 1

    def course_groups(self, age_group: torch.Tensor, long_term_care: torch.Tensor) -> torch.Tensor:
        """Each agent's course group (the table its course is drawn from): its age group, or, with
        ``long_term_care_branching`` given, the residents' table for agents in ``long_term_care``."""
        if self.cfg.long_term_care_branching is None:
            return age_group
        return torch.where(long_term_care, NUM_AGE_GROUPS, age_group)

    def next_stage(self, course_group: torch.Tensor, stage: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Draw the stage after ``stage`` for agents of ``course_group`` (:meth:`course_groups`)
        from uniforms ``u``."""
        rows = self.branch_cdf.reshape(-1, NUM_STAGES)  # one row per (course group, stage)
        cdf = rows.index_select(0, course_group.long() * NUM_STAGES + stage.long())
        return (u[:, None] >= cdf).sum(1).clamp_max(NUM_STAGES - 1)

    def dwell(self, stage: torch.Tensor, nxt: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Draw D (days beyond the first) for the move ``stage`` -> ``nxt`` from uniforms ``u``."""
        p = self.dwell_pair[stage.long(), nxt.long()].clamp_min(0)
        pos = torch.searchsorted(self.dwell_flat, p.to(torch.float64) + u.to(torch.float64), right=True)
        return (pos - p * self.dwell_width).clamp(0, self.max_days)
