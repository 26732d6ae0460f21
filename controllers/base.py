"""Types every controller shares: the observation, the (init, update) pair, bound rules."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

# Bound sentinels. The paper runs 4 workers at B = 128 with b_min 16 and b_max 96, i.e. half and
# three times the uniform share B / W; -1 applies that rule to any (W, B) so one config works
# for every cluster size. b_max = 0 means "no upper bound" (B).
PAPER_BOUND = -1
NO_UPPER_BOUND = 0


class Observation(NamedTuple):
    """What a controller sees after a step. Only oracles may read `speeds` and `time_table`."""

    step: jax.Array  # int32 scalar
    batch_sizes: jax.Array  # int32 [W], the sizes used this step
    worker_times: jax.Array  # float32 [W], compute seconds of each worker this step
    speeds: jax.Array  # float32 [W], true relative speeds (ones when unknown)
    time_table: jax.Array  # float32 [W, B + 1], modelled time of worker k at batch b
    epoch_end: jax.Array  # bool scalar, true on the last step of an epoch

    @classmethod
    def make(
        cls,
        step: Any,
        batch_sizes: Any,
        worker_times: Any,
        speeds: Any = None,
        time_table: Any = None,
        epoch_end: Any = False,
        *,
        global_batch: int | None = None,
    ) -> Observation:
        """Builds an observation, filling unknown speeds with ones and the table with b / speed.

        `global_batch` sizes the default table; without it the sum of `batch_sizes` is used,
        which needs concrete (not traced) sizes. Concrete inputs give NumPy arrays, as the
        trainer's observations are (a host loop pays no dispatch a field: building one with
        jax.numpy took about 4 ms); traced ones give jax arrays.
        """
        if time_table is None and global_batch is None:
            global_batch = int(np.sum(np.asarray(batch_sizes)))
        inputs = (step, batch_sizes, worker_times, speeds, time_table, epoch_end)
        xp = np if is_concrete(inputs) else jnp
        batch_sizes = xp.asarray(batch_sizes, xp.int32)
        worker_times = xp.asarray(worker_times, xp.float32)
        speeds = (
            xp.ones(batch_sizes.shape, xp.float32)
            if speeds is None
            else xp.asarray(speeds, xp.float32)
        )
        if time_table is None:
            time_table = linear_time_table(speeds, global_batch, xp=xp)
        return cls(
            step=xp.asarray(step, xp.int32),
            batch_sizes=batch_sizes,
            worker_times=worker_times,
            speeds=speeds,
            time_table=xp.asarray(time_table, xp.float32),
            epoch_end=xp.asarray(epoch_end, xp.bool_),
        )


def linear_time_table(
    speeds: jax.Array, global_batch: int, overhead: Any = 0.0, xp: Any = jnp
) -> jax.Array:
    """Time of worker k at batch b = overhead + b / speed_k for b > 0, and 0 for an idle worker.

    `xp=numpy` evaluates on the host (concrete inputs only), to the float32 values jax.numpy
    gives eagerly (compiled with an overhead, XLA may fuse the multiply-add: last bit).
    """
    speeds = xp.asarray(speeds, xp.float32)
    b = xp.arange(global_batch + 1, dtype=xp.float32)
    overhead = xp.broadcast_to(xp.asarray(overhead, xp.float32), speeds.shape)
    # b times the reciprocal, as XLA rewrites a division by a broadcast operand: both paths
    # then give the same floats.
    table = overhead[:, None] + b[None, :] * (xp.float32(1.0) / speeds)[:, None]
    return xp.where(b[None, :] > 0, table, xp.float32(0.0))


class Controller(NamedTuple):
    """A policy as two pure functions, in the optax spirit.

    init(num_workers, global_batch) -> state (a pytree of arrays with fixed shapes)
    update(state, obs) -> (sizes int32 [W] for the next step, state)

    A state may carry a field `sizes`: the allocation wanted for the very first step, before
    any observation exists (see `initial_sizes`).
    """

    init: Callable[[int, int], Any]
    update: Callable[[Any, Observation], tuple[jax.Array, Any]]


def resolve_bounds(
    num_workers: int, global_batch: int, b_min: Any, b_max: Any, xp: Any = jnp
) -> tuple[jax.Array, jax.Array]:
    """Per-worker int32 bounds (lo, hi) with the sentinels replaced (see PAPER_BOUND).

    `xp=numpy` evaluates on the host, which works inside a trace (for checks before jit).
    With `xp=jnp` and bounds known on the host (not traced), infeasible ones raise
    (`check_bounds`): a policy's `init` given b_min 16 for 4 workers and B = 32 returned
    sizes summing to 60, its contract broken without a word.
    """
    w, b = int(num_workers), int(global_batch)
    for name, bound in (("b_min", b_min), ("b_max", b_max)):  # else numpy's broadcast error
        shape = tuple(bound.shape) if hasattr(bound, "shape") else np.shape(bound)
        if isinstance(bound, str) or len(shape) > 1 or (shape and shape[0] != w):
            raise ValueError(f"{name} must be a number or one a worker ({w}), got {bound!r}")
        # Rows are whole, and -1 is the one negative that means something (the paper's bound):
        # -7 had meant it too, 2.7 was cut to 2, and NaN or inf raised a cast's error.
        values = np.asarray(bound, np.float64) if is_concrete(bound) else np.zeros(())
        if not np.all(np.isfinite(values) & (values == np.round(values)) & (values >= -1)):
            raise ValueError(
                f"{name} must be a whole number of rows >= 0, or -1 (the paper's bound; b_max "
                f"0 is none), got {bound!r}"
            )
    if xp is jnp and is_concrete((b_min, b_max)):
        from controllers.allocate import check_bounds  # allocate depends on this module

        check_bounds(w, b, b_min, b_max)
    paper_lo, paper_hi = b // (2 * w), min(b, 3 * b // w)
    lo = xp.broadcast_to(xp.asarray(b_min, xp.int32), (w,))
    hi = xp.broadcast_to(xp.asarray(b_max, xp.int32), (w,))
    lo = xp.where(lo < 0, paper_lo, lo)
    hi = xp.where(hi < 0, paper_hi, xp.where(hi == NO_UPPER_BOUND, b, hi))
    return lo, hi


def initial_sizes(state: Any, num_workers: int, global_batch: int) -> jax.Array:
    """Sizes for the first step: the state's `sizes` field if it has one, else uniform."""
    sizes = getattr(state, "sizes", None)
    if sizes is not None:
        return jnp.asarray(sizes, jnp.int32)
    # Local import: allocate depends on this module.
    from controllers.allocate import allocate

    return allocate(jnp.ones(num_workers), global_batch, 0, NO_UPPER_BOUND)


def is_concrete(value: Any) -> bool:
    """False for traced values, whose checks must wait (e.g. gains vmapped in a simulation)."""
    return not any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(value))
