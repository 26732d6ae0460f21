"""The speed-change detector of `predictive` (controllers/predictive.py): per worker, a
two-sided CUSUM of the log-ratios of its measured times to the times its table expected.

A large change (a speed change, a new size's own time) alarms after exactly `confirm` samples
and a smaller persistent one later, while fewer samples, however large (a first execution, a
spike), never do; the alarm's level is the mean ratio over its run.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

# The speed-change detector's drift is at least this many noise standard deviations. Chosen
# among 1.5, 1.0 and 0.75 on the tuning-side families of benchmarks/controller_heldout.py (seeds
# 0, 100-103), never on the held-out seed 1: at 1.5 a worker whose speed moved little against
# the others went unconfirmed for long (p90 1.120 five decisions after a change, 1.088 at 1.0).
CUSUM_NOISE = 1.0
# A CUSUM run holds the noise it began with once the noise estimate has this share of its
# full weight (an EWMA's weights sum to 1). Chosen among 0.3, 0.5 and 0.7 on the tuning family
# (seed 0) and two others (seeds 2 and 3), never on the held-out seed 1.
MATURE = 0.3


class Runs(NamedTuple):
    """Each worker's live CUSUM runs, [W, 2] (up, down) unless noted."""

    drift: jax.Array  # the CUSUM of each side
    run_sum: jax.Array  # sum of the log-ratios since each CUSUM left 0
    run_count: jax.Array  # their number
    run_time: jax.Array  # seconds their steps took (the longest worker's time)
    run_sigma: jax.Array  # [W]: the noise when the live run began (its drift's scale)


def detect(
    runs: Runs,
    var_weight: jax.Array,
    x: jax.Array,
    check: jax.Array,
    jump: Any,
    band: jax.Array,
    sigma: jax.Array,
    confirm: int,
    elapsed: jax.Array,
    persist: Any,
) -> tuple[Runs, jax.Array, jax.Array, jax.Array, jax.Array]:
    """Two-sided CUSUM of the log-ratios `x` of measured to expected times, per worker
    (`runs`: the live runs before this sample; `var_weight`: the noise estimate's weight,
    controllers/noise.py).

    Each sample adds min(x, clip) - k (and the mirror for the other side); an alarm at h.
    k (half the smallest change worth seeing, or CUSUM_NOISE noise standard deviations if larger)
    keeps noise from accumulating (during a run, the noise the run began with: `run_noise`);
    h = confirm * k and the clip make any large change (a speed change) alarm after exactly
    `confirm` samples while `confirm - 1` samples, however large (a first execution, a
    spike), never do; a small persistent change alarms later (a 1.3x change at 10 % noise
    after about 5 samples), where a run of `confirm` outliers beyond a band never would.
    Nor does a run whose steps took less than `persist` seconds (`elapsed` each) in all.
    A run whose mean log-ratio lies beyond twice the outlier `band` (a large change) ends at
    a sample nearer the old level than the run's mean (below half that mean on the run's
    side), and starts again from it: a noisy neighbour's two spikes with a normal step
    between them (8.8x, 1.2x, 4.9x) alarmed at `jump` 0.25 and moved the split 20-30 rows for
    5-7 steps (tests/test_controllers_spikes.py). A sample of a real change that large falls
    there at most once in about 700 (half the change is at least 3 noise deviations); a run
    that must also last `persist` seconds of short steps may lose its drift to one such
    sample.
    Returns (the runs after it, alarm, slower, level, pending):
    level is the mean ratio over the alarming run; pending, that some worker is half-way to
    an alarm (decisions wait for it: it is probably changing speed too).
    """
    sigma = run_noise(runs.drift, runs.run_sigma, sigma)
    k = jnp.maximum(0.5 * jnp.log1p(jump), CUSUM_NOISE * sigma)[:, None]
    h = confirm * k
    clip = k + h / (confirm - 0.5)
    signed = jnp.stack([x, -x], axis=1)
    inside = jnp.log1p(band)[:, None]
    run_mean = runs.run_sum / jnp.maximum(runs.run_count, 1.0)
    contradicted = (runs.drift > 0) & (run_mean > 2.0 * inside) & (signed < 0.5 * run_mean)
    before = tuple(
        jnp.where(contradicted, 0.0, a)
        for a in (runs.drift, runs.run_sum, runs.run_count, runs.run_time)
    )
    grown = jnp.maximum(before[0] + jnp.minimum(signed, clip) - k, 0.0)
    on = check[:, None]
    drift = jnp.where(on, grown, runs.drift)
    live = drift > 0
    run_sum = jnp.where(on, jnp.where(live, before[1] + signed, 0.0), runs.run_sum)
    run_count = jnp.where(on, jnp.where(live, before[2] + 1.0, 0.0), runs.run_count)
    run_time = jnp.where(on, jnp.where(live, before[3] + elapsed, 0.0), runs.run_time)
    # Only a live run alarms or waits: with `jump` 0 and no noise h is 0, and "0 >= 0" had
    # alarmed every worker on every step and held every decision (predictive never moved).
    alarm = (drift > 0) & (drift >= h) & (run_time >= persist)
    fired = alarm.any(axis=1)
    slower = alarm[:, 0]
    side = jnp.where(slower, 0, 1)
    rows = jnp.arange(x.shape[0])
    mean_log = run_sum[rows, side] / jnp.maximum(run_count[rows, side], 1.0)
    level = jnp.exp(jnp.where(slower, mean_log, -mean_log))
    clear = fired[:, None]
    after = [jnp.where(clear, 0.0, a) for a in (drift, run_sum, run_count, run_time)]
    live = jnp.any(after[0] > 0, axis=1) & (var_weight >= MATURE)
    out = Runs(*after, run_sigma=jnp.where(live, sigma, 0.0))
    # A worker half-way to an alarm is probably changing speed too: decisions wait for it.
    pending = jnp.any((out.drift > 0) & (out.drift >= 0.5 * h))
    return out, fired, slower, level, pending


def run_noise(drift: jax.Array, run_sigma: jax.Array, sigma: jax.Array) -> jax.Array:
    """The noise that scales each worker's CUSUM: while a run is live, the noise it began with.

    The run's own samples inside the outlier band are folded into the noise estimate; under a
    speed change too small to leave the band they widen it, which raises the drift k and
    stalls (or kills) the very run that would confirm the change, while the split stays on the
    old speeds. So a run keeps the noise it began with. It is held only once the estimate has
    `MATURE` of its full weight (`run_sigma` 0 otherwise): before that it is still rising from
    its first few readings (two equal ones say "no noise"), and a k held that low would take
    ordinary noise for a change."""
    live = jnp.any(drift > 0, axis=1) & (run_sigma > 0)
    return jnp.where(live, run_sigma, sigma)
