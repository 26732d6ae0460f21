"""Async across processes: a parameter server in process 0, one worker in each process.

`launch --num_processes=W -- --config.mode=asp` (docs/async.md, "Across processes") runs
worker k in process k, so each worker can have its own CPU quota (`launch --cpu_quota`): a
real heterogeneous cluster whose workers compute at their own speeds. JAX moves data between
processes only through collectives, which every process enters together (a push through one
would wait for the slowest process), so the processes do not join one JAX run: each is a
JAX program of its own, with the run's W CPU devices, and they talk over one socket a worker
(`multiprocessing.connection`, on the launcher's coordinator address).

Process 0 runs the async loop (asp/loop.py) with `RemoteServer`, which has the interface of
the eager executor (asp/eager.py): worker 0 computes on device 0 of process 0 as in one
process; for worker k > 0 a start sends the parameters it pulls (the packed vector), its
sample rows (indices into the data set every process holds), the step, its injected delay,
coefficient and weight; process k computes the same program on its device k (`serve`) and
sends back the push, the loss sum and the count. The server applies a remote push, and the
controller decides, on a spare CPU device of process 0 (each process has W + 1), never behind
worker 0's gradient on device 0. With `clock=wall` a remote worker's time runs from the send
to the arrival of its push: the transfers and the worker's host work are part of it, as they
are of a real server's wait.

With `asp.server_process` (`launch --num_processes=W+1`) process 0 is the server's alone and
worker k runs in process k + 1: the server's host work (applying pushes, sending parameters)
then takes no CPU from a worker, as on a cluster whose parameter server has a machine of its
own (with the server beside worker 0, that process's CPU was measured saturated under quotas,
docs/cluster_quotas.md).

Every process builds the same trainer from the same config, so worker k's program is the one
a single-process run compiles for device k, and on the virtual clock a run across processes
gives the single-process event-by-event run's parameters to the last bit (tests/
test_async_remote.py).
"""

from __future__ import annotations

import os
import queue
import signal
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Client, Connection, Listener
from typing import Any

import jax
import numpy as np

from omnilearn_jax.asp.eager import EagerServer
from omnilearn_jax.run.distributed import first_remote, worker_index
from omnilearn_jax.run.launch import KEY_ENV

CONNECT_SECONDS = 600.0  # how long a worker keeps trying to reach the server


def address(config, environ=None) -> tuple[tuple[str, int], bytes]:
    """The server's socket address (the coordinator address the launcher passes) and the
    connection's key: the secret in `KEY_ENV`, which the launcher draws for each run and
    processes on several hosts must share (the messages are pickles: whoever holds the key
    can run code in process 0); without it the address itself, which keeps runs on one
    machine apart but is no secret (a warning says so for an address off this machine)."""
    environ = os.environ if environ is None else environ
    where = str(config.distributed.coordinator_address)
    host, port = where.rsplit(":", 1)
    secret = environ.get(KEY_ENV, "")
    if not secret and host not in ("127.0.0.1", "localhost", "::1"):
        print(
            f"warning: {KEY_ENV} is not set: the async run's socket at {where} accepts any "
            f"peer that knows the address; set it to one secret in every process",
            file=sys.stderr,
            flush=True,
        )
    return (host, int(port)), (secret or where).encode()


class Reply:
    """A remote worker's push in flight: `block_until_ready` returns once it has arrived (so
    the engine's stopwatch times it as it times a device's launch)."""

    def __init__(self):
        self.arrived = threading.Event()
        self.value: tuple | None = None
        self.error: BaseException | None = None

    def block_until_ready(self) -> None:
        self.arrived.wait()
        if self.error is not None:
            raise self.error


