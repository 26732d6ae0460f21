"""The train and eval steps: per-device local programs, then one SPMD reduction and update.

A train step has two parts (docs/trainer.md):

1. Local: each device runs its own compiled program on its own block of rows (its bucket
   size, see buckets.py) and reduces them to sums (gradient sum, loss sum, correct count,
   row count). The program has no collective, so each device's shapes may differ from the
   others' (and from process to process in a multi-process run), and a device computes only
   about the rows it holds. A device with no rows computes nothing: its sums are zeros kept
   on the device.
2. Finish: the per-device sums, assembled into one array sharded over the data axis, are
   summed across devices once and divided last, and the optimiser updates the replicated
   state, through the `shard_map` or the `pmap` backend. So the gradient is that of the mean
   loss over the whole global batch, whatever the split.

Every (device, bucket) program is compiled ahead of time (`Steps.compile`), so a new split
never compiles.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import NamedSharding, SingleDeviceSharding
from jax.sharding import PartitionSpec as P

from omnilearn_jax.engine import sharing
from omnilearn_jax.engine.buckets import Block
from omnilearn_jax.engine.flat import Flat, flattenable
from omnilearn_jax.engine.memo import Kept
from omnilearn_jax.engine.state import FlatState, StateShape, TrainState, flatten, params_of
from omnilearn_jax.models import ApplyFn

AXIS = "data"
GATHER_BYTES = 1 << 20  # `_all_summed` gathers up to this much, all-reduces beyond
# hetero.inject_order: where a host wait goes beside its device's compute (Steps.run_local);
# the first is the default.
WAIT_ORDERS = ("alone", "after", "before")
_POLL_SECONDS = 2e-4  # polling granularity; well under any step worth timing


class Sums(NamedTuple):
    grad: Any  # pytree like params (None in eval)
    loss: jax.Array
    correct: jax.Array
    count: jax.Array


class DeviceBlock(NamedTuple):
    """One device's placed inputs, each with a leading axis of 1 (x [1, rows, ...], y and
    mask [1, rows], delay [1]), so the devices' blocks assemble into one array sharded over
    the data axis at no cost; x is None when the device holds no rows."""

    position: int  # on the data axis
    rows: int  # the bucket
    x: Any
    y: Any
    mask: Any
    delay: Any  # seconds of injected slowness (a scalar on the device), or None


def masked_sums(apply: ApplyFn, params, x, y, mask, with_grad: bool = True) -> Sums:
    """Sums over the valid rows of one block.

    Padded inputs are replaced by zeros *before* the forward pass: masking only the loss
    would still let NaN or inf rows poison the gradient through 0 * inf in the backward pass.
    """
    valid = mask.reshape(mask.shape + (1,) * (x.ndim - mask.ndim))
    x = jnp.where(valid, x, jnp.zeros((), x.dtype))
    y = jnp.where(mask.reshape(mask.shape + (1,) * (y.ndim - mask.ndim)), y, 0)

    def loss_fn(p):
        logits = apply(p, x)
        losses = optax.softmax_cross_entropy_with_integer_labels(logits, y)
        hits = jnp.argmax(logits, axis=-1) == y
        if y.ndim == 2:  # sequence targets [rows, L]: a row scores its tokens' mean, so with
            # every sequence of one length the mean over rows is the mean over all tokens
            losses, hits = losses.mean(axis=-1), jnp.where(mask, hits.mean(axis=-1), 0.0)
        else:
            hits = mask & hits
        return jnp.sum(jnp.where(mask, losses, 0.0)), jnp.sum(hits)

    if with_grad:
        (loss, correct), grad = jax.value_and_grad(loss_fn, has_aux=True)(params)
    else:
        (loss, correct), grad = loss_fn(params), None
    return Sums(grad, loss, correct.astype(loss.dtype), jnp.sum(mask).astype(loss.dtype))


def block_sums(apply: ApplyFn, chunk: int, params, x, y, mask) -> Sums:
    """One device's sums over its block; a block larger than `chunk` rows is computed in
    chunks whose sums accumulate (a static-length scan: memory follows the chunk)."""
    rows = x.shape[0]
    if rows <= chunk:
        return masked_sums(apply, params, x, y, mask)
    split = lambda a: a.reshape(rows // chunk, chunk, *a.shape[1:])  # noqa: E731

    def body(acc, part):
        return jax.tree.map(jnp.add, acc, masked_sums(apply, params, *part)), None

    # The first chunk's sums start the carry (0 + c0 = c0, bit for bit): zeros made here are
    # not device-varying inside the mesh's shard_map program, and scan refused a carry whose
    # type changed ("carry input and carry output must have equal types": every run whose
    # memory_rows is below its even share's bucket, and every async run with memory_rows).
    parts = (split(x), split(y), split(mask))
    first = masked_sums(apply, params, *(a[0] for a in parts))
    return jax.lax.scan(body, first, tuple(a[1:] for a in parts))[0]


def _sleep_for(seconds) -> np.ndarray:
    time.sleep(float(seconds))
    return np.zeros((), np.float32)


def injected_delay(x, delay):
    """Holds the device for `delay` seconds before it computes (emulated slow hardware).

    The sleep happens in a host callback whose zero result is added to the inputs, so the
    device's compute depends on it and finishes `delay` seconds later, as a slower device would.
    """
    zero = jax.pure_callback(_sleep_for, jax.ShapeDtypeStruct((), jnp.float32), delay)
    return x + zero.astype(x.dtype)


def _means(sums: Sums):
    """Divides last: the mean gradient and metrics over all valid rows of all devices."""
    grad = jax.tree.map(lambda g: g / sums.count, sums.grad)
    return grad, {"loss": sums.loss / sums.count, "accuracy": sums.correct / sums.count}


def pack_sums(sums: Sums):
    """One device's sums as one vector [n + 3]: the gradient's leaves in tree order, then
    the loss, correct and row sums (one dtype, the leaves' promoted). One vector is one
    array to assemble over the mesh and one all-reduce, where the tree is one a leaf."""
    leaves = jax.tree.leaves(sums.grad)
    dtype = jnp.result_type(*leaves, sums.loss)
    tail = jnp.stack([sums.loss, sums.correct, sums.count])
    return jnp.concatenate([leaf.reshape(-1).astype(dtype) for leaf in leaves + [tail]])


def unpack_sums(vector, params) -> Sums:
    """`pack_sums`'s vector(s) [..., n + 3] as Sums shaped like `params` (leading axes kept;
    traced, or NumPy on the host)."""
    leaves, treedef = jax.tree.flatten(params)
    lead, parts, start = vector.shape[:-1], [], 0
    for leaf in leaves:
        size = int(np.prod(leaf.shape))
        part = vector[..., start : start + size].reshape(*lead, *leaf.shape)
        parts.append(part.astype(leaf.dtype))
        start += size
    loss, correct, count = (vector[..., start + i] for i in range(3))
    return Sums(treedef.unflatten(parts), loss, correct, count)


def _update(tx: optax.GradientTransformation, state: TrainState, sums: Sums):
    grad, metrics = _means(sums)
    updates, opt_state = tx.update(grad, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    return TrainState(state.step + 1, params, opt_state), metrics


def _apply_summed(tx: optax.GradientTransformation, state, summed):
    """The update from packed sums summed over every device [n + 3] (`pack_sums`). A
    `FlatState` is unflattened inside the program, updated as the tree and flattened again:
    the program still takes one parameter buffer, and every optimiser computes exactly what
    it computes on the tree (over one long vector XLA:CPU vectorises Adam's division and
    square root otherwise, about an ulp apart)."""
    if not isinstance(state, FlatState):
        return _update(tx, state, unpack_sums(summed, state.params))
    tree = state.plain()
    new, metrics = _update(tx, tree, unpack_sums(summed, tree.params))
    return flatten(new, state.shape), metrics


def shards_of(tree, devices: Sequence) -> list:
    """Each device's own piece of every leaf of `tree` (arrays replicated over the devices or
    sharded on one axis), as one tree a device in the order of `devices` (no copies)."""
    leaves, treedef = jax.tree.flatten(tree)
    by_device = [{s.device: s.data for s in leaf.addressable_shards} for leaf in leaves]
    return [treedef.unflatten([m[d] for m in by_device]) for d in devices]


class Program:
    """One compiled (device, bucket) program and how often it ran. Warm-up runs each once
    (`Steps.compile_local`): a program's first execution costs several times a later one
    (design.md, trap 13) and must never be timed as compute."""

    __slots__ = ("compiled", "runs")

    def __init__(self, compiled):
        self.compiled, self.runs = compiled, 0

    def __call__(self, *args):
        self.runs += 1
        return self.compiled(*args)


class Blocks(tuple):
    """The `DeviceBlock`s of one step (this process's devices). `shared` is the bucket that
    every device of the mesh computes when they all compute the same one, else 0; `waits`
    each device's injected seconds [D] on the host when the steps wait them out on the host
    (`Steps(host_wait=True)`), else None; `whole` the mesh-wide inputs (x, y, mask[, delay],
    each [D, ...] over the data axis) where they were placed as whole arrays (a shared
    bucket in one process, `Placement.blocks`), whose shards the device blocks hold."""

    shared: int = 0
    waits: np.ndarray | None = None
    whole: tuple | None = None


_FIELDS = (lambda b: b.x, lambda b: b.y, lambda b: b.mask, lambda b: b.delay)


def mesh_inputs(blocks: Blocks, count: int, assemble: Callable[[list], jax.Array]) -> list:
    """The first `count` of a step's mesh-wide inputs (x, y, mask, delay), each [D, ...] over
    the data axis: as placed whole (`Blocks.whole`), or assembled from the device blocks by
    `assemble` where they were placed one device at a time."""
    whole = getattr(blocks, "whole", None)
    if whole is not None and len(whole) >= count:
        return list(whole[:count])
    return [assemble([f(b) for b in blocks]) for f in _FIELDS[:count]]


class SplitDisagreement(RuntimeError):
    """The devices of a multi-process step computed different splits (`Steps.finish_timed`):
    `state` is the state before the step (not updated), `split` process 0's split, which
    every process takes to run the step again."""

    def __init__(self, state: TrainState, splits: np.ndarray):
        self.state, self.split = state, np.asarray(splits[0]).astype(np.int32)
        differ = sorted({int(i) for i in np.flatnonzero((splits != splits[0]).any(axis=1))})
        super().__init__(
            f"devices {differ} computed a split other than process 0's "
            f"{self.split.tolist()}: the step is run again on process 0's split"
        )


class Steps:
    """A backend's compiled steps over the devices of `placement`.

    `train(state, blocks)`, `grad(params, blocks)` (mean gradient and metrics, for tests and
    tools), `local(params, blocks)` (per-device packed sums stacked over the data axis,
    [D, n + 3], see `pack_sums`; `sums` gives them as Sums on the host), `run_local` (the
    same, with each device's compute time, for the wall clock), `finish(state, stacked)`
    and `eval(params, batch)` (sums over a uniform [D, rows] batch).
    """

    def __init__(
        self, apply: ApplyFn, tx, placement, chunk: int, inject: bool = False,
        host_wait: bool = False,
    ):  # fmt: skip
        self.placement = placement
        self._positions = [int(p) for p in placement.local_positions]
        self.devices = [placement.devices[p] for p in self._positions]
        self.inject = inject  # the local programs take a delay they sleep in a host callback
        # Injected slowness waited out on the host before each device's launch (`run_local`),
        # with programs free of callbacks: those XLA:CPU runs in the launching thread.
        self.host_wait = host_wait
        # With host waits (hetero.inject_order): every device computes at the step's start
        # and its wait follows ('after'), or it waits first and then computes ('before'), or
        # the devices compute one at a time, each alone, and each wait follows ('alone').
        self.wait_order = WAIT_ORDERS[0]
        self.share = True  # compile a bucket once, load it on each device (sharing.py)
        self.variants: dict[tuple[int, int], Program] = {}  # (position, rows) -> program
        self.first_runs_in_steps = 0  # programs whose first execution was inside a step

        self.shape: StateShape | None = None  # of a flat state (`hold`); None: trees
        self._vector: Callable | None = None  # jitted tree -> vector of that shape

        self._apply, self._tx, self._chunk = apply, tx, chunk
        self._built: tuple | None = None  # (shape, _local_programs(...)) for that shape
        self._shared_rows = 0  # the bucket the mesh-wide program is compiled for
        self._finish_ready = False
        self._zeros: dict[int, Sums] = {}
        self._label_shape: tuple[int, ...] = ()  # labels past the row axis (see compile)
        # Programs that sleep in a host callback (injected slowness without host waits) run
        # in their launching thread: one thread a device, so every device waits at once.
        workers = len(self.devices)
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="device")
        self._stacked = NamedSharding(placement.mesh, P(AXIS))
        # The same programs for the same backend, devices, model and optimiser: a process's
        # later runs of a config trace none of them again (memo.Kept).
        key = (placement.backend, tuple(placement.devices), apply, tx)
        programs = _BACKENDS.get(key, lambda: _backend(placement, apply, tx))
        self.finish, self.eval, self._reduce, self._finish_timed = programs

    # -- the programs --------------------------------------------------------------------
    def _programs(self) -> tuple:
        """`_local_programs` for this model, optimiser, chunk and state shape (built after
        `hold` decides the shape), the same objects for every Steps of a process alike."""
        if self._built is None or self._built[0] is not self.shape:
            p = self.placement
            key = (p.backend, tuple(p.devices), self._apply, self._tx, self._chunk, self.shape,
                   self.inject)  # fmt: skip
            build = lambda: _local_programs(  # noqa: E731
                p, self._apply, self._tx, self._chunk, self.shape, self.inject
            )
            self._built = (self.shape, _LOCALS.get(key, build))
        return self._built[1]

    @property
    def device_sums(self) -> Callable:
        """One device's sums of its block, un-jitted: for callers that build their own mesh
        programs over it (asp/batched.py: per-device parameters, one launch over the mesh)."""
        return self._programs()[0]

    @property
    def _local(self) -> Callable:
        return self._programs()[1]

    @property
    def _mesh_local(self) -> Callable:
        return self._programs()[2]

    @property
    def _mesh_train(self) -> Callable:
        return self._programs()[3]

    # -- the state -----------------------------------------------------------------------
    def hold(self, state):
        """`state` as these steps hold it: a `TrainState` of parameters of one dtype becomes
        a `FlatState` (state.py), the first one deciding its shape, which must come before any
        compiling; anything else is returned as it is."""
        if not isinstance(state, TrainState) or not flattenable(state.params):
            return state
        if self.shape is None:
            if self.variants or self._finish_ready or self._built is not None:
                raise RuntimeError("Steps.hold: the first flat state must come before compiling")
            self.shape = StateShape.of(state, Flat(state.params))
            self._vector = jax.jit(self.shape.pack.vector)
        return flatten(state, self.shape)

    def _local_params(self, params):
        """The local programs' parameters: a tree is made the vector of a flat state."""
        if self.shape is not None and not isinstance(params, jax.Array):
            return self._vector(params)
        return params

    def _tree_like(self, params):
        """A tree shaped as the parameters (for `unpack_sums`), also from a flat vector."""
        if self.shape is None or not isinstance(params, jax.Array):
            return params
        pack = self.shape.pack
        leaves = [jax.ShapeDtypeStruct(s, params.dtype) for s in pack.shapes]
        return pack.treedef.unflatten(leaves)

    # -- compilation ---------------------------------------------------------------------
    def compile(
        self,
        state: TrainState,
        example_x: np.ndarray,
        buckets: Sequence[int],
        shared: int = 0,
        example_y: np.ndarray | None = None,
        workers: int = 1,
    ) -> int:
        """Compiles the local program of every bucket once and loads it onto every local
        device (sharing.py), and the mesh-wide programs of bucket `shared` (0: none; run
        once on zeros and a copy of `state`); returns how many (device, bucket) programs
        were added. `example_y` gives the labels' shape past the row axis (sequence targets
        [1, L]; None: one label a row); `workers` the length of a split (the multi-process
        finish carries one, `finish_timed`)."""
        if example_y is not None:
            self._label_shape = tuple(example_y.shape[1:])
        params = params_of(state)
        template = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), params)
        todo = [r for r in buckets if any((p, r) not in self.variants for p in self._positions)]
        self.variants.update(self.compile_local(self._local, template, todo, example_x))
        # The reduction and update, and the mesh-wide programs of the shared bucket, are
        # compiled by running them once on blocks of zeros and a throwaway copy of the state.
        if not self._finish_ready:
            copy = self.placement.replicate(jax.tree.map(np.array, state))
            zeros = self._zero_blocks(min(buckets), example_x, 0)
            stacked = self.local(params_of(copy), zeros)
            if jax.process_count() > 1:  # a multi-process step ends with finish_timed
                times = np.zeros(len(self._positions), np.float32)
                spare = self.placement.replicate(jax.tree.map(np.array, state))
                split = np.zeros(workers, np.int32)
                jax.block_until_ready(self.finish_timed(spare, stacked, times, split))
            jax.block_until_ready(self.finish(copy, stacked))
            self._finish_ready = True
        if shared and shared != self._shared_rows:
            self._shared_rows = shared
            copy = self.placement.replicate(jax.tree.map(np.array, state))
            zeros = self._zero_blocks(shared, example_x, shared)
            jax.block_until_ready((self.local(params_of(copy), zeros), self.train(copy, zeros)))
        return len(todo) * len(self.devices)

    def compile_local(self, jitted, first, buckets: Sequence[int], example_x: np.ndarray) -> dict:
        """{(position, rows): Program} of `jitted(first, x, y, mask[, delay])` over a
        device's block of each bucket in `buckets`, as the local programs are: compiled once
        a bucket and loaded onto every local device (sharing.py), then run once on each
        device so that no first execution is ever timed. `first`: the shapes and dtypes (a
        tree of jax.ShapeDtypeStruct) of its first argument."""

        def build(rows):
            def args_for(device):
                where = SingleDeviceSharding(device)

                def spec(shape, dtype):
                    return jax.ShapeDtypeStruct(shape, dtype, sharding=where)

                args = [
                    jax.tree.map(lambda t: spec(t.shape, t.dtype), first),
                    spec((1, rows, *example_x.shape[1:]), example_x.dtype),
                    spec((1, rows, *self._label_shape), np.int32),
                    spec((1, rows), np.bool_),
                ]
                return tuple(args) + ((spec((1,), np.float32),) if self.inject else ())

            by_device = sharing.compile_for(jitted, args_for, self.devices, self.share)
            programs = {}
            for p, d in zip(self._positions, self.devices, strict=True):
                program = programs[(p, rows)] = Program(by_device[d])
                jax.block_until_ready(program(*sharing.example_inputs(args_for(d), d)))
            return programs

        out = {}
        for rows in buckets:  # (not in threads: x64 and other JAX settings are per thread)
            out.update(build(rows))
        return out

    def _zero_blocks(self, rows: int, example_x: np.ndarray, shared: int) -> Blocks:
        """Every local device's block of `rows` zero rows, none of them valid, placed as
        the trainer places a step's blocks."""
        empty = np.zeros(rows, np.int64), np.zeros(rows, np.bool_)
        blocks = [Block(p, rows, *empty) for p in self._positions]
        xs = [np.zeros((rows, *example_x.shape[1:]), example_x.dtype)] * len(blocks)
        ys = [np.zeros((rows, *self._label_shape), np.int32)] * len(blocks)
        delays = np.zeros(len(self.placement.devices), np.float32) if self.inject else None
        return self.placement.blocks(blocks, xs, ys, [b.mask for b in blocks], delays, shared)

    # -- the local part ------------------------------------------------------------------
    def zeros(self, position: int, like):
        """The packed sums of a device with no rows (`like`'s shape): zeros on that device,
        made once and reused."""
        if position not in self._zeros:
            host = jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), like)
            self._zeros[position] = jax.device_put(host, self.placement.devices[position])
        return self._zeros[position]

    def run_local(self, params, blocks: Blocks, timed: bool = False, then=None):
        """Every device's sums, stacked over the data axis [D, ...], and with `timed` each
        device's compute seconds (from its own launch until its sums are ready; with host
        waits, from the step's start, the wait included: every device launched at the start
        and its wait counted from its sums' readiness (`wait_order` 'after'), or launched
        once its wait has passed ('before'), or computing alone (`_alone`); 0 for a device
        with no rows), else
        None. With `then`, `then(stacked)` is returned in place of the sums: it is called
        as soon as every device has been launched, before the times are waited for, so a
        reduction and update it dispatches start when the last sums are ready, with no
        host round trip in between (against a finish dispatched after the waits, the paper
        job's uneven step took 0.81x the time and its uniform one 0.92x, BENCHMARKS.md
        section 8). With `timed` it is called in a thread of its own (`_dispatched`). With
        host waits it is called only once every device's sums are ready.

        A step whose devices all compute the shared bucket is one launch over the mesh.
        Otherwise every device's program is launched from this thread, largest block first:
        a program free of host callbacks is dispatched asynchronously, so each launch
        returns while its device computes (`_launched`). A program that sleeps in a host
        callback (`hetero.inject` without host waits) is run by XLA:CPU in its launching
        thread, so each such device is launched from a thread of its own, or the devices
        would run one after another.
        """
        params = self._local_params(params)
        if self.host_wait and blocks.waits is not None:  # `then` once the times are read:
            # dispatched at the last launch it made the balanced HL4 step (inject 0.003)
            # 12.1-12.3 ms against 11.6-11.7 ms (fresh processes, alternated)
            if self.wait_order == "alone":
                stacked, times = self._alone(params, blocks, blocks.waits)
                times = times if timed else None
            else:
                stacked, times = self._launched(params, blocks, timed, None, blocks.waits)
            return self._dispatched(then, stacked, False)(), times
        if self._is_shared(blocks):
            start = time.perf_counter()
            stacked = self._launch_mesh(params, blocks)
            out = self._dispatched(then, stacked, timed)
            times = launch_ready_times(shards_of(stacked, self.devices), start) if timed else None
            return out(), times
        if not self.inject:
            return self._launched(params, blocks, timed, then)
        mine = shards_of(params, [self.placement.devices[b.position] for b in blocks])

        def run(block: DeviceBlock, p) -> tuple[jax.Array | None, float]:
            if block.rows == 0:
                return None, 0.0
            program = self._program(block)
            start = time.perf_counter()
            sums = program(p, block.x, block.y, block.mask, block.delay)
            if timed:
                sums.block_until_ready()
            return sums, time.perf_counter() - start

        order = sorted(range(len(blocks)), key=lambda i: -blocks[i].rows)
        futures = {i: self._pool.submit(run, blocks[i], mine[i]) for i in order}
        done = [futures[i].result() for i in range(len(blocks))]
        stacked = self.stack(blocks, [r for r, _ in done])
        return self._dispatched(then, stacked, False)(), (
            np.array([t for _, t in done]) if timed else None
        )

    def _dispatched(self, then, stacked, timed: bool) -> Callable[[], Any]:
        """`then(stacked)` (`stacked` itself without `then`) as a call that gives it: with
        `timed` dispatched from a pool thread at once, since dispatching a program over
        several devices can hold its thread until devices still computing are done
        (XLA:CPU: 0.6-2.8 ms of a 3-6 ms step in a probe), and the launching thread
        must go on reading each device's time meanwhile; else called here."""
        if then is None:
            return lambda: stacked
        if not timed:
            out = then(stacked)
            return lambda: out
        return self._pool.submit(then, stacked).result

    def _launched(self, params, blocks: Blocks, timed: bool, then, waits=None, poll=_POLL_SECONDS):
        """`run_local` of callback-free programs, every device launched from this thread:
        largest block first, or with `waits` (each device's injected seconds, waited out on
        the host) each device once its wait has passed, or with `wait_order` 'after' all at once and
        each wait counted from its device's sums' readiness, the call returning when the last
        wait has passed (every device then computes at the step's start whatever the split,
        as on hardware of its own, rather than a slow device computing alone after the others'
        compute on shared cores). A dispatch returns while its device
        computes (also on XLA:CPU), so no launch waits behind another device's compute.
        Readiness is polled every `poll` seconds while later devices still wait or several
        compute; the last one is waited for directly. A device's time runs from its own
        launch until its sums are ready, or with `waits` from the step's start, its wait
        included. `then(stacked)` is dispatched right after the last launch (`_dispatched`)
        and returned. On 2 cores, launches from threads of their own started up to 2.5 ms
        late with injected waits, and without them made the paper job's uneven step
        3.5-3.8 ms against 3.1 ms from one thread (docs/trainer.md)."""
        mine = shards_of(params, [self.placement.devices[b.position] for b in blocks])
        rows = [b.rows for b in blocks]
        wait = None if waits is None else np.array([float(waits[b.position]) for b in blocks])
        after = wait is not None and self.wait_order == "after"
        due = np.zeros(len(blocks)) if (wait is None or after) else wait
        todo = sorted((i for i in range(len(blocks)) if rows[i]), key=lambda i: (due[i], -rows[i]))
        results: list = [None] * len(blocks)
        ready, launched = np.zeros(len(blocks)), np.zeros(len(blocks))
        running: list[int] = []
        # With no rows on any of this process's devices nothing is launched: zeros go out.
        out = None if todo else self._dispatched(then, self.stack(blocks, results), timed)
        start = time.perf_counter()
        while todo or running:
            now = time.perf_counter() - start
            while todo and due[todo[0]] <= now:
                i = todo.pop(0)
                block = blocks[i]
                launched[i] = time.perf_counter() - start
                results[i] = self._program(block)(mine[i], block.x, block.y, block.mask)
                running.append(i)
                if not todo:
                    out = self._dispatched(then, self.stack(blocks, results), timed)
            if not timed:
                running = []
            if not todo and len(running) == 1:  # the last device: no polling interval
                results[running[0]].block_until_ready()
            for i in [i for i in running if results[i].is_ready()]:
                ready[i] = time.perf_counter() - start
                running.remove(i)
            if todo or running:
                gap = due[todo[0]] - (time.perf_counter() - start) if todo else poll
                time.sleep(max(min(gap, poll) if running else gap, 0.0))
        if after:
            ends = np.where(np.asarray(rows) > 0, ready + wait, 0.0)
            left = float(ends.max()) - (time.perf_counter() - start)
            if left > 0:
                time.sleep(left)
            return out(), (ends if timed else None)
        if not timed:
            return out(), None
        return out(), ready - (launched if waits is None else 0.0)

    def _alone(self, params, blocks: Blocks, waits) -> tuple[Any, np.ndarray]:
        """`run_local` with host waits, each device computing alone: launched one at a time,
        largest block first, each waited for before the next, its time its own compute plus
        its wait, as if every device had started at the step's start on hardware of its own;
        the call returns when the last of those times has passed since the start, or when
        the last device is done if computing one after another took longer."""
        mine = shards_of(params, [self.placement.devices[b.position] for b in blocks])
        results: list = [None] * len(blocks)
        ends = np.zeros(len(blocks))
        start = time.perf_counter()
        for i in sorted(range(len(blocks)), key=lambda i: -blocks[i].rows):
            block = blocks[i]
            if block.rows == 0:
                continue
            began = time.perf_counter()
            results[i] = self._program(block)(mine[i], block.x, block.y, block.mask)
            results[i].block_until_ready()
            ends[i] = time.perf_counter() - began + float(waits[block.position])
        left = float(ends.max()) - (time.perf_counter() - start)
        if left > 0:
            time.sleep(left)
        return self.stack(blocks, results), ends

    def _program(self, block: DeviceBlock) -> Program:
        """The block's (device, bucket) program, counting a first execution inside a step
        (never after warm-up: compile_local runs each once)."""
        program = self.variants[(block.position, block.rows)]
        if program.runs == 0:
            self.first_runs_in_steps += 1
        return program

    def _is_shared(self, blocks) -> bool:
        return bool(self._shared_rows) and getattr(blocks, "shared", 0) == self._shared_rows

    def _mesh_inputs(self, blocks: Blocks) -> list:
        return mesh_inputs(blocks, 3 + self.inject, self.assemble)

    def _launch_mesh(self, params, blocks: Blocks) -> jax.Array:
        return self._mesh_local(params, *self._mesh_inputs(blocks))

    def assemble(self, arrays: list):
        """Per-device arrays [1, ...] as one array [D, ...] sharded over the data axis."""
        shape = (len(self.placement.devices), *arrays[0].shape[1:])
        return jax.make_array_from_single_device_arrays(shape, self._stacked, arrays)

    def stack(self, blocks: Sequence[DeviceBlock], results: Sequence):
        """Per-device results (packed sums [1, n + 3], None for a device with no rows) as
        one array per leaf [D, ...], sharded over the data axis."""
        like = next((r for r in results if r is not None), None)
        if like is None:  # no device of this process has rows (another process has them all)
            like = next(iter(self.variants.values())).compiled.out_info
        results = [
            r if r is not None else self.zeros(b.position, like)
            for b, r in zip(blocks, results, strict=True)
        ]
        return jax.tree.map(lambda *leaves: self.assemble(list(leaves)), *results)

    def local(self, params, blocks: Blocks):
        return self.run_local(params, blocks)[0]

    def finish_timed(self, state: TrainState, stacked, times: np.ndarray, split: np.ndarray):
        """`finish` of a multi-process step, with the step's one collective carrying, beside
        the gradient sums, every device's time [D] and every device's split [D, W]: `times`
        are this process's devices' (in the order of its blocks), `split` the W sizes this
        process computed the step with (its own controller's decision). The update is
        applied only where every device computed the same split; otherwise the state comes
        back unchanged and `SplitDisagreement` gives process 0's split, so that the step is
        run again on it and no gradient ever counts a row twice or misses one. Process 0's
        split so rules every step without a collective of its own (docs/multihost.md).
        Returns (state, metrics, every device's time [D])."""
        n = len(self.devices)  # `split` [W], or [local devices, W] (a test plants one)
        rows = np.broadcast_to(np.asarray(split, np.float32), (n, np.shape(split)[-1]))
        times = np.asarray(times, np.float32).reshape(n, 1)  # sizes: exact below 2**24
        placed = [
            jax.device_put(np.concatenate([t, r])[None], d)
            for t, r, d in zip(times, rows, self.devices, strict=True)
        ]
        state, metrics, every, splits = self._finish_timed(state, stacked, self.assemble(placed))
        every, splits = np.asarray(every), np.asarray(splits)
        if (splits != splits[0]).any():
            raise SplitDisagreement(state, splits)
        return state, metrics, every

    def train_checked(self, state: TrainState, blocks: Blocks, split: np.ndarray):
        """`train` in a multi-process run: `finish_timed` with no times (the virtual clock
        models them), so that process 0's split rules every step here too."""
        zeros = np.zeros(len(self._positions), np.float32)
        return self.finish_timed(state, self.local(params_of(state), blocks), zeros, split)[:2]

    def sums(self, params, blocks: Blocks) -> Sums:
        """Each device's sums as Sums [D, ...] on the host (for tests and tools)."""
        local = np.asarray(jax.device_get(self.local(params, blocks)))
        return unpack_sums(local, self._tree_like(params))

    # -- whole steps ---------------------------------------------------------------------
    def train(self, state: TrainState, blocks: Blocks):
        if self._is_shared(blocks):  # one program, as a plain data-parallel step
            return self._mesh_train(state, *self._mesh_inputs(blocks))
        return self.finish(state, self.local(params_of(state), blocks))

    def grad(self, params, blocks: Sequence[DeviceBlock]):
        summed = self._reduce(self.local(params, blocks))
        return _means(unpack_sums(summed, self._tree_like(params)))


