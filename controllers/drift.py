"""Whether a worker's speed moved while its split stood: what ends a throughput policy's freeze.

After an undone move a throughput policy makes no move for `hold` decisions
(controllers/response.py), or until a speed change is confirmed: a run of `confirm` samples
beyond the outlier band. A change inside that band (which noise widens: 0.65-0.76x at 10 %
noise beside a fixed cost) passes into the estimate unconfirmed, and the freeze held the
split for a speed the worker no longer had (benchmarks/dynamic_segments.py, key 1: P at [19,
17, 1, 91] from step 320 to the end, across the change to equal workers at step 350).

So while the split stands still, each worker's log per-sample time (its inliers, as the
policy's estimate takes them: a spike held back says nothing) is compared with a baseline,
the mean of its first `BASELINE` x `confirm` samples at that split, through a short EWMA
(weight `RECENT` / `confirm`). The worker drifted when the two lie further apart than half
of `jump` (the smallest change worth seeing, as predictive's CUSUM drift) and
`noise.SIGNIFICANCE` standard errors of their difference. The split's own estimate, an EWMA
over many steps and several splits, cannot tell: where times do not follow the rows (a
lasting bias, identical devices in two processes) a move and its undo change the per-sample
time by the rows' ratio, and the estimate takes some 60 steps to forget the trial.

Noise alone also crosses the limit where its three standard errors set it (10 % noise or
more): with lognormal noise of 10-20 % (confirm 3, jump 0.25, steps of `persist` or more) a
worker drifts by chance in about 4 % of 100-step freezes (4,000 draws each; `python -m
benchmarks.drift_false_ends`), so about 16 %
of a four-worker policy's freezes end early. Such an end costs one move on trial, undone
again if the times still do not answer it (the next freeze twice as long).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from controllers import noise

# Samples (in units of `confirm`) whose mean is the baseline at a split.
BASELINE = 2
# The recent level's EWMA weight, over `confirm` (1/6 at confirm 3: some 11 samples' memory).
RECENT = 0.5


class Drift(NamedTuple):
    """Per-worker arrays [W]."""

    base_sum: jax.Array  # sum of log per-sample times at the current split (first samples)
    base_count: jax.Array  # int32: samples behind it (BASELINE x confirm when complete)
    recent: jax.Array  # EWMA of log per-sample times since the baseline was complete
    sigma: jax.Array  # the worker's noise when the baseline was complete
    lasted: jax.Array  # seconds the steps took since `recent` went beyond the limit


def init(num_workers: int) -> Drift:
    zeros = jnp.zeros(num_workers, jnp.float32)
    return Drift(zeros, jnp.zeros(num_workers, jnp.int32), zeros, zeros, zeros)


def observe(
    d: Drift,
    sample: jax.Array,
    inlier: jax.Array,
    sigma: jax.Array,
    seconds: jax.Array,
    jump: Any,
    confirm: int,
    persist: Any,
) -> tuple[Drift, jax.Array, jax.Array]:
    """Folds one step's per-sample times `sample` [W] (`inlier`: taken into the estimate;
    `sigma`, each worker's noise; the step took `seconds`) in.

    Returns (the new state, whether each worker drifted, its recent per-sample time)."""
    logged = jnp.log(jnp.where(inlier, sample, 1.0))
    full = BASELINE * confirm
    filling = inlier & (d.base_count < full)
    base_sum = d.base_sum + jnp.where(filling, logged, 0.0)
    base_count = d.base_count + filling.astype(jnp.int32)
    base = base_sum / jnp.maximum(base_count, 1)
    weight = RECENT / confirm
    complete = base_count >= full
    recent = jnp.where(
        filling & complete,  # the sample that completed the baseline starts the recent level
        base,
        jnp.where(inlier & complete, (1.0 - weight) * d.recent + weight * logged, d.recent),
    )
    # The noise as it was when the baseline was complete: the samples of a change held back
    # as outliers count as noise once their run ends unconfirmed, and widened the limit
    # under the very change it should see (0.2 -> 0.4 at a 0.6x change on the wall clock).
    sigma = jnp.where(filling & complete, sigma, d.sigma)
    # Var(recent - base) for independent samples: w / (2 - w) + 1 / n, times sigma^2.
    se = sigma * jnp.sqrt(weight / (2.0 - weight) + 1.0 / full)
    limit = jnp.maximum(0.5 * jnp.log1p(jump), noise.SIGNIFICANCE * se)
    beyond = complete & (jnp.abs(recent - base) > limit)
    # As a speed change must, the drift lasts `persist` seconds (host noise comes in bursts).
    lasted = jnp.where(beyond, d.lasted + seconds, 0.0)
    # `jump` 0 disables speed-change detection (tracking.py), and with it this.
    drifted = beyond & (lasted >= persist) & (jump > 0)
    return Drift(base_sum, base_count, recent, sigma, lasted), drifted, jnp.exp(recent)


def restart(d: Drift, moved: Any) -> Drift:
    """The split changed (`moved`, bool scalar or [W]): the baseline starts again."""
    return jax.tree.map(lambda a: jnp.where(moved, jnp.zeros_like(a), a), d)
