"""The measured-time guard (faults.TimeGuard): one far-off reading is rejected, a second in a
row is accepted, and a worker's flag is its own."""

import numpy as np

from omnilearn_jax.engine.faults import TimeGuard


def test_a_second_far_off_reading_is_accepted_even_when_others_are_read_between():
    guard = TimeGuard(2, outlier_factor=10.0)
    np.testing.assert_array_equal(guard(0, [0.1, 0.2], [10, 10]), [0.1, 0.2])
    # Worker 0 became 50x slower: its first slow reading is replaced by its last good rate.
    np.testing.assert_allclose(guard(1, [5.0, 0.0], [10, 0]), [0.1, 0.0])
    # Worker 1 alone is read (as async on the wall clock reads one worker a call).
    np.testing.assert_allclose(guard(2, [0.0, 0.2], [0, 10]), [0.0, 0.2])
    # The second slow reading of worker 0 in a row is a real change, accepted.
    np.testing.assert_allclose(guard(3, [5.0, 0.0], [10, 0]), [5.0, 0.0])
    np.testing.assert_allclose(guard(4, [5.0, 0.0], [10, 0]), [5.0, 0.0])


def test_a_single_spike_is_rejected_and_forgotten():
    guard = TimeGuard(1, outlier_factor=10.0)
    guard(0, [0.1], [10])
    np.testing.assert_allclose(guard(1, [100.0], [10]), [0.1])  # a spike
    np.testing.assert_allclose(guard(2, [0.12], [10]), [0.12])  # back to normal
    np.testing.assert_allclose(guard(3, [100.0], [10]), [0.12])  # a new spike: rejected again
