"""The Flower runner: the protocols' round logic carried over Flower (``flwr``).

Two modes, picked by the scenario's ``runner`` key or ``abm learn --runner``:

* ``flower-sim``: Flower's simulation engine (Ray actors host the clients);
* ``flower``: a real deployment on loopback: a Flower server in this process and one client
  process per participant (``python -m abm.learning.flower.client``), connected over gRPC to
  127.0.0.1.

Both run the same server-side protocol code and the same client operations as the in-process
runner, so the same scenario and seed give the same scores (tests check this for FedAvg and
CoDream). Flower is an optional dependency (the ``flower`` extra; ``dev`` has it).
"""

from __future__ import annotations

from abm.learning.flower.run import run_all_flower

__all__ = ["run_all_flower"]
