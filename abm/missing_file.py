"""What a scenario path that names no file most likely meant: a file of a close name beside it
(``no_intervention.yml``, ``extends: vacc``), or, for a relative path given from another folder
than the repository's, the repository's file of that path (``abm run scenarios/...`` from
elsewhere), and where it names one of abm's example scenarios, the command that copies them
(``abm run scenarios/...`` where abm was installed from a wheel). Messages add these to "cannot
read the scenario file" and "extends: ... not found"."""

from __future__ import annotations

import shlex
from pathlib import Path

from abm.examples import DEFAULT_DIR, example_files, examples_folder
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
        return examples_hint(path)
    hint = f"; looked for in the working folder {Path.cwd()}"
    in_repository = REPOSITORY / path
    if in_repository.is_file() and Path.cwd().resolve() != REPOSITORY:
        hint += f"; the repository's is {in_repository}: run abm from {REPOSITORY}, or give that path"
    return hint + examples_hint(path)


def _free(folder: Path) -> bool:
    """Whether `abm data scenarios` would write ``folder`` without --force: it does not exist, or
    is an empty folder."""
    try:
        return not folder.exists() or (folder.is_dir() and not any(folder.iterdir()))
    except OSError:
        return False


def examples_hint(path: Path) -> str:
    """For a scenario file ``path`` that does not exist, beginning with "; ", the command that
    copies abm's example scenarios where ``path`` would find one (``scenarios/king_county/ni.yaml``:
    `abm data scenarios`; ``~/kc/king_county/ni.yaml``: `abm data scenarios ~/kc`), or to
    ``scenarios/`` for a relative path in ``scenarios/`` or a name an example has; empty where
    none applies, or where that folder is taken (the command would refuse it)."""
    try:
        names = example_files(examples_folder())
    except OSError:  # no examples installed: nothing to offer
        return ""
    parts = path.parts
    for k in range(1, len(parts)):
        if "/".join(parts[k:]) in names:
            folder = Path(*parts[:k])
            if not _free(folder):
                return ""
            if folder == DEFAULT_DIR:
                return "; `abm data scenarios` copies abm's example scenarios here, this one among them"
            command = f"abm data scenarios {shlex.quote(str(folder))}"
            return f"; `{command}` copies abm's example scenarios there, this one among them"
    if not _free(DEFAULT_DIR):
        return ""
    if not path.is_absolute() and parts[:1] == (DEFAULT_DIR.name,):
        return f"; `abm data scenarios` copies abm's example scenarios here (to {DEFAULT_DIR}/)"
    same_name = [f"{DEFAULT_DIR.as_posix()}/{name}" for name in names if name.rpartition("/")[2] == path.name]
    if same_name:
        return f"; abm's example scenarios hold {' and '.join(same_name)}: `abm data scenarios` copies them here"
    return ""