def launch_ready_times(per_device: Sequence, start: float, poll: float = _POLL_SECONDS):
    """Seconds from `start` until each device's result (an array, or a tree of them whose
    last leaf is written last) is ready, in the order given. One result is waited for
    directly; several are polled every `poll` seconds, and never once more after the last
    is ready (a backend that ran the launch to completion in the launching thread, as
    XLA:CPU may, costs no sleep at all)."""
    last = [jax.tree.leaves(r)[-1] for r in per_device]
    if len(last) == 1:
        last[0].block_until_ready()
        return np.array([time.perf_counter() - start])
    done = np.full(len(per_device), np.nan)
    while True:
        now = time.perf_counter()
        for i, result in enumerate(last):
            if np.isnan(done[i]) and result.is_ready():
                done[i] = now - start
        if not np.isnan(done).any():
            return done
        time.sleep(poll)


def _mesh_programs(placement, local: Callable, tx, num_inputs: int) -> tuple[Callable, Callable]:
    """`local` (packed sums [1, n + 3] of a device's block) run on every device of the mesh at
    once, over inputs [D, rows, ...] sharded on the data axis: (packed sums stacked per device
    [D, n + 3], with no collective; and the whole train step, `state, *inputs -> state,
    metrics`, fused into one program as a plain data-parallel step is)."""
    if placement.backend == "pmap":  # pmap takes the device axis away: put it back for local

        def one(params, *rest):
            return local(params, *(a[None] for a in rest))[0]

        def step(state, *rest):
            return _apply_summed(tx, state, jax.lax.psum(one(params_of(state), *rest), AXIS))

        in_axes = (None,) + (0,) * num_inputs
        kwargs = {"devices": placement.devices}
        return (
            jax.pmap(one, AXIS, in_axes=in_axes, **kwargs),
            jax.pmap(step, AXIS, in_axes=in_axes, out_axes=None, donate_argnums=0, **kwargs),
        )

    def per_device(params, *rest):
        # Params marked device-varying keep their gradient per device (no implicit psum).
        return local(jax.lax.pcast(params, AXIS, to="varying"), *rest)

    def run(params, *rest):
        specs = (P(),) + (P(AXIS),) * len(rest)
        mapped = jax.shard_map(per_device, mesh=placement.mesh, in_specs=specs, out_specs=P(AXIS))
        return mapped(params, *rest)

    def step(state, *rest):
        return _apply_summed(tx, state, _summed(placement.mesh, run(params_of(state), *rest)))

    return jax.jit(run), jax.jit(step, donate_argnums=0)


