"""docs/tutorial.md's claims that a test can check cheaply: the scenario its step 1 writes names
its schema on its first line, as the examples do, and is valid, to `abm validate` and to that
schema; the note its step 2 quotes is the one abm prints at 20,000 agents."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import jsonschema
from typer.testing import CliRunner

from abm.cli import app
from abm.scenario_schemas import MODELINE
from abm.yaml_loader import load_yaml

ROOT = Path(__file__).resolve().parents[1]
TUTORIAL = (ROOT / "docs" / "tutorial.md").read_text(encoding="utf-8")
runner = CliRunner()


def one_line(text: str) -> str:
    """Text with its line breaks and runs of spaces (a paragraph's, rich's wrapping) undone."""
    return " ".join(text.split())


def test_the_tutorials_scenario_names_its_schema_and_is_valid(tmp_path):
    """Step 1's file had no `# yaml-language-server:` line: an editor gave it no schema, though
    docs/editors.md says that a scenario of one's own gets the examples' first line."""
    block = re.search(r"```yaml\n(.*?)```", TUTORIAL, re.S).group(1)
    modeline, where = block.splitlines()[:2]
    assert modeline == MODELINE.format(kind="epidemic")
    for folder in ("king_county", "schemas"):  # the file is saved beside the examples it extends
        shutil.copytree(ROOT / "scenarios" / folder, tmp_path / "scenarios" / folder)
    path = tmp_path / where.removeprefix("# ")
    assert path.parent == tmp_path / "scenarios" / "king_county" and not path.exists()
    path.write_text(block, encoding="utf-8")
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    schema = json.loads((path.parent / modeline.split("$schema=")[1]).read_text(encoding="utf-8"))
    jsonschema.Draft7Validator(schema).validate(load_yaml(block))


def test_the_note_that_step_2_quotes_is_the_one_abm_prints():
    """Step 2's runs at 20,000 agents each print a note on the seeding that the tutorial did not
    mention; `abm validate` gives the same note as `abm run`, without a run."""
    quoted = re.search(r"Each run first prints a note: `(note: [^`]*)`", one_line(TUTORIAL)).group(1)
    ni = ROOT / "scenarios" / "king_county" / "ni.yaml"
    result = runner.invoke(app, ["validate", str(ni), "--set", "population.agents=20000"])
    assert result.exit_code == 0 and quoted in one_line(result.output), result.output
