"""Errors raised by the learning package."""

from __future__ import annotations


class LearningScenarioError(ValueError):
    """A learning scenario is invalid.

    The message names the file, the key path, the bad value and what is allowed.
    """


class SecureAggregationError(RuntimeError):
    """A secure-aggregation round could not be completed (a survivor did not answer the recovery
    request for a dropped participant's masks, or a vector outside the fixed-point range reached
    the masking, which the participant's own check keeps from happening)."""


class FlowerRunError(RuntimeError):
    """A Flower run could not go on: a client process went away or ended, a client operation
    raised, a client did not answer a request in time (the scenario's ``flower_timeout``), or the
    clients did not all connect in time. ``abm learn`` says it in one line and exits with code 1."""
