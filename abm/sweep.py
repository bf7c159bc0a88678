"""Sweeps: a scenario run over the cartesian product of ``--sweep key=v1,v2,...`` options,
each variant with several replicates, locally or on a Ray cluster, into one combined table.

Every (variant, replicate) is one run with a single replicate and its own seed: replicate ``r``
of a variant whose resolved ``simulation.seed`` is ``s`` runs with seed ``s + r`` (population
and epidemic alike). The seed depends on nothing but the scenario, the overrides and ``r``, so
the combined table is the same whichever backend runs the tasks and in whatever order the
workers finish them; and a row is re-run exactly by ``abm run FILE --set KEY=VALUE ... --seed
SEED --replicates 1``. Variants share seeds (common random numbers): replicate ``r`` of every
variant has the same population, seeded agents and random streams, and the same epidemic until
the varied setting first acts differently; from then on their draws part (the transmission
step's draws follow the day's candidates). So the changes are taken replicate by replicate, which
narrows their intervals where the setting acts late (vaccination from day 10: a standard error of
129 against 197 for independent runs, BENCHMARKS.md "Dose-response") and not where it acts from
day 0 (contact multipliers); hence a sweep may not vary the seed (nor the number of days: changes
compare only over one horizon).

>>> from abm.sweep import run_sweep
>>> result = run_sweep("scenarios/king_county/vacc_ct.yaml", ["contacts.community.weight=0.2,0.4"], replicates=3)
>>> result.summary[["contacts.community.weight", "cumulative_infected_share_mean"]]
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import platform
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
import yaml
from matplotlib.figure import Figure

from abm import __version__, invocation, result_notes, scenario_notes
from abm.day_dates import dates_as_text
from abm.key_paths import lookup, short_keys
from abm.memory import memory_note
from abm.outputs import compare_reproduction
from abm.outputs.calendar import date_of
from abm.outputs.compare import comparison_table
from abm.outputs.differences import paired_interval, same_draws, welch_interval
from abm.outputs.journal import Journal, work_key
from abm.outputs.plots import RunTables
from abm.outputs.run_folder import atomic_folder, output_path, unwritten_said
from abm.outputs.strict_json import dumps
from abm.outputs.summary import mean_sd
from abm.outputs.summary_table import SummaryTable
from abm.outputs.sweep_by_age import AGE_COLUMNS, age_outcomes
from abm.outputs.sweep_plot import sweep_figure
from abm.outputs.sweep_report import sweep_report_html, sweep_tables
from abm.overrides import OVERRIDE_KEYS, refuse_clash, resolve, scenario_source
from abm.parallel import (
    ProcessPool,
    check_ray_address,
    check_ray_device,
    check_workers,
    ray_cpus,
    ray_finished,
    ray_session,
    ray_task,
    run_and_release,
    workers_record,
)
from abm.plugin_errors import PluginFailure
from abm.plurals import counted
from abm.runs import TASK_REUSE, check_progress
from abm.runs import run as run_scenario
from abm.scenario import COMMAND_LINE, Scenario, ScenarioError, check_population_settings, overlaps
from abm.set_options import PYTHON, OptionNames, option_texts, yaml_problem
from abm.yaml_loader import load_yaml

BACKENDS = ("local", "ray")

# The outcome columns of sweep.csv, one row per (variant, replicate); see run_task.
OUTCOMES = (
    "cumulative_infected",
    "cumulative_infected_share",
    "peak_hospital_occupancy",
    "peak_hospital_occupancy_per_100k",
    "peak_hospital_day",
    "peak_share_of_capacity",
    "days_over_capacity",
    "share_of_days_over_capacity",
    "peak_icu",
    "days_over_icu_capacity",
    "peak_new_infections",
    "peak_new_infections_day",
    "hospitalizations",
    "deaths",
    "total_cost",
    "reproduction_number_initial",
    "generation_interval",
)

INTEGER_OUTCOMES = {"peak_hospital_day", "days_over_capacity", "days_over_icu_capacity", "peak_new_infections_day"}
# Days of a peak: none in a replicate whose curve stays at zero, so the summary also counts the
# replicates its mean is over (``<outcome>_n``).
PEAK_DAYS = ("peak_hospital_day", "peak_new_infections_day")
# The reproduction number of a replicate's first week of infections and its mean generation
# interval (summary.json's reproduction_number): none where the run does not attribute its
# infections (outputs.reproduction_number: false), the first week's figure is not final by the
# run's end, or nothing was transmitted; the summary counts the replicates that have one.
# The comparison table's columns of them (abm.outputs.compare_reproduction, from the summary),
# taken from its row as the other outcomes are.
REPRODUCTION = tuple(compare_reproduction.FIGURES)
# Per peak day, the column of sweep.csv that says whether the replicate's curve is at its peak on
# its last day (summary.json's ``at_end``: the peak may come after the run, the peak and its day
# are lower bounds); the summary counts those replicates (``<column>_n``).
AT_END = {"peak_hospital_day": "peak_hospital_at_end", "peak_new_infections_day": "peak_new_infections_at_end"}
# The column of sweep.csv that says whether the replicate's epidemic is over by its last day (no one
# infected then: it died out or ended; summary.json's replicates_epidemic_over); the summary counts
# those replicates (``epidemic_over_n``), so a mean over ended and ongoing epidemics can be read.
EPIDEMIC_OVER = "epidemic_over"
# Per peak day, the column of sweep.csv with its date, and of sweep_summary.csv with the date of
# the mean day (rounded half up), for a sweep whose variants have ``simulation.start_date``.
PEAK_DATES = {"peak_hospital_day": "peak_hospital_date", "peak_new_infections_day": "peak_new_infections_date"}
# Outcomes whose change against the first variant the summary gives with a 95% interval, per
# 100,000 agents: replicate by replicate (replicate r of every variant runs with the same seed) where
# the variant draws the first's population and random streams, else as independent runs. A change
# is the variant's figure minus the first's: below 0, fewer (or less spent) than in the first.
# Infections too: the changes of infections by age add up to theirs, as those of deaths by age do
# to the change of deaths.
CHANGES = ("cumulative_infected", "hospitalizations", "deaths", "total_cost")

# Keys a sweep may not vary (each (variant, replicate) is its own single-replicate run), with the
# option that gives them instead.
FORBIDDEN_KEYS = {"simulation.replicates": "replicates"}


def cannot_sweep(source: str, key: str, names: OptionNames) -> str:
    """The message for a sweep (``source``, its option as messages name it) that varies ``key`` of
    :data:`FORBIDDEN_KEYS`, on its own or inside a swept section."""
    return f"{source}: {key} cannot be swept; give the number of replicates with {names.name(FORBIDDEN_KEYS[key])}"


@dataclass(frozen=True)
class SweepAxis:
    """One ``--sweep`` option: a key path and the values it takes (parsed as YAML), with the
    text of each value as given."""

    key: str
    values: tuple[Any, ...]
    texts: tuple[str, ...]


@dataclass(frozen=True)
class SweepTask:
    """One run of a sweep: the resolved scenario (plain data) of a variant's replicate, and the
    variant's ``key=value`` label (:meth:`SweepPlan.label`; a failing plug-in's line names it)."""

    variant: int
    replicate: int
    seed: int
    scenario: dict[str, Any]
    label: str = ""

    @property
    def named(self) -> str:
        """The run as messages name it: ``variant 1 (masks.day=3), replicate 0``."""
        label = f" ({self.label})" if self.label else ""
        return f"variant {self.variant}{label}, replicate {self.replicate}"


@dataclass
class SweepResult:
    """A finished sweep.

    ``table``: one row per (variant, replicate) with the swept values, the seed, the outcomes of
    :data:`OUTCOMES` and the flags of :data:`AT_END` (and the dates of :data:`PEAK_DATES` where a
    variant has a start date), then infections and deaths by age group (the columns of
    :data:`abm.outputs.sweep_by_age.AGE_COLUMNS`, which add up to ``cumulative_infected`` and
    ``deaths``); ``summary``: one row per variant with the mean and sd over replicates of each
    outcome (``<outcome>_mean``, ``<outcome>_sd``, those by age group last, empty for a variant
    one of whose runs lacks them; for a peak day also
    ``<outcome>_n``, the replicates that have a peak, and ``<flag>_n``, those whose curve is at its
    peak on the last day, and ``<outcome>_mean_date`` where dated), and for each outcome of :data:`CHANGES` its
    change against the first variant (the variant's minus the first's) per 100,000 agents with a 95% interval
    (``<outcome>_change_per_100k``, ``_change_low``, ``_change_high``; empty for the first variant; and for
    the variant's region, ``<outcome>_change_region``, ``_region_low``, ``_region_high``), paired by replicate where the
    variant shares the first's agents, region and kind of device, else as independent runs
    (``changes_by``: ``paired replicates`` or ``independent runs``, as ``abm compare``'s
    ``averted_by``); then, last, the same changes of each by-age column (after the means and sds
    by age; empty where the variant or the first has a run that lacks them); ``info``: what
    ``sweep.json`` holds (the axes, the variants' resolved scenarios, timings).
    """

    table: pd.DataFrame
    summary: pd.DataFrame
    info: dict[str, Any] = field(default_factory=dict)
    # Where its runs were kept while it ran (run_sweep's ``keep``): removed once it is written.
    kept_in: Journal | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        """What was swept and the tables' sizes in one line (the tables themselves would fill a
        notebook's cell; ``summary`` shows them)."""
        swept = "; ".join(f"{key}={values}" for key, values in self.info.get("sweeps", {}).items())
        scenario = f" of {self.info['scenario']!r}" if "scenario" in self.info else ""
        return (
            f"<SweepResult{scenario}: {counted(len(self.summary), 'variant')}"
            + (f" ({swept})" if swept else "")
            + f"; table {counted(len(self.table), 'row')}, summary {counted(len(self.summary), 'row')}>"
        )

    def plot(self) -> Figure:
        """The figure ``sweep.png`` holds (:mod:`abm.outputs.sweep_plot`: the infected share, peak
        hospital beds, deaths, cost, the first week's reproduction number and the generation
        interval against a swept value, a point per variant's mean with a bar from its lowest to its
        highest replicate); a matplotlib figure, which a notebook shows.
        Needs ``info`` as :func:`run_sweep` gives it (its variants); a :class:`ValueError` else."""
        if not self.info.get("variants"):
            raise ValueError(
                "this SweepResult has no info['variants'] to draw (run_sweep's result has them); "
                "table and summary are all it holds"
            )
        return sweep_figure(self.info["scenario"], self.table, self.info["variants"], self.info["sweeps"])

    def tables(self) -> list[SummaryTable]:
        """The means and the changes tables (:func:`abm.outputs.sweep_report.sweep_tables`), as
        `abm sweep` prints them; needs ``info`` as :func:`run_sweep` gives it."""
        labels = [v["short_label"] for v in self.info["variants"]]
        return sweep_tables(self.summary, labels, self.info["agents"], self.info["region_population"])

    def write(self, out: str | Path) -> Path:
        """Write ``sweep.csv``, ``sweep_summary.csv``, ``sweep.json``, and where ``info`` holds the
        variants, as :func:`run_sweep`'s does, the plot ``sweep.png`` (:mod:`abm.outputs.sweep_plot`)
        and ``report.html`` (the tables and notes `abm sweep` prints, the plot and links) into ``out``
        (atomically); then the runs kept while it ran go. A folder that cannot be written says that
        no results were written, and what is kept (:func:`abm.outputs.run_folder.unwritten_said`)."""
        out = output_path(out, "out")
        kept = self.kept_in.said_if_unwritten() if self.kept_in is not None else contextlib.nullcontext()
        with kept, unwritten_said(out), atomic_folder(out, "sweep") as tmp:
            # 54, not 54.0 (empty: no peak, or no count by age in results made by hand)
            whole = {c: "Int64" for c in (*INTEGER_OUTCOMES, *AGE_COLUMNS) if c in self.table}
            self.table.astype(whole).to_csv(tmp / "sweep.csv", index=False)
            self.summary.to_csv(tmp / "sweep_summary.csv", index=False)
            (tmp / "sweep.json").write_text(dumps(self.info), encoding="utf-8")
            if self.info.get("variants"):  # run_sweep's result (a table built by hand has no variants to draw)
                self.plot().savefig(tmp / "sweep.png", dpi=100)
                files = sorted(p.name for p in tmp.iterdir())
                notes = result_notes.sweep_notes(self.table)
                page = sweep_report_html(self.info["scenario"], self.info["sweeps"], self.tables(), files, notes)
                (tmp / "report.html").write_text(page, encoding="utf-8")
        if self.kept_in is not None:
            self.kept_in.remove()
        return out


def split_values(text: str) -> list[str]:
    """Split ``v1,v2,...`` at the commas that are outside brackets, braces and quotes, so a
    value may itself be a YAML list (``[1, 2],[3, 4]``)."""
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def parse_axis(option: str, names: OptionNames = COMMAND_LINE) -> SweepAxis:
    """Parse one ``--sweep key.path=v1,v2,...`` option (values read as YAML); messages name it
    as ``names`` says (``--sweep ...``, or ``sweeps item '...'`` from Python)."""
    source = names.item("sweep", option)
    if "=" not in option:
        raise ScenarioError(f"{source}: write key.path=value1,value2,...")
    key, _, text = option.partition("=")
    key = key.strip()
    if not key or not all(key.split(".")):
        raise ScenarioError(f"{source}: {key!r} is not a key path; write e.g. contacts.community.weight=0.2,0.4")
    if key in FORBIDDEN_KEYS:
        raise ScenarioError(cannot_sweep(source, key, names))
    texts = split_values(text)
    if any(not t for t in texts):
        raise ScenarioError(f"{source}: {key}: empty value in {text!r}; give one or more values separated by commas")
    values = []
    for t in texts:
        try:
            values.append(dates_as_text(load_yaml(t)))  # a date (of a day setting) as its text
        except yaml.YAMLError as exc:
            raise ScenarioError(f"{source}: {key}: {t!r} is not a valid value ({yaml_problem(exc)})") from None
    seen = set()
    for t, v in zip(texts, values, strict=True):
        try:
            canonical = json.dumps(v, sort_keys=True)
        except TypeError:
            raise ScenarioError(
                f"{source}: {key}: {t!r} is not allowed; give numbers, strings, booleans, lists or mappings "
                "(quote a date: '2020-03-01')"
            ) from None
        if canonical in seen:
            raise ScenarioError(f"{source}: {key}: the value {t!r} is given twice; give each value once")
        seen.add(canonical)
    return SweepAxis(key, tuple(values), tuple(texts))


def parse_axes(options: Sequence[str], names: OptionNames = COMMAND_LINE) -> list[SweepAxis]:
    """Parse the ``--sweep`` options; each key at most once, at least one option. Messages name
    the options as ``names`` says."""
    if not options:
        example = names.item("sweep", "contacts.community.weight=0.2,0.4")
        raise ScenarioError(f"{names.name('sweep')}: give at least one, e.g. {example}")
    axes = [parse_axis(o, names) for o in options]
    keys = [a.key for a in axes]
    for i, key in enumerate(keys):
        if keys.count(key) > 1:
            raise ScenarioError(
                f"{names.item('sweep', key)}: the key is swept twice; give all its values in one {names.item('sweep')}"
            )
        other = next((k for k in keys[i + 1 :] if overlaps(k, key)), None)
        if other is not None:  # one would silently override the other
            raise ScenarioError(
                f"{names.item('sweep', key)} and {names.item('sweep', other)} set the same values; sweep one of them"
            )
    return axes


def _column_value(value: Any) -> Any:
    """A swept value as a table cell: scalars as they are, anything else as JSON text."""
    return value if value is None or isinstance(value, bool | int | float | str) else json.dumps(value)


@dataclass
class SweepPlan:
    """The variants of a sweep, validated, and the tasks that run them."""

    source: str
    axes: list[SweepAxis]
    replicates: int
    variants: list[Scenario]
    assignments: list[dict[str, Any]]

    @property
    def tasks(self) -> list[SweepTask]:
        """One task per (variant, replicate); the seed is the variant's seed plus the replicate
        number. Replicate-major: the variants of a replicate follow one another, so a worker that
        runs several of them builds their population (the same seed's) once
        (:data:`abm.runs.TASK_REUSE`)."""
        out = []
        for r in range(self.replicates):
            for v, sc in enumerate(self.variants):
                seed = sc.simulation.seed + r
                data = sc.model_dump(mode="json", by_alias=True)
                data["simulation"] = {**data["simulation"], "replicates": 1, "seed": seed}
                out.append(SweepTask(v, r, seed, data, self.label(v)))
        return out

    def label(self, v: int, short: bool = False) -> str:
        """``key=value, ...`` of variant ``v``; ``short``: each key by its shortest distinct tail
        (``weight=0.2`` for ``contacts.community.weight=0.2``), for narrow tables."""
        keys = [a.key for a in self.axes]
        if short:
            keys = short_keys(keys)
        return ", ".join(f"{k}={t}" for k, t in zip(keys, self.assignments[v]["texts"], strict=True))


def plan(
    scenario: Scenario | str | Path | dict[str, Any],
    sweeps: Sequence[str],
    *,
    replicates: int | None = None,
    sets: list[str] | None = None,
    names: OptionNames = COMMAND_LINE,
    **overrides: Any,
) -> SweepPlan:
    """Parse the sweep options and resolve every variant; any bad key or value raises
    :class:`ScenarioError` before anything runs. ``overrides``: ``agents``, ``days``,
    ``seed``, ``device`` as for :func:`abm.run`. Messages name the options as ``names`` says:
    as ``abm sweep`` takes them (``--sweep``, ``--replicates``; the default) or as
    :func:`run_sweep` does (``PYTHON``: ``sweeps``, ``replicates``)."""
    sweeps = option_texts(sweeps, "sweep", names)
    sets = option_texts(sets, "set", names)
    axes = parse_axes(sweeps, names)
    if replicates is not None and (isinstance(replicates, bool) or not isinstance(replicates, int) or replicates < 1):
        raise ScenarioError(
            f"{names.name('replicates')}: {replicates!r} is not allowed; give a whole number, at least 1"
        )
    given = {k: v for k, v in overrides.items() if v is not None}
    if replicates is not None:  # as abm run refuses --replicates with --set simulation.replicates
        refuse_clash("replicates", replicates, sets, scenario_source(scenario), names)
    for axis in axes:
        swept = names.item("sweep", axis.key)
        for item in sets or []:  # named, as the key it sets may hold the swept one (seeding={day: 4})
            if overlaps(item.split("=", 1)[0].strip(), axis.key):
                raise ScenarioError(f"{swept}: the key is also set by {names.item('set', item)}; give one of them")
        for name in given:
            if name in OVERRIDE_KEYS and overlaps(OVERRIDE_KEYS[name], axis.key):
                raise ScenarioError(f"{swept}: the key is also set by {names.name(name)}; give one of them")
    # the file and its own options first, blamed on themselves
    resolve(scenario, given, list(sets or []), names=names, batch=1)
    names = replace(names, swept_from=len(sets or []))  # the swept values, named by the messages' prefix

    def assigned(values: Sequence[tuple[SweepAxis, Any]]) -> list[str]:
        return [*(sets or []), *(f"{a.key}={json.dumps(v)}" for a, v in values)]

    def resolves_with_others(axis: SweepAxis, value: Any) -> bool:
        """Whether ``value`` of ``axis`` is valid with some values of the other axes (a day given
        as a date, with the swept simulation.start_date)."""
        others = [a for a in axes if a is not axis]
        for combo in itertools.product(*(a.values for a in others)):
            with contextlib.suppress(ScenarioError):
                resolve(
                    scenario, given, assigned([(axis, value), *zip(others, combo, strict=True)]), names=names, batch=1
                )
                return True
        return False

    for axis in axes:  # each value alone first, so that a message names the one at fault
        for value, text in zip(axis.values, axis.texts, strict=True):
            try:
                resolve(scenario, given, assigned([(axis, value)]), names=names, batch=1)
            except ScenarioError as exc:
                if len(axes) == 1 or not resolves_with_others(axis, value):
                    raise ScenarioError(f"{names.name('sweep')} {axis.key}={text}: {exc}") from exc
    variants, assignments = [], []
    for combo in itertools.product(*(range(len(a.values)) for a in axes)):
        texts = [a.texts[i] for a, i in zip(axes, combo, strict=True)]
        values = [a.values[i] for a, i in zip(axes, combo, strict=True)]
        extra = [f"{a.key}={json.dumps(v)}" for a, v in zip(axes, values, strict=True)]
        try:
            sc = resolve(scenario, given, [*(sets or []), *extra], names=names, batch=1)
        except ScenarioError as exc:
            where = ", ".join(f"{a.key}={t}" for a, t in zip(axes, texts, strict=True))
            raise ScenarioError(f"{names.name('sweep')} {where}: {exc}") from exc
        variants.append(sc)
        assignments.append({"values": values, "texts": texts})
    check_comparable(axes, variants, names)
    n_rep = replicates if replicates is not None else variants[0].simulation.replicates
    source, built = names.scenario(str(scenario), list(sets or []), list(given.items())), {}
    for sc, assignment in zip(variants, assignments, strict=True):  # each replicate draws its own population
        where = ", ".join(f"{a.key}={t}" for a, t in zip(axes, assignment["texts"], strict=True))
        for r in range(n_rep):
            seed = sc.simulation.seed + r
            whose = f" (replicate {r}, seed {seed})" if n_rep > 1 else ""
            check_population_settings(sc, f"{names.name('sweep')} {where}{whose}: {source}", seed, built)
    return SweepPlan(str(scenario), axes, n_rep, variants, assignments)


def check_comparable(axes: list[SweepAxis], variants: list[Scenario], names: OptionNames = COMMAND_LINE) -> None:
    """Refuse a sweep whose variants differ in a key of :data:`FORBIDDEN_KEYS` (swept inside a
    section: ``simulation={replicates: 2},{replicates: 3}``; every variant would run the first's
    replicates), their seed or their number of days: replicate r of every variant runs with seed
    + r, so a swept seed would make variants share runs and unpair their changes; and changes
    compare totals only over the same horizon (as ``abm compare`` requires). Messages name the
    ``--sweep`` option that varies them."""

    def option(key: str) -> str:
        axis = next(a for a in axes if overlaps(a.key, key))  # one axis at most sets a key
        return names.item("sweep", f"{axis.key}={','.join(axis.texts)}")

    resolved = [sc.model_dump(mode="json", by_alias=True) for sc in variants]
    for key in FORBIDDEN_KEYS:
        if len({json.dumps(lookup(data, tuple(key.split(".")))) for data in resolved}) > 1:
            raise ScenarioError(cannot_sweep(option(key), key, names))
    seeds = list(dict.fromkeys(sc.simulation.seed for sc in variants))
    if len(seeds) > 1:
        raise ScenarioError(
            f"{option('simulation.seed')}: the variants would run with different seeds "
            f"({', '.join(map(str, seeds))}), but the replicates already draw the seeds: replicate r of every "
            f"variant runs with seed + r (common random numbers); give more replicates with "
            f"{names.name('replicates')}, or the first seed with {names.name('seed')}"
        )
    days = list(dict.fromkeys(sc.simulation.days for sc in variants))
    if len(days) > 1:
        raise ScenarioError(
            f"{option('simulation.days')}: the variants simulate different numbers of days "
            f"({', '.join(map(str, days))}); their changes from the first variant compare only over the same "
            f"horizon (as abm compare does): give every variant the same number of days with {names.name('days')}, "
            "and run one sweep per horizon"
        )


def outcome(name: str, value: Any) -> int | float | None:
    """An outcome as stored: days as int, None for a day that does not exist (a peak of a curve
    that stays at zero), the rest as float."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return int(value) if name in INTEGER_OUTCOMES else float(value)


def as_run(sc: Scenario, result: dict[str, Any]) -> dict[str, Any]:
    """A variant's scenario as each of its replicates ran: one replicate (with seed
    ``simulation.seed + r``), and the hospital and ICU capacities it used (the region's if
    unset), as a replicate's ``result`` (:func:`run_task`) gives them; an intervention off by
    absence is left out (:meth:`Scenario.resolved_data`), so that the data saved as a file runs
    without a note on keys without a value."""
    data = sc.resolved_data()
    data["simulation"]["replicates"] = 1
    data["outputs"]["hospital_beds_per_100k"] = result["beds_per_100k"]
    data["outputs"]["icu_beds_per_100k"] = result.get("icu_beds_per_100k")  # a journal's older results lack it
    return data


def run_task(task: SweepTask) -> dict[str, Any]:
    """Run one (variant, replicate) and return its outcomes (and its engine seconds, kept
    apart from the table because timings differ from run to run). The population and community
    network of the task's seed are kept for the process's next task (:data:`abm.runs.TASK_REUSE`).
    A plug-in that fails raises its :class:`PluginFailure` naming the task's variant and replicate."""
    try:
        result = run_scenario(task.scenario, reuse=TASK_REUSE, warn=False)  # abm sweep notes it
    except PluginFailure as exc:
        raise exc.in_run(f"{task.named} (seed {task.seed})") from exc
    row = comparison_table([RunTables.from_result(result)]).iloc[0].to_dict()
    s = result.summary
    out: dict[str, Any] = {name: row[name] for name in OUTCOMES if name in row}
    out["cumulative_infected"] = s["cumulative_infected"]["mean"]
    out["peak_icu"] = s["peak_icu"]["value"]
    out["peak_new_infections"] = s["peak_new_infections"]["value"]
    out["peak_new_infections_day"] = s["peak_new_infections"]["day"]
    at_end = {
        AT_END["peak_hospital_day"]: bool(s["peak_hospital_occupancy"]["at_end"]),
        AT_END["peak_new_infections_day"]: bool(s["peak_new_infections"]["at_end"]),
    }
    return {
        "variant": task.variant,
        "replicate": task.replicate,
        "outcomes": {name: outcome(name, out[name]) for name in OUTCOMES}
        | at_end
        | {EPIDEMIC_OVER: bool(s["replicates_epidemic_over"])}
        | age_outcomes(s),
        "beds_per_100k": float(s["hospital_capacity"]["beds_per_100k"]),
        "icu_beds_per_100k": None if s["icu_capacity"] is None else float(s["icu_capacity"]["beds_per_100k"]),
        "region_population": int(s["region_population"]),
        "engine_seconds": float(result.manifest["timings"]["engine_seconds"]),
        "population_seconds": float(result.manifest["timings"]["population_seconds"]),
    }


# Called as each task finishes, with its position in the tasks given and its result.
Done = Callable[[int, dict[str, Any]], None]


def run_local(
    tasks: list[SweepTask], done: Done, workers: int = 1, names: OptionNames = COMMAND_LINE
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Run the tasks on this machine: one after the other in this process (1 worker), or in
    ``workers`` worker processes (:class:`abm.parallel.ProcessPool`; a worker process that dies
    fails the sweep, naming the task it ran where the pool can tell, as :func:`run_ray` does);
    ``done`` is called as each finishes. Returns the results in task order and what
    ``sweep.json`` records of the workers (:func:`abm.parallel.workers_record`)."""
    used = workers_record(workers, len(tasks))
    if workers == 1:
        results = []
        try:
            for i, task in enumerate(tasks):
                results.append(run_and_release(run_task, task))
                done(i, results[-1])
        finally:
            TASK_REUSE.clear()
        return results, used
    with ProcessPool(workers, names) as pool:
        finished = pool.finished(run_task, [(t,) for t in tasks], lambda i: tasks[i].named)
        return _collect(finished, len(tasks), done), used


def _collect(finished: Iterator[tuple[int, dict[str, Any]]], n: int, done: Done) -> list[dict[str, Any]]:
    """The results of ``n`` tasks that finish in any order, in task order; ``done`` after each."""
    results: list[dict[str, Any] | None] = [None] * n
    for index, result in finished:
        results[index] = result
        done(index, result)
    return [r for r in results if r is not None]


def run_ray(
    tasks: list[SweepTask],
    done: Done,
    address: str | None = None,
    workers: int | None = None,
    backend: str = "--backend ray",
    given: str | None = None,
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Run the tasks as Ray tasks (one CPU each; ``workers`` at most at once, default as many as
    the cluster takes) and return the results in task order and what ``sweep.json`` records of the
    workers (:func:`abm.parallel.workers_record`: at most the cluster's CPUs, which it records as
    ``ray_cpus``, and for runs on cuda at most its GPUs, recorded as ``ray_gpus``). A task whose
    worker process dies fails the sweep (:class:`abm.parallel.WorkerLost`, naming its variant, by
    its values where the task has its label, and replicate: :attr:`SweepTask.named`).

    Uses the Ray instance this process is already connected to; otherwise connects to
    ``address`` (or ``RAY_ADDRESS``), or starts a local instance, and shuts it down at the end.
    On a cluster, every node needs this package installed (e.g. the cluster's image). Messages
    name the choice of Ray as ``backend`` says (``--backend ray`` or ``backend='ray'``), and the
    address as ``given`` does (``--ray-address ADDR`` or ``ray_address='ADDR'``)."""
    for t in tasks:
        check_ray_device(t.scenario["simulation"]["device"], t.scenario["name"], ScenarioError, backend)
    on_gpu = [t for t in tasks if t.scenario["simulation"]["device"].startswith("cuda")]
    with ray_session(address, ScenarioError, backend, given) as ray:
        gpus = int(ray.cluster_resources().get("GPU", 0))
        if on_gpu and not gpus:
            raise ScenarioError(
                f"{on_gpu[0].scenario['name']}: simulation.device: 'cuda' is not allowed here: "
                "the Ray cluster has no GPU; use cpu"
            )
        remote = ray_task(ray, run_task)
        gpu = remote.options(num_gpus=1)  # a run on cuda gets a GPU of the cluster to itself
        calls = [(gpu if t.scenario["simulation"]["device"].startswith("cuda") else remote, (t,)) for t in tasks]

        used = workers_record(workers or len(tasks), len(tasks), ray_cpus(ray), len(on_gpu), gpus)
        finished = ray_finished(ray, calls, workers, (ScenarioError, PluginFailure), backend, lambda i: tasks[i].named)
        return _collect(finished, len(tasks), done), used


def combine(sweep_plan: SweepPlan, results: list[dict[str, Any]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The combined table (one row per variant and replicate, sorted) and the per-variant
    table: means and sds, and the changes of :data:`CHANGES` against the first variant."""
    rows = []
    for res in sorted(results, key=lambda r: (r["variant"], r["replicate"])):
        v = res["variant"]
        outcomes = res["outcomes"]
        swept = {
            a.key: _column_value(x) for a, x in zip(sweep_plan.axes, sweep_plan.assignments[v]["values"], strict=True)
        }
        rows.append(
            {
                "variant": v,
                **swept,
                "replicate": res["replicate"],
                "seed": sweep_plan.variants[v].simulation.seed + res["replicate"],
                "agents": sweep_plan.variants[v].population.agents,  # the counts are these agents'
                **outcomes,
                # last; none in results made by hand (runs kept by other code are not reused: the journal's key)
                **{c: outcomes.get(c) for c in AGE_COLUMNS},
            }
        )
    table = pd.DataFrame(rows)
    starts = [sc.simulation.start_date for sc in sweep_plan.variants]
    dated = any(start is not None for start in starts)
    if dated:  # each peak day's date after it, empty for a variant without a start date or a day without a peak
        for day, column in PEAK_DATES.items():
            dates = [_date_of_day(starts[int(v)], d) for v, d in zip(table["variant"], table[day], strict=True)]
            table.insert(table.columns.get_loc(day) + 1, column, dates)
    first = sweep_plan.variants[0].model_dump(mode="json", by_alias=True)
    residents = {res["variant"]: res.get("region_population") for res in results}  # a journal's older results lack it
    summary_rows = []
    for v, group in table.groupby("variant", sort=True):
        values = sweep_plan.assignments[int(v)]["values"]
        row: dict[str, Any] = {
            "variant": v,
            **{a.key: _column_value(x) for a, x in zip(sweep_plan.axes, values, strict=True)},
        }
        row["replicates"] = len(group)
        if EPIDEMIC_OVER in group:  # results made by hand (tests) may lack it
            row[f"{EPIDEMIC_OVER}_n"] = int(group[EPIDEMIC_OVER].fillna(False).astype(bool).sum())
        row["agents"] = sweep_plan.variants[int(v)].population.agents
        for name in OUTCOMES:
            stats = _over_replicates(group[name])
            row[f"{name}_mean"], row[f"{name}_sd"] = stats["mean"], stats["sd"]
            if name in PEAK_DAYS:
                if dated:
                    row[f"{name}_mean_date"] = _date_of_day(starts[int(v)], stats["mean"], rounded=True)
                row[f"{name}_n"] = int(group[name].notna().sum())
                row[f"{AT_END[name]}_n"] = int(group[AT_END[name]].sum())
            if name in REPRODUCTION:
                row[f"{name}_n"] = int(group[name].notna().sum())
        paired = same_draws(first, sweep_plan.variants[int(v)].model_dump(mode="json", by_alias=True))
        changes = in_region(changes_from_first(table, int(v), paired=paired), residents.get(int(v)))
        changes_by = "" if v == 0 else "paired replicates" if paired else "independent runs"
        ages = group[list(AGE_COLUMNS)].to_numpy(dtype=float)  # once for all: a column at a time costs more
        if np.isnan(ages).any():  # results made by hand without them: means of the others would not add up
            ages = np.full_like(ages, np.nan)
        by_age = {f"{c}_{k}": x for j, c in enumerate(AGE_COLUMNS) for k, x in _over_replicates(ages[:, j]).items()}
        age_changes = changes_from_first(table, int(v), paired=paired, outcomes=AGE_COLUMNS)
        by_age |= in_region(age_changes, residents.get(int(v)), AGE_COLUMNS)
        summary_rows.append(row | changes | {"changes_by": changes_by} | by_age)
    return table, pd.DataFrame(summary_rows)


def _over_replicates(column: pd.Series | np.ndarray) -> dict[str, float]:
    """Mean and sample sd of a variant's ``column`` over the replicates that have a value (a peak
    day: those with a peak); NaN for both where none has."""
    values = np.asarray(column, dtype=float)
    values = values[~np.isnan(values)]
    return mean_sd(values) if values.size else {"mean": math.nan, "sd": math.nan}


def _date_of_day(start: date | None, day: float | None, *, rounded: bool = False) -> str | None:
    """The date of simulation day ``day`` (a mean day ``rounded`` half up to a whole day) where
    day 0 is ``start``; None without a start date or a day (a peak that does not exist)."""
    if start is None or day is None or math.isnan(day):
        return None
    return date_of(start, math.floor(day + 0.5) if rounded else int(day))


def in_region(changes: dict[str, float], residents: int | None, outcomes: Sequence[str] = CHANGES) -> dict[str, float]:
    """``changes`` (:func:`changes_from_first`, of ``outcomes``) with each change and its
    interval's ends also for the variant's region: per 100,000 agents times ``residents`` /
    100,000 (``<outcome>_change_region``, ``_region_low``, ``_region_high``), taking the agents for
    a representative sample of the residents as summary.json's ``region_scaled`` does; NaN where
    ``residents`` is not known."""
    factor = residents / 1e5 if residents else math.nan
    out = dict(changes)
    for name in outcomes:
        for suffix, region in (("per_100k", "region"), ("low", "region_low"), ("high", "region_high")):
            out[f"{name}_change_{region}"] = changes[f"{name}_change_{suffix}"] * factor
    return out


def changes_from_first(
    table: pd.DataFrame, variant: int, *, paired: bool, outcomes: Sequence[str] = CHANGES
) -> dict[str, float]:
    """The change of each of ``outcomes`` (columns of ``table``: those of :data:`CHANGES`, or the
    counts by age group of :data:`AGE_COLUMNS`) from the first variant to ``variant``, per 100,000
    agents, with a 95% interval over replicates: ``paired``, replicate by replicate (replicate r
    of every variant runs with the same seed: common random numbers, where the two draw the same
    population and random streams), else Welch's for independent runs; NaN for the first
    variant, and where a run of either lacks the outcome (results made by hand may have no
    counts by age)."""
    interval = paired_interval if paired else welch_interval
    out: dict[str, float] = {}
    first, this = (table[table.variant == v].sort_values("replicate") for v in (0, variant))
    for name in outcomes:
        keys = (f"{name}_change_per_100k", f"{name}_change_low", f"{name}_change_high")
        per_100k = [t[name].to_numpy(dtype=float) / t["agents"].to_numpy(dtype=float) * 1e5 for t in (this, first)]
        if variant == 0 or any(np.isnan(x).any() for x in per_100k):
            out |= dict.fromkeys(keys, math.nan)
            continue
        iv = interval(*per_100k)
        out |= dict(zip(keys, (iv.mean, iv.low, iv.high), strict=True))
    return out


def run_sweep(
    scenario: Scenario | str | Path | dict[str, Any],
    sweeps: Sequence[str],
    *,
    replicates: int | None = None,
    agents: int | None = None,
    days: int | None = None,
    seed: int | None = None,
    device: str | None = None,
    sets: list[str] | None = None,
    backend: str = "local",
    workers: int | None = None,
    ray_address: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    note: Callable[[str], None] | None = None,
    keep: Path | None = None,
    sweep_plan: SweepPlan | None = None,
    names: OptionNames = PYTHON,
    warn: bool = True,
) -> SweepResult:
    """Run every variant of ``sweeps`` (their cartesian product), with replicates, and return the
    combined tables as DataFrames (nothing is written; :meth:`SweepResult.write` writes the folder
    ``abm sweep`` writes).

    Arguments:
        scenario: a file's path, plain data or a :class:`Scenario`, as :func:`abm.run` takes it.
        sweeps: ``key.path=v1,v2,...`` texts, as ``abm sweep --sweep`` takes them.
        replicates: replicates per variant (None: the scenario's); replicate r runs with seed + r.
        agents: the number of agents of every variant, as ``--agents`` (None: the scenario's).
        days: the days to simulate, as ``--days`` (None: the scenario's).
        seed: the seed of replicate 0, as ``--seed`` (None: the scenario's).
        device: ``cpu``, ``cuda`` or ``cuda:N``, as ``--device`` (None: the scenario's).
        sets: ``key.path=value`` texts changing every variant, as ``--set`` takes them.
        backend: ``local`` (worker processes on this machine) or ``ray``.
        workers: runs at once; ``local``: worker processes (default 1: every run holds its
            population, and N runs at once need N times the memory), ``ray``: tasks (default: as
            many as the cluster takes). The tables do not depend on it.
        ray_address: the address of a running Ray cluster (``ray`` only).
        progress: called as ``progress(done, total)`` after each finished run.
        note: told (a text) of runs found in ``keep``, of a ``keep`` file that cannot be written,
            and of the runs kept when the sweep stops (None: nothing is said).
        keep: a file where finished runs are kept as they finish (:mod:`abm.outputs.journal`;
            ``abm sweep`` gives ``.<folder>.runs.jsonl`` beside its output folder): a sweep of the
            same plan that finds it runs only the runs it lacks, and the tables are the same;
            :meth:`SweepResult.write` removes it.
        sweep_plan: the variants, already resolved by :func:`plan` from the arguments above (``abm
            sweep`` resolves them first, to check them); None: resolved here.
        names: how messages name the arguments: :data:`abm.set_options.PYTHON` (``agents=0``, the
            default) or ``COMMAND_LINE`` (``--agents 0``, as ``abm sweep`` gives).
        warn: give each note ``abm sweep`` prints on the scenario and its variants (a swept
            mapping that drops the file's keys, variants that resolve to the same scenario, an
            intervention that starts after the last day in some variants, more ``workers`` than
            CPUs, ...) as a warning of class :class:`abm.ScenarioNote`
            (:mod:`abm.scenario_notes`), with its text, before the first run (False: ``abm
            sweep``, which prints them); and, once the runs are done, the note ``abm sweep``
            prints after its tables (runs whose hospital curve is at its maximum on the last
            day) as a warning of class :class:`abm.ResultNote` (:mod:`abm.result_notes`) that
            holds the result as ``note.result``; runs kept in ``keep`` stay there until
            :meth:`SweepResult.write`.

    Bad input raises :class:`ScenarioError` (a ``ValueError``) with the message ``abm sweep``
    prints, naming the arguments given here (``sweeps item '...'``, ``replicates``,
    ``(with agents=0)``) where ``abm sweep`` names its options (``--sweep``, ``--replicates``,
    ``(with --agents 0)``). Nothing is printed."""
    overrides = {"agents": agents, "days": days, "seed": seed, "device": device}
    if backend not in BACKENDS:
        raise ScenarioError(f"{names.name('backend')}: {backend!r} is not allowed; allowed: {', '.join(BACKENDS)}")
    check_workers(workers, ScenarioError, names.name("workers"))
    check_progress(progress, "progress(done, total)")
    check_ray_address(ray_address, backend, ScenarioError, names)
    sp = sweep_plan or plan(scenario, sweeps, replicates=replicates, sets=sets, names=names, **overrides)
    tasks = sp.tasks
    if warn:
        notes = scenario_notes.scenario_notes(
            scenario, sp.variants, sets=sets, overrides=overrides, sweeps=sweeps, sweep_plan=sp, names=names
        )
        notes += scenario_notes.too_many_workers(workers, backend, names)
        runs = min(workers or 1, len(tasks))
        memory = memory_note(sp.variants, replicates=1, runs=runs, fewer=("agents",), names=names)
        memory = memory if backend == "local" else None
        scenario_notes.warn([*notes, *filter(None, [memory])])
    journal, kept = None, {}
    if keep is not None:
        work = [[t.variant, t.replicate, t.seed, t.scenario] for t in tasks]
        journal = Journal(Path(keep), work_key(work), "runs", note)
        kept = {e["task"]: e["result"] for e in journal.entries if e.get("task") in range(len(tasks))}
    todo = [i for i in range(len(tasks)) if i not in kept]
    count = len(kept)
    if count and progress is not None:
        progress(count, len(tasks))

    def done(j: int, result: dict[str, Any]) -> None:
        nonlocal count
        if journal is not None:
            journal.add({"task": todo[j], "result": result})
        count += 1
        if progress is not None:
            progress(count, len(tasks))

    t0 = time.perf_counter()
    local = backend == "local"
    to_run = [tasks[i] for i in todo]
    with journal.keeping(bad=(ScenarioError, PluginFailure)) if journal is not None else contextlib.nullcontext():
        ran, used = (
            run_local(to_run, done, workers or 1, names)
            if local
            else run_ray(
                to_run,
                done,
                ray_address,
                workers,
                names.given("backend", "ray"),
                names.given("ray-address", ray_address),
            )
        )
    # the runs are done, the folder not yet written: Ctrl-C now says what is kept, as during the runs
    with journal.said_if_unwritten() if journal is not None else contextlib.nullcontext():
        wall = time.perf_counter() - t0
        fresh = dict(zip(todo, ran, strict=True))
        results = [kept[i] if i in kept else fresh[i] for i in range(len(tasks))]
        table, summary = combine(sp, results)
        info = {
            "abm_version": __version__,
            "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": invocation.command(),
            "scenario": sp.variants[0].name,
            "source": sp.source,
            "sweeps": {a.key: list(a.values) for a in sp.axes},
            "replicates": sp.replicates,
            "agents": sorted({sc.population.agents for sc in sp.variants}),
            "region_population": sorted({r["region_population"] for r in results}),
            "seeding": "replicate r of a variant runs alone with seed = the variant's simulation.seed + r",
            "backend": backend,
            **used,  # workers: how many runs could run at once (the tables do not depend on it); Ray: ray_cpus
            "torch": torch.__version__,
            "python": platform.python_version(),
            "platform": platform.platform(),
            "timings": {
                # this command's runs only; the sums below count the kept runs of a continued sweep too
                "wall_seconds": wall,
                "runs_reused": len(kept),
                "engine_seconds": sum(r["engine_seconds"] for r in results),
                "population_seconds": sum(r["population_seconds"] for r in results),
            },
            "variants": [
                {
                    "variant": v,
                    "label": sp.label(v),
                    "short_label": sp.label(v, short=True),  # as the console's and report.html's tables name it
                    "sweep": {a.key: x for a, x in zip(sp.axes, sp.assignments[v]["values"], strict=True)},
                    "scenario": as_run(sc, next(r for r in results if r["variant"] == v)),
                }
                for v, sc in enumerate(sp.variants)
            ],
        }
    result = SweepResult(table, summary, info, journal)
    if warn:  # the result complete: a filter that makes the note an error still hands it over (note.result)
        scenario_notes.warn(result_notes.with_result(result_notes.sweep_notes(table), result))
    return result