class RemoteServer(EagerServer):
    """The eager executor, with workers 1..W-1 in processes of their own (every worker with
    `asp.server_process`: the server then computes no gradient)."""

    def __init__(self, trainer, l2: float, timed: bool = False):
        super().__init__(trainer, l2, timed)
        self.first = first_remote(trainer.config)  # workers below it compute here
        self.where, self.key = address(trainer.config)
        self.listener: Listener | None = None
        self.links: dict[int, Connection] = {}
        self.replies: dict[int, Reply] = {}
        self.readers: list[threading.Thread] = []
        self.outboxes: dict[int, queue.SimpleQueue] = {}  # k -> messages its sender sends

    def warm_up(self, shared: int) -> None:
        """Compiles and runs the programs of the workers that compute here (worker 0, or
        none with `asp.server_process`) and the update on each device pushes are applied on
        (`applies_on`), then waits until every remote worker has compiled its own and connected
        (the run's start barrier)."""
        super().warm_up(shared)
        w = self.t.config.num_workers
        self.listener = Listener(self.where, authkey=self.key)
        while len(self.links) < w - self.first:
            link = self.listener.accept()
            kind, k, *theirs = link.recv()
            if kind != "ready" or not self.first <= k < w or k in self.links:
                raise RuntimeError(f"unexpected hello {kind!r} from worker {k}")
            check_same_config(self.t.config, k, theirs[0] if theirs else None)
            self.links[k] = link
            self.outboxes[k] = queue.SimpleQueue()
            self.readers.append(threading.Thread(target=self._read, args=(k, link), daemon=True))
            self.readers[-1].start()
            threading.Thread(target=self._send, args=(k, link), daemon=True).start()

    def _send(self, k: int, link: Connection) -> None:
        """Sends worker k's messages in order, off the loop's thread: a send returns only
        once the receiver has taken most of it, and a worker under a tight quota takes its
        time (measured: 370 kB to a quarter-core process held the server's loop for tens of
        milliseconds an update, while the fast worker's push waited to be applied)."""
        while True:
            message = self.outboxes[k].get()
            try:
                link.send(message)
            except OSError:
                return  # its process is gone: the reader fails its push
            if message[0] == "stop":
                return

    def _read(self, k: int, link: Connection) -> None:
        """Worker k's pushes, as they arrive (one in flight at a time)."""
        while True:
            try:
                message = link.recv()
            except (EOFError, OSError) as error:
                if (reply := self.replies.get(k)) is not None and not reply.arrived.is_set():
                    reply.error = RuntimeError(f"worker {k}'s process went away: {error!r}")
                    reply.arrived.set()
                return
            reply = self.replies[k]
            if message[0] == "error":
                reply.error = RuntimeError(f"worker {k} failed: {message[1]}")
            else:
                reply.value = message[1:]
            reply.arrived.set()

    def start(self, k: int, rows, step_index: int, speeds, coefficient: float, weight: float):
        if self.computes_here(k):
            return super().start(k, rows, step_index, speeds, coefficient, weight)
        params = jax.device_get(self._packed().params)
        delay = self.t.worker_delay(k, len(rows), speeds)
        reply = self.replies[k] = Reply()
        self.pushes[k] = reply
        if self.timed:  # from the send to the push's arrival
            self.stopwatch.start(k)
        self.outboxes[k].put(("grad", np.asarray(rows), step_index, params, delay,
                            float(coefficient), float(weight)))  # fmt: skip
        return self.stopwatch.stop_when_ready(k, reply) if self.timed else None

    def _arrived(self, k: int) -> None:
        """Worker k's (push, loss sum) as the eager executor keeps it, waited for; a remote
        worker's on the device the server applies it on (also one restored from a
        checkpoint, which `load` placed on device k)."""
        got = self.pushes[k]
        if isinstance(got, Reply):
            got.block_until_ready()
            got = got.value[:2]
        if k in self.links:
            self.pushes[k] = tuple(jax.device_put(tuple(got), self.applies_on(k)))

    def computes_here(self, k: int) -> bool:
        return k < self.first

    def applies_on(self, k: int):
        """A local worker's own device; for a remote worker's push the process's spare
        device (`Engine.host`: main.py gives an async process across processes one more CPU
        device than the run has workers), free of any gradient. On device 0 an update
        queued behind worker 0's gradient in flight there, and so did the next start of the
        worker whose push it was."""
        return super().applies_on(k) if self.computes_here(k) else self.engine.host

    def apply(self, k: int, weight: float, step_scale: float):
        self._arrived(k)
        return super().apply(k, weight, step_scale)

    def in_flight(self, k: int) -> tuple[Any, np.ndarray]:
        self._arrived(k)
        return super().in_flight(k)

    def close(self) -> None:
        """Tells every worker to stop and waits until each has hung up, so that no reader
        thread is left at exit (one ended by the interpreter's shutdown while it reads can
        abort the process)."""
        for outbox in self.outboxes.values():
            outbox.put(("stop",))
        for reader in self.readers:
            reader.join(timeout=30)
        for link in self.links.values():
            link.close()
        if self.listener is not None:
            self.listener.close()
        super().close()


