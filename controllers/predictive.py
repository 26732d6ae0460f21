"""Predictive: learn each worker's time curve t_k(b) online, then solve the min-max split.

OmniLearn's rule b' = b * mean(t) / t is exact only when time is proportional to the batch.
This policy keeps, per worker, the smoothed time it measured at every batch size it ran
(a [W, B + 1] table) and predicts the whole curve from it:

- between measured sizes, linear interpolation (so a saturating curve or a memory cliff is
  followed where it was seen; two measurements either side of a cliff bracket it, and the
  next split probes inside the bracket, which halves it);
- outside them, a line with the slope of a weighted affine fit a_k + c_k b over the measured
  points (ridge-pulled towards a = 0, so one measured size gives the proportional guess
  c = t / b, and two give the exact affine curve);
- then made nondecreasing in b (cumulative max), as a real step time is.

On the predicted table it solves the integer min-max split under the bounds exactly (the
oracle's solver, `solve_min_max`, its slack spread: where one worker sets the step, the
others are balanced among themselves, not the first filled into a cliff's bracket). Noise is
kept out by three things: a measurement at a size already seen that lies beyond `jump` (or 3
noise standard deviations) of its smoothed value, or at a new size of the time predicted for
it (a first execution), is held back (an outlier); a CUSUM of the log-ratios tells a speed
change (after `confirm` samples when it is large, later when it is small), which rescales
that worker's whole curve by the run's mean ratio (the curve's shape stays), or records a
new (or little measured) size's own time; a new split is taken only when its predicted step
time is at least `min_gain` below the current split's; and a decision waits until every busy
worker has `settle` measurements at its current size. The noise is each worker's own,
measured as `proportional` measures it (controllers/noise.py): times are divided by a common
factor first (the table's unit), the outlier band widens with a worker's noise, and nothing
is decided before every busy worker's noise is known.
Like `proportional` and `pi`, every new split is a response trial (controllers/response.py):
no further split until the times answered it, and one they did not answer (times that ignore
the rows, as on identical devices in two processes whose times differ by a lasting bias) is
undone, after which the policy holds for `cliff_hold` steps (doubled at each further undo).
Without it, such a bias emptied the slower process a row a worker at a time (1.14x over the
recorded times of tests/test_identical_devices.py: [16]*4 + [0]*4 by step 167). The trial
expects each worker's time to change as the predicted curve says (`_planned`: or as its
rows, if that is less), not as its rows: below a knee or beside a fixed cost a right move
changes a worker's time far less than its rows, and planned by the rows it read as
unanswered, was undone and held 100-400 steps at 1.46-1.51x the optimum (held-out plants 33
and 43, tests/test_predictive_heldout_trial.py). And a move whose split measured a faster
step than the split before it (the slowest worker's mean in the table over the median's, by
FASTER_ERRORS standard errors; `_faster`) stands whatever its trial says: a lasting bias measures no
faster. Its trials are patient (response.observe's `patient`): a curve learnt from a bias's
flat times plans little change, which one look often left undecided (so the move stood); an
undecided trial now stays open until its standard error could refuse a move the times
ignore, and is then undone unless answered (at 19 % noise a right move's trial may need some
20 samples; held-out plant 10). Its error counts the mean before the move too (a few
samples), and a trial that this error (with the mean since the move at its last sample)
keeps from power is judged once: taken as exact, three chance-low samples before a right
move undid it and froze 100, then 200 steps at 1.31x (tuning plant 28, 14 % noise).
Cannikin (Middleware'23) and OptPerf fit per-worker time models similarly; the formulas here
are our own.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from controllers import cusum, noise, response
from controllers.allocate import allocate
from controllers.base import PAPER_BOUND, Controller, Observation, is_concrete, resolve_bounds
from controllers.oracle import solve_min_max
from controllers.registry import register
from controllers.time_curve import predict
from controllers.tracking import (
    DEFAULT_PERSIST,
    measured,
    persisted,
    run_starts,
    step_seconds,
    streak,
)

# Weight a size's measurements decay to when it is not run (half of one measurement).
STALE = 0.5
# An alarm at a size whose mean weighs less than this many measurements (about 7 recent
# ones: weights decay by `memory` a step) records that size's own time instead of
# rescaling the whole curve, if the new level lies within the outlier band of the table's
# prediction there (`expected`, set each step: for a young size near its own mean, pulled a
# little towards the fit over every size; so in effect an alarm of a level within the band,
# which noise widens: 0.52 at 14 % noise; sizes weighing under 1 count as new): the young
# mean rests on a few samples, and the first ones high by chance made the later ones look
# like a speed change. Rescaled by 0.77 on such an alarm, a worker's cliff points looked
# cheap and it went from 34 rows over its cliff to 46 (1.40x the optimum; tuning plant 28
# of seed 0, 14 % noise, seen with a change to the cliff's bracket tried beside this one and
# not kept). A new level that does not fit is a speed change after a move: without that
# test, with every speed changed at step 20 (mid-convergence) instead of 250, the
# tuning-side p90 five decisions after the change went 1.091 -> 1.121 and the worst 1.584 ->
# 2.689 (seeds 0, 100-103; `python -m benchmarks.predictive_tuning --change 20`: 1.091 and
# 1.403 with the test). A table that contradicts the size's time (a smaller size slower,
# or a larger one faster) makes it a speed change too. Tried at 3 and 6 on the tuning-side
# families (never 1-5); at 6, p90 after 5 decisions 1.091 -> 1.080 (seeds 0, 100-103) and
# 1.093 -> 1.090 (seeds 104-108), the others within 0.001 or better.
YOUNG = 6.0
# Holds of a lifted cap double at most this many times (hold 100: 100, 200, ... 1,600 steps),
# until a re-test finds no cliff (`_judge_retest`).
MAX_STRIKES = 4
# A size above the current one is a cap when it costs more per sample by this fraction, or by
# noise.SPREAD standard deviations of the worker's noise if wider (noise.band; per sample, time
# falls with the batch on a cliff-free curve).
CAP_MARGIN = 0.25
# A decision may give a worker at most this multiple of the largest size it has run (3 lets
# the 4-core worker of HL8 take over the 32-core one's share after a swap in one move).
TRUST = 3
# A new split must beat this many standard errors of the estimates it rests on (see `update`).
# At one, a worker 7-12 % too slow stayed so on the noisiest plants (15-20 % noise, 5 samples)
# until more samples came. Chosen among 1, 0.5 and 0.25 on the tuning-side families (as
# cusum.CUSUM_NOISE): 0.25 moved more often (worst 33 adjustments per 1,000 steps at 10 %
# noise) for little more. The cost: at 15-20 % noise the split moves 3-4x as often as at one
# (median 16-24 adjustments per 1,000 steps against 5-6, 48 of seed 0's plants).
GAIN_ERRORS = 0.5
# The defaults `min_gain` 0.02 and `memory` 0.02 (0.03 and 0.05 until 2026-12-06, `memory`
# then named `smoothing`): a size's mean rested on at most about 20 samples, and at 10-20 %
# noise a worker's estimate stayed some 3 % off after 60 decisions (one row on a slow worker),
# which the 3 % gain floor kept; a 2 % floor alone made the split flap (the p90 of
# adjustments per 1,000 noisy steps 16 -> 26). Together, on the tuning-side families
# (`python -m benchmarks.predictive_tuning`, seeds 0 and 100-103; never the held-out 1-5;
# modelled), p90 after 5 / 60 decisions / 5 after a change 1.067 / 1.025 / 1.067 -> 1.064 /
# 1.018 / 1.063, adjustments p90 15.8 -> 13.3, total time p90 1.103 / 1.089 -> 1.104 / 1.093;
# on seeds 104-108, 1.087 / 1.027 / 1.068 -> 1.080 / 1.024 / 1.056, adjustments 16.2 -> 13.8,
# totals 1.111 / 1.095 -> 1.105 / 1.090. With 0.03, `memory` 0.02 alone: 1.066 / 1.024 /
# 1.063; with `min_gain` 0.01: 1.067 / 1.017 / 1.064, adjustments 16.8. With the lift of a
# cap's points together and its re-test one row over it (`_lift_stale_cliffs`), which the
# smaller gain floor needed: 1.065 / 1.018 / 1.063, adjustments 14.1, totals 1.088 / 1.092.
# A move on trial is kept, answered or not, when the slowest busy worker's mean time in the
# table over the median of the busy workers' fell from the split before to the new one by this
# many standard errors (the slowest worker's noise over the weight behind its mean, at each
# split; the median is taken as exact). Relative to the median, as the trial's own answer is:
# a speed-up every worker shares (a warm-up, a neighbour's job ending) smaller than the
# outlier band passes into the table, and compared in absolute terms it read as a gain. A
# lasting bias (times that ignore the rows) measures no faster; a right move whose times
# answer its plan weakly does: below a knee, beside a fixed cost, or planned from one
# measured size (a proportional guess), it was undone and the split frozen 100 steps, then
# 200 (tuning plant 33 of seed 100: 1.19x the optimum for 231 of the first 250 steps); and an
# undo went back to a split over a memory cliff (100 steps at 1.63x, plant 39 of seed 103).
# A prior, not tuned.
FASTER_ERRORS = 2.0
# `jump`'s default. It was 0.6 (tuned early on the seed-0 plants). With it a moderate speed
# change (log-ratio 0.3-0.4 a sample, as between the paper's HL levels) drifts the CUSUM by
# 0.07-0.17 a sample against a threshold of 0.7, so it is not confirmed before a move; the next
# size's samples, inside the 0.6 band, are then recorded as that size's own time, the move's
# trial reads the unconfirmed change as a refusal and the split is undone and held 100 steps:
# on experiments/curves/ablate.py's dynamic schedule (HL1, 2, 4, 8, 8, 4, 2, 1, 50 steps each,
# 10 % noise) the second-half gap to the oracle was 10-16 % on four of five curves (a rerun of
# that study at aefe81e, not committed; the measured curve's case is
# tests/test_predictive_dynamic.py). At 0.4 it is 1-5 % (docs/results/cost_curves.md). 0.25,
# which the held-out tuning picks (benchmarks/controller_heldout.py) and the trainer's configs
# use for every policy (omnilearn_jax/config/schema.py), does as well there; a persistent
# cliff's re-test costs 30 steps over it at 0.25 against 22 at 0.4
# (tests/test_controllers_robust.py).
DEFAULT_JUMP = 0.4


class PredictiveState(NamedTuple):
    sizes: jax.Array  # int32 [W]
    mean: jax.Array  # float [W, B + 1]: smoothed measured time at each batch size
    count: jax.Array  # float [W, B + 1]: measurements behind it (0 = never run there)
    drift: jax.Array  # float [W, 2]: CUSUM of log-ratios to the expected time (up, down)
    run_sum: jax.Array  # float [W, 2]: sum of the log-ratios since each CUSUM left 0
    run_count: jax.Array  # float [W, 2]: their number
    run_time: jax.Array  # float [W, 2]: seconds their steps took (the longest worker's time)
    run_sigma: jax.Array  # float [W]: the noise when the live run began (its drift's scale)
    settled: jax.Array  # int32 [W]: measurements at the current size since it last moved
    expected: jax.Array  # float [W]: the table's predicted time at the current size (last step)
    age: jax.Array  # int32 [W, B + 1]: steps since each size was last measured
    # int32 [W]: caps lifted since a re-test last found none (`_judge_retest`); each doubles
    # the next hold
    strikes: jax.Array
    # int32 [W]: the smallest size of the last cap lifted, which a re-test grows the worker
    # to and no further until it has run there (B + 1: none)
    ceiling: jax.Array
    # int32 [W]: the same size, kept until the worker has run there or above and the run is
    # judged (B + 1: none)
    retest: jax.Array
    suspect: jax.Array  # int32 [W]: consecutive outliers (+ above, - below)
    noise: noise.Noise  # timing noise of each worker's measurements (controllers/noise.py)
    scale: jax.Array  # float: the last common factor measured (the table's time unit)
    seen_time: jax.Array  # float: seconds the measured steps took (up to `persist`)
    decisions: jax.Array  # int32: steps on which a decision was due
    num_adjustments: jax.Array  # int32: steps on which the sizes changed
    trial: response.Trial  # the last move, until the times answered it (response.py)


class Measurement(NamedTuple):
    """One step's times folded in (`_measure`); arrays [W] unless noted."""

    mean: jax.Array  # float [W, B + 1]
    count: jax.Array  # float [W, B + 1]
    age: jax.Array  # int32 [W, B + 1]
    strikes: jax.Array
    ceiling: jax.Array
    retest: jax.Array
    detector: cusum.Runs  # the change detector's runs (controllers/cusum.py)
    restart: jax.Array  # bool: the CUSUM alarmed (a speed change, or a new size's own time)
    rescaled: jax.Array  # bool: the alarm was a speed change (the whole curve rescaled)
    taken: jax.Array  # bool: the time went into the table (measured, not held back)
    pending: jax.Array  # bool scalar: some worker is half-way to an alarm
    suspect: jax.Array
    noise: noise.Noise
    scale: jax.Array  # float scalar: the common factor (the table's time unit)
    # int32: measurements at the current size with this step's (finite times only: an inf
    # had counted)
    settled: jax.Array


