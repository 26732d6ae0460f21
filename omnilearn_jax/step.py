"""The pure train and eval steps, for the `shard_map` and `pmap` backends.

Each device reduces its own rows to sums (gradient sum, loss sum, correct count, row count)
inside a `lax.fori_loop` over its `trips` micro-batches; the sums are reduced across devices
once, after the loop, and divided last. So the gradient is that of the mean loss over the
whole global batch, whatever the split, and no collective sits inside a loop whose trip count
differs between devices (that would deadlock).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

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


def _masked_sums(apply: ApplyFn, params, x, y, mask, with_grad: bool) -> Sums:
    """Sums over the valid rows of one micro-batch.

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


def device_sums(
    apply: ApplyFn, params, x, y, mask, trips, with_grad: bool = True, vary=lambda t: t
) -> Sums:
    """One device's sums over its micro-batches x [num_micro, m, ...] (no collectives).

    `vary` marks the loop's zero carry device-varying under `shard_map` (identity for pmap).
    """
    if x.shape[0] == 1:  # padded layout: one micro-batch, computed whole
        return _masked_sums(apply, params, x[0], y[0], mask[0], with_grad)

    def body(i, acc: Sums) -> Sums:
        new = _masked_sums(apply, params, x[i], y[i], mask[i], with_grad)
        return jax.tree.map(jnp.add, acc, new)

    zero = jax.eval_shape(lambda: _masked_sums(apply, params, x[0], y[0], mask[0], with_grad))
    zero = vary(jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), zero))
    return jax.lax.fori_loop(0, trips, body, zero)


def _means(sums: Sums):
    """Divides last: the mean gradient and metrics over all valid rows of all devices."""
    grad = jax.tree.map(lambda g: g / sums.count, sums.grad)
    return grad, {"loss": sums.loss / sums.count, "accuracy": sums.correct / sums.count}


class Steps(NamedTuple):
    """What a backend offers the loop; every function is compiled once per layout."""

    train: Callable  # (state, batch) -> (state, metrics)
    grad: Callable  # (params, batch) -> (mean grad, metrics); for tests and tools
    eval: Callable  # (params, batch) -> dict of sums (loss, correct, count)
    # The train step in two halves, for the wall clock: `local` leaves each device's sums on
    # its device (so each device's completion can be timed), `finish` reduces and updates.
    local: Callable  # (params, batch) -> Sums stacked over devices [D, ...]
    finish: Callable  # (state, stacked sums) -> (state, metrics)


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


def _device_batch(batch):
    x = batch["x"]
    if "delay" in batch:
        x = injected_delay(x, batch["delay"])
    return x, batch["y"], batch["mask"], batch["trips"]


def _update(tx: optax.GradientTransformation, state: TrainState, sums: Sums):
    grad, metrics = _means(sums)
    updates, opt_state = tx.update(grad, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    return TrainState(state.step + 1, params, opt_state), metrics


def _build(
    reduce: Callable, local: Callable, tx: optax.GradientTransformation, compile_: Callable
) -> Steps:
    """The steps from a backend's `reduce(params, batch, with_grad) -> Sums` (summed over
    devices) and `local(params, batch) -> Sums` (stacked per device)."""

    def train(state, batch):
        return _update(tx, state, reduce(state.params, batch, True))

    def finish(state, stacked: Sums):
        return _update(tx, state, jax.tree.map(lambda a: a.sum(axis=0), stacked))

    def grad(params, batch):
        return _means(reduce(params, batch, True))

    def evaluate(params, batch):
        sums = reduce(params, batch, False)
        return {"loss": sums.loss, "correct": sums.correct, "count": sums.count}

    return Steps(
        compile_(train, donate=True),
        compile_(grad),
        compile_(evaluate),
        local,
        jax.jit(finish, donate_argnums=0),
    )


def shard_map_steps(apply: ApplyFn, tx: optax.GradientTransformation, mesh) -> Steps:
    """`jax.shard_map` backend: state replicated (P()), batch sharded on the leading axis."""
    from jax.sharding import PartitionSpec as P

    def vary(tree):
        return jax.lax.pcast(tree, AXIS, to="varying")

    def per_device(params, batch, with_grad):
        # Params marked device-varying keep their gradient per-device inside the loop;
        # otherwise shard_map would insert an implicit psum into every loop iteration.
        params = vary(params) if with_grad else params
        x, y, mask, trips = _device_batch(jax.tree.map(lambda a: a[0], batch))
        return device_sums(apply, params, x, y, mask, trips, with_grad, vary)

    def mapped(fn, out_specs):
        return jax.shard_map(fn, mesh=mesh, in_specs=(P(), P(AXIS)), out_specs=out_specs)

    def reduce(params, batch, with_grad):
        fn = mapped(lambda p, b: jax.lax.psum(per_device(p, b, with_grad), AXIS), P())
        return fn(params, batch)

    def local(params, batch):
        stack = mapped(
            lambda p, b: jax.tree.map(lambda a: a[None], per_device(p, b, True)), P(AXIS)
        )
        return stack(params, batch)

    def compile_(fn, donate=False):
        return jax.jit(fn, donate_argnums=0 if donate else ())

    return _build(reduce, compile_(local), tx, compile_)


def pmap_steps(apply: ApplyFn, tx: optax.GradientTransformation, devices=None) -> Steps:
    """`jax.pmap` backend: arguments broadcast (in_axes None), results replicated.

    pmap neither marks values varying nor sums gradients for us, so the one explicit psum
    after the loop is right here.
    """

    def per_device(params, batch, with_grad):
        return device_sums(apply, params, *_device_batch(batch), with_grad)

    def reduce(params, batch, with_grad):
        return jax.lax.psum(per_device(params, batch, with_grad), AXIS)

    def compile_(fn, donate=False, out_axes=None):
        return jax.pmap(
            fn,
            axis_name=AXIS,
            in_axes=(None, 0),
            out_axes=out_axes,
            devices=devices,
            donate_argnums=0 if donate else (),
        )

    local = compile_(lambda p, b: per_device(p, b, True), out_axes=0)
    return _build(reduce, local, tx, compile_)