def dismiss(config) -> None:
    """The server of a finished run run again: each worker process, which compiles and
    connects as for a run, is told to stop at once. The server had returned without listening
    (its loop found the run complete before its warm-up, where it listens), each worker tried
    to connect for CONNECT_SECONDS, and the launcher waited on them."""
    where, key = address(config)
    with Listener(where, authkey=key) as listener:
        for _ in range(int(config.num_workers) - first_remote(config)):
            with listener.accept() as link:
                link.recv()  # its hello
                link.send(("stop",))


def worker_config(config):
    """Worker k's copy of the run's config: it times nothing and calibrates nothing (the
    server's clock is the run's), so a fixed cost spares it the calibration steps."""
    mine = config.copy_and_resolve_references()
    if float(mine.cost.per_sample_cost) == 0:
        mine.cost.per_sample_cost = 1e-3
    return mine


def check_same_config(config, k: int, theirs: dict | None) -> None:
    """Worker k's process runs the server's config (it builds its own data and optimiser
    from it and is sent only row indices: a worker given another data seed, path or weight
    decay sent wrong gradients without a word)."""
    from omnilearn_jax.run.loop import PER_PROCESS, as_stored, config_changes

    if theirs is not None and (detail := config_changes(as_stored(config), theirs, PER_PROCESS)):
        raise ValueError(
            f"worker {k}'s process was given another config than the server's ({detail}); "
            f"give every process of a run the same config"
        )


def serve(make_trainer, config, say=print) -> int:
    """A worker process (k > 0) of an async run across processes: builds the run's trainer,
    compiles its worker's programs (worker k, or k - 1 with `asp.server_process`), joins its
    deferred CPU quota group (`launch --quota_from=steps`), connects to the server and
    computes each gradient it is sent until told to stop. While it serves, SIGINT is the
    server's alone (the launcher sends one to every process): the server saves at the signal
    with the pushes in flight, then tells each worker to stop; a worker that died of the
    signal first had failed that save (SIGTERM still stops a worker).
    `make_trainer(config, workdir)` builds a trainer; returns how many gradients it served."""
    from omnilearn_jax.engine import buckets, optim
    from omnilearn_jax.run import cgroups

    k = worker_index(config)
    with tempfile.TemporaryDirectory() as private:  # nothing of the run store is its
        trainer = make_trainer(worker_config(config), private)
        executor = EagerServer(trainer, optim.coupled_decay(config.optimizer))
        executor.warm_up(buckets.uniform_bucket(config.global_batch_size, trainer.layout))
        if (group := cgroups.enter_deferred()) is not None:
            say(f"worker {k}: CPU quota applies from the first gradient (group {group.name})")
        link = connect(*address(config))
        from omnilearn_jax.run.loop import as_stored

        link.send(("ready", k, as_stored(config)))  # the server checks it is its own
        say(f"worker {k}: compiled, serving the server at {config.distributed.coordinator_address}")
        served = 0
        main = threading.current_thread() is threading.main_thread()  # where handlers live
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
        try:
            while (message := link.recv())[0] == "grad":
                _, rows, step_index, params, delay, coefficient, weight = message
                try:
                    out = executor.compute(k, params, rows, step_index, delay, coefficient,
                                           weight)  # fmt: skip
                    push, loss, count = jax.device_get(out)
                except Exception as error:  # noqa: BLE001 - the server raises it
                    link.send(("error", f"{type(error).__name__}: {error}"))
                    raise
                link.send(("push", push, loss, count))
                served += 1
        except EOFError:
            raise SystemExit(f"worker {k}: the server (process 0) went away") from None
        finally:
            if main:
                signal.signal(signal.SIGINT, previous)
            link.close()  # the server's reader ends on it
            executor.close()
        say(f"worker {k}: served {served} gradients")
        return served


def connect(where: tuple[str, int], key: bytes) -> Connection:
    """A connection to the server, tried until it listens (it does once it has compiled)."""
    deadline = time.monotonic() + CONNECT_SECONDS
    while True:
        try:
            return Client(where, authkey=key)
        except (ConnectionRefusedError, FileNotFoundError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