@register("predictive")
def predictive(
    *,
    b_min: Any = PAPER_BOUND,
    b_max: Any = PAPER_BOUND,
    min_gain: float = 0.02,
    settle: int = 3,
    memory: float = 0.02,
    jump: float = DEFAULT_JUMP,
    confirm: int = 3,
    cliff_hold: int = 100,
    persist: float = DEFAULT_PERSIST,
) -> Controller:
    """Model-predictive split.

    b_min, b_max: bounds as for `proportional`. min_gain: take a new split only if its
    predicted step time is this fraction below the current one's. settle: measurements each
    busy worker needs at its current size before the next decision. memory: floor of the
    weight of the newest measurement at a size (its first measurements are averaged evenly),
    the rate at which every size's weight decays each step (down to half a measurement), and
    the noise estimate's rate (controllers/noise.py); P's and PI's `smoothing` is their EWMA's
    (0.05), named apart since one config section holds every policy's arguments.
    A new split must also beat GAIN_ERRORS (0.5) standard errors of the estimates (sigma *
    sqrt(2 / n), the largest over busy workers: sigma a worker's noise, n the weight at its
    current size).
    jump: relative distance from the smoothed time beyond which a measurement is an outlier
    (widened to 3 standard deviations of the measured noise; 0 disables outlier handling and
    speed-change detection), and twice the smallest speed change the CUSUM looks for (0.4:
    see DEFAULT_JUMP);
    confirm: samples after which a large change alarms, taken as a speed change (at a size
    measured before) or as the true time of a new size (a cliff, a knee). cliff_hold: steps
    after which the sizes above the current one that are dearer per sample than it by
    CAP_MARGIN (a cliff, or a slowdown that happened to follow a growth), none measured
    since, are forgotten together, so the worker may grow again, first to the smallest of
    them (a re-test, made whatever its gain); each such lift doubles that worker's next hold
    (up to 2^MAX_STRIKES), and a re-test that finds no cliff there (`confirm` steps at that
    size or above, no dearer per sample than smaller sizes) resets it. persist: seconds the
    alarming run's steps must take in all, as well as `confirm` samples (host noise comes in
    bursts shorter than that; tracking.DEFAULT_PERSIST).
    """
    if is_concrete(min_gain) and not 0 <= float(min_gain) < 1:
        raise ValueError(f"predictive: min_gain must be in [0, 1), got {min_gain!r}")
    if is_concrete(memory) and not 0 < float(memory) <= 1:
        raise ValueError(f"predictive: memory must be in (0, 1], got {memory!r}")
    if is_concrete(jump) and not float(jump) >= 0:  # NaN too: it never moved
        raise ValueError(f"predictive: jump must be >= 0, got {jump!r}")
    if is_concrete(persist) and not float(persist) >= 0:
        raise ValueError(f"predictive: persist must be >= 0 seconds, got {persist!r}")
    for name, value in (("settle", settle), ("confirm", confirm), ("cliff_hold", cliff_hold)):
        if int(value) != value or value < 1:
            raise ValueError(f"predictive: {name} must be an int >= 1, got {value!r}")

    def init(num_workers: int, global_batch: int) -> PredictiveState:
        lo, hi = resolve_bounds(num_workers, global_batch, b_min, b_max)
        table = jnp.zeros((num_workers, global_batch + 1), jnp.float32)
        zeros = jnp.zeros(num_workers, jnp.int32)
        return PredictiveState(
            sizes=allocate(jnp.ones(num_workers), global_batch, lo, hi),
            mean=table,
            count=table,
            drift=jnp.zeros((num_workers, 2), jnp.float32),
            run_sum=jnp.zeros((num_workers, 2), jnp.float32),
            run_count=jnp.zeros((num_workers, 2), jnp.float32),
            run_time=jnp.zeros((num_workers, 2), jnp.float32),
            run_sigma=jnp.zeros(num_workers, jnp.float32),
            settled=zeros,
            expected=jnp.zeros(num_workers, jnp.float32),
            age=jnp.zeros((num_workers, global_batch + 1), jnp.int32),
            strikes=zeros,
            ceiling=jnp.full(num_workers, global_batch + 1, jnp.int32),
            retest=jnp.full(num_workers, global_batch + 1, jnp.int32),
            suspect=zeros,
            noise=noise.init(num_workers),
            scale=jnp.ones((), jnp.float32),
            seen_time=jnp.zeros((), jnp.float32),
            decisions=jnp.zeros((), jnp.int32),
            num_adjustments=jnp.zeros((), jnp.int32),
            trial=response.init(num_workers, cliff_hold),
        )

    def update(state: PredictiveState, obs: Observation) -> tuple[jax.Array, PredictiveState]:
        b = obs.batch_sizes
        w, n = state.mean.shape
        lo, hi = resolve_bounds(w, n - 1, b_min, b_max)
        m = _measure(state, obs, memory, jump, confirm, cliff_hold, persist)
        count, sigma = m.count, noise.sigma(m.noise)
        # Whether the times answered the last split; none is made until they have, and one
        # they did not answer is undone (response.py). A new size's own time (a cliff found)
        # is the answer itself; only a speed change makes the times before it moot.
        kept = state.trial.open & _faster(m.mean, count, state.trial.before, b, sigma)
        verdict = response.observe(
            state.trial,
            obs.worker_times,
            measured(obs),
            m.taken,
            step_seconds(obs),
            m.rescaled,
            sigma,
            confirm,
            persist,
            patient=True,
            kept=kept,
        )
        table = predict(m.mean, count, sigma[:, None])
        # Trust region: a worker may at most triple the largest size it was measured at, so a
        # flat stretch (which extrapolates to nearly free samples) is probed, not bet on.
        largest = jnp.max(jnp.where(count > 0, jnp.arange(n), 0), axis=1)
        trusted = jnp.where(largest > 0, jnp.maximum(TRUST * largest, lo), hi)
        trusted = jnp.minimum(jnp.minimum(hi, trusted), m.ceiling)
        trusted = jnp.where(trusted.sum() >= n - 1, trusted, hi)
        wanted = solve_min_max(table, lo, trusted, spread=True)
        rows = jnp.arange(w)
        current = jnp.clip(b, 0, n - 1)
        now = jnp.max(jnp.where(b > 0, table[rows, current], 0.0))
        then = jnp.max(jnp.where(wanted > 0, table[rows, wanted], 0.0))
        settled = m.settled
        # Nothing is decided before every busy worker's noise is known (noise.py), nor before
        # the measurements span `persist` seconds (a difference must last, as a change must).
        seen_time, lasted = persisted(state.seen_time, obs, persist)
        ready = jnp.all(noise.known(m.noise) | (b == 0)) & lasted & ~verdict.blocked
        due = (jnp.all((settled >= settle) | (b == 0)) | jnp.any(m.restart)) & ~m.pending & ready
        # The gain must also beat the noise of the estimates it rests on: GAIN_ERRORS standard
        # errors of the difference of two means of a busy worker's samples at its size (the
        # largest).
        error = GAIN_ERRORS * sigma * jnp.sqrt(2.0 / jnp.maximum(count[rows, current], 1.0))
        threshold = jnp.maximum(min_gain, jnp.max(jnp.where(b > 0, error, 0.0)))
        # A lifted cap's re-test is made whatever the gain, if any (one row over the cap can
        # gain less than `min_gain`): learning whether the cliff is still there is its point.
        retest = jnp.any((m.ceiling < n) & (wanted >= m.ceiling) & (b < m.ceiling))
        # `<=`: one row more for the capped worker cannot lower a step that other workers set
        # at a tie (identical devices, or HL8 without noise), and with `<` the re-test never
        # came and the ceiling held the worker below a cliff long gone (1.49x the optimum).
        gains = (then < (1.0 - threshold) * now) | (retest & (then <= now))
        adopt = due & gains & ~verdict.undo
        shares = response.revert(verdict.trial, verdict.undo, jnp.where(adopt, wanted, b))
        sizes = allocate(shares, n - 1, lo, hi)
        moved = jnp.any(sizes != b)
        new_state = fold(state, m)._replace(
            sizes=sizes,
            settled=jnp.where(sizes != b, 0, settled),
            expected=jnp.where(sizes > 0, table[rows, jnp.clip(sizes, 0, n - 1)], 0.0),
            seen_time=seen_time,
            decisions=state.decisions + due.astype(jnp.int32),
            num_adjustments=state.num_adjustments + moved.astype(jnp.int32),
            # A new split is on trial; an undo (or a re-clipped split) is not.
            trial=response.start(verdict.trial, b, sizes, adopt, _planned(table, b, sizes)),
        )
        return sizes, new_state

    return Controller(init, update)


