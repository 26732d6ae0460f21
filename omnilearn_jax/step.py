"""The train and eval steps: per-device local programs, then one SPMD reduction and update.

A train step has two parts (docs/trainer.md):

1. Local: each device runs its own compiled program on its own block of rows (its bucket
   size, see masking.py) and reduces them to sums (gradient sum, loss sum, correct count,
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
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import NamedSharding, SingleDeviceSharding
from jax.sharding import PartitionSpec as P

from omnilearn_jax import portable
from omnilearn_jax.models import ApplyFn

AXIS = "data"


class Sums(NamedTuple):
    grad: Any  # pytree like params (None in eval)
    loss: jax.Array
    correct: jax.Array
    count: jax.Array


class TrainState(NamedTuple):
    step: jax.Array
    params: Any
    opt_state: Any


class DeviceBlock(NamedTuple):
    """One device's placed inputs (x is None when the device holds no rows)."""

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
    y = jnp.where(mask, y, 0)

    def loss_fn(p):
        logits = apply(p, x)
        losses = optax.softmax_cross_entropy_with_integer_labels(logits, y)
        correct = jnp.sum(mask & (jnp.argmax(logits, axis=-1) == y))
        return jnp.sum(jnp.where(mask, losses, 0.0)), correct

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

    zero = jax.eval_shape(lambda: masked_sums(apply, params, x[:chunk], y[:chunk], mask[:chunk]))
    zero = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), zero)
    return jax.lax.scan(body, zero, (split(x), split(y), split(mask)))[0]


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


