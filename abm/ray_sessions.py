"""The folders a local Ray leaves behind. A ``ray.init`` that starts Ray on this machine makes a
session folder in Ray's temporary folder (``/tmp/ray/session_<date>_<pid>``, or under
``$TMPDIR`` or ``$RAY_TMPDIR``: its logs, sockets and the ports it chose, about 200 kB) and
points ``session_latest`` there, and ``ray.shutdown`` leaves both: every ``--backend ray`` or
``--runner flower-sim`` command added one. Those of the Rays abm starts itself are removed once
Ray is shut down (:func:`ray_sessions_removed`); a Ray the caller started, or a cluster abm
joins, keeps its own.

A local Ray's sockets are files in its session folder, and a socket's path may have at most
107 bytes (103 on macOS): under a long ``$TMPDIR`` Ray failed to start with its own error
(exit 1). :func:`check_socket_paths` refuses that before Ray starts, naming the variable."""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

SESSION_LATEST = "session_latest"  # Ray's link to the newest session folder
SUGGESTED_TMPDIR = "/tmp/ray"  # a short folder for RAY_TMPDIR
# Ray's session folder: session_<%Y-%m-%d_%H-%M-%S_%f>_<pid of the process that starts Ray>
SESSION_DATE = "0000-00-00_00-00-00_000000"
LONGEST_SOCKET = "plasma_store"  # the longest name of the sockets Ray makes there ("raylet", ...)


def ray_temp_variable(environ: Mapping[str, str], platform: str) -> tuple[str, str] | None:
    """The environment variable that places a local Ray's folder and its value, as Ray reads them:
    ``RAY_TMPDIR``, else on Linux ``TMPDIR``; None where Ray uses ``/tmp`` (or on Windows, the
    system's temporary folder)."""
    for name in ("RAY_TMPDIR", "TMPDIR"):
        if name in environ and (name == "RAY_TMPDIR" or platform.startswith("linux")):
            return name, environ[name]
    return None


def socket_path_limit(platform: str) -> int | None:
    """The most bytes Ray allows a socket's path (the system's AF_UNIX limit less its terminating
    NUL), or None on Windows, where Ray uses TCP instead."""
    if platform == "win32":
        return None
    return 103 if platform.startswith("darwin") else 107


def check_socket_paths(
    error: type[Exception],
    backend: str,
    environ: Mapping[str, str] = os.environ,
    platform: str = sys.platform,
) -> None:
    """Raise ``error``, its message naming the choice of Ray as the caller gave it (``backend``),
    where a local Ray started by this process would have socket paths longer than the system
    allows: its temporary folder (:func:`ray_temp_variable`) is too long. Nothing else is checked
    (Ray reports a folder it cannot write)."""
    limit = socket_path_limit(platform)
    found = ray_temp_variable(environ, platform)
    if limit is None or found is None:
        return
    name, value = found
    session = f"session_{SESSION_DATE}_{os.getpid()}"
    longest = os.path.join(os.path.expanduser(value), "ray", session, "sockets", LONGEST_SOCKET)
    over = len(longest.encode()) - limit
    if over <= 0:
        return
    size = len(value.encode())
    raise error(
        f"{backend}: {name} is {size} bytes long ({value}), too long for a local Ray: the paths of its "
        f"sockets there would have {limit + over} bytes, over the {limit} a socket's path may have; set "
        f"RAY_TMPDIR to a folder of at most {size - over} bytes, such as RAY_TMPDIR={SUGGESTED_TMPDIR}"
    )


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
