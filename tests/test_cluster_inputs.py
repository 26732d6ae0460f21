"""Inputs the emulated cluster (omnilearn_jax/cluster) accepted and then misused, or refused
without naming them (each test failed before its fix)."""

import json

import numpy as np
import pytest

from omnilearn_jax.cluster import CostCurve, load_curve
from omnilearn_jax.cluster.clock import VirtualClock
from omnilearn_jax.cluster.cost import CostModel
from omnilearn_jax.cluster.schedule import trace_profile


def test_a_curve_whose_times_fall_is_refused():
    # Past its last knot a falling curve went on falling: -1.0 s at 8 rows, a run on a clock
    # of zeros once the guard had thrown the negative times out.
    with pytest.raises(ValueError, match="must not fall as the batch grows: \\[2.0, 1.0\\]"):
        CostCurve((2, 4), (2.0, 1.0))
    flat = CostCurve((2, 4), (1.0, 1.0))
    assert flat.time(np.array([1, 8])).tolist() == [1.0, 1.0]


def test_a_curve_file_that_is_no_object_is_named(tmp_path):
    path = tmp_path / "list.json"
    path.write_text(json.dumps([1, 2]))  # an AttributeError, naming no file
    with pytest.raises(ValueError, match=f"cost curve {path}: not a cost curve: a JSON list"):
        load_curve(str(path))


@pytest.mark.parametrize("sizes", [[8, 16.7, 32], [True, 16], "816", [8, float("nan")]])
def test_a_curve_whose_batch_sizes_are_not_whole_numbers_is_refused(tmp_path, sizes):
    """16.7 was cut to 16, true read as 1 row, the string "816" as the sizes 8, 1 and 6."""
    path = tmp_path / "curve.json"
    seconds = [0.1 * (i + 1) for i in range(len(sizes))]
    path.write_text(json.dumps({"format": "omnilearn-cost-curve/1", "batch_sizes": sizes,
                                "seconds": seconds}))  # fmt: skip
    with pytest.raises(ValueError, match="batch_sizes must be a list of whole numbers, got"):
        load_curve(str(path))
    path.write_text(json.dumps({"format": "omnilearn-cost-curve/1", "batch_sizes": [8, 16.0],
                                "seconds": [0.1, 0.2]}))  # fmt: skip
    assert load_curve(str(path)).batch_sizes == (8, 16)


def test_a_trace_that_is_not_utf8_is_named(tmp_path):
    path = tmp_path / "utf16.csv"
    path.write_bytes("step,worker,speed\n0,0,1\n".encode("utf-16"))
    with pytest.raises(ValueError, match=f"{path}: not UTF-8 text"):
        trace_profile(str(path), num_workers=1)


def test_linear_beside_a_curve_is_refused():
    # the curve won and `linear` was ignored without a word
    curve = CostCurve((8, 16), (1.0, 2.0))
    with pytest.raises(ValueError, match="not linear with a curve"):
        CostModel(curve=curve, linear=True)
    assert CostModel(curve=curve).worker_times(0, np.array([8]), np.ones(1)).tolist() == [1.0]


def test_the_clock_checks_the_shape_of_the_sizes_and_speeds():
    clock = VirtualClock(4)
    for kwargs in ({"batch_sizes": [1, 2, 3]}, {"speeds": [1.0, 1.0]}):
        with pytest.raises(ValueError, match=r"must have shape \(4,\), got \("):
            clock.step(np.ones(4), **kwargs)
    assert clock.step(np.ones(4), batch_sizes=[1, 2, 3, 4])["step_time"] == 1.0
