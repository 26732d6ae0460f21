"""The predicted time curve below the smallest measured size (controllers/time_curve.py)."""

import jax.numpy as jnp
import numpy as np

from controllers.time_curve import predict


def test_a_steep_line_through_cliff_points_never_predicts_a_small_batch_for_free():
    # One worker measured at 24 rows (12 s) and past a cliff at 33-40 rows (230-2,000 s): the
    # fitted line is steep enough to cross zero well above 20 rows.
    mean = np.zeros((1, 129), np.float32)
    count = np.zeros((1, 129), np.float32)
    for size, seconds, weight in (
        (24, 12.0, 3.0),
        (33, 230.0, 0.5),
        (37, 1540.0, 0.6),
        (40, 2020.0, 0.5),
    ):
        mean[0, size], count[0, size] = seconds, weight
    table = np.asarray(predict(jnp.asarray(mean), jnp.asarray(count), 0.18))[0]
    # At most the smallest measured size's time per sample, and so at least 10 / 24 * 12 s.
    assert table[10] >= 10 / 24 * table[24] - 1e-4
    assert table[20] >= 20 / 24 * table[24] - 1e-4
    assert 11.0 < table[24] < 13.0
