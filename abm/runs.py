"""Running a scenario from Python: scenario -> population -> engine -> tables and summary.

>>> import abm
>>> result = abm.run("scenarios/king_county/no_intervention.yaml", agents=20000, days=60)
>>> result.summary["peak_hospitalized"]
"""

from __future__ import annotations

import numbers
import platform
import reprlib
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from abm import __version__, invocation, result_notes, scenario_notes
from abm.engine import Simulation, SimulationResult
from abm.engine.contacts import CommunityLayer
from abm.engine.reference_contacts import community_layer
from abm.memory import cpu_allocation_failed, memory_note
from abm.outputs import tables
from abm.outputs.calendar import with_dates
from abm.outputs.run_folder import atomic_folder, output_path
from abm.outputs.strict_json import dumps
from abm.outputs.summary import summarize
from abm.overrides import given, resolve, scenario_source
from abm.plurals import counted
from abm.populations import Population, load_region
from abm.populations.region import Region
from abm.scenario import Scenario, ScenarioError, check_device, population_of
from abm.set_options import PYTHON, option_texts
from abm.threads import torch_threads


@dataclass
class RunResult:
    """A finished run: the scenario, the tables as DataFrames and the summary.

    ``timeseries`` (per day and replicate), ``by_age`` (per day, replicate and age group),
    ``by_tract`` (per day and tract, means over replicates) and ``costs`` (one row per cost item,
    day and replicate), each with a ``date`` column after ``day`` where the scenario has
    ``simulation.start_date``, are the run folder's tables; ``summary`` and ``manifest`` its summary.json
    and manifest.json; ``scenario`` the resolved scenario, ``population`` the synthetic agents and
    ``result`` the engine's raw counts. :meth:`plot` and :meth:`map` draw the tables;
    :meth:`write` writes the run folder.
    """

    scenario: Scenario
    population: Population
    result: SimulationResult
    summary: dict[str, Any]
    timeseries: pd.DataFrame
    by_age: pd.DataFrame
    by_tract: pd.DataFrame
    costs: pd.DataFrame
    manifest: dict[str, Any] = field(default_factory=dict)
    state_fips: str = ""  # for the cached Census boundary file (abm data boundaries)
    bounds: tuple[float, float, float, float] | None = None  # the region's extent: map cells stay inside

    def __repr__(self) -> str:
        """What ran and its main figures in one line (the tables, population and raw counts
        would fill a notebook's cell)."""
        s = self.summary
        infected, hosp, deaths = (s.get(k, {}) for k in ("cumulative_infected", "hospitalizations", "deaths"))
        share = f" ({infected['share']:.1%})" if "share" in infected else ""
        return (
            f"<RunResult of {s.get('scenario', self.scenario.name)!r}: {s.get('agents', '?')} agents x "
            f"{counted(s.get('replicates', 0), 'replicate')}, {s.get('days', '?')} days, seed {s.get('seed', '?')}, "
            f"{s.get('device', '?')}; means over replicates: infected {infected.get('mean', float('nan')):g}{share}, "
            f"hospitalizations {hosp.get('mean', float('nan')):g}, deaths {deaths.get('mean', float('nan')):g}>"
        )

    def _map_days(self, days: list[int] | tuple[int, ...] | None, argument: str) -> tuple[int, ...]:
        """The snapshot days: ``days`` (checked, named in messages as the caller's ``argument``),
        else the scenario's ``outputs.map_days``, else the default days within the run (its last
        day in place of those past its end: a run shorter than the last default day still shows
        its end). An empty list asks for no snapshot."""
        from abm.outputs.maps import DEFAULT_SNAPSHOT_DAYS

        if days is not None:
            listed = not isinstance(days, (numbers.Number, str))
            if not listed or not all(isinstance(d, numbers.Integral) and not isinstance(d, bool) for d in days):
                raise ScenarioError(f"{argument}: {days!r} is not allowed; give a list of whole days, e.g. [30, 60]")
            n = self.summary["days"]
            late = [int(d) for d in days if not 0 <= d < n]
            if late:
                raise ScenarioError(
                    f"{argument}: {late} not allowed; map days must lie within the {counted(n, 'simulated day')} "
                    f"(0..{n - 1})"
                )
            return tuple(int(d) for d in days)
        configured = getattr(self.scenario.outputs, "map_days", None)
        if configured is not None:
            return tuple(configured)  # as set: [] is no snapshot
        n = self.summary["days"]
        return tuple(sorted({min(d, n - 1) for d in DEFAULT_SNAPSHOT_DAYS}))

    def _boundaries(self, boundaries: str | Path | None) -> str | Path | None:
        return boundaries if boundaries is not None else getattr(self.scenario.outputs, "boundaries", None)

    def plot(self, which: str | None = None) -> Any:
        """Matplotlib figures of the run: one of ``hospital_occupancy``, ``icu_occupancy``,
        ``new_infections``, ``cumulative_infections``, ``cumulative_by_age``, ``cumulative_cost``,
        ``reproduction_number`` (the keys of :data:`abm.outputs.plots.FIGURES`, the plots/ files of
        a run folder), or (None) a dict of all of them."""
        from abm.outputs import plots

        runs = [plots.RunTables.from_result(self)]
        if which is None:
            return {name: make(runs) for name, make in plots.FIGURES.items()}
        if which not in plots.FIGURES:
            raise ValueError(f"unknown plot {which!r}; choose from {', '.join(plots.FIGURES)}")
        return plots.FIGURES[which](runs)

    def map(
        self,
        path: str | Path | None = None,
        *,
        boundaries: str | Path | None = None,
        days: list[int] | tuple[int, ...] | None = None,
        tiles: bool = True,
    ) -> Any:
        """The tract map (:class:`abm.outputs.maps.MapPage`: shows itself in a notebook);
        written to ``path`` if given. ``boundaries``: a tract boundary file (default: the
        scenario's, then the cache of ``abm data boundaries``, then cells from centroids)."""
        from abm.outputs import maps
        from abm.outputs.boundaries import tract_shapes

        shapes = tract_shapes(self.population.tracts, self._boundaries(boundaries), self.state_fips, self.bounds)
        data = maps.map_data(
            self.by_tract,
            self.population.tracts,
            self._map_days(days, "days"),
            maps.map_title(self.summary, len(self.population.tracts)),
        )
        page = maps.MapPage(maps.render_html(shapes, data, tiles), shapes, data)
        if path is not None:
            page.save(path)
        return page

    def write_figures(
        self,
        folder: str | Path,
        *,
        boundaries: str | Path | None = None,
        map_days: list[int] | tuple[int, ...] | None = None,
    ) -> dict[str, float]:
        """Write ``plots/`` (PNG plots and map snapshots) and ``map.html`` into ``folder``;
        return the seconds each took."""
        from abm.outputs import maps, plots
        from abm.outputs.boundaries import tract_shapes

        folder = Path(folder)
        days = self._map_days(map_days, "map_days")  # checked before anything is written
        t0 = time.perf_counter()
        plots.write_plots([plots.RunTables.from_result(self)], folder / "plots")
        t1 = time.perf_counter()
        shapes = tract_shapes(self.population.tracts, self._boundaries(boundaries), self.state_fips, self.bounds)
        data = maps.map_data(
            self.by_tract, self.population.tracts, days, maps.map_title(self.summary, len(self.population.tracts))
        )
        maps.write_map(folder / "map.html", shapes, data)
        t2 = time.perf_counter()
        maps.write_snapshots(folder / "plots", shapes, data, days)
        t3 = time.perf_counter()
        return {"plots_seconds": t1 - t0, "map_seconds": t2 - t1, "map_snapshots_seconds": t3 - t2}

    def _write_report(self, folder: Path) -> None:
        """``report.html`` of the run folder being written in ``folder`` (after its other files,
        whose names it links)."""
        from abm.outputs.run_report import run_report_html
        from abm.outputs.severity_table import scenario_severity_table

        plots = folder / "plots"
        images = sorted(p.name for p in plots.glob("*.png")) if plots.is_dir() else []
        files = sorted(p.name for p in folder.iterdir())
        scenario = self.scenario.model_dump(mode="json", by_alias=True)
        page = run_report_html(self.summary, scenario, files, images, scenario_severity_table(self.scenario))
        (folder / "report.html").write_text(page, encoding="utf-8")

    def write(
        self,
        out: str | Path,
        *,
        figures: bool = True,
        boundaries: str | Path | None = None,
        map_days: list[int] | tuple[int, ...] | None = None,
    ) -> Path:
        """Write the run folder (atomically) and return its path: tables, summary, manifest,
        ``report.html`` and (``figures``) ``plots/`` and ``map.html``. ``out`` must be a new or
        empty folder, or one abm wrote (:mod:`abm.outputs.run_folder`); a result may be written
        to several folders. ``boundaries`` and ``map_days`` are as for :meth:`map` (default: the
        scenario's ``outputs.boundaries`` and ``outputs.map_days``)."""
        out = output_path(out, "out")
        start = time.perf_counter()
        # This write's own manifest: another write of the result (without figures, say) does not
        # carry this one's timings or files.
        manifest = {**self.manifest, "timings": dict(self.manifest["timings"])}
        with atomic_folder(out, "run") as tmp:
            (tmp / "scenario.resolved.yaml").write_text(self.scenario.resolved_yaml(), encoding="utf-8")
            self.timeseries.to_csv(tmp / "timeseries.csv", index=False)
            self.timeseries.to_parquet(tmp / "timeseries.parquet", index=False)
            self.by_age.to_csv(tmp / "by_age.csv", index=False)
            self.by_tract.to_csv(tmp / "by_tract.csv", index=False)
            self.costs.to_csv(tmp / "costs.csv", index=False)
            (tmp / "summary.json").write_text(dumps(self.summary), encoding="utf-8")
            if figures:
                manifest["timings"].update(self.write_figures(tmp, boundaries=boundaries, map_days=map_days))
            self._write_report(tmp)
            manifest["timings"]["output_seconds"] = time.perf_counter() - start
            manifest["files"] = [*sorted(p.name for p in tmp.iterdir()), "manifest.json"]
            (tmp / "manifest.json").write_text(dumps(manifest), encoding="utf-8")
        return out


