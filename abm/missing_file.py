"""What a scenario path that names no file most likely meant: a file of a close name beside it
(``no_intervention.yml``, ``extends: vacc``), or, for a relative path given from another folder
than the repository's, the repository's file of that path (``abm run scenarios/...`` from
elsewhere). Messages add these to "cannot read the scenario file" and "extends: ... not found"."""

from __future__ import annotations

from pathlib import Path

from abm.validation_errors import likely_meant

# The folder that holds the package: a checkout's root, where scenarios/ is (an installed package's
# site-packages, which holds no scenarios/, so no file is ever suggested there).
REPOSITORY = Path(__file__).resolve().parents[1]
SCENARIO_SUFFIXES = (".yaml", ".yml")
# How a scenario reads a data file named by a relative path (abm.scenario.paths_beside), for the
# descriptions of the keys that name one.
RELATIVE_FILE = (
    "a relative path is read from the folder of the scenario file that names it where the file is there, "
    "else from the working folder"
)


def close_file(path: Path) -> Path | None:
    """The scenario file beside ``path`` that it most likely meant: the same name with a YAML
    suffix (``vacc`` for ``vacc.yaml``, ``.yml`` for ``.yaml``), or one whose name is at most two
    letters away (:func:`abm.validation_errors.likely_meant`); None where there is none, or where
    the folder cannot be listed."""
    folder = path.parent
    try:
        files = sorted(p for p in folder.iterdir() if p.suffix in SCENARIO_SUFFIXES and p.is_file() and p != path)
    except OSError:  # no such folder, or one that cannot be listed (no read permission): no guess
        return None
    stems = [p.stem for p in files]
    stem = path.stem if path.suffix in SCENARIO_SUFFIXES else path.name
    meant = stem if stem in stems else likely_meant(stem, stems)
    return files[stems.index(meant)] if meant is not None else None


def missing_file_hint(path: Path) -> str:
    """What to add to the message for a scenario file ``path`` that does not exist, beginning
    with "; " (empty where nothing applies): the file it most likely meant (:func:`close_file`),
    else, for a relative path, the working folder it was looked for in and the repository's file
    of that path where abm runs from another folder."""
    meant = close_file(path)
    if meant is not None:
        return f"; did you mean {str(meant)!r}?"
    if path.is_absolute():
        return ""
    hint = f"; looked for in the working folder {Path.cwd()}"
    in_repository = REPOSITORY / path
    if in_repository.is_file() and Path.cwd().resolve() != REPOSITORY:
        hint += f"; the repository's is {in_repository}: run abm from {REPOSITORY}, or give that path"
    return hint
