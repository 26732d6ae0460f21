"""Pieces the throughput-driven policies share: smoothing, cadence, dead-band, memory cliff.

`proportional` and `pi` both call `p_step` and `commit`; a new throughput policy should too.
"""

from __future__ import annotations

import numbers
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from controllers import cliff, drift, noise, response
from controllers.base import Observation, is_concrete

# Moves smaller than half a sample cannot change a rounded allocation; treating them as zero
# keeps small-batch workers (where one sample is many percent) from tripping the dead-band.
HALF_SAMPLE = 0.5
# A speed change must last this many seconds, as well as `confirm` samples, before it is
# believed. Host noise comes in bursts on the scheduler's time scale: on the shared 2-core
# machine one process of two ran 3-5x slower than the other for 3-5 steps of 1-2 ms, and
# confirmed in 3 samples that moved the split of identical devices to [13]*4 + [3]*4, where
# it stayed (times that do not follow the rows never pull it back). A CFS quota period is
# 100 ms. Steps of 33 ms or more confirm in `confirm` samples as before; the first decision
# waits until the steps span it too (one or two steps where they take 0.05-0.1 s).
DEFAULT_PERSIST = 0.1


class Settings(NamedTuple):
    """Hyper-parameters of the throughput estimate and the adjustment trigger."""

    deadband: Any
    smoothing: Any
    every: int
    cliff_drop: Any
    cliff_window: int
    jump: Any
    confirm: int
    cliff_hold: int = 100
    persist: Any = DEFAULT_PERSIST


class Tracker(NamedTuple):
    """Per-worker measurements carried between steps (all arrays [W] unless noted)."""

    ewma_sum: jax.Array  # discounted sum of per-sample times t_k / b_k
    ewma_weight: jax.Array  # matching discounted count; 0 = never measured
    cliff: cliff.Watch  # memory-cliff evidence and caps (its `hi`: upper bounds)
    suspect: jax.Array  # int32: consecutive samples beyond `jump` (+ above, - below)
    suspect_sum: jax.Array  # sum of those samples
    suspect_time: jax.Array  # seconds those samples' steps took (the longest worker's time)
    tick: jax.Array  # int32 scalar: steps since the last decision
    seen_time: jax.Array  # float scalar: seconds the measured steps took (up to `persist`)
    noise: noise.Noise  # timing noise of each worker's estimate
    trial: response.Trial  # the last move, until the times answered it (response.py)
    drift: drift.Drift  # whether a speed moved while the split stood (ends a freeze; drift.py)


class PStep(NamedTuple):
    tracker: Tracker
    target: jax.Array  # float [W]: OmniLearn's allocation, proportional to throughput
    due: jax.Array  # bool: a decision step under the cadence, no speed change pending
    adjust: jax.Array  # bool: due and beyond the dead-band, or a cliff was found
    significant: jax.Array  # bool [W]: the move toward `target` is beyond the noise
    rates: jax.Array  # float [W]: throughput estimates (samples per second)
    hi: jax.Array  # int32 [W]: upper bounds for this decision (lowered at memory cliffs)
    undo: jax.Array  # bool: the last move went unanswered; go back to `tracker.trial.before`
    trial_ok: jax.Array  # bool: a move made now is a trial (a P move; not an undo or a cap)


def is_number(value: Any) -> bool:
    """A real number (a Python or NumPy scalar, or a 0-d array), not a string or a bool."""
    if isinstance(value, str | bytes | bool):
        return False
    if isinstance(value, numbers.Real):
        return True
    shape = getattr(value, "shape", None)
    return shape == () and np.issubdtype(np.asarray(value).dtype, np.number)