def fold(state: PredictiveState, m: Measurement) -> PredictiveState:
    """`state` with one step's measurement (`_measure`) folded in: the table, the change
    detector, the noise and the common factor; the split and the decision are left as they
    were."""
    drift, run_sum, run_count, run_time, run_sigma = m.detector
    return state._replace(
        mean=m.mean,
        count=m.count,
        drift=drift,
        run_sum=run_sum,
        run_count=run_count,
        run_time=run_time,
        run_sigma=run_sigma,
        age=m.age,
        strikes=m.strikes,
        ceiling=m.ceiling,
        retest=m.retest,
        suspect=m.suspect,
        noise=m.noise,
        scale=m.scale,
    )


def _measure(
    state: PredictiveState,
    obs: Observation,
    memory: Any,
    jump: Any,
    confirm: int,
    hold: int,
    persist: Any,
) -> Measurement:
    """Folds this step's times into the table and the noise estimate; lifts stale cliffs."""
    b, t = obs.batch_sizes, obs.worker_times
    w, n = state.mean.shape
    rows = jnp.arange(w)
    at = jnp.clip(b, 0, n - 1)
    valid = measured(obs)
    old, seen = state.mean[rows, at], state.count[rows, at]
    known = valid & (seen > 0)
    # A size measured lately (weight >= 1) judges a measurement against its own mean; a new (or
    # long unmeasured) size against the prediction it was chosen on. So a first execution (2-3x
    # later runs on the wall clock) or a one-off spike is held back as an outlier, never
    # recorded as the size's time (which would read as a cliff there).
    own = known & (seen >= 1.0)
    guess = valid & ~own & (state.expected > 0)
    against = t / jnp.where(own, old, jnp.where(guess, state.expected, 1.0))
    # A change every worker sees at once (the host's load) is not heterogeneity: times are
    # divided by a common factor (`_common_factor`), so the table holds relative times (only
    # their ratios set the split) and none moves. The factor is the table's unit and persists.
    factor = _common_factor(against, own, state.scale, noise.band(state.noise, jump))
    t, against = t / factor, against / factor
    # The band widens with each worker's measured noise (noise.band), so noise is not taken
    # for spikes or speed changes, while a quiet worker's change is seen at `jump`.
    sigma = noise.sigma(state.noise)
    band = noise.band(state.noise, jump)
    check = (own | guess) & (jump > 0)
    up, down = check & (against > 1.0 + band), check & (against < 1.0 / (1.0 + band))
    runs = cusum.Runs(state.drift, state.run_sum, state.run_count, state.run_time, state.run_sigma)
    detector, restart, slower, level, pending = cusum.detect(
        runs,
        state.noise.var_weight,
        jnp.log(jnp.where(check, against, 1.0)),
        check,
        jump,
        band,
        sigma,
        confirm,
        step_seconds(obs),
        persist,
    )
    # Confirmed at a known size: a speed change, which rescales the worker's whole curve and
    # keeps one measurement's worth of confidence, so the new level is learnt quickly at every
    # size. Confirmed at a new size, or at one weighing less than YOUNG measurements whose new
    # level fits the predicted curve: that size's own time (a cliff, a knee; a young mean moved
    # by the run's level), recorded there, unless
    # the table contradicts it (time grows with the batch: slower than a larger size
    # or faster than a smaller one was measured at), which makes it a speed change too.
    index = jnp.arange(n)[None, :]
    tabled = state.count > 0
    now = t[:, None]
    wide = 1.0 + band[:, None]
    larger_faster = (index > at[:, None]) & tabled & (wide * state.mean < now)
    smaller_slower = (index < at[:, None]) & tabled & (state.mean > wide * now)
    speed_change = jnp.where(slower, larger_faster.any(1), smaller_slower.any(1))
    # A young size's new level that still fits the predicted curve (`expected`, within the
    # band) says its young mean was off; one that does not is a speed change after a move.
    level_now = old * level
    fits = (state.expected > 0) & (jnp.abs(jnp.log(level_now / state.expected)) <= jnp.log1p(band))
    mature = own & ((seen >= YOUNG) | ~fits)
    rescale = restart & (mature | speed_change)
    found = restart & ~rescale
    mean = state.mean * jnp.where(rescale, level, 1.0)[:, None]
    # Forgetting: every size's weight decays like the EWMA, down to half a measurement's, so
    # a size run long ago keeps its shape (a cliff) while recent sizes lead the fit, and is
    # mostly replaced (not taken for an outlier) when it is run again.
    count = jnp.where(
        state.count > STALE, jnp.maximum(state.count * (1 - memory), STALE), state.count
    )
    count = jnp.where(rescale[:, None], jnp.minimum(count, 1.0), count)
    # An outlier not (yet) confirmed leaves the table alone.
    use = valid & ~up & ~down & ~restart
    seen = count[rows, at]
    weight = jnp.maximum(1.0 / (seen + 1.0), memory)
    point = mean[rows, at] + weight * (t - mean[rows, at])
    # A new size's time is this (the latest) sample: the streak's first may be a first execution.
    point = jnp.where(found, jnp.where(own, level_now, t), point)
    mean = mean.at[rows, at].set(jnp.where(use | found, point, mean[rows, at]))
    count = count.at[rows, at].set(jnp.where(use, seen + 1.0, jnp.where(found, 1.0, seen)))
    age = state.age + 1
    age = age.at[rows, at].set(jnp.where(valid, 0, age[rows, at]))
    margin = noise.band(state.noise, CAP_MARGIN)[:, None]
    mean, count, lifted, first = _lift_stale_cliffs(
        mean, count, age, state.strikes, b, margin, hold
    )
    settled = state.settled + valid.astype(jnp.int32)
    clean, judged = _judge_retest(mean, count, b, state.retest, settled, margin[:, 0], confirm)
    strikes = jnp.where(clean, 0, jnp.minimum(state.strikes + lifted, MAX_STRIKES))
    ceiling = jnp.where(b >= state.ceiling, n, state.ceiling)
    ceiling = jnp.where(lifted > 0, first, ceiling)
    retest = jnp.where(lifted > 0, first, jnp.where(judged, n, state.retest))
    # Noise, per worker (noise.observe), from measurements judged against their size's own
    # mean: the log-ratio to the mean of `seen` earlier ones has variance sigma^2 (1 + 1 / seen),
    # so it is scaled by sqrt(seen / (seen + 1)). Held-back samples count once their run ends
    # without a speed change; a run the CUSUM confirms was not noise (noise.restart).
    scaled = jnp.exp(jnp.log(jnp.where(own, against, 1.0)) * jnp.sqrt(seen / (seen + 1.0)))
    starts = run_starts(state.suspect, up, down)
    noisy = noise.observe(state.noise, scaled, own, use, starts, band, memory)
    noisy = noise.restart(noisy, restart, memory, confirm)
    suspect, _ = streak(state.suspect, jnp.zeros(w), up, down, valid, t)
    suspect = jnp.where(restart, 0, suspect)
    return Measurement(
        mean=mean,
        count=count,
        age=age,
        strikes=strikes,
        ceiling=ceiling,
        retest=retest,
        detector=detector,
        restart=restart,
        rescaled=rescale,
        taken=use | found,
        pending=pending,
        suspect=suspect,
        noise=noisy,
        scale=factor,
        settled=settled,
    )


