"""An example user policy: each step, move part of the way toward throughput-proportional sizes.

It shows everything a new policy needs: a keyword-only factory registered by name, a state
NamedTuple of arrays, and pure `init`/`update` that finish with `controllers.allocate`. Use it
with `--config.controller.plugin=experiments.examples.damped --config.controller.name=damped`.
Unlike `proportional` it reads raw, unsmoothed times, so it is simple rather than noise-proof.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

import controllers


class DampedState(NamedTuple):
    sizes: jax.Array  # int32 [W]: the allocation for the first step


@controllers.register("damped")
def damped(*, gain: float = 0.5, b_min: int = 0, b_max: int = 0) -> controllers.Controller:
    """gain: fraction of the gap to the throughput-proportional split closed each step."""
    if controllers.is_concrete(gain) and not 0 < gain <= 1:  # skipped for a traced (vmapped) gain
        raise ValueError(f"damped: gain must be in (0, 1], got {gain!r}")

    def init(num_workers: int, global_batch: int) -> DampedState:
        return DampedState(controllers.allocate(jnp.ones(num_workers), global_batch, b_min, b_max))

    def update(state: DampedState, obs: controllers.Observation) -> tuple[jax.Array, DampedState]:
        del state  # everything needed is in this step's observation
        sizes = obs.batch_sizes.astype(jnp.float32)
        global_batch = obs.time_table.shape[-1] - 1  # the table spans b = 0..B
        busy = (obs.batch_sizes > 0) & (obs.worker_times > 0)
        throughput = jnp.where(busy, sizes / jnp.where(busy, obs.worker_times, 1.0), 0.0)
        # An idle worker has no measurement: assume it is average so it gets probed again.
        average = throughput.sum() / jnp.maximum(busy.sum(), 1)
        throughput = jnp.where(busy, throughput, average)
        target = global_batch * throughput / throughput.sum()
        gap = target - sizes
        # Close a gap under one sample at once: half of it would round back to where it was.
        step = jnp.where(jnp.abs(gain * gap) <= 0.5, gap, gain * gap)
        new = controllers.allocate(sizes + step, global_batch, b_min, b_max)
        return new, DampedState(new)

    return controllers.Controller(init, update)