def _summed(mesh, stacked):
    """Packed sums stacked over the data axis [D, n + 3], summed across devices (one
    all-reduce)."""
    per = jax.shard_map(
        lambda t: jax.lax.psum(jax.tree.map(lambda a: a[0], t), AXIS),
        mesh=mesh, in_specs=P(AXIS), out_specs=P(),
    )  # fmt: skip
    return per(stacked)


def _with_rows(packed, row, num_devices: int):
    """Inside a collective program, one device's packed sums [n + 3] followed by its row
    [1 + W] (its compute time, then the split it computed) in its own slot of a [D, 1 + W]
    block: one cross-device sum (`_all_summed`) then adds up the gradients and gathers every
    device's row."""
    slot = jax.lax.axis_index(AXIS)
    rows = jnp.zeros((num_devices, row.shape[-1]), packed.dtype).at[slot].set(row)
    return jnp.concatenate([packed, rows.reshape(-1)])


def _all_summed(x, num_devices: int):
    """Inside a collective program, `x` summed over the data axis, equal on every device.
    A small `x` (every device's copy together at most `GATHER_BYTES`) is gathered and added
    up in device order: one exchange where a ring all-reduce makes 2 (D - 1), which across
    processes is most of its cost (XLA:CPU's Gloo: 0.5 against 1.4 ms for 4096 floats between
    2 processes, benchmarks/collective_cost.py); a large one is all-reduced, which moves less
    data once bandwidth, not latency, bounds it."""
    if num_devices * x.size * x.dtype.itemsize > GATHER_BYTES:
        return jax.lax.psum(x, AXIS)
    every = jax.lax.all_gather(x, AXIS)
    total = every[0]
    for i in range(1, num_devices):
        total = total + every[i]
    return total


