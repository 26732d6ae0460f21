"""Real-valued shares -> integer batch sizes that sum to B exactly and respect the bounds."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from controllers.base import resolve_bounds


def allocate(
    shares: Any, global_batch: int, b_min: Any = 0, b_max: Any = 0, *, literal: bool = False
) -> jax.Array:
    """Integer sizes int32 [W] with sum == global_batch and b_min <= size <= b_max.

    `shares` are nonnegative weights (any scale; non-finite or negative entries count as 0; all
    zero means uniform). They are scaled to sum to B and clipped to {lo <= z <= hi}, with the
    one scale that makes them sum to B (`_project`: a clipped worker's excess or deficit goes
    to the free ones in proportion to their shares, so a throughput share keeps equalising
    their times), then rounded by largest remainder with ties to the lower index.
    Valid integer sizes come back unchanged. `b_min`/`b_max` are scalars or per-worker arrays;
    b_max = 0 means B and -1 means the paper rule (see controllers.base.PAPER_BOUND).
    `global_batch` must be a Python int (it fixes shapes). Infeasible bounds raise where they
    are known on the host (`resolve_bounds` calls `check_bounds`); traced ones give an
    undefined (but finite) result. `literal=True` takes already
    resolved per-worker bounds as they are (no sentinels), so b_max = 0 really means 0 (the
    trainer uses it for an unavailable worker).
    """
    b = int(global_batch)
    x = jnp.asarray(shares, jnp.float32)
    w = x.shape[0]
    if literal:
        lo = jnp.broadcast_to(jnp.asarray(b_min, jnp.int32), (w,))
        hi = jnp.broadcast_to(jnp.asarray(b_max, jnp.int32), (w,))
    else:
        lo, hi = resolve_bounds(w, b, b_min, b_max)
    hi = jnp.maximum(hi, lo)
    x = jnp.where(jnp.isfinite(x) & (x > 0), x, 0.0)
    total = x.sum()
    # Integer input summing to B scales by exactly 1.0, which keeps allocate idempotent.
    y = jnp.where(total > 0, x * (b / jnp.where(total > 0, total, 1.0)), b / w)
    z = _project(y, lo.astype(jnp.float32), hi.astype(jnp.float32), b)
    return _round_largest_remainder(z, lo, hi, b)


def _project(y: jax.Array, lo: jax.Array, hi: jax.Array, b: int) -> jax.Array:
    """clip(c * y, lo, hi) with the scale c solving sum == b, found exactly.

    f(c) = sum clip(c * y, lo, hi) is nondecreasing and piecewise linear in c, with
    breakpoints at lo / y and hi / y; f's values there bracket the root (`_root`). A shift
    (`_shift`, lam added to every share) had spread a clipped worker's excess evenly: beside
    a worker 20x faster held at b_max, the slowest one (50x slower than the rest) got 4 rows
    for the 2 its share asked, and its time doubled the step's. Where no scale reaches b
    (every worker with a share at its bound), the shift does: it moves the workers without
    one.
    """
    pos = y > 0
    safe = jnp.where(pos, y, 1.0)
    breaks = jnp.concatenate([jnp.where(pos, lo / safe, 0.0), jnp.where(pos, hi / safe, 0.0)])
    f = jnp.clip(breaks[:, None] * y[None, :], lo, hi).sum(axis=1)
    c = _root(breaks, f, b, jnp.clip(y, lo, hi).sum() == b, 1.0)
    z = jnp.clip(c * y, lo, hi)
    return jnp.where(jnp.abs(z.sum() - b) < 1e-3 * max(b, 1), z, _shift(y, lo, hi, b))


def _shift(y: jax.Array, lo: jax.Array, hi: jax.Array, b: int) -> jax.Array:
    """clip(y + lam, lo, hi) with lam solving sum == b, found exactly.

    f(lam) = sum clip(y + lam, lo, hi) is nondecreasing and piecewise linear with breakpoints
    at lo - y and hi - y. Evaluating f at all 2W breakpoints (O(W^2), fixed shape) brackets the
    root between the last breakpoint with f <= b and the first with f > b; f is linear between
    them, so interpolation finds it. Only f's values at breakpoints are used: recomputing a
    slope from lo - y under jit can round differently and miscount the free workers.
    """
    breaks = jnp.concatenate([lo - y, hi - y])
    f = jnp.clip(y[None, :] + breaks[:, None], lo, hi).sum(axis=1)
    lam = _root(breaks, f, b, jnp.clip(y, lo, hi).sum() == b, 0.0)
    return jnp.clip(y + lam, lo, hi)


def _root(breaks: jax.Array, f: jax.Array, b: int, feasible: jax.Array, identity: float):
    """Where a nondecreasing piecewise-linear f, given at its breakpoints, reaches b: between
    the last breakpoint with f <= b and the first with f > b, by interpolation (the smallest
    or largest breakpoint when b lies outside: infeasible bounds). `identity` where the input
    is already feasible (the common case for controller outputs: no float error added)."""
    below = f <= b
    left = jnp.max(jnp.where(below, breaks, -jnp.inf))
    right = jnp.min(jnp.where(below, jnp.inf, breaks))
    f_left = jnp.max(jnp.where(below, f, -jnp.inf))
    f_right = jnp.min(jnp.where(below, jnp.inf, f))
    inside = jnp.isfinite(left) & jnp.isfinite(right)
    fraction = (b - f_left) / jnp.where(inside, f_right - f_left, 1.0)
    root = jnp.where(inside, left + fraction * (right - left), identity)
    root = jnp.where(jnp.isfinite(left), root, breaks.min())  # only when sum(lo) > b
    root = jnp.where(jnp.isfinite(right), root, breaks.max())  # only when sum(hi) <= b
    return jnp.where(feasible, identity, root)


def _round_largest_remainder(z: jax.Array, lo: jax.Array, hi: jax.Array, b: int) -> jax.Array:
    # Snap float error (29.99998 for 30) so a value that is an integer rounds as one. Every
    # use below must see the same z: XLA may otherwise recompute z inside each fusion with
    # different rounding (a contracted multiply-add), one ulp apart, so that the deficit and
    # the units handed out disagree and a unit is lost or given twice (sums of B - 1 at B =
    # 131072 and above, 7 of 600 random cases). `optimization_barrier` did not stop it on CPU
    # (the compiled program kept two copies); a sort (here by position, so the order stays)
    # is no elementwise op, so XLA computes z once and every fusion reads that buffer.
    nearest = jnp.round(z)
    z = jnp.where(jnp.abs(z - nearest) < 1e-4, nearest, z)
    _, z = jax.lax.sort_key_val(jnp.arange(z.shape[0]), z)
    base = jnp.clip(jnp.floor(z).astype(jnp.int32), lo, hi)
    deficit = b - base.sum()
    # Remainders are taken from the clipped base: z = 1.9999999 lifted to b_min = 2 has
    # remainder ~0, not ~1 (which would wrongly win the next unit).
    remainder = z - base
    # A worker already at its upper bound may not take a unit, whatever its remainder.
    add = _rank(-jnp.where(base < hi, remainder, -2.0)) < deficit  # ties: lower index first
    # Float error in the projection could overshoot B; take units back from the smallest
    # remainders above the lower bound. A no-op whenever the projection summed exactly.
    remove = _rank(jnp.where(base > lo, remainder, 2.0)) < -deficit
    return base + add.astype(jnp.int32) - remove.astype(jnp.int32)


def _rank(key: jax.Array) -> jax.Array:
    """Position of each entry in a stable ascending sort of `key` (ties: lower index first).

    Counted pairwise, O(W^2): for the tens of workers a cluster has this is one fused kernel,
    several times faster on CPU than argsort plus a scatter.
    """
    index = jnp.arange(key.shape[0])
    before = (key[None, :] < key[:, None]) | (
        (key[None, :] == key[:, None]) & (index[None, :] < index[:, None])
    )
    return before.sum(axis=1).astype(jnp.int32)


MAX_BATCH = 2**24  # float32 holds every integer below it exactly


def check_bounds(num_workers: int, global_batch: int, b_min: Any = 0, b_max: Any = 0) -> None:
    """Raises ValueError when no allocation can satisfy the bounds (host side, before jit)."""
    w, b = int(num_workers), int(global_batch)
    if w < 1 or b < 0:
        raise ValueError(f"need num_workers >= 1 and global_batch >= 0, got {w} and {b}")
    if b >= MAX_BATCH:
        raise ValueError(
            f"global batch {b} is too large: splits are computed in float32, exact below "
            f"2^24 = {MAX_BATCH} rows"
        )
    lo, hi = resolve_bounds(w, b, b_min, b_max, xp=np)
    if np.any(lo > hi):
        k = int(np.argmax(lo > hi))
        raise ValueError(f"worker {k}: b_min {lo[k]} exceeds b_max {hi[k]}")
    if lo.sum() > b:
        raise ValueError(
            f"infeasible bounds: {w} workers x b_min sum to {lo.sum()} > global batch {b}; "
            f"lower b_min (b_min={b_min} resolves to {lo.tolist()})"
        )
    if hi.sum() < b:
        raise ValueError(
            f"infeasible bounds: {w} workers x b_max sum to {hi.sum()} < global batch {b}; "
            f"raise b_max or use b_max=0 for no upper bound (b_max={b_max} resolves to "
            f"{hi.tolist()})"
        )
