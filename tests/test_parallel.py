"""Trials and sweep runs in worker processes (``--workers``): the same results as one at a time,
errors that read as in this process, and no worker left behind after an error or Ctrl-C."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from conftest import assert_marked_end, caller_ray, command_line, marked_processes, tiny_calibration
from typer.testing import CliRunner

from abm.calibration.optimize import trial_runner
from abm.cli import app
from abm.parallel import ProcessPool, WorkerLost, in_order, workers_record
from abm.scenario import ScenarioError, validate
from abm.sweep import SweepTask, run_local

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()
TIMINGS = ["datetime_start", "datetime_complete", "duration"]  # Optuna's columns of when a trial ran


def assert_group_ends(pgid: int, seconds: float = 10) -> None:
    """Every process of the group ``pgid`` (a command started in its own session) is gone within
    ``seconds``."""
    assert_ends(os.killpg, pgid, seconds, "a process of the command's group is still running")


def assert_ends(signal_to: Callable[[int, int], None], ident: int, seconds: float, still: str) -> None:
    """The process (or group) ``ident`` that ``signal_to`` (os.kill, os.killpg) reaches is gone
    within ``seconds``; else fails with ``still``."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            signal_to(ident, 0)
        except ProcessLookupError:
            return
        assert time.monotonic() < deadline, still
        time.sleep(0.1)


def wait_for_line(child: subprocess.Popen[str], start: str, seconds: float = 300) -> None:
    """Read the child's stderr until a line that begins with ``start`` (e.g. ``trial 1 of 40
    done``: the workers run); fail, with what it printed, if none came within ``seconds`` (the
    child's group is killed then) or the child ended first."""
    assert child.stderr is not None
    watchdog = threading.Timer(seconds, os.killpg, (child.pid, signal.SIGKILL))
    watchdog.start()
    seen = []
    try:
        for line in child.stderr:
            if line.startswith(start):
                return
            seen.append(line)
    finally:
        watchdog.cancel()
    raise AssertionError(f"no line {start!r} within {seconds:g} s; the command printed:\n{''.join(seen)}")


def calibrate_cli(path: Path, out: Path, *options: str) -> tuple[pd.DataFrame, dict]:
    result = runner.invoke(app, ["calibrate", str(path), "--out", str(out), *options])
    assert result.exit_code == 0, result.output
    return pd.read_csv(out / "trials.csv"), json.loads((out / "calibration.json").read_text())


def test_the_workers_recorded_are_those_that_could_run_at_once():
    """At most the workers asked, the tasks, and on Ray the CPUs; runs on cuda take a GPU each, so
    a sweep of 8 cuda runs on a Ray cluster of 16 CPUs and 1 GPU ran them one at a time (it said
    8); its CPU runs still fill the CPUs beside the one GPU run."""
    assert workers_record(4, 10) == {"workers": 4}
    assert workers_record(4, 3) == {"workers": 3}
    assert workers_record(8, 8, cpus=2) == {"workers": 2, "ray_cpus": 2}
    assert workers_record(8, 8, cpus=16, gpu_tasks=8, gpus=1) == {"workers": 1, "ray_cpus": 16, "ray_gpus": 1}
    assert workers_record(8, 8, cpus=16, gpu_tasks=8, gpus=2) == {"workers": 2, "ray_cpus": 16, "ray_gpus": 2}
    assert workers_record(12, 12, cpus=16, gpu_tasks=4, gpus=1) == {"workers": 9, "ray_cpus": 16, "ray_gpus": 1}
    assert workers_record(12, 12, cpus=4, gpu_tasks=4, gpus=1)["workers"] == 4


def test_results_come_back_in_index_order():
    assert list(in_order([(2, "c"), (0, "a"), (3, "d"), (1, "b")])) == ["a", "b", "c", "d"]