def _agreed_update(tx, state: TrainState, summed, width: int, num_devices: int):
    """The update from the cross-device sum of `_with_rows` (rows `width` wide; `_all_summed`),
    applied only where every device computed the same split, else the state unchanged:
    (state, metrics, times [D], splits [D, W])."""
    cut = summed.shape[0] - num_devices * width
    rows = summed[cut:].reshape(num_devices, width)
    splits = rows[:, 1:]
    new, metrics = _apply_summed(tx, state, summed[:cut])
    agree = jnp.all(splits == splits[0])
    state = jax.tree.map(lambda a, b: jnp.where(agree, a, b), new, state)
    return state, metrics, rows[:, 0], splits


# Each kept set holds its compiled programs (and so their memory maps) after its runs end:
# a few sets, enough for the configs a process alternates between.
_BACKENDS = Kept(4)
_LOCALS = Kept(4)


def _local_programs(placement, apply: ApplyFn, tx, chunk: int, shape, inject: bool) -> tuple:
    """(local, packed, mesh local, mesh train): one device's sums of its block as a tree
    with a leading device axis of 1 (`local(params, x, y, mask[, delay])`, params the vector
    of a flat state of `shape`, or a tree where `shape` is None), the same packed
    (`pack_sums`) and jitted, and `_mesh_programs` over it."""

    def local(params, x, y, mask, delay=None):
        if shape is not None:  # a FlatState's vector
            params = shape.pack.tree(params)
        if delay is not None:
            x = injected_delay(x, delay[0])
        sums = block_sums(apply, chunk, params, x[0], y[0], mask[0])
        return jax.tree.map(lambda a: a[None], sums)  # a leading device axis of 1

    def packed(params, x, y, mask, delay=None):
        return pack_sums(jax.tree.map(lambda a: a[0], local(params, x, y, mask, delay)))[None]

    return (local, jax.jit(packed), *_mesh_programs(placement, packed, tx, 3 + inject))


