"""Control metrics shared by tests, benchmarks and notebooks, computed from a simulation Trace.

Balance at step t is the slowest worker's noise-free time over the best achievable one:
balance_t = max_k model_times[t, k] / optimum_t, where optimum_t is the oracle's min-max
time for the speeds at step t under the same bounds (so integer rounding is not held against
a controller).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from controllers.base import resolve_bounds
from controllers.oracle import solve_min_max
from controllers.sim import Plant, Trace, plant_table


class ControlMetrics(NamedTuple):
    settling_steps: jax.Array  # steps after `start` until balance stays within 1 + tolerance
    overshoot: jax.Array  # largest move past a worker's final size, as a fraction of its move
    steady_state_imbalance: jax.Array  # mean max/mean worker time over the last `tail` steps
    adjustments: jax.Array  # steps (after `start`) on which the sizes changed


def optimal_step_times(
    trace: Trace, plant: Plant, *, global_batch: int, b_min: Any = 0, b_max: Any = 0
) -> jax.Array:
    """The oracle's slowest-worker time at each step [T]."""
    num_workers = trace.speeds.shape[1]
    lo, hi = resolve_bounds(num_workers, global_batch, b_min, b_max)

    def best(speeds: jax.Array) -> jax.Array:
        table = plant_table(plant, speeds, global_batch)
        sizes = solve_min_max(table, lo, hi)
        return table[jnp.arange(num_workers), sizes].max()

    return jax.vmap(best)(trace.speeds)


def imbalance(model_times: jax.Array, batch_sizes: jax.Array) -> jax.Array:
    """max/mean worker time per step over busy workers (idle ones would flatter the mean)."""
    busy = batch_sizes > 0
    mean = jnp.sum(jnp.where(busy, model_times, 0.0), -1) / jnp.maximum(busy.sum(-1), 1)
    return model_times.max(-1) / mean


def control_metrics(
    trace: Trace,
    optimum: jax.Array,
    *,
    tolerance: float = 0.05,
    start: int = 0,
    tail: int = 100,
) -> ControlMetrics:
    """Metrics over steps start.. (e.g. start = the step of a speed change); the steady-state
    imbalance over the last `tail` of them."""
    num_steps = trace.batch_sizes.shape[0]
    if not 0 <= start < num_steps:  # a raw "zero-size array to reduction operation" before
        raise ValueError(f"start must be a step of the trace, in [0, {num_steps}), got {start}")
    if tail < 1:  # [-0:] had silently taken the whole trace
        raise ValueError(f"tail must be >= 1 steps, got {tail}")
    sizes = trace.batch_sizes[start:]
    balance = trace.model_times[start:].max(-1) / optimum[start:]
    num = balance.shape[0]
    bad = balance > 1.0 + tolerance
    # First step after which balance never leaves the band: one past the last bad step.
    last_bad = jnp.max(jnp.where(bad, jnp.arange(num), -1))
    moved = sizes[-1] - sizes[0]
    past = (sizes - sizes[-1]) * jnp.sign(moved)  # > 0: beyond the final size
    overshoot = jnp.max(jnp.where(moved != 0, past / jnp.maximum(jnp.abs(moved), 1), 0.0))
    changes = jnp.any(sizes[1:] != sizes[:-1], axis=-1)
    # The last `tail` steps of those from `start` on: [-tail:] of the whole trace reached
    # back before `start` where the tail was longer than the steps after it.
    steady = imbalance(trace.model_times[start:][-tail:], sizes[-tail:]).mean()
    return ControlMetrics(
        settling_steps=last_bad + 1,
        overshoot=jnp.maximum(overshoot, 0.0),
        steady_state_imbalance=steady,
        adjustments=changes.sum(),
    )
