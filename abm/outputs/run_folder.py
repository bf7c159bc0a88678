"""Writing an output folder atomically: everything goes to a hidden sibling folder that is
renamed into place at the end, so a failed or interrupted run leaves no half-written results and
an earlier output of the same name stays intact until the new one is complete.

Only a folder that abm wrote is ever replaced: :func:`check_target` refuses a file, the working
folder or one of its parents, a non-empty folder without abm's mark, an abm folder to which
something was added since abm wrote it, or in which a file abm wrote was changed since (the mark
lists what abm wrote, with each file's SHA-256), a folder inside an abm folder (it would be such
an addition), and an abm folder of another kind (a comparison is not
written over a run), before anything runs. It also refuses what the final rename could not
replace: a symbolic link (the link would be replaced, not the folder it names), a mount point, an
earlier output that is read-only, and a name too long for the staging folder's."""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import re
import secrets
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

from abm.interrupts import interrupted, results_written

MARK = ".abm-output"  # written into every output folder, with the names of what abm wrote there
MARK_TEXT = "written by abm; an abm command may replace this folder. Its entries:\n"
DIGEST = "sha256: "  # starts a mark's line ``sha256: <hex digest> <file>``: a file's content as abm wrote it


class OutputFolderError(ValueError):
    """An output path that cannot be written without losing something; the message is for the user."""


class OutputWriteError(OSError):
    """The file system failed while an output folder was written (a full disk, a quota, a rename
    that another process raced): nothing was put in place, an earlier output is kept. The message
    is for the user; ``errno`` is the failure's."""


def _write_error(target: Path, tmp: Path, exc: OSError, earlier: bool) -> OutputWriteError:
    """The :class:`OutputWriteError` for ``exc``, naming ``target``, the cause and the file (by its
    name in the output where it lay in the staging folder ``tmp``)."""
    name = str(exc.filename) if exc.filename is not None else ""
    if name and Path(name).is_relative_to(tmp):
        name = str(Path(name).relative_to(tmp)) if Path(name) != tmp else ""
    cause = (exc.strerror or str(exc)) + (f": {name}" if name else "")
    kept = "; the earlier output there is kept" if earlier else ""
    error = OutputWriteError(f"output folder {str(target)!r}: writing failed ({cause}); nothing was written{kept}")
    error.errno = exc.errno
    return error


def is_output_folder(folder: Path) -> bool:
    """Whether ``folder`` is an output folder abm wrote (it holds abm's mark)."""
    return (folder / MARK).is_file()


def not_written(target: str | Path) -> str:
    """What a command that ends without its output folder ``target`` says of it: ``no results
    were written to runs/sq``; where ``target`` holds an earlier output of abm, which stays as it
    was (:func:`atomic_folder` replaces it only with a complete one), ``no results were written;
    the earlier results in runs/sq are kept``."""
    try:
        earlier = is_output_folder(Path(target))
    except OSError:  # cannot be looked at (no permission): nothing is said of it
        earlier = False
    if earlier:
        return f"no results were written; the earlier results in {target} are kept"
    return f"no results were written to {target}"


@contextlib.contextmanager
def unwritten_said(target: Path) -> Iterator[None]:
    """Around the writing of ``target`` once the command's work is done: an
    :class:`OutputFolderError` (the folder, checked before the work, was taken meanwhile) says
    too that no results were written (:func:`not_written`), as `abm run` says it."""
    try:
        yield
    except OutputFolderError as exc:
        raise OutputFolderError(f"{exc}; {not_written(target)}") from exc


KINDS = {  # the kinds of output folder, as messages name them
    "run": "a run",
    "comparison": "a comparison",
    "sweep": "a sweep",
    "calibration": "a calibration",
    "learning": "a learning report",
    "private_calibration": "a private-calibration report",
}


def _mark_lines(folder: Path) -> list[str]:
    lines = (folder / MARK).read_text(encoding="utf-8").splitlines()
    return lines if lines and lines[0] + "\n" == MARK_TEXT else []


def _entries(folder: Path) -> list[str]:
    """Every entry under ``folder`` but its mark, subfolders' entries included, as paths relative
    to it with ``/`` (``plots``, ``plots/map_day050.png``), sorted: what a mark lists."""
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p != folder / MARK)


def written_entries(folder: Path) -> list[str]:
    """The entries abm wrote into an abm output folder, as its mark lists them (paths relative to
    it, ``plots/map_day050.png``); none when the mark predates the list of entries."""
    return [line.strip() for line in _mark_lines(folder)[1:] if line.startswith("  ")]


