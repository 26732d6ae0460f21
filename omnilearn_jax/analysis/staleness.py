"""Staleness of async updates counted in rows, not server versions (issue 28, point 5).

An update of staleness s (versions) was computed at parameters that s updates have changed
since; a version is one update, of whatever size. Under uniform batches a version is B / W
rows, under a proportional split anything from a few rows to most of B, so versions do not
compare between splits. Counted in rows, the staleness of update i is the number of samples
the server applied between the worker's pull and its push: the rows of updates i - s .. i - 1.
"""

from __future__ import annotations

import numpy as np


def rows_between(staleness: np.ndarray, worker_batch: np.ndarray) -> np.ndarray:
    """Per update (in the order applied): rows the server applied between that update's pull
    and its push. `staleness`: versions (int, >= 0); `worker_batch`: each update's rows."""
    s = np.asarray(staleness, np.int64)
    b = np.asarray(worker_batch, np.int64)
    if np.any(s < 0) or np.any(s > np.arange(len(s))):
        raise ValueError("staleness must lie in [0, updates applied before]")
    before = np.concatenate([[0], np.cumsum(b)])  # before[i]: rows applied before update i
    i = np.arange(len(s))
    return before[i] - before[i - s]


def weighted_mean(values: np.ndarray, worker_batch: np.ndarray) -> float:
    """Mean over samples: each update counts by its rows (a sample's staleness)."""
    b = np.asarray(worker_batch, np.float64)
    return float(np.dot(np.asarray(values, np.float64), b) / b.sum()) if b.sum() else 0.0
