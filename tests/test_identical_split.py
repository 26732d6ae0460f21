"""benchmarks/identical_split.py's arithmetic on planted step records. No timing."""

import pytest

from benchmarks.identical_split import summarise


def test_summary_of_planted_records():
    uniform, moved = [8] * 8, [6] * 4 + [10] * 4
    records = [
        {"batch_sizes": uniform, "worker_times": [2e-3] * 4 + [1e-3] * 4},
        {"batch_sizes": uniform, "worker_times": [1e-3] * 4 + [1e-3] * 4},
        {"batch_sizes": moved, "worker_times": [3e-3] * 4 + [1e-3] * 4},
    ]
    s = summarise(records)
    assert s["steps"] == 3 and s["moves"] == 1 and s["final"] == moved
    assert s["max_skew"] == pytest.approx(0.25)  # 10 rows against 8
    assert s["median_ratio"] == pytest.approx(2.0)  # ratios 2, 1, 3
    assert s["p0_slower"] == pytest.approx(2 / 3)
    assert s["seconds"] == pytest.approx(6e-3)  # the longest worker of each step
