"""A measured curve charges what a device computes: the bucket of its rows, all its workers'
rows together, each worker its share by rows (cluster/cost.py with the run's layout)."""

import numpy as np

from omnilearn_jax import cluster
from omnilearn_jax.engine import buckets

# Knots at the buckets of a 64-row device (8, 16, 24, 32, 40, 56, 64), as `measure` profiles
# them; the times are made up, each bucket dearer than the last.
LAYOUT_1 = buckets.make_layout(num_workers=4, num_devices=4, capacity=64)
LAYOUT_2 = buckets.make_layout(num_workers=4, num_devices=2, capacity=64)
CURVE = cluster.CostCurve((8, 16, 24, 32, 40, 56, 64), (0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 0.8))


def test_the_layouts_buckets_are_the_curves_knots():
    assert LAYOUT_1.buckets == CURVE.batch_sizes == LAYOUT_2.buckets
    assert LAYOUT_2.workers_per_device == 2


def test_rows_between_buckets_are_charged_the_upper_buckets_time():
    cost = cluster.CostModel(curve=CURVE, layout=LAYOUT_1)
    times = cost.worker_times(0, np.array([17, 41, 8, 62]), np.ones(4))
    # 17 rows compute the 24-row block, 41 the 56-row block, 62 the 64-row block.
    np.testing.assert_allclose(times, [0.3, 0.7, 0.1, 0.8])
    # Without the layout the curve is read at the rows themselves (linear between knots):
    # 17 rows cost 0.2125, under-charging the 24-row block by 29%.
    old = cluster.CostModel(curve=CURVE).worker_times(0, np.array([17, 41, 8, 62]), np.ones(4))
    np.testing.assert_allclose(old, [0.2125, 0.5125, 0.1, 0.775])


def test_two_workers_on_a_device_are_charged_the_bucket_of_their_total_rows():
    cost = cluster.CostModel(curve=CURVE, layout=LAYOUT_2, overhead=0.01)
    sizes = np.array([10, 7, 24, 0])
    times = cost.worker_times(0, sizes, np.array([1.0, 2.0, 4.0, 1.0]))
    # Device 0 holds 17 rows -> its 24-row block (0.3 s): worker 0 its 10/17 at speed 1,
    # worker 1 its 7/17 at speed 2. Device 1 holds 24 rows -> 0.3 s, all worker 2's; worker
    # 3 holds none and takes 0 s.
    expect = [0.01 + 0.3 * 10 / 17, 0.01 + 0.3 * 7 / 17 / 2, 0.01 + 0.3 / 4, 0.0]
    np.testing.assert_allclose(times, expect)
    # The oracle's table takes a worker's neighbour on its device to hold as many rows: 10
    # rows are half the 24-row block of 20 (0.15 s), 7 rows half the 16-row block of 14 at
    # speed 2 (0.05 s). Alone, a worker would be charged its own bucket: 0.2 and 0.1.
    table = cost.time_table(np.array([1.0, 2.0, 4.0, 1.0]), 64)
    np.testing.assert_allclose([table[0, 10], table[1, 7]], [0.01 + 0.15, 0.01 + 0.05])
    even = cost.worker_times(0, np.array([10, 10, 7, 7]), np.array([1.0, 2.0, 4.0, 1.0]))
    np.testing.assert_allclose(even, [table[0, 10], table[1, 10], table[2, 7], table[3, 7]])


def test_the_oracles_table_charges_buckets_and_the_formula_ignores_them():
    cost = cluster.CostModel(curve=CURVE, layout=LAYOUT_1)
    table = cost.time_table(np.array([1.0, 2.0, 1.0, 1.0]), 70)
    np.testing.assert_allclose(table[0, [0, 1, 9, 16, 17, 57]], [0.0, 0.1, 0.2, 0.2, 0.3, 0.8])
    # Past the top bucket (never a step's split) the rows themselves: 70 rows, slope 0.0125.
    np.testing.assert_allclose(table[1, 70], (0.8 + 6 * 0.0125) / 2)
    formula = cluster.CostModel(layout=LAYOUT_1)
    np.testing.assert_allclose(
        formula.worker_times(0, np.array([17, 0, 0, 0]), np.ones(4)), [0.05 + 0.17, 0, 0, 0]
    )
