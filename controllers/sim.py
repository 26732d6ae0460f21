"""A controller-only simulation: any controller against an emulated cluster, inside lax.scan.

Worker k at batch b takes overhead + curve(b) * jump_k(b) / speed_k seconds (0 when idle),
times a seeded log-normal noise factor; speeds change at given steps. curve(b) is the time at
speed 1, piecewise linear through knots (b = 1 by default: t = b), extended past the last knot
with the last slope; jump_k(b) is `limit_factor` for b above worker k's memory limit
(`limits`, 0 = none) and 1 below. Everything is a pytree of arrays, so a
run can be vmapped over seeds (the key) or over gains (build the controller inside the
vmapped function; gain checks skip traced values).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from controllers.base import Controller, Observation, initial_sizes, is_concrete

# The paper's heterogeneity levels (CPU cores per worker, BSP runs).
PAPER_CORES = {
    1: (12.0, 12.0, 12.0, 12.0),
    2: (12.0, 12.0, 8.0, 16.0),
    4: (9.0, 9.0, 6.0, 24.0),
    8: (6.0, 6.0, 4.0, 32.0),
}


class Plant(NamedTuple):
    """The emulated cluster. speeds[i] holds from step change_steps[i] on (change_steps[0]=0)."""

    speeds: jax.Array  # float [K, W]
    change_steps: jax.Array  # int32 [K], increasing
    overhead: jax.Array  # float scalar or [W]: seconds per step of a busy worker
    noise: jax.Array  # float scalar: sigma of the log-normal time factor (0.1 ~ 10 %)
    curve_b: jax.Array  # float [G]: knots of the time curve at speed 1, increasing, from 0
    curve_t: jax.Array  # float [G]: its times at those knots
    limits: jax.Array  # int32 [W]: memory limit of each worker (0 = none)
    limit_factor: jax.Array  # float scalar: time multiplier above the limit


class Trace(NamedTuple):
    batch_sizes: jax.Array  # int32 [T, W]: sizes used at each step
    worker_times: jax.Array  # float [T, W]: measured (noisy) times
    model_times: jax.Array  # float [T, W]: noise-free times, for the metrics
    speeds: jax.Array  # float [T, W]


def make_plant(
    speeds: Any,
    *,
    changes: tuple[tuple[int, Any], ...] = (),
    overhead: Any = 0.0,
    noise: float = 0.0,
    curve: tuple[Any, Any] = ((0.0, 1.0), (0.0, 1.0)),
    limits: Any = 0,
    limit_factor: float = 1.0,
) -> Plant:
    """A plant with initial `speeds` and `(step, new_speeds)` changes, e.g. `((200, s2),)`.

    `curve` = (knot batch sizes, times at speed 1); the default is t = b.
    """
    rows = [jnp.asarray(speeds, jnp.float32)] + [jnp.asarray(s, jnp.float32) for _, s in changes]
    if rows[0].ndim != 1 or rows[0].shape[0] < 1:  # else a shape error deep in `simulate`
        raise ValueError(f"speeds must be a list of one speed a worker, got shape {rows[0].shape}")
    for row in rows:  # a plant's time is b / speed: a zero, negative or NaN speed gave inf,
        # negative or NaN times without a word
        if is_concrete(row) and not bool(jnp.all(jnp.isfinite(row) & (row > 0))):
            raise ValueError(f"speeds must be finite and > 0, got {row.tolist()}")
    if is_concrete(noise) and not float(noise) >= 0:
        raise ValueError(f"noise (sigma of the log-normal time factor) must be >= 0, got {noise}")
    steps = [0] + [int(step) for step, _ in changes]
    if steps != sorted(steps):
        raise ValueError(f"speed changes must come in step order, got steps {steps}")
    for (step, _), row in zip(changes, rows[1:], strict=True):
        if row.shape != rows[0].shape:  # a raw "All input arrays must have the same shape"
            raise ValueError(
                f"the speed change at step {step} gives {row.size} speeds for "
                f"{rows[0].shape[0]} workers: one each"
            )
    knots_b, knots_t = (jnp.asarray(k, jnp.float32) for k in curve)
    if knots_b.ndim != 1 or knots_b.shape != knots_t.shape or knots_b.shape[0] < 2:
        raise ValueError(f"curve needs two equal-length knot lists (>= 2), got {curve}")
    if is_concrete(knots_b) and not bool(jnp.all(jnp.diff(knots_b) > 0)):  # else nonsense
        raise ValueError(f"curve's knot batch sizes must increase, got {curve[0]}")
    # A time that falls as the batch grows (a falling curve, a negative overhead, a cliff
    # factor below 1) is no step time, and the oracle, the metrics' yardstick, is optimal
    # only on tables that never fall.
    if is_concrete(knots_t) and not bool(jnp.all(jnp.diff(knots_t) >= 0) & (knots_t[0] >= 0)):
        raise ValueError(f"curve's times must be >= 0 and never fall, got {curve[1]}")
    over = jnp.asarray(overhead, jnp.float32)
    if over.ndim > 1 or (over.ndim == 1 and over.shape != rows[0].shape):
        raise ValueError(f"overhead must be a number or one a worker, got {overhead!r}")
    if is_concrete(over) and not bool(jnp.all(over >= 0)):
        raise ValueError(f"overhead must be >= 0 seconds, got {overhead!r}")
    if is_concrete(limit_factor) and not float(limit_factor) >= 1:
        raise ValueError(f"limit_factor (the time multiplier above a limit) must be >= 1, "
                         f"got {limit_factor!r}")  # fmt: skip
    return Plant(
        speeds=jnp.stack(rows),
        change_steps=jnp.asarray(steps, jnp.int32),
        overhead=over,
        noise=jnp.asarray(noise, jnp.float32),
        curve_b=knots_b,
        curve_t=knots_t,
        limits=jnp.broadcast_to(jnp.asarray(limits, jnp.int32), rows[0].shape),
        limit_factor=jnp.asarray(limit_factor, jnp.float32),
    )


def paper_plant(level: int, **kwargs: Any) -> Plant:
    """The paper's HL`level` cluster: speed proportional to cores."""
    if level not in PAPER_CORES:  # "8" (a str) said "no paper cluster HL8"
        raise ValueError(f"no paper cluster level {level!r}; levels (ints): {sorted(PAPER_CORES)}")
    return make_plant(PAPER_CORES[level], **kwargs)


