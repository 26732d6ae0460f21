"""Each worker's staleness histogram: what an async run's summary and progress lines report.

The loop kept every update's staleness in a list a worker, which every progress line
flattened and every checkpoint saved whole: 15.6 ms a line at 100,000 updates (0.38 ms at
1,000), and checkpoint metadata that grew with the updates. Counts by staleness value hold the
same summary in memory and on disk bounded by the largest staleness.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class StalenessCounts:
    def __init__(self, num_workers: int):
        self.counts: list[list[int]] = [[] for _ in range(num_workers)]  # [k][s]: updates

    def add(self, worker: int, staleness: int) -> None:
        c = self.counts[worker]
        if staleness >= len(c):
            c.extend([0] * (staleness + 1 - len(c)))
        c[staleness] += 1

    def state(self) -> list[list[int]]:
        return self.counts

    def load(self, meta: dict) -> None:
        """From a checkpoint's metadata; one written before the counts holds every update's
        staleness, a list a worker."""
        if "staleness_counts" in meta:
            self.counts = [list(c) for c in meta["staleness_counts"]]
        else:
            self.counts = [np.bincount(v).tolist() if v else [] for v in meta["staleness"]]

    def summary(self) -> dict[str, Any]:
        """Mean, max, each worker's mean (None for one that applied no update: 0.0 would read
        as perfectly fresh) and the histogram over all workers (empty before any update)."""
        width = max((len(c) for c in self.counts), default=0)
        total = np.zeros(width, np.int64)
        for c in self.counts:
            total[: len(c)] += np.asarray(c, np.int64)
        values = np.arange(width)

        def mean(c) -> float | None:
            n = int(np.sum(c))
            return int(np.dot(values[: len(c)], c)) / n if n else None

        n = int(total.sum())
        return {
            "staleness_mean": mean(total) if n else 0.0,
            "staleness_max": int(np.flatnonzero(total)[-1]) if n else 0,
            "staleness_mean_per_worker": [mean(c) for c in self.counts],
            "staleness_histogram": total.tolist() if n else [],
        }
