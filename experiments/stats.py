"""The 95 % Student t interval every study reports: two-sided, of a mean over seeds or pairs.

One definition for all of them, with the exact quantile (scipy, which scikit-learn brings)
at any number of values, so that no study falls back to the normal 1.96 past a table's end.
"""

from __future__ import annotations

import math

import numpy as np


def t975(dof: int) -> float:
    """The 97.5 % quantile of Student's t with `dof` degrees of freedom."""
    from scipy import stats

    return float(stats.t.ppf(0.975, dof))


def mean_half(values) -> tuple[float, float]:
    """(mean, half-width of its two-sided 95 % Student t interval); the half-width is NaN
    below 2 values (nothing to estimate a spread from)."""
    v = np.asarray(values, float)
    if v.ndim != 1:  # a table's every value over its row count had passed as a mean of rows
        raise ValueError(f"mean_half takes one value a seed or pair, got shape {v.shape}")
    mean = float(v.mean())
    if len(v) < 2:
        return mean, math.nan
    return mean, t975(len(v) - 1) * float(v.std(ddof=1)) / math.sqrt(len(v))
