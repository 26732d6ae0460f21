"""Executing an async schedule event by event (the wall clock's way; docs/async.md).

The server's parameters and the optimiser's parameter-shaped state are one vector each
(flat.py). A started worker's whole gradient is one launch of a program compiled at warm-up
for its bucket (once, loaded onto every device): it unpacks the parameters it pulled, computes
the same sums a BSP step's local program does, and forms what it pushes, one vector. Launches
are asynchronous, so the workers started compute at the same time, each on its own device;
its rows go to the program from the host (the program's own transfer costs far less host
time than a transfer call). The server applies a push on the pushing worker's device: the
state moves there (one transfer an update instead of a push and a pull), and that worker's
next pull, the common case, needs no transfer. On the wall clock the engine's stopwatch
times each compute from its launch until its sums are ready (a waiter thread a worker).

It has the interface of `batched.BatchedServer`, so `asp.AsyncLoop` runs either; on the
virtual clock it is the reference the batched execution is tested against.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import jax
import numpy as np
import optax

from omnilearn_jax.engine.flat import packed_state, packer, unpacker
from omnilearn_jax.engine.step import TrainState
from omnilearn_jax.engine.stopwatch import Stopwatch


class Pending:
    """Output `index` of a launch made in another thread: what the stopwatch waits on."""

    def __init__(self, launched: Future, index: int):
        self.launched, self.index = launched, index

    def get(self):
        return self.launched.result()[self.index]

    def block_until_ready(self):
        return self.get().block_until_ready()


def resolved(value):
    """An output, waiting for its launch if it was made in another thread (`Pending`)."""
    return value.get() if isinstance(value, Pending) else value


def make_server(tx):
    """state, contribution (on the server's device), [weight, step scale] -> state."""

    def apply(state: TrainState, contribution, scales):
        weight, step_scale = scales[0], scales[1]
        updates, opt_state = tx.update(
            contribution, state.opt_state, state.params, weight=weight, step_scale=step_scale
        )
        return TrainState(state.step + 1, optax.apply_updates(state.params, updates), opt_state)

    return jax.jit(apply)


def contribution(grad, pulled, coefficient, weight, l2: float):
    """What a worker pushes (asp.py): coefficient * gradient sum + weight * L2 * the
    parameters it pulled, both packed alike."""
    if not l2:
        return jax.tree.map(lambda g: coefficient * g, grad)
    return jax.tree.map(lambda g, p: coefficient * g + weight * l2 * p, grad, pulled)


def make_worker(device_sums, pack, l2: float):
    """((packed parameters, [coefficient, weight]), *block) -> (packed push, loss sum,
    count), in one launch: the parameters unpacked, the local program's sums, and what the
    worker pushes, coefficient * gradient sum + weight * L2 * pulled parameters."""

    def worker(pulled, *block):
        packed, (coefficient, weight) = pulled
        sums = device_sums(pack.tree(packed), *block)
        grad = pack.vector(jax.tree.map(lambda g: g[0], sums.grad))
        return contribution(grad, packed, coefficient, weight, l2), sums.loss, sums.count

    return jax.jit(worker)


class EagerServer:
    """The server's state (packed) on the device of the worker whose push it applied last;
    each worker's push launched as soon as it starts."""

    def __init__(self, trainer, l2: float, timed: bool = False):
        self.t = trainer
        self.engine = e = trainer.engine
        self.timed = timed  # the wall clock: each compute is timed
        self.server_device = e.worker_device(0)
        self.pack = packer(trainer.state.params)
        self.apply_program = make_server(trainer.tx)
        self.worker = make_worker(e.device_sums, self.pack, l2)
        self.programs: dict[tuple[int, int], Any] = {}  # (worker, rows) -> compiled worker
        self.unpack_state = unpacker(self.pack, trainer.state.opt_state)
        self.stopwatch = Stopwatch()  # wall clock: each worker's compute, timed
        self.state: TrainState | None = None  # packed
        self.home = self.server_device  # the device the state is on
        self.pushes: dict[int, tuple] = {}  # worker -> (push, loss), on its device
        self._pool: ThreadPoolExecutor | None = None  # launches that sleep (hetero.inject)

    def start(self, k: int, rows, step_index: int, speeds, coefficient: float, weight: float):
        """Worker k pulls the current version and starts on `rows`. Every launch is
        asynchronous, so the workers started compute at the same time, each on its own
        device. On the wall clock returns the future of its measured seconds."""
        params = self._packed().params
        delay = self.t.worker_delay(k, len(rows), speeds)
        if self.timed:  # from its launch, which sends its rows (on one host, memory copies)
            self.stopwatch.start(k)
        args = (k, params, rows, step_index, delay, coefficient, weight)
        if delay is None:
            push, loss, count = self.compute(*args)
        else:  # a program that sleeps in a host callback (hetero.inject) runs in its launching
            # thread on XLA:CPU: launched from this one, the workers' waits ran one after
            # another (3.55 s of steps for a 0.65 s clock); a thread each, as BSP's devices
            launched = self._launcher().submit(self.compute, *args)
            push, loss, count = (Pending(launched, i) for i in range(3))
        self.pushes[k] = (push, loss)
        return self.stopwatch.stop_when_ready(k, count) if self.timed else None

    def _launcher(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.t.config.num_workers, "inject")
        return self._pool

    def compute(self, k: int, params, rows, step_index: int, delay, coefficient, weight):
        """Worker k's launch on `rows` from the packed `params` it pulled (moved to its device
        unless there): (push, loss sum, count) on its device, not waited for."""
        device = self.engine.worker_device(k)
        block = self.engine.worker_block(k, rows, step_index, delay)
        here = isinstance(params, jax.Array) and params.devices() == {device}
        packed = params if here else jax.device_put(params, device)
        return self._launch(k, (packed, self._placed(device, coefficient, weight)), block)

    def _launch(self, k: int, pulled, block):
        """Worker k's program of its block's bucket: (push, loss sum, count) on its device."""
        return self.programs[(k, block.rows)](pulled, *self.engine.block_args(block))

    def _placed(self, device, a: float, b: float):
        """[a, b] (float32) on `device`: a worker's coefficient and weight, or an update's
        weight and step scale. A split held by a controller repeats them: placed once."""
        return self.engine.constant(device, [np.array([a, b], np.float32)])[0]

    def elapsed(self, k: int) -> float:
        """Wall clock: worker k's compute seconds so far (`Stopwatch.elapsed`)."""
        return self.stopwatch.elapsed(k)

    def seconds(self, k: int) -> float:
        """Worker k's measured compute seconds (waits for it)."""
        return self.stopwatch.seconds(k)

    def apply(self, k: int, weight: float, step_scale: float):
        """The server applies worker k's push, on k's device (the state moves there: one
        transfer an update instead of a push and a pull; the next pull of k, the common
        case, then needs none); returns that push's loss sum."""
        push, loss = (resolved(a) for a in self.pushes.pop(k))
        self.stopwatch.forget(k)
        where = self.applies_on(k)
        state = self._move(self._packed(), where)
        scales = self._placed(where, weight, step_scale)
        new = self.apply_program(state, push, scales)
        self.state = new._replace(step=state.step + 1)  # kept on the host (see _move)
        return loss

    def applies_on(self, k: int):
        """The device worker k's push is applied on: its own."""
        return self.engine.worker_device(k)

    def _move(self, state: TrainState, device) -> TrainState:
        """The state on `device`; its step count stays on the host (a program given it
        transfers it itself), so a move is one transfer call of what is packed."""
        if self.home != device:
            moved = jax.device_put((state.params, state.opt_state), device)
            state, self.home = state._replace(params=moved[0], opt_state=moved[1]), device
        return state

    def _packed(self) -> TrainState:
        if self.state is None:
            self.state, self.home = self._pack_trainer_state(), self.server_device
        return self.state

    def _pack_trainer_state(self) -> TrainState:
        state = packed_state(self.pack, self.t.state, self.server_device)
        return state._replace(step=np.asarray(state.step))

    def server_state(self) -> TrainState:
        """The server's state with the parameters' own shapes (on the server's device)."""
        self.state = self._move(self._packed(), self.server_device)
        return self.unpack_state(self.state)

    def replicated_state(self) -> TrainState:
        return self.engine.replicate(self.server_state())

    def in_flight(self, k: int) -> tuple[Any, np.ndarray]:
        push, loss = (resolved(a) for a in self.pushes[k])
        return jax.tree.map(np.asarray, self.pack.tree(np.asarray(push))), np.asarray(loss)

    def load(self, flights: dict[int, tuple]) -> None:
        """Starts from the trainer's state and the given pushes in flight (worker -> host
        push and loss sum), as restored from a checkpoint."""
        self.state = None
        self.pushes = {
            k: (
                jax.device_put(self.pack.vector(push), self.engine.worker_device(k)),
                jax.device_put(loss, self.engine.worker_device(k)),
            )
            for k, (push, loss) in flights.items()
        }

    def warm_up(self, shared: int) -> None:
        """Compiles each bucket's worker program (once, loaded onto every device), the
        server update and the unpacking, and runs each once (on a throwaway copy): every
        program of a worker that computes here, and the update on every device a push is
        applied on, so that no update compiles and no first run's one-time cost is measured
        as compute."""
        del shared
        e = self.engine
        copy = self._pack_trainer_state()
        workers = range(e.layout.num_devices)
        if any(self.computes_here(k) for k in workers):
            spec = lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype)  # noqa: E731
            first = (jax.tree.map(spec, copy.params), jax.ShapeDtypeStruct((2,), np.float32))
            todo = [r for r in e.layout.buckets if (0, r) not in self.programs]
            self.programs.update(e.worker_programs(self.worker, first, todo))
        no_delay = 0.0 if e.inject else None
        pushes = {}  # device -> (the state's copy there, a push of the shape applied there)
        for k in workers:  # a worker computing here: each bucket's program, on its device
            if self.computes_here(k):
                device = e.worker_device(k)
                mine, ones = self._copy_on(copy, device), self._placed(device, 1.0, 1.0)
                for rows in e.layout.buckets:
                    block = e.worker_block(k, np.arange(rows), 0, no_delay)
                    pushes[device] = mine, self._launch(k, (mine.params, ones), block)[0]
        for k in workers:  # pushes from other processes: any of their shape
            device = self.applies_on(k)
            if not self.computes_here(k) and device not in pushes:
                zeros = jax.device_put(np.zeros_like(np.asarray(copy.params)), device)
                pushes[device] = self._copy_on(copy, device), zeros
        for device, (mine, push) in pushes.items():  # the update, where pushes are applied
            ones = self._placed(device, 1.0, 1.0)
            jax.block_until_ready(self.apply_program(mine, push, ones))
        jax.block_until_ready(self.unpack_state(copy))

    def computes_here(self, k: int) -> bool:
        """Whether worker k computes in this process (each does, in one process)."""
        return True

    def _copy_on(self, copy: TrainState, device) -> TrainState:
        """A packed state's copy on `device`, as `_move` makes it."""
        moved = jax.device_put((copy.params, copy.opt_state), device)
        return copy._replace(params=moved[0], opt_state=moved[1])

    def close(self) -> None:
        self.stopwatch.close()
        if self._pool is not None:
            self._pool.shutdown()