def _common_factor(
    against: jax.Array, own: jax.Array, last: jax.Array, band: jax.Array
) -> jax.Array:
    """The step's common factor: the last step's (`last`, the table's unit), replaced by the
    median ratio of the workers at their own sizes (noise.common_factor) only where the two
    middle ratios agree within the widest outlier `band` and the median lies beyond it from
    `last` (a load every worker sees, or a change of the middle workers' speed).

    Before, every step divided by its median ratio, and by 1 where fewer than two workers
    were at their own sizes. Three faults followed (benchmarks/controller_heldout.py, the
    tuning-side families): the median adds its own noise to every sample; after a change of
    every worker's speed, half faster and half slower, the middle ratio nearer 1 flips
    between the halves with the noise, so each worker's change looks larger or smaller from
    step to step; and the step after a move of every worker (no own sizes) divided by 1
    while the table was in the unit of the last median, so every sample read as an outlier
    by that factor and new sizes were recorded in another unit than their rows' old points
    (a flat curve: one worker was given 122 rows).
    """
    low, high, count = noise.middles(against, own)
    widest = 1.0 + jnp.max(jnp.where(own, band, 0.0))
    agree = (count >= 2) & (high <= widest * low)
    factor = noise.common_factor(against, own)
    moved = (factor > widest * last) | (last > widest * factor)
    return jnp.where(agree & moved, factor, last)


