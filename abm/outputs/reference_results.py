"""The published chapter-E results of the thesis model, the metrics they were computed with,
and the comparison of a reference-profile run with them.

Targets are the thesis's printed numbers and the authors' unrounded notes of the same runs
(specs: published results section 2), with the tolerances of its section 3. Metric
definitions (specs: epidemic model section 9), as the reference code computes them:

* the reference code records each day's stage counts at the *start* of the day, so its row t
  is this engine's end of day t - 1 (row 0: the initial state, which day 0 does not change,
  since nobody infects on the day of their own infection);
* hospital peak: the maximum over days of the replicate-mean HOSPITALIZED count (this stage
  only, not ICU or step-down), and its day;
* "peak daily infection rate": the maximum over days of the second difference of the mean
  cumulative-infected curve (the thesis's "281 per 100,000");
* cumulative infected: agents no longer susceptible at row 179 (mean over replicates);
* cost: doses x $20 + tests x $5 over the 180 days (mean over replicates).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from abm.engine.disease import NUM_AGE_GROUPS, Stage
from abm.engine.recorder import SimulationResult

CAPACITY_PER_100K = 54.95  # 1.57 beds per 1000 x (1 - 0.65 occupied) x 100


def reference_rows(stages: np.ndarray) -> np.ndarray:
    """Counts [day, ...] recorded at the end of each day, re-indexed as the reference code's
    rows (start of each day): row 0 is the initial state, row t the end of day t - 1."""
    return np.concatenate([stages[:1], stages[:-1]], axis=0)


@dataclass
class ReferenceMetrics:
    """A run's figures as the published tables define them (means over replicates)."""

    agents: int
    replicates: int
    peak_hospitalized: float
    peak_day: int
    rate: float  # max second difference of the mean cumulative-infected curve
    cumulative: float  # mean cumulative infected at the last row
    cumulative_sd: float
    cumulative_at: dict[int, float]  # mean cumulative infected at given rows
    cumulative_at_sd: dict[int, float]  # its sd over replicates
    cumulative_by_age: np.ndarray  # [9] mean cumulative infected by age group at the last row
    cost: float
    tests: float
    doses: float
    near_peak_days: tuple[int, int] = (0, 0)  # first and last day the mean curve is within 5% of its peak


def reference_metrics(res: SimulationResult, at_days: tuple[int, ...] = (50, 70, 120)) -> ReferenceMetrics:
    """The published metrics of a run (see the module docstring)."""
    n = res.agents
    by_age = reference_rows(res.stages_by_age.astype(np.float64))  # [row, replicate, age, stage]
    st = by_age.sum(axis=2)
    hosp = st[:, :, Stage.HOSPITALIZED].mean(axis=1)
    cum = n - st[:, :, Stage.SUSCEPTIBLE]  # [row, replicate]
    cum_mean = cum.mean(axis=1)
    age_total = by_age[-1].sum(axis=2)  # [replicate, age]
    age_cum = (age_total - by_age[-1, :, :, Stage.SUSCEPTIBLE]).mean(axis=0)
    near = np.flatnonzero(hosp >= 0.95 * hosp.max())
    costs = res.costs
    per_item = costs.groupby("item")["count"].sum() / res.replicates if len(costs) else {}
    tests = float(sum(v for k, v in dict(per_item).items() if str(k).startswith("test_")))
    doses = float(dict(per_item).get("vaccine_dose", 0.0))
    return ReferenceMetrics(
        agents=n,
        replicates=res.replicates,
        peak_hospitalized=float(hosp.max()),
        peak_day=int(hosp.argmax()),
        rate=float(np.diff(cum_mean, n=2).max()) if cum_mean.shape[0] > 2 else 0.0,
        cumulative=float(cum[-1].mean()),
        cumulative_sd=float(cum[-1].std(ddof=1)) if cum.shape[1] > 1 else 0.0,
        cumulative_at={d: float(cum_mean[d]) for d in at_days if d < cum_mean.shape[0]},
        cumulative_at_sd={
            d: float(cum[d].std(ddof=1)) if cum.shape[1] > 1 else 0.0 for d in at_days if d < cum.shape[0]
        },
        cumulative_by_age=age_cum.reshape(NUM_AGE_GROUPS),
        cost=float(res.cost_totals.mean()),
        tests=tests,
        doses=doses,
        near_peak_days=(int(near[0]), int(near[-1])),
    )


