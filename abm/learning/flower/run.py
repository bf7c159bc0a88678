"""Running a scenario's protocols over Flower: simulation engine or real processes on loopback."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from abm.interrupts import interrupted
from abm.learning import progress
from abm.learning.errors import FlowerRunError, LearningScenarioError
from abm.learning.flower import import_flwr
from abm.learning.messages import Network
from abm.learning.privacy.aggregation import PlainSum
from abm.learning.protocols.base import RunContext
from abm.learning.runner import (
    ProtocolResult,
    build_report,
    execute_protocol,
    prepare_data,
    protocol_specs,
)
from abm.learning.scenario import LearningScenario
from abm.learning.split import known_groups
from abm.parallel import interrupts_deferred, ray_init_undisturbed, ray_keeps_our_sigterm, ray_tip_quiet
from abm.ray_sessions import check_socket_paths, ray_sessions_removed
from abm.threads import torch_threads

if TYPE_CHECKING:
    from flwr.client import Client
    from flwr.common import Context
    from flwr.server import Server
    from pydantic import BaseModel

    from abm.learning.flower.server import FlowerClients

MODES = ("flower-sim", "flower")


def serve_protocols(
    scenario: Any,
    specs: list[Any],
    pool_class: type[FlowerClients],
    record: Callable[[ProtocolResult, Network, FlowerClients], None],
    facts: dict[str, Any],
    network: Callable[[], Network] = Network,
    groups: list[int] | None = None,
    timeout: float | None = None,
) -> Callable[[dict[int, tuple[Any, dict]]], None]:
    """The server's work once every client is connected: each protocol of ``specs`` runs
    through a ``pool_class`` pool of the clients, and ``record(result, network, pool)`` keeps
    what it needs before the pool closes. ``facts`` gets the clients' training-set sizes and the
    number of requests they answered. ``timeout``: the pool's wait for the answers to one
    client operation (seconds; None: no limit)."""

    def work(clients: dict[int, tuple[Any, dict]]) -> None:
        proxies = {pid: proxy for pid, (proxy, _) in clients.items()}
        sizes = {pid: int(props["n_train"]) for pid, (_, props) in clients.items()}
        first = clients[min(clients)][1]
        input_shape = tuple(json.loads(str(first["input_shape"])))
        n_classes = int(first["n_classes"])
        facts["train_sizes"] = [sizes[pid] for pid in sorted(sizes)]
        if "n_scored" in first:  # a learning participant's (an institution does not say)
            facts["test_sizes"] = [int(clients[pid][1]["n_scored"]) for pid in sorted(clients)]
        facts["requests"] = 0
        with torch_threads(1):
            for i, spec in enumerate(specs):
                pool = pool_class(proxies, sizes, i, spec.models or scenario.models, input_shape, n_classes, timeout)
                try:
                    net = network()
                    ctx = RunContext(
                        participants=[],
                        n_classes=n_classes,
                        input_shape=input_shape,
                        rounds=spec.rounds or scenario.rounds,
                        local_epochs=scenario.local_epochs,
                        seed=scenario.seed,
                        network=net,
                        aggregator=PlainSum(),
                        groups=groups,
                        clients=pool,
                    )
                    record(execute_protocol(scenario, spec, ctx), net, pool)
                finally:
                    facts["requests"] += pool.requests
                    pool.close()

    return work


def _work(
    scenario: LearningScenario, results: list[ProtocolResult], facts: dict[str, Any]
) -> Callable[[dict[int, tuple[Any, dict]]], None]:
    """The server's work once every participant's client is connected: run every protocol."""
    from abm.learning.flower.server import FlowerClients

    return serve_protocols(
        scenario,
        protocol_specs(scenario),
        FlowerClients,
        lambda result, _network, _pool: results.append(result),
        facts,
        groups=known_groups(scenario),
        timeout=scenario.flower_timeout,
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_simulation(
    scenario: BaseModel, server: Server, client_fn: Callable[[Context], Client] | None = None, n: int | None = None
) -> None:
    """Run ``server`` on Flower's simulation engine. ``scenario`` is a learning scenario, whose
    participants ``client_fn`` and ``n`` default to, or another task's (private calibration),
    which passes its own.

    Ray: where this process is already connected to Ray (``ray.init()`` in a notebook), the
    simulation runs there and leaves it running, its clients' actors ended; else on a private
    local Ray started here and shut down at the end (its session folder removed), whatever
    ``RAY_ADDRESS`` or a cluster started with ``ray start`` on this machine says (Flower's
    ``ray.init`` asks for a number of CPUs, which joining a cluster refuses with a long
    traceback; and Flower shut the caller's Ray down). A local Ray whose socket paths the
    temporary folder (TMPDIR, RAY_TMPDIR) would make too long is refused before Ray is imported
    (:class:`LearningScenarioError`, :func:`abm.ray_sessions.check_socket_paths`)."""
    imported = sys.modules.get("ray")
    if imported is None or not imported.is_initialized():  # a local Ray starts here
        check_socket_paths(LearningScenarioError, "runner flower-sim")
    import ray
    from flwr.server import ServerConfig
    from flwr.simulation import start_simulation

    from abm.learning.flower.client import simulation_client_fn

    if n is None:
        assert isinstance(scenario, LearningScenario), "give n for a scenario of another task"
        n = scenario.split.participants
    callers = ray.is_initialized()
    cpus = max(1, min(n, os.cpu_count() or 1))
    # a Ray started here leaves no session folder (abm.ray_sessions)
    with contextlib.nullcontext() if callers else ray_sessions_removed(ray):
        try:
            # a kill ends the command as Ctrl-C does, and Ray starts whole (abm.parallel)
            with (
                ray_keeps_our_sigterm(ray),
                ray_init_undisturbed(ray),
                flower_notices_quiet(),
                actor_pool_race_mended(),
                resource_timers_stopped(),
                actors_ended(ray) if callers else contextlib.nullcontext(),
            ):
                start_simulation(
                    client_fn=simulation_client_fn(scenario.model_dump_json()) if client_fn is None else client_fn,
                    num_clients=n,
                    server=server,
                    config=ServerConfig(num_rounds=1),
                    client_resources={"num_cpus": 1, "num_gpus": 0.0},
                    ray_init_args={
                        # "local": a new local Ray, not RAY_ADDRESS's nor the latest `ray start`'s
                        "address": "local",
                        "num_cpus": cpus,
                        "include_dashboard": False,
                        "ignore_reinit_error": True,  # the caller's Ray: ray.init returns at once
                        "log_to_driver": False,
                        "configure_logging": False,
                    },
                    keep_initialised=callers,  # else Flower shuts the caller's Ray down first
                )
        finally:
            if not callers:
                ray.shutdown()


@contextlib.contextmanager
def actors_ended(ray: ModuleType) -> Iterator[None]:
    """End the actors of the simulation engine's actor pools created in the block (on the
    caller's Ray, which stays up, they would hold a CPU each until garbage collected)."""
    from flwr.simulation.ray_transport.ray_actor import VirtualClientEngineActorPool as Pool

    pools: list[Pool] = []
    flowers = Pool.__init__

    def __init__(self: Pool, *args: Any, **kwargs: Any) -> None:
        flowers(self, *args, **kwargs)
        pools.append(self)

    Pool.__init__ = __init__  # type: ignore[method-assign]
    try:
        yield
    finally:
        Pool.__init__ = flowers  # type: ignore[method-assign]
        for pool in pools:
            busy = [entry[1] for entry in pool._future_to_actor.values()]
            for actor in [*pool._idle_actors, *busy]:
                with contextlib.suppress(Exception):
                    ray.kill(actor, no_restart=True)


@contextlib.contextmanager
def resource_timers_stopped() -> Iterator[None]:
    """Stop the timer threads that Flower's simulation engine starts in the block. Every 10 s it
    looks for CPUs added to the cluster, from a new timer thread that is not a daemon, and it
    stops looking when the simulation ends, but the timer then waiting is not cancelled: the
    Python process could not end for up to 10 s after ``abm learn`` had written and printed
    everything."""
    before = set(threading.enumerate())
    try:
        yield
    finally:
        for thread in set(threading.enumerate()) - before:
            module = getattr(thread, "function", None) and getattr(thread.function, "__module__", None)
            if isinstance(thread, threading.Timer) and (module or "").startswith("flwr."):
                for arg in thread.args:  # its stop flag: a timer already firing starts no other
                    if isinstance(arg, threading.Event):
                        arg.set()
                thread.cancel()


@contextlib.contextmanager
def actor_pool_race_mended() -> Iterator[None]:
    """Mend a race in the simulation engine's actor pool (flwr 1.41), which the client pool's
    parallel requests run into, for the block.

    Each request thread waits for its result in ``get_client_result``, which loops on
    ``process_unordered_future``: that checks that some result is still awaited, then waits on
    all of them (``ray.wait(list(...))``). When another thread took the last one in between,
    the list is empty, ``ray.wait`` returns at once with nothing, and the pool raised
    ``TimeoutError('Timed out waiting for result')`` (with no timeout given): the run failed,
    rarely, more often on a busy machine. Without a timeout nothing else returns empty, so that
    error is taken as "nothing left to wait for here": the caller's loop looks again and finds
    its result, which the other thread marked ready."""
    from flwr.simulation.ray_transport.ray_actor import VirtualClientEngineActorPool as Pool

    flowers = Pool.process_unordered_future

    def process_unordered_future(self: Pool, timeout: float | None = None) -> None:
        try:
            flowers(self, timeout)
        except TimeoutError:
            if timeout is not None:
                raise

    Pool.process_unordered_future = process_unordered_future  # type: ignore[method-assign]
    try:
        yield
    finally:
        Pool.process_unordered_future = flowers  # type: ignore[method-assign]


@contextlib.contextmanager
def flower_notices_quiet() -> Iterator[None]:
    """Leave out the notices a user of ``abm learn`` can do nothing about: Flower's
    "DEPRECATED FEATURE" (``start_simulation`` and ``start_server``, which abm calls) and Ray's
    "Tip" about a future default for accelerator variables. Flower's other messages pass."""

    class NoDeprecationNotice(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            return not str(record.msg).lstrip().startswith("DEPRECATED FEATURE")

    flower = logging.getLogger("flwr")
    notice = NoDeprecationNotice()
    flower.addFilter(notice)
    try:
        with ray_tip_quiet():
            yield
    finally:
        flower.removeFilter(notice)


@contextlib.contextmanager
def abm_signal_handlers() -> Iterator[None]:
    """Keep this process's own SIGINT / SIGTERM / SIGQUIT handlers while Flower's server runs.

    ``start_server`` installs Flower's handlers, which end the process with ``sys.exit(0)``: a
    Ctrl-C then ended ``abm learn --runner flower`` with exit code 0 and no word (nothing was
    written). Here Flower's registration does nothing, so the interrupt is a KeyboardInterrupt
    as everywhere else (exit code 130, the client processes stopped), and the handlers are as
    they were afterwards.
    """
    import flwr.compat.server.app as server_app

    signals = [s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGQUIT", None)) if s is not None]
    before = {s: signal.getsignal(s) for s in signals}
    register = getattr(server_app, "register_signal_handlers", None)
    server_app.register_signal_handlers = lambda *args, **kwargs: None
    try:
        yield
    finally:
        if register is not None:
            server_app.register_signal_handlers = register
        for s, handler in before.items():
            if handler is not None:
                signal.signal(s, handler)


def ended_clients(procs: list[subprocess.Popen], logs: list[Any]) -> list[str]:
    """What each client process that has ended did: its exit code or signal, and the last line
    of its log (``logs[k]``, open for reading)."""
    out = []
    for k, (p, log) in enumerate(zip(procs, logs, strict=True)):
        code = p.poll()
        if code is None:
            continue
        if code < 0:
            try:
                how = f"was ended by {signal.Signals(-code).name}"
            except ValueError:
                how = f"was ended by signal {-code}"
        else:
            how = f"ended with exit code {code}"
        log.seek(0)
        lines = [line.strip() for line in log.read().splitlines() if line.strip()]
        out.append(f"client {k} {how}" + (f" (its last line: {lines[-1]})" if lines else ""))
    return out


def raise_server_error(server: Any) -> None:
    """Raise the error the Flower server's work ended with, if any; a :class:`FlowerRunError`
    after Ctrl-C or SIGTERM (client processes in the same process group end too, and their
    going may be what the server saw first) is the interrupt."""
    if server.error is None:
        return
    if isinstance(server.error, FlowerRunError) and interrupted() is not None:
        raise KeyboardInterrupt from server.error
    raise server.error


def client_process(
    client_module: str, address: str, pid: int, scenario_file: Path, connect_timeout: float, log: Any
) -> subprocess.Popen:
    """Start participant ``pid``'s client process (``python -m client_module``), its output to ``log``."""
    command = [sys.executable, "-m", client_module, "--address", address, "--pid", str(pid)]
    command += ["--scenario", str(scenario_file), "--max-wait", str(connect_timeout)]
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "OMP_NUM_THREADS": "1"})


def run_processes(
    scenario: BaseModel,
    server: Server,
    connect_timeout: float,
    client_module: str = "abm.learning.flower.client",
    n: int | None = None,
) -> None:
    """Run ``server`` here and ``n`` client processes (``python -m client_module``) on loopback;
    each gets ``--address``, ``--pid``, ``--scenario`` (the scenario's JSON) and ``--max-wait``.
    ``n`` defaults to a learning scenario's participants."""
    from flwr.server import ServerConfig, start_server

    if n is None:
        assert isinstance(scenario, LearningScenario), "give n for a scenario of another task"
        n = scenario.split.participants
    port = _free_port()
    address = f"127.0.0.1:{port}"
    # Flower's start-up (the client processes' imports, their connections) shows no step for a while
    progress.say(f"starting the Flower server and {n} client processes ...")
    with tempfile.TemporaryDirectory(prefix="abm-flower-") as tmp:
        scenario_file = Path(tmp) / "scenario.json"
        scenario_file.write_text(scenario.model_dump_json(), encoding="utf-8")
        logs = [open(Path(tmp) / f"client{k}.log", "w+", encoding="utf-8") for k in range(n)]  # noqa: SIM115
        procs: list[subprocess.Popen] = []
        server.clients_ended = lambda: any(p.poll() is not None for p in procs)
        try:
            # Ctrl-C or SIGTERM while the clients start waits until all have started, so that each
            # is known here and stopped below: raised inside a start, it left the clients started
            # so far running after the command had ended, until they found the scenario file gone
            with interrupts_deferred():
                for k in range(n):
                    procs.append(client_process(client_module, address, k, scenario_file, connect_timeout, logs[k]))
            with abm_signal_handlers(), flower_notices_quiet():
                start_server(server_address=address, server=server, config=ServerConfig(num_rounds=1))
            ended = ended_clients(procs, logs)  # on their own, while the server ran
            if isinstance(server.error, FlowerRunError) and ended:
                lost = server.error
                server.error = FlowerRunError(f"{lost}: {'; '.join(ended)}")
                server.error.__cause__ = lost
            if server.error is None:  # the run is complete: the clients end as the server stops
                deadline = time.monotonic() + 30
                for p in procs:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        p.wait(timeout=max(0.1, deadline - time.monotonic()))
        finally:
            stopped = [p for p in procs if p.poll() is None]  # still running: stopped here, not failed
            for p in stopped:
                p.terminate()
            for p in stopped:
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            if server.error is not None:
                tails = []
                for k, f in enumerate(logs):
                    f.seek(0)
                    text = f.read().strip()
                    if text:
                        tails.append(f"client {k}:\n{text[-2000:]}")
                if tails:
                    server.error.add_note("\n".join(tails))
            for f in logs:
                f.close()
        bad = [(k, p.returncode) for k, p in enumerate(procs) if p.returncode != 0 and p not in stopped]
        if bad and server.error is None:
            raise FlowerRunError(f"Flower client processes exited with errors: {bad}")


def run_all_flower(scenario: LearningScenario, mode: str, connect_timeout: float = 120.0) -> dict[str, Any]:
    """Run local-only and every protocol of ``scenario`` over Flower; the report as :func:`run_all`'s.

    ``mode`` is ``flower-sim`` (Flower's simulation engine) or ``flower`` (server here, one client
    process per participant on 127.0.0.1). The report adds ``flower_requests``: the number of
    client-operation requests that went through Flower. A client that goes away, whose operation
    raises, or that leaves a request unanswered for ``scenario.flower_timeout`` seconds ends the
    run with a :class:`FlowerRunError` naming it.
    """
    if mode not in MODES:
        raise ValueError(f"unknown Flower mode {mode!r}; allowed: {', '.join(MODES)}")
    # A split found unworkable once the data are built is refused here, as in process, and not
    # inside every client, where Flower would bury the message in its tracebacks.
    prepare_data(scenario)
    import_flwr()
    from abm.learning.flower.server import ProtocolServer

    results: list[ProtocolResult] = []
    facts: dict[str, Any] = {}
    server = ProtocolServer(
        scenario.split.participants, _work(scenario, results, facts), connect_timeout, scenario.flower_timeout
    )
    if mode == "flower-sim":
        run_simulation(scenario, server)
    else:
        run_processes(scenario, server, connect_timeout)
    raise_server_error(server)
    report = build_report(scenario, results, facts["train_sizes"], known_groups(scenario), mode, facts["test_sizes"])
    report["flower_requests"] = facts["requests"]
    if scenario.selection_toy is not None:
        from abm.learning.selection_toy import run_selection_toy

        report["selection_toy"] = run_selection_toy(scenario.selection_toy, scenario.seed)
    return report