def added_entries(folder: Path) -> list[str]:
    """Entries of an abm output folder that abm did not write there, as paths relative to it
    (none when its mark predates the list of entries). A subfolder's entries are checked too
    (a file added to ``plots/`` is found), unless the mark lists the subfolder without any of
    its entries, as marks did before they listed subfolders' entries."""
    if not _mark_lines(folder):
        return []
    written = set(written_entries(folder))
    added: list[str] = []

    def walk(current: Path, prefix: str) -> None:
        for path in current.iterdir():
            name = prefix + path.name
            if name not in written:
                if name != MARK:
                    added.append(name)
            elif path.is_dir() and not path.is_symlink() and any(w.startswith(name + "/") for w in written):
                walk(path, name + "/")

    walk(folder, "")
    return sorted(added)


def _digest(path: Path) -> str:
    """The SHA-256 of a file's content, in hex (a run folder of 2 MB with maps takes about 4 ms)."""
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _digest_lines(folder: Path, entries: list[str]) -> str:
    """The mark's lines recording the content of the files among ``entries`` of ``folder``."""
    files = [name for name in entries if (folder / name).is_file() and not (folder / name).is_symlink()]
    return "".join(f"{DIGEST}{_digest(folder / name)} {name}\n" for name in files)


def edited_files(folder: Path) -> list[str]:
    """Files of an abm output folder that were changed since abm wrote them (their content is not
    what the mark records, or cannot be read to tell), or replaced by something else, as paths
    relative to it, sorted (none when the mark predates the record of contents). A file touched
    but not changed is no edit, and a file removed loses nothing."""
    edited = []
    for line in _mark_lines(folder)[1:]:
        if not line.startswith(DIGEST):
            continue
        digest, name = line.removeprefix(DIGEST).split(" ", 1)
        path = folder / name
        if path.is_symlink() or (path.exists() and not (path.is_file() and _same(path, digest))):
            edited.append(name)
    return sorted(edited)


def _same(path: Path, digest: str) -> bool:
    """Whether the file ``path`` holds content of SHA-256 ``digest`` (False where it cannot be read)."""
    try:
        return _digest(path) == digest
    except OSError:
        return False


def folder_kind(folder: Path) -> str | None:
    """What an abm output folder holds (``run``, ``comparison``, ...; None for a mark that
    predates kinds)."""
    kinds = [line.removeprefix("kind: ") for line in _mark_lines(folder) if line.startswith("kind: ")]
    return kinds[0] if kinds else None


def output_path(value: object, argument: str = "output folder") -> Path:
    """An output path as given (``--out``; from Python, named ``argument`` in messages: ``out``)
    as a Path; :class:`OutputFolderError` for an empty value, which Path would read as the working
    folder and a message would name ``'.'``, and for anything but a text or a path (a number, None:
    a ``TypeError`` from deep inside :mod:`pathlib` else)."""
    if not isinstance(value, str | os.PathLike):
        raise OutputFolderError(f"{argument}: {value!r} is not allowed; give a path (a str or a pathlib.Path)")
    if str(value) == "":
        raise OutputFolderError(f"{argument} '': give a folder name, not an empty value")
    return Path(value)