@dataclass(frozen=True)
class Target:
    """One published number and how close a reproduction must come.

    ``kind``: peak (hospital peak), day (its day), rate, cumulative (infected at the end),
    cumulative_at_<t>, cost. ``tolerance`` is relative (``relative=True``) or absolute in the
    metric's units; None: reported only."""

    scenario: str
    kind: str
    thesis: str
    raw: float | None
    tolerance: float | None
    relative: bool
    note: str = ""

    def check(self, value: float) -> bool | None:
        """Whether ``value`` lies within the tolerance of the raw number (None: no check)."""
        if self.tolerance is None or self.raw is None:
            return None
        allowed = self.tolerance * abs(self.raw) if self.relative else self.tolerance
        return abs(value - self.raw) <= allowed + 1e-9


N = 100_000
_PCT3 = 0.03 * N  # final cumulative infected: +-3% of N (absolute)
# Section 3 gives tolerances for the final size and for t = 50 only; t = 70 is reported only, and
# t = 120 (past the epidemic's end in NI) borrows the final size's.
_AT120 = "section 3 gives no tolerance at t = 120: the final size's is applied"
# CT's published numbers. ct_app70 (CT as the published runs most likely ran it: 70% uniform app
# adoption) is held to the same ones, without ct's note on the adoption.
_CT = [
    Target("ct", "peak", "within 16% of 55", 64, 0.15, True, "published runs used 70% uniform adoption"),
    Target("ct", "day", "t = 79 (+14 days)", 79, 5, False),
    Target("ct", "rate", "78 (-72%)", 78, 0.20, True),
    Target("ct", "cumulative", "54%", 54_185.0, _PCT3, False),
    Target("ct", "cost", "$0.42M", 420_410.5, 0.05, True),
]
# Published results section 2 (raw = the authors' unrounded notes, 10 runs unless noted),
# tolerances from its section 3.
TARGETS: list[Target] = [
    Target("ni", "peak", "175", 174.6, 0.15, True),
    Target("ni", "day", "t = 65", 65, 5, False),
    Target("ni", "rate", "281", 281, 0.20, True),
    Target("ni", "cumulative", "81%", 81_318.1, _PCT3, False),
    Target("ni", "cumulative_at_50", "25%", 25_507.6, 0.50, True),
    Target("ni", "cumulative_at_70", "76%", 76_389.7, None, False, "no tolerance given (take-off timing)"),
    Target("ni", "cumulative_at_120", "81%", 81_317.3, _PCT3, False, _AT120),
    Target("ni", "cost", "$0", 0.0, 0.0, False),
    Target("sq", "peak", "115", 114.5, 0.15, True),
    Target("sq", "day", "(not printed)", 78, 5, False),
    Target("sq", "rate", "154 (-45%)", 154, 0.20, True),
    Target("sq", "cumulative", "~70%", 70_622.6, _PCT3, False),
    Target("sq", "cost", "$0.54M", 545_192.5, 0.05, True),
    Target("vacc", "peak", "+57% over 55", 86.5, 0.15, True),
    Target("vacc", "day", "(not printed)", 64, 5, False),
    Target("vacc", "rate", "nearing NI", 206, 0.20, True),
    Target("vacc", "cumulative", "~70%", 71_495.9, _PCT3, False),
    Target("vacc", "cost", "$1.02M", 1_020_000.0, 0.0, False),
    *_CT,
    *(replace(t, scenario="ct_app70", note="") for t in _CT),
    Target("vacc_ct", "cumulative_at_50", "5%", 4_623, 0.50, True, "1 reference run"),
    Target("vacc_ct", "cumulative_at_70", "19%", 19_312, None, False, "1 reference run; no tolerance given"),
    Target("vacc_ct", "cumulative_at_120", "36%", 36_407, _PCT3, False, f"1 reference run; {_AT120}"),
    Target("vacc_ct", "cumulative", "(end)", 36_653, _PCT3, False, "1 reference run"),
    Target("vacc_t30", "peak", "+61% vs VACC", 139.7, 0.15, True),
    Target("vacc_t30", "day", "same time", 62, 5, False),
    Target("vacc_t30", "cost", "(in notes)", 900_000.0, 0.0, False),
    Target("vacc_t60", "peak", "+103% vs VACC", 174.2, 0.15, True),
    Target("vacc_t60", "day", "same time", 64, 5, False),
    Target("vacc_t60", "cost", "(in notes)", 720_000.0, 0.0, False),
    Target("vacc_t30_ct", "peak", "-55% vs VACC", 38.9, 0.15, True),
    Target("vacc_t30_ct", "day", "+14 days vs VACC(t=30)", 76, 8, False),
    Target("vacc_t30_ct", "cost", "(supplementary)", 1_235_835.5, 0.05, True),
    Target("vacc_t60_ct", "peak", "-61% vs VACC(t=60)", 68.5, 0.25, True, "2 reference runs"),
    Target("vacc_t60_ct", "day", "+23 days vs VACC(t=60)", 87, 8, False, "2 reference runs"),
    Target("vacc_budget", "peak", "-32% vs NI", 118.2, 0.25, True, "5 reference runs"),
    Target("vacc_budget", "day", "coincides with NI", 66, 5, False),
    Target("vacc_budget", "cost", "$0.42M", 421_600.0, 0.0, False, "124 doses x 170 days x $20"),
]


