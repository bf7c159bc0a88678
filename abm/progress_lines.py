"""Progress told in plain lines, for stderr that is no terminal (a log file, a pipe, a batch job's
output), where the commands' progress bars do not show.

:class:`LogLines` is the one place that decides what a command says there and when:

- Nothing in its first :data:`QUIET_S` seconds: a command that ends within them writes no
  progress lines at all.
- A stage (``building the population``, ``simulating the days``, ``writing files``) is named as
  it starts, with the time so far: ``simulating the days (18 s so far)``; a stage begun within
  the first :data:`QUIET_S` seconds and still under way then is named at that moment (a timer
  thread), one begun and ended within them not at all.
- A loop's steps (a run's days, a sweep's runs, a protocol's rounds) get a line at most every
  :data:`EVERY_S` seconds (from its first step on) and every :data:`SHARE` of the loop,
  whichever is less often, with the time so far and the time left (:class:`Pace`): a loop
  shorter than :data:`EVERY_S` seconds writes none; one that wrote any ends with a line.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable

QUIET_S = 5.0  # nothing said in a command's first seconds (a short run says nothing)
EVERY_S = 30.0  # at most a line a loop in this many seconds ...
SHARE = 0.1  # ... and for each tenth of the loop

WINDOW = 10  # steps whose pace gives the time left
SLOWER = 1.1  # the last WINDOW steps this much slower than the WINDOW before: the steps are slowing


def clock(seconds: float) -> str:
    """A duration as people read it: 45 s, 3 min 5 s, 2 h 10 min."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


class Pace:
    """The time since it was made (or since ``start``, a time of ``now``) and, from the pace of
    the last 10 steps, about how long is left: ``2 min 10 s, about 5 min left``.

    With ``slowing`` (the plural of steps that may keep taking longer, such as a run's ``days``,
    which take longer as the infections grow), a time left from steps that are slowing, the last 10
    taking at least 10% longer than the 10 before them, is given as what it then is, a lower
    bound: ``2 min 10 s, at least 5 min left: days slowing down``."""

    def __init__(
        self, slowing: str | None = None, now: Callable[[], float] | None = None, start: float | None = None
    ) -> None:
        self.now = now if now is not None else time.monotonic
        self.slowing = slowing
        self.start = self.now() if start is None else start  # the time so far counts from here
        self.recent: deque[tuple[int, float]] = deque(maxlen=2 * WINDOW + 1)

    def mark(self, done: int) -> float:
        """``done`` steps are finished now (the pace counts every step, told or not); returns now."""
        now = self.now()
        self.recent.append((done, now))
        return now

    def restart(self, done: int) -> None:
        """The ``done`` steps so far were not run here (kept ones, told at once): the pace counts
        from now, as it counts from its first step (a continued sweep tells its kept runs as one)."""
        self.recent.clear()
        self.mark(done)

    def slower(self) -> bool:
        """Whether the last :data:`WINDOW` steps took at least :data:`SLOWER` times as long each as
        the :data:`WINDOW` before them (both spans of at least 2 steps)."""
        marks = list(self.recent)
        if len(marks) <= WINDOW + 2:
            return False
        (old, t_old), (mid, t_mid), (done, now) = marks[0], marks[-WINDOW - 1], marks[-1]
        if mid - old < 2 or done - mid < 2:
            return False
        return (now - t_mid) / (done - mid) >= SLOWER * (t_mid - t_old) / (mid - old)

    def __call__(self, done: int, total: int) -> str:
        """The text for ``done`` of ``total`` steps finished now."""
        now = self.mark(done)
        text = clock(now - self.start)
        (first, then) = self.recent[max(0, len(self.recent) - WINDOW - 1)]
        if done - first >= 2 and done < total:
            left = clock((now - then) / (done - first) * (total - done))
            if self.slowing and self.slower():
                text += f", at least {left} left: {self.slowing} slowing down"
            else:
                text += f", about {left} left"
        return text


