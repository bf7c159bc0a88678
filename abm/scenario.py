"""The scenario schema (pydantic) and YAML loading with ``extends:`` and ``--set`` overrides.

A bad scenario raises :class:`ScenarioError` with one message that names the file, the key
path, the bad value and what is allowed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator, model_validator

from abm import set_options
from abm.calibration.config import BUNDLED, CalibrationConfig
from abm.day_dates import days_from_dates, shared_start_date, with_dates_read
from abm.engine.config import (
    MAX_DAYS,
    ContactConfig,
    DiseaseConfig,
    SeedingConfig,
    default_degrees,
)
from abm.interventions import InterventionsConfig
from abm.interventions.config.vaccination import RESIDENTS
from abm.interventions.contact_multipliers import BUNDLED_SERIES
from abm.key_paths import lookup
from abm.memory import ESTIMATE_OVER_PEAK, run_memory_bytes, run_size, total_memory_bytes
from abm.missing_file import RELATIVE_FILE, close_file, missing_file_hint
from abm.named_settings import check_named_settings, check_priority_ages
from abm.plurals import counted
from abm.populations import Population, Region, build_population
from abm.populations.reference import build_reference_population
from abm.populations.region import REGIONS_DIR, RegionError, load_region, resolve_region_path
from abm.set_options import COMMAND_LINE, ScenarioError, dotted, refuse_repeated_keys
from abm.validation_errors import invalid_message, likely_meant, name_field, validated
from abm.yaml_loader import load_yaml, yaml_error_text

if TYPE_CHECKING:
    import torch


class PopulationConfig(BaseModel):
    """Who is simulated."""

    model_config = ConfigDict(extra="forbid")
    region: str = Field(
        "king_county",
        description="a bundled region name or a path to a region folder (a relative path is read from the folder of "
        "the scenario file that names it)",
    )

    @field_validator("region")
    @classmethod
    def _region_exists(cls, v: str) -> str:
        path = resolve_region_path(v)
        lacking = [f for f in ("region.yaml", "tracts.csv") if not (path / f).is_file()]
        if path.is_dir() and len(lacking) == 1:
            raise ValueError(f"{path / lacking[0]}: not found; a region folder needs region.yaml and tracts.csv")
        if lacking:
            bundled = ", ".join(sorted(p.name for p in REGIONS_DIR.iterdir() if p.is_dir()))
            raise ValueError(f"no region folder with region.yaml and tracts.csv there; bundled regions: {bundled}")
        return v

    agents: int = Field(
        100_000,
        ge=1,
        description="number of agents (the whole region at one agent per resident: its population, `population` in "
        "region.yaml)",
    )
    kind: Literal["region", "reference"] = Field(
        "region",
        description="region: built from the region's tract figures; reference: the thesis model's published-results "
        "population of King County (ages drawn independently, households by consecutive ids, one work group per "
        "industry; abm/populations/reference.py), so population.region must be king_county",
    )


class SimulationConfig(BaseModel):
    """How long, how many replicates, which random seed and which device."""

    model_config = ConfigDict(extra="forbid")
    days: int = Field(180, ge=1, le=MAX_DAYS, description="days simulated")
    replicates: int = Field(1, ge=1, le=1000, description="independent runs, batched together")
    seed: int = Field(1234, ge=0, description="random seed of the population and of the runs")
    device: str = Field(
        "cpu",
        pattern=r"^(cpu|cuda(:\d+)?)$",
        description="cpu or cuda",
        json_schema_extra={"allowed": "cpu, cuda or cuda:N (N: a GPU's number, from 0)"},
    )
    threads: int | None = Field(
        1, ge=1, le=512, description="CPU threads for torch; none: torch's default (1 was fastest at 100k on 2 cores)"
    )
    start_date: date | None = Field(
        None,
        description="calendar date of day 0 (YYYY-MM-DD); given, the run's tables get a date column and its "
        "summary, console, plots and map name dates beside days, and a day setting (start_day, from_day, "
        "until_day, seeding.day, map_days) may be written as a date, read as the days after it; none: days only; "
        "with a calibration section, calibration.start_date when only that is given (give the date in one of "
        "them, or the same in both)",
    )


class OutputConfig(BaseModel):
    """What a run writes besides the always-written tables."""

    model_config = ConfigDict(extra="forbid")
    hospital_beds_per_100k: float | None = Field(
        None, gt=0, description="hospital capacity line; default: the region's figure"
    )
    icu_beds_per_100k: float | None = Field(
        None,
        gt=0,
        description="ICU capacity line (ICU beds for the epidemic's patients); default: the region's figure (King "
        "County 6.1); a region without one: no ICU line",
    )
    map_days: list[int] | None = Field(
        None,
        description="days of the map's PNG snapshots, each within the run ([] for none); default: 50, 70 and 120, "
        "each past the run's end replaced by its last day",
    )
    reproduction_number: bool = Field(
        True,
        description="put each infection by transmission down to one infector, for the reproduction number by day "
        "of infection (timeseries, summary, plot); it changes no result and costs up to about 15% more engine time "
        "(BENCHMARKS.md); false: none",
    )
    boundaries: str | None = Field(
        None,
        description="tract boundary file (Census shapefile .zip/.shp or GeoJSON with GEOID; "
        f"{RELATIVE_FILE}); default: the cache of `abm data boundaries`, else cells from tract centroids",
    )

    @field_validator("boundaries")
    @classmethod
    def _boundary_file(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if not Path(value).is_file():
            raise ValueError("no such file; give a tract boundary file (.zip, .shp, .geojson, .json)")
        if Path(value).suffix.lower() not in (".zip", ".shp", ".geojson", ".json"):
            raise ValueError("unknown boundary file type; allowed: .zip, .shp, .geojson, .json")
        return value


class Scenario(BaseModel):
    """A complete, validated scenario."""

    model_config = ConfigDict(extra="forbid")
    name: str = name_field(
        "a folder name",
        " (a file without a name: line is named after its file name)",
        description="names the run folder; a file that leaves it out is named after itself",
    )
    description: str = Field(
        "", description="free text on what the scenario is for, shown in `abm compare`'s report; changes no result"
    )
    population: PopulationConfig = Field(
        PopulationConfig(), description="who is simulated: the region, the number of agents, how they are built"
    )
    simulation: SimulationConfig = Field(
        SimulationConfig(), description="days simulated, replicates, random seed, device and CPU threads"
    )
    disease: DiseaseConfig = Field(
        DiseaseConfig(),
        description="transmission rate, susceptibility, infectiousness, stage branching and dwell times",
    )
    contacts: ContactConfig = Field(
        ContactConfig(), description="who meets whom each day: the household, occupation and community layers"
    )
    seeding: SeedingConfig = Field(SeedingConfig(), description="who is infected at the start, and on which day")
    interventions: InterventionsConfig = Field(
        default_factory=InterventionsConfig,
        description="the interventions of the run; each is off unless its key is present",
    )
    outputs: OutputConfig = Field(OutputConfig(), description="what a run writes besides the always-written tables")
    calibration: CalibrationConfig | None = Field(
        None,
        description="what `abm calibrate` fits; `abm run` and `abm sweep` do not use it, but check it as "
        "`abm calibrate` does (null: none)",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        total = sum(self.seeding.counts(self.population.agents).values())
        if total > self.population.agents:
            key = "infections" if self.seeding.infections_per_100k is None else "infections_per_100k"
            raise ValueError(f"seeding.{key}: {total} infections but population.agents is {self.population.agents}")
        settings = self.contacts.occupation.degree
        multipliers = getattr(self.interventions, "contact_multipliers", None)
        vaccination = getattr(self.interventions, "vaccination", None)
        # (key, the occupation settings it names, what else it may name)
        named = [
            (f"interventions.contact_multipliers.closures[{i}].settings", closure.settings, "")
            for i, closure in enumerate(multipliers.closures if multipliers is not None else [])
        ]
        if vaccination is not None:
            named.append(("interventions.vaccination.priority", vaccination.priority_settings(), f"{RESIDENTS} and "))
        for key, names, also in named:
            bad = [x for x in names if x not in settings]
            if bad:
                raise ValueError(
                    f"{key}: unknown settings {bad}; allowed: {also}the settings of contacts.occupation.degree "
                    f"({', '.join(settings)})"
                )
        late = [d for d in self.outputs.map_days or [] if not 0 <= d < self.simulation.days]
        if late:
            raise ValueError(
                f"outputs.map_days: {late} not allowed; map days must lie within the "
                f"{counted(self.simulation.days, 'simulated day')} (0..{self.simulation.days - 1})"
            )
        if self.seeding.day >= self.simulation.days:
            raise ValueError(
                f"seeding.day: {self.seeding.day} is not within the "
                f"{counted(self.simulation.days, 'simulated day')} "
                f"(0..{self.simulation.days - 1}); nothing would happen"
            )
        start, fitted = self.simulation.start_date, self.calibration.start_date if self.calibration else None
        if start is not None and (date.max - start).days < self.simulation.days - 1:
            raise ValueError(  # the last day's date would not exist (9999-12-31 is the last)
                f"simulation.start_date: {start} is too late: the "
                f"{counted(self.simulation.days, 'simulated day')} would end "
                f"after {date.max}"
            )
        if start is not None and fitted is not None and start != fitted:
            raise ValueError(  # both given (either alone is given to the other: abm.day_dates.shared_start_date)
                f"calibration.start_date: {fitted} is not simulation.start_date: {start}; both are the date of day "
                "0: give it in one of them (the other takes it) or the same date in both"
            )
        return self

    def with_capacity(self) -> Scenario:
        """This scenario with the hospital and ICU capacities it runs with filled in: the region's
        figures where ``outputs.hospital_beds_per_100k`` or ``icu_beds_per_100k`` is left out (the
        capacity lines, the days over them; a region without an ICU figure leaves ICU's out)."""
        keys = ("hospital_beds_per_100k", "icu_beds_per_100k")
        if all(getattr(self.outputs, key) is not None for key in keys):
            return self
        figures = load_region(self.population.region).figures
        filled = {key: getattr(figures, key) for key in keys if getattr(self.outputs, key) is None}
        return self.model_copy(update={"outputs": self.outputs.model_copy(update=filled)})

    def resolved_data(self) -> dict[str, Any]:
        """Every value, defaults included, as plain data: loading it gives the same scenario. An
        intervention that is off by absence is left out (as absent, it stays off; given as null,
        a scenario reads it as a key without a value, which gets a note)."""
        data = self.model_dump(mode="json", by_alias=True)
        data["interventions"] = {k: v for k, v in data["interventions"].items() if v is not None}
        return data

    def resolved_yaml(self) -> str:
        """:meth:`resolved_data` as YAML text."""
        return yaml.safe_dump(
            self.resolved_data(), sort_keys=False, default_flow_style=None, width=100, allow_unicode=True
        )


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError as exc:
        hint = missing_file_hint(path)
        raise ScenarioError(f"{path}: cannot read the scenario file ({exc.strerror or exc}){hint}") from exc
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read the scenario file ({exc.strerror or exc})") from exc
    except UnicodeDecodeError:
        raise ScenarioError(f"{path}: not a text file (a YAML scenario is UTF-8 text)") from None
    if not text.strip():
        raise ScenarioError(f"{path}: the file is empty; a scenario needs at least a name or an `extends:` line")
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{path}: {yaml_error_text(exc)}") from exc
    if data is None:  # comments only: YAML reads no document
        raise ScenarioError(
            f"{path}: the file holds only comments; a scenario needs at least a name or an `extends:` line"
        )
    if not isinstance(data, dict):
        raise ScenarioError(f"{path}: a scenario must be a mapping of keys to values, got {type(data).__name__}")
    return data


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Deep merge: mappings merge key by key, anything else is replaced."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def load_raw(path: Path, _seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """Read a scenario file and the chain of files it ``extends``, merged, as plain data; a
    base file's ``name`` is not inherited."""
    path = Path(path)
    resolved = path.resolve()
    if resolved in _seen:
        chain = " -> ".join(str(p) for p in (*_seen, resolved))
        raise ScenarioError(f"{path}: extends: circular chain {chain}")
    data = paths_beside(_read_yaml(path), path)
    return extended(data, str(path), path.parent, (*_seen, resolved))


def extended(data: dict[str, Any], source: str, folder: Path, _seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """``data`` merged over the scenario file its ``extends`` names (a path relative to
    ``folder``: a file's own folder, or the working folder for data given from Python), if any;
    the base's ``name`` is not inherited. Messages name ``data`` as ``source``."""
    data = dict(data)
    parent = data.pop("extends", None)
    if parent is None:
        return data
    if not isinstance(parent, str | Path):
        raise ScenarioError(f"{source}: extends: {parent!r} is not allowed; give the path of a scenario file")
    base_path = folder / parent  # an absolute path stays itself
    if base_path.is_dir():
        raise ScenarioError(
            f"{source}: extends: {str(parent)!r} is a folder ({base_path}); give the path of a scenario file"
        )
    if not base_path.is_file():
        meant = close_file(base_path)
        guess = f"; did you mean {str(Path(parent).with_name(meant.name))!r}?" if meant is not None else ""
        raise ScenarioError(f"{source}: extends: {str(parent)!r} not found (looked for {base_path}){guess}")
    parent_data = load_raw(base_path, _seen)
    parent_data.pop("name", None)  # a scenario is named by itself or by its own file, not by its base
    return merge(parent_data, data)


def overlaps(a: str, b: str) -> bool:
    """Whether key paths ``a`` and ``b`` set the same value: equal, or one holds the other
    (``seeding`` holds ``seeding.day``; ``changes[0]`` holds ``changes.0.household``)."""
    a, b = dotted(a), dotted(b)
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def schema_default(parts: list[str]) -> Any:
    """The schema's default at a key path of sections and keys (``disease.dwell_times``), as plain
    data a file would hold; None where there is none (a key path through a list or a mapping of
    entries, an unknown key, or a section whose class needs values)."""
    model: Any = Scenario
    for k, part in enumerate(parts):
        fields = {field.alias or name: field for name, field in getattr(model, "model_fields", {}).items()}
        if part not in fields:
            return None
        field = fields[part]
        value = field.get_default(call_default_factory=True)
        if value is None:  # an optional section that is off by default (interventions.testing): its defaults
            classes = [c for c in get_args(field.annotation) if isinstance(c, type) and issubclass(c, BaseModel)]
            try:
                value = classes[0]() if len(classes) == 1 else None
            except ValidationError:
                return None
        if k == len(parts) - 1:
            return TypeAdapter(Any).dump_python(value, mode="json", by_alias=True)
        model = type(value)
    return None


def apply_set(data: dict[str, Any], assignment: str, source: str = "--set") -> dict[str, Any]:
    """:func:`abm.set_options.apply_set` on an epidemic scenario's data: an item of a list the data
    leave out is set in the schema's default list (:func:`schema_default`). ``extends`` is refused:
    the data are already merged over their base, so it would name a key the schema does not have."""
    key = assignment.partition("=")[0]
    if dotted(key).split(".")[0] == "extends":
        raise ScenarioError(
            f"{source}: {key.strip()}: not allowed; a scenario's base is read from its file before the options "
            "change it, so an option cannot replace it: write a file that extends the base (extends: BASE.yaml) "
            "and run it (abm compare compares the runs)"
        )
    return set_options.apply_set(data, assignment, source, schema_default)


def replaced_keys(data: dict[str, Any], assignment: str) -> list[str]:
    """The keys of the mapping at ``assignment``'s key path that its value leaves out: a mapping
    given to ``--set`` replaces the mapping there as a whole (``extends`` merges instead), so
    those keys are dropped. Empty when the value is not a mapping or the path holds none."""
    key, _, text = assignment.partition("=")
    try:
        value = load_yaml(text)
    except yaml.YAMLError:
        return []
    node: Any = data
    for part in dotted(key).split("."):
        if not isinstance(node, dict) or part not in node:
            return []
        node = node[part]
    if not isinstance(value, dict) or not isinstance(node, dict):
        return []
    return [str(k) for k in node if k not in value]


def key_origin(path: str | Path) -> Callable[[tuple[Any, ...]], Path | None]:
    """For a scenario file, a function from a key path to the file of its ``extends`` chain that
    sets it (the file itself first), or None where none does (a default)."""
    chain, current, seen = [], Path(path), set()
    while current.is_file() and current.resolve() not in seen:
        seen.add(current.resolve())
        try:
            data = load_yaml(current.read_text(encoding="utf-8-sig"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            break
        if not isinstance(data, dict):
            break
        chain.append((current, data))
        parent = data.get("extends")
        if not isinstance(parent, str):
            break
        current = current.parent / parent if not Path(parent).is_absolute() else Path(parent)

    def origin(loc: tuple[Any, ...]) -> Path | None:
        # A name is not inherited (load_raw): only the file itself sets it, else its file name does.
        for file, data in chain[:1] if loc[:1] == ("name",) else chain:
            node: Any = data
            for part in loc:
                if (isinstance(node, dict) and part in node) or (
                    isinstance(node, list) and isinstance(part, int) and part < len(node)
                ):
                    node = node[part]
                else:
                    break
            else:
                return file
        return None

    return origin


# Keys that name a data file: a relative path is read from the scenario file's folder when the
# file is there (else, as before, from the working folder).
DATA_FILE_KEYS = (
    ("calibration", "data"),
    ("interventions", "contact_multipliers", "series", "source"),
    ("outputs", "boundaries"),
)


def read_scenario_data(path: str | Path) -> dict[str, Any]:
    """A scenario file with its ``extends`` chain merged, its name defaulted to the file name
    (a name is not inherited from the file it extends, see :func:`load_raw`), and a relative
    region path, observed-data file, multiplier series file or tract boundary file made relative
    to the file of the chain that names it (:func:`paths_beside`)."""
    path = Path(path)
    data = load_raw(path)
    data.setdefault("name", path.stem)
    return paths_beside(data, path)  # a data file a base names, found beside this file (as before)


def paths_beside(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """One scenario file's own data with a relative region path made relative to the file's
    folder, and a relative observed-data, multiplier series or tract boundary file too where the
    file is there (else it stays relative to the working folder). Each file of an ``extends`` chain is read
    this way, so a base file in another folder names its region and data beside itself."""
    pop = data.get("population")
    if isinstance(pop, dict) and isinstance(pop.get("region"), str):
        region = pop["region"]
        if not (REGIONS_DIR / region).is_dir() and not Path(region).is_absolute():
            data["population"] = {**pop, "region": str((path.parent / region).resolve())}
    for keys in DATA_FILE_KEYS:
        value = lookup(data, keys)
        if isinstance(value, str) and not Path(value).is_absolute() and (path.parent / value).is_file():
            node = data
            for key in keys[:-1]:
                node = node[key]
            node[keys[-1]] = str((path.parent / value).resolve())
    return data


def with_full_data_paths(data: dict[str, Any]) -> dict[str, Any]:
    """Scenario data in which a data file (:data:`DATA_FILE_KEYS`) named by a path
    relative to the working folder (from ``--set``, or from a file that does not hold it beside
    itself), or a region folder so named (from ``--set``), is named by its full path, so that a
    run's resolved scenario and a calibrated one read the same files from any folder (a relative
    region there would be looked for beside the resolved file); bundled names and full paths are
    left as they are."""
    pop = data.get("population")
    region = pop.get("region") if isinstance(pop, dict) else None
    if (
        isinstance(region, str)
        and not (REGIONS_DIR / region).is_dir()
        and not Path(region).is_absolute()
        and Path(region).is_dir()
    ):
        data = apply_set(data, f"population.region={json.dumps(str(Path(region).resolve()))}")
    bundled: dict[tuple[str, ...], Any] = {
        ("calibration", "data"): BUNDLED,
        ("interventions", "contact_multipliers", "series", "source"): BUNDLED_SERIES,
        ("outputs", "boundaries"): (),
    }
    for keys in DATA_FILE_KEYS:
        value = lookup(data, keys)
        if (
            isinstance(value, str)
            and value not in bundled[keys]
            and not Path(value).is_absolute()
            and Path(value).is_file()
        ):
            data = apply_set(data, f"{'.'.join(keys)}={json.dumps(str(Path(value).resolve()))}")
    return data


def load_scenario(path: str | Path, overrides: list[str] | None = None) -> Scenario:
    """Read, merge, override and validate a scenario file; messages name the overrides as the
    command line's ``--set`` options (:data:`COMMAND_LINE`)."""
    data = read_scenario_data(path)
    sets = list(overrides or [])
    refuse_repeated_keys(sets, source=str(path))
    for i, item in enumerate(sets):
        data = apply_set(data, item, COMMAND_LINE.set_item(i))
    origin = None if sets else key_origin(path)  # an option's value is not blamed on a file
    return validate(data, COMMAND_LINE.scenario(str(path), sets, []), origin)


def validate(
    data: dict[str, Any],
    source: str,
    origin: Callable[[tuple[Any, ...]], Path | None] | None = None,
    *,
    batch: int | None = None,
) -> Scenario:
    """Validate plain data as a scenario, turning pydantic errors into one clear message (naming
    the file of an ``extends`` chain that set a bad value, given its ``origin``, :func:`key_origin`).
    Day 0's date given in only one of ``simulation.start_date`` and ``calibration.start_date`` is
    given to the other, and days written as dates are read as days after it (:mod:`abm.day_dates`).
    ``batch``: the replicates a run of it holds at once, for the memory check (:func:`check_memory`;
    default the scenario's own; 1 for a sweep, whose replicates run one by one)."""
    data, problems, read = days_from_dates(shared_start_date(data))
    if problems:
        raise ScenarioError(invalid_message(source, problems))
    try:
        scenario = validated(Scenario, data, source, ScenarioError, origin)
    except ScenarioError as exc:  # name the dates a day number in the message stands for
        raise ScenarioError(with_dates_read(str(exc), read, lookup(data, ("simulation", "start_date")))) from None
    check_run_inputs(scenario, source)
    check_memory(scenario, source, batch)
    return scenario


def check_run_inputs(scenario: Scenario, source: str) -> None:
    """What the schema cannot see, checked before anything runs: the region's files can be read;
    every ``contacts.occupation.degree`` key names a setting of the population (a misspelt sector
    would otherwise be kept and never used) and every sector of the region has one (the run would
    fail without it); closures and a vaccination priority list name settings the population has
    (:func:`abm.named_settings.check_named_settings`) and the list's age ranges fall on its age bands
    (:func:`abm.named_settings.check_priority_ages`); a boundary file holds the population's tracts. (The
    device is checked where the run happens, :func:`check_device`: a sweep planned here may run
    on a Ray cluster's GPUs.)"""
    from abm.populations.reference import CATEGORIES, county_tract

    try:
        region = load_region(scenario.population.region)
    except RegionError as exc:
        raise ScenarioError(f"{source}: population.region: {scenario.population.region!r}: {exc}") from None
    if scenario.population.kind == "reference" and region.path.resolve() != (REGIONS_DIR / "king_county").resolve():
        # The reference population is King County's; the run would scale it to this region's residents
        # and draw this region's hospital beds beside it.
        raise ScenarioError(
            f"{source}: population.region: {scenario.population.region!r} is not allowed with population.kind: "
            f"reference; the reference population is King County's (the thesis's figures), and the run would "
            f"report it as {region.name} ({region.figures.population:,} residents, "
            f"{region.figures.hospital_beds_per_100k:g} hospital beds per 100,000); leave population.region at "
            "king_county, or use population.kind: region to build that region's population"
        )
    settings = CATEGORIES if scenario.population.kind == "reference" else region.figures.sectors
    known = set(default_degrees()) | set(settings)
    unknown = sorted(set(scenario.contacts.occupation.degree) - known)
    if unknown:
        guesses = [f"{u!r}: did you mean {meant!r}?" for u in unknown if (meant := likely_meant(u, sorted(known)))]
        raise ScenarioError(
            f"{source}: contacts.occupation.degree: {unknown} not allowed"
            + (f" ({' '.join(guesses)})" if guesses else "")
            + f"; the settings are {', '.join(sorted(known))}"
        )
    lacking = [s for s in settings if s not in scenario.contacts.occupation.degree]
    if lacking:
        whose = (
            "the reference population (population.kind: reference)"
            if scenario.population.kind == "reference"
            else region.path / "region.yaml"
        )
        raise ScenarioError(
            f"{source}: contacts.occupation.degree: no entry for the sectors {lacking} of {whose}; give each "
            f"sector its mean daily contacts (e.g. contacts.occupation.degree: {{{lacking[0]}: 5}})"
        )
    check_named_settings(scenario, region, source)
    check_priority_ages(scenario, region, source)
    if scenario.outputs.boundaries is not None:
        from abm.outputs.boundaries import BoundaryError, shapes_from_file

        reference = scenario.population.kind == "reference"  # one pseudo-tract for the county
        tracts = county_tract(scenario.population.agents) if reference else region.tracts
        try:
            shapes_from_file(tracts, scenario.outputs.boundaries)
        except BoundaryError as exc:
            raise ScenarioError(f"{source}: outputs.boundaries: {exc}") from None


# GPU memory a run takes at least: bytes per agent (the population, shared by the replicates) and
# per agent and replicate. Measured with no intervention on an H200 (torch's peak allocation,
# 2026-11-27): 436 and 634 bytes from 2.25M agents x 1 and x 10 replicates (2,295 and 14,537 MiB);
# 100,000 x 10 and 1M x 1 lie above the estimate too, and interventions take more (BENCHMARKS.md).
GPU_BYTES_PER_AGENT = 400
GPU_BYTES_PER_AGENT_REPLICATE = 600


def check_device(scenario: Scenario, source: str, batch: int | None = None) -> None:
    """The CUDA device a scenario asks for exists on this machine, and the least memory the run
    takes (with ``batch`` replicates at once, default its own; 1 for a sweep's runs) is not beyond
    all of the device's (a run that passes but does not fit the device's free memory ends with one
    message when it runs out, :func:`abm.runs.run`). Messages begin with ``source``: the scenario
    with the options that changed it (:meth:`OptionNames.scenario`), which may set the device,
    the agents or the replicates."""
    device = scenario.simulation.device
    if not device.startswith("cuda"):
        return
    import torch  # here only: a scenario on the CPU goes without it (a second or more to load)

    if not torch.cuda.is_available():
        raise ScenarioError(
            f"{source}: simulation.device: {device!r} is not allowed here: no CUDA device is available; use cpu"
        )
    if device.startswith("cuda:") and int(device[5:]) >= torch.cuda.device_count():
        raise ScenarioError(
            f"{source}: simulation.device: {device!r} is not allowed here: this machine has CUDA devices "
            f"0..{torch.cuda.device_count() - 1}"
        )
    agents, replicates = scenario.population.agents, batch or scenario.simulation.replicates
    need = GPU_BYTES_PER_AGENT * agents + GPU_BYTES_PER_AGENT_REPLICATE * agents * replicates
    total = torch.cuda.get_device_properties(torch.device(device)).total_memory
    if need > total:
        raise ScenarioError(
            f"{source}: population.agents: {agents} agents x {counted(replicates, 'replicate')} need at least about "
            f"{need / 1e9:.1f} GB, but {device} has {total / 1e9:.1f} GB; use fewer agents"
            f"{' or replicates' if batch is None else ''}, or simulation.device: cpu"
        )


def population_of(sc: Scenario, region: Region, seed: int | None = None) -> Population:
    """The scenario's population (``population.kind``: the region's synthetic population, or the
    thesis's reference population) drawn from ``seed`` (default ``simulation.seed``)."""
    seed = sc.simulation.seed if seed is None else seed
    if sc.population.kind == "reference":
        return build_reference_population(sc.population.agents, seed)
    return build_population(region, sc.population.agents, seed)


def check_population_settings(
    sc: Scenario, source: str, seed: int | None = None, built: dict[tuple[str, int], torch.Tensor] | None = None
) -> None:
    """Refuse a setting that the scenario's population (drawn from ``seed``, default
    ``simulation.seed``) makes impossible, such as an app adoption the age weights cannot reach or
    more initial infections than the prior immunity leaves agents to infect, as the run would once
    it has its population. The population is built only when such a setting
    could be at stake, and kept in ``built`` (by population settings and seed) for the next call
    (torch, too, is loaded only then)."""
    seed = sc.simulation.seed if seed is None else seed
    built = {} if built is None else built
    key = (sc.population.model_dump_json(), seed)

    def age_groups() -> torch.Tensor:
        import torch

        if key not in built:
            pop = population_of(sc, load_region(sc.population.region), seed)
            built[key] = torch.as_tensor(pop.age_group, dtype=torch.int64)
        return built[key]

    problems = sc.interventions.population_problems(age_groups)
    seeding = sc.seeding
    if any(seeding.immune_shares()) and any(seeding.counts(sc.population.agents).values()):
        import torch  # the age groups' sizes: how many agents the prior immunity leaves to seed

        room = seeding.room_problem(torch.bincount(age_groups(), minlength=len(seeding.immune_shares())).tolist())
        problems += [room] if room is not None else []
    if problems:
        raise ScenarioError(f"{source}: {problems[0]}")


def check_memory(scenario: Scenario, source: str, batch: int | None = None) -> None:
    """Refuse a CPU run that cannot fit on this machine at all: the least it needs (its estimate,
    :func:`abm.memory.run_memory_bytes`, with ``batch`` replicates at once, default its own, over
    :data:`abm.memory.ESTIMATE_OVER_PEAK`) is beyond all of the machine's memory and swap.
    Nothing is checked where that cannot be read; a run that may not fit in the memory available
    now gets a note, not a refusal (:func:`abm.memory.memory_note`)."""
    if not scenario.simulation.device.startswith("cpu"):
        return
    least = run_memory_bytes(scenario, batch) / ESTIMATE_OVER_PEAK
    total = total_memory_bytes()
    if total is not None and least > total:
        size, contacts = run_size(scenario, batch, digits="")
        lower = ["agents", *(["replicates"] if batch is None else []), *(["community contacts"] if contacts else [])]
        fewer = lower[0] if len(lower) == 1 else f"{', '.join(lower[:-1])} or {lower[-1]}"
        raise ScenarioError(
            f"{source}: population.agents: {size} need at least about {least / 1e9:.1f} GB, but this machine has "
            f"{total / 1e9:.1f} GB of memory and swap in all; use fewer {fewer}"
        )
