"""The exact min-max allocation from the cluster model's time table (a yardstick, not a policy
a real cluster could run: it reads obs.time_table, which only a model can provide)."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from controllers.allocate import allocate
from controllers.base import PAPER_BOUND, Controller, Observation, resolve_bounds
from controllers.registry import register


class OracleState(NamedTuple):
    sizes: jax.Array  # int32 [W]
    table: jax.Array  # float [W, B + 1]: the table the sizes were solved for
    solved: jax.Array  # bool scalar


@register("oracle")
def oracle(*, b_min: Any = PAPER_BOUND, b_max: Any = PAPER_BOUND) -> Controller:
    """Minimises the slowest worker's modelled time exactly; re-solves when the table changes."""

    def init(num_workers: int, global_batch: int) -> OracleState:
        lo, hi = resolve_bounds(num_workers, global_batch, b_min, b_max)
        return OracleState(
            sizes=allocate(jnp.ones(num_workers), global_batch, lo, hi),
            table=jnp.zeros((num_workers, global_batch + 1), jnp.float32),
            solved=jnp.zeros((), jnp.bool_),
        )

    def update(state: OracleState, obs: Observation) -> tuple[jax.Array, OracleState]:
        table = obs.time_table.astype(jnp.float32)
        w, n = table.shape
        lo, hi = resolve_bounds(w, n - 1, b_min, b_max)
        # The solve (a sort of W(B+1) values) runs only when the table moved; the check is cheap.
        stale = ~state.solved | jnp.any(table != state.table)
        sizes = jax.lax.cond(
            stale, lambda: solve_min_max(table, lo, hi, spread=True), lambda: state.sizes
        )
        return sizes, OracleState(sizes, table, jnp.ones((), jnp.bool_))

    return Controller(init, update)


def solve_min_max(
    table: jax.Array, lo: jax.Array, hi: jax.Array, spread: bool = False
) -> jax.Array:
    """Integer sizes in [lo, hi] summing to B that minimise max_k table[k, size_k].

    `spread=True` then lowers the other workers' times, greedily: the workers at the optimum
    keep their sizes and the rest are solved again, until every worker is settled; of that
    split and the plain one it returns the one whose times, sorted from the slowest, are
    lexicographically smaller (never worse than the plain solve; exactly the lexicographic
    min-max not always, as the fill below chooses which workers reach the optimum). The
    slowest time is the same, but where a worker held at its lower bound sets it, the others
    are balanced among themselves instead of the first ones being filled up to it. Measured
    why (docs/cluster_quotas.md): at CPU quotas 0.5/0.5/0.5/0.125 the eighth-core worker at its
    bound of 16 rows set the optimum, the plain solve gave [80, 16, 16, 16], and the real
    steps ran 1.17x uniform's time.
    """
    # A host (NumPy) table, as Observation.make keeps host values, cannot be indexed by the
    # loop's traced sizes below when `update` is called outside jit.
    table = jnp.asarray(table)
    sizes = _min_max(table, lo, hi)
    if not spread:
        return sizes
    w = table.shape[0]
    rows = jnp.arange(w)

    def settle(_: int, carry: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        fixed, sizes = carry
        # Workers already settled keep their sizes and never set the bound again.
        sub = _min_max(
            jnp.where(fixed[:, None], 0.0, table),
            jnp.where(fixed, sizes, lo),
            jnp.where(fixed, sizes, hi),
        )
        times = jnp.where(fixed, -jnp.inf, table[rows, sub])
        return fixed | (times >= times.max()), sub

    fixed = jnp.zeros(w, bool)
    spread_sizes = jax.lax.fori_loop(0, w, settle, (fixed, sizes))[1]
    a = -jnp.sort(-table[rows, spread_sizes])
    b = -jnp.sort(-table[rows, sizes])
    first = jnp.argmax(a != b)  # the first sorted position where they differ (0: none)
    return jnp.where(a[first] < b[first], spread_sizes, sizes)


def _min_max(table: jax.Array, lo: jax.Array, hi: jax.Array) -> jax.Array:
    """The plain solve of `solve_min_max`.

    Exactness, for rows nondecreasing in b: the set {b : table[k, b] <= T} is then a prefix
    [0, cap_k(T)], so some allocation has max time <= T iff cap_k(T) >= lo_k for all k and
    sum_k min(cap_k(T), hi_k) >= B. That test is monotone in T and the optimum T* is one of
    the table entries with b in [lo_k, hi_k], so a binary search over those entries, sorted,
    finds T* exactly. Any allocation with lo <= size <= min(cap(T*), hi) attains it; we give
    each worker first what it can take strictly below T*, then fill up to T* by index, so ties
    go to the lower index. Rows that are not monotone (noisy tables) get an approximation.
    """
    w, n = table.shape
    total = n - 1
    b = jnp.arange(n)
    upto_hi = b[None, :] <= hi[:, None]
    in_range = upto_hi & (b[None, :] >= lo[:, None])
    candidates = jnp.sort(jnp.where(in_range, table, jnp.inf).ravel())

    def cap(limit: jax.Array, strict: bool = False) -> jax.Array:
        below = table < limit if strict else table <= limit
        return jnp.sum(below & upto_hi, axis=1) - 1

    def feasible(limit: jax.Array) -> jax.Array:
        c = cap(limit)
        return jnp.all(c >= lo) & (jnp.minimum(c, hi).sum() >= total)

    def halve(_: int, bracket: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        left, right = bracket  # invariant: candidates[right] is feasible
        mid = (left + right) // 2
        ok = feasible(candidates[mid])
        return jnp.where(ok, left, mid + 1), jnp.where(ok, mid, right)

    count = w * n
    steps = max(1, math.ceil(math.log2(count)) + 1)
    _, best = jax.lax.fori_loop(0, steps, halve, (jnp.int32(0), jnp.int32(count - 1)))
    t_star = candidates[best]
    upper = jnp.clip(cap(t_star), lo, hi)
    below = jnp.clip(cap(t_star, strict=True), lo, upper)
    extra = total - lo.sum()
    first = _fill_in_order(below - lo, extra)
    second = _fill_in_order(upper - lo - first, extra - first.sum())
    return (lo + first + second).astype(jnp.int32)


def _fill_in_order(room: jax.Array, amount: jax.Array) -> jax.Array:
    """Hands out `amount` units, each worker taking up to its `room`, lower index first."""
    before = jnp.cumsum(room) - room
    return jnp.clip(amount - before, 0, room)
