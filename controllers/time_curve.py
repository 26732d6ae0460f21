"""A worker's time curve t(b) predicted from the sizes it was measured at (for `predictive`).

An affine fit through the measured points below any memory cliff (its intercept pulled
towards 0 the more, the noisier the points), refitted with outlying points weighed down, plus
each point's residual from it (shrunk by its standard error), interpolated between measured
sizes, floored below the smallest measured size by that size's time per sample, and made
nondecreasing.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

# Ridge weight on the intercept, relative to the data weight: small enough that two distinct
# sizes give the affine curve to 0.1 %, large enough that one size gives t / b. Its pull on
# the slope is r mb^2 s0 against the sizes' spread sum w (b - mb)^2: at 1e-3 two sizes a row
# apart near 30 (a spread of 0.5 against 1.9) fitted t = 40 + b with a slope of 2.03, and a
# noise-free plant with a fixed cost of 40 settled 1.4 % over its optimum.
RIDGE = 1e-7
# With noise, the ridge is (noise / NOISY_RIDGE)^2 if larger (0.01 at 5 % noise, 0.16 at 20 %;
# the intercept shrinks by 1 / (1 + ridge)): a few noisy points over a narrow range of sizes
# leave the slope to chance, and a flat fit through them (a high intercept) predicted that a
# worker shrunk far below them would barely speed up. A prior set once, not tuned.
NOISY_RIDGE = 0.5
# A measured size costs more per sample than a smaller measured size by this fraction (or by 3
# noise standard deviations, if more) only past a memory cliff: time per sample falls with the
# batch on an affine curve with a fixed cost and on a flat stretch. Such a size, and every
# larger one, stays out of the line (their residuals keep the cliff in the prediction).
CLIFF = 0.5
# Slope floor for extrapolation, as a fraction of the mean time per sample: a flat stretch
# (a saturating curve below its knee) must not promise free samples beyond what was seen.
MIN_SLOPE = 0.05
# Residuals within SHRINK standard errors of the fit are taken for noise (soft threshold).
SHRINK = 2.0
# Refits: a point further than this fraction (beyond SHRINK standard errors) from the last
# line has its weight cut by the square of the ratio.
HUBER = 0.05
# Reweighted fits after the first (see `predict`).
REFITS = 3
# A size's weight in the fit stops growing here, so one long-held size cannot pin the line.
MAX_WEIGHT = 20.0


def predict(mean: jax.Array, count: jax.Array, noise: Any = 0.0) -> jax.Array:
    """Predicted time [W, B + 1] of each worker at every size, from its measured points.

    `noise` is the relative standard deviation of one measurement. The prediction is the
    affine fit plus each measured point's residual from it, shrunk towards 0 by `SHRINK`
    standard errors (soft threshold), interpolated linearly between measured sizes and held
    at the edge value beyond them. With no noise the measured points are reproduced exactly;
    with noise, a size measured a few times leans on the fit over all sizes (pooling), while
    a residual far beyond the noise (a cliff, a knee) is kept.
    """
    w, n = mean.shape
    b = jnp.arange(n, dtype=jnp.float32)
    seen = count > 0
    sigma = jnp.broadcast_to(jnp.asarray(noise, jnp.float32), (w, 1))[:, 0]
    ridge = jnp.maximum(RIDGE, (sigma / NOISY_RIDGE) ** 2)
    weight = jnp.where(_past_cliff(mean, seen, b, sigma), 0.0, jnp.minimum(count, MAX_WEIGHT))
    intercept, slope = _fit(mean, weight, b, ridge)
    # Reweighted passes: points far off the previous fit (a cliff) weigh less in the line, by
    # the square of how far beyond the noise they lie, so a 3x cliff point cannot tilt it.
    for _ in range(REFITS):
        line = intercept[:, None] + slope[:, None] * b
        scale = jnp.abs(line) * noise / jnp.sqrt(jnp.maximum(count, 1.0))
        limit = SHRINK * scale + HUBER * jnp.abs(line)
        trust = jnp.minimum(1.0, limit / jnp.maximum(jnp.abs(mean - line), 1e-30)) ** 2
        intercept, slope = _fit(mean, weight * trust, b, ridge)
    line = intercept[:, None] + slope[:, None] * b
    scale = jnp.abs(line) * noise / jnp.sqrt(jnp.maximum(count, 1.0))
    residual = mean - line
    residual = jnp.sign(residual) * jnp.maximum(jnp.abs(residual) - SHRINK * scale, 0.0)
    residual = jnp.where(seen, residual, 0.0)
    index = jnp.arange(n)
    left = jax.lax.cummax(jnp.where(seen, index, -1), axis=1)
    right = jax.lax.cummin(jnp.where(seen, index, n), axis=1, reverse=True)
    rows = jnp.arange(w)[:, None]
    left_r = residual[rows, jnp.clip(left, 0, n - 1)]
    right_r = residual[rows, jnp.clip(right, 0, n - 1)]
    has_left, has_right = left >= 0, right < n
    span = jnp.maximum(right - left, 1).astype(jnp.float32)
    between = left_r + (right_r - left_r) * (b - left) / span
    correction = jnp.where(
        has_left & has_right, between, jnp.where(has_left, left_r, jnp.where(has_right, right_r, 0))
    )
    # A worker never measured borrows the others' mean slope (all unmeasured: t = b).
    measured = jnp.any(seen, axis=1)
    shared = jnp.sum(jnp.where(measured, slope, 0.0)) / jnp.maximum(measured.sum(), 1)
    shared = jnp.where(measured.any(), shared, 1.0)
    table = jnp.where(measured[:, None], line + correction, shared * b)
    # Up to the smallest measured size, time per sample does not fall as the batch shrinks (true
    # of an affine curve with a fixed cost, a flat stretch, and a memory cliff above): so the
    # prediction there is at least that size's measured time per sample. Without this floor a
    # steep line (fitted through cliff points) predicts a small batch for free.
    smallest = jnp.argmax(seen, axis=1)
    edge = mean[rows[:, 0], smallest][:, None]
    floor = edge * b / jnp.maximum(smallest, 1)[:, None].astype(jnp.float32)
    below = measured[:, None] & (index[None, :] <= smallest[:, None])
    table = jnp.where(below, jnp.maximum(table, floor), table)
    table = jax.lax.cummax(jnp.maximum(table, 0.0), axis=1)
    return jnp.where(b > 0, table, 0.0)


def _past_cliff(mean: jax.Array, seen: jax.Array, b: jax.Array, sigma: jax.Array) -> jax.Array:
    """[W, B + 1]: the measured sizes from the first one that costs more per sample than a
    smaller measured size by `CLIFF` (or 3 noise standard deviations) upwards."""
    n = mean.shape[1]
    per_sample = jnp.where(seen, mean / jnp.maximum(b, 1.0), jnp.inf)
    cheapest = jax.lax.cummin(per_sample, axis=1)
    below = jnp.concatenate([jnp.full_like(cheapest[:, :1], jnp.inf), cheapest[:, :-1]], axis=1)
    margin = 1.0 + jnp.maximum(CLIFF, 3.0 * sigma)[:, None]
    dear = seen & (per_sample > margin * below)
    first = jnp.where(dear.any(axis=1), jnp.argmax(dear, axis=1), n)
    return seen & (jnp.arange(n)[None, :] >= first[:, None])


def _fit(
    mean: jax.Array, weight: jax.Array, b: jax.Array, r: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Weighted affine fit a_k + c_k b over each worker's measured sizes (weight > 0), with
    a ridge r [W] (relative to the data's weight) on the intercept."""
    wt = jnp.where(weight > 0, weight, 0.0)
    s0, s1 = wt.sum(1), (wt * b).sum(1)
    sy = (wt * mean).sum(1)
    # Normal equations with a ridge r * s0 on the intercept, in sums around the mean size mb
    # (a second pass, so one size has a spread of 0 to the last bit in float32: s2 - s1 mb
    # cancelled, and only a large ridge had kept one size's fit proportional):
    # c = (cov + r mb sy / (1 + r)) / (var + r mb^2 s0 / (1 + r)), a = (sy - c s1) / (s0 (1 + r)).
    mb = s1 / jnp.maximum(s0, 1e-30)
    centred = b[None, :] - mb[:, None]
    var = (wt * centred * centred).sum(1)  # sum w (b - mb)^2
    cov = (wt * centred * mean).sum(1)
    c = (cov + r * mb * sy / (1.0 + r)) / jnp.maximum(var + r * mb * mb * s0 / (1.0 + r), 1e-30)
    c = jnp.maximum(c, MIN_SLOPE * sy / jnp.maximum(s1, 1e-30))
    a = (sy - c * s1) / jnp.maximum(s0 * (1.0 + r), 1e-30)
    return jnp.where(s0 > 0, a, 0.0), jnp.where(s0 > 0, c, 0.0)
