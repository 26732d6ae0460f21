"""The measured-time guard (faults.TimeGuard): one far-off reading is rejected, a second in a
row is accepted, and a worker's flag is its own."""

import warnings

import numpy as np

from omnilearn_jax.engine.faults import TimeGuard, row_medians


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


def test_a_single_spike_is_rejected_and_forgotten(capsys):
    guard = TimeGuard(1, outlier_factor=10.0, unit="update round")
    guard(0, [0.1], [10])
    np.testing.assert_allclose(guard(1, [100.0], [10]), [0.1])  # a spike
    said = capsys.readouterr().err  # a plain number in seconds (was "np.float64(100.0)")
    # 0-based round 1 is the second, counted from 1 as records and messages are
    assert "warning: update round 2: rejected measured time 100.0s of worker 0 (batch 10)" in said
    np.testing.assert_allclose(guard(2, [0.12], [10]), [0.12])  # back to normal
    # A new spike: rejected again, charged the median of the accepted rates (0.01, 0.012).
    np.testing.assert_allclose(guard(3, [100.0], [10]), [0.11])


def test_a_spike_inside_the_factor_does_not_become_the_yardstick():
    """Worker 0's times for 96 rows as measured under a noisy neighbour (2026-12-02, quotas
    1.0/0.25): a spike of 128.5 ms, 8.8x the 14.6 ms before it, is inside the factor and is
    accepted; the normal 11.4 ms after it must be accepted too. With the last accepted time
    as the reference it was rejected and replaced by the spike's 128.5 ms."""
    guard = TimeGuard(1, outlier_factor=10.0)
    readings = [0.0125, 0.0146, 0.0193, 0.0125, 0.0146, 0.1285, 0.0114, 0.0721, 0.0130]
    seen = [float(guard(step, [t], [96])[0]) for step, t in enumerate(readings)]
    np.testing.assert_allclose(seen, readings)
    assert guard.per_sample[0] == np.median(np.array(readings[-5:]) / 96)


def test_a_confirmed_change_becomes_the_reference_alone_and_survives_a_checkpoint():
    guard = TimeGuard(1, outlier_factor=10.0)
    for step in range(5):
        guard(step, [0.1], [10])
    np.testing.assert_allclose(guard(5, [5.0], [10]), [0.1])  # rejected once
    np.testing.assert_allclose(guard(6, [5.0], [10]), [5.0])  # confirmed: 50x slower now
    assert guard.per_sample[0] == 0.5  # not the median of four old readings and one new
    np.testing.assert_allclose(guard(7, [5.2], [10]), [5.2])  # the next is no outlier
    resumed = TimeGuard(1, outlier_factor=10.0)
    resumed.load_state(guard.state())
    for g in (guard, resumed):
        np.testing.assert_allclose(g(8, [0.1], [10]), [5.1])  # back to fast: rejected once
    old = {"per_sample": np.array([0.01]), "suspect": np.array([0])}  # before the median
    resumed.load_state(old)
    np.testing.assert_allclose(resumed(9, [0.2], [10]), [0.2])
    assert resumed.per_sample[0] == np.median([0.01, 0.02])


def test_row_medians_are_nanmedians_to_the_last_bit():
    """The guard's reference is each worker's median of its finite recent rates: the fast
    median must give np.nanmedian's values exactly, NaN for a worker with none."""
    rng = np.random.default_rng(3)
    for i in range(300):  # full rows (the usual case, its own branch) a third of the time
        a = rng.random((4, 4 + i % 3))
        a[rng.random(a.shape) < (0.4 if i % 3 else 0.0)] = np.nan
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows
            want = np.nanmedian(a, axis=1)
        np.testing.assert_array_equal(row_medians(a), want)


