"""The private-calibration scenario (``kind: private_calibration``): schema and loading.

A bad file raises :class:`abm.learning.LearningScenarioError` whose message names the file, the
key path, the bad value and what is allowed (``abm learn`` prints it and exits with code 2).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from abm.learning.errors import LearningScenarioError
from abm.learning.files import read_yaml
from abm.learning.scenario import (
    FLOWER_TIMEOUT,
    FLOWER_TIMEOUT_HELP,
    FLOWER_TIMEOUT_MAX,
    PROTOCOL_NAMES,
    ProtocolSpec,
    Runner,
    TrainingSpec,
    check_protocols,
    protocol_param_problems,
    scenario_data,
)
from abm.plurals import counted
from abm.private_calibration.parameters import PARAMETER_NAMES, BinGrid, FreeParameter
from abm.validation_errors import name_field, seed_field, validated

if TYPE_CHECKING:
    from abm.set_options import OptionNames

KIND = "private_calibration"
# Every protocol of the learning package but peer-to-peer selection (its averaging partners are
# chosen by model similarity; the institutions' calibrators are compared by the protocols below).
CALIBRATION_PROTOCOLS = tuple(n for n in PROTOCOL_NAMES if n != "p2p_selection")
REGION_RULES = ("seattle", "north", "east", "south")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelSection(_Strict):
    """The epidemic model every institution simulates and the observed window."""

    scenario: str = Field(
        "../king_county/calibrate_2020.yaml", description="engine scenario (path relative to this file)"
    )
    set: list[str] = Field([], description="key=value overrides of that scenario, as `abm run --set`")
    start_date: dt.date = Field(
        dt.date(2020, 2, 1),
        description="calendar date of simulation day 0; the model scenario's simulation.start_date where it gives one",
    )
    seeding_day: int = Field(10, ge=0, description="simulation day of the initial infections")
    window: tuple[dt.date, dt.date] = Field(
        (dt.date(2020, 2, 29), dt.date(2020, 4, 24)), description="observed window (whole weeks)"
    )
    case_delay_days: int = Field(
        2,
        ge=0,
        description="days from the onset of symptoms to a reported case (default: the RT-PCR result delay of the "
        "model's testing, 1-3 days, mean 2)",
    )
    feature_center: float = Field(3.0, description="features are (log1p(weekly per 100k) - center) / scale")
    feature_scale: float = Field(2.0, gt=0)

    @model_validator(mode="after")
    def _window(self) -> ModelSection:
        a, b = self.window
        if a < self.start_date or b < a:
            raise ValueError(f"window {a}..{b} must run forward and start on or after start_date {self.start_date}")
        if ((b - a).days + 1) // 7 < 2:
            raise ValueError("window must hold at least two whole weeks")
        if ((b - a).days + 1) % 7:
            raise ValueError(
                f"window {a}..{b} is {(b - a).days + 1} days; give whole weeks (a multiple of 7 days, e.g. "
                f"{a}..{a + dt.timedelta(days=7 * (((b - a).days + 1) // 7) - 1)})"
            )
        if self.seeding_day >= self.days:
            raise ValueError(
                f"seeding_day {self.seeding_day} must fall within the simulated days, which end with the "
                f"window (day {self.days - 1}, {b})"
            )
        return self

    @property
    def days(self) -> int:
        """Simulated days: through the window's last day."""
        return (self.window[1] - self.start_date).days + 1

    @property
    def weeks(self) -> int:
        """Whole weeks in the window."""
        return ((self.window[1] - self.window[0]).days + 1) // 7


class ParameterSpec(_Strict):
    """Range and bins of one free parameter."""

    low: float = Field(gt=0)
    high: float = Field(gt=0)
    bins: int = Field(4, ge=2, le=12)
    log: bool = False

    @model_validator(mode="after")
    def _order(self) -> ParameterSpec:
        if not self.low < self.high:
            raise ValueError(f"low ({self.low}) must be below high ({self.high})")
        return self


# The keys a mapping of free parameters may have, for the scenario's JSON Schema (abm.scenario_schemas:
# an editor flags another); the checks below name the key in abm's messages.
PARAMETER_KEYS: dict[str, Any] = {"propertyNames": {"enum": list(PARAMETER_NAMES)}}


def _default_parameters() -> dict[str, ParameterSpec]:
    return {
        "transmission": ParameterSpec(low=0.5, high=1.5, bins=4),
        "seeding": ParameterSpec(low=2, high=64, bins=4, log=True),
        "ascertainment": ParameterSpec(low=0.05, high=0.5, bins=4, log=True),
    }


