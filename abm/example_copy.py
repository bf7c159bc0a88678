"""``abm data scenarios``: the example scenarios (:mod:`abm.examples`) copied to a folder of the
user's, keeping their layout, so that ``extends:`` and ``../king_county/...`` still find their
files; written all at once, as abm writes its output folders."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from abm.examples import example_files, examples_folder
from abm.outputs.run_folder import OutputFolderError, atomic_folder, check_target


@dataclass(frozen=True)
class CopiedExamples:
    """What :func:`copy_examples` wrote: the folder, the example files (relative paths, sorted),
    and, where it wrote over a folder that held files (``force``), the examples there whose
    content it changed and the files of the folder that are no examples, which it kept."""

    folder: Path
    files: list[str]
    overwritten: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)


def _files_below(folder: Path) -> list[str]:
    """Every file below ``folder`` (links included), as paths relative to it with ``/``, sorted."""
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() or p.is_symlink())


def _differs(path: Path, other: Path) -> bool:
    """Whether file ``path`` holds other content than ``other`` (True where it cannot be read)."""
    try:
        return path.read_bytes() != other.read_bytes()
    except OSError:
        return True


def copy_examples(target: Path, force: bool = False) -> CopiedExamples:
    """Copy the example scenarios into the folder ``target``, keeping their layout, all at once:
    they are written beside it and the folder is renamed into place
    (:func:`abm.outputs.run_folder.atomic_folder`), so that a failure or an interrupt writes
    nothing. A ``target`` that exists and is not empty is refused (``OutputFolderError``) unless
    ``force``, which writes the examples over the files of their names and keeps the folder's
    other files; an output folder of abm's is refused either way."""
    source = examples_folder()
    files = example_files(source)
    try:
        there = sorted(p.name for p in target.iterdir()) if target.is_dir() and not target.is_symlink() else []
        if there and not force:
            shown = ", ".join(there[:3]) + (f" and {len(there) - 3} more" if len(there) > 3 else "")
            raise OutputFolderError(
                f"{str(target)!r} exists and is not empty ({shown}); abm data scenarios writes into a new or empty "
                "folder: give another folder, or --force to write the examples over the files of their names there "
                "(its other files are kept)"
            )
        target = check_target(target, replace_any=force)
        earlier = _files_below(target) if force and target.is_dir() else []
    except PermissionError as exc:
        raise OutputFolderError(f"{str(target)!r}: cannot be read ({exc.strerror or exc})") from None
    overwritten = [name for name in files if name in earlier and _differs(target / name, source / name)]
    with atomic_folder(target, mark=False, replace_any=force) as tmp:
        if target.is_dir():
            shutil.copytree(target, tmp, symlinks=True, dirs_exist_ok=True)
        for name in files:
            copy = tmp / name
            if copy.is_symlink() or copy.is_file():  # the folder's own: replaced (a link not written through)
                copy.unlink()
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / name, copy)
    kept = [name for name in earlier if name not in files]
    return CopiedExamples(target, files, overwritten, kept)
