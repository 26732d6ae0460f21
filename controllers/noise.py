"""Per-worker timing noise of the throughput estimate, and whether a proposed move exceeds it.

On the wall clock a worker's time carries host noise that does not follow its rows (identical
devices in two processes differ by 2x from one step to the next). Taken at face value, one
such sample moves the split; and where time does not grow with the batch, nothing brings it
back. So a throughput policy moves a worker only when the move exceeds `SIGNIFICANCE`
standard errors of the estimates it rests on (the dead-band still applies on top), decides
nothing before every busy worker's noise has been seen (two samples), and widens its outlier
band to `SPREAD` standard deviations of that worker's noise. Samples are first divided by the
step's `common_factor` (a change every worker sees is not heterogeneity), and no worker's noise
is taken below the median worker's. On a noise-free plant all this reduces to the plain
dead-band and `jump`, the first decision one step later.

The noise is the EWMA of the squared log-ratio of each sample to the estimate before it,
winsorised at the outlier band (a spike counts as a large deviation, not as an unbounded
one). A held-back sample counts once its run of outliers ends without confirming a speed
change; a run that confirms one (`confirm` in a row on one side) was not noise and is
dropped. Counted at once, the run would widen the band under it and break itself.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

# Outlier band, in standard deviations of the worker's measured noise (at least `jump`).
SPREAD = 3.0
# A move must exceed this many standard errors of the estimates behind it.
SIGNIFICANCE = 3.0


class Noise(NamedTuple):
    """Per-worker arrays [W]."""

    sq_weight: jax.Array  # discounted sum of the EWMA's squared weights (for its std. error)
    var_sum: jax.Array  # discounted sum of squared (winsorised) log-deviations
    var_weight: jax.Array  # matching discounted count; 0 = no deviation seen yet
    pending_sum: jax.Array  # the current outlier run's share of var_sum, not yet counted
    pending_weight: jax.Array  # its share of var_weight


def init(num_workers: int) -> Noise:
    zeros = jnp.zeros(num_workers, jnp.float32)
    return Noise(zeros, zeros, zeros, zeros, zeros)


def known(n: Noise) -> jax.Array:
    return n.var_weight > 0


def sigma(n: Noise) -> jax.Array:
    """Standard deviation of a worker's log per-sample time (0 while unknown), at least the
    (lower) median worker's: a worker's own estimate rests on few deviations early on (two
    equal readings, a repeated stale time, say "no noise"), and the host's noise is shared."""
    own = jnp.sqrt(n.var_sum / jnp.where(known(n), n.var_weight, 1.0))
    count = known(n).sum()
    ordered = jnp.sort(jnp.where(known(n), own, jnp.inf))
    floor = jnp.where(count > 0, ordered[jnp.maximum(count - 1, 0) // 2], 0.0)
    return jnp.where(known(n), jnp.maximum(own, floor), 0.0)


def band(n: Noise, jump: Any) -> jax.Array:
    """Relative distance beyond which a sample is held back as an outlier."""
    return jnp.maximum(jump, jnp.expm1(SPREAD * sigma(n)))


def observe(
    n: Noise,
    ratio: jax.Array,
    measured: jax.Array,
    folded: jax.Array,
    run_starts: jax.Array,
    outlier_band: jax.Array,
    smoothing: Any,
) -> Noise:
    """Adds one step: `ratio` of each sample to the estimate before it, for `measured` workers
    (a sample and an estimate); `folded` samples entered the estimate (the others were held
    back); `run_starts`, a new run of outliers began with this sample."""
    keep = 1.0 - smoothing
    sq_weight = jnp.where(folded, keep**2 * n.sq_weight + smoothing**2, n.sq_weight)
    deviation = jnp.log(jnp.where(measured, ratio, 1.0))
    # Winsorised once the noise is known; the first deviation is taken whole.
    limit = jnp.where(known(n), jnp.log1p(outlier_band), jnp.inf)
    squared = smoothing * jnp.minimum(deviation**2, limit**2)
    inlier = measured & folded
    held = measured & ~folded
    # An inlier or a new run ends the previous run: it was noise, and now counts.
    ended = measured & (folded | run_starts)
    var_sum = keep * n.var_sum + jnp.where(ended, n.pending_sum, 0.0)
    var_sum += jnp.where(inlier, squared, 0.0)
    var_weight = keep * n.var_weight + jnp.where(ended, n.pending_weight, 0.0)
    var_weight += jnp.where(inlier, smoothing, 0.0)
    carried = held & ~run_starts
    pending_sum = jnp.where(carried, n.pending_sum, 0.0) + jnp.where(held, squared, 0.0)
    pending_weight = jnp.where(carried, n.pending_weight, 0.0) + jnp.where(held, smoothing, 0.0)
    return Noise(
        sq_weight=sq_weight,
        var_sum=jnp.where(measured, var_sum, n.var_sum),
        var_weight=jnp.where(measured, var_weight, n.var_weight),
        pending_sum=jnp.where(measured, pending_sum, n.pending_sum),
        pending_weight=jnp.where(measured, pending_weight, n.pending_weight),
    )


def restart(n: Noise, restarted: jax.Array, smoothing: Any, confirm: int) -> Noise:
    """A confirmed speed change: the estimate restarts on the run's `confirm` samples (equal
    weights, as `tracking` does), and the run was not noise (dropped)."""
    keep2 = (1.0 - smoothing) ** 2
    fresh = smoothing**2 * (1.0 - keep2**confirm) / (1.0 - keep2)  # smoothing > 0
    return n._replace(
        sq_weight=jnp.where(restarted, fresh, n.sq_weight),
        pending_sum=jnp.where(restarted, 0.0, n.pending_sum),
        pending_weight=jnp.where(restarted, 0.0, n.pending_weight),
    )


def middles(values: jax.Array, valid: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The two middle `values` of the `valid` workers (the same one for an odd count; inf
    when none is valid) and how many are valid."""
    count = valid.sum()
    ordered = jnp.sort(jnp.where(valid, values, jnp.inf))
    return ordered[jnp.maximum(count - 1, 0) // 2], ordered[jnp.maximum(count, 1) // 2], count


def median(values: jax.Array, valid: jax.Array) -> jax.Array:
    """The median of the `valid` workers' `values` (the mean of the two middle ones for an
    even count; 0 when none is valid)."""
    lower, upper, count = middles(values, valid)
    return jnp.where(count > 0, 0.5 * (lower + upper), 0.0)


def common_factor(ratio: jax.Array, measured: jax.Array) -> jax.Array:
    """The median over `measured` workers of each sample's ratio to its estimate (1 when
    fewer than two are measured): what the step's conditions did to every worker alike.

    Of two middle values (an even count), the one nearer 1: when half the workers changed
    (one of two processes slowed), the other half is taken as unchanged, so that half's
    change is seen whole rather than split between the two halves.
    """
    low, high, count = middles(ratio, measured)
    middle = jnp.where(jnp.abs(jnp.log(low)) <= jnp.abs(jnp.log(high)), low, high)
    return jnp.where(count >= 2, middle, 1.0)


def move_error(n: Noise, weight: jax.Array, shares: jax.Array) -> jax.Array:
    """Standard error of each worker's relative move toward a target proportional to its rate.

    A worker's log-rate estimate (an EWMA with total weight `weight`) has standard error
    se = sigma * sqrt(sq_weight) / weight. The relative move of worker k is, to first order,
    x_k - sum_j s_j x_j for log-rates x and rate shares s, with variance
    (1 - s_k)^2 se_k^2 + sum_{j != k} s_j^2 se_j^2.
    """
    se = sigma(n) * jnp.sqrt(n.sq_weight) / jnp.where(weight > 0, weight, 1.0)
    se = jnp.where(weight > 0, se, 0.0)
    others = jnp.sum((shares * se) ** 2) - (shares * se) ** 2
    return jnp.sqrt((1.0 - shares) ** 2 * se**2 + others)