def call_later(seconds: float, action: Callable[[], None]) -> Callable[[], None]:
    """Run ``action`` in ``seconds`` on a daemon thread; returns what cancels it."""
    timer = threading.Timer(seconds, action)
    timer.daemon = True
    timer.start()
    return timer.cancel


class LogLines:
    """A command's progress as plain lines, each given to ``write`` (the module's rules: quiet
    for :data:`QUIET_S` seconds from its making, then a line per stage as it starts and a line
    per :data:`SHARE` of a loop, at most every :data:`EVERY_S` seconds). ``now`` and ``later``
    (which runs a function after a delay and returns what cancels it) stand in for the clock and
    the timer thread in tests. :meth:`close` ends it: nothing is said after."""

    def __init__(
        self,
        write: Callable[[str], None],
        now: Callable[[], float] | None = None,
        later: Callable[[float, Callable[[], None]], Callable[[], None]] = call_later,
    ) -> None:
        self.write, self.later = write, later
        self.now = now if now is not None else time.monotonic
        self.quiet_s, self.every_s, self.share = QUIET_S, EVERY_S, SHARE  # read now: tests set them
        self.start = self.now()
        self.pending: str | None = None  # a stage begun in the quiet seconds, not yet said
        self.cancel: Callable[[], None] | None = None
        self.closed = False
        self.lock = threading.RLock()

    def quiet(self) -> bool:
        """Whether the command is still in its quiet first seconds."""
        return self.now() - self.start < self.quiet_s

    def say(self, text: str) -> None:
        """Write ``text``, after the line of the stage it is in where that is not said yet."""
        with self.lock:
            if not self.closed:
                self.said_stage()
                self.write(text)

    def said_stage(self) -> None:
        """The stage under way, begun in the quiet seconds, is said now (if not yet said); the
        timer calls this as the quiet seconds end."""
        with self.lock:
            if self.pending is not None and not self.closed:
                stage, self.pending = self.pending, None
                self.write(f"{stage} ({clock(self.now() - self.start)} so far)")

    def stage(self, text: str) -> None:
        """The command starts the stage ``text``: said now, or once the quiet seconds are over if
        it is still the stage then."""
        with self.lock:
            if not self.quiet():
                self.pending = None
                self.say(f"{text} ({clock(self.now() - self.start)} so far)")
                return
            self.pending = text
            if self.cancel is None:
                self.cancel = self.later(self.start + self.quiet_s - self.now(), self.said_stage)

    def counter(self, unit: str, slowing: bool = False) -> Callable[[int, int], None]:
        """A progress callback ``(done, total)`` for a loop of ``unit`` (days, runs, a protocol's
        name): ``days: 18 of 180 done (1 min 2 s, about 9 min left)`` where the rules allow, the
        time so far counted from the command's start as in the stages' lines (with ``slowing``,
        the steps may keep taking longer: :class:`Pace`)."""
        pace = Pace(unit if slowing else None, self.now, self.start)
        # the steps last said, and when: the loop's first step until a line is said
        said: dict[str, float] = {"done": 0, "at": math.nan, "any": False}

        def show(done: int, total: int) -> None:
            now = pace.now()
            if math.isnan(said["at"]):
                said["at"] = now
            if done == total:
                due = said["any"] and done != said["done"]
            else:
                due = (
                    not self.quiet()
                    and done - said["done"] >= math.ceil(total * self.share)
                    and now - said["at"] >= self.every_s
                )
            if not due:
                pace.mark(done)
                return
            said.update(done=done, at=now, any=True)
            self.say(f"{unit}: {done} of {total} done ({pace(done, total)})")

        return show

    def close(self) -> None:
        """Nothing more is said (a stage still waiting for the quiet seconds to end included)."""
        with self.lock:
            self.closed = True
            if self.cancel is not None:
                self.cancel()
