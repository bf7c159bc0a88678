"""The folders a local Ray leaves behind. A ``ray.init`` that starts Ray on this machine makes a
session folder in Ray's temporary folder (``/tmp/ray/session_<date>_<pid>``, or under
``$TMPDIR`` or ``$RAY_TMPDIR``: its logs, sockets and the ports it chose, about 200 kB) and
points ``session_latest`` there, and ``ray.shutdown`` leaves both: every ``--backend ray`` or
``--runner flower-sim`` command added one. Those of the Rays abm starts itself are removed once
Ray is shut down (:func:`ray_sessions_removed`); a Ray the caller started, or a cluster abm
joins, keeps its own."""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

SESSION_LATEST = "session_latest"  # Ray's link to the newest session folder


@contextlib.contextmanager
def ray_sessions_removed(ray: ModuleType) -> Iterator[None]:
    """Note the session folder of each local Ray that a ``ray.init`` in the block starts (here,
    or inside Flower's simulation), and remove it as the block ends, however it ends, once Ray
    is shut down (the block shuts it down; a Ray still running keeps its folder)."""
    init = ray.init
    folders: list[Path] = []

    @functools.wraps(init)
    def noting(*args: Any, **kwargs: Any) -> Any:
        joined = ray.is_initialized()  # ignore_reinit_error: the Ray this process already uses
        try:
            return init(*args, **kwargs)
        finally:
            folder = None if joined else local_session_folder(ray)
            if folder is not None:
                folders.append(folder)

    ray.init = noting
    try:
        yield
    finally:
        ray.init = init
        if not ray.is_initialized():
            for folder in folders:
                remove_session_folder(folder)


def local_session_folder(ray: ModuleType) -> Path | None:
    """The session folder of the Ray this process started on this machine (its head node), or
    None: not connected, connected to a cluster started elsewhere, or another Ray version."""
    node = getattr(getattr(getattr(ray, "_private", None), "worker", None), "_global_node", None)
    if node is None or not getattr(node, "head", False):
        return None
    try:
        return Path(node.get_session_dir_path())
    except Exception:  # pragma: no cover - another Ray version
        return None


def remove_session_folder(folder: Path) -> None:
    """Remove a shut-down Ray's session ``folder``, Ray's ``session_latest`` link where it points
    there, and Ray's temporary folder itself where nothing else is left in it."""
    shutil.rmtree(folder, ignore_errors=True)
    latest = folder.parent / SESSION_LATEST
    with contextlib.suppress(OSError):
        if os.readlink(latest) == str(folder):
            latest.unlink()
    with contextlib.suppress(OSError):
        folder.parent.rmdir()  # refused where another session, or anything else, is there
