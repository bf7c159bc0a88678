"""The session folders of the Rays abm starts (abm.ray_sessions): removed once Ray is shut down,
however the command ends; those of a Ray the caller started, or a cluster abm joins, are kept."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import fixed_seeds_note

from abm.ray_sessions import SESSION_LATEST, ray_sessions_removed

SCENARIO = Path("scenarios/king_county/no_intervention.yaml").resolve()


class FakeRay:
    """What abm.ray_sessions uses of the ``ray`` module: ``init`` makes a session folder under
    ``temp`` with a log in it and points ``session_latest`` there, as Ray does; the node is a
    head node unless it joins a cluster (``address="cluster"``); ``shutdown`` leaves the folder."""

    def __init__(self, temp: Path) -> None:
        self.temp = temp
        self.started = 0
        self._private = SimpleNamespace(worker=SimpleNamespace(_global_node=None))

    def is_initialized(self) -> bool:
        return self._private.worker._global_node is not None

    def init(self, address: str | None = None) -> None:
        if self.is_initialized():
            return
        self.started += 1
        folder = self.temp / f"session_{self.started}"
        (folder / "logs").mkdir(parents=True)
        (folder / "logs" / "raylet.out").write_text("started\n")
        latest = self.temp / SESSION_LATEST
        latest.unlink(missing_ok=True)
        latest.symlink_to(folder)
        node = SimpleNamespace(head=address != "cluster", get_session_dir_path=lambda: str(folder))
        self._private.worker._global_node = node

    def shutdown(self) -> None:
        self._private.worker._global_node = None


def test_the_session_folder_of_a_ray_started_in_the_block_goes_once_it_is_shut_down(tmp_path):
    temp = tmp_path / "ray"
    ray = FakeRay(temp)
    with pytest.raises(KeyboardInterrupt), ray_sessions_removed(ray):  # however the block ends
        ray.init()
        ray.shutdown()
        raise KeyboardInterrupt
    assert not temp.exists()  # Ray's temporary folder too, left empty
    # Another session's folder stays (session_2, started before), and so does session_latest
    # where it points at another (session_2 again: another process's Ray started meanwhile).
    ray.init()
    ray.shutdown()
    with ray_sessions_removed(ray):
        ray.init()
        ray.shutdown()
        (temp / SESSION_LATEST).unlink()
        (temp / SESSION_LATEST).symlink_to(temp / "session_2")
    assert sorted(p.name for p in temp.iterdir()) == ["session_2", SESSION_LATEST]
    assert os.readlink(temp / SESSION_LATEST) == str(temp / "session_2")


@pytest.mark.parametrize("whose", ["running_at_the_end", "callers", "cluster"])
def test_a_session_folder_that_is_not_abms_to_remove_stays(tmp_path, whose):
    """A Ray still running as the block ends (not shut down there), the caller's Ray (started
    before the block; ray.init then joins it), and a cluster's (no head node here)."""
    temp = tmp_path / "ray"
    ray = FakeRay(temp)
    if whose == "callers":
        ray.init()
    with ray_sessions_removed(ray):
        ray.init(address="cluster" if whose == "cluster" else None)
        if whose != "running_at_the_end":
            ray.shutdown()
    assert (temp / "session_1" / "logs" / "raylet.out").is_file()
    assert ray.init.__self__ is ray  # ray.init is Ray's own again


@pytest.mark.slow  # starting a local Ray takes about 20 s on 2 cores
def test_a_sweep_on_the_ray_it_starts_leaves_no_session_folder(ray_temp):
    """`abm sweep --backend ray` (here from Python) left Ray's session folder (logs, sockets,
    about 200 kB) in /tmp/ray, one more for each command; now its temporary folder is empty after
    it. (A failed and an interrupted one: tests/test_sweep.py, tests/test_parallel.py.)"""
    pytest.importorskip("ray")
    from abm.sweep import run_sweep

    with fixed_seeds_note():
        sweep = ["contacts.community.weight=0.3"]
        result = run_sweep(SCENARIO, sweep, replicates=1, backend="ray", agents=1000, days=5)
    assert len(result.table) == 1
    assert list(ray_temp.iterdir()) == []
