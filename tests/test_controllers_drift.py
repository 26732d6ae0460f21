"""A speed change inside the outlier band ends the freeze after an undone move (drift.py)."""

import jax.numpy as jnp
import numpy as np
import pytest

from controllers import drift


def _alarms(levels, seconds: float, persist: float) -> list[list[bool]]:
    state, fired = drift.init(2), []
    for level in levels:
        sample = jnp.array([level, 1.0])
        state, drifted, _ = drift.observe(
            state, sample, jnp.ones(2, bool), 0.05, seconds, 0.25, 3, persist
        )
        fired.append(np.asarray(drifted).tolist())
    return fired


@pytest.mark.parametrize("seconds, first", [(1.0, 9), (1 / 64, 16)])
def test_drift_alarms_once_the_recent_level_passed_the_limit_for_persist(seconds, first):
    """Baseline of BASELINE x confirm = 6 samples at 1, then samples at 0.8x (log -0.223): the
    recent level (weight 1/6) passes half of jump 0.25 (log 1.25 / 2 = 0.112) when
    0.833^k < 0.5, at k = 4 (index 9); a noise of 0.05 sets a lower limit (3 x 0.05 x 0.508 =
    0.076). Steps of 1/64 s must then stay beyond it for persist 1/8 s: 8 steps (index 16)."""
    fired = _alarms([1.0] * 6 + [0.8] * 16, seconds, 0.125)
    assert [f[0] for f in fired].index(True) == first, fired
    assert all(f[0] for f in fired[first:]) and not any(f[1] for f in fired)


def test_jump_zero_turns_the_drift_off():
    """`jump` 0 disables speed-change detection; with no noise known at the baseline (sigma
    0) the limit would otherwise be 0 and every noisy sample an alarm."""
    state, fired = drift.init(2), 0
    samples = np.exp(0.01 * np.random.default_rng(0).standard_normal((60, 2)))
    for sample in samples:
        state, drifted, _ = drift.observe(
            state, jnp.asarray(sample), jnp.ones(2, bool), 0.0, 1.0, 0.0, 3, 0.1
        )
        fired += int(np.asarray(drifted).sum())
    assert fired == 0


def test_a_held_back_sample_moves_nothing():
    state = drift.init(2)
    for _ in range(6):
        state, _, _ = drift.observe(state, jnp.ones(2), jnp.ones(2, bool), 0.05, 1.0, 0.25, 3, 0.1)
    held, drifted, _ = drift.observe(
        state, jnp.array([9.0, 9.0]), jnp.zeros(2, bool), 0.05, 1.0, 0.25, 3, 0.1
    )
    assert np.allclose(held.recent, state.recent) and not np.asarray(drifted).any()


def test_a_change_the_outlier_runs_miss_ends_the_freeze():
    """Proportional on the cost curves' fixed-cost dynamic schedule (modelled, 10 % noise, key
    1): a move undone at step 309 freezes it for 100 decisions; at step 350 the workers become
    equal (HL1), a change no run of outliers confirms. Before drift.py the freeze held to the
    end of the run (step 399) and the split stayed at [19, 17, 1, 91]; now it ends within 5
    steps of the change, not before it, and the split moves toward uniform."""
    from benchmarks.dynamic_segments import record

    sizes, _, frozen = record("fixed", 1)
    undone = int(np.flatnonzero(frozen[300:] > 0)[0]) + 300
    assert undone == 309
    thawed = np.flatnonzero(frozen[undone:] == 0)
    assert thawed.size, "the freeze held to the end of the run"
    ended = int(thawed[0]) + undone
    assert 350 <= ended <= 355, ended
    assert np.abs(sizes[-1] - 32).max() < np.abs(sizes[349] - 32).max() / 2, sizes[-1].tolist()
