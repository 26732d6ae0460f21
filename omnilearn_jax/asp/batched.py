"""Executing an async schedule on the virtual clock in batches (docs/async.md, Execution).

On the virtual clock who starts when, from which server version, and in which order the
server applies the pushes depend on the split, the cost model's times and the staleness
bound only, never on parameter values. `asp.AsyncLoop` decides that schedule on the host
and hands it here as a stream of starts and applies; the work is run in batches:

- a *wave*: the workers started since the last batch (each from its own version; a worker
  has at most one push in flight, so at most one start per device). Their gradients are one
  call on the per-device layout: one launch over the mesh with per-device parameters when
  every device computes the shared bucket (as a uniform BSP step), else each device's own
  (device, bucket) program, dispatched asynchronously. Each device turns its sums into what
  its worker pushes, one vector (flat.py), and keeps it, in flight, on its own device: one
  array [D, n] sharded over the data axis.
- the applies between two waves: one jitted loop over the server updates (`lax.fori_loop`,
  as many trips as updates, at most a fixed number) on one device (the first), where the
  server's state lives, packed; it also gives each worker of the next wave the parameters of
  the version it pulled, which one transfer call sends to the wave's devices. On one device
  the loop costs about a tenth of the same loop replicated over the mesh (0.4 ms against
  3-4 ms on the 2-core CPU: a program over the mesh pays for its collectives), and the wave
  itself needs no collective at all.

A wave is run when the server is about to apply a push of one of its workers, when the
applies pending reach the loop's bound, and whenever the state or a push is needed (an
evaluation, a checkpoint). All of these points follow from the schedule alone, so a resumed
run batches exactly as an unbroken one and reproduces it bit for bit. The state is replicated
on the mesh only when the trainer needs it (evaluation, checkpoints, the end). Nothing here
compiles after `warm_up`.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from omnilearn_jax.asp.eager import contribution
from omnilearn_jax.engine.buckets import Block
from omnilearn_jax.engine.flat import Flat, flattenable, packed_state, unpacker
from omnilearn_jax.engine.step import AXIS, TrainState, mesh_inputs


def plan_of(applies: list, length: int, pull_at: np.ndarray) -> np.ndarray:
    """The applies' inputs as one float32 vector (one transfer, not five; the integers are
    small and exact in float32): per update (worker, weight, step scale) [length] of which
    the first `count` are applied, `count`, and per device the number of updates after which
    it pulls [D]."""
    plan = np.zeros(3 * length + 1 + len(pull_at), np.float32)
    for i, update in enumerate(applies):
        plan[[i, length + i, 2 * length + i]] = update
    plan[3 * length], plan[3 * length + 1 :] = len(applies), pull_at
    return plan


def applies_fn(tx, length: int, devices: int):
    """On one device: packed state, each device's push in flight (D arrays [1, n]), the plan
    (`plan_of`) -> (state, each device's pulled parameters, D arrays [1, n]): one loop of
    `count` trips (the unused tail costs nothing)."""

    def run(state, pushes, plan):
        workers = plan[:length].astype(jnp.int32)
        weights, scales = plan[length : 2 * length], plan[2 * length : 3 * length]
        count = plan[3 * length].astype(jnp.int32)
        pull_at = plan[3 * length + 1 :].astype(jnp.int32)
        pushes = jnp.concatenate(pushes)

        def body(i, carry):
            st, history = carry
            updates, opt_state = tx.update(
                pushes[workers[i]], st.opt_state, st.params, weight=weights[i], step_scale=scales[i]
            )
            st = TrainState(st.step + 1, optax.apply_updates(st.params, updates), opt_state)
            return st, history.at[i + 1].set(st.params)

        history = jnp.zeros((length + 1, *state.params.shape), state.params.dtype)
        state, history = jax.lax.fori_loop(0, count, body, (state, history.at[0].set(state.params)))
        return state, [history[pull_at[d]][None] for d in range(devices)]

    return run


def _merge(l2: float):
    """On one device: its worker's push, packed (coefficient * gradient sum + weight * L2 *
    pulled), where it is in the wave (`fresh`), else the push it holds [1, n]. The gradient
    sum comes packed [1, n] (the parameters' one dtype)."""

    def merge(g, pulled, coefficient, weight, held, fresh):
        g = g.astype(pulled.dtype)
        return jnp.where(fresh[0], contribution(g, pulled, coefficient[0], weight[0], l2), held)

    return merge


def merge_fn(l2: float, mesh):
    """Over the mesh: (packed sums [D, n + 3] as the engine's programs give them, pulled
    [D, n], coefficient, weight, pushes held [D, n], fresh) -> pushes [D, n] (a wave computed
    device by device)."""
    spec = P(AXIS)
    merge = _merge(l2)

    def per_device(packed, *rest):
        return merge(packed[:, :-3], *rest)  # the gradient's part: see step.pack_sums

    return jax.shard_map(per_device, mesh=mesh, in_specs=(spec,) * 6, out_specs=spec)


def wave_fn(device_sums, pack, l2: float, mesh):
    """Over the mesh, with no collective: each device's sums from its own pulled parameters
    [1, n], turned into its worker's push; devices not in the wave keep the push they hold."""
    merge = _merge(l2)

    def per_device(pulled, x, y, mask, coefficient, weight, held, fresh):
        sums = device_sums(pack.tree(pulled[0]), x, y, mask)
        g = pack.vector(jax.tree.map(lambda a: a[0], sums.grad))[None]
        return merge(g, pulled, coefficient, weight, held, fresh), sums.loss

    spec = P(AXIS)
    return jax.shard_map(per_device, mesh=mesh, in_specs=(spec,) * 8, out_specs=(spec, spec))


class BatchedServer:
    """The server's state and the pushes in flight, advanced by batches of a schedule."""

    def __init__(self, trainer, l2: float, length: int):
        t = self.t = trainer
        e = self.engine = trainer.engine
        if not flattenable(t.state.params):  # they travel and are updated as one vector
            raise NotImplementedError(
                "batched async execution updates the parameters as one vector; this model's "
                "parameters have mixed dtypes"
            )
        self.devices = list(e.devices)
        self.w = len(self.devices)
        self.length = length
        self.pack = Flat(t.state.params)
        mesh = e.placement.mesh
        self.stacked = NamedSharding(mesh, P(AXIS))
        self.applies_program = jax.jit(applies_fn(t.tx, length, self.w))
        self.wave_program = jax.jit(wave_fn(e.device_sums, self.pack, l2, mesh))
        self.merge = jax.jit(merge_fn(l2, mesh))
        self.unpack_rows = jax.jit(lambda row: self.pack.tree(row[0]))  # on each device
        self.unpack_state = unpacker(self.pack, t.state.opt_state)
        self.shared = 0  # the bucket the wave program is compiled for
        self.state: TrainState | None = None  # packed, on the first device
        self.pushes = None  # [D, n] sharded: each device's worker's push in flight
        self.losses: dict[int, Any] = {}  # worker -> loss sum [1] of its latest push
        self.applies: list[tuple[int, float, float]] = []
        self.wave: dict[int, tuple] = {}  # worker -> (updates before its pull, rows, ...)

    # -- the schedule's stream -------------------------------------------------------------
    def start(self, k: int, rows, step_index: int, speeds, coefficient: float, weight: float):
        """Worker k pulls the current version and starts on `rows` (training rows); it is
        computed with its wave (the virtual clock's `speeds` add nothing to a batch)."""
        del speeds
        if k in self.wave or self._input_fault_between(step_index):
            self.run()
        self.wave[k] = (len(self.applies), np.asarray(rows), step_index, coefficient, weight)

    def apply(self, k: int, weight: float, step_scale: float):
        """The server applies worker k's push; returns the loss sum of that push (an array
        that is ready once the wave that computed it is)."""
        if k in self.wave:
            self.run()
        self.applies.append((k, weight, step_scale))
        loss = self.losses[k]
        if len(self.applies) == self.length:
            self.run()
        return loss

    def _input_fault_between(self, step_index: int) -> bool:
        """A planted NaN-input step is laid out per wave: a wave never spans it."""
        nan_step = self.t.faults.nan_step
        if nan_step < 0 or not self.wave:
            return False
        first = next(iter(self.wave.values()))[2]
        return first != step_index and nan_step in (first, step_index)

    # -- running a batch -------------------------------------------------------------------
    def run(self) -> None:
        """Applies the pending updates in one loop on the first device, sends each wave
        device the version it pulled, then computes the wave; one program over the mesh
        when the wave's devices all compute the shared bucket."""
        if not self.applies and not self.wave:
            return
        pull_at = np.zeros(self.w, np.int32)
        for k, (j, *_) in self.wave.items():
            pull_at[k] = j
        plan = plan_of(self.applies, self.length, pull_at)
        state, wave = self.ensure_state(), self.wave
        self.applies, self.wave = [], {}
        held = jax.device_put(self.engine.shards(self.pushes), self.devices[0])
        self.state, pulled = self.applies_program(state, held, plan)
        if not wave:
            return
        pulled = self._assemble(jax.device_put(pulled, self.devices))  # [D, n]: one call
        sizes = np.zeros(self.w, np.int64)
        coefficient, weight, fresh = np.zeros((3, self.w), np.float32)
        for k, (_, rows, _, c, wt) in wave.items():
            sizes[k], coefficient[k], weight[k], fresh[k] = len(rows), c, wt, 1
        rows = np.concatenate([wave[k][1] for k in sorted(wave)])
        blocks = self.engine.batch(rows, sizes, None, next(iter(wave.values()))[2])
        host = self._per_device(coefficient, weight, fresh)
        if self.shared and blocks.shared == self.shared:
            inputs = mesh_inputs(blocks, 3, self._assemble)  # x, y, mask
            args = (pulled, *inputs, *host[:2], self.pushes, host[2])
            self.pushes, losses = self.wave_program(*args)
            losses = self.engine.shards(losses)
            for k in wave:
                self.losses[k] = losses[k]
            return
        self._wave_per_device(wave, pulled, blocks, host)

    def _wave_per_device(self, wave, pulled, blocks, host) -> None:
        """Each wave device's own (device, bucket) program, dispatched asynchronously, then
        one program over the mesh that turns the sums into pushes."""
        rows = self.engine.shards(pulled)
        results = [None] * self.w
        for k in sorted(wave):
            packed = self.engine.worker_sums(self.unpack_rows(rows[k]), blocks[k])
            results[k] = packed
            self.losses[k] = packed[0, -3]  # the loss sum: see step.pack_sums
        sums = self.engine.stack(blocks, results)  # zeros where not in the wave
        self.pushes = self.merge(sums, pulled, *host[:2], self.pushes, host[2])

    def _per_device(self, coefficient, weight, fresh) -> tuple:
        """A wave's coefficients, weights and membership, one value a device, placed on the
        data axis; kept for the next wave (a split held by a controller repeats them)."""
        return self.engine.constant(self.stacked, (coefficient, weight, fresh > 0))

    def _assemble(self, arrays: list):
        return self.engine.assemble(arrays)  # the BSP step's layout: one worker a device

    # -- the state, checkpoints ------------------------------------------------------------
    def ensure_state(self) -> TrainState:
        if self.pushes is None:  # a fresh start: the trainer's state, nothing in flight
            self.state = packed_state(self.pack, self.t.state, self.devices[0])
            self.pushes, self.losses = self._placed({}), {}
        return self.state

    def server_state(self) -> TrainState:
        """The state after every update scheduled so far (runs what is pending), with the
        parameters' own shapes, on the first device."""
        self.ensure_state()
        self.run()
        return self.unpack_state(self.state)

    def replicated_state(self) -> TrainState:
        return self.engine.replicate(self.server_state())

    def close(self) -> None:
        pass

    def in_flight(self, k: int) -> tuple[Any, np.ndarray]:
        """Worker k's push in flight and its loss sum, on the host."""
        self.server_state()
        row = np.asarray(self.engine.shards(self.pushes)[k])[0]
        return jax.tree.map(np.asarray, self.pack.tree(row)), np.asarray(self.losses[k])

    def load(self, flights: dict[int, tuple]) -> None:
        """Starts from the trainer's state and the given pushes in flight (worker -> host
        push and loss sum), as restored from a checkpoint."""
        self.state = packed_state(self.pack, self.t.state, self.devices[0])
        self.applies, self.wave = [], {}
        self.pushes = self._placed({k: push for k, (push, _) in flights.items()})
        self.losses = {
            k: jax.device_put(np.asarray(loss), self.devices[k]) for k, (_, loss) in flights.items()
        }

    def _placed(self, pushes: dict):
        """Pushes in flight (worker -> host tree; zeros for the others), packed, as [D, n] on
        the data axis."""
        params = jax.tree.map(np.asarray, self.t.state.params)
        zeros = np.zeros(sum(self.pack.sizes), jax.tree.leaves(params)[0].dtype)
        rows = [
            np.asarray(self.pack.vector(pushes[k]))[None] if k in pushes else zeros[None]
            for k in range(self.w)
        ]
        return self._assemble(jax.device_put(rows, self.devices))

    def warm_up(self, shared: int) -> None:
        """Compiles the updates' loop, the unpacking on each device, the merge and the wave
        program of the shared bucket, run once on the trainer's state (nothing is donated:
        it stays as it was) and pushes of zeros, so that no split compiles."""
        kept = self.state, self.pushes, self.losses
        self.load({})
        idle = np.zeros(self.w, np.int32)
        held = jax.device_put(self.engine.shards(self.pushes), self.devices[0])
        pulled = self.applies_program(self.state, held, plan_of([], self.length, idle))[1]
        pulled = self._assemble(jax.device_put(pulled, self.devices))
        trees = [self.unpack_rows(row) for row in self.engine.shards(pulled)]
        host = jax.device_put(
            (np.ones(self.w, np.float32),) * 2 + (idle > 0,), self.stacked
        )  # coefficient, weight, fresh
        jax.block_until_ready(trees)
        # Packed sums as the engine's programs give them (step.pack_sums: one dtype, the
        # parameters' promoted with the float32 loss), zeros on every device.
        zero = np.zeros((1, pulled.shape[1] + 3), jnp.result_type(pulled.dtype, jnp.float32))
        placed = jax.device_put([zero] * self.w, self.devices)
        sums = self._assemble(placed)
        jax.block_until_ready(self.merge(sums, pulled, *host[:2], self.pushes, host[2]))
        # A wave reads each device's loss sum off its packed sums (`_wave_per_device`), an
        # op-by-op slice that compiled at each device's first wave: 8 compiles after warm-up.
        jax.block_until_ready([z[0, -3] for z in placed])
        jax.block_until_ready(self.unpack_state(self.state))
        if shared:
            e = self.engine
            x, y = e.x[:1], e.y[:1]
            blank = np.zeros(shared, bool)
            empty = [
                np.zeros((shared, *x.shape[1:]), x.dtype),
                np.zeros((shared, *y.shape[1:]), y.dtype),
            ]
            blocks = e.placement.blocks(
                [Block(p, shared, np.zeros(shared, np.int64), blank) for p in range(self.w)],
                [empty[0]] * self.w, [empty[1]] * self.w, [blank] * self.w, None, shared,
            )  # fmt: skip
            inputs = mesh_inputs(blocks, 3, self._assemble)  # as `run` takes them
            out = self.wave_program(pulled, *inputs, *host[:2], self.pushes, host[2])
            jax.block_until_ready(out)
            self.shared = shared
        self.state, self.pushes, self.losses = kept