class InstitutionSpec(_Strict):
    """One institution: its tracts, population size, simulation budget, prior and (known-truth
    mode) the true parameters of its observed series."""

    name: str = Field(
        pattern=r"^[A-Za-z0-9_ .-]+$", json_schema_extra={"allowed": "letters, digits, spaces, _, - and ."}
    )
    tracts: Literal[REGION_RULES] | list[str] = Field(  # type: ignore[valid-type]
        description="a named rule (seattle, north, east, south) or a list of tract GEOIDs"
    )
    agents: int = Field(5000, ge=200, le=200_000)
    budget: int = Field(192, ge=8, description="simulations of its own population for training pairs")
    ascertainment_draws: int = Field(4, ge=1, le=32, description="observation draws per simulation")
    prior: dict[str, tuple[float, float]] = Field(
        {}, description="parameter -> [low, high]; default the full range", json_schema_extra=PARAMETER_KEYS
    )
    truth: dict[str, float] = Field(
        {}, description="known-truth mode: parameter -> true value", json_schema_extra=PARAMETER_KEYS
    )

    @field_validator("tracts", mode="before")
    @classmethod
    def _tract_text(cls, v: Any) -> Any:
        if isinstance(v, list) and not all(isinstance(g, str) for g in v):
            raise ValueError("tract GEOIDs are text: quote them, e.g. ['53033000100', '53033000200']")
        if not isinstance(v, (str, list)):
            raise ValueError("give a named rule (seattle, north, east or south) or a list of tract GEOIDs")
        return v


class CalibratorSpec(_Strict):
    """A calibrator architecture: ``mlp`` (hidden), ``cnn`` (1-D over weeks: channels), ``gru`` (hidden)."""

    kind: Literal["mlp", "cnn", "gru"] = "mlp"
    hidden: list[Annotated[int, Field(ge=1)]] = [64]
    channels: list[Annotated[int, Field(ge=1)]] = [16, 32]
    embed_dim: int = Field(32, ge=1)
    batchnorm: bool = True

    WIDTH_KEYS: ClassVar[str] = "embed_dim, whatever the kind"
    """What sets :attr:`embedding_width`, for messages."""

    def parameter_count(self, input_shape: tuple[int, ...], n_classes: int) -> int:
        """The values the calibrator of this spec holds on series of ``input_shape`` (channels,
        weeks), as :func:`abm.private_calibration.models.build_calibrator` builds it (weights,
        biases, BatchNorm's four per feature); computed without torch."""
        channels, weeks = input_shape
        bn = 4 if self.batchnorm else 0
        count, prev = 0, channels * weeks
        if self.kind == "mlp":
            for width in [*self.hidden, self.embed_dim]:
                count += prev * width + width + bn * width
                prev = width
        elif self.kind == "cnn":  # 1-D convolutions of kernel 3 over weeks, then a linear to embed_dim
            prev = channels
            for width in self.channels:
                count += prev * width * 3 + width + bn * width
                prev = width
            count += prev * weeks * self.embed_dim + self.embed_dim
        else:  # a GRU (three gates) over weeks, then a linear from its last state to embed_dim
            hidden = self.hidden[0]
            count += 3 * hidden * (channels + hidden + 2) + hidden * self.embed_dim + self.embed_dim
        return count + self.embed_dim * n_classes + n_classes

    @property
    def embedding_width(self) -> int:
        """The width of the body's output: ``embed_dim`` for every kind."""
        return self.embed_dim


class CalibrationProtocolSpec(ProtocolSpec):
    """One protocol run over calibrators: the learning package's protocol spec with calibrator
    models in place of its classifiers."""

    name: Literal[CALIBRATION_PROTOCOLS]  # type: ignore[valid-type]
    models: list[CalibratorSpec] | None = Field(None, min_length=1)


class EvaluationSpec(_Strict):
    """Held-out simulations and end-to-end checks."""

    holdout_simulations: int = Field(96, ge=4, description="per institution, over the full parameter range")
    val_simulations: int = Field(32, ge=2, description="per institution, under its own prior")
    own_holdout_simulations: int = Field(
        64, ge=0, description="per institution, under its own prior (recovery on its own range; 0: not measured)"
    )
    estimate_replicates: int = Field(4, ge=1, description="replicates simulated at each estimate")