class Reuse:
    """Populations and community contact networks kept from one run for the next runs that
    would build the same again: calibration trials, which change disease, seeding and
    intervention values but not the population, the seed or the contacts' settings. A network
    keeps no state of a run, so a run that reuses one gives what a run that builds it gives.
    The ``keep`` most recent of each are kept (a trial's population draws are that many)."""

    def __init__(self, keep: int = 1) -> None:
        self.keep = keep
        self._populations: dict[tuple[Any, ...], Population] = {}
        self._networks: dict[tuple[Any, ...], CommunityLayer] = {}

    def _kept(self, store: dict[tuple[Any, ...], Any], key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
        """``store[key]``, built if missing (the oldest entries go first, to keep ``keep``), as
        the most recent entry."""
        if key in store:
            value = store.pop(key)
        else:
            while store and len(store) >= max(1, self.keep):
                store.pop(next(iter(store)))
            value = build()
        store[key] = value
        return value

    def clear(self) -> None:
        """Let go of everything kept."""
        self._populations.clear()
        self._networks.clear()

    @staticmethod
    def _population_key(sc: Scenario) -> tuple[str, int]:
        return sc.population.model_dump_json(), sc.simulation.seed

    def population(self, sc: Scenario, region: Region) -> Population:
        """:func:`population_of` ``sc``, built once for its population settings and seed."""
        return self._kept(self._populations, self._population_key(sc), lambda: population_of(sc, region))

    def community(self, sc: Scenario, population: Population, device: torch.device) -> CommunityLayer:
        """The community layer of ``sc``'s run on ``population``, which must be
        :meth:`population` of ``sc``: built once for those settings, replicates, device and seed."""
        cfg, replicates, seed = sc.contacts, sc.simulation.replicates, sc.simulation.seed
        shared = cfg.shares("community")
        key = (*self._population_key(sc), cfg.community.model_dump_json(), shared, replicates, str(device))
        return self._kept(
            self._networks,
            key,
            lambda: community_layer(population, cfg.community, replicates, device, seed, shared),
        )


# What calibration trials and sweep tasks keep from one run for the next in this process: a
# worker process's, kept while it lives; a command that runs them in its own process clears it
# when it is done with them.
TASK_REUSE = Reuse()


def simulation_of(sc: Scenario, population: Population, **changes: Any) -> Simulation:
    """The engine for a scenario's settings on ``population``; ``changes`` replace any of
    :class:`Simulation`'s arguments (``replicates``, ``seed``, ``device``, ...)."""
    args: dict[str, Any] = {
        "population": population,
        "disease_cfg": sc.disease,
        "contact_cfg": sc.contacts,
        "seeding": sc.seeding,
        "days": sc.simulation.days,
        "replicates": sc.simulation.replicates,
        "seed": sc.simulation.seed,
        "device": torch.device(sc.simulation.device),
        "interventions": sc.interventions.build(),
        "attribute_infections": sc.outputs.reproduction_number,
    }
    return Simulation(**{**args, **changes})


@contextmanager
def memory_errors(sc: Scenario, device: torch.device) -> Iterator[None]:
    """Turn a failed allocation in the block (a GPU's ``torch.OutOfMemoryError``, or on the CPU
    torch's allocator failing or a ``MemoryError``: :func:`abm.memory.cpu_allocation_failed`) into
    one :class:`ScenarioError` naming ``sc``'s size and what to change; any other error passes."""
    try:
        yield
    except (torch.OutOfMemoryError, MemoryError, RuntimeError) as exc:
        if not isinstance(exc, torch.OutOfMemoryError) and not cpu_allocation_failed(exc):
            raise
        where = device if isinstance(exc, torch.OutOfMemoryError) else torch.device("cpu")
        other = ", or simulation.device: cpu" if where.type != "cpu" else ""
        raise ScenarioError(
            f"{sc.name}: population.agents: {sc.population.agents} agents x "
            f"{counted(sc.simulation.replicates, 'replicate')} "
            f"do not fit in the memory of {where}; use fewer agents or replicates{other}"
        ) from None


def check_progress(progress: Any, calls: str, name: str = "progress") -> None:
    """Refuse a ``progress`` argument (the argument ``name``) that cannot be called (before any
    work, rather than with a ``TypeError`` once the first step is done); ``calls`` says how it is
    called, for the message."""
    if progress is not None and not callable(progress):
        raise ScenarioError(f"{name}: {reprlib.repr(progress)} is not allowed; give a function {calls}, or None")


# What a run tells ``stage`` as it starts each part (the whole county takes 15-20 s before day 0).
STAGES = ("building the population", "building contacts and interventions", "simulating the days")


def run(
    scenario: Scenario | str | Path | dict[str, Any],
    *,
    agents: int | None = None,
    days: int | None = None,
    replicates: int | None = None,
    seed: int | None = None,
    device: str | None = None,
    sets: list[str] | None = None,
    progress: Callable[[int, int], None] | None = None,
    stage: Callable[[str], None] | None = None,
    reuse: Reuse | None = None,
    warn: bool = True,
) -> RunResult:
    """Run a scenario and return its tables (pandas DataFrames) and summary; nothing is written
    (:meth:`RunResult.write` writes the run folder that ``abm run`` writes).

    Arguments:
        scenario: a scenario file's path, plain data as a file holds it (a dict; its ``extends``,
            if any, a path relative to the working folder), or a :class:`Scenario` (an earlier
            result's ``scenario``).
        agents: the number of agents, as ``abm run --agents`` (None: the scenario's).
        days: the days to simulate, as ``--days`` (None: the scenario's).
        replicates: the replicates, run as one batch, as ``--replicates`` (None: the scenario's).
        seed: the random seed, as ``--seed`` (None: the scenario's).
        device: ``cpu``, ``cuda`` or ``cuda:N``, as ``--device`` (None: the scenario's).
        sets: ``key.path=value`` texts, as ``abm run --set`` takes them (``["simulation.days=90"]``).
        progress: called as ``progress(day, days)`` after each simulated day (None: nothing is told).
        stage: called as ``stage(text)`` with each of :data:`STAGES` as the run starts it.
        reuse: where to keep the population and community network for the next runs that make
            the same (a :class:`Reuse`; None: nothing is kept).
        warn: give each note ``abm run`` prints on the scenario (an intervention ``sets`` turned
            on, a setting not used, an intervention that starts after the last day, seeding that
            rounds to none, more agents than the region's residents, ...) as a warning of class
            :class:`abm.ScenarioNote` (:mod:`abm.scenario_notes`), with its text, before the run
            starts (False: the commands, which print them, and the runs of a sweep or a
            calibration); and, once the run is done, the note on its result (its hospital curve
            at its maximum on the last day: the peak may come later), which ``abm run`` says in
            its table, as a warning of class :class:`abm.ResultNote` (:mod:`abm.result_notes`)
            that holds the result as ``note.result``.

    The same scenario and seed give the tables and summary ``abm run`` writes. Nothing is printed.

    Raises :class:`abm.scenario.ScenarioError` (a ``ValueError``) with the message ``abm run``
    prints for a bad scenario, override, region folder or device, naming the arguments given here
    (``agents=0``, ``sets=[...]``) where ``abm run`` names its options (``--agents 0``, ``--set``);
    it neither prints nor exits.
    """
    overrides = {"agents": agents, "days": days, "replicates": replicates, "seed": seed, "device": device}
    t0 = time.perf_counter()
    check_progress(progress, "progress(day, days)")
    check_progress(stage, "stage(text)", "stage")
    tell = stage or (lambda text: None)
    if reuse is not None and not isinstance(reuse, Reuse):
        raise ScenarioError(f"reuse: {reprlib.repr(reuse)} is not allowed; give an abm.runs.Reuse(), or None")
    sc = resolve(scenario, overrides, sets, names=PYTHON)
    check_device(sc, PYTHON.scenario(scenario_source(scenario), option_texts(sets, "set", PYTHON), given(overrides)))
    if warn:
        scenario_notes.warn(
            [
                *scenario_notes.scenario_notes(scenario, [sc], sets=sets, overrides=overrides, names=PYTHON),
                *filter(None, [memory_note([sc], names=PYTHON)]),
            ]
        )
    device = torch.device(sc.simulation.device)
    region = load_region(sc.population.region)
    n_days = sc.simulation.days
    with memory_errors(sc, device):
        tell(STAGES[0])
        pop = reuse.population(sc, region) if reuse else population_of(sc, region)
        t1 = time.perf_counter()
        try:
            with torch_threads(sc.simulation.threads):
                tell(STAGES[1])
                built = reuse.community(sc, pop, device) if reuse else None
                sim = simulation_of(sc, pop, device=device, community_built=built)
                tell(STAGES[2])
                res = sim.run(None if progress is None else (lambda d: progress(d + 1, n_days)))
        except ScenarioError as exc:  # a setting the population makes impossible (an intervention's attach)
            where = str(scenario) if isinstance(scenario, (str, Path)) else sc.name
            raise ScenarioError(f"{where}: {exc}") from None
    t2 = time.perf_counter()
    sc = sc.with_capacity()  # the resolved scenario names the capacity used
    beds, icu_beds = sc.outputs.hospital_beds_per_100k, sc.outputs.icu_beds_per_100k
    meta = {
        "scenario": sc.name,
        "region": region.name,
        "region_population": region.figures.population,
        "seed": sc.simulation.seed,
        "device": str(device),
    }
    start = sc.simulation.start_date
    summary = summarize(res, meta, beds, start, icu_beds)
    ts, ba, bt, costs = (
        with_dates(t, start)
        for t in (tables.timeseries(res), tables.by_age(res), tables.by_tract(res, pop.tracts), res.costs)
    )
    manifest = {
        "abm_version": __version__,
        "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": invocation.command(),
        "scenario": sc.name,
        "seed": sc.simulation.seed,
        "device": str(device),
        "agents": pop.size,
        "replicates": sc.simulation.replicates,
        "days": n_days,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "timings": {
            "population_seconds": t1 - t0,
            "engine_seconds": res.engine_seconds,
            "setup_seconds": t2 - t1 - res.engine_seconds,
            "tables_seconds": time.perf_counter() - t2,
        },
    }
    fips, bounds = region.figures.fips[:2], region.figures.bounds
    result = RunResult(sc, pop, res, summary, ts, ba, bt, costs, manifest, fips, bounds)
    if warn:  # the result complete: a filter that makes the note an error still hands it over (note.result)
        scenario_notes.warn(result_notes.with_result(result_notes.run_notes(summary), result))
    return result