def metric_value(m: ReferenceMetrics, kind: str) -> float:
    """The value of a target kind in a run's metrics."""
    if kind.startswith("cumulative_at_"):
        return m.cumulative_at[int(kind.rsplit("_", 1)[1])]
    return float(
        {"peak": m.peak_hospitalized, "day": m.peak_day, "rate": m.rate, "cumulative": m.cumulative, "cost": m.cost}[
            kind
        ]
    )


def qualitative_claims(m: dict[str, ReferenceMetrics]) -> list[tuple[str, str, bool]]:
    """The thesis's conclusions Q-1 to Q-8 (published results section 2.8) as checks on the
    reference scenarios' metrics: (id, what is checked with the figures, holds)."""
    out: list[tuple[str, str, bool]] = []
    cap = CAPACITY_PER_100K * m["ni"].agents / 1e5

    def red(a: float, b: float) -> float:
        return 1 - a / b if b else 0.0

    days = {k: v.peak_day for k, v in m.items()}
    late = {k: d for k, d in days.items() if d >= 100}
    out.append(("Q-1", f"every hospital peak before day 100 (latest: {max(days.values())})", not late))
    sq = m["sq"].peak_hospitalized / cap
    out.append(("Q-2", f"SQ's peak stays about 2x capacity: {sq:.2f}x (1.5x-2.5x)", 1.5 <= sq <= 2.5))
    ph, fs = red(m["vacc"].peak_hospitalized, m["ni"].peak_hospitalized), red(m["vacc"].cumulative, m["ni"].cumulative)
    rate = red(m["vacc"].rate, m["ni"].rate)
    out.append(
        (
            "Q-3",
            f"VACC cuts the hospital peak ({100 * ph:.0f}%, about 50%) far more than infections "
            f"({100 * fs:.0f}%); its rate stays near NI ({100 * rate:.0f}% lower)",
            0.35 <= ph <= 0.65 and ph > 2 * fs and rate < 0.4,
        )
    )
    four = ["ni", "sq", "vacc", "ct_app70"]
    best = min(four, key=lambda k: m[k].peak_hospitalized)
    ct = m["ct_app70"]
    delay = ct.peak_day - m["ni"].peak_day
    out.append(
        (
            "Q-4",
            f"CT has the lowest peak of NI/SQ/VACC/CT (lowest: {best}), about 2 weeks later ({delay:+d} days), "
            f"final size {100 * ct.cumulative / ct.agents:.1f}% (54%)",
            best == "ct_app70" and 7 <= delay <= 21 and abs(ct.cumulative / ct.agents - 0.54) <= 0.03,
        )
    )
    r_ct, r_vb = (
        red(ct.peak_hospitalized, m["ni"].peak_hospitalized),
        red(m["vacc_budget"].peak_hospitalized, m["ni"].peak_hospitalized),
    )
    out.append(
        (
            "Q-5",
            f"cost CT ${ct.cost:,.0f} < SQ ${m['sq'].cost:,.0f} < VACC ${m['vacc'].cost:,.0f}; for the same budget "
            f"CT cuts the peak {100 * r_ct:.0f}% vs VACC-budget {100 * r_vb:.0f}% (about 2x) and "
            f"{ct.peak_day - m['vacc_budget'].peak_day:+d} days later",
            ct.cost < m["sq"].cost < m["vacc"].cost and r_ct >= 1.5 * r_vb and ct.peak_day > m["vacc_budget"].peak_day,
        )
    )
    v10, v30, v60 = m["vacc"], m["vacc_t30"], m["vacc_t60"]
    c30, c60 = m["vacc_t30_ct"], m["vacc_t60_ct"]
    spread = max(v10.peak_day, v30.peak_day, v60.peak_day) - min(v10.peak_day, v30.peak_day, v60.peak_day)
    out.append(
        (
            "Q-6",
            f"later vaccination raises the peak ({v10.peak_hospitalized:.0f} < {v30.peak_hospitalized:.0f} < "
            f"{v60.peak_hospitalized:.0f}) at about the same time (days within {spread}); VACC(t=30)+CT peaks lower "
            f"({c30.peak_hospitalized:.0f}) than VACC(t=10) and {c30.peak_day - v30.peak_day:+d} days after "
            f"VACC(t=30); VACC(t=60)+CT {c60.peak_day - v60.peak_day:+d} days after VACC(t=60)",
            v10.peak_hospitalized < v30.peak_hospitalized < v60.peak_hospitalized
            and spread <= 7
            and c30.peak_hospitalized < v10.peak_hospitalized
            and c30.peak_day - v30.peak_day >= 10
            and c60.peak_day - v60.peak_day >= 10,
        )
    )
    ni120 = m["ni"].cumulative_at[120] / m["ni"].agents
    all120 = m["vacc_ct"].cumulative_at[120] / m["vacc_ct"].agents
    out.append(
        (
            "Q-7",
            f"combined interventions cut the share infected at t = 120 from {100 * ni120:.0f}% (81%) to "
            f"{100 * all120:.0f}% (about 36%)",
            abs(ni120 - 0.81) <= 0.03 and abs(all120 - 0.36) <= 0.10,
        )
    )
    age_v = 1 - m["vacc"].cumulative_by_age / m["ni"].cumulative_by_age
    age_c = 1 - m["ct_app70"].cumulative_by_age / m["ni"].cumulative_by_age
    ni_age = m["ni"].cumulative_by_age
    kids = 1 - m["ct_app70"].cumulative_by_age[:2].sum() / ni_age[:2].sum()
    adults = 1 - m["ct_app70"].cumulative_by_age[2:6].sum() / ni_age[2:6].sum()
    out.append(
        (
            "Q-8",
            f"VACC cuts infections of ages 70-79 by {100 * age_v[7]:.0f}% and 80+ by {100 * age_v[8]:.0f}% "
            f"(-82%, -92%) and under 60 by at most {100 * age_v[:6].max():.0f}%; CT cuts ages 0-19 by "
            f"{100 * kids:.0f}% vs 20-59 by {100 * adults:.0f}% (more for children; per group "
            f"{', '.join(f'{100 * x:.0f}' for x in age_c)}%)",
            age_v[7] >= 0.7 and age_v[8] >= 0.8 and age_v[:6].max() < 0.15 and kids > adults,
        )
    )
    return out
