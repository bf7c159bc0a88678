"""How far a learning run is, for whoever listens: the ``abm learn`` command shows it (a bar per
protocol and a line when each ends); the library itself prints nothing.

Work reports with :func:`step` (a label such as a protocol's name, units done, units in all, and
a note for the end), and says what starts that takes a while with :func:`say` (heard as a step
with an empty label); :func:`listening` sets the listener for a block. The listener is a plain
module-level value, not a context variable, so that Flower's server threads reach it too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

Listener = Callable[[str, int, int, str], None]

_listener: Listener | None = None


def step(label: str, done: int, total: int, note: str = "") -> None:
    """``done`` of ``total`` units of ``label`` are finished (``note``: what to say when all are)."""
    if _listener is not None:
        _listener(label, done, total, note)


def say(text: str) -> None:
    """A line for whoever listens, before work that shows no steps for a while (Flower's start):
    heard as a step with an empty label, 0 of 0 units, and ``text`` as its note."""
    step("", 0, 0, text)


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """``listener`` hears every :func:`step` in the block (the one before is restored after)."""
    global _listener
    before, _listener = _listener, listener
    try:
        yield
    finally:
        _listener = before
