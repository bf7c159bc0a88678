"""The notes on a scenario that ``abm run``, ``abm sweep``, ``abm validate`` and ``abm calibrate``
print before they run (``note: TEXT``) and that :func:`abm.run`, :func:`abm.run_sweep` and
:func:`abm.calibrate` give as warnings of one class (:class:`ScenarioNote`): an intervention an
option turned on, settings that are not used, interventions that start after the last day,
seeding that rounds to none, counts that stay the same at any number of agents, more agents than
residents, a priority age group that cuts the region's age bands, for a sweep, variants that
resolve to the same scenario and more workers than CPUs, and for a calibration by the gradient
method, the free parameters it holds at the scenario's values. Each note is a
:class:`ScenarioNote` (its text: ``str(note)``); options are named as the caller gave them
(:class:`abm.set_options.OptionNames`: ``--set`` or ``sets``).

Importing this module is light (no torch): the scenario's modules are imported where a note is
built."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from abm.plurals import counted, plural
from abm.set_options import COMMAND_LINE, OptionNames

if TYPE_CHECKING:
    from abm.scenario import Scenario
    from abm.sweep import SweepAxis, SweepPlan


class ScenarioNote(UserWarning):
    """A note on a scenario (the text the commands print after ``note: ``), which :func:`abm.run`
    and :func:`abm.run_sweep` give as a warning before they run: ``warnings.simplefilter("error",
    ScenarioNote)`` turns them into errors, ``"ignore"`` silences them. The same filters take the
    notes on results, given once the result is complete (:class:`abm.result_notes.ResultNote`, a
    subclass)."""


def source_name(scenario: Any) -> str:
    """How a note names the scenario given (:func:`abm.overrides.scenario_source`): a file by its path."""
    from abm.overrides import scenario_source

    return scenario_source(scenario)


def scenario_data(scenario: Any) -> dict[str, Any] | None:
    """The scenario as its file (or plain data) gives it, ``extends`` merged, before any option;
    None for a :class:`Scenario` (its values are resolved: no key is left without a value)."""
    from abm.scenario import Scenario, extended, read_scenario_data

    if isinstance(scenario, Scenario):
        return None
    if isinstance(scenario, dict):
        return extended(scenario, "scenario", Path.cwd())
    return read_scenario_data(scenario)


def unapplied_settings(
    scenario: Any, sets: list[str] | None, sweeps: Sequence[SweepAxis] = (), names: OptionNames = COMMAND_LINE
) -> list[str]:
    """A note for each ``sets`` item whose mapping replaces one of the scenario's and so drops
    keys it gives, and each swept mapping (of ``sweeps``, a sweep's axes) that does so in its
    variants; and, as its file (or plain data) gives them: for each intervention whose key is
    present with no value (``vaccination:``, off, while ``{}`` turns it on), for a dose rate that
    ``daily_doses`` replaces, and for a residents' disease table on the reference population,
    which has no residents. None where the scenario does not read."""
    from abm.scenario import Scenario, ScenarioError, apply_set, dotted, replaced_keys

    source = source_name(scenario)

    def replaces(option: str, key: str, dropped: list[str], where: str, instead: str) -> str:
        return (
            f"{option} replaces {key} as a whole{where}, so {', '.join(dropped)} given by {source} "
            f"{'is' if len(dropped) == 1 else 'are'} dropped; to change one entry and keep the others, "
            f"write {instead}"
        )

    def example(option: str, text: str) -> str:  # what to write instead, as the caller gives it
        return f"{names.name(option)}=[{text!r}]" if names.python else f"--{option} {text}"

    notes = []
    try:
        own = scenario_data(scenario)
        data = own if own is not None else scenario.model_dump(mode="json", by_alias=True)
        for item in sets or []:
            dropped = replaced_keys(data, item)
            if dropped:
                key = dotted(item.partition("=")[0].strip())
                notes.append(replaces(names.item("set", item), key, dropped, "", example("set", f"{key}.NAME=VALUE")))
            data = apply_set(data, item)
    except ScenarioError:
        return []
    for axis in sweeps:  # the values that drop the same keys, in one note
        by_dropped: dict[tuple[str, ...], list[str]] = {}
        for text in axis.texts:
            dropped = tuple(replaced_keys(data, f"{axis.key}={text}"))
            if dropped:
                by_dropped.setdefault(dropped, []).append(text)
        for dropped, texts in by_dropped.items():
            key, where = dotted(axis.key), " in its variants" if len(texts) > 1 else " in its variant"
            option = names.item("sweep", f"{axis.key}={','.join(texts)}")
            instead = example("sweep", f"{key}.NAME=VALUE1,VALUE2,...")
            notes.append(replaces(option, key, list(dropped), where, instead))
    if isinstance(scenario, Scenario):  # resolved values: every key has one
        return notes
    return notes + file_settings(data)


def file_settings(data: dict[str, Any]) -> list[str]:
    """The notes on settings a scenario's file (or plain data) gives that are not used
    (:func:`unapplied_settings`)."""
    notes = []
    interventions = data.get("interventions")
    for name, value in interventions.items() if isinstance(interventions, dict) else []:
        if value is None:
            notes.append(
                f"interventions.{name} has no value, so {name} is off; write `{name}: {{}}` to turn it on "
                "with its defaults"
            )
    vaccination = interventions.get("vaccination") if isinstance(interventions, dict) else None
    if isinstance(vaccination, dict) and None not in (
        vaccination.get("daily_doses"),
        vaccination.get("daily_doses_per_100k"),
    ):
        notes.append(
            f"interventions.vaccination gives daily_doses ({vaccination['daily_doses']}) and daily_doses_per_100k "
            f"({vaccination['daily_doses_per_100k']}): daily_doses replaces the rate, which is not used; to use the "
            "rate, set interventions.vaccination.daily_doses=null"
        )
    disease, population = data.get("disease"), data.get("population")
    if (
        isinstance(disease, dict)
        and disease.get("long_term_care_branching") is not None
        and isinstance(population, dict)
        and population.get("kind") == "reference"
    ):
        notes.append(
            "disease.long_term_care_branching is not used: the reference population (population.kind: reference) "
            "has no long-term-care residents"
        )
    return notes


def run_settings(sc: Scenario) -> dict:
    """What a sweep's run of ``sc`` uses, as plain data: its values without those no such run
    reads (the description, the calibration section, the settings of an intervention with
    ``enabled: false``, the map's days and tract boundaries: a sweep draws no map)."""
    unread = {"description": True, "calibration": True, "outputs": {"map_days", "boundaries"}}
    data = sc.model_dump(mode="json", by_alias=True, exclude=unread)
    on = sc.interventions.enabled()
    data["interventions"] = {name: value for name, value in data["interventions"].items() if name in on}
    return data


def same_variants(sweep_plan: SweepPlan) -> list[str]:
    """A note for each group of a sweep's variants that resolve to the same scenario, as runs use
    it (:func:`run_settings`): the swept values change nothing the runs use (a rate that another
    key replaces, a setting of an intervention that is off, the calibration section), so those
    variants' results are the same."""
    import json

    groups: dict[str, list[int]] = {}
    for v, sc in enumerate(sweep_plan.variants):
        groups.setdefault(json.dumps(run_settings(sc), sort_keys=True), []).append(v)
    return [
        f"the variants {' and '.join(f'({sweep_plan.label(v, short=True)})' for v in variants)} resolve to the same "
        "scenario (the swept values change nothing the runs use), so their results are the same"
        for variants in groups.values()
        if len(variants) > 1
    ]


def too_many_workers(workers: int | None, backend: str, names: OptionNames = COMMAND_LINE) -> list[str]:
    """A note when ``workers`` asks this machine for more processes at once than the CPUs it may
    use: they share them, each run slower (the results are the same)."""
    from abm.parallel import usable_cpus

    cpus = usable_cpus()
    if backend != "local" or workers is None or workers <= cpus:
        return []
    return [
        f"{names.given('workers', workers)} is more than the {cpus} CPU{'s' if cpus > 1 else ''} this process may "
        "use: the runs share them and each takes longer (the results are the same)"
    ]


def held_at_scenario_values(fixed: Sequence[str], names: OptionNames = COMMAND_LINE) -> list[str]:
    """A note where a calibration by the gradient method, which fits the transmission rate and
    weekly multipliers only, holds other keys of ``calibration.parameters`` (``fixed``) at the
    scenario's values instead of fitting them."""
    if not fixed:
        return []
    return [
        f"{names.given('method', 'gradient')} fits the transmission rate and weekly multipliers only; held at the "
        f"scenario's values: {', '.join(fixed)} (in calibration.parameters)"
    ]


def switched_on(
    scenario: Any,
    resolved: list[Scenario],
    options: list[tuple[str, str]],
    overrides: dict | None,
    names: OptionNames = COMMAND_LINE,
) -> list[str]:
    """A note for each intervention that is on in a ``resolved`` scenario while ``scenario``
    (with ``overrides``, without the options) lacks it: the ``(option, key=value)`` options
    (``set`` or ``sweep``) turned it on, with the defaults for everything they do not set."""
    from abm.overrides import resolve
    from abm.scenario import ScenarioError

    try:
        base = resolve(scenario, overrides, None)
    except ScenarioError:  # valid only with its options: nothing to compare with
        return []
    notes = []
    for name in type(base.interventions).model_fields:
        if getattr(base.interventions, name, None) is not None:
            continue
        if not any(getattr(getattr(sc.interventions, name, None), "enabled", False) for sc in resolved):
            continue
        given = [
            names.item(option, text)
            for option, text in options
            if (key := text.split("=", 1)[0].strip()) == "interventions" or key.startswith(f"interventions.{name}")
        ]
        notes.append(
            f"{', '.join(given) or 'an option'} turns {name} on ({source_name(scenario)} has no "
            f"interventions.{name}); its other settings take their defaults"
        )
    return notes


def per_100k_text(count: float, agents: int) -> str:
    """``count`` per 100,000 of ``agents``, as a note gives it: whole from 10 up (15,000), else
    two significant figures (0.22)."""
    rate = count * 1e5 / agents
    return f"{rate:,.0f}" if rate >= 10 else f"{rate:.2g}"


def fixed_counts(sc: Scenario, own: int, whose: str = "the file's") -> list[str]:
    """Notes on what a scenario gives as counts that stay the same at any number of agents (the
    initial infections, vaccination's daily_doses, the daily capacities of test types and of
    manual tracing), with their share per 100,000 of its agents and of ``own``, the agents of the
    scenario without the options (``whose``: how the note names it), and the setting that scales
    instead, where there is one."""
    counts: list[tuple[str, float, str | None]] = []
    seeds = sum(sc.seeding.infections.values()) if sc.seeding.infections_per_100k is None else 0
    if seeds:
        counts.append((f"seeding.infections seeds {counted(seeds, 'agent')}", seeds, "infections_per_100k"))
    vaccination = getattr(sc.interventions, "vaccination", None)
    if vaccination is not None and vaccination.enabled and vaccination.daily_doses is not None:
        doses = vaccination.daily_doses
        counts.append(
            (f"interventions.vaccination.daily_doses gives {doses} doses a day", doses, "daily_doses_per_100k")
        )
    testing = getattr(sc.interventions, "testing", None)
    for i, test in enumerate(testing.tests if testing is not None and testing.enabled else []):
        if test.daily_capacity:  # 0 gets its own note: the test type does nothing
            key = f"interventions.testing.tests[{i}].daily_capacity"
            counts.append((f"{key} gives {test.daily_capacity} {test.name} tests a day", test.daily_capacity, None))
    tracing = getattr(sc.interventions, "manual_tracing", None)
    if tracing is not None and tracing.enabled and tracing.daily_capacity:
        capacity = tracing.daily_capacity
        what = f"interventions.manual_tracing.daily_capacity gives {capacity} interviews a day"
        counts.append((what, capacity, None))
    agents = sc.population.agents
    return [
        f"{what} whatever the population: {per_100k_text(count, agents)} per 100,000 at {agents:,} agents, against "
        f"{per_100k_text(count, own)} at {whose} {own:,}" + (f" ({rate} scales instead)" if rate else "")
        for what, count, rate in counts
    ]


def own_agents(scenario: Any) -> int | None:
    """The agents of ``scenario`` without the options (None where it is not valid without them)."""
    from abm.overrides import resolve
    from abm.scenario import ScenarioError

    try:
        return resolve(scenario).population.agents
    except ScenarioError:
        return None


def fixed_count_notes(scenario: Any, resolved: list[Scenario]) -> list[str]:
    """A note for each count of the ``resolved`` scenarios that stays the same at any number of
    agents (:func:`fixed_counts`) where an option (``--agents``, ``--set population.agents=...``, a
    swept value, or their arguments) gave them other agents than ``scenario``'s own, once though
    several variants have it."""
    own = own_agents(scenario)
    if own is None:
        return []
    whose = "the file's" if isinstance(scenario, str | Path) else "the scenario's"
    texts = (text for sc in resolved if sc.population.agents != own for text in fixed_counts(sc, own, whose))
    return list(dict.fromkeys(texts))


def rounded_to_none(sc: Scenario) -> dict[str, str]:
    """For a seeding per 100,000 (``infections_per_100k``), each stage above 0 whose count rounds
    half up to none at the scenario's agents, with why in numbers: its rate, the agents it comes
    to and the fewest agents that seed one (``3 per 100,000 is 0.06 agents, rounded half up to 0;
    16,667 agents or more seed one``)."""
    from fractions import Fraction

    rates, agents = sc.seeding.infections_per_100k, sc.population.agents
    if rates is None:
        return {}
    counts = sc.seeding.counts(agents)
    return {
        stage: f"{rate:g} per 100,000 is {rate * agents / 1e5:.2g} agents, rounded half up to 0; "
        f"{math.ceil(Fraction(50_000) / Fraction(repr(float(rate)))):,} agents or more seed one"
        for stage, rate in rates.items()
        if rate > 0 and counts[stage] == 0
    }


def seeds_no_one(sc: Scenario) -> str:
    """What says that a scenario's seeding infects no one (its counts, or its rate per 100,000
    rounded to none at its agents, in numbers: :func:`rounded_to_none`)."""
    if sc.seeding.infections_per_100k is None:
        return "seeding.infections seeds no one"
    why = "; ".join(f"{stage}: {text}" for stage, text in rounded_to_none(sc).items())
    return f"seeding.infections_per_100k seeds no one at {sc.population.agents:,} agents" + (f" ({why})" if why else "")


def idle(sc: Scenario) -> list[str]:
    """A note for each intervention of ``sc`` that starts after the last simulated day, since the
    run then goes without it, for a scenario that seeds no infection, and for each stage of a
    seeding per 100,000 that rounds to none at its agents (:func:`rounded_to_none`). A day a note
    names gets its date in a scenario with ``simulation.start_date``."""
    from abm.day_dates import with_day_dates

    texts = [with_day_dates(text, sc.simulation.start_date) for text in sc.interventions.idle(sc.simulation.days)]
    if not any(sc.seeding.counts(sc.population.agents).values()):
        texts.append(
            f"{seeds_no_one(sc)}, so no one is infected in this run (only the interventions' own counts and "
            "costs, such as doses, are recorded)"
        )
    else:  # some stages seeded, others rounded to none
        texts += [
            f"seeding.infections_per_100k seeds no {stage} agent at {sc.population.agents:,} agents: {text}"
            for stage, text in rounded_to_none(sc).items()
        ]
    return texts


def priority_groups(sc: Scenario) -> list[str]:
    """A note for each plain age group of ``sc``'s vaccination priority list that cuts its
    population's age bands (:func:`abm.named_settings.priority_group_notes`)."""
    from abm.named_settings import priority_group_notes
    from abm.populations import load_region

    return priority_group_notes(sc, load_region(sc.population.region))


def residents(sc: Scenario) -> list[ScenarioNote]:
    """The note for ``sc`` with more agents than its region's residents, which scales the figures
    for the region down (:class:`abm.residents_per_agent.MoreAgentsThanResidents`)."""
    from abm.residents_per_agent import MoreAgentsThanResidents, more_agents_than_residents

    text = more_agents_than_residents(sc)
    return [] if text is None else [MoreAgentsThanResidents(text)]


def by_variant(per_variant: list[list[ScenarioNote | str]], labels: list[str] | None = None) -> list[ScenarioNote]:
    """The notes of ``per_variant`` (those of each scenario run: one, or a sweep's variants), each
    once, in order; a note that holds for some variants only names them by their ``labels``."""
    where: dict[str, tuple[type[ScenarioNote], list[int]]] = {}
    for v, notes in enumerate(per_variant):
        for note in notes:
            kind = type(note) if isinstance(note, ScenarioNote) else ScenarioNote
            variants = where.setdefault(str(note), (kind, []))[1]
            if v not in variants:
                variants.append(v)
    notes = []
    for text, (kind, variants) in where.items():
        if labels is not None and len(variants) < len(per_variant):
            text += f" ({plural('variant', len(variants))} {'; '.join(labels[v] for v in variants)})"
        notes.append(kind(text))
    return notes


def scenario_notes(
    scenario: Any,
    resolved: list[Scenario],
    *,
    sets: list[str] | None = None,
    overrides: dict[str, Any] | None = None,
    sweeps: Sequence[str] = (),
    sweep_plan: SweepPlan | None = None,
    names: OptionNames = COMMAND_LINE,
) -> list[ScenarioNote]:
    """The notes on ``scenario`` (a file's path, plain data or a :class:`Scenario`) run as
    ``resolved`` (the scenario with ``overrides`` and ``sets``; a sweep's variants, of
    ``sweep_plan``, planned from the ``sweeps`` texts), in the order the commands print them:
    interventions the options turn on, settings not used, interventions that start after the
    last day and seeding that rounds to none, counts that stay the same at any number of agents,
    more agents than residents, priority groups that cut the age bands, and a sweep's variants
    that resolve to the same scenario.
    ``names``: how the notes name the options (``--set`` or ``sets``)."""
    options = [("set", s) for s in sets or []] + [("sweep", s) for s in sweeps]
    labels = [sweep_plan.label(v, short=True) for v in range(len(resolved))] if sweep_plan else None
    notes: list[ScenarioNote | str] = [
        *switched_on(scenario, resolved, options, overrides, names),
        *unapplied_settings(scenario, sets, sweep_plan.axes if sweep_plan else (), names),
    ]
    notes += by_variant([idle(sc) for sc in resolved], labels)
    notes += fixed_count_notes(scenario, resolved)
    notes += by_variant([residents(sc) for sc in resolved], labels)
    notes += by_variant([priority_groups(sc) for sc in resolved], labels)
    if sweep_plan is not None:
        notes += same_variants(sweep_plan)
    return [note if isinstance(note, ScenarioNote) else ScenarioNote(note) for note in notes]


def warn(notes: Sequence[ScenarioNote | str], stacklevel: int = 2) -> None:
    """Give each of ``notes`` once as a warning (its own class, a :class:`ScenarioNote`), at
    ``stacklevel`` as :func:`warnings.warn` counts it from the caller of this function."""
    given: dict[str, ScenarioNote] = {}
    for note in notes:
        given.setdefault(str(note), note if isinstance(note, ScenarioNote) else ScenarioNote(note))
    for note in given.values():
        warnings.warn(note, stacklevel=stacklevel + 1)
