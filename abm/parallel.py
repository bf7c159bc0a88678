"""Running tasks on Ray: one way to connect for every command that offers ``--backend ray``."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType


@contextmanager
def ray_session(address: str | None, error: type[Exception]) -> Iterator[ModuleType]:
    """The ``ray`` module, connected: to the Ray instance this process already uses, else to
    ``address`` (or ``RAY_ADDRESS``), else to a local instance started here and shut down on
    exit. A missing Ray raises ``error`` with the install hint."""
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - ray is in the dev extra
        raise error("--backend ray: Ray is not installed; pip install 'abm-epidemic[ray]'") from exc
    started = not ray.is_initialized()
    if started:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
    try:
        yield ray
    finally:
        if started:
            ray.shutdown()


def check_ray_device(device: str, where: str, error: type[Exception]) -> None:
    """Ray shows a task only the GPU it assigns, as ``cuda``: a numbered device (``cuda:1``)
    would fail in every task, so it is refused before Ray starts (``where`` names the scenario)."""
    if device.startswith("cuda:"):
        raise error(
            f"{where}: simulation.device: {device!r} is not allowed with --backend ray: Ray assigns the GPUs; use cuda"
        )