def test_calibration_trials_do_not_depend_on_the_number_of_workers(tmp_path):
    """14 trials in batches of 4 (parallel_trials' default), run in this process (--workers 1)
    and in 2 worker processes: the same trials, losses, re-ranking and calibrated scenario, up to
    when they ran. The batch itself does matter: asked one at a time, TPE's trials after its 10
    random ones are others."""
    path = tiny_calibration(tmp_path)
    one, one_summary = calibrate_cli(path, tmp_path / "w1", "--workers", "1")
    two, two_summary = calibrate_cli(path, tmp_path / "w2", "--workers", "2")
    assert one.drop(columns=TIMINGS).to_csv(index=False) == two.drop(columns=TIMINGS).to_csv(index=False)
    assert len(one) == 14 and one["rerank_loss_fit"].notna().sum() == 2
    assert (tmp_path / "w1" / "calibrated.yaml").read_bytes() == (tmp_path / "w2" / "calibrated.yaml").read_bytes()
    assert (one_summary["parallel_trials"], one_summary["workers"]) == (4, 1)
    assert (two_summary["parallel_trials"], two_summary["workers"]) == (4, 2)
    for summary in (one_summary, two_summary):
        del summary["seconds"], summary["workers"]
    assert one_summary == two_summary
    single, _ = calibrate_cli(path, tmp_path / "p1", "--workers", "1", "--set", "calibration.parallel_trials=1")
    rate = "params_disease.transmission_rate"
    assert single[rate].iloc[:10].tolist() == one[rate].iloc[:10].tolist()
    assert (single[rate].iloc[10:].to_numpy() != one[rate].iloc[10:].to_numpy()).all()


def test_calibration_json_records_the_trials_that_could_run_at_once(tmp_path):
    """--workers 8 with a batch of 2 trials (2 trials, parallel_trials 4): at most 2 ran at once,
    and calibration.json said 8; now 2."""
    path = tiny_calibration(tmp_path, trials=2, rerank_trials=0)
    _, summary = calibrate_cli(path, tmp_path / "out", "--workers", "8")
    assert summary["workers"] == 2 and "ray_cpus" not in summary


def test_calibration_json_records_the_re_ranked_batch_that_ran_at_once():
    """--workers 3, trials in batches of 2 (parallel_trials 2), then the 4 best re-ranked in one
    batch: the re-ranking ran 3 at once, and calibration.json said 2 (the trials' batch).
    calibration.json records what the trial runner gives (the test above); its worker processes
    start with the first task, so none starts here."""
    from abm.calibration.config import CalibrationConfig

    cfg = CalibrationConfig(parallel_trials=2, rerank_trials=4, rerank_replicates=2)
    with trial_runner(cfg, {}, "c.yaml", "local", 3, trials=4) as (_, used):
        assert used == {"workers": 3}
    with trial_runner(cfg, {}, "c.yaml", "local", 3, trials=2) as (_, used):
        assert used == {"workers": 2}  # 2 trials: 2 re-ranked at most


def failing_sweep_run(workers: int) -> None:
    bad = {"name": "bad", "population": {"agents": 500}, "simulation": {"days": 5, "seed": 1, "replicates": 1}}
    bad["disease"] = {"transmission_rate": -1.0}
    run_local([SweepTask(0, 0, 1, bad)], lambda *_: None, workers)


def failing_trial(workers: int) -> None:
    data = {"name": "bad", "population": {"agents": 500}, "simulation": {"days": 40}}
    data["calibration"] = {"targets": ["hospital_admissions"], "fit_window": ["2020-02-08", "2020-02-28"]}
    cfg = validate(data, "bad.yaml").calibration
    with trial_runner(cfg, data, "bad.yaml", "local", workers) as (run_batch, used):
        assert used == {"workers": workers}
        list(run_batch([{"disease.transmission_rate": 3.0}, {"disease.transmission_rate": -1.0}]))


@pytest.mark.parametrize("fail", [failing_sweep_run, failing_trial])
def test_an_error_in_a_worker_reads_as_in_this_process_and_stops_the_workers(fail):
    """A run that fails in a worker process raises the same error, with the same message, as the
    run in this process; the workers are gone when the call returns."""
    with pytest.raises(ScenarioError) as here:
        fail(1)
    with pytest.raises(ScenarioError) as there:
        fail(2)
    assert type(there.value) is type(here.value) and str(there.value) == str(here.value)
    assert "disease.transmission_rate: -1.0 is not allowed" in str(here.value)
    assert multiprocessing.active_children() == []


@pytest.mark.parametrize(
    ("names", "begins", "ends"),
    [(None, "--workers 2: ", "; give fewer --workers"), ("python", "workers=2: ", "; give fewer workers")],
)
def test_a_worker_that_dies_is_named_with_the_option(names, begins, ends):
    """The command line's option (--workers 2), or from Python the argument (workers=2)."""
    from abm.set_options import PYTHON

    with pytest.raises(WorkerLost) as info, ProcessPool(2, PYTHON if names else None) as pool:
        list(pool.finished(os._exit, [(3,)]))
    text = str(info.value)
    assert text.startswith(begins + "a worker process ended before its run did (killed, out of memory"), text
    assert text.endswith(ends) and (names is None or "--" not in text)
    assert multiprocessing.active_children() == []


