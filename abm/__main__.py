"""``python -m abm`` and the ``abm`` console script run the ``abm`` command.

Ctrl-C (or SIGTERM) from here on, while the command line loads, ends the process with one line,
"interrupted while starting; nothing was run", and exit code 130 (143): this module puts that
handler in place before it imports anything else of abm's, and :func:`abm.entry.main` replaces it
with the command's own once that has loaded. Python's own start-up and the few lines of
``abm/__init__.py`` come first; a Ctrl-C there is Python's."""

# The interpreter's built-in signal module, loaded as it starts: the ``signal`` wrapper imports
# in 0.5 ms, during which a Ctrl-C was Python's (a traceback).
import _signal

# A signal that comes before abm.interrupts has loaded (0.4 ms) is noted, and acted on below.
_noted: list[int] = []
_signal.signal(_signal.SIGINT, lambda signum, frame: _noted.append(signum))
_signal.signal(_signal.SIGTERM, lambda signum, frame: _noted.append(signum))

from abm.interrupts import end_starting  # noqa: E402

_signal.signal(_signal.SIGINT, end_starting)
_signal.signal(_signal.SIGTERM, end_starting)
if _noted:  # after the handler is in place: a signal in between is not lost
    end_starting(_noted[0])

from abm.entry import main  # noqa: E402  (after the handler: this import is most of the start-up)

if __name__ == "__main__":
    main()
