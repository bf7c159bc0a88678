"""Running independent tasks side by side: in worker processes on this machine, or on Ray. One
place for every command that offers ``--workers`` (``abm calibrate``, ``abm sweep``) or
``--backend ray``.

Both give their results by task index, as the tasks finish (:func:`in_order` puts them back in
order), so callers can report progress as runs complete while their results stay independent of
which worker ran what and when.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import multiprocessing
import os
import signal
import socket
import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from multiprocessing.connection import Connection
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from abm.set_options import OptionNames

T = TypeVar("T")


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity where the system tells it, else all)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def check_workers(workers: int | None, error: type[Exception], name: str = "--workers") -> None:
    """``--workers`` must be a whole number, at least 1 (None: the command's default); messages
    call it ``name`` (``workers`` for a Python argument)."""
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise error(f"{name}: {workers!r} is not allowed; give a whole number, at least 1")


def workers_record(
    workers: int, tasks: int, cpus: int | None = None, gpu_tasks: int = 0, gpus: int = 0
) -> dict[str, int]:
    """What ``sweep.json`` and ``calibration.json`` record of the workers that ran ``tasks`` tasks
    (a sweep's runs, a calibration's batch) with at most ``workers`` at once: ``workers``, how
    many could run at once (at most the tasks, and on Ray at most the cluster's ``cpus``, a task
    taking one), and on Ray ``ray_cpus``, those CPUs (:func:`ray_cpus`). Where ``gpu_tasks`` of
    the tasks each take a whole GPU of the cluster's ``gpus``, at most ``gpus`` of those run at
    once, and ``ray_gpus`` records the GPUs."""
    at_once = min(workers, tasks, tasks if cpus is None else cpus, tasks - gpu_tasks + min(gpu_tasks, gpus))
    record = {"workers": max(1, at_once)}
    if cpus is not None:
        record["ray_cpus"] = cpus
    if gpu_tasks:
        record["ray_gpus"] = gpus
    return record


def ray_cpus(ray: ModuleType) -> int:
    """The CPUs of the Ray cluster ``ray`` is connected to, at least 1."""
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def in_order(finished: Iterable[tuple[int, T]]) -> Iterator[T]:
    """The results of ``(index, result)`` pairs that arrive in any order, in index order (0, 1,
    ...), each as soon as it and all before it have arrived."""
    waiting: dict[int, T] = {}
    following = 0
    for index, result in finished:
        waiting[index] = result
        while following in waiting:
            yield waiting.pop(following)
            following += 1


class WorkerLost(RuntimeError):
    """A worker process ended before its task did (killed, out of memory, or it could not
    start): a failure of the run, not of its input."""


def release_free_memory() -> None:
    """After a run, give the memory it freed back to the system: glibc keeps freed memory for
    reuse, and ``malloc_trim`` returns it (nothing is done elsewhere than Linux with glibc). A
    worker process then holds between runs what it held before them (tests/test_parallel.py)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def _glibc() -> ctypes.CDLL | None:
    """The C library when it is glibc on Linux (it has ``malloc_trim`` and ``prctl``), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.malloc_trim  # noqa: B018 - glibc has it; musl does not
        libc.prctl  # noqa: B018
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        return None
    return libc


_LIBC = _glibc()
_PR_SET_PDEATHSIG = 1


_HELD: list[Connection] = []  # in a worker process: where it tells the parent which task it runs


def _start_worker(parent: int, held: Connection | None = None) -> None:
    """A worker process ignores Ctrl-C: the terminal sends it to the whole process group, and
    the parent, which handles it, ends the workers itself. SIGINT came blocked from the parent
    (:meth:`ProcessPool.finished`), so one sent while the worker started is dropped here. On
    Linux the worker is also killed when the parent dies without ending it (kill -9, out of
    memory), and ends at once if the parent is already gone. ``held``: the pipe on which the
    worker says which task it starts (:func:`_run_held`)."""
    if held is not None:
        _HELD[:] = [held]
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The pool ends its workers with SIGTERM. A worker imports the program's main script again
    # ("spawn"), and the `abm` console script's import of abm/__main__.py put in the start-up
    # handler, which would answer it "interrupted while starting" and exit 143: the default again.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if os.getppid() != parent:
        os._exit(1)


def run_and_release(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` (a run), then the memory it left free goes back to the system
    (:func:`release_free_memory`): what every worker does with each task, and what the commands
    do with each run when they run them one after the other in their own process."""
    try:
        return fn(*args)
    finally:
        release_free_memory()


def _run_held(index: int, fn: Callable[..., T], *args: Any) -> T:
    """In a worker process: tell the parent that this process (by its id) runs task ``index``,
    then run it (:func:`run_and_release`). The message is a few bytes, written to the pipe at once
    (a write that cannot be cut short by a kill), so the workers need no lock to share the pipe."""
    if _HELD:
        _HELD[0].send((os.getpid(), index))
    return run_and_release(fn, *args)


@contextmanager
def _sigint_blocked() -> Iterator[None]:
    """SIGINT blocked in this thread, so that a process started here starts with it blocked
    (a Ctrl-C then cannot end it with a traceback before :func:`_start_worker`; without
    the block, Ctrl-C 0.05-0.1 s after a worker started printed one). This process loses no
    SIGINT meanwhile: another of its threads takes it, or it waits until the block ends, and
    Python runs the handler in the main thread as usual."""
    if not hasattr(signal, "pthread_sigmask"):  # pragma: no cover - Windows
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


@contextmanager
def interrupts_deferred() -> Iterator[list[int]]:
    """Ctrl-C and SIGTERM held back until the block ends, then handled as they would have been:
    the pool starts its worker processes in this thread as tasks are submitted, and an interrupt
    that lands between the start of a worker and the sending of its start-up data leaves that
    worker unknown to the pool, to print an ``EOFError`` traceback once this process has gone
    (tests/test_parallel.py). The block gets the list of the signals held back so far, so that it
    can end early. Only the main thread can set handlers; elsewhere nothing is held (the list
    stays empty)."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def note(signum: int, frame: object) -> None:
        received.append(signum)

    handlers = {s: signal.signal(s, note) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield received
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
        if received:
            handler = handlers[received[0]]
            if callable(handler):
                handler(received[0], None)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(received[0])


_WAIT_S = 0.1  # how long an interrupt may wait for :func:`_first_done` to let it through


def _first_done(pending: set[Future[T]]) -> tuple[set[Future[T]], set[Future[T]]]:
    """``wait(pending, return_when=FIRST_COMPLETED)``, with Ctrl-C and SIGTERM held back while it
    runs and let through at most 0.1 s after they came (:func:`interrupts_deferred`). Raised
    inside it, the KeyboardInterrupt could come as ``wait`` took or gave back the futures' locks,
    and leave one held: the pool's thread that hands the results over then waited for it forever,
    and so did the command as it stopped the pool (its clean-up joins that thread), hung instead
    of ending with exit code 130 (tests/test_parallel.py)."""
    done: set[Future[T]] = set()
    with interrupts_deferred() as received:
        while not done and not received:
            done, pending = wait(pending, timeout=_WAIT_S, return_when=FIRST_COMPLETED)
    return done, pending


class ProcessPool:
    """``workers`` worker processes on this machine, started with the "spawn" method (a fresh
    interpreter each: no copy of the parent's torch threads or open files), for use as a context
    manager. Workers ignore Ctrl-C; leaving the block on an error or an interrupt stops the
    workers at once, so no process outlives it and no task goes on; nor does one outlive the
    parent's own death, on Linux. A worker that dies (killed, out of memory) raises
    :class:`WorkerLost`, with a message naming the option as ``names`` does (``--workers 4`` or
    ``workers=4``), and the task it ran where that is known (:meth:`finished`). After each task a worker gives
    its free memory back to the system (:func:`release_free_memory`).

    Each worker imports the main module of the program, as "spawn" does: a script that uses a
    pool must do so under ``if __name__ == "__main__":``."""

    def __init__(self, workers: int, names: OptionNames | None = None) -> None:
        self.workers = workers
        self.names = names  # None: the command line's (kept out of this module's imports)
        self._executor: ProcessPoolExecutor | None = None
        self._held: tuple[Connection, Connection] | None = None  # the workers' pipe: which task each runs

    def __enter__(self) -> ProcessPool:
        context = multiprocessing.get_context("spawn")
        self._held = context.Pipe(duplex=False)
        self._executor = ProcessPoolExecutor(
            max_workers=self.workers,
            mp_context=context,
            initializer=_start_worker,
            initargs=(os.getpid(), self._held[1]),
        )
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        executor, self._executor = self._executor, None
        if executor is None:
            return
        if kind is not None:
            # Stop the running tasks rather than wait for them: an interrupted or failed command
            # ends now. The executor then finds its workers gone and fails the tasks left (none
            # is cancelled before: Python 3.11's executor cannot fail a cancelled task). The
            # processes are the executor's _processes (terminate_workers() is Python 3.14's).
            processes = list((getattr(executor, "_processes", None) or {}).values())
            for process in processes:
                process.terminate()
            for process in processes:
                process.join()
        executor.shutdown(wait=True)
        held, self._held = self._held, None
        for end in held or ():
            end.close()

    def _lost_task(self, started: dict[int, int], finished: set[int]) -> int | None:
        """After a worker process died, the task it ran, or None where that is not known.
        ``started``: each worker's process id and the task it started last; ``finished``: the
        tasks that have finished. The pool ends its other workers with SIGTERM once one has died:
        once they have ended, the lost task is the one held by the single worker that ended
        otherwise (killed with SIGKILL, out of memory, an exit), or else the only task held. A
        worker ended by a SIGTERM of its own while others held tasks cannot be told apart."""
        processes = getattr(self._executor, "_processes", None) or {}
        for process in list(processes.values()):
            process.join(timeout=10)
        self._read_started(started)
        held = {pid: i for pid, i in started.items() if i not in finished}
        ended = {pid: process.exitcode for pid, process in processes.items()}
        killed = [i for pid, i in held.items() if ended.get(pid) not in (None, -signal.SIGTERM)]
        for candidates in (killed, list(held.values())):
            if len(candidates) == 1:
                return candidates[0]
        return None

    def _read_started(self, started: dict[int, int]) -> None:
        """Take in the workers' messages of the tasks they started (process id, task)."""
        reader = self._held[0] if self._held is not None else None
        while reader is not None and reader.poll():
            pid, index = reader.recv()
            started[pid] = index

    def finished(
        self, fn: Callable[..., T], calls: Sequence[tuple[Any, ...]], named: Callable[[int], str] | None = None
    ) -> Iterator[tuple[int, T]]:
        """Run ``fn(*args)`` for each ``args`` of ``calls`` in the workers; yield ``(index,
        result)`` as each finishes. An error in ``fn`` is raised here as it was raised there
        (the same type and message); leaving the pool's block with it stops the other tasks. A
        worker that dies raises :class:`WorkerLost`, naming the task it ran as ``named(index)``
        does (``variant 1, replicate 0``) where ``named`` is given and the task is known
        (:meth:`_lost_task`), as :func:`ray_finished` does."""
        assert self._executor is not None, "use ProcessPool as a context manager"
        with interrupts_deferred(), _sigint_blocked():
            futures = [self._executor.submit(_run_held, i, fn, *args) for i, args in enumerate(calls)]
        index: dict[Future[T], int] = {f: i for i, f in enumerate(futures)}
        pending = set(futures)
        started: dict[int, int] = {}  # worker process id -> the task it started last
        yielded: set[int] = set()
        while pending:
            done, pending = _first_done(pending)
            self._read_started(started)  # as the tasks go, so that the pipe never fills
            for future in sorted(done, key=index.__getitem__):
                try:
                    result = future.result()
                except BrokenProcessPool:
                    lost = self._lost_task(started, yielded) if named is not None else None
                    raise self._worker_lost(None if lost is None else named(lost)) from None  # type: ignore[misc]
                yielded.add(index[future])
                yield index[future], result

    def _worker_lost(self, task: str | None) -> WorkerLost:
        """The error for a worker process that died running ``task`` (as messages name it; None:
        not known, and perhaps the worker could not start)."""
        option, given = "--workers", f"--workers {self.workers}"
        if self.names is not None:
            option, given = self.names.name("workers"), self.names.given("workers", self.workers)
        if task is not None:
            return WorkerLost(
                f"{given}: the worker process of {task} ended before its run did (killed, or out of memory); "
                f"give fewer {option}"
            )
        return WorkerLost(
            f"{given}: a worker process ended before its run did "
            "(killed, out of memory, or it could not start: a Python script that calls abm with several "
            "workers must make the call under `if __name__ == '__main__':`, since each worker imports the "
            f"script); give fewer {option}"
        )


def check_ray_address(address: str | None, backend: str, error: type[Exception], names: OptionNames) -> None:
    """The address of a Ray cluster is only for the Ray backend: refused, with ``error``, with
    any other, rather than ignored. Messages name the options as ``names`` does."""
    if address is not None and backend != "ray":
        raise error(
            f"{names.name('ray-address')}: only used with {names.given('backend', 'ray')}, "
            f"not with {names.given('backend', backend)}"
        )


CONNECT_SECONDS = 5.0  # how long ray_session waits for a cluster's address to answer


def check_ray_reachable(address: str | None, given: str, error: type[Exception]) -> None:
    """``address`` (else ``RAY_ADDRESS``; ``auto``, ``local`` or none: Ray finds or starts one)
    is ``host:port`` (or ``ray://host:port``) where a server answers within
    :data:`CONNECT_SECONDS` each to a connection and to a gRPC greeting (:func:`not_grpc`), else
    ``error`` naming it (``given``: as the caller gave it, e.g. ``--ray-address ADDR``). Ray itself
    takes a malformed address with a traceback, and retries an unreachable one, or one where
    another service answers, for about 12 minutes, while :func:`ray_session` holds Ctrl-C back."""
    if address is None:
        address = os.environ.get("RAY_ADDRESS") or None
        given = f"RAY_ADDRESS={address}"
    if address is None or address in ("auto", "local"):
        return
    host, colon, port = address.removeprefix("ray://").rpartition(":")
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise error(
            f"{given}: not an address; give host:port of the Ray cluster's head node (e.g. 10.0.0.5:6379), "
            "or leave it out to start a local Ray"
        )
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_SECONDS) as conn:
            why = not_grpc(conn)
    except OSError as exc:
        why = exc.strerror or f"no answer in {CONNECT_SECONDS:g} s"
    if why is not None:
        raise error(
            f"{given}: no Ray cluster answers there ({why}); start one with `ray start --head`, "
            "or leave it out to start a local Ray"
        )


HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
HTTP2_SETTINGS = 4  # the frame type a server sends first


def not_grpc(conn: socket.socket) -> str | None:
    """None where the server at the other end of ``conn`` speaks gRPC, Ray's protocol (its head
    node's cluster service, the Ray Client server of a ``ray://`` address): to a client's
    HTTP/2 preface it answers with its settings. Else why not, as something else answers. Ray's
    core need not come with a gRPC library, so this is a bare HTTP/2 greeting; another gRPC
    service passes."""
    conn.sendall(HTTP2_PREFACE + bytes([0, 0, 0, HTTP2_SETTINGS, 0, 0, 0, 0, 0]))  # empty settings, stream 0
    header = b""
    try:
        while len(header) < 9:
            chunk = conn.recv(9 - len(header))
            if not chunk:
                break
            header += chunk
    except TimeoutError:
        return f"something else does: it did not answer Ray's greeting in {CONNECT_SECONDS:g} s"
    if len(header) < 9 or header[3] != HTTP2_SETTINGS or any(header[5:9]):
        return "something else does: it does not speak gRPC, Ray's protocol"
    return None


@contextmanager
def ray_session(
    address: str | None, error: type[Exception], backend: str = "--backend ray", given: str | None = None
) -> Iterator[ModuleType]:
    """The ``ray`` module, connected: to the Ray instance this process already uses, else to
    ``address`` (or ``RAY_ADDRESS``; checked first: :func:`check_ray_reachable`, naming it as
    ``given``, by default ``--ray-address ADDR``), else to a local instance started here and
    shut down on exit, its session folder removed (:mod:`abm.ray_sessions`); one whose socket
    paths the temporary folder would make too long is refused before it starts
    (:func:`abm.ray_sessions.check_socket_paths`). A missing Ray
    raises ``error`` with the install hint, naming the choice of Ray as the caller gave it
    (``backend``: ``--backend ray``, or ``backend='ray'`` from Python)."""
    try:
        import ray
    except ImportError as exc:
        raise error(f"{backend}: Ray is not installed; pip install 'abm-epidemic[ray]'") from exc
    started = not ray.is_initialized()
    if not started:
        yield ray
        return
    check_ray_reachable(address, given or f"--ray-address {address}", error)
    from abm.ray_sessions import check_socket_paths, ray_sessions_removed

    if (address or os.environ.get("RAY_ADDRESS") or "local") == "local":  # Ray starts here (check_ray_reachable)
        check_socket_paths(error, backend)

    with ray_raylet_quiet(ray), ray_sessions_removed(ray):  # the session folder goes once Ray is shut down
        try:
            # Ray shut down below ends it however the command ends (ray_init_undisturbed)
            with ray_init_undisturbed(ray), ray_keeps_our_sigterm(ray), ray_tip_quiet():
                ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
            yield ray
        finally:
            ray.shutdown()


@contextmanager
def ray_init_undisturbed(ray: ModuleType) -> Iterator[None]:
    """Each ``ray.init`` in the block (here, or inside Flower's simulation) runs with Ctrl-C and
    SIGTERM held back until Ray has started (:func:`interrupts_deferred`), then handled as at any
    other time, and with SIGINT blocked, which the processes it starts inherit. A Ctrl-C at the
    terminal, which reaches the whole process group, then leaves Ray's processes to
    ``ray.shutdown()`` instead of killing Ray's main process first; and one that came while Ray
    started no longer cut its start short. Either orphaned two of Ray's agents, which lingered for
    about 70 s (``abm learn --runner flower-sim``, whose ``ray.init`` is Flower's, still did)."""
    init = ray.init

    @functools.wraps(init)
    def undisturbed(*args: Any, **kwargs: Any) -> Any:
        with _sigint_blocked(), interrupts_deferred():
            return init(*args, **kwargs)

    ray.init = undisturbed
    try:
        yield
    finally:
        ray.init = init


@contextmanager
def ray_raylet_quiet(ray: ModuleType) -> Iterator[None]:
    """Leave out the notes Ray's raylet prints on stdout as they come (a worker died, a task is
    run again): the command says what failed in its one message (:func:`ray_finished`), and
    Ray's note came before or after it, in the progress bar, as it happened to arrive."""
    worker = getattr(getattr(ray, "_private", None), "worker", None)
    if not hasattr(worker, "_worker_logs_enabled"):  # pragma: no cover - another Ray version
        yield
        return
    before, worker._worker_logs_enabled = worker._worker_logs_enabled, False  # type: ignore[union-attr]
    try:
        yield
    finally:
        worker._worker_logs_enabled = before  # type: ignore[union-attr]


@contextmanager
def ray_tip_quiet() -> Iterator[None]:
    """Leave out Ray's "Tip" about a future default (accelerator variables), a FutureWarning it
    gives on every start that a user of ``abm`` can do nothing about."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Tip: In future versions of Ray", category=FutureWarning)
        yield


@contextmanager
def ray_keeps_our_sigterm(ray: ModuleType) -> Iterator[None]:
    """Around a ``ray.init`` (here, or inside Flower's simulation): ``ray.init`` in the main
    thread replaces the SIGTERM handler with one that calls ``sys.exit(15)`` (and its local
    node's, ``sys.exit(1)``): the command's handler (:mod:`abm.entry`: remove the output, say so,
    exit 143) stays in place instead. Without this a `kill` ended ``--backend ray`` with exit code
    15, no message, and two of Ray's agents left running. And the processes the ``ray.init``
    starts go to a session of their own (:func:`ray_processes_apart`), so that a SIGTERM sent to
    the command's whole process group reaches the command alone."""
    private = getattr(ray, "_private", None)
    utils, constants = getattr(private, "utils", None), getattr(private, "ray_constants", None)
    original = getattr(utils, "set_sigterm_handler", None)
    if original is None:  # pragma: no cover - another Ray version
        yield
        return
    # the driver's core worker would also install a C++ crash handler for SIGTERM, which prints a
    # stack trace and aborts (exit -6) when a SIGTERM lands while Ray connects
    crash_handler_off = getattr(constants, "RAY_DISABLE_FAILURE_SIGNAL_HANDLER", None)
    utils.set_sigterm_handler = lambda handler: None  # type: ignore[union-attr]
    if crash_handler_off is not None:
        constants.RAY_DISABLE_FAILURE_SIGNAL_HANDLER = True  # type: ignore[union-attr]
    try:
        with ray_processes_apart(ray):
            yield
    finally:
        utils.set_sigterm_handler = original  # type: ignore[union-attr]
        if crash_handler_off is not None:
            constants.RAY_DISABLE_FAILURE_SIGNAL_HANDLER = crash_handler_off  # type: ignore[union-attr]


@contextmanager
def ray_processes_apart(ray: ModuleType) -> Iterator[None]:
    """The processes Ray starts in the block (its GCS server, raylet and the rest: the raylet's
    workers and agents follow it) start in a session of their own, outside the command's process
    group, where Linux ends them with the command's process (Ray's fate sharing). A SIGTERM sent
    to the whole group (``kill -- -PGID``, a scheduler or ``timeout`` that signals the group)
    then reaches the command alone, which shuts its Ray down as after a `kill` of its own
    process. Sent to Ray's processes too, it killed them under the command, whose Ray client then
    waited 10-60 s for them and ended with exit code 1 ("Failed to connect to GCS within 60
    seconds"), or left two of Ray's agents running. Elsewhere than Linux, Ray cannot tie its
    processes to the command's life that way, and they stay in the group."""
    services = getattr(getattr(ray, "_private", None), "services", None)
    popen = getattr(services, "ConsolePopen", None)
    fate_sharing = getattr(getattr(ray, "_private", None), "utils", None)
    if (
        popen is None
        or not sys.platform.startswith("linux")
        or not getattr(fate_sharing, "detect_fate_sharing_support", lambda: False)()
    ):  # pragma: no cover - another Ray version, or another system
        yield
        return

    class Apart(popen):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["start_new_session"] = True
            super().__init__(*args, **kwargs)

    services.ConsolePopen = Apart  # type: ignore[union-attr]
    try:
        yield
    finally:
        services.ConsolePopen = popen  # type: ignore[union-attr]


def ray_task(ray: ModuleType, fn: Callable[..., Any]) -> Any:
    """``fn`` as a Ray remote function of one CPU that Ray never runs again after its worker
    process died: :func:`ray_finished` then fails, as the local backend does (:class:`WorkerLost`).
    Ray's default ran it again, up to 3 times, unseen, and the command ended as if nothing had
    happened."""
    return ray.remote(num_cpus=1, max_retries=0)(fn)


def ray_finished(
    ray: ModuleType,
    calls: Sequence[tuple[Any, tuple[Any, ...]]],
    workers: int | None,
    errors: tuple[type[Exception], ...],
    backend: str = "--backend ray",
    named: Callable[[int], str] = lambda index: f"task {index}",
) -> Iterator[tuple[int, Any]]:
    """Run each ``(remote, args)`` of ``calls`` (a Ray remote function of :func:`ray_task` and
    its arguments) as a Ray task, at most ``workers`` at once (None: all submitted, and Ray
    schedules them by the resources they ask for); yield ``(index, result)`` as each finishes. A
    task's error of one of the ``errors`` types is raised here as it was raised in the task; a
    task whose worker process died (killed, out of memory, its node lost) raises
    :class:`WorkerLost`, naming the choice of Ray as ``backend`` does and the task as
    ``named(index)`` does. Either way, or when the caller stops early, the tasks still running or
    waiting are cancelled (their worker processes killed) and none is submitted any more."""
    queue = iter(enumerate(calls))
    running: dict[Any, int] = {}
    lost = (
        ray.exceptions.WorkerCrashedError,
        ray.exceptions.OutOfMemoryError,
        ray.exceptions.NodeDiedError,
        ray.exceptions.LocalRayletDiedError,
    )

    def submit() -> None:
        for index, (remote, args) in queue:
            running[remote.remote(*args)] = index
            if workers is not None and len(running) >= workers:
                return

    try:
        submit()
        while running:
            ready, _ = ray.wait(list(running), num_returns=1)
            for ref in ready:
                index = running.pop(ref)
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayTaskError as exc:
                    cause = getattr(exc, "cause", None)
                    if isinstance(cause, errors):
                        raise type(cause)(*cause.args) from exc
                    raise
                except lost:
                    raise WorkerLost(
                        f"{backend}: the Ray worker process of {named(index)} ended before its run did "
                        "(killed, out of memory, or its node was lost); Ray does not run it again"
                    ) from None
                yield index, result
            submit()
    finally:
        # Left early (a task failed, an interrupt, the caller stopped): the tasks still submitted
        # are cancelled, their worker processes killed, rather than left running on a Ray
        # instance the caller started (one started here is shut down anyway).
        if running and ray.is_initialized():
            for ref in running:
                ray.cancel(ref, force=True)


def check_ray_device(device: str, where: str, error: type[Exception], backend: str = "--backend ray") -> None:
    """Ray shows a task only the GPU it assigns, as ``cuda``: a numbered device (``cuda:1``)
    would fail in every task, so it is refused before Ray starts (``where`` names the scenario,
    ``backend`` the choice of Ray as the caller wrote it: ``--backend ray`` or ``backend='ray'``)."""
    if device.startswith("cuda:"):
        raise error(
            f"{where}: simulation.device: {device!r} is not allowed with {backend}: Ray assigns the GPUs; use cuda"
        )
