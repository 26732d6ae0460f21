"""Memory-cliff watch for throughput policies: a worker whose throughput fell after its batch
grew gets its previous size as its upper bound, on evidence that persists, for a while.

The trap it avoids (docs/controllers.md): on the wall clock the step after a size change runs
a new program for the first time and takes 2-3x its usual time, and a noisy neighbour can slow
a worker for a few steps. A mean over a short window reads either as a cliff, and a cap for
good then pins the worker. Here
- the evidence is the median per-sample time of two consecutive windows of `window` steps
  after the growth, both beyond `drop` of the throughput before it (a spike or two in a
  window moves a median not at all);
- while the median so far says "slower", the policy holds its decisions (`alarm`), so a real
  cliff is not walked away from before it is confirmed;
- a cap expires after `hold` steps and the worker may grow again; a cliff found again at the
  same place doubles the hold (up to 2^(MAX_STRIKES - 1) holds), one found clean above it
  resets it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

# Strikes counted at most (hold 100: re-tested after 100, 200, 400, then every 800 steps).
MAX_STRIKES = 4
# Samples a window needs before its median may raise an alarm (so one spike never does).
ALARM_SAMPLES = 3


class Watch(NamedTuple):
    """Per-worker cliff state (arrays [W] unless noted)."""

    hi: jax.Array  # int32 upper bounds, lowered at a cliff
    window: jax.Array  # float [W, 2 * window]: per-sample times since the size last changed
    count: jax.Array  # int32: samples in it
    rate_before: jax.Array  # throughput estimate when the size last changed
    size_before: jax.Array  # int32 size before that change
    grew: jax.Array  # bool: that change raised this worker; a verdict is pending
    cap_age: jax.Array  # int32: steps since hi was lowered (0 when not capped)
    strikes: jax.Array  # int32: caps found in a row at or below the last cap
    cap_level: jax.Array  # int32: the size of the last cap


class Verdict(NamedTuple):
    watch: Watch
    found: jax.Array  # bool [W]: a cliff confirmed this step (hi lowered)
    alarm: jax.Array  # bool [W]: slower since it grew, not yet confirmed: hold decisions


def init_watch(hi: jax.Array, window: int) -> Watch:
    w = hi.shape[0]
    zeros_f, zeros_i = jnp.zeros(w, jnp.float32), jnp.zeros(w, jnp.int32)
    return Watch(
        hi=hi.astype(jnp.int32),
        window=jnp.zeros((w, 2 * window), jnp.float32),
        count=zeros_i,
        rate_before=zeros_f,
        size_before=zeros_i,
        grew=jnp.zeros(w, jnp.bool_),
        cap_age=zeros_i,
        strikes=zeros_i,
        cap_level=zeros_i,
    )


def observe(
    watch: Watch,
    sample: jax.Array,
    valid: jax.Array,
    sizes: jax.Array,
    *,
    drop: Any,
    hold: int,
    lo: jax.Array,
    hi_limit: jax.Array,
) -> Verdict:
    """Adds one per-sample time per worker; confirms, raises or lifts caps."""
    w, n = watch.window.shape
    half = n // 2
    rows = jnp.arange(w)
    room = valid & (watch.count < n)
    column = jnp.minimum(watch.count, n - 1)
    window = watch.window.at[rows, column].set(jnp.where(room, sample, watch.window[rows, column]))
    count = watch.count + room.astype(jnp.int32)

    def slower(per_sample: jax.Array) -> jax.Array:
        return per_sample * watch.rate_before * (1.0 - drop) > 1.0

    on = watch.grew & (drop > 0) & (watch.rate_before > 0)
    alarm = on & (count >= ALARM_SAMPLES) & slower(_median(window, count))
    verdict = on & (count >= n)
    halves = jnp.full(w, half)
    found = (
        verdict
        & slower(_median(window[:, :half], halves))
        & slower(_median(window[:, half:], halves))
    )
    clean = verdict & ~found
    level = jnp.maximum(jnp.maximum(watch.size_before, lo), 1)
    again = found & (watch.strikes > 0) & (level <= watch.cap_level)
    strikes = jnp.where(
        found, jnp.where(again, jnp.minimum(watch.strikes + 1, MAX_STRIKES), 1), watch.strikes
    )
    strikes = jnp.where(clean & (sizes > watch.cap_level), 0, strikes)
    hi = jnp.where(found, level, watch.hi)
    capped = hi < hi_limit
    cap_age = jnp.where(found | ~capped, 0, watch.cap_age + 1)
    limit = hold * jnp.left_shift(1, jnp.maximum(strikes - 1, 0))
    expired = capped & (cap_age >= limit)
    watch = watch._replace(
        hi=jnp.where(expired, hi_limit, hi),
        window=window,
        count=count,
        grew=watch.grew & ~verdict,
        cap_age=jnp.where(expired, 0, cap_age),
        strikes=strikes,
        cap_level=jnp.where(found, level, watch.cap_level),
    )
    return Verdict(watch=watch, found=found, alarm=alarm & ~verdict)


def record_move(watch: Watch, old: jax.Array, new: jax.Array, rates: jax.Array) -> Watch:
    """Opens a fresh watch for each worker whose size changed (a verdict for those that grew)."""
    moved = new != old
    return watch._replace(
        window=jnp.where(moved[:, None], 0.0, watch.window),
        count=jnp.where(moved, 0, watch.count),
        rate_before=jnp.where(moved, rates, watch.rate_before),
        size_before=jnp.where(moved, old, watch.size_before),
        grew=jnp.where(moved, new > old, watch.grew),
    )


def _median(values: jax.Array, count: jax.Array) -> jax.Array:
    """Lower median of the first `count` entries of each row (rows with no entry give inf).

    The lower one of the two middle values for an even count, so half the samples slow (a
    first execution and a spike among four) is not yet "slower"."""
    n = values.shape[1]
    filled = jnp.where(jnp.arange(n)[None, :] < count[:, None], values, jnp.inf)
    ordered = jnp.sort(filled, axis=1)
    middle = (jnp.maximum(count, 1)[:, None] - 1) // 2
    return jnp.take_along_axis(ordered, middle, axis=1)[:, 0]
