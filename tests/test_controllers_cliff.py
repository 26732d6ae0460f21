"""The memory-cliff watch (controllers/cliff.py) step by step: verdicts, caps, holds."""

import jax
import jax.numpy as jnp
import numpy as np

from controllers import cliff

WINDOW, HOLD, LIMIT = 5, 100, 128
LO = jnp.zeros(2, jnp.int32)
HI = jnp.full(2, LIMIT, jnp.int32)


@jax.jit
def _observe(watch, sample, sizes):
    return cliff.observe(
        watch, sample, jnp.ones(2, bool), sizes, drop=0.2, hold=HOLD, lo=LO, hi_limit=HI
    )


def _grow(watch, old, new):
    """Worker 1 grows from `old` to `new` rows; both had a per-sample time of 1.0 before."""
    return cliff.record_move(watch, jnp.array([10, old]), jnp.array([10, new]), jnp.ones(2))


def _feed(watch, per_sample, size):
    """Per-sample times of worker 1, one a step; returns the watch and the steps' verdicts."""
    found, alarm = [], []
    for value in per_sample:
        verdict = _observe(watch, jnp.array([1.0, value]), jnp.array([10, size]))
        watch = verdict.watch
        found.append(bool(verdict.found[1]))
        alarm.append(bool(verdict.alarm[1]))
    return watch, found, alarm


def test_two_slow_windows_cap_at_the_size_before_the_growth():
    watch = _grow(cliff.init_watch(HI, WINDOW), 32, 80)
    watch, found, alarm = _feed(watch, [1.5] * 10, 80)
    assert found == [False] * 9 + [True]  # the verdict needs both windows: 10 samples
    assert alarm == [False, False] + [True] * 7 + [False]  # decisions held from sample 3
    assert int(watch.hi[1]) == 32 and int(watch.hi[0]) == LIMIT


def test_spikes_and_a_passing_slowdown_are_no_cliff():
    watch = _grow(cliff.init_watch(HI, WINDOW), 32, 80)
    # A first execution (3x) and a spike (3x) two steps later: never "slower".
    samples = [3.0, 1.0, 3.0, 1.0, 1.0] + [1.0] * 5
    _, found, alarm = _feed(watch, samples, 80)
    assert not any(found) and alarm == [False, False, True] + [False] * 7
    # Four slow steps, inside the first window only.
    watch = _grow(cliff.init_watch(HI, WINDOW), 32, 80)
    watch, found, _ = _feed(watch, [1.5] * 4 + [1.0] * 6, 80)
    assert not any(found) and int(watch.hi[1]) == LIMIT


def test_a_cap_expires_after_the_hold_and_doubles_when_found_again():
    watch = _grow(cliff.init_watch(HI, WINDOW), 32, 80)
    watch, _, _ = _feed(watch, [1.5] * 10, 80)  # capped at 32
    watch, _, _ = _feed(watch, [1.0] * (HOLD - 1), 32)
    assert int(watch.hi[1]) == 32
    watch, _, _ = _feed(watch, [1.0], 32)
    assert int(watch.hi[1]) == LIMIT  # tested again after 100 steps
    # It grows again and the cliff is still there: capped again, now for 200 steps.
    watch = _grow(watch, 32, 80)
    watch, found, _ = _feed(watch, [1.5] * 10, 80)
    assert found[-1] and int(watch.hi[1]) == 32 and int(watch.strikes[1]) == 2
    watch, _, _ = _feed(watch, [1.0] * (2 * HOLD - 1), 32)
    assert int(watch.hi[1]) == 32
    watch, _, _ = _feed(watch, [1.0], 32)
    assert int(watch.hi[1]) == LIMIT


def _hold(watch, cap=32):
    """Steps until worker 1's cap at `cap` (its size meanwhile) is lifted."""
    assert int(watch.hi[1]) == cap
    steps = 0
    while int(watch.hi[1]) == cap:
        watch = _observe(watch, jnp.array([1.0, 1.0]), jnp.array([10, cap])).watch
        steps += 1
    return watch, steps


def test_holds_double_up_to_their_limit_and_a_clean_growth_resets_them():
    """A cliff found again at the same place: holds 100, 200, 400, then 800 for good
    (cliff.MAX_STRIKES); a growth with a clean verdict above the cap resets the count, so
    the next cliff there is held 100 steps again."""
    watch, holds = cliff.init_watch(HI, WINDOW), []
    for _ in range(6):
        watch = _grow(watch, 32, 80)
        watch, found, _ = _feed(watch, [1.5] * 10, 80)
        assert found[-1]
        watch, steps = _hold(watch)
        holds.append(steps)
    assert holds == [100, 200, 400, 800, 800, 800]
    watch = _grow(watch, 32, 80)
    watch, found, _ = _feed(watch, [1.0] * 10, 80)  # clean: no cliff at 80 now
    assert not any(found) and int(watch.strikes[1]) == 0
    watch = _grow(watch, 80, 96)
    watch, found, _ = _feed(watch, [1.5] * 10, 96)
    assert found[-1] and int(watch.strikes[1]) == 1
    assert _hold(watch, cap=80)[1] == 100


def test_lower_median_of_the_first_entries():
    values = jnp.array([[5.0, 1.0, 3.0, 9.0], [2.0, 8.0, 0.0, 0.0]])
    # Odd count: the middle one; even: the lower of the two middle ones.
    np.testing.assert_allclose(cliff._median(values, jnp.array([3, 2])), [3.0, 2.0])
