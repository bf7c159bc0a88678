"""What a long command has finished, kept on disk beside its output folder until the folder is
written, so that the command, stopped before its end (Ctrl-C, a lost worker, a killed process,
a power cut), continues from it when run again: a calibration's trials
(:mod:`abm.calibration.journal`), a sweep's runs (:func:`abm.sweep.run_sweep`).

The file, ``.<output folder name>.<kind>.jsonl``, holds a header line with a key naming what it
belongs to (a hash of the resolved work and of abm's code: :func:`code_fingerprint`) and one
JSON line per finished piece of work, appended and flushed as each finishes, with the same key:
a line of another key (two commands that keep their work in the same file at once, the second
having replaced the first's file, which the first goes on appending to) is not taken as this
work's. A file with another key (or one that is not such a file) is replaced, with a note; one
with this work's key and no piece yet (a process killed before its first piece finished) is
taken as it is, without one; a line cut short by a killed process ends what is read. A command
that stops before any piece has finished (Ctrl-C, a lost worker) leaves no file. Keeping never
stops the command: where the file cannot be written (a read-only folder, a full disk) the
command goes on without it and says so once.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from abm import __version__
from abm.outputs.run_folder import OutputFolderError, OutputWriteError, missing_folders, remove_empty
from abm.plurals import plural

FORMAT = 2  # 2: each entry's line carries the work's key (format 1's did not)


def journal_path(target: Path, kind: str) -> Path:
    """Where the finished ``kind`` (``trials``, ``runs``) of a command writing the folder
    ``target`` are kept while it works."""
    return target.parent / f".{target.name}.{kind}.jsonl"


PACKAGE = Path(__file__).resolve().parents[1]
"""abm's own folder, whose files :func:`code_fingerprint` hashes."""
CODE_SUFFIXES = (".py", ".yaml", ".csv", ".json")  # code, and the bundled regions' figures