def check_target(target: str | Path, kind: str | None = None, *, replace_any: bool = False) -> Path:
    """``target`` as a Path if an output of ``kind`` (:data:`KINDS`) can be written there;
    otherwise :class:`OutputFolderError` naming the path and why. Called before a run starts, and
    again by :func:`atomic_folder`. ``replace_any``: a folder of the user's may be replaced (the
    caller was told to, as `abm data scenarios --force` is, and puts its entries in the new one),
    but not an output abm wrote."""
    target = output_path(target)
    where = f"output folder {str(target)!r}"
    if target.name in ("", ".", ".."):
        raise OutputFolderError(f"{where}: give a folder name, not {target.name or str(target)!r}")
    if target.is_symlink():  # the rename would replace the link, and leave the folder it names as it was
        raise OutputFolderError(
            f"{where}: is a symbolic link (to {os.readlink(target)!r}), which abm would replace with a folder; "
            "give the folder it points to, or a new folder"
        )
    resolved, here = target.resolve(), Path.cwd().resolve()
    if resolved == here or resolved in here.parents:
        raise OutputFolderError(f"{where}: is the working folder or one of its parents; give a new folder")
    if target.exists() and not target.is_dir():
        raise OutputFolderError(f"{where}: is a file; give a folder path (an output is a folder)")
    holder = next((p for p in resolved.parents if is_output_folder(p)), None)
    if holder is not None:
        raise OutputFolderError(
            f"{where}: lies inside {str(holder)!r}, which holds {KINDS.get(folder_kind(holder) or '', 'an output')} "
            "abm wrote (an abm folder is replaced whole, and one with added or changed entries is never replaced); "
            "give a folder outside it"
        )
    if replace_any and target.is_dir() and is_output_folder(target):
        raise OutputFolderError(
            f"{where}: holds {KINDS.get(folder_kind(target) or '', 'an output')} abm wrote, which this would be "
            "written into; give another folder"
        )
    if not replace_any and target.is_dir() and any(target.iterdir()) and not is_output_folder(target):
        raise OutputFolderError(
            f"{where}: exists and was not written by abm, so it would be replaced with everything in it; "
            "give a new folder, or remove this one yourself"
        )
    if target.is_dir() and is_output_folder(target):
        added, edited = added_entries(target), edited_files(target)
        kept = [f"{added}, which abm did not write"] if added else []
        kept += [f"{edited}, which changed since abm wrote them"] if edited else []
        if kept:
            raise OutputFolderError(
                f"{where}: holds {', and '.join(kept)}; replacing the folder would lose them: move them out, "
                "or give a new folder, or remove this one yourself"
            )
    old = folder_kind(target) if target.is_dir() and is_output_folder(target) else None
    if kind is not None and old is not None and old != kind:
        raise OutputFolderError(
            f"{where}: holds {KINDS.get(old, old)}, which {KINDS[kind]} would replace; give a new folder, "
            "or remove this one yourself"
        )
    if target.is_dir() and os.path.ismount(target):
        raise OutputFolderError(
            f"{where}: is a mount point, which cannot be replaced (abm writes an output beside it and renames it "
            "into place); give a folder inside it"
        )
    blocked = _read_only(target) if target.is_dir() and (replace_any or is_output_folder(target)) else None
    if blocked is not None:
        raise OutputFolderError(
            f"{where}: holds {'a folder' if replace_any else 'an earlier output'} that cannot be removed "
            f"(no permission to write in {str(blocked)!r}); make it writable (chmod -R u+w), or give a new folder"
        )
    parent = target.parent
    while not parent.exists():
        parent = parent.parent
    # The file system's limit is in bytes: a name of accented letters takes two or more per character.
    size = len(os.fsencode(target.name))
    longest = len(os.fsencode(_staging_name(target))) + len("-old")
    try:
        limit = os.pathconf(parent, "PC_NAME_MAX")
    except (OSError, ValueError):  # pragma: no cover - a platform or file system that does not say
        limit = 255
    if longest > limit:
        length = f"{len(target.name)} characters" + (f", {size} bytes" if size != len(target.name) else "")
        raise OutputFolderError(
            f"{where}: the name is too long ({length}; abm writes the output under a name {longest - size} "
            f"bytes longer beside it, and names here take at most {limit} bytes); give a shorter name"
        )
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise OutputFolderError(f"{where}: cannot write in {str(parent.absolute())!r} (no permission or not a folder)")
    # Permissions do not tell everything (a read-only mount, /proc, a full disk): try it, under a
    # name known before it is made, so that an interrupt (Ctrl-C) between making and removing it
    # leaves nothing behind.
    probe = parent / f".abm-probe-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        os.mkdir(probe)
        os.rmdir(probe)
    except OSError as exc:
        raise OutputFolderError(
            f"{where}: cannot write in {str(parent.absolute())!r} ({exc.strerror or exc})"
        ) from None
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(probe)
    return target


def _staging_prefix(target: Path) -> str:
    """The start of the names of the hidden folders beside ``target`` that processes of this
    machine write it in (the process id follows)."""
    return f".{target.name}.partial-{socket.gethostname().replace('-', '_')}-"


def _staging_name(target: Path) -> str:
    """The name of the hidden folder beside ``target`` that this process writes it in."""
    return f"{_staging_prefix(target)}{os.getpid()}"


def unfinished_write(folder: Path) -> str | None:
    """For a hidden folder in which abm writes an output (``.NAME.partial-HOST-PID``, whose mark
    lists nothing yet: the write has not finished), a message saying so: the process is still
    writing NAME, or it was killed (a SIGKILL, which leaves the folder for the next write of NAME
    to remove); None for any other folder."""
    match = re.fullmatch(r"\.(.+)\.partial-[^-]+-(\d+)", folder.name)
    if match is None or not is_output_folder(folder) or _mark_lines(folder) != [MARK_TEXT.rstrip("\n")]:
        return None
    name, pid = match.groups()
    if _running(pid):
        return f"is the hidden folder in which abm (process {pid}) is writing {name}; give {name} once it has finished"
    return (
        f"is the hidden folder of a write of {name} that did not finish (its process was killed): it may lack "
        f"files or hold them cut short; run it again"
    )


