"""``--backend ray`` under a long temporary folder (TMPDIR, RAY_TMPDIR): a local Ray's socket
paths there exceed the 107 bytes of an AF_UNIX path, and Ray failed to start (exit 1, Ray's
error, its folder left behind). Now one message naming the variable, exit 2, before Ray starts."""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

import pytest
from conftest import tiny_calibration, tiny_learning
from typer.testing import CliRunner

from abm.cli import app
from abm.ray_sessions import check_socket_paths

SCENARIO = Path("scenarios/king_county/no_intervention.yaml").resolve()
runner = CliRunner()

# <folder>/ray/session_<26 characters of date and time>_<pid>/sockets/plasma_store, Ray's longest
ROOM = 107 - len("/ray/session_") - 26 - len(f"_{os.getpid()}/sockets/plasma_store")


def folder(size: int) -> str:
    """A folder path of ``size`` bytes."""
    return ("/scratch/" + "j" * size)[:size]


def refusal(error: type[Exception], environ: dict[str, str], platform: str = "linux") -> str | None:
    try:
        check_socket_paths(error, "--backend ray", environ, platform)
    except error as exc:
        return str(exc)
    return None


def test_the_longest_folder_a_local_ray_can_use_passes_and_one_byte_more_is_refused():
    assert 35 <= ROOM <= 42  # "over about 40 characters"
    assert refusal(ValueError, {"TMPDIR": folder(ROOM)}) is None
    long = folder(ROOM + 1)
    assert refusal(ValueError, {"TMPDIR": long}) == (
        f"--backend ray: TMPDIR is {ROOM + 1} bytes long ({long}), too long for a local Ray: the paths of its "
        f"sockets there would have 108 bytes, over the 107 a socket's path may have; set RAY_TMPDIR to a folder "
        f"of at most {ROOM} bytes, such as RAY_TMPDIR=/tmp/ray"
    )


def test_the_variable_ray_reads_is_the_one_checked_and_named():
    short, long = folder(10), folder(70)
    assert refusal(ValueError, {"TMPDIR": long, "RAY_TMPDIR": short}) is None  # RAY_TMPDIR wins
    named = refusal(ValueError, {"TMPDIR": short, "RAY_TMPDIR": long})
    assert named.startswith("--backend ray: RAY_TMPDIR is 70 bytes")
    assert refusal(ValueError, {}) is None  # /tmp
    # macOS: Ray ignores TMPDIR, and a socket's path has at most 103 bytes; Windows: no sockets
    assert refusal(ValueError, {"TMPDIR": long}, "darwin") is None
    assert "over the 103 a socket's path may have" in refusal(ValueError, {"RAY_TMPDIR": long}, "darwin")
    assert refusal(ValueError, {"RAY_TMPDIR": long}, "win32") is None


@pytest.fixture
def long_tmpdir(monkeypatch, tmp_path) -> str:
    """TMPDIR too long for a local Ray, no RAY_TMPDIR or RAY_ADDRESS, and a ``ray`` module that
    fails the test if it is started."""
    long = str(tmp_path / ("t" * ROOM))
    monkeypatch.setenv("TMPDIR", long)
    monkeypatch.delenv("RAY_TMPDIR", raising=False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)

    def init(*args: object, **kwargs: object) -> None:
        raise AssertionError("Ray was started")

    fake = types.ModuleType("ray")
    fake.is_initialized = lambda: False
    fake.init = init
    monkeypatch.setitem(sys.modules, "ray", fake)
    return long


def refused(result, long: str) -> bool:
    flat = " ".join(result.output.split())
    expected = f"error: --backend ray: TMPDIR is {len(long)} bytes long ({long}), too long for a local Ray"
    return result.exit_code == 2 and expected in flat and flat.count("error:") == 1 and "RAY_TMPDIR=/tmp/ray" in flat


def test_sweep_with_ray_under_a_long_tmpdir_is_refused_before_ray_starts(long_tmpdir, tmp_path):
    out = tmp_path / "sweep"
    args = ["sweep", str(SCENARIO), "--sweep", "simulation.days=5", "--backend", "ray", "--out", str(out)]
    result = runner.invoke(app, args)
    assert refused(result, long_tmpdir), result.output
    assert not out.exists()


def test_calibrate_with_ray_under_a_long_tmpdir_is_refused_before_ray_starts(long_tmpdir, tmp_path):
    path = tiny_calibration(tmp_path, trials=2, rerank_trials=0)
    out = tmp_path / "out"
    result = runner.invoke(app, ["calibrate", str(path), "--backend", "ray", "--out", str(out)])
    assert refused(result, long_tmpdir), result.output
    assert not out.exists()


def test_learn_on_flower_sim_under_a_long_tmpdir_is_refused_before_ray_starts(long_tmpdir, tmp_path):
    """``abm learn --runner flower-sim`` starts a local Ray in Flower's simulation engine, which
    did not check the temporary folder: Ray's own crash. Now the same refusal as ``--backend
    ray``'s, naming the file and the runner: exit 2, nothing written, Ray never started."""
    pytest.importorskip("flwr")
    path = tiny_learning(tmp_path)
    out = tmp_path / "out"
    result = runner.invoke(app, ["learn", str(path), "--runner", "flower-sim", "--out", str(out)])
    flat = " ".join(result.output.split())
    expected = (
        f"error: {path} (with --runner flower-sim): runner flower-sim: TMPDIR is {len(long_tmpdir)} bytes long "
        f"({long_tmpdir}), too long for a local Ray"
    )
    assert result.exit_code == 2 and expected in flat and flat.count("error:") == 1, result.output
    assert "set RAY_TMPDIR to a folder of at most" in flat and "RAY_TMPDIR=/tmp/ray" in flat
    assert not out.exists()
