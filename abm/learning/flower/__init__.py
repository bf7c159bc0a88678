"""The Flower runner: the protocols' round logic carried over Flower (``flwr``).

Two modes, picked by the scenario's ``runner`` key or ``abm learn --runner``:

* ``flower-sim``: Flower's simulation engine (Ray actors host the clients);
* ``flower``: a real deployment on loopback: a Flower server in this process and one client
  process per participant (``python -m abm.learning.flower.client``), connected over gRPC to
  127.0.0.1.

Both run the same server-side protocol code and the same client operations as the in-process
runner, so the same scenario and seed give the same scores (tests check this for FedAvg and
CoDream). Flower is an optional dependency (the ``flower`` extra; ``dev`` has it).

The runner (:func:`run_all_flower`, which needs torch) is imported on first use, so that
``abm validate`` checks that Flower is installed (:func:`import_flwr`) without it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from abm.learning.errors import LearningScenarioError

if TYPE_CHECKING:
    from abm.learning.flower.run import run_all_flower


def import_flwr() -> None:
    """Import Flower, or raise a scenario error (exit 2) with the install hint."""
    try:
        import flwr  # noqa: F401
    except ImportError as e:
        raise LearningScenarioError(
            "the Flower runners (flower-sim, flower) need flwr, which is not installed: "
            "pip install -e '.[flower]' in a checkout of abm, or pip install 'abm-epidemic[flower]' (flwr[simulation] "
            "1.41); or run with --runner inprocess"
        ) from e
    for name in ("flwr", "ray"):
        logging.getLogger(name).setLevel(logging.WARNING)


def __getattr__(name: str) -> Any:
    if name == "run_all_flower":
        from abm.learning.flower.run import run_all_flower

        return run_all_flower
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["import_flwr", "run_all_flower"]