class PrivateCalibrationScenario(_Strict):
    """A private-calibration scenario."""

    kind: Literal["private_calibration"]
    name: str = name_field("a folder name")
    description: str = ""
    seed: int = seed_field(0, "random seed of the institutions, the simulations and the training")
    mode: Literal["known_truth", "kc2020"] = "known_truth"
    model: ModelSection = ModelSection()
    parameters: dict[str, ParameterSpec] = Field(default_factory=_default_parameters, json_schema_extra=PARAMETER_KEYS)
    institutions: list[InstitutionSpec] = Field(min_length=2, max_length=16)
    evaluation: EvaluationSpec = EvaluationSpec()
    models: list[CalibratorSpec] = Field([CalibratorSpec()], min_length=1)
    training: TrainingSpec = TrainingSpec(lr=0.005, batch_size=64)
    rounds: int = Field(20, ge=1)
    local_epochs: int = Field(1, ge=1)
    protocols: list[CalibrationProtocolSpec] = Field(min_length=1, description="compared with local-only, always run")
    runner: Runner = Field("inprocess", description="where the institutions' computations run (abm.learning's runners)")
    flower_timeout: float = Field(FLOWER_TIMEOUT, gt=0, le=FLOWER_TIMEOUT_MAX, description=FLOWER_TIMEOUT_HELP)

    @model_validator(mode="after")
    def _consistent(self) -> PrivateCalibrationScenario:
        # messages start with the key path; load_scenario puts the file name in front
        unknown = sorted(set(self.parameters) - set(PARAMETER_NAMES))
        if unknown:
            raise ValueError(f"parameters: unknown {unknown}; allowed: {', '.join(PARAMETER_NAMES)}")
        for need in ("transmission", "seeding"):
            if need not in self.parameters:
                raise ValueError(f"parameters: {need} is required (allowed: {', '.join(PARAMETER_NAMES)})")
        seeding = self.parameters["seeding"]
        if seeding.low < 1:
            raise ValueError(f"parameters.seeding.low: {seeding.low} is not allowed: seeding counts agents, at least 1")
        share = self.parameters.get("ascertainment")
        if share is not None and share.high > 1:
            raise ValueError(
                f"parameters.ascertainment.high: {share.high} is not allowed: ascertainment is a share, at most 1"
            )
        names = [i.name for i in self.institutions]
        if len(set(names)) != len(names):
            raise ValueError(f"institutions: {names} is not allowed: institution names must differ")
        for k, inst in enumerate(self.institutions):
            where = f"institutions[{k}]"
            if seeding.high > inst.agents:
                raise ValueError(
                    f"{where}.agents: {inst.agents} is not allowed: fewer agents than the seeding range's "
                    f"{seeding.high:g} initial infections (parameters.seeding.high); give more agents or a lower high"
                )
            if self.mode == "kc2020" and inst.truth:
                raise ValueError(
                    f"{where}.truth: not used in kc2020 mode (the county's data has no known truth); remove it, "
                    "or use mode known_truth"
                )
            for key, (lo, hi) in inst.prior.items():
                if key not in self.parameters:
                    raise ValueError(f"{where}.prior: unknown key {key!r}; allowed keys: {', '.join(self.parameters)}")
                p = self.parameters[key]
                if not p.low <= lo < hi <= p.high:
                    raise ValueError(
                        f"{where}.prior.{key}: {[lo, hi]} is not allowed: must lie in [{p.low}, {p.high}] "
                        "with low < high"
                    )
            if self.mode == "known_truth":
                missing = sorted(set(self.parameters) - set(inst.truth))
                if missing:
                    raise ValueError(f"{where}.truth: missing {missing}: known_truth mode needs every free parameter")
            for key, v in inst.truth.items():
                if key not in self.parameters:
                    raise ValueError(f"{where}.truth: unknown key {key!r}; allowed keys: {', '.join(self.parameters)}")
                p = self.parameters[key]
                if not p.low <= v <= p.high:
                    raise ValueError(f"{where}.truth.{key}: {v} is not allowed: must lie in [{p.low}, {p.high}]")
        return self

    def grid(self) -> BinGrid:
        """The joint bin grid, parameters in PARAMETER_NAMES order."""
        return BinGrid(
            tuple(
                FreeParameter(n, s.low, s.high, s.bins, s.log)
                for n in PARAMETER_NAMES
                if (s := self.parameters.get(n)) is not None
            )
        )


def is_private_calibration(data: Any) -> bool:
    """Whether parsed YAML ``data`` is a private-calibration scenario (``kind: private_calibration``)."""
    return isinstance(data, dict) and data.get("kind") == KIND


