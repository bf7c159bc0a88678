"""JSON Schemas of the scenario files, for editors (docs/editors.md): `abm data schema [KIND]`
writes one; the example scenarios carry the built-in ones in scenarios/schemas/ and name them on
their first line. Before, an editor knew nothing of a scenario's keys: mistakes were found by
`abm validate` once the file was written. The schemas are checked against real files (every
example validates) and against `abm validate` (what one refuses, the other flags)."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from jsonschema.exceptions import best_match
from typer.testing import CliRunner

from abm.cli import app
from abm.day_dates import dates_as_text
from abm.examples import example_files
from abm.outputs.schema_doc import scenario_reference
from abm.scenario_kinds import LEARNING, PRIVATE_CALIBRATION, learning_kind
from abm.scenario_schemas import FOLDER, KINDS, MODELINE, file_name, json_schema, schema_text
from abm.yaml_loader import load_yaml

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "scenarios"
KING_COUNTY = SCENARIOS / "king_county"
runner = CliRunner()
SCENARIO_FILES = [name for name in example_files(SCENARIOS) if name.endswith(".yaml")]


def one_line(text: str) -> str:
    """Console output with rich's wrapping undone."""
    return " ".join(text.split())


def kind_of(data: dict[str, Any]) -> str:
    """The schema's kind of a scenario's parsed data (as `abm validate` tells them apart)."""
    return {None: "epidemic", LEARNING: "learning", PRIVATE_CALIBRATION: "private_calibration"}[learning_kind(data)]


def as_editor_reads(data: Any) -> Any:
    """Parsed YAML as an editor hands it to the schema: dates as their text, keys as text."""
    data = dates_as_text(data)
    if isinstance(data, dict):
        return {str(k): as_editor_reads(v) for k, v in data.items()}
    if isinstance(data, list):
        return [as_editor_reads(v) for v in data]
    return data


def schema_problems(kind: str, data: dict[str, Any]) -> list[tuple[list[Any], str]]:
    """What the shipped schema of ``kind`` flags in ``data``: (key path, message) pairs, each at
    the value at fault (for a value that may take several forms, that of the form it comes
    closest to, as an editor reports it)."""
    schema = json.loads((SCENARIOS / FOLDER / file_name(kind)).read_text(encoding="utf-8"))
    validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
    errors = validator.iter_errors(as_editor_reads(data))
    return [(list(e.absolute_path), e.message) for e in map(best_match, ([e] for e in errors))]


@pytest.mark.parametrize("kind", KINDS)
def test_the_shipped_schemas_are_current(kind):
    """scenarios/schemas/KIND.schema.json is what the models generate (built-in interventions),
    and a draft-07 schema (what yaml-language-server reads)."""
    shipped = SCENARIOS / FOLDER / file_name(kind)
    assert shipped.read_text(encoding="utf-8") == schema_text(kind, plugins=False), (
        f"{shipped} is stale: run `python -m abm.scenario_schemas`"
    )
    schema = json.loads(shipped.read_text(encoding="utf-8"))
    jsonschema.Draft7Validator.check_schema(schema)
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert "$defs" not in json.dumps(schema)  # draft-07 refers to "definitions"


@pytest.mark.parametrize("name", SCENARIO_FILES)
def test_every_example_names_the_schema_of_its_kind_and_validates_against_it(name):
    """Each example scenario (base files too) names its kind's schema on its first line, by a path
    relative to it that holds in a checkout and in a copy of `abm data scenarios`, and the schema
    finds nothing wrong in it."""
    text = (SCENARIOS / name).read_text(encoding="utf-8")
    data = load_yaml(text)
    kind = kind_of(data)
    assert text.splitlines()[0] == MODELINE.format(kind=kind)
    assert (SCENARIOS / name).parent.joinpath(f"../{FOLDER}/{file_name(kind)}").resolve().is_file()
    assert schema_problems(kind, data) == []


@pytest.mark.parametrize(
    "name",
    [
        "king_county/vacc_ct.yaml",
        "king_county/calibrate_2020.yaml",
        "reference/ct_app70.yaml",
        "learning/gmm_codream.yaml",
        "learning/private_calibration.yaml",
    ],
)
def test_every_value_a_scenario_runs_with_validates(name):
    """`abm validate --show`'s YAML (every value, defaults filled in, nulls included) is a file
    the schema accepts: the schema takes each value the models hold, not only those written."""
    kind = kind_of(load_yaml((SCENARIOS / name).read_text(encoding="utf-8")))
    result = runner.invoke(app, ["validate", str(SCENARIOS / name), "--show"])
    assert result.exit_code == 0, result.output
    assert schema_problems(kind, yaml.safe_load(result.stdout)) == []