def validate(settings: Settings, policy: str = "") -> Settings:
    """Host-side checks, each message naming `policy` (if given: a plug-in built on these
    pieces may call it without); traced values (gains vmapped in a simulation) are skipped."""
    s = settings
    who = f"{policy}: " if policy else ""

    def require(value: Any, ok: Any, message: str) -> None:
        # NaN fails every `ok`; a string ("0.1" passed float()) failed at the first update
        if is_concrete(value) and not (is_number(value) and ok(float(value))):
            raise ValueError(f"{who}{message}, got {value!r}")

    require(s.deadband, lambda v: v >= 0, "deadband must be >= 0")
    require(s.smoothing, lambda v: 0 < v <= 1, "smoothing must be in (0, 1]")
    require(s.cliff_drop, lambda v: 0 <= v < 1, "cliff_drop must be in [0, 1) (0 disables)")
    if int(s.every) != s.every or s.every < 0:
        raise ValueError(f"{who}every must be an int >= 0 (0 = once per epoch), got {s.every!r}")
    require(s.jump, lambda v: v >= 0, "jump must be >= 0 (0 disables)")
    require(s.persist, lambda v: v >= 0, "persist must be >= 0 seconds (0: confirm alone)")
    for name in ("cliff_window", "confirm", "cliff_hold"):
        value = getattr(s, name)
        if int(value) != value or value < 1:
            raise ValueError(f"{who}{name} must be an int >= 1, got {value!r}")
    return s._replace(
        every=int(s.every),
        cliff_window=int(s.cliff_window),
        confirm=int(s.confirm),
        cliff_hold=int(s.cliff_hold),
    )


def settings_from(arguments: dict[str, Any], policy: str = "") -> Settings:
    """The checked Settings named in policy `policy`'s keyword `arguments` (its `locals()`)."""
    return validate(Settings(**{name: arguments[name] for name in Settings._fields}), policy)


def measured(obs: Observation) -> jax.Array:
    """[W] bool: the workers whose time this step measures them (rows, a positive finite time)."""
    t = obs.worker_times
    return (obs.batch_sizes > 0) & (t > 0) & jnp.isfinite(t)


def step_seconds(obs: Observation) -> jax.Array:
    """How long the step took: its longest measured worker's time (0 if none was measured)."""
    return jnp.max(jnp.where(measured(obs), obs.worker_times, 0.0))


def persisted(seen_time: jax.Array, obs: Observation, persist: Any) -> tuple[jax.Array, jax.Array]:
    """(seconds the measured steps have taken, capped at `persist`; whether they reach it)."""
    seen_time = jnp.minimum(seen_time + step_seconds(obs), persist)
    return seen_time, seen_time >= persist


def init_tracker(hi: jax.Array, s: Settings) -> Tracker:
    w = hi.shape[0]
    zeros_f = jnp.zeros(w, jnp.float32)
    zeros_i = jnp.zeros(w, jnp.int32)
    return Tracker(
        ewma_sum=zeros_f,
        ewma_weight=zeros_f,
        cliff=cliff.init_watch(hi, s.cliff_window),
        suspect=zeros_i,
        suspect_sum=zeros_f,
        suspect_time=zeros_f,
        tick=jnp.zeros((), jnp.int32),
        seen_time=jnp.zeros((), jnp.float32),
        noise=noise.init(w),
        trial=response.init(w, s.cliff_hold),
        drift=drift.init(w),
    )