def load_scenario(
    path_or_dict: str | Path | dict[str, Any],
    runner: str | None = None,
    sets: list[str] | None = None,
    names: OptionNames | None = None,
) -> tuple[PrivateCalibrationScenario, Path]:
    """Validate a scenario; returns it and the folder its relative paths are resolved against:
    the file's folder, or for a dict the working folder (as :func:`abm.run` resolves a dict's
    ``extends``).

    ``runner`` (inprocess, flower-sim, flower) overrides the scenario's ``runner`` key; ``sets``
    (``key.path=value``, as ``abm learn --set`` takes them) override any key; messages name them
    as ``names`` says (:func:`abm.learning.scenario.scenario_data`; default: as ``abm learn``
    takes them).
    """
    data, source = scenario_data(path_or_dict, sets, names, runner)
    base = Path.cwd() if isinstance(path_or_dict, dict) else Path(path_or_dict).parent
    if runner is not None:
        data = {**data, "runner": runner}
    scenario = validated(
        PrivateCalibrationScenario, data, source, LearningScenarioError, extra=protocol_param_problems(data)
    )
    check_protocols(
        source,
        scenario.protocols,
        scenario.models,
        scenario.runner,
        len(scenario.institutions),
        scenario.rounds,
        "institution",
    )
    model_file = base / scenario.model.scenario
    if not model_file.is_file():
        raise LearningScenarioError(
            f"{source}: model.scenario: {scenario.model.scenario!r} is not allowed: no such file ({model_file})"
        )
    check_model_and_regions(scenario, base, source)
    return scenario, base


def portable(scenario: PrivateCalibrationScenario, base: Path) -> PrivateCalibrationScenario:
    """The scenario with its model scenario's path (``model.scenario``, relative to ``base``, the
    folder of the file that named it) made absolute, so that it reads the same from any folder: a
    Flower client's process, or ``abm learn`` on a report's ``scenario.json``."""
    path = str((Path(base) / scenario.model.scenario).resolve())
    return scenario.model_copy(update={"model": scenario.model.model_copy(update={"scenario": path})})


# The model scenario a report folder keeps beside its scenario.json, resolved: every value, with
# model.set applied.
MODEL_FILE = "model.resolved.yaml"


def saved(scenario: PrivateCalibrationScenario) -> PrivateCalibrationScenario:
    """The scenario as a report folder's ``scenario.json`` holds it: its model scenario named as
    the folder's own resolved copy (:data:`MODEL_FILE`, relative to the folder, overrides
    applied), so that ``abm learn FOLDER/scenario.json`` runs the same calibration from any
    folder, whatever becomes of the model file it named (edited, moved)."""
    return scenario.model_copy(update={"model": scenario.model.model_copy(update={"scenario": MODEL_FILE, "set": []})})


def check_simulation_memory(scenario: PrivateCalibrationScenario, model: Any, source: str) -> None:
    """Refuse an institution whose largest batch of simulations (its ``budget``, or one of the
    evaluation's sets, simulated as replicates of one run of its ``agents``) cannot fit on this
    machine at all: the least the engine's estimate allows for that run is beyond all of its
    memory and swap (as :func:`abm.scenario.check_memory` refuses an epidemic run). ``abm
    validate`` said such a scenario was valid, and ``abm learn`` failed only as it simulated."""
    from abm.memory import ESTIMATE_OVER_PEAK, run_memory_bytes, total_memory_bytes

    total = total_memory_bytes()
    if total is None:  # (the institutions simulate on the CPU, whatever the model's simulation.device says)
        return
    ev = scenario.evaluation
    sets = {"val_simulations": ev.val_simulations, "holdout_simulations": ev.holdout_simulations}
    sets["own_holdout_simulations"] = ev.own_holdout_simulations
    for k, inst in enumerate(scenario.institutions):
        key, reps = max(
            [("budget", inst.budget), *(("evaluation." + n, v) for n, v in sets.items())], key=lambda x: x[1]
        )
        sized = model.model_copy(update={"population": model.population.model_copy(update={"agents": inst.agents})})
        least = run_memory_bytes(sized, reps) / ESTIMATE_OVER_PEAK
        if least > total:
            where = f"institutions[{k}].budget" if key == "budget" else key
            raise LearningScenarioError(
                f"{source}: {where}: {reps:,} simulations of institutions[{k}]'s {inst.agents:,} agents, run at "
                f"once, need at least about {least / 1e9:.1f} GB, but this machine has {total / 1e9:.1f} GB of "
                f"memory and swap in all; give fewer simulations or agents (institutions[{k}].agents)"
            )


