"""OmniLearn's proportional rule: b_k' = b_k * mean(t) / t_k, i.e. sizes ~ throughput."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from controllers import response, tracking
from controllers.allocate import allocate
from controllers.base import PAPER_BOUND, Controller, Observation, resolve_bounds
from controllers.registry import register

# 0.1 sits between ACSOS'20 (0.05, which chases 10 % timing noise) and the OmniLearn code
# (0.2, which leaves up to ~20 % imbalance in place); see docs/controllers.md.
DEFAULT_DEADBAND = 0.1
DEFAULT_SMOOTHING = 0.05


class ProportionalState(NamedTuple):
    sizes: jax.Array  # int32 [W]: the allocation last returned (uniform before any step)
    tracker: tracking.Tracker
    num_adjustments: jax.Array  # int32: steps on which the sizes changed


@register("proportional")
def proportional(
    *,
    b_min: Any = PAPER_BOUND,
    b_max: Any = PAPER_BOUND,
    deadband: float = DEFAULT_DEADBAND,
    smoothing: float = DEFAULT_SMOOTHING,
    every: int = 1,
    cliff_drop: float = 0.2,
    cliff_window: int = 5,
    jump: float = 0.25,
    confirm: int = 3,
    cliff_hold: int = 100,
    persist: float = tracking.DEFAULT_PERSIST,
) -> Controller:
    """OmniLearn's P controller.

    b_min, b_max: bounds (-1: the paper's B/(2W) and 3B/W, i.e. 16/96 at W=4, B=128; b_max=0:
      no upper bound). deadband: adjust all workers only when some worker's move exceeds this
      fraction of its batch. smoothing: EWMA weight of the newest per-sample time. every: decide
      every `every` steps, or once per epoch (on obs.epoch_end) when 0. cliff_drop: lower a
      worker's b_max to its previous size when its median throughput, in each of two windows
      of `cliff_window` steps after its batch grew, is this fraction below what it was (0
      disables); cliff_hold: steps such a cap lasts before the worker may grow again (doubled
      each time the same cliff is found again), and decisions without a move after a move
      the times did not answer was undone (controllers/response.py). jump, confirm: a
      per-sample time beyond `jump` of the estimate is held back, unless `confirm` in a row on
      one side (a speed change) over steps that took `persist` seconds in all (host noise
      comes in bursts shorter than that; tracking.DEFAULT_PERSIST).
    """
    settings = tracking.settings_from(locals(), "proportional")

    def init(num_workers: int, global_batch: int) -> ProportionalState:
        lo, hi = resolve_bounds(num_workers, global_batch, b_min, b_max)
        return ProportionalState(
            sizes=allocate(jnp.ones(num_workers), global_batch, lo, hi),
            tracker=tracking.init_tracker(hi, settings),
            num_adjustments=jnp.zeros((), jnp.int32),
        )

    def update(state: ProportionalState, obs: Observation) -> tuple[jax.Array, ProportionalState]:
        b = obs.batch_sizes
        total_batch = obs.time_table.shape[-1] - 1
        lo, hi_limit = resolve_bounds(b.shape[0], total_batch, b_min, b_max)
        p = tracking.p_step(state.tracker, obs, settings, lo, hi_limit)
        # Without an adjustment the current sizes stand (re-clipped in case a cliff lowered hi).
        # An unanswered move is undone (response.py).
        shares = jnp.where(p.adjust, p.target, b.astype(jnp.float32))
        shares = response.revert(p.tracker.trial, p.undo, shares)
        sizes = allocate(shares, total_batch, lo, p.hi)
        new_state = ProportionalState(
            sizes=sizes,
            tracker=tracking.commit(p, b, sizes),
            num_adjustments=state.num_adjustments + jnp.any(sizes != b).astype(jnp.int32),
        )
        return sizes, new_state

    return Controller(init, update)