def test_every_workers_reference_is_the_median_of_its_last_five_accepted_rates():
    """Steps where every worker is read (moved in place) and steps where one is idle (moved
    row by row) keep the same yardstick: each worker's median of its last five accepted
    per-sample times; readings inside the factor come back unchanged."""
    rng = np.random.default_rng(0)
    g = TimeGuard(3, 10.0)
    rates: list[list[float]] = [[], [], []]
    for step in range(30):
        sizes = np.array([8, 0 if step % 4 == 3 else 16, 4])
        times = sizes * 0.01 * rng.uniform(0.5, 2.0, 3)
        np.testing.assert_array_equal(g(step, times, sizes), times)
        for k in np.flatnonzero(sizes):
            rates[k].append(times[k] / sizes[k])
        want = [np.median(r[-5:]) for r in rates]
        np.testing.assert_array_equal(g.per_sample, want)


def test_the_virtual_clock_charges_a_preempted_worker_its_modelled_time(tmp_path):
    """Worker 3 runs at 1 % of its speed in step 3 (0-based 2): the modelled time is exact, so
    the step is charged 100x, not the guard's fallback (the run had ended at the time of a
    run without the preemption); a planted bad time on the same clock is still replaced."""
    from omnilearn_jax.run.job import train_and_evaluate
    from omnilearn_jax.run.runstore import read_metrics
    from tests.test_train import FEW_BUCKETS, smoke_config

    config = smoke_config()
    config.num_workers = config.num_devices = 4
    config.bucket_ratio = FEW_BUCKETS
    config.controller.name, config.controller.b_min = "static", 0
    config.hetero.name, config.hetero.preempt_worker = "preempt", 3
    config.hetero.preempt_intervals = (2, 3)
    config.train.num_steps = 5
    config.faults.bad_times = (4, 1, 1e6)  # 0-based step 4: the 5th
    train_and_evaluate(config, str(tmp_path))
    times = [r["worker_times"] for r in read_metrics(tmp_path) if "loss" in r]
    assert abs(times[2][3] / times[2][0] - 100) < 1e-6
    assert abs(times[3][3] / times[3][0] - 1) < 1e-6  # back at full speed
    assert abs(times[4][1] / times[4][0] - 1) < 1e-6  # the planted 1e6 s replaced


def test_rejections_are_said_one_line_a_step_for_the_first_steps_then_counted(capsys):
    """On the wall clock every CPU device shares the host's cores, so one hiccup rejects all
    their times (2,136 lines in a 20,000-step run, one a worker). Workers 0 and 1 spike on
    even steps, 2 and 3 on odd ones, each spike between normal readings (so each is
    rejected): one line a step naming both, WARNINGS lines in all, every rejection counted."""
    from omnilearn_jax.engine.faults import WARNINGS

    guard = TimeGuard(4, outlier_factor=10.0)
    guard(0, [0.1] * 4, [10] * 4)
    for step in range(1, 31):
        spiked = (0, 1) if step % 2 == 0 else (2, 3)
        times = [100.0 if k in spiked else 0.1 for k in range(4)]
        np.testing.assert_allclose(guard(step, times, [10] * 4), [0.1] * 4)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == WARNINGS == 10 and guard.rejected == 60
    assert lines[0].startswith("warning: step 2: rejected measured time 100.0s of worker 2 ")
    assert "; rejected measured time 100.0s of worker 3 (batch 10)" in lines[0]
    assert "counted in summary.json's rejected_times" in lines[-1]
    assert "counted" not in lines[-2]


def test_a_slow_first_reading_does_not_reject_the_normal_ones_after_it(capsys):
    """The first timed step of a wall run read 15 ms against 1.4 ms after it: as the reference
    it rejected the next step's normal times and put the slow one in their place."""
    guard = TimeGuard(2, outlier_factor=10.0)
    guard(0, [0.015, 0.015], [10, 10])
    np.testing.assert_allclose(guard(1, [0.0014, 0.0014], [10, 10]), [0.0014, 0.0014])
    assert guard.rejected == 0 and capsys.readouterr().err == ""
    np.testing.assert_allclose(guard(2, [0.0014, 0.0014], [10, 10]), [0.0014, 0.0014])
    # with two readings behind it, a reading 10x under the reference is an outlier again
    np.testing.assert_allclose(guard(3, [0.0014, 0.00001], [10, 10]), [0.0014, 0.0014])
    assert guard.rejected == 1
