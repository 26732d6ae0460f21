"""Executing an async schedule event by event (the wall clock's way; docs/async.md).

The server's state lives on one device (worker 0's). Each started worker runs in a thread of
its own: it lays out its block, pulls the version it started from onto its own device,
computes its sums there with the same per-(device, bucket) program a BSP step uses (compiled
at warm-up), forms what it pushes and sends it to the server's device. With `wall`, its
compute is timed from its own launch until its sums are ready.

It has the interface of `asp_exec.BatchedServer`, so `asp.AsyncLoop` runs either; on the
virtual clock it is the reference the batched execution is tested against.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from omnilearn_jax.asp_wall import Unmeasured
from omnilearn_jax.step import TrainState


def make_server(tx):
    """state, contribution (on the server's device), weight, step scale -> state."""

    def apply(state: TrainState, contribution, weight, step_scale):
        updates, opt_state = tx.update(
            contribution, state.opt_state, state.params, weight=weight, step_scale=step_scale
        )
        return TrainState(state.step + 1, optax.apply_updates(state.params, updates), opt_state)

    return jax.jit(apply)


def make_contribution(l2: float):
    """What a worker pushes: coefficient * gradient sum + weight * L2 * pulled parameters
    (the gradient sum of a local program has a leading device axis of 1)."""

    def contribution(grad_sum, pulled, coefficient, weight):
        if not l2:
            return jax.tree.map(lambda g: coefficient * g[0], grad_sum)
        return jax.tree.map(lambda g, p: coefficient * g[0] + weight * l2 * p, grad_sum, pulled)

    return jax.jit(contribution)


class EagerServer:
    """The server's state on one device; each push computed in a thread of its own."""

    def __init__(self, trainer, l2: float, threads: int, unmeasured: Unmeasured | None = None):
        self.t = trainer
        self.unmeasured = unmeasured  # set on the wall clock: compute is timed
        self.server_device = trainer.worker_device(0)
        self.apply_program = make_server(trainer.tx)
        self.contribute = make_contribution(l2)
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="worker")
        self.state: TrainState | None = None
        self.pushes: dict[int, Any] = {}  # worker -> Future of, or, (push, loss[, seconds])

    def start(self, k: int, rows, step_index: int, speeds, coefficient: float, weight: float):
        """Worker k pulls the current version and starts on `rows`; returns its future."""
        params = self.server_state().params
        batch = (rows, step_index, speeds)
        future = self.pool.submit(self._compute, k, params, batch, coefficient, weight)
        self.pushes[k] = future
        return future

    def _compute(self, k: int, params, batch: tuple, coefficient: float, weight: float):
        """On worker k's thread: lay out its batch, pull, compute, and push."""
        block = self.t.worker_batch(k, *batch)
        pulled = jax.device_put(params, self.t.worker_device(k))
        timed = self.unmeasured is not None
        if timed:  # the transfer is not compute
            jax.block_until_ready(pulled)
        start = time.perf_counter()
        sums = self.t.worker_sums(pulled, block)
        if timed:
            sums.count.block_until_ready()
        seconds = time.perf_counter() - start
        push = self.contribute(sums.grad, pulled, np.float32(coefficient), np.float32(weight))
        return jax.device_put(push, self.server_device), sums.loss, seconds

    def seconds(self, k: int) -> float:
        """Worker k's measured compute seconds (waits for it)."""
        return self._result(k)[2]

    def _result(self, k: int) -> tuple:
        got = self.pushes[k]
        if isinstance(got, Future):
            got = self.pushes[k] = got.result()
        return got

    def apply(self, k: int, weight: float, step_scale: float):
        """The server applies worker k's push; returns that push's loss sum."""
        push, loss, _ = self._result(k)
        del self.pushes[k]
        state = self.server_state()
        self.state = self.apply_program(state, push, np.float32(weight), np.float32(step_scale))
        return loss

    def server_state(self) -> TrainState:
        if self.state is None:  # through the host: a plain single-device state, not a view
            # of the mesh's replicated one (whose arrays keep the mesh in their type)
            host = jax.tree.map(np.asarray, self.t.state)
            self.state = jax.device_put(host, self.server_device)
        return self.state

    def replicated_state(self) -> TrainState:
        return self.t.placement.replicate(self.server_state())

    def in_flight(self, k: int) -> tuple[Any, np.ndarray]:
        push, loss, _ = self._result(k)
        return jax.tree.map(np.asarray, push), np.asarray(loss)

    def load(self, flights: dict[int, tuple]) -> None:
        """Starts from the trainer's state and the given pushes in flight (worker -> host
        push and loss sum), as restored from a checkpoint."""
        self.state = None
        self.pushes = {
            k: (
                jax.device_put(push, self.server_device),
                jax.device_put(loss, self.t.worker_device(k)),
                0.0,
            )
            for k, (push, loss) in flights.items()
        }

    def warm_up(self, shared: int) -> None:
        """Compiles the server update and each worker's contribution (on a throwaway copy),
        so that no update compiles; on the wall clock, runs each worker's programs once."""
        del shared
        t = self.t
        copy = jax.device_put(jax.tree.map(np.array, t.state), self.server_device)
        zeros = jax.tree.map(jnp.zeros_like, copy.params)
        one = np.float32(1.0)
        for k in range(t.config.num_workers):  # a local program's sums: leading axis of 1
            pulled = jax.device_put(copy.params, t.worker_device(k))
            grad = jax.device_put(jax.tree.map(lambda z: z[None], zeros), t.worker_device(k))
            jax.block_until_ready(self.contribute(grad, pulled, one, one))
        jax.block_until_ready(self.apply_program(copy, zeros, one, one))
        if self.unmeasured is not None:  # timed: a program's first run on a device carries
            # one-time costs that would be measured as compute (and then held by the guard)
            no_delay = np.full(t.config.num_workers, np.inf)
            for k in range(t.config.num_workers):
                pulled = jax.device_put(copy.params, t.worker_device(k))
                for rows in t.layout.buckets:
                    block = t.worker_batch(k, np.arange(rows), 0, no_delay)
                    jax.block_until_ready(t.worker_sums(pulled, block))

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
