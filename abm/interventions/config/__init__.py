"""The built-in interventions as a scenario names them: each one's settings (pydantic models),
its place in the day and the checks and notes ``abm validate`` gives on them, registered by
name. Pydantic and the standard library only, no torch: loading and checking a scenario does
not load the engine. Each class names the subclass that runs it (``runner_path``), in the
intervention's module of :mod:`abm.interventions` (contact multipliers, which need no torch,
are one module there)."""

from abm.interventions.config import (  # noqa: F401  (registers the built-in interventions)
    digital_tracing,
    manual_tracing,
    quarantine,
    testing,
    vaccination,
)