@functools.cache
def code_fingerprint(root: Path) -> str:
    """A hash of the code and data files below ``root`` (their paths and contents; not compiled
    files or the map's script assets): kept work is reused only by the same code, since abm's
    version number stays the same between development commits."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        inside = path.relative_to(root)  # "assets" above root (a checkout in ~/assets/) leaves its files in
        if path.suffix in CODE_SUFFIXES and "assets" not in inside.parts and path.is_file():
            digest.update(f"{inside.as_posix()}\0".encode())
            digest.update(path.read_bytes())
            digest.update(b"\0")
    return digest.hexdigest()


def work_key(work: Any) -> str:
    """A key for the kept work of ``work`` (plain data: the resolved scenario and settings), this
    version of abm and its code (:func:`code_fingerprint`)."""
    text = json.dumps({"abm": __version__, "code": code_fingerprint(PACKAGE), "work": work}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


class Journal:
    """The finished pieces of one command's work (:mod:`abm.outputs.journal`), in ``entries``
    in the order they were kept; ``found`` of them were read from an earlier, stopped run of the
    same work; ``replaced``: the file was another work's, or not a journal (this work's, with no
    entry yet, is not replaced). ``what`` names the pieces in the plural (``runs``, ``trials``).
    ``warn`` is told of both, of a file that cannot be written, and of what is kept when the
    work stops (:meth:`keeping`)."""

    def __init__(self, path: Path, key: str, what: str, warn: Callable[[str], None] | None = None) -> None:
        self.path, self.key, self.what, self.warn = path, key, what, warn
        self.entries: list[dict[str, Any]] = []
        self.found = 0
        self.replaced = False
        self.writable = True  # False once a write failed: nothing more is kept
        self.made = missing_folders(path.parent)  # removed with the file, if nothing else is put there
        if path.exists():
            try:
                entries = self._read()
            except OSError as exc:
                self._failed(exc)
                return
            self.replaced = entries is None
            self.entries = entries or []
            self.found = len(self.entries)
        if warn is not None and self.found:
            warn(f"continuing an interrupted run: {self._kept(self.found)}")
        elif warn is not None and self.replaced:
            warn(
                f"{path} held the {what} of other work (another scenario, other options or other abm code), "
                "which this command cannot reuse; replaced"
            )
        self._rewrite()

    def _kept(self, n: int) -> str:
        """``3 finished runs are kept in PATH``, or ``1 finished run is kept in PATH``."""
        one = self.what.removesuffix("s")  # runs, trials
        return f"{n:,} finished {plural(one, n)} {'is' if n == 1 else 'are'} kept in {self.path}"

    def _failed(self, exc: OSError) -> None:
        """Keep no more (the command goes on), and say so once."""
        if self.writable and self.warn is not None:
            self.warn(
                f"finished {self.what} cannot be kept in {self.path} ({exc.strerror or exc}); the command goes on, "
                "but if it stops before its end it will start over"
            )
        self.writable = False

    def _read(self) -> list[dict[str, Any]] | None:
        """The file's entries (none, if it holds only the header), or None if it is not this
        work's: another key or format, or not a journal at all. Read as bytes, line by line, so
        that a line that is not text (a write cut short) ends what is read as any bad line does."""
        entries: list[dict[str, Any]] = []
        with self.path.open("rb") as f:
            try:
                header = json.loads(f.readline() or b"null")
            except ValueError:  # not JSON, or not text (UnicodeDecodeError is a ValueError)
                return None
            if not isinstance(header, dict) or header.get("key") != self.key or header.get("format") != FORMAT:
                return None
            for line in f:
                try:
                    entry = json.loads(line)
                except ValueError:
                    break
                if not isinstance(entry, dict):
                    break
                if entry.pop("key", None) == self.key:  # else another command's, appended meanwhile
                    entries.append(entry)
        return entries

    def _rewrite(self) -> None:
        """The file anew with the header and the entries kept (written aside, then renamed)."""
        if not self.writable:
            return
        tmp = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with tmp.open("w", encoding="utf-8") as f:
                f.write(json.dumps({"format": FORMAT, "key": self.key}) + "\n")
                for entry in self.entries:
                    f.write(self._line(entry))
            tmp.replace(self.path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            self._failed(exc)
        except BaseException:  # Ctrl-C as it is written: the file as it was, and no copy left beside it
            tmp.unlink(missing_ok=True)
            raise

    def _line(self, entry: dict[str, Any]) -> str:
        """The file's line for ``entry``: it, with this work's key."""
        return json.dumps({"key": self.key, **entry}) + "\n"

    def add(self, entry: dict[str, Any]) -> None:
        """Keep a finished piece (appended and flushed at once)."""
        self.entries.append(entry)
        if not self.writable:
            return
        try:
            with self.path.open("a", encoding="utf-8") as f:
                f.write(self._line(entry))
        except OSError as exc:
            self._failed(exc)

    def cut(self, n: int) -> None:
        """Keep the first ``n`` entries only."""
        if len(self.entries) > n:
            del self.entries[n:]
            self._rewrite()

    def continues(self) -> str:
        """What the same command continues from, ``3 finished runs are kept in PATH; the same
        command continues from them`` (``1 finished run is kept in PATH; ... from it``); empty
        where nothing is kept."""
        if not self.entries or not self.writable:
            return ""
        n = len(self.entries)
        return f"{self._kept(n)}; the same command continues from {'it' if n == 1 else 'them'}"

    @contextmanager
    def said_if_unwritten(self) -> Iterator[None]:
        """The command's work is done, its output not yet written: where that ends otherwise, the
        command says what it continues from (``3 finished runs are kept in PATH; the same command
        continues from them``), as :meth:`keeping` does while it works. An error that kept the
        folder from being written (:class:`OutputFolderError`: the folder was taken while the
        command worked; :class:`OutputWriteError`: a full disk) says it in its own message; Ctrl-C,
        or any other error, in a note before it."""
        try:
            yield
        except (OutputFolderError, OutputWriteError) as exc:
            said = self.continues()
            if not said:
                raise
            annotated = type(exc)(f"{exc}; {said}")
            if isinstance(exc, OSError):
                annotated.errno = exc.errno
            raise annotated from exc
        except BaseException:
            if self.continues() and self.warn is not None:
                self.warn(self.continues())
            raise

    @contextmanager
    def keeping(self, bad: tuple[type[Exception], ...]) -> Iterator[None]:
        """The command's work, kept as it goes: after a ``bad`` error (bad input, which would
        fail again) nothing is kept; after any other end (Ctrl-C, a lost worker) what was kept
        stays, and the command says so, unless nothing had finished: then the file goes too, so
        that the same command starts afresh without a word of it."""
        try:
            yield
        except bad:
            self.remove()
            raise
        except BaseException:
            if not self.entries and self.writable:
                self.remove()
            elif self.continues() and self.warn is not None:
                self.warn(self.continues())
            raise

    def remove(self) -> None:
        """The output is written, or nothing was kept (:meth:`keeping`): the file goes, and the folders
        made for it with it, unless something else lies in them (the output)."""
        try:
            self.path.unlink(missing_ok=True)
        except OSError as exc:  # the results are written; a file left behind is harmless
            self._failed(exc)
            return
        self.entries = []  # nothing is kept now: a later write that fails says none is (continues)
        remove_empty(self.made)