def dies_at_two(how: str, i: int) -> int:
    """A task of a pool of two: task 2's worker process dies (an exit, or SIGKILL, as the system
    kills a process out of memory) while the other worker still runs its own task."""
    if i == 2:
        time.sleep(0.3)
        if how == "exit":
            os._exit(3)
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(2 if i == 3 else 0.05)
    return i


@pytest.mark.parametrize("how", ["exit", "sigkill"])
def test_a_worker_that_dies_is_named_by_the_task_it_ran(how):
    """A worker process that died while another held a task of its own: the error named the
    option only (Ray's names the task); now it names the task the dead worker ran, as the caller's
    ``named`` does, whatever the other worker was running. Without ``named``, as before."""
    calls = [(how, i) for i in range(5)]
    with pytest.raises(WorkerLost) as info, ProcessPool(2) as pool:
        list(pool.finished(dies_at_two, calls, lambda i: f"task {i} (of 5)"))
    assert str(info.value) == (
        "--workers 2: the worker process of task 2 (of 5) ended before its run did (killed, or out of memory); "
        "give fewer --workers"
    )
    with pytest.raises(WorkerLost) as unnamed, ProcessPool(2) as pool:
        list(pool.finished(dies_at_two, calls))
    assert str(unnamed.value).startswith("--workers 2: a worker process ended before its run did (killed, out of")
    assert multiprocessing.active_children() == []