def p_step(tr: Tracker, obs: Observation, s: Settings, lo: jax.Array, hi_limit: jax.Array) -> PStep:
    """Folds one observation in and proposes OmniLearn's allocation b_k' ~ X_k.

    `lo` and `hi_limit` are the configured bounds; `PStep.hi` is `hi_limit` lowered at cliffs.
    """
    b = obs.batch_sizes
    t = obs.worker_times
    # Idle workers give no measurement; they keep their last estimate.
    valid = measured(obs)
    sample = jnp.where(valid, t / jnp.maximum(b, 1), 0.0)
    # A change that every worker sees at once (the host's load) is not heterogeneity: samples
    # are divided by the step's median ratio to the estimates, so the estimates are relative
    # (only ratios of rates set the split) and such a change moves none of them.
    sample = sample / noise.common_factor(sample / _estimate(tr), valid & (tr.ewma_weight > 0))
    # Smooth per-sample time, not t_k: it survives batch changes under a near-linear cost, so
    # no restart (and no decision on one noisy sample) after each adjustment. The weight gives
    # the bias correction, so the first measurement is taken at face value.
    ewma_sum, ewma_weight, suspect, suspect_sum, suspect_time, noise_now, restart, inlier = _fold(
        tr, sample, valid, step_seconds(obs), s
    )
    # A speed change too small for a run of outliers to confirm ends a freeze too (drift.py);
    # the worker's estimate, half old and half new, restarts at the recent level as at a
    # confirmed change.
    moving, drifted, level = drift.observe(
        tr.drift,
        sample,
        inlier,
        noise.sigma(noise_now),
        step_seconds(obs),
        s.jump,
        s.confirm,
        s.persist,
    )
    # Outside a freeze a drift ends nothing (the baseline is stale then, but every freeze
    # begins with an undo, whose split change resets it in `commit`).
    drifted = drifted & (tr.trial.frozen > 0)
    ewma_sum, ewma_weight, noise_now = _restart(drifted, level, ewma_sum, ewma_weight, noise_now, s)
    moving = drift.restart(moving, jnp.any(restart | drifted))
    # Whether the times answered the last move; none is made until they have (response.py).
    # PI's creep is judged on the noise held from before it (`commit`'s `creep`).
    verdict = response.observe(
        tr.trial,
        t,
        valid,
        inlier,
        step_seconds(obs),
        restart | drifted,
        noise.sigma(noise_now),
        s.confirm,
        s.persist,
    )
    # Memory cliff: judged on the window since the size changed (the EWMA lags), by median.
    watch = cliff.observe(
        tr.cliff,
        sample,
        valid,
        obs.batch_sizes,
        drop=s.cliff_drop,
        hold=s.cliff_hold,
        lo=lo,
        hi_limit=hi_limit,
    )

    if s.every > 0:
        tick = tr.tick + 1
        due = tick >= s.every
        tick = jnp.where(due, 0, tick)
    else:
        due, tick = jnp.asarray(obs.epoch_end, jnp.bool_), jnp.zeros((), jnp.int32)

    known = ewma_weight > 0
    per_sample = ewma_sum / jnp.where(known, ewma_weight, 1.0)
    rates = jnp.where(known, 1.0 / jnp.maximum(per_sample, 1e-30), 0.0)
    # A never-measured worker is assumed average, so it is probed rather than starved.
    mean_rate = rates.sum() / jnp.maximum(known.sum(), 1)
    rates = jnp.where(known, rates, mean_rate)
    total_batch = obs.time_table.shape[-1] - 1
    target = total_batch * rates / jnp.maximum(rates.sum(), 1e-30)

    move = jnp.abs(target - b)
    # Evidence, not noise: the move must exceed the estimates' standard error (noise.py).
    error = noise.move_error(noise_now, ewma_weight, target / total_batch)
    floor = jnp.maximum(noise.SIGNIFICANCE * error * jnp.maximum(b, 1), HALF_SAMPLE)
    significant = move > floor
    beyond = jnp.any(significant & (move > s.deadband * jnp.maximum(b, 1)))
    # While a worker may be changing speed, wait for confirmation rather than act on an
    # estimate that is half old, half new (that costs several partial adjustments). Likewise
    # while a worker that grew looks slower, until the cliff verdict; and until every busy
    # worker's noise is known (its first sample is not taken at face value).
    ready = jnp.all(noise.known(noise_now) | ~known | (b == 0))
    # Nor before the measurements span `persist` seconds: a first difference is a speed
    # difference only once it has lasted as long as a speed change must.
    seen_time, lasted = persisted(tr.seen_time, obs, s.persist)
    ready = ready & lasted
    due = due & jnp.all(suspect == 0) & ~jnp.any(watch.alarm) & ready & ~verdict.blocked
    adjust = ((due & beyond & jnp.any(known)) | jnp.any(watch.found)) & ~verdict.undo
    tracker = tr._replace(
        ewma_sum=ewma_sum,
        ewma_weight=ewma_weight,
        cliff=watch.watch,
        suspect=suspect,
        suspect_sum=suspect_sum,
        suspect_time=suspect_time,
        tick=tick,
        seen_time=seen_time,
        noise=noise_now,
        trial=verdict.trial,
        drift=moving,
    )
    # A move beyond the dead-band is tried (an integral's creep too: `commit`); an undo is not.
    trial_ok = adjust & ~verdict.undo & ~jnp.any(watch.found)
    return PStep(
        tracker, target, due, adjust, significant, rates, watch.watch.hi, verdict.undo, trial_ok,
    )  # fmt: skip


