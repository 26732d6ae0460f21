"""Predictive: an alarm at a size measured a few times is not taken for a speed change of the
whole curve (controllers/predictive.py, YOUNG).

The trap is from the tuning-side plants of benchmarks/controller_heldout.py (seed 0, plant 28:
the fastest worker, 31 rows of fixed cost, a 3x memory cliff above 38 rows, 14 % noise)."""

import jax.numpy as jnp
import numpy as np
import pytest

import controllers
from controllers import predictive
from controllers.base import Observation

B = 128
DETECTOR = ("drift", "run_sum", "run_count", "run_time", "run_sigma")


def _alarm_at_young_or_mature_size(weight: float, ratio: float = 0.77) -> np.ndarray:
    """Worker 0's table after three samples at 34 rows, each `ratio` x that size's mean (3.3
    s), when the mean at 34 rests on `weight` measurements and the curve predicted 3.0 s there
    when the size was chosen (the CUSUM alarms on the third)."""
    c = controllers.make("predictive", b_min=1, b_max=0, settle=3, jump=0.25)
    state = c.init(4, B)
    sizes = jnp.array([34, 32, 31, 31], jnp.int32)
    mean = state.mean.at[0, jnp.array([32, 34, 39, 63])].set(jnp.array([2.95, 3.3, 8.46, 13.46]))
    count = state.count.at[0, jnp.array([32, 34, 39, 63])].set(jnp.array([1.3, weight, 3.6, 1.3]))
    others = jnp.array([1, 2, 3]), jnp.array([32, 31, 31])
    mean, count = mean.at[others].set(7.0), count.at[others].set(10.0)
    expected = state.expected.at[0].set(3.0)
    state = state._replace(sizes=sizes, mean=mean, count=count, expected=expected)
    for step in range(3):
        obs = Observation.make(step, sizes, [ratio * 3.3, 7.0, 7.0, 7.0], global_batch=B)
        m = predictive._measure(state, obs, 0.05, 0.25, 3, 100, 0.1)
        state = state._replace(
            mean=m.mean,
            count=m.count,
            **dict(zip(DETECTOR, m.detector, strict=True)),
            suspect=m.suspect,
            noise=m.noise,
            scale=m.scale,
            age=m.age,
        )
    assert bool(m.restart[0])  # the alarm came on the third sample
    return np.asarray(state.mean[0])


def test_an_alarm_at_a_size_measured_a_few_times_records_that_size_only():
    # Two chance-high first samples at 34 rows made its mean, the lower ones after them read
    # as a speed change, and worker 0's whole curve, its cliff points included, was rescaled
    # by 0.77: the cliff looked cheap and the worker went from 34 to 46 rows (1.40x the
    # optimum at predictive's 5th decision, with a bracket change tried beside it). Below
    # YOUNG measurements the alarm now records that size's own time; a speed change still
    # rescales the curve of a well-measured size.
    young = _alarm_at_young_or_mature_size(2.0)
    assert young[34] == pytest.approx(0.77 * 3.3, rel=0.02)
    np.testing.assert_allclose(young[[32, 39, 63]], [2.95, 8.46, 13.46], rtol=1e-6)
    mature = _alarm_at_young_or_mature_size(10.0)
    rescaled = 0.77 * np.array([2.95, 8.46, 13.46])
    np.testing.assert_allclose(mature[[32, 39, 63]], rescaled, rtol=0.02)


def test_a_speed_change_just_after_a_move_still_rescales_the_whole_curve():
    # A worker slowed 1.8x two samples after it moved to 34 rows: the new level (5.9 s) is far
    # from the 3.0 s its curve predicted there, so it is a speed change, and every size of the
    # curve slows with it. Recorded as the young size's own time instead, 34 rows looked like
    # a cliff while the smaller sizes kept the old speed: with every speed changed at step 20,
    # mid-convergence, the tuning-side p90 five decisions after the change went 1.091 -> 1.121
    # and the worst 1.584 -> 2.689.
    slowed = _alarm_at_young_or_mature_size(2.0, ratio=1.8)
    np.testing.assert_allclose(slowed[[32, 39, 63]], 1.8 * np.array([2.95, 8.46, 13.46]), rtol=0.02)
