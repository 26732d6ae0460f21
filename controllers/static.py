"""A fixed split: uniform, explicit sizes, or proportional to known capacities. Never moves."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from controllers.allocate import allocate, check_bounds
from controllers.base import NO_UPPER_BOUND, Controller, Observation
from controllers.registry import register


class StaticState(NamedTuple):
    sizes: jax.Array  # int32 [W]


@register("static")
def static(
    *,
    sizes: Sequence[int] = (),
    capacities: Sequence[float] = (),
    b_min: Any = 0,
    b_max: Any = NO_UPPER_BOUND,
) -> Controller:
    """Uniform when both are empty; `sizes` used as given (length W, sum B, each >= 0; bounds
    are not applied to an explicit split); else proportional to `capacities` (e.g. core counts)
    within [b_min, b_max]. Bounds default to none: a fixed split is what the user asked for.
    """
    sizes, capacities = tuple(sizes), tuple(capacities)
    if sizes and capacities:
        raise ValueError("static: give `sizes` or `capacities`, not both")
    if sizes and any(not np.isfinite(s) or int(s) != s or s < 0 for s in sizes):
        raise ValueError(f"static: sizes must be nonnegative integers, got {sizes}")
    if capacities and not all(np.isfinite(c) and c > 0 for c in capacities):
        raise ValueError(f"static: capacities must be positive and finite, got {capacities}")

    def init(num_workers: int, global_batch: int) -> StaticState:
        given = sizes or capacities
        if given and len(given) != num_workers:
            kind = "sizes" if sizes else "capacities"
            raise ValueError(
                f"static: {kind} has {len(given)} entries for {num_workers} workers: {given}"
            )
        if sizes:
            if sum(sizes) != global_batch:
                raise ValueError(
                    f"static: sizes {sizes} sum to {sum(sizes)}, not the global batch "
                    f"{global_batch}"
                )
            return StaticState(jnp.asarray(sizes, jnp.int32))
        check_bounds(num_workers, global_batch, b_min, b_max)
        shares = jnp.asarray(capacities or (1.0,) * num_workers, jnp.float32)
        return StaticState(allocate(shares, global_batch, b_min, b_max))

    def update(state: StaticState, obs: Observation) -> tuple[jax.Array, StaticState]:
        del obs  # a static split ignores measurements by definition
        return state.sizes, state

    return Controller(init, update)
