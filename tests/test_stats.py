"""The studies' one Student t interval (experiments/stats.py)."""

import math

import numpy as np
import pytest

from experiments import stats


def test_quantiles_are_exact_past_any_table():
    # Published two-sided 95 % values; the old per-study tables stopped at 8-15 degrees of
    # freedom and then used the normal 1.96, 6 % narrow at 19.
    assert stats.t975(4) == pytest.approx(2.7764, abs=1e-4)
    assert stats.t975(19) == pytest.approx(2.0930, abs=1e-4)
    assert stats.t975(1000) == pytest.approx(1.9623, abs=1e-4)


def test_mean_half_of_twenty_pairs():
    values = np.arange(20.0)  # mean 9.5, sample std sqrt(35)
    mean, half = stats.mean_half(values)
    assert mean == 9.5
    assert half == pytest.approx(2.0930 * math.sqrt(35.0) / math.sqrt(20.0), rel=1e-4)
    assert math.isnan(stats.mean_half([1.0])[1])
