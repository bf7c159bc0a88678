"""The example scenarios abm ships: the repository's ``scenarios/`` (king_county/, reference/,
learning/, and schemas/: their JSON Schemas for editors, :mod:`abm.scenario_schemas`), which a
checkout keeps at its root and the wheel carries as ``abm/example_scenarios/`` (setup.py's build
step copies them there); ``abm data scenarios`` copies them to a folder of the user's
(:mod:`abm.example_copy`).

This module imports nothing but the standard library: setup.py loads it by its path, before abm
can be imported, to select the files it copies (:func:`example_files`)."""

from __future__ import annotations

from pathlib import Path

SOURCE = "scenarios"  # the examples' folder at a checkout's root
PACKAGED = "example_scenarios"  # the examples' folder inside the installed package
SUFFIXES = (".yaml", ".md", ".json")  # the files of SOURCE that are examples (scenarios, notes on them, schemas/)
DEFAULT_DIR = Path(SOURCE)  # where `abm data scenarios` copies them: README's commands name scenarios/...


def example_files(folder: Path) -> list[str]:
    """The example files below ``folder``, as paths relative to it with ``/``
    (``king_county/base.yaml``), sorted: what the wheel carries and ``abm data scenarios`` copies."""
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.suffix in SUFFIXES and p.is_file())


def examples_folder() -> Path:
    """The folder of the example scenarios: the package's ``example_scenarios/`` where abm is
    installed from a wheel, else the checkout's ``scenarios/`` (abm run from a checkout, or
    installed from one with ``pip install -e``). FileNotFoundError where there is neither."""
    package = Path(__file__).resolve().parent
    for folder in (package / PACKAGED, package.parent / SOURCE):
        if folder.is_dir():
            return folder
    raise FileNotFoundError(
        f"abm's example scenarios are not installed (neither {package / PACKAGED} nor {package.parent / SOURCE} "
        "exists); install abm again from its wheel or a checkout"
    )
