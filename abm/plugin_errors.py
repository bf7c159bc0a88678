"""The errors of an installed plug-in (one that cannot be loaded, one whose code fails in a run), in
a module of its own so that the command line can catch them without importing the engine's
libraries."""

from __future__ import annotations


class PluginError(ImportError):
    """A plug-in (an ``abm.interventions`` entry point) cannot be loaded or is not an
    intervention. The message is meant for the user as is."""


class PluginFailure(Exception):
    """An exception raised by an installed plug-in's own code, in ``attach`` or a daily hook (a
    defect of the plug-in, not bad input). ``plugin`` is its scenario key (the entry point's
    name), ``hook`` ``attach``, ``hooks()`` or the phase and the hook (``TRANSMISSION hook
    (Masks.apply)``), ``day`` the simulated day (None before day 0), ``error`` the exception's type and message
    (``ValueError: ...``) and ``details`` its traceback from the plug-in's call down, as text, so
    that it survives a worker process (the exception itself is the ``__cause__`` where it was
    raised). ``run`` names the run it failed in where a command runs several (a sweep's variant
    and replicate, a calibration's trial: :meth:`in_run`); None for a command's only run.
    ``str()`` is the one line ``abm run`` prints."""

    def __init__(
        self, plugin: str, hook: str, day: int | None, error: str, details: str, run: str | None = None
    ) -> None:
        super().__init__(plugin, hook, day, error, details, run)  # all of them: a worker process pickles its args
        self.plugin, self.hook, self.day, self.error, self.details = plugin, hook, day, error, details
        self.run = run

    def __str__(self) -> str:
        where = f"{self.hook}, before day 0" if self.day is None else f"its {self.hook} on day {self.day}"
        if self.run:
            where = f"{self.run}, in {where}"
        return f"the plug-in {self.plugin!r} failed in {where}: {self.error}"

    def in_run(self, run: str) -> PluginFailure:
        """The same failure, named as one of ``run`` (``variant 1 (masks.day=3), replicate 0 (seed
        1234)``), which its line then names before the hook."""
        return PluginFailure(self.plugin, self.hook, self.day, self.error, self.details, run)

    @classmethod
    def of(cls, plugin: str, hook: str, day: int | None, exc: BaseException) -> PluginFailure:
        """The failure of ``exc``, caught where abm called the plug-in: its traceback from the
        plug-in's frame down (the frame that caught it, abm's, left out)."""
        import traceback

        tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
        details = "".join(traceback.format_exception(type(exc), exc, tb))
        message = str(exc).strip()
        first = message.splitlines()[0] + " ..." if "\n" in message else message
        error = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
        return cls(plugin, hook, day, error, details)
