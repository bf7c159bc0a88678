"""The Flower server side: a client pool over Flower's client proxies, and the server that runs
the scenario's protocols through it.

:class:`ProtocolServer` replaces Flower's round loop (``Server.fit``) with the protocols' own
server-side logic (:func:`abm.learning.runner.execute_protocol`); every client operation the logic
asks for becomes one Flower ``fit`` request to that participant's client (requests to several
participants go out in parallel, as Flower's own strategies do).
"""

from __future__ import annotations

import json
import time
import timeit
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import Any, TypeVar

import torch
from flwr.common import Code, FitIns, GetPropertiesIns
from flwr.server import Server
from flwr.server.client_manager import SimpleClientManager
from flwr.server.client_proxy import ClientProxy
from flwr.server.history import History
from flwr.server.strategy import FedAvg as _UnusedStrategy
from flwr.server.superlink.fleet.grpc_bidi.grpc_bridge import GrpcBridgeClosed
from torch import nn

from abm.learning.clients import ClientPool, Payload
from abm.learning.errors import FlowerRunError
from abm.learning.flower.codec import decode_tensors, encode_request
from abm.learning.runner import model_for
from abm.learning.scenario import ModelSpec

K = TypeVar("K")
T = TypeVar("T")


def replies(
    jobs: Mapping[K, Future[T]], timeout: float | None, unanswered: Callable[[list[K], float], str]
) -> dict[K, T]:
    """Every job's result, once all are done: the first error (in the jobs' order) as soon as a job
    fails, or a :class:`FlowerRunError` saying ``unanswered(keys, timeout)`` when some are still
    running ``timeout`` seconds from now (None: no limit). The jobs still running are left to
    end on their own (their requests end when Flower's server stops)."""
    done, running = wait(jobs.values(), timeout=timeout, return_when=FIRST_EXCEPTION)
    for job in jobs.values():
        if job in done and job.exception() is not None:
            job.result()  # raises it
    if running:
        assert timeout is not None
        raise FlowerRunError(unanswered([key for key, job in jobs.items() if job in running], timeout))
    return {key: job.result() for key, job in jobs.items()}


def _participants(pids: list[int]) -> str:
    if len(pids) == 1:
        return f"participant {pids[0]}'s Flower client"
    return f"participants {', '.join(map(str, pids))}' Flower clients"


class FlowerClients(ClientPool):
    """Participants reached through Flower client proxies (one per participant).

    ``timeout`` (seconds, None: no limit) is how long :meth:`call` waits for the answers to one
    client operation sent to several participants at once; a participant whose client has not
    answered by then ends the run (:class:`FlowerRunError`), as one whose client went away or
    whose operation raised.
    """

    def __init__(
        self,
        proxies: Mapping[int, ClientProxy],
        sizes: Mapping[int, int],
        protocol: int,
        models: list[ModelSpec],
        input_shape: tuple[int, ...],
        n_classes: int,
        timeout: float | None = None,
    ) -> None:
        self.proxies = dict(proxies)
        self.ids = sorted(self.proxies)
        self.sizes = [int(sizes[pid]) for pid in self.ids]
        self.protocol = protocol
        self.models = models
        self.input_shape = input_shape
        self.n_classes = n_classes
        self.timeout = timeout
        self.requests = 0
        self._pool = ThreadPoolExecutor(max_workers=max(1, len(self.ids)))

    def model_template(self, pid: int) -> nn.Module:
        spec = self.models[pid % len(self.models)]
        with torch.random.fork_rng(devices=[]):
            return model_for(spec, self.input_shape, self.n_classes)

    def _one(self, pid: int, op: str, payload: Payload, config: dict[str, Any]) -> Any:
        """One client's reply, still encoded (decoded by the caller's thread: numpy's header
        parser is not safe to run in several threads at once on Python 3.11)."""
        params, cfg = encode_request(op, self.protocol, payload, config)
        try:
            # not Flower's time limit, which closes the connection as if the client had gone away:
            # call() waits ``timeout`` seconds at most for all of a call's requests
            res = self.proxies[pid].fit(FitIns(params, cfg), None, self.protocol)
        except GrpcBridgeClosed:  # its connection closed: the client process ended
            lost = f"participant {pid}'s Flower client went away during client operation {op!r}"
            raise FlowerRunError(lost) from None
        if res.status.code != Code.OK:  # the operation raised (the client's traceback is the message)
            lines = [line for line in str(res.status.message).splitlines() if line.strip()]
            error = str(res.metrics.get("error") or (lines[-1] if lines else f"status {res.status.code.name}"))
            failed = FlowerRunError(f"participant {pid}'s Flower client failed in client operation {op!r}: {error}")
            failed.add_note(f"participant {pid}'s Flower client:\n{res.status.message}")
            raise failed
        return res

    def call(
        self, op: str, payloads: Mapping[int, Payload], config: Mapping[str, Any] | None = None
    ) -> dict[int, Payload]:
        jobs = {}
        for pid in sorted(payloads):
            jobs[pid] = self._pool.submit(self._one, pid, op, dict(payloads[pid]), dict(config or {}))
        self.requests += len(jobs)

        def unanswered(pids: list[int], timeout: float) -> str:
            return f"{_participants(pids)} did not answer client operation {op!r} within {timeout:g} s"

        answers = replies(jobs, self.timeout, unanswered)
        return {pid: decode_tensors(r.parameters, json.loads(str(r.metrics["names"]))) for pid, r in answers.items()}

    def close(self) -> None:
        """Stop the request threads; one still waiting for an answer (after an error) ends when its
        request does, without being waited for here."""
        self._pool.shutdown(wait=False, cancel_futures=True)