def test_the_examples_of_every_kind_are_checked():
    kinds = {kind_of(load_yaml((SCENARIOS / name).read_text(encoding="utf-8"))) for name in SCENARIO_FILES}
    assert kinds == set(KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_data_schema_writes_the_schema_to_standard_output(kind):
    result = runner.invoke(app, ["data", "schema", kind])
    assert result.exit_code == 0, result.output
    assert result.stdout == schema_text(kind)
    assert json.loads(result.stdout)["title"].startswith("abm ")


def test_data_schema_writes_an_epidemic_scenarios_by_default_and_to_out(tmp_path, monkeypatch):
    """No KIND: the epidemic scenario's; --out FILE: written there (over a file that was there),
    one line said, nothing left beside it."""
    monkeypatch.chdir(tmp_path)
    assert runner.invoke(app, ["data", "schema"]).stdout == schema_text("epidemic")
    (tmp_path / "mine.json").write_text("old")
    result = runner.invoke(app, ["data", "schema", "learning", "--out", "mine.json"])
    assert result.exit_code == 0, result.output
    assert one_line(result.output) == "wrote the learning scenario schema to mine.json"
    assert (tmp_path / "mine.json").read_text(encoding="utf-8") == schema_text("learning")
    assert os.listdir(tmp_path) == ["mine.json"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["epidemics"],
            "error: KIND: 'epidemics' is not a kind of scenario file; give one of epidemic, learning, "
            "private_calibration",
        ),
        (["--out", "folder"], "error: --out folder: is a folder; give the path of the file to write"),
        (
            ["--out", "nowhere/s.json"],
            "error: --out nowhere/s.json: the folder nowhere does not exist; create it or give another file",
        ),
        (["--out", ""], "error: --out '': give a file name, not an empty value"),
    ],
)
def test_data_schema_refuses_bad_input_writing_nothing(tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder").mkdir()
    result = runner.invoke(app, ["data", "schema", *args])
    assert result.exit_code == 2
    assert one_line(result.output) == message
    assert "$schema" not in result.output  # no schema written, whole or in part
    assert sorted(os.listdir(tmp_path)) == ["folder"] and os.listdir(tmp_path / "folder") == []


def test_data_schema_leaves_the_file_as_it_was_when_the_disk_fails(tmp_path, monkeypatch):
    """A full disk as the file is written: exit code 1, the earlier file kept, nothing beside it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.json").write_text("earlier")

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Path, "write_text", full)
    result = runner.invoke(app, ["data", "schema", "--out", "s.json"])
    monkeypatch.undo()
    assert result.exit_code == 1
    assert one_line(result.output) == (
        f"error: --out s.json: cannot be written ({os.strerror(errno.ENOSPC)}); nothing was written"
    )
    assert os.listdir(tmp_path) == ["s.json"] and (tmp_path / "s.json").read_text() == "earlier"


def epidemic(**sections: Any) -> dict[str, Any]:
    """A small King County scenario (2,000 agents, 30 days) extending base.yaml, with ``sections``."""
    base = {"extends": str(KING_COUNTY / "base.yaml"), "population": {"agents": 2000}, "simulation": {"days": 30}}
    for key, value in sections.items():
        base[key] = {**base.get(key, {}), **value} if isinstance(value, dict) else value
    return base


LEARNING_BASE = {
    "name": "tiny",
    "data": {"source": "gaussian_mixture", "n_samples": 200, "n_classes": 2, "n_features": 4},
    "split": {"participants": 2},
    "rounds": 1,
    "protocols": [{"name": "fedavg"}],
}


def private_calibration(prior: dict[str, Any]) -> dict[str, Any]:
    """tests/private_calibration/tiny.yaml with its model scenario by its full path and ``prior``
    as its first institution's."""
    data = load_yaml((ROOT / "tests" / "private_calibration" / "tiny.yaml").read_text(encoding="utf-8"))
    data["model"]["scenario"] = str(KING_COUNTY / "calibrate_2020.yaml")
    data["institutions"][0]["prior"] = prior
    return data


# Scenarios `abm validate` refuses: the key path it names, and where the schema flags it.
REFUSED = [
    ("epidemic", {**epidemic(), "simulaton": {"days": 30}}, "simulaton", []),
    ("epidemic", epidemic(disease={"beta": 1.0}), "disease.beta", ["disease"]),
    ("epidemic", epidemic(interventions={"testng": {}}), "interventions.testng", ["interventions"]),
    ("epidemic", epidemic(simulation={"days": "30"}), "simulation.days", ["simulation", "days"]),
    ("epidemic", epidemic(simulation={"days": 0}), "simulation.days", ["simulation", "days"]),
    ("epidemic", epidemic(population={"kind": "census"}), "population.kind", ["population", "kind"]),
    (
        "epidemic",
        epidemic(interventions={"testing": {"start_day": -1}}),
        "interventions.testing.start_day",
        ["interventions", "testing", "start_day"],
    ),
    ("epidemic", epidemic(seeding={"day": "soon"}), "seeding.day", ["seeding", "day"]),
    ("epidemic", epidemic(seeding={"prior_immunity": 1.5}), "seeding.prior_immunity", ["seeding", "prior_immunity"]),
    (
        "epidemic",
        epidemic(seeding={"prior_immunity": [0.1] * 8}),
        "seeding.prior_immunity",
        ["seeding", "prior_immunity"],
    ),
    (  # a list replaces the base's whole: each of its items needs its required keys, extends or not
        "epidemic",
        epidemic(disease={"dwell_times": [{"to": "recovered", "distribution": "two_point", "mean": 3.0}]}),
        "disease.dwell_times[0]",
        ["disease", "dwell_times", 0],
    ),
    ("learning", {**LEARNING_BASE, "roundz": 2}, "roundz", []),
    *(  # a round of privacy.dropouts is a whole number (YAML's `2:` reaches the editor as "2")
        (
            "learning",
            {**LEARNING_BASE, "protocols": [{"name": "fedavg", "privacy": {"dropouts": {key: [1]}}}]},
            "protocols[0].privacy.dropouts",
            ["protocols", 0, "privacy", "dropouts"],
        )
        for key in ("two", -1)
    ),
    (
        "private_calibration",
        private_calibration({"transmision": [0.6, 1.0]}),
        "institutions[0].prior",
        ["institutions", 0, "prior"],
    ),
    (
        "learning",
        {**LEARNING_BASE, "protocols": [{"name": "fedavg", "params": {"server_lr": 0}}]},
        "protocols[0].params.server_lr",
        ["protocols", 0, "params", "server_lr"],
    ),
    (
        "learning",
        {**LEARNING_BASE, "protocols": [{"name": "fedavg", "params": {"lr": 0.1}}]},
        "protocols[0].params.lr",
        ["protocols", 0, "params"],
    ),
]


def written(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("kind", "data", "key", "where"), REFUSED, ids=[f"{case[2]}-{i}" for i, case in enumerate(REFUSED)]
)
def test_what_validate_refuses_the_schema_flags_at_its_key(tmp_path, kind, data, key, where):
    result = runner.invoke(app, ["validate", str(written(tmp_path, data))])
    assert result.exit_code == 2, result.output
    assert key in one_line(result.output)
    problems = schema_problems(kind, data)
    assert [path for path, _ in problems] == [where], problems
    if "Additional properties" in problems[0][1]:  # an unknown key: named by the schema's message
        assert repr(key.split(".")[-1]) in problems[0][1]


DWELL_TIMES = load_yaml((SCENARIOS / "reference" / "base.yaml").read_text(encoding="utf-8"))["disease"]["dwell_times"]


def by_own_name(dwell: dict[str, Any]) -> dict[str, Any]:
    """A dwell time with ``from`` written as ``from_stage``, its field's own name."""
    return {("from_stage" if key == "from" else key): value for key, value in dwell.items()}


# Scenarios `abm validate` accepts that a schema of the models alone would flag: keys the base
# file supplies, a day written as a date, a field by its other name.
ACCEPTED = {
    "base supplies the rest": epidemic(
        extends=str(KING_COUNTY / "calibrate_2020.yaml"),
        simulation={"days": 160},  # the calibration's windows
        calibration={"parameters": {"disease.transmission_rate": {"high": 5.0}}},
    ),
    "day as date": epidemic(
        simulation={"start_date": "2020-02-01"},
        seeding={"day": "2020-02-03"},
        outputs={"map_days": ["2020-02-10", 20]},
    ),
    "start date from the run's": epidemic(
        extends=str(KING_COUNTY / "calibrate_2020.yaml"),
        simulation={"days": 160, "start_date": "2020-02-01"},
        calibration={"start_date": None},
    ),
    "from_stage": epidemic(disease={"dwell_times": [by_own_name(DWELL_TIMES[0]), *DWELL_TIMES[1:]]}),
}


@pytest.mark.parametrize("data", ACCEPTED.values(), ids=list(ACCEPTED))
def test_what_validate_accepts_the_schema_accepts(tmp_path, data):
    result = runner.invoke(app, ["validate", str(written(tmp_path, data))])
    assert result.exit_code == 0, result.output
    assert schema_problems("epidemic", data) == []


def test_the_hover_text_is_the_references():
    """Each key's description, bounds, default and allowed values are those docs/scenarios.md shows."""
    schema = json_schema("epidemic", plugins=False)
    days = schema["definitions"]["SimulationConfig"]["properties"]["days"]
    assert days == {"default": 180, "description": "days simulated", "maximum": 10000, "minimum": 1, "type": "integer"}
    kind = schema["definitions"]["PopulationConfig"]["properties"]["kind"]
    assert kind["enum"] == ["region", "reference"] and kind["default"] == "region"
    assert schema["properties"]["simulation"]["description"] == (
        "days simulated, replicates, random seed, device and CPU threads"
    )
    # a section's heading is its key path, as docs/scenarios.md heads it, and its text the first
    # paragraph of its docstring there
    definitions = schema["definitions"]
    assert definitions["SimulationConfig"]["title"] == "simulation"
    assert definitions["DwellTime"]["title"] == "disease.dwell_times[]"
    assert definitions["ParameterRange"]["title"] == "calibration.parameters.<name>"
    reference = scenario_reference()
    for definition in definitions.values():
        text = f"\n\n{definition['description']}" if "description" in definition else ""
        assert f"## `{definition['title']}`{text}\n" in reference
    learning = json_schema("learning")["definitions"]
    assert learning["FedAvgConfig"]["title"] == "protocols[].params of fedavg"


def descriptions(node: Any) -> list[dict[str, Any]]:
    """Every schema below ``node`` that has a description (not a property named "description")."""
    if isinstance(node, list):
        return [found for item in node for found in descriptions(item)]
    if not isinstance(node, dict):
        return []
    own = [node] if isinstance(node.get("description"), str) else []
    return own + [
        found for key, value in node.items() if key not in ("default", "enum") for found in descriptions(value)
    ]


@pytest.mark.parametrize("kind", KINDS)
def test_the_hover_shows_code_as_code(kind):
    """yaml-language-server escapes a description's backticks (its hover showed ``key`` as typed);
    a description with code has a markdownDescription beside it, which it shows as Markdown."""
    described = descriptions(json.loads((SCENARIOS / FOLDER / file_name(kind)).read_text(encoding="utf-8")))
    with_code = [node for node in described if "`" in node["description"]]
    assert with_code and all("markdownDescription" in node for node in with_code)
    assert not [node for node in described if "`" not in node["description"] and "markdownDescription" in node]
    for node in with_code:
        markdown = node["markdownDescription"]
        assert "``" not in markdown and ":func:" not in markdown, markdown
        assert markdown.replace("\\", "").replace("`", "") == node["description"].replace("`", "").replace(":func:", "")


def test_a_markdown_description_keeps_its_prose_as_written():
    learning = json_schema("learning")["definitions"]
    assert learning["DPSpec"]["markdownDescription"] == (
        "Differential privacy on summed updates: give `noise_multiplier`, or a target `epsilon` (at `delta`) from "
        "which the accountant sets the multiplier for one release per round (fedavg and fedprox only; "
        "`abm.learning.privacy.noise_multiplier_for`)."
    )
    # Markdown syntax outside code is escaped: `embed_dim` as text, not the start of emphasis
    assert learning["ModelSpec"]["markdownDescription"].endswith("(channels, embed\\_dim).")
