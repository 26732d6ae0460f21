"""Closed-form answers of the linear cost model, for experiment scripts and sanity checks."""

import numpy as np

from omnilearn_jax.cluster.profiles import check_speeds


def uniform_vs_balanced_reduction(speeds: np.ndarray, global_batch: int) -> float:
    """Fraction of step time saved by balanced over uniform batching (linear, no overhead).

    With time = b * c / s, a uniform split b = B / W takes max_k (B / W) / s_k; a perfectly
    balanced split (b_k proportional to s_k, real-valued) takes B / sum(s) for every worker.
    The reduction is 1 - balanced / uniform; c cancels. HL8 (6, 6, 4, 32) with B = 128:
    1 - (128 / 48) / (32 / 4) = 2 / 3.
    """
    s = check_speeds(speeds, "uniform_vs_balanced_reduction")
    if global_batch <= 0:
        raise ValueError(f"global_batch must be > 0, got {global_batch}")
    uniform = np.max(global_batch / s.size / s)
    balanced = global_batch / s.sum()
    return float(1.0 - balanced / uniform)