def _update(tx: optax.GradientTransformation, state: TrainState, sums: Sums):
    grad, metrics = _means(sums)
    updates, opt_state = tx.update(grad, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    return TrainState(state.step + 1, params, opt_state), metrics


def on_devices(tree, devices: Sequence) -> list:
    """Each device's own copy of a replicated tree (its shards: no copy, no transfer)."""
    leaves, treedef = jax.tree.flatten(tree)
    by_device = [{s.device: s.data for s in leaf.addressable_shards} for leaf in leaves]
    return [treedef.unflatten([m[d] for m in by_device]) for d in devices]


class Steps:
    """A backend's compiled steps over the devices of `placement`.

    `train(state, blocks)`, `grad(params, blocks)` (mean gradient and metrics, for tests and
    tools), `local(params, blocks)` (per-device sums stacked over the data axis, [D, ...]),
    `dispatch` (the same, unstacked, with each device's launch time, for the wall clock),
    `finish(state, stacked)` and `eval(params, batch)` (sums over a uniform [D, rows] batch).
    """

    def __init__(self, apply: ApplyFn, tx, placement, chunk: int, inject: bool = False):
        self.placement = placement
        self._positions = [int(p) for p in placement.local_positions]
        self.devices = [placement.devices[p] for p in self._positions]
        self.inject = inject
        self.portable = True  # compile a bucket once, load it on each device (portable.py)
        self.variants: dict[tuple[int, int], Any] = {}  # (position, rows) -> compiled

        def local(params, x, y, mask, delay=None):
            if delay is not None:
                x = injected_delay(x, delay)
            sums = block_sums(apply, chunk, params, x, y, mask)
            return jax.tree.map(lambda a: a[None], sums)  # a leading device axis of 1

        self._local = jax.jit(local)
        self._zeros: dict[int, Sums] = {}
        self._stacked = NamedSharding(placement.mesh, P(AXIS))
        self.finish, self.eval, self._reduce = _backend(placement, apply, tx)

    # -- compilation ---------------------------------------------------------------------
    def compile(self, params, example_x: np.ndarray, buckets: Sequence[int]) -> int:
        """Compiles the local program of every bucket once and loads it onto every local
        device (portable.py); returns how many (device, bucket)
        programs were added."""
        template = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), params)
        todo = [r for r in buckets if any((p, r) not in self.variants for p in self._positions)]

        def build(rows):
            def args_for(device):
                where = SingleDeviceSharding(device)

                def spec(shape, dtype):
                    return jax.ShapeDtypeStruct(shape, dtype, sharding=where)

                args = [
                    jax.tree.map(lambda t: spec(t.shape, t.dtype), template),
                    spec((rows, *example_x.shape[1:]), example_x.dtype),
                    spec((rows,), np.int32),
                    spec((rows,), np.bool_),
                ]
                return tuple(args) + ((spec((), np.float32),) if self.inject else ())

            by_device = portable.compile_for(self._local, args_for, self.devices, self.portable)
            return {
                (p, rows): by_device[d] for p, d in zip(self._positions, self.devices, strict=True)
            }

        for rows in todo:  # (not in threads: x64 and other JAX settings are per thread)
            self.variants.update(build(rows))
        return len(todo) * len(self.devices)

    # -- the local part ------------------------------------------------------------------
    def zeros(self, position: int, like: Sums) -> Sums:
        """The sums of a device with no rows: zeros on that device, made once and reused."""
        if position not in self._zeros:
            host = jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), like)
            self._zeros[position] = jax.device_put(host, self.placement.devices[position])
        return self._zeros[position]

    def dispatch(self, params, blocks: Sequence[DeviceBlock]) -> list[tuple[Sums | None, float]]:
        """Starts every device's program; returns (sums or None for an empty device, launch
        time) in block order. Nothing waits for a device here."""
        mine = on_devices(params, [self.placement.devices[b.position] for b in blocks])
        out = []
        for block, p in zip(blocks, mine, strict=True):
            if block.rows == 0:
                out.append((None, time.perf_counter()))
                continue
            args = (p, block.x, block.y, block.mask)
            args += (block.delay,) if self.inject else ()
            start = time.perf_counter()
            out.append((self.variants[(block.position, block.rows)](*args), start))
        return out

    def stack(self, blocks: Sequence[DeviceBlock], results: Sequence[Sums | None]):
        """Per-device sums as one array per leaf [D, ...], sharded over the data axis."""
        like = next(r for r in results if r is not None)
        results = [
            r if r is not None else self.zeros(b.position, like)
            for b, r in zip(blocks, results, strict=True)
        ]
        d = len(self.placement.devices)

        def assemble(*leaves):
            return jax.make_array_from_single_device_arrays(
                (d, *leaves[0].shape[1:]), self._stacked, list(leaves)
            )

        return jax.tree.map(assemble, *results)

    def local(self, params, blocks: Sequence[DeviceBlock]) -> Sums:
        return self.stack(blocks, [s for s, _ in self.dispatch(params, blocks)])

    # -- whole steps ---------------------------------------------------------------------
    def train(self, state: TrainState, blocks: Sequence[DeviceBlock]):
        return self.finish(state, self.local(state.params, blocks))

    def grad(self, params, blocks: Sequence[DeviceBlock]):
        return _means(self._reduce(self.local(params, blocks)))


def _backend(placement, apply: ApplyFn, tx) -> tuple[Callable, Callable, Callable]:
    """(finish, eval, reduce) for the placement's backend."""

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
        finish = pmapped(lambda state, s: _update(tx, state, jax.lax.psum(s, AXIS)), (None, 0), 0)
        ev = pmapped(lambda p, b: jax.lax.psum(eval_sums(p, *b), AXIS), (None, 0))
        return finish, lambda p, b: ev(p, (b["x"], b["y"], b["mask"])), reduce

    mesh = placement.mesh

    def summed(s: Sums) -> Sums:
        per = jax.shard_map(
            lambda t: jax.lax.psum(jax.tree.map(lambda a: a[0], t), AXIS),
            mesh=mesh, in_specs=P(AXIS), out_specs=P(),
        )  # fmt: skip
        return per(s)

    def evaluate(params, batch):
        fn = jax.shard_map(
            lambda p, x, y, m: jax.lax.psum(eval_sums(p, x[0], y[0], m[0]), AXIS),
            mesh=mesh, in_specs=(P(), P(AXIS), P(AXIS), P(AXIS)), out_specs=P(),
        )  # fmt: skip
        return fn(params, batch["x"], batch["y"], batch["mask"])

    finish = jax.jit(lambda state, s: _update(tx, state, summed(s)), donate_argnums=0)
    return finish, jax.jit(evaluate), jax.jit(summed)
