"""The engine: what runs on the devices, for the BSP loop and both async executors alike.

It owns the devices and their layout (buckets and blocks, buckets.py), the per-device programs
(every (device, bucket) program compiled once a bucket, shared across devices and run once at
warm-up, step.py and sharing.py), the one reduction and update, the evaluation, and the
per-device helpers the async executors build on (a worker's block and gradient, each device's
piece of an array sharded over the data axis, small constants placed once). The trainer asks
it for a step's blocks, a step or a worker's gradient, and knows nothing of devices.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from omnilearn_jax.engine import buckets, step
from omnilearn_jax.engine.memo import Last, key_of
from omnilearn_jax.engine.mesh import Placement


class Engine:
    """Steps and per-device work over `devices` under `layout`.

    `x`, `y`: the training set the blocks gather from; `inputs(step_index, x)`: what a step's
    rows become before they are placed (planted faults); `inject`: every local program takes
    an injected delay (hetero.inject), or with `host_wait` a BSP step waits each device's
    delay out on the host (`wait_order`, hetero.inject_order: after or before its compute,
    or after it computed alone; `Steps.run_local`); `global_batch`: B;
    `eval_rows`: the evaluation's rows a device; `flat`: the train state is held flat
    (`hold`).
    """

    def __init__(
        self,
        *,
        backend: str,
        devices: list,
        layout: buckets.Layout,
        apply,
        tx,
        x: np.ndarray,
        y: np.ndarray,
        inputs: Callable[[int, np.ndarray], np.ndarray],
        inject: bool,
        global_batch: int,
        eval_rows: int,
        host_wait: bool = False,
        flat: bool = False,
        wait_order: str = step.WAIT_ORDERS[0],
    ):
        self.placement = Placement(backend, devices)
        self.layout = layout
        self.devices = devices
        self.x, self.y, self._inputs = x, y, inputs
        host_wait = inject and host_wait
        self.steps = self.placement.steps(
            apply, tx, chunk=layout.chunk, inject=inject and not host_wait, host_wait=host_wait
        )
        self.steps.wait_order = wait_order  # where host waits go beside each device's compute
        self.inject = inject and not host_wait
        self.flat = flat
        self.global_batch = global_batch
        self.eval_layout = buckets.Layout(len(devices), 1, eval_rows, (), 0)
        self._packed = Last()  # the last split's blocks and placed masks
        self._worker_blocks: dict[tuple[int, int], tuple] = {}  # (worker, rows) -> packed
        self._constants: dict[tuple, Any] = {}  # (where, values) -> placed
        self.host = decision_device(devices)

    # -- state ---------------------------------------------------------------------------
    def replicate(self, tree):
        """`tree` replicated over the mesh (the BSP state's placement)."""
        return self.placement.replicate(tree)

    def hold(self, state):
        """`state` as the steps hold it: with `flat`, a `TrainState` whose parameters fit
        one vector becomes a replicated `FlatState` (state.py: a step then passes one
        parameter buffer, not one a leaf); else `state` as it is. The first state held
        fixes the shape and must come before `compile`."""
        if not self.flat:
            return state
        held = self.steps.hold(state)
        return state if held is state else self.replicate(held)

    def state_copy(self, state):
        """A throwaway replicated copy of `state` (warm-up runs donate theirs)."""
        return self.replicate(jax.tree.map(np.array, state))

    # -- a BSP step ----------------------------------------------------------------------
    def batch(
        self, rows, sizes: np.ndarray, delays, step_index: int, place: bool = True
    ) -> step.Blocks:
        """Lays training rows `rows` (sum(sizes) of them, in worker order) on the devices:
        each device receives only its own block (its bucket's rows). `delays`: each
        device's injected seconds (hetero.inject), or None. Without `place` (one process,
        nothing timed) an uneven step's rows stay on the host and each device's
        program takes them as it launches, sparing a third of the host's work a step
        (`python -m benchmarks.unplaced_step`); a step placed whole is placed as before."""
        sizes = np.asarray(sizes)
        placement = self.placement

        def pack():
            blocks = buckets.pack(sizes, self.layout, placement.local_positions)
            where = [placement.devices[b.position] for b in blocks]
            masks = jax.device_put([b.mask[None] for b in blocks], where)
            shared = buckets.shared_bucket(sizes, self.layout)
            order = placement.whole_order(blocks) if shared else None
            if order is None:
                return blocks, masks, shared, None, None
            # A step placed whole gathers every device's slots at once, in the mesh's rows.
            joined = [np.concatenate([blocks[i].index for i in order]),
                      np.concatenate([blocks[i].mask for i in order])]  # fmt: skip
            for a in joined:
                a.flags.writeable = False
            return blocks, masks, shared, order, buckets.Block(-1, len(joined[0]), *joined)

        # The same split as the last step (the common case: controllers hold a split until
        # it is worth changing) reuses its blocks and their masks already on the devices.
        blocks, masks, shared, order, joined = self._packed.get(key_of(sizes), pack)
        rows = np.asarray(rows)
        kept = None if self.steps.host_wait else delays
        if joined is not None:  # one gather for every device, and nothing to stack
            x, y = buckets.gather(self.x, self.y, joined._replace(index=rows[joined.index]))
            x = self._inputs(step_index, x)
            x, y = (a.reshape(len(order), shared, *a.shape[1:]) for a in (x, y))
            out = placement.whole(blocks, order, x, y, masks, kept, shared)
        else:
            xs, ys = [], []
            for b in blocks:  # one gather from the data set: slot j takes rows[index[j]]
                at = b._replace(index=rows[b.index]) if b.rows else b
                x, y = buckets.gather(self.x, self.y, at)
                xs.append(self._inputs(step_index, x))
                ys.append(y)
            out = placement.blocks(blocks, xs, ys, masks, kept, shared, place)
        if self.steps.host_wait:
            out.waits = None if delays is None else np.asarray(delays, np.float64)
        return out

    def compile(self, state) -> int:
        """Compiles every (device, bucket) local program not compiled yet, the reduction and
        update, and the mesh-wide programs of the uniform split's bucket; returns how many
        local programs were added."""
        shared = buckets.uniform_bucket(self.global_batch, self.layout)
        return self.steps.compile(
            state,
            self.x[:1],
            self.layout.buckets,
            shared,
            example_y=self.y[:1],
            workers=self.layout.num_workers,
        )

    # -- the evaluation ------------------------------------------------------------------
    def eval_sums(self, params, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """(loss, correct, count) summed over the rows x, y, spread evenly over the devices
        in chunks of the evaluation layout."""
        lay = self.eval_layout
        chunk = lay.capacity * lay.num_devices
        totals = np.zeros(3)
        for start in range(0, len(y), chunk):
            n = min(chunk, len(y) - start)
            index, mask = buckets.uniform_blocks(n, lay.num_devices, lay.capacity)
            batch = self._eval_batch(x[start:][index], y[start:][index], mask)
            sums = self.steps.eval(params, batch)
            # Fetched before the next chunk is dispatched: queuing all 40 chunks of a
            # 20,000-row test set (each program an all-reduce over 8 fake CPU devices) hung
            # XLA:CPU's rendezvous (7 of 8 threads arrived; the process aborted after 40 s).
            totals += [float(sums["loss"]), float(sums["correct"]), float(sums["count"])]
        return totals

    def warm_eval(self, params, x: np.ndarray, y: np.ndarray) -> None:
        """Compiles the evaluation step (run once on a block of no valid rows)."""
        lay = self.eval_layout
        index, mask = buckets.uniform_blocks(0, lay.num_devices, lay.capacity)
        jax.block_until_ready(self.steps.eval(params, self._eval_batch(x[index], y[index], mask)))

    def _eval_batch(self, x, y, mask) -> dict:
        local = self.placement.local_positions
        return self.placement.batch({"x": x[local], "y": y[local], "mask": mask[local]})

    # -- an async worker: one worker a device --------------------------------------------
    def worker_device(self, k: int):
        """The device of worker k (async mode has one worker per device)."""
        return self.placement.devices[k]

    def worker_block(self, k: int, rows, step_index: int, delay) -> step.DeviceBlock:
        """Worker k's batch of the training rows `rows` (its b_k samples), as a
        `step.DeviceBlock` of its bucket's rows: its mask (kept from the last such batch) on
        its device, its rows and `delay` (its injected seconds, or None) on the host with
        their leading axis of 1 (a compiled program given them transfers them itself, for a
        fraction of the host time a transfer call costs)."""
        rows = np.asarray(rows)
        key = (k, len(rows))
        if key not in self._worker_blocks:
            sizes = np.zeros(self.layout.num_workers, np.int64)
            sizes[k] = len(rows)
            (block,) = buckets.pack(sizes, self.layout, [k])
            mask = jax.device_put(block.mask[None], self.worker_device(k))
            self._worker_blocks[key] = block, mask
        block, mask = self._worker_blocks[key]
        x, y = buckets.gather(self.x, self.y, block._replace(index=rows[block.index]))
        x = self._inputs(step_index, x)
        delay = None if delay is None else np.float32([delay])
        return step.DeviceBlock(k, block.rows, x[None], y[None], mask, delay)

    def worker_sums(self, params, block: step.DeviceBlock):
        """The packed sums [1, n + 3] (gradient, loss, correct, count: `step.pack_sums`) of
        one worker's block, computed on its device from `params` already placed there;
        compiled at warm-up for every bucket."""
        return self.steps.variants[(block.position, block.rows)](params, *self.block_args(block))

    def block_args(self, block: step.DeviceBlock) -> tuple:
        """A block's inputs to a local program, after its parameters."""
        return (block.x, block.y, block.mask) + ((block.delay,) if self.inject else ())

    @property
    def device_sums(self) -> Callable:
        """One device's sums of its block, un-jitted, for programs built on it (an async
        worker's push, a wave over the mesh)."""
        return self.steps.device_sums

    def worker_programs(self, fn, first, rows: Sequence[int]) -> dict:
        """{(position, rows): program} of jitted `fn(first, *block)` for every local device
        and bucket in `rows`, compiled and shared as the local programs are and run once."""
        return self.steps.compile_local(fn, first, rows, self.x[:1])

    # -- arrays over the data axis -------------------------------------------------------
    def assemble(self, arrays: list):
        """Per-device arrays [1, ...] as one array [D, ...] sharded over the data axis."""
        return self.steps.assemble(arrays)

    def stack(self, blocks, results: Sequence):
        """Per-device packed sums (None for a device with no rows: zeros) stacked [D, ...]."""
        return self.steps.stack(blocks, results)

    def shards(self, array) -> list:
        """Each device's own piece of an array sharded on the data axis, in device order
        (no copies)."""
        return step.shards_of(array, self.placement.devices)

    def constant(self, where, values) -> Any:
        """`values` (host arrays or numbers) placed on `where` (a device or a sharding),
        once: a split held by a controller repeats its per-device scalars step after step."""
        key = (where, tuple(np.asarray(v).tobytes() for v in values))
        placed = self._constants.get(key)  # read once: injected launches call from threads
        if placed is None:
            if len(self._constants) > 64:
                self._constants.clear()
            placed = self._constants[key] = jax.device_put(tuple(values), where)
        return placed


def decision_device(devices) -> Any:
    """Where controller decisions run: a CPU device that holds no part of the mesh (on GPU/TPU
    any CPU device), so they never wait behind the train step queued on that device and the
    host lays out the next batch while the step runs. When every CPU device is in the mesh (a
    CPU-only run using all devices) the first one has to serve; where JAX has no CPU backend
    (`JAX_PLATFORMS=cuda` or `tpu`) this process's first device in the mesh does."""
    try:
        cpus = jax.local_devices(backend="cpu")
    except RuntimeError:  # "Unknown backend: 'cpu' requested"
        cpus = []
    free = [d for d in cpus if d not in set(devices)]
    if free or cpus:
        return (free or cpus)[-1 if free else 0]
    return next(d for d in devices if d.process_index == jax.process_index())