def identify(
    proxies: list[ClientProxy], timeout: float | None = None, participants: int | None = None
) -> dict[int, tuple[ClientProxy, dict]]:
    """Ask every connected client (all at once) for its participant id and public facts; a
    :class:`FlowerRunError` if one goes away or has not answered within ``timeout`` seconds. The
    clients are known only by Flower's ids until they answer: where ``participants`` (ids 0 to
    ``participants`` - 1) are expected, the message names those not heard from."""

    def ask(proxy: ClientProxy) -> Any:
        try:
            return proxy.get_properties(GetPropertiesIns(config={}), None, None)
        except GrpcBridgeClosed:
            raise FlowerRunError(f"client {proxy.cid} went away before it said which participant it is") from None

    def unanswered(cids: list[str], timeout: float) -> str:
        who = f"Flower client {cids[0]}" if len(cids) == 1 else f"Flower clients {', '.join(cids)}"
        message = f"{who} did not say which participant it is within {timeout:g} s"
        if participants is None:
            return message
        heard = {_said_pid(job) for job in jobs.values() if job.done()}
        silent = [pid for pid in range(participants) if pid not in heard]
        if not silent:  # every participant answered: the silent ones are clients too many
            return message
        return f"{message}; not heard from: participant{'s' if len(silent) > 1 else ''} {', '.join(map(str, silent))}"

    asking = ThreadPoolExecutor(max_workers=max(1, len(proxies)))
    jobs = {proxy.cid: asking.submit(ask, proxy) for proxy in proxies}
    try:
        answers = replies(jobs, timeout, unanswered)
    finally:
        asking.shutdown(wait=False, cancel_futures=True)
    out: dict[int, tuple[ClientProxy, dict]] = {}
    for proxy in proxies:
        res = answers[proxy.cid]
        if res.status.code != Code.OK:
            raise RuntimeError(f"client {proxy.cid} did not say who it is: {res.status.message}")
        props = dict(res.properties)
        pid = int(props["pid"])
        if pid in out:
            raise FlowerRunError(f"two clients claim participant id {pid}")
        out[pid] = (proxy, props)
    return out


def _said_pid(job: Future[Any]) -> int | None:
    """The participant id in a finished answer to "who are you", or None."""
    if job.exception() is not None:
        return None
    res = job.result()
    pid = res.properties.get("pid") if res.status.code == Code.OK else None
    return int(pid) if pid is not None else None


class ProtocolServer(Server):
    """A Flower server whose ``fit`` runs ``work(clients)`` instead of Flower's round loop.

    ``work`` gets ``{participant id: (proxy, public facts)}`` once ``n_clients`` have connected;
    its return value (or exception) is kept in ``result`` (``error``) for the runner. While it
    waits for the clients to connect (``connect_timeout`` seconds at most), it gives up at once
    when ``clients_ended()`` says a client process has ended (the runner of client processes
    sets it). Once connected, every client must say who it is within ``request_timeout``
    seconds (None: no limit).
    """

    def __init__(
        self,
        n_clients: int,
        work: Callable[[dict[int, tuple[ClientProxy, dict]]], Any],
        connect_timeout: float,
        request_timeout: float | None = None,
    ):
        super().__init__(client_manager=SimpleClientManager(), strategy=_UnusedStrategy())
        self.n_clients = n_clients
        self.work = work
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self.result: Any = None
        self.error: BaseException | None = None
        self.clients_ended: Callable[[], bool] = lambda: False

    def _wait_for_clients(self) -> None:
        """Return once ``n_clients`` are connected; a :class:`FlowerRunError` if a client process
        ends first or ``connect_timeout`` passes."""
        deadline = time.monotonic() + self.connect_timeout
        while not self._client_manager.wait_for(self.n_clients, timeout=1 if time.monotonic() < deadline else 0):
            if self.clients_ended():
                raise FlowerRunError(f"a Flower client process ended before all {self.n_clients} had connected")
            if time.monotonic() >= deadline:
                raise FlowerRunError(
                    f"only {self._client_manager.num_available()} of {self.n_clients} Flower clients connected "
                    f"within {self.connect_timeout:.0f} s"
                )

    def fit(self, num_rounds: int, timeout: float | None) -> tuple[History, float]:
        start = timeit.default_timer()
        try:
            self._wait_for_clients()
            clients = identify(list(self._client_manager.all().values()), self.request_timeout, self.n_clients)
            if sorted(clients) != list(range(self.n_clients)):
                raise FlowerRunError(f"expected participants 0..{self.n_clients - 1}, got {sorted(clients)}")
            self.result = self.work(clients)
        except BaseException as e:  # handed to the runner once Flower has shut down
            self.error = e
        return History(), timeit.default_timer() - start
