"""Reading a learning or private-calibration scenario file as plain data, apart from the
schema (:mod:`abm.learning.scenario`), so that a command tells what kind of scenario a file is
(``abm validate``, ``abm run``) without loading the learning package's checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from abm.learning.errors import LearningScenarioError
from abm.missing_file import missing_file_hint
from abm.validation_errors import TOP_LEVEL
from abm.yaml_loader import load_yaml, yaml_error_text


def read_yaml(path: str | Path) -> dict[str, Any]:
    """A learning or private-calibration scenario file's top-level mapping; an unreadable file,
    invalid YAML or a top level that is not a mapping raise one clear LearningScenarioError."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError as e:
        hint = missing_file_hint(Path(path))
        raise LearningScenarioError(f"{source}: cannot read the file: {e.strerror}{hint}") from e
    except OSError as e:
        raise LearningScenarioError(f"{source}: cannot read the file: {e.strerror}") from e
    except UnicodeDecodeError:
        raise LearningScenarioError(f"{source}: not a text file (a YAML scenario is UTF-8 text)") from None
    try:
        data = load_yaml(text)
    except yaml.YAMLError as e:
        raise LearningScenarioError(f"{source}: {yaml_error_text(e)}") from e
    if not isinstance(data, dict):
        raise LearningScenarioError(f"{source}: {TOP_LEVEL}: expected a mapping of keys")
    return data