def _lift_stale_cliffs(
    mean: jax.Array,
    count: jax.Array,
    age: jax.Array,
    strikes: jax.Array,
    sizes: jax.Array,
    margin: jax.Array,
    hold: int,
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """Forgets, per worker, the sizes above its current one that cost more per sample than
    the current size by `margin`, once none of them has been run for its hold: such points cap
    the worker (the prediction is nondecreasing), and they may have been a slowdown, not a
    cliff. Each lift doubles the worker's next hold.

    All at once, timed by the latest run: a probe walking down a cliff's bracket leaves a
    dear point at each size it tried (61, 62, 63 and 86 rows over a limit of 60), which are
    one cap. Forgotten one at a time, each as it came of age, the next still capped the
    worker (interpolated towards it, the freed size was no gain) while the holds doubled, so
    a persistent cliff was not re-tested in 400 steps (tests/test_controllers_robust.py, at
    `min_gain` 0.02).

    The lift's re-test goes no further than the smallest of those sizes (the caller's
    ceiling): a cliff still there is then found again one probe above the cap, where
    extrapolated past every forgotten point the first probe went to the cliff-free optimum
    and the walk back down the bracket spent 35 steps over the cliff at each re-test.

    Returns (mean, count, lifted [W] int32, the smallest size forgotten [W])."""
    w, n = mean.shape
    rows = jnp.arange(w)
    index = jnp.arange(n)
    at = jnp.clip(sizes, 0, n - 1)
    per_sample = mean / jnp.maximum(index, 1)
    here = per_sample[rows, at]
    limit = hold * jnp.left_shift(1, strikes)
    dear = (
        (index[None, :] > sizes[:, None])
        & (count > 0)
        & (per_sample > (1.0 + margin) * here[:, None])
        & (count[rows, at] > 0)[:, None]
    )
    latest = jnp.min(jnp.where(dear, age, jnp.iinfo(age.dtype).max), axis=1)
    lift = jnp.any(dear, axis=1) & (latest >= limit)
    stale = dear & lift[:, None]
    first = jnp.argmax(stale, axis=1).astype(jnp.int32)
    lifted = lift.astype(jnp.int32)
    return jnp.where(stale, 0.0, mean), jnp.where(stale, 0.0, count), lifted, first


def _judge_retest(
    mean: jax.Array,
    count: jax.Array,
    sizes: jax.Array,
    retest: jax.Array,
    settled: jax.Array,
    margin: jax.Array,
    samples: int,
) -> tuple[jax.Array, jax.Array]:
    """Whether each worker's re-test after a lift is judged ([W] bools: clean, judged): it
    has run `samples` steps at a size at or above `retest` (the smallest size of the cap
    lifted), and that size costs no more per sample than the cheapest smaller size it
    measured by `margin` (clean: the cap was not a cliff, or it is gone; else the cliff is
    found again). A clean re-test resets the worker's strikes, as P's and PI's cliff watch
    does (controllers/cliff.py): a slowdown after a growth capped a worker for 100 steps,
    and once it had been lifted every later one held it twice as long, and so on to 1,600
    steps (`tests/test_controllers_robust.py`)."""
    w, n = mean.shape
    rows = jnp.arange(w)
    index = jnp.arange(n)
    at = jnp.clip(sizes, 0, n - 1)
    per_sample = jnp.where(count > 0, mean / jnp.maximum(index, 1), jnp.inf)
    below = jnp.min(jnp.where(index[None, :] < at[:, None], per_sample, jnp.inf), axis=1)
    judged = (sizes >= retest) & (retest < n) & (settled >= samples) & (count[rows, at] > 0)
    clean = judged & (per_sample[rows, at] <= (1.0 + margin) * below)
    return clean, judged


def _faster(
    mean: jax.Array, count: jax.Array, before: jax.Array, now: jax.Array, sigma: jax.Array
) -> jax.Array:
    """Whether the split `now` ([W]) measured a faster step than `before` by FASTER_ERRORS
    standard errors: the slowest busy worker's mean time in the table over the busy workers'
    median, at each split, every busy worker measured at both (bool scalar)."""
    w, n = mean.shape
    rows = jnp.arange(w)

    def slowest(sizes: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        at = jnp.clip(sizes, 0, n - 1)
        busy = sizes > 0
        times, weight = jnp.where(busy, mean[rows, at], 0.0), count[rows, at]
        k = jnp.argmax(times)
        relative = jnp.log(
            jnp.maximum(times[k], 1e-30) / jnp.maximum(noise.median(times, busy), 1e-30)
        )
        error = sigma[k] ** 2 / jnp.maximum(weight[k], 1e-6)
        return relative, error, jnp.all(~busy | (weight > 0)) & jnp.any(busy)

    r_now, e_now, ok_now = slowest(now)
    r_before, e_before, ok_before = slowest(before)
    gain = r_before - r_now
    return ok_now & ok_before & (gain > FASTER_ERRORS * jnp.sqrt(e_now + e_before))


def _planned(table: jax.Array, old: jax.Array, new: jax.Array) -> jax.Array:
    """Each worker's planned log time change for a move `old` -> `new` ([W]): the predicted
    curve's (`table`), or its rows' if smaller in magnitude (0 where not busy)."""
    w, n = table.shape
    rows = jnp.arange(w)
    busy = (old > 0) & (new > 0)
    at_old = table[rows, jnp.clip(old, 0, n - 1)]
    at_new = table[rows, jnp.clip(new, 0, n - 1)]
    ok = busy & (at_old > 0) & (at_new > 0)
    predicted = jnp.log(jnp.where(ok, at_new / jnp.where(ok, at_old, 1.0), 1.0))
    proportional = jnp.log(jnp.where(busy, new / jnp.maximum(old, 1), 1.0))
    return jnp.where(jnp.abs(predicted) < jnp.abs(proportional), predicted, proportional)
