"""The predicted time curve below the smallest measured size (controllers/time_curve.py)."""

import jax.numpy as jnp
import numpy as np

from controllers.time_curve import predict


def one_worker(points) -> tuple[jnp.ndarray, jnp.ndarray]:
    """(mean, count) tables [1, 129] of one worker measured at (size, seconds, weight)."""
    mean = np.zeros((1, 129), np.float32)
    count = np.zeros((1, 129), np.float32)
    for size, seconds, weight in points:
        mean[0, size], count[0, size] = seconds, weight
    return jnp.asarray(mean), jnp.asarray(count)


def test_a_steep_line_through_cliff_points_never_predicts_a_small_batch_for_free():
    # One worker measured at 24 rows (12 s) and past a cliff at 33-40 rows (230-2,000 s): the
    # fitted line is steep enough to cross zero well above 20 rows.
    mean, count = one_worker(
        ((24, 12.0, 3.0), (33, 230.0, 0.5), (37, 1540.0, 0.6), (40, 2020.0, 0.5))
    )
    table = np.asarray(predict(mean, count, 0.18))[0]
    # At most the smallest measured size's time per sample, and so at least 10 / 24 * 12 s.
    assert table[10] >= 10 / 24 * table[24] - 1e-4
    assert table[20] >= 20 / 24 * table[24] - 1e-4
    assert 11.0 < table[24] < 13.0


def test_noisy_points_over_a_narrow_range_do_not_predict_a_flat_curve():
    # A worker's points after a speed change (a tuning-side plant of
    # benchmarks/controller_heldout.py, seed 100, worker 2): four sizes 32-38, each measured
    # 0.5-3.7 times at 13 % noise, that happen to fall with the size. The least-squares line
    # through them is nearly flat (time at 1 row: 5.75, 88 % of the time at 32), so shrinking
    # the worker looked useless and its rows went to another worker (3.4x the optimum). The
    # noise-scaled ridge on the intercept (time_curve.NOISY_RIDGE) pulls the line towards the
    # proportional guess. With no noise, two sizes still give the exact affine curve.
    mean, count = one_worker(
        ((32, 6.52, 0.5), (33, 6.094, 0.5), (36, 6.551, 0.86), (38, 5.866, 3.71))
    )
    table = np.asarray(predict(mean, count, jnp.full((1, 1), 0.128)))[0]
    assert table[1] < 0.15 * table[32]
    assert table[16] < 0.6 * table[32]
    exact = jnp.zeros((1, 129)).at[0, 20].set(1.2).at[0, 40].set(2.2)
    affine = np.asarray(predict(exact, (exact > 0).astype(jnp.float32), 0.0))[0]
    np.testing.assert_allclose(affine[[10, 60, 100]], [0.7, 3.2, 5.2], rtol=2e-3)


def test_two_sizes_a_row_apart_give_the_affine_curve_to_a_tenth_of_a_percent():
    # t = 40 + b measured at 30 and 31 rows, or t = 100 + b at 10 and 20, no noise: the
    # intercept's ridge had pulled the slope to 2.03 (to 1.06 for the second), predicting 138
    # at 64 rows for 104, and a noise-free plant with a fixed cost settled 1.4 % off its optimum.
    n = 129
    mean, count = np.zeros((3, n), np.float32), np.zeros((3, n), np.float32)
    for w, (sizes, fixed) in enumerate((((30, 31), 40.0), ((10, 20), 100.0), ((32,), 40.0))):
        for s in sizes:
            mean[w, s], count[w, s] = fixed + s, 1.0
    table = np.asarray(predict(jnp.asarray(mean), jnp.asarray(count), 0.0))
    np.testing.assert_allclose(table[0, [40, 64, 128]], [80.0, 104.0, 168.0], rtol=1e-3)
    np.testing.assert_allclose(table[1, [30, 64, 128]], [130.0, 164.0, 228.0], rtol=1e-3)
    # one size alone: the proportional guess t / b, exactly
    np.testing.assert_allclose(table[2, [16, 64]], [36.0, 144.0], rtol=1e-6)