def _fold(
    tr: Tracker, sample: jax.Array, valid: jax.Array, elapsed: jax.Array, s: Settings
) -> tuple[jax.Array, ...]:
    """Folds the samples into the EWMA, holding back outliers, and detects speed changes
    (the last two values returned: whether each worker's estimate restarted at one, and
    whether its sample was folded in, not held back).

    A sample more than `jump` (relative; wider for a noisy worker, see noise.py) from the
    estimate is held back (a first execution, a spike) unless `confirm` in a row lie on the
    same side and agree, over steps that took `persist` seconds (`elapsed` each) in all: a
    speed change, not noise. The worker's EWMA then restarts at their
    mean. Agree: an outlier nearer the old estimate than the run's mean so far, and beyond
    the band squared of that mean, starts a new run. Without that, a noisy neighbour's 8.8x
    spike, a normal step read at 1.29x (10 % noise) and a 4.9x spike confirmed a change to
    5.6x, and the split moved 42 of 96 rows for 3 steps (tests/test_controllers_spikes.py).

    An EWMA alone lags a step change by ~1/smoothing steps, during which the dead-band fires
    on half-updated estimates and leaves a residual. With 10 % noise and jump 0.25, three
    same-side 2.5-sigma samples in a row occur about once in 10^7 worker-steps.
    """
    known = tr.ewma_weight > 0
    before = _estimate(tr)
    measured = valid & known
    ratio = sample / jnp.maximum(before, 1e-30)
    check = measured & (s.jump > 0)
    band = noise.band(tr.noise, s.jump)
    up = check & (ratio > 1.0 + band)
    down = check & (ratio < 1.0 / (1.0 + band))
    fold = valid & ~up & ~down
    keep = 1.0 - s.smoothing
    ewma_sum = jnp.where(fold, keep * tr.ewma_sum + s.smoothing * sample, tr.ewma_sum)
    ewma_weight = jnp.where(fold, keep * tr.ewma_weight + s.smoothing, tr.ewma_weight)
    # An outlier nearer the old estimate than the open run's mean, and beyond the band squared
    # of that mean, is not the run's new level: it starts a new run.
    run_mean = tr.suspect_sum / jnp.maximum(jnp.abs(tr.suspect), 1)
    off_run = jnp.abs(jnp.log(sample / jnp.maximum(run_mean, 1e-30)))
    apart = off_run > jnp.maximum(2.0 * jnp.log1p(band), jnp.abs(jnp.log(ratio)))
    prior = jnp.where((up | down) & (tr.suspect != 0) & apart, 0, tr.suspect)
    noisy = noise.observe(
        tr.noise, ratio, measured, fold, run_starts(prior, up, down), band, s.smoothing
    )
    suspect, suspect_sum = streak(prior, tr.suspect_sum, up, down, valid, sample)
    _, suspect_time = streak(prior, tr.suspect_time, up, down, valid, elapsed)
    restart = (jnp.abs(suspect) >= s.confirm) & (suspect_time >= s.persist)
    fresh_mean = suspect_sum / jnp.maximum(jnp.abs(suspect), 1)
    ewma_sum, ewma_weight, noisy = _restart(restart, fresh_mean, ewma_sum, ewma_weight, noisy, s)
    suspect = jnp.where(restart, 0, suspect)
    suspect_sum = jnp.where(restart, 0.0, suspect_sum)
    suspect_time = jnp.where(restart, 0.0, suspect_time)
    return ewma_sum, ewma_weight, suspect, suspect_sum, suspect_time, noisy, restart, fold