def _read_only(folder: Path) -> Path | None:
    """A folder in ``folder`` (itself included) whose entries this process may not remove, or None."""
    for here, _dirs, _files in os.walk(folder):
        if not os.access(here, os.W_OK | os.X_OK):
            return Path(here)
    return None


def _running(pid: str) -> bool:
    """Whether the process ``pid`` (text) exists; False for text that is not a process id."""
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, run by another user
        return True
    return True


def missing_folders(folder: Path) -> list[Path]:
    """``folder`` and the folders above it that do not exist (yet), deepest first."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def remove_empty(folders: list[Path]) -> None:
    """Remove ``folders`` (deepest first, as :func:`missing_folders` gives them) that a command
    made for an output it did not write, up to the first that holds something (another's)."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


@contextlib.contextmanager
def atomic_folder(
    target: Path, kind: str | None = None, *, mark: bool = True, replace_any: bool = False
) -> Iterator[Path]:
    """Yield a temporary folder; on success it replaces ``target``, on any error it is removed,
    with the folders above it made for it (``--out new/runs/a``: ``new`` and ``new/runs``).
    Its mark records ``kind`` (:data:`KINDS`), so that another kind of output does not replace it;
    ``mark=False`` writes none (a folder for the user to edit, as `abm data scenarios` writes,
    which is no output). ``replace_any``: see :func:`check_target`.
    A failure of the file system (a full disk, ...) is raised as :class:`OutputWriteError`."""
    target = check_target(target, kind, replace_any=replace_any)
    made = missing_folders(target.parent)
    try:
        yield from _write_in_place(target, kind, mark)
    except BaseException:
        remove_empty(made)
        raise


def _write_in_place(target: Path, kind: str | None, mark: bool = True) -> Iterator[Path]:
    """:func:`atomic_folder`'s work, once ``target`` is checked."""
    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in target.parent.glob(f"{glob.escape(_staging_prefix(target))}*"):
        pid = stale.name.removesuffix("-old").rsplit("-", 1)[-1]
        if not _running(pid):  # left by a process of this machine that was killed
            shutil.rmtree(stale, ignore_errors=True)
    tmp = target.parent / _staging_name(target)
    earlier = target.is_dir()
    try:
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
        if mark:
            (tmp / MARK).write_text(MARK_TEXT, encoding="utf-8")
        yield tmp
        if interrupted() is not None:  # an interrupt that a library swallowed: the folder is not complete
            raise KeyboardInterrupt
        if mark:
            entries = _entries(tmp)
            (tmp / MARK).write_text(
                MARK_TEXT
                + "".join(f"  {name}\n" for name in entries)
                + _digest_lines(tmp, entries)
                + (f"kind: {kind}\n" if kind else ""),
                encoding="utf-8",
            )
    except OSError as exc:  # the file system failed (a full disk, ...): said as such, not as a crash
        shutil.rmtree(tmp, ignore_errors=True)
        if interrupted() is not None:  # an interrupt that a library turned into this error
            raise
        raise _write_error(target, tmp, exc, earlier) from exc
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        _swap(tmp, target, target.parent / f"{tmp.name}-old")
    except OSError as exc:  # another process put a folder there meanwhile, say
        if interrupted() is not None:
            raise
        raise _write_error(target, tmp, exc, earlier) from exc


def _swap(new: Path, target: Path, old: Path) -> None:
    """Put folder ``new`` in place of ``target``, whose earlier content goes to ``old`` and is then
    removed. An interrupt (or error) before ``new`` is in place puts the earlier folder back and
    removes ``new``; one after is let go, as the output is then complete: the command's output is
    marked written (:func:`abm.interrupts.results_written`) at once, so that the console script
    ignores an interrupt from there on, through whatever the command does after the write
    (removing what a sweep or calibration kept: it would else say "no results were written" of
    results in place). What is left of ``old``, named like a staging folder, is removed by the
    next write once this process has ended."""
    try:
        if target.exists():
            target.rename(old)
        new.rename(target)
        results_written()
    except BaseException:
        if new.exists():  # not in place
            if old.exists() and not target.exists():
                old.rename(target)
            shutil.rmtree(new, ignore_errors=True)
            raise
    with contextlib.suppress(KeyboardInterrupt):
        shutil.rmtree(old, ignore_errors=True)
