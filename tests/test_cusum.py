"""The speed-change detector (controllers/cusum.py): when its alarms fire, in samples."""

import math

import jax.numpy as jnp
import pytest

from controllers import cusum

JUMP, CONFIRM = 0.25, 3


def _first_alarm(ratios, *, sigma=0.0, elapsed=1.0, persist=0.0):
    """Feeds one worker's measured / expected ratios in turn; returns the 1-based sample at
    which the detector first alarmed (None if never) and its level there."""
    zeros = jnp.zeros((1, 2))
    runs = cusum.Runs(zeros, zeros, zeros, zeros, jnp.zeros(1))
    band = jnp.array([max(JUMP, math.expm1(3 * sigma))])
    for i, r in enumerate(ratios, 1):
        runs, fired, _, level, _ = cusum.detect(
            runs,
            jnp.ones(1),
            jnp.log(jnp.array([r], jnp.float32)),
            jnp.array([True]),
            JUMP,
            band,
            jnp.array([sigma]),
            CONFIRM,
            jnp.float32(elapsed),
            persist,
        )
        if bool(fired[0]):
            return i, float(level[0])
    return None, None


@pytest.mark.parametrize("ratio", [1.5, 3.0, 100.0, 1 / 3.0])
def test_a_large_change_alarms_after_exactly_confirm_samples(ratio):
    at, level = _first_alarm([ratio] * 10)
    assert at == CONFIRM
    assert level == pytest.approx(ratio, rel=1e-5)


def test_fewer_than_confirm_samples_never_alarm_however_large():
    # A first execution or a spike: two samples at 100x, then the old level again.
    at, _ = _first_alarm([100.0, 100.0] + [1.0] * 20)
    assert at is None
    # A neighbour's two spikes with a normal step between them (8.8x, 1.2x, 4.9x) end the run
    # at the normal step and start it again (tests/test_controllers_spikes.py on the policy).
    at, _ = _first_alarm([8.8, 1.2, 4.9, 1.0, 1.0, 1.0])
    assert at is None


def test_a_small_persistent_change_alarms_later_by_its_drift():
    # k = log(1.25) / 2 per sample is subtracted, h = CONFIRM * k needed: a 1.15x change
    # (log 0.1398) gains 0.0282 a sample and alarms at the 12th; the same change is never
    # seen by a run of outliers beyond the 0.25 band.
    k = 0.5 * math.log1p(JUMP)
    expected = math.ceil(CONFIRM * k / (math.log(1.15) - k))
    assert expected == 12
    at, level = _first_alarm([1.15] * 30)
    assert at == expected
    assert level == pytest.approx(1.15, rel=1e-5)
    # Under a change of a tenth, below k, it never does.
    assert _first_alarm([1.1] * 200)[0] is None


def test_noise_raises_the_drift_floor():
    # At 15 % noise k is one noise deviation (cusum.CUSUM_NOISE), above log(1.25) / 2: the
    # 1.15x change then gains 0.1398 - 0.15 < 0 a sample and never alarms.
    assert 0.5 * math.log1p(JUMP) < cusum.CUSUM_NOISE * 0.15
    assert _first_alarm([1.15] * 100, sigma=0.15)[0] is None
    assert _first_alarm([3.0] * 10, sigma=0.15)[0] == CONFIRM


def test_a_run_must_also_last_persist_seconds():
    # Steps of 1/64 s against persist 1/8 s (both exact in binary): a 3x change alarms at its
    # 8th sample, not its 3rd.
    at, _ = _first_alarm([3.0] * 20, elapsed=1 / 64, persist=1 / 8)
    assert at == 8


def test_a_live_run_keeps_the_noise_it_began_with():
    drift = jnp.array([[0.2, 0.0], [0.0, 0.0]])
    held = cusum.run_noise(drift, jnp.array([0.05, 0.05]), jnp.array([0.2, 0.2]))
    assert held.tolist() == pytest.approx([0.05, 0.2])