def _restart(
    where: jax.Array,
    level: jax.Array,
    ewma_sum: jax.Array,
    ewma_weight: jax.Array,
    noisy: noise.Noise,
    s: Settings,
) -> tuple[jax.Array, jax.Array, noise.Noise]:
    """A speed change (confirmed, or a drift): the estimate of each worker `where` restarts
    at `level`, weighted as if `confirm` samples at it were the only ones ever seen."""
    fresh_weight = 1.0 - (1.0 - s.smoothing) ** s.confirm
    ewma_sum = jnp.where(where, level * fresh_weight, ewma_sum)
    ewma_weight = jnp.where(where, fresh_weight, ewma_weight)
    return ewma_sum, ewma_weight, noise.restart(noisy, where, s.smoothing, s.confirm)


def _estimate(tr: Tracker) -> jax.Array:
    """Each worker's smoothed per-sample time (1 where never measured)."""
    known = tr.ewma_weight > 0
    return jnp.where(known, tr.ewma_sum / jnp.where(known, tr.ewma_weight, 1.0), 1.0)


def run_starts(suspect: jax.Array, up: jax.Array, down: jax.Array) -> jax.Array:
    """Whether each worker's outlier (`up` or `down`) begins a new run, given the `streak`
    count before it: the first outlier, or the first on the other side."""
    return (up & (suspect <= 0)) | (down & (suspect >= 0))


def streak(
    suspect: jax.Array,
    suspect_sum: jax.Array,
    up: jax.Array,
    down: jax.Array,
    valid: jax.Array,
    value: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """Counts consecutive outliers per worker (+ above, - below) and sums their `value`s.

    Idle steps (no sample) keep the count; a sample inside the band clears it.
    """
    count = jnp.where(
        up,
        jnp.maximum(suspect, 0) + 1,
        jnp.where(down, jnp.minimum(suspect, 0) - 1, jnp.where(valid, 0, suspect)),
    )
    same_run = (up & (suspect > 0)) | (down & (suspect < 0))
    total = jnp.where(up | down, jnp.where(same_run, suspect_sum, 0.0) + value, 0.0)
    return count, jnp.where(valid, total, suspect_sum)


def commit(p: PStep, old: jax.Array, new: jax.Array, creep: Any = False) -> Tracker:
    """Records a size change (if any): the cliff watch of each moved worker starts from it,
    and the move is on trial until the times answer it (unless `p.trial_ok` is false).
    `creep`: the move is PI's integral step, on trial too, judged on the noise as measured at
    this step (before the move's own times). Where the times do not follow the rows, each
    moved worker's time per sample jumps by its rows' ratio and the live estimate counted the
    jump as noise (5 % -> 10 % in 6 samples), which kept a one-row creep's refusal from power.
    A P move keeps the live noise: judged on the noise before it, right P moves beside a fixed
    cost were undone (tests/test_fixed_cost_trials.py, two of its cases)."""
    tr = p.tracker
    held = jnp.where(creep, noise.sigma(tr.noise), 0.0)
    trial = response.start(tr.trial, old, new, p.trial_ok | creep, held=held)
    return tr._replace(
        cliff=cliff.record_move(tr.cliff, old, new, p.rates),
        trial=trial,
        drift=drift.restart(tr.drift, jnp.any(old != new)),
    )