def test_workers_die_with_their_parent(tmp_path):
    """A parent killed outright (kill -9: no Python code runs to end its pool) takes its
    workers with it (Linux: the workers ask the kernel for SIGKILL when their parent dies)."""
    if not sys.platform.startswith("linux"):
        pytest.skip("parent-death signals are Linux's")
    script = tmp_path / "parent.py"
    script.write_text(
        "import threading, time\n"
        "from abm.parallel import ProcessPool\n"
        "if __name__ == '__main__':\n"
        "    with ProcessPool(2) as pool:\n"
        "        def report():  # once both workers run their task\n"
        "            time.sleep(3)\n"
        "            print(*[p.pid for p in pool._executor._processes.values()], flush=True)\n"
        "        threading.Thread(target=report, daemon=True).start()\n"
        "        list(pool.finished(time.sleep, [(120,), (120,)]))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert parent.stdout is not None
        workers = [int(w) for w in parent.stdout.readline().split()]
        assert len(workers) == 2
        parent.kill()
        parent.wait(timeout=10)
        deadline = time.monotonic() + 10
        while any(_alive(w) for w in workers):
            assert time.monotonic() < deadline, "a worker outlived its parent"
            time.sleep(0.1)
    finally:
        if parent.poll() is None:
            parent.kill()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("nth", [1, 2])
def test_an_interrupt_while_a_worker_starts_leaves_no_traceback(tmp_path, sig, nth):
    """SIGTERM or Ctrl-C (sent to the command alone, as `kill` does) just after the pool started
    its ``nth`` worker process, before it sent the worker its start-up data: the pool is left with
    KeyboardInterrupt, and no worker prints a traceback (before the fix, the worker the pool had
    not yet recorded read an empty pipe once the parent was gone: "EOFError: Ran out of input")."""
    script = tmp_path / "parent.py"
    script.write_text(
        "import os, signal\n"
        "from multiprocessing import util\n"
        "from abm.parallel import ProcessPool\n"
        "def interrupt(signum, frame):  # as the console script does (abm.entry)\n"
        "    raise KeyboardInterrupt\n"
        "if __name__ == '__main__':\n"
        "    signal.signal(signal.SIGTERM, interrupt)\n"
        "    spawn, started = util.spawnv_passfds, []\n"
        "    def spawn_then_signal(path, args, fds):\n"
        "        pid = spawn(path, args, fds)\n"
        "        if any('spawn_main' in str(a) for a in args):\n"
        "            started.append(pid)\n"
        f"            if len(started) == {nth}:\n"
        f"                os.kill(os.getpid(), {int(sig)})\n"
        "        return pid\n"
        "    util.spawnv_passfds = spawn_then_signal\n"
        "    try:\n"
        "        with ProcessPool(2) as pool:\n"
        "            list(pool.finished(abs, [(-1,), (-2,), (-3,)]))\n"
        "    except KeyboardInterrupt:\n"
        "        print('interrupted', flush=True)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    # stderr is a pipe that every worker inherits: run() returns once the last of them has ended
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=60)
    assert done.stdout == "interrupted\n", done.stderr
    assert "Traceback" not in done.stderr, done.stderr


def test_an_interrupt_as_the_pool_waits_for_its_tasks_ends_the_command(tmp_path):
    """Ctrl-C just as the command went back to waiting for its workers (right after a trial's line:
    1 of about 40 such tries hung): the KeyboardInterrupt landed while ``wait`` took the futures'
    locks and left one held, so the pool's thread that hands the results over waited for it
    forever, and the command hung in the pool's clean-up instead of exiting 130. Here the signal
    is sent from inside ``wait`` as it holds the first lock: the pool now holds the interrupt back
    there and raises it once ``wait`` has let go of every lock, and the workers end."""
    script = tmp_path / "parent.py"
    script.write_text(
        "import os, signal, time\n"
        "import concurrent.futures._base as base\n"
        "from abm import entry\n"
        "from abm.parallel import ProcessPool\n"
        "def task(x):\n"
        "    time.sleep(0.2)\n"
        "    return x\n"
        "if __name__ == '__main__':\n"
        "    signal.signal(signal.SIGINT, entry._interrupt)\n"
        "    waits = []\n"
        "    def take_locks(self):  # _AcquireFutures.__enter__, with Ctrl-C as it holds the first lock\n"
        "        waits.append(1)\n"
        "        for i, future in enumerate(self.futures):\n"
        "            future._condition.acquire()\n"
        "            if len(waits) == 3 and i == 0:\n"
        "                os.kill(os.getpid(), signal.SIGINT)\n"
        "    base._AcquireFutures.__enter__ = take_locks\n"
        "    try:\n"
        "        with ProcessPool(2) as pool:\n"
        "            list(pool.finished(task, [(k,) for k in range(8)]))\n"
        "    except KeyboardInterrupt:\n"
        "        print('interrupted', flush=True)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env, start_new_session=True)  # fmt: skip
    try:
        out, err = child.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
        raise AssertionError("the command hung as it stopped its pool") from None
    assert out == "interrupted\n" and child.returncode == 0, err
    assert "Traceback" not in err, err
    assert_group_ends(child.pid)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def fragment_memory() -> None:
    """Leave 300 MB free in the C heap in holes that glibc does not give back by itself: blocks
    small enough for the heap, each followed by a small block that stays."""
    blocks = []
    for _ in range(4800):
        blocks.append(bytearray(64 * 1024))
        _PINNED.append(bytearray(1024))
    del blocks


_PINNED: list[bytearray] = []


def resident_mb() -> float:
    for line in Path(f"/proc/{os.getpid()}/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_a_worker_gives_free_memory_back_after_each_task():
    """A task that leaves 300 MB free in the C heap: the worker's resident memory afterwards is
    what it was before (glibc would keep the memory; the pool trims it after each task)."""
    if not sys.platform.startswith("linux"):
        pytest.skip("reads /proc")
    with ProcessPool(1) as pool:
        ((_, before),) = pool.finished(resident_mb, [()])
        list(pool.finished(fragment_memory, [()]))
        ((_, after),) = pool.finished(resident_mb, [()])
    assert after < before + 50, (before, after)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["calibrate", "--workers", "0"], "--workers: 0 is not allowed; give a whole number, at least 1"),
        (
            ["calibrate", "--method", "gradient", "--workers", "2"],
            "--workers: 2 is not allowed with --method gradient, whose steps run one after the other in this "
            "process; leave --workers out, or use --method optuna",
        ),
        (["sweep", "--sweep", "seeding.day=1,2", "--workers", "-1"], "--workers: -1 is not allowed; give a whole"),
    ],
)
def test_bad_workers_are_refused_before_anything_runs(tmp_path, args, message):
    scenario = ROOT / "scenarios/king_county/calibrate_2020.yaml"
    out = tmp_path / "out"
    result = runner.invoke(app, [args[0], str(scenario), *args[1:], "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert not out.exists()


@pytest.mark.parametrize("backend", ["local", pytest.param("ray", marks=pytest.mark.slow)])
def test_ctrl_c_ends_the_workers_and_writes_nothing(tmp_path, backend):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) while trials run in 2
    workers: `abm calibrate` says so and exits 130, writes no folder, and leaves no process of
    its group behind (the workers ignore SIGINT; the command ends them). On a local Ray the
    command started, Ray's processes start with SIGINT blocked and ray.shutdown() ends them
    (Ctrl-C used to kill Ray's main process first and orphan two of its agents for about 70 s;
    this test, slow-marked, caught that in 2 of 3 runs, depending on when the agents start)."""
    path = tiny_calibration(tmp_path, trials=40, agents=20_000)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "abm", "calibrate", str(path), "--workers", "2", "--out", str(out)]
    command += ["--backend", backend]
    child = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env,
                             start_new_session=True)  # fmt: skip
    try:
        assert child.stderr is not None
        wait_for_line(child, "trial 1 of 40 done")  # the workers run
        os.killpg(child.pid, signal.SIGINT)
        rest = child.stderr.read()
        assert child.wait(timeout=30) == 130, rest
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
    assert rest.strip().splitlines()[-1] == f"interrupted: no results were written to {out}"
    assert "Traceback" not in rest and not out.exists()
    assert_group_ends(child.pid)  # multiprocessing's resource tracker leaves once the command has


@pytest.mark.slow
@pytest.mark.parametrize("when", ["while_ray_starts", "as_trials_run"])
def test_kill_with_ray_ends_like_ctrl_c(tmp_path, when, ray_temp):
    """`kill` (SIGTERM to the command alone) under --backend ray: exit 143, the command's line,
    nothing written, and none of Ray's processes (nor its session folder) left. ray.init
    replaces the SIGTERM handler with sys.exit(15), and its core worker adds a crash handler
    that aborts: a kill used to end the command with 15 (or -6 while Ray connected), no message,
    and two of Ray's agents running.
    ``while_ray_starts``: the signal is sent from inside ray.init, once Ray has connected."""
    path = tiny_calibration(tmp_path, trials=40, agents=20_000)
    out = tmp_path / "out"
    script = (
        "import os, signal, sys, ray\n"
        "real = ray.init\n"
        "def init(*args, **kwargs):\n"
        "    result = real(*args, **kwargs)\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    return result\n"
        f"ray.init = init if {when == 'while_ray_starts'} else real\n"
        f"sys.argv = ['abm', 'calibrate', {str(path)!r}, '--workers', '2', '--backend', 'ray', '--out', {str(out)!r}]\n"
        "from abm.entry import main\n"
        "main()\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                             text=True, env=env, start_new_session=True)  # fmt: skip
    try:
        assert child.stderr is not None
        if when == "as_trials_run":
            wait_for_line(child, "trial 1 of 40 done")
            child.send_signal(signal.SIGTERM)
        rest = child.stderr.read()
        assert child.wait(timeout=60) == 143, rest
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
    assert rest.strip().splitlines()[-1] == f"interrupted: no results were written to {out}", rest
    assert "Traceback" not in rest and "SIGTERM received" not in rest and not out.exists()
    assert_group_ends(child.pid)
    assert list(ray_temp.iterdir()) == []  # RAY_TMPDIR, in env


@pytest.mark.slow
def test_sigterm_to_the_whole_group_with_ray_ends_like_a_kill(tmp_path):
    """SIGTERM sent to the command's whole process group (``kill -- -PGID``; a scheduler or
    ``timeout`` that signals the group) as Ray starts its first worker process: Ray's processes,
    in the group, died under the command, whose Ray client ended it with exit code 1 ("Failed to
    register worker to Raylet"; 3 of 3 tries), or waited 10-60 s for them ("Failed to connect to
    GCS within 60 seconds"), or left two of Ray's agents running. Now Ray's processes start in a
    session of their own and the command shuts them down: exit 143 within seconds, its line,
    nothing written, no process left. About 15 s."""
    marker = f"{os.getpid()}-{time.monotonic_ns()}"
    path = tiny_calibration(tmp_path, trials=40, agents=20_000)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env["ABM_TEST_MARK"] = marker
    command = [sys.executable, "-m", "abm", "calibrate", str(path), "--backend", "ray", "--out", str(out)]
    child = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env,
                             start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not any(command_line(pid).startswith("ray::IDLE") for pid in marked_processes(marker)):
            assert child.poll() is None and time.monotonic() < deadline, "no Ray worker process started"
            time.sleep(0.02)
        os.killpg(child.pid, signal.SIGTERM)
        signalled = time.monotonic()
        assert child.stderr is not None
        rest = child.stderr.read()
        assert child.wait(timeout=60) == 143, rest
        assert time.monotonic() - signalled < 10, rest
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
    assert rest.strip().splitlines()[-1] == f"interrupted: no results were written to {out}", rest
    assert "Traceback" not in rest and not out.exists()
    assert_marked_end(marker, 10)


def test_ray_tip_quiet_leaves_out_only_rays_tip():
    """Ray's "Tip" FutureWarning on every start is left out; any other warning still reaches the user."""
    import warnings

    from abm.parallel import ray_tip_quiet

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with ray_tip_quiet():
            warnings.warn("Tip: In future versions of Ray, accelerator variables ...", FutureWarning, stacklevel=1)
            warnings.warn("some other future change", FutureWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == ["some other future change"]


def test_a_missing_ray_is_named_as_the_caller_chose_it(monkeypatch):
    """Without Ray installed, --backend ray (the command) or backend='ray' (Python) gets the install hint."""
    import builtins

    from abm.parallel import ray_session

    real_import = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray":
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    for backend in ("--backend ray", "backend='ray'"):
        with pytest.raises(ValueError) as info, ray_session(None, ValueError, backend):
            pass
        assert str(info.value) == f"{backend}: Ray is not installed; pip install 'abm-epidemic[ray]'"


@pytest.fixture
def not_ray_server(request):
    """A TCP server on loopback that is no Ray: it greets each connection with ``request.param``
    (bytes; empty: it says nothing) and keeps it open. Gives its port."""
    import socket
    import threading

    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:  # closed: the test is over
                return
            held.append(conn)
            if request.param:
                conn.sendall(request.param)

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    server.close()
    for conn in held:
        conn.close()


@pytest.mark.parametrize("not_ray_server", [b"SSH-2.0-OpenSSH_9.6\r\n", b"", b"HTTP/1.1 200 OK\r\n\r\n"], indirect=True)
def test_a_service_that_is_not_ray_is_refused_in_seconds(not_ray_server):
    """Anything that took the TCP connection passed, and Ray then tried the address for about 12
    minutes; now the check asks for Ray's cluster service and names the address in one message."""
    pytest.importorskip("ray")
    from abm.parallel import CONNECT_SECONDS, check_ray_reachable

    address = f"127.0.0.1:{not_ray_server}"
    start = time.monotonic()
    with pytest.raises(ValueError) as info:
        check_ray_reachable(address, f"--ray-address {address}", ValueError)
    assert time.monotonic() - start < CONNECT_SECONDS + 2
    assert re.fullmatch(
        rf"--ray-address {address}: no Ray cluster answers there \(something else does: .+\); start one with "
        r"`ray start --head`, or leave it out to start a local Ray",
        str(info.value),
    ), info.value


@pytest.fixture(scope="module")
def two_cpu_ray():
    """A local Ray of two CPUs, started by the caller (the tests), as a Python user would."""
    yield from caller_ray(2)


@pytest.mark.slow  # starting a local Ray takes about 20 s on 2 cores
@pytest.mark.parametrize("failure", ["error", "dead_worker"])
def test_a_failed_ray_task_cancels_the_others_on_the_callers_ray(tmp_path, two_cpu_ray, failure):
    """One task fails (an error, or its worker process dies) while another, long one runs, on a
    Ray the caller started (so no ray.shutdown() ends it): the long one kept running after
    ray_finished had raised; now it is cancelled, its worker process ends and it never finishes."""
    from abm.parallel import ray_finished, ray_task

    started, ended = tmp_path / "started", tmp_path / "ended"

    def long() -> int:
        started.write_text(str(os.getpid()))
        time.sleep(120)
        ended.touch()
        return 0

    def fails() -> int:
        deadline = time.monotonic() + 120
        while not started.exists() and time.monotonic() < deadline:  # the long task runs
            time.sleep(0.1)
        if failure == "dead_worker":
            os._exit(3)
        raise ScenarioError("this run fails")

    calls = [(ray_task(two_cpu_ray, long), ()), (ray_task(two_cpu_ray, fails), ())]
    with pytest.raises(WorkerLost if failure == "dead_worker" else ScenarioError):
        list(ray_finished(two_cpu_ray, calls, None, (ScenarioError,)))
    assert_ends(os.kill, int(started.read_text()), 30, "the long task's worker process still runs")
    assert not ended.exists()


@pytest.mark.slow
def test_the_workers_recorded_on_ray_are_at_most_the_batch(two_cpu_ray):
    """--workers 3 with batches of one trial on a Ray of 2 CPUs: one trial ran at a time, and
    calibration.json said 2 (the CPUs); now 1."""
    from abm.calibration.config import CalibrationConfig

    with trial_runner(CalibrationConfig(), {}, "c.yaml", "ray", 3, trials=1) as (_, used):
        assert used == {"workers": 1, "ray_cpus": 2}
