"""The markdown of docs/RESULTS.md with the numbers behind it, and how two groups compare."""

from __future__ import annotations

import math
from typing import Any

from experiments.paper import groups as G
from experiments.paper.fmt import fmt, pct, pm, rel


class Doc:
    """Collects markdown and the traced numbers behind it."""

    def __init__(self):
        self.lines: list[str] = []
        self.traced: list[dict[str, Any]] = []

    def add(self, *lines: str) -> None:
        self.lines.extend(lines)

    def num(self, table: str, label: str, group: G.Group | None, stat: str) -> str:
        """`mean ± std` of a build_table statistic, recorded with its cells."""
        if group is None:
            return "-"
        mean, std = group.get(f"{stat}_mean"), group.get(f"{stat}_std")
        if not math.isnan(mean):
            self.traced.append(
                {
                    "table": table,
                    "label": label,
                    "stat": stat,
                    "mean": mean,
                    "text": fmt(mean),
                    "cells": [rel(c) for c in group.cells],
                }
            )
        return pm(mean, std)

    def reduction(self, table: str, label: str, g: G.Group, ref: G.Group, cut: float, stat: str):
        """Records a reduction 1 - mean(stat of g) / mean(stat of ref) with both cell lists
        (tests/test_results_trace.py recomputes it); returns nothing (the caller formats)."""
        if not math.isnan(cut):
            self.traced.append(
                {
                    "table": table,
                    "label": label,
                    "stat": "reduction",
                    "of": stat,
                    "mean": cut,
                    "text": pct(cut),
                    "cells": [rel(c) for c in g.cells],
                    "reference_cells": [rel(c) for c in ref.cells],
                }
            )


def compare(g: G.Group | None, ref: G.Group | None, stat: str = "") -> tuple[float, str]:
    """(1 - time / reference time, statistic): by default time to target when every seed of
    both reached it, else total time (equal steps: in BSP every split does the same updates)."""
    if g is None or ref is None:
        return math.nan, ""
    if not stat:
        stat = "time_to_target" if g.all_reached() and ref.all_reached() else "total_time"
    mine, theirs = g.get(f"{stat}_mean"), ref.get(f"{stat}_mean")
    return (1 - mine / theirs if theirs else math.nan), stat