def check_model_and_regions(scenario: PrivateCalibrationScenario, base: Path, source: str) -> None:
    """What the schema cannot see: the model scenario with its overrides, each institution's
    tracts, and (kc2020 mode) the data over the window; errors name the file and the key."""
    from abm.calibration.errors import CalibrationError
    from abm.populations.region import RegionError, load_region
    from abm.private_calibration.observed import model_scenario, observed_kc2020
    from abm.private_calibration.regions import institution_region
    from abm.scenario import ScenarioError
    from abm.scenario import load_scenario as load_epidemic

    where = f"{source}: model.scenario: {scenario.model.scenario!r}"
    try:
        kind = read_yaml(base / scenario.model.scenario).get("kind")
    except LearningScenarioError as exc:
        raise LearningScenarioError(f"{where}: {' '.join(str(exc).split())}") from None
    if kind is not None:
        raise LearningScenarioError(f"{where}: a {kind} scenario; give an epidemic scenario (as `abm run` takes)")
    model_file = base / scenario.model.scenario
    try:
        model = model_scenario(scenario, base, source)
    except ScenarioError as exc:
        try:  # the file's own fault, or one of model.set's (whose messages name this file and the key)?
            load_epidemic(model_file)
        except ScenarioError as alone:
            # the file's problems, as they follow its name; with model.set given the same problems
            # follow 'model.set (on FILE)', and were blamed on model.set
            problems = str(alone).removeprefix(f"{model_file}: ")
            if not scenario.model.set or str(exc).endswith(problems):  # the file, whatever model.set says
                raise LearningScenarioError(f"{where}: {' '.join(str(alone).split())}") from None
        raise LearningScenarioError(str(exc)) from None
    day0 = model.simulation.start_date  # the model's day 0, where it names one (its settings' dates count from it)
    if day0 is not None and day0 != scenario.model.start_date:
        raise LearningScenarioError(
            f"{source}: model.start_date: {scenario.model.start_date} is not the model scenario's day 0, its "
            f"simulation.start_date {day0} ({scenario.model.scenario}): the observed window would be read "
            f"{counted(abs((scenario.model.start_date - day0).days), 'day')} off its simulated days; give {day0}"
        )
    if any(model.seeding.immune_shares()):
        # the per-replicate seeding (abm.private_calibration.simulate) draws among all agents
        raise LearningScenarioError(
            f"{where}: seeding.prior_immunity: {model.seeding.prior_immunity} is not allowed: private calibration "
            "seeds each replicate itself, among all agents, and its calibrators learn epidemics without prior "
            "immunity; give 0"
        )
    vaccination = model.interventions.enabled().get("vaccination")
    if vaccination is not None and vaccination.protection == "leaky" and vaccination.start_day < scenario.model.days:
        # the per-replicate transmission multiplier lives in susceptibility_scale, which leaky
        # protection overwrites (1 - level) for every vaccinated agent
        raise LearningScenarioError(
            f"{where}: interventions.vaccination.protection: 'leaky' is not allowed: leaky protection overwrites "
            "each vaccinated agent's susceptibility_scale, which carries the per-replicate transmission multiplier "
            "(the multiplier would be lost for vaccinated agents); use protection: all_or_nothing"
        )
    check_simulation_memory(scenario, model, source)
    county = load_region(model.population.region)
    owner: dict[str, int] = {}
    for k, spec in enumerate(scenario.institutions):
        if isinstance(spec.tracts, list) and len(set(spec.tracts)) < len(spec.tracts):
            twice = sorted({g for g in spec.tracts if spec.tracts.count(g) > 1})
            raise LearningScenarioError(f"{source}: institutions[{k}].tracts: {twice} listed twice; list each once")
        try:
            region = institution_region(county, spec.tracts, spec.name)
        except RegionError as exc:
            raise LearningScenarioError(f"{source}: institutions[{k}].tracts: {exc}") from None
        shared = sorted(g for g in region.tracts["geoid"] if g in owner)
        if shared:
            j = owner[shared[0]]
            raise LearningScenarioError(
                f"{source}: institutions[{k}].tracts: {len(shared)} tracts (e.g. {shared[0]}) also belong to "
                f"institutions[{j}] ({scenario.institutions[j].name}); institutions hold disjoint tracts"
            )
        owner.update(dict.fromkeys(region.tracts["geoid"], k))
    if scenario.mode == "kc2020":
        try:
            observed_kc2020(scenario.model, county.figures.population)
        except CalibrationError as exc:
            raise LearningScenarioError(f"{source}: {exc}") from None