def speeds_at(plant: Plant, step: jax.Array) -> jax.Array:
    index = jnp.sum(plant.change_steps <= step) - 1
    return plant.speeds[index]


def curve_at(knots_b: jax.Array, knots_t: jax.Array, b: jax.Array) -> jax.Array:
    """The piecewise-linear curve at b, continued past the last knot with the last slope."""
    inside = jnp.interp(b, knots_b, knots_t)
    slope = (knots_t[-1] - knots_t[-2]) / (knots_b[-1] - knots_b[-2])
    return jnp.where(b > knots_b[-1], knots_t[-1] + slope * (b - knots_b[-1]), inside)


def plant_table(plant: Plant, speeds: jax.Array, global_batch: int) -> jax.Array:
    """True (noise-free) time [W, B + 1] of each worker at b = 0..B; 0 for b = 0."""
    b = jnp.arange(global_batch + 1, dtype=jnp.float32)
    base = curve_at(plant.curve_b, plant.curve_t, b)[None, :]
    over = (plant.limits[:, None] > 0) & (b[None, :] > plant.limits[:, None])
    work = base * jnp.where(over, plant.limit_factor, 1.0) / speeds[:, None]
    # A per-worker overhead [W] along the workers' axis ([W] + [W, B + 1] had lined it up
    # with the batch sizes: a shape error, or where W = B + 1 the wrong numbers).
    overhead = jnp.broadcast_to(plant.overhead, speeds.shape)[:, None]
    return jnp.where(b[None, :] > 0, overhead + work, 0.0)


def simulate(
    controller: Controller,
    plant: Plant,
    *,
    global_batch: int,
    num_steps: int,
    key: jax.Array | None = None,
    epoch_length: int = 0,
    sizes: jax.Array | None = None,
    record: Callable[[Any], Any] | None = None,
) -> Any:
    """Runs `num_steps` steps; `epoch_length` > 0 sets obs.epoch_end every that many steps.

    The first step uses `sizes`, else the controller's `initial_sizes`. With `record` (a
    function of the controller state after each step) it returns (Trace, stacked records).
    """
    num_workers = plant.speeds.shape[1]
    if int(num_steps) != num_steps or num_steps < 1:  # 0 failed indexing an empty trace
        raise ValueError(f"num_steps must be an int >= 1, got {num_steps!r}")
    if sizes is not None and is_concrete(sizes):
        given = np.asarray(sizes)
        if given.shape != (num_workers,) or given.sum() != global_batch or given.min() < 0:
            raise ValueError(
                f"sizes must be {num_workers} nonnegative sizes summing to global_batch="
                f"{global_batch}, got {given.tolist()}"
            )
    key = jax.random.key(0) if key is None else key
    state = controller.init(num_workers, global_batch)
    if sizes is None:
        sizes = initial_sizes(state, num_workers, global_batch)
    rows = jnp.arange(num_workers)

    def step(carry: tuple[Any, jax.Array], t: jax.Array) -> tuple[Any, tuple[jax.Array, ...]]:
        state, sizes = carry
        speeds = speeds_at(plant, t)
        table = plant_table(plant, speeds, global_batch)
        model = table[rows, sizes]
        normal = jax.random.normal(jax.random.fold_in(key, t), (num_workers,))
        # Log-normal with unit mean: noise never makes a time negative or biases it.
        times = model * jnp.exp(plant.noise * normal - 0.5 * plant.noise**2)
        epoch_end = (t + 1) % epoch_length == 0 if epoch_length > 0 else jnp.bool_(False)
        obs = Observation(t, sizes, times, speeds, table, jnp.asarray(epoch_end))
        new_sizes, state = controller.update(state, obs)
        extra = () if record is None else (record(state),)
        return (state, new_sizes.astype(jnp.int32)), (sizes, times, model, speeds, *extra)

    _, outputs = jax.lax.scan(
        step, (state, jnp.asarray(sizes, jnp.int32)), jnp.arange(num_steps, dtype=jnp.int32)
    )
    if record is None:
        return Trace(*outputs)
    return Trace(*outputs[:4]), outputs[4]
