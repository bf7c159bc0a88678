"""abm.outputs.journal: what a long command keeps of its finished work, and what it says of the
file it finds (the sweep's and the calibration's use of it: test_sweep.py,
test_calibration_journal.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from abm.outputs.journal import Journal


def started(path: Path, notes: list[str], key: str = "this") -> Journal:
    """The journal of the work ``key`` at ``path``, its notes in ``notes``."""
    return Journal(path, key, "runs", notes.append)


def test_a_file_of_this_work_with_no_entry_is_taken_without_a_note(tmp_path):
    """A process killed before its first run finished leaves the header alone: the same work
    finds nothing to continue from and nothing of other work (it said "held the runs of other
    work (another scenario or abm version); replaced")."""
    path, notes = tmp_path / ".out.runs.jsonl", []
    started(path, notes)
    assert path.read_text() == json.dumps({"format": 2, "key": "this"}) + "\n"
    again = started(path, notes)
    assert notes == [] and (again.found, again.replaced, again.entries) == (0, False, [])
    assert path.read_text() == json.dumps({"format": 2, "key": "this"}) + "\n"


@pytest.mark.parametrize(
    "content",
    [
        json.dumps({"format": 1, "key": "another"}) + "\n" + json.dumps({"task": 0}) + "\n",
        json.dumps({"format": 1, "key": "another"}) + "\n",  # another work's, stopped before its first run
        json.dumps({"format": 1, "key": "this"}) + "\n" + json.dumps({"task": 0}) + "\n",  # an older abm's
        "",
        "not a journal\n",
    ],
    ids=["another_key", "another_key_no_entry", "another_format", "empty", "not_json"],
)
def test_a_file_of_other_work_or_none_is_replaced_with_a_note(tmp_path, content):
    """The note named only another scenario or abm version as the cause, though the same command
    with other options (a sweep rerun with other --replicates or --sweep values) is other work too:
    it now names other options, and says the kept work cannot be reused."""
    path, notes = tmp_path / ".out.runs.jsonl", []
    path.write_text(content)
    journal = started(path, notes)
    assert notes == [
        f"{path} held the runs of other work (another scenario, other options or other abm code), "
        "which this command cannot reuse; replaced"
    ]
    assert (journal.found, journal.replaced, journal.entries) == (0, True, [])
    assert path.read_text() == json.dumps({"format": 2, "key": "this"}) + "\n"


def test_a_line_that_is_not_text_ends_what_is_read(tmp_path):
    """Bytes that are not UTF-8 after the kept entries (a write cut short) end what is read, as a
    line cut short does; the entries before them are kept."""
    path, notes = tmp_path / ".out.runs.jsonl", []
    lines = [{"format": 2, "key": "this"}, {"key": "this", "task": 0}, {"key": "this", "task": 1}]
    cut = b'{"key": "this", "task": \xff\xfe2}\n{"key": "this", "task": 3}\n'
    path.write_bytes(b"".join(json.dumps(x).encode() + b"\n" for x in lines) + cut)
    journal = started(path, notes)
    assert journal.entries == [{"task": 0}, {"task": 1}] and not journal.replaced
    assert notes == [f"continuing an interrupted run: 2 finished runs are kept in {path}"]


def test_work_stopped_before_its_first_entry_leaves_no_file(tmp_path):
    """Stopped with nothing finished (Ctrl-C, a lost worker), the file goes, and nothing is said
    of it; stopped after a run finished, the file keeps it, and the command says so."""
    path, notes = tmp_path / ".out.runs.jsonl", []
    journal = started(path, notes)
    with pytest.raises(KeyboardInterrupt), journal.keeping(bad=(ValueError,)):
        raise KeyboardInterrupt
    assert not path.exists() and notes == []
    journal = started(path, notes)
    with pytest.raises(KeyboardInterrupt), journal.keeping(bad=(ValueError,)):
        journal.add({"task": 0})
        raise KeyboardInterrupt
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines == [{"format": 2, "key": "this"}, {"key": "this", "task": 0}]
    assert notes == [f"1 finished run is kept in {path}; the same command continues from it"]  # not "1 ... runs are"
    notes.clear()
    assert started(path, notes).found == 1
    assert notes == [f"continuing an interrupted run: 1 finished run is kept in {path}"]


def test_another_works_file_replaced_then_stopped_before_an_entry_is_gone(tmp_path):
    """The note said "replaced": the other work's file does not come back, and the next run of
    this work says nothing of it."""
    path, notes = tmp_path / ".out.runs.jsonl", []
    path.write_text(json.dumps({"format": 1, "key": "another"}) + "\n" + json.dumps({"task": 0}) + "\n")
    journal = started(path, notes)
    with pytest.raises(RuntimeError), journal.keeping(bad=(ValueError,)):
        raise RuntimeError("a worker was lost")
    assert not path.exists()
    assert notes == [
        f"{path} held the runs of other work (another scenario, other options or other abm code), "
        "which this command cannot reuse; replaced"
    ]


def test_a_file_that_cannot_be_read_is_left_as_it_is_when_the_work_stops(tmp_path):
    """A folder where the file would be: the work goes on without keeping (one note), and
    stopping touches nothing there."""
    path, notes = tmp_path / ".out.runs.jsonl", []
    path.mkdir()
    journal = started(path, notes)
    with pytest.raises(KeyboardInterrupt), journal.keeping(bad=(ValueError,)):
        raise KeyboardInterrupt
    assert path.is_dir() and len(notes) == 1 and notes[0].startswith(f"finished runs cannot be kept in {path} (")


def test_work_kept_in_new_folders_that_keeps_nothing_leaves_no_folder(tmp_path):
    """The file's folders are made for it (``--out new/deeper/sweep``); work that stops before
    anything is kept leaves none of them (they were left, empty). Work whose output was written
    there keeps them, with the output."""
    notes: list[str] = []
    journal = started(tmp_path / "new" / "deeper" / ".sweep.runs.jsonl", notes)
    with pytest.raises(KeyboardInterrupt), journal.keeping(bad=(ValueError,)):
        raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == [] and notes == []
    journal = started(tmp_path / "new" / "deeper" / ".sweep.runs.jsonl", notes)
    (tmp_path / "new" / "deeper" / "sweep").mkdir()  # the output, in place
    journal.remove()
    assert [p.name for p in (tmp_path / "new" / "deeper").iterdir()] == ["sweep"]


def test_runs_another_command_appends_to_the_same_file_are_not_taken(tmp_path):
    """Two commands keep their work in the same file at once (two sweeps of one scenario with other
    --sweep values, both to the default runs/NAME-sweep): the second replaced the first's file, and
    the first went on appending its runs to it, which the second, stopped and run again, took as
    its own (a run of the other sweep in its tables)."""
    path, notes = tmp_path / ".out.runs.jsonl", []
    first = started(path, notes, "first")
    second = started(path, notes, "second")  # replaces the first's file, with a note
    first.add({"task": 0, "result": "the first's"})
    second.add({"task": 1, "result": "the second's"})
    again = started(path, notes, "second")
    assert again.entries == [{"task": 1, "result": "the second's"}] and again.found == 1


def test_an_interrupt_as_the_file_is_rewritten_leaves_no_copy_beside_it(tmp_path, monkeypatch):
    """The file is written anew beside itself (``.out.runs.jsonl.PID.tmp``) and renamed into place
    as the command starts; Ctrl-C in between left that copy, hidden, for good (no later command
    removes it). Now only the file as it was is left."""
    path, notes = tmp_path / ".out.runs.jsonl", []
    started(path, notes).add({"task": 0})
    before = path.read_bytes()

    def interrupted(self, target):
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        started(path, notes)
    assert [p.name for p in tmp_path.iterdir()] == [path.name] and path.read_bytes() == before


def test_kept_work_belongs_to_the_code_that_did_it(tmp_path, monkeypatch):
    """abm's version stays 0.1.0 between development commits, so work kept by other code (a
    changed engine, a changed region figure) was reused as this code's. The key now hashes abm's
    code and data files: a change to one gives another key; compiled files and the map's script
    assets do not count."""
    from abm.outputs import journal

    root = tmp_path / "abm"
    (root / "engine").mkdir(parents=True)
    (root / "outputs" / "assets").mkdir(parents=True)
    (root / "engine" / "simulator.py").write_text("RATE = 1\n")
    (root / "figures.csv").write_text("tract,people\n1,10\n")
    monkeypatch.setattr(journal, "PACKAGE", root)

    def key() -> str:
        journal.code_fingerprint.cache_clear()
        return journal.work_key({"scenario": "s"})

    first = key()
    assert key() == first
    (root / "engine" / "__pycache__").mkdir()
    (root / "engine" / "__pycache__" / "simulator.cpython-311.pyc").write_bytes(b"\x00")
    (root / "outputs" / "assets" / "leaflet.js").write_text("x")
    assert key() == first
    (root / "figures.csv").write_text("tract,people\n1,11\n")
    changed = key()
    assert changed != first
    (root / "engine" / "simulator.py").write_text("RATE = 2\n")
    assert key() not in (first, changed)
    journal.code_fingerprint.cache_clear()


def test_a_checkout_in_a_folder_named_assets_still_hashes_its_code(tmp_path, monkeypatch):
    """Only the map's script assets inside abm are left out of the code's hash: a checkout that
    lies below a folder named ``assets`` (``~/assets/abm``) hashed none of its files, so kept work
    was reused by any code there, as before the hash."""
    from abm.outputs import journal

    root = tmp_path / "assets" / "abm"
    root.mkdir(parents=True)
    (root / "simulator.py").write_text("RATE = 1\n")
    monkeypatch.setattr(journal, "PACKAGE", root)

    def key() -> str:
        journal.code_fingerprint.cache_clear()
        return journal.work_key({"scenario": "s"})

    first = key()
    (root / "simulator.py").write_text("RATE = 2\n")
    assert key() != first
    journal.code_fingerprint.cache_clear()


def test_once_the_file_is_removed_a_failed_write_says_nothing_is_kept(tmp_path):
    """A sweep's result written twice from Python (``result.write(a)``, then ``result.write(b)``
    into a folder someone else holds): the first write removed the kept runs, yet the second's
    error said "1 finished run is kept in PATH; the same command continues from them" of a file
    no longer there. Now the error alone."""
    from abm.outputs.run_folder import OutputFolderError

    path, notes = tmp_path / ".out.runs.jsonl", []
    journal = started(path, notes)
    journal.add({"task": 0})
    journal.remove()
    assert not path.exists() and journal.continues() == ""
    with pytest.raises(OutputFolderError) as caught, journal.said_if_unwritten():
        raise OutputFolderError("output folder 'b': exists and was not written by abm")
    assert str(caught.value) == "output folder 'b': exists and was not written by abm" and notes == []


def test_what_the_same_command_continues_from_is_counted_in_words(tmp_path):
    """One kept run is "it" (the line said "1 finished run is kept in PATH; the same command
    continues from them")."""
    path, notes = tmp_path / ".out.runs.jsonl", []
    journal = started(path, notes)
    assert journal.continues() == ""
    journal.add({"task": 0})
    assert journal.continues() == f"1 finished run is kept in {path}; the same command continues from it"
    journal.add({"task": 1})
    assert journal.continues() == f"2 finished runs are kept in {path}; the same command continues from them"