def _backend(placement, apply: ApplyFn, tx) -> tuple[Callable, ...]:
    """(finish, eval, reduce, finish_timed) for the placement's backend. `finish_timed(state,
    stacked, rows [D, 1 + W])` is `finish` that also gathers every device's row (its time and
    the split it computed) in the same all-reduce and updates only where the splits agree
    (`_agreed_update`; for a multi-process run)."""
    num_devices = len(placement.devices)

    def eval_sums(params, x, y, mask):
        sums = masked_sums(apply, params, x, y, mask, with_grad=False)
        return {"loss": sums.loss, "correct": sums.correct, "count": sums.count}

    if placement.backend == "pmap":
        # pmap neither marks values varying nor sums for us: one explicit psum is right.
        def pmapped(fn, in_axes, donate=()):
            return jax.pmap(
                fn, AXIS, in_axes=in_axes, out_axes=None, devices=placement.devices,
                donate_argnums=donate,
            )  # fmt: skip

        # pmap takes the stacked sums' device axis away: each device sees its own sums.
        reduce = pmapped(lambda s: jax.lax.psum(s, AXIS), 0)

        def pmap_finish(state, s):
            return _apply_summed(tx, state, jax.lax.psum(s, AXIS))

        finish = pmapped(pmap_finish, (None, 0), 0)

        def pmap_finish_timed(state, s, r):
            summed = _all_summed(_with_rows(s, r, num_devices), num_devices)
            return _agreed_update(tx, state, summed, r.shape[-1], num_devices)

        finish_timed = pmapped(pmap_finish_timed, (None, 0, 0), 0)
        ev = pmapped(lambda p, b: jax.lax.psum(eval_sums(p, *b), AXIS), (None, 0))
        return finish, lambda p, b: ev(p, (b["x"], b["y"], b["mask"])), reduce, finish_timed

    mesh = placement.mesh

    def summed(s):
        return _summed(mesh, s)

    def evaluate(params, batch):
        fn = jax.shard_map(
            lambda p, x, y, m: jax.lax.psum(eval_sums(p, x[0], y[0], m[0]), AXIS),
            mesh=mesh, in_specs=(P(), P(AXIS), P(AXIS), P(AXIS)), out_specs=P(),
        )  # fmt: skip
        return fn(params, batch["x"], batch["y"], batch["mask"])

    def finish(state, stacked):
        return _apply_summed(tx, state, summed(stacked))

    def finish_timed(state, stacked, rows):
        # A gathered sum is equal on every device without being marked so: no vma check.
        summed = jax.shard_map(
            lambda s, r: _all_summed(_with_rows(s[0], r[0], num_devices), num_devices),
            mesh=mesh, in_specs=(P(AXIS), P(AXIS)), out_specs=P(), check_vma=False,
        )(stacked, rows)  # fmt: skip
        return _agreed_update(tx, state, summed, rows.shape[-1], num_devices)

    finish = jax.jit(finish, donate_argnums=0)
    return finish, jax.jit(evaluate), jax.jit(summed), jax.jit(finish_timed, donate_argnums=0)
