"""Reproduce the published chapter-E tables with the reference profile (scenarios/reference/).

    python benchmarks/reference_tables.py [--replicates 10] [--only ni,sq] [--no-write]

Runs every reference scenario (100,000 agents, 180 days, seed 1234), computes the published
metrics (abm.outputs.reference_results), compares them with the thesis's numbers and the
authors' raw notes within the published tolerances, checks the qualitative claims Q-1 to Q-8,
prints the Markdown and writes it into BENCHMARKS.md (the section between the markers
``<!-- reference-tables:begin -->`` and ``<!-- reference-tables:end -->``, appended if absent)
when it holds every scenario: a run of ``--only`` some of them writes only with ``--reuse`` and a
cache that holds the others, so that a partial run never replaces the recorded table.
Each scenario's metrics are cached in runs/reference_tables.json as they finish, so a rerun
with ``--reuse`` only runs what is missing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import sys
import time
from datetime import date
from pathlib import Path

import numpy as np
import torch

import abm
from abm.outputs.reference_results import (
    CAPACITY_PER_100K,
    TARGETS,
    ReferenceMetrics,
    Target,
    metric_value,
    qualitative_claims,
    reference_metrics,
)
from abm.plurals import counted

ROOT = Path(__file__).resolve().parents[1]
NAMES = [
    "ni", "sq", "vacc", "ct", "ct_app70", "vacc_ct", "vacc_t30", "vacc_t60", "vacc_t30_ct", "vacc_t60_ct",
    "vacc_budget",
]  # fmt: skip
BEGIN, END = "<!-- reference-tables:begin -->", "<!-- reference-tables:end -->"
KIND_LABEL = {
    "peak": "peak hospitalized",
    "day": "peak day",
    "rate": '"rate" (2nd difference)',
    "cumulative": "cumulative infected (t = 179)",
    "cost": "cost $",
}


def label(kind: str) -> str:
    """A readable metric name."""
    if kind.startswith("cumulative_at_"):
        return f"cumulative infected (t = {kind.rsplit('_', 1)[1]})"
    return KIND_LABEL[kind]


def fmt(kind: str, value: float) -> str:
    """A metric value as the tables print it."""
    if kind == "day":
        return f"{value:.0f}"
    if kind in ("peak", "rate"):
        return f"{value:.1f}"
    return f"{value:,.0f}"


def tolerance_text(t: Target) -> str:
    """The tolerance of a target, as text."""
    if t.tolerance is None:
        return "n/a"
    if t.relative:
        return "exact" if t.tolerance == 0 else f"±{100 * t.tolerance:.0f}%"
    if t.kind == "day":
        return f"±{t.tolerance:.0f} days"
    return "exact" if t.tolerance == 0 else f"±{t.tolerance:,.0f} (3% of N)"


def run_all(names: list[str], replicates: int, cache: Path, reuse: bool) -> dict[str, dict]:
    """Metrics of the scenarios ``names``, and of those the cache holds besides.

    With ``reuse``, a scenario the cache holds at ``replicates`` is not run again; without it,
    every scenario of ``names`` runs afresh. Either way the cache keeps its other scenarios, so
    that a run of ``--only`` some of them leaves the rest for a later ``--reuse``."""
    done = json.loads(cache.read_text(encoding="utf-8")) if cache.is_file() else {}
    for name in names:
        if reuse and name in done and done[name]["replicates"] == replicates:
            continue
        t = time.perf_counter()
        res = abm.run(ROOT / "scenarios/reference" / f"{name}.yaml", replicates=replicates)
        m = reference_metrics(res.result)
        row = dataclasses.asdict(m)
        row["cumulative_by_age"] = m.cumulative_by_age.tolist()
        row["engine_seconds"] = res.result.engine_seconds
        row["wall_seconds"] = time.perf_counter() - t
        done[name] = row
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(done, indent=1), encoding="utf-8")
        print(f"# {name}: {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
    return done


def to_metrics(row: dict) -> ReferenceMetrics:
    """Metrics back from their cached form."""
    fields = {f.name for f in dataclasses.fields(ReferenceMetrics)}
    kw = {k: v for k, v in row.items() if k in fields}
    kw["cumulative_at"] = {int(k): v for k, v in kw["cumulative_at"].items()}
    kw["cumulative_at_sd"] = {int(k): v for k, v in kw.get("cumulative_at_sd", {}).items()}
    kw["near_peak_days"] = tuple(kw.get("near_peak_days", (0, 0)))
    kw["cumulative_by_age"] = np.asarray(kw["cumulative_by_age"])
    return ReferenceMetrics(**kw)


def markdown(rows: dict[str, dict], replicates: int) -> str:
    """The BENCHMARKS.md section."""
    m = {k: to_metrics(v) for k, v in rows.items()}
    seconds = sum(r.get("wall_seconds", 0.0) for r in rows.values())
    out = [
        "## Reference profile: the published chapter-E results (issue #4)",
        "",
        f"Command: `python benchmarks/reference_tables.py --replicates {replicates}` (scenarios/reference/, "
        f"100,000 agents of the reference population, 180 days, {replicates} replicates, seed 1234, torch threads "
        f"1). Machine: the 2-core developer machine ({platform.machine()}, Python {platform.python_version()}, "
        f"torch {torch.__version__}); date {date.today().isoformat()}; "
        f"{counted(round(seconds / 60), 'minute')} of runs in all.",
        "",
        "Metrics as the published numbers define them (specs: epidemic model section 9; "
        "`abm/outputs/reference_results.py`): the reference code records stage counts at the start of each day, "
        "so its day t is our end of day t − 1; **peak hospitalized** is the maximum of the replicate-mean "
        'HOSPITALIZED curve (that stage only) and **peak day** its day; the **"rate"** (the thesis\'s "peak daily '
        'infection rate") is the maximum second difference of the mean cumulative-infected curve; **cumulative '
        "infected** counts agents no longer susceptible (mean over replicates); **cost** is doses × $20 + tests "
        "× $5 over 180 days. *Thesis*: the printed number; *raw*: the authors' unrounded notes of the same runs "
        "(10 runs unless noted). Tolerances: published results section 3 (applied to the raw value; it gives none "
        "for t = 70, reported only, or t = 120, which takes the final size's ±3% of N). Hospital "
        f"capacity: {CAPACITY_PER_100K} beds per 100,000.",
        "",
        "| scenario | metric | ours | thesis | raw | tolerance | within | note |",
        "|---|---|---:|---|---:|---|---|---|",
    ]
    for t in TARGETS:
        if t.scenario not in m:
            continue
        v = metric_value(m[t.scenario], t.kind)
        ok = t.check(v)
        x = m[t.scenario]
        ours = fmt(t.kind, v)
        if t.kind == "cumulative":
            ours += f" (sd {x.cumulative_sd:,.0f})"
        elif t.kind.startswith("cumulative_at_") and int(t.kind.rsplit("_", 1)[1]) in x.cumulative_at_sd:
            ours += f" (sd {x.cumulative_at_sd[int(t.kind.rsplit('_', 1)[1])]:,.0f})"
        elif t.kind == "day" and x.near_peak_days != (0, 0):
            ours += f" (within 5% of the peak: days {x.near_peak_days[0]}-{x.near_peak_days[1]})"
        raw = "n/a" if t.raw is None else fmt(t.kind, t.raw)
        mark = "n/a" if ok is None else ("yes" if ok else "**no**")
        out.append(f"| {t.scenario} | {label(t.kind)} | {ours} | {t.thesis} | {raw} | {tolerance_text(t)} | {mark} "
                   f"| {t.note} |")  # fmt: skip
    out += [
        "",
        "Every scenario (means over replicates):",
        "",
        "| scenario | peak hospitalized (day) | rate | cumulative infected | tests | doses | cost $ | engine s |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, x in m.items():
        out.append(
            f"| {name} | {x.peak_hospitalized:.1f} ({x.peak_day}) | {x.rate:.1f} "
            f"| {100 * x.cumulative / x.agents:.1f}% | {x.tests:,.0f} | {x.doses:,.0f} | {x.cost:,.0f} "
            f"| {rows[name]['engine_seconds']:.0f} |"
        )
    if all(k in m for k in NAMES):
        out += ["", "The thesis's conclusions (published results section 2.8):", ""]
        for cid, text, holds in qualitative_claims(m):
            out.append(f"- {cid}: {'holds' if holds else '**does not hold**'}: {text}.")
    return "\n".join(out) + "\n"


def write_section(path: Path, section: str) -> None:
    """Replace the marked section of ``path`` (or append it)."""
    text = path.read_text(encoding="utf-8")
    block = f"{BEGIN}\n{section}{END}\n"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1].lstrip("\n")
        text = head + block + ("\n" + tail if tail else "")
    else:
        text = text.rstrip("\n") + "\n\n" + block
    path.write_text(text, encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--replicates", type=int, default=10, help="replicates per scenario (default 10, as published)")
    ap.add_argument("--only", default="", help="comma-separated scenario names (default: all)")
    ap.add_argument("--reuse", action="store_true", help="reuse cached metrics of scenarios already run")
    ap.add_argument(
        "--cache",
        type=Path,
        default=ROOT / "runs" / "reference_tables.json",
        help="JSON file of each scenario's metrics, added to as scenarios finish (default runs/reference_tables.json)",
    )
    ap.add_argument("--no-write", action="store_true", help="print only; leave BENCHMARKS.md alone")
    args = ap.parse_args()
    torch.set_num_threads(1)
    names = [n for n in args.only.split(",") if n] or NAMES
    cached = run_all(names, args.replicates, args.cache, args.reuse)
    # The table holds what this run ran and, with --reuse, what the cache holds at its replicates.
    reused = {k for k, v in cached.items() if v["replicates"] == args.replicates} if args.reuse else set()
    rows = {k: cached[k] for k in NAMES if k in set(names) | reused}
    section = markdown(rows, args.replicates)
    print(section)
    if args.no_write:
        return
    missing = [n for n in NAMES if n not in rows]
    if missing:
        print(
            f"BENCHMARKS.md left as it is: its section needs every scenario, and {', '.join(missing)} "
            "did not run (run them too, or add --reuse with a cache that holds them)",
            file=sys.stderr,
        )
        return
    write_section(ROOT / "BENCHMARKS.md", section)


if __name__ == "__main__":
    main()
