"""The markdown of docs/RESULTS.md with the numbers behind it, and how two groups compare."""

from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

from experiments.paper import groups as G
from experiments.paper.fmt import fmt, pct, pm, rel


class Doc:
    """Collects markdown and the traced numbers behind it."""

    def __init__(self):
        self.lines: list[str] = []
        self.traced: list[dict[str, Any]] = []

    def add(self, *lines: str) -> None:
        self.lines.extend(lines)

    def record(self, table: str, label: str, stat: str, mean: float, text: str, cells, **more):
        """One traced number: what it is, the value, how the document prints it, its cells."""
        entry = {"table": table, "label": label, "stat": stat, "mean": mean, "text": text}
        self.traced.append({**entry, "cells": [rel(c) for c in cells], **more})

    def num(self, table: str, label: str, group: G.Group | None, stat: str) -> str:
        """`mean ± std` of a build_table statistic, recorded with its cells."""
        if group is None:
            return "-"
        mean, std = group.get(f"{stat}_mean"), group.get(f"{stat}_std")
        if not math.isnan(mean):
            self.record(table, label, stat, mean, fmt(mean), group.cells)
        return pm(mean, std)

    def derived(self, table: str, label: str, g: G.Group, stat: str, of_cell) -> str:
        """Mean over g's complete cells of `of_cell(cell directory)` (a value the summary does
        not hold, computed from the run's records), recorded like `num`; export.py writes the
        same per-cell value under the cell's `derived`."""
        cells = complete_cells(g)
        values = [v for c in cells if (v := of_cell(c)) is not None]
        if not values:
            return "-"
        mean = float(np.mean(values))
        self.record(table, label, stat, mean, fmt(mean), cells)
        return fmt(mean)

    def reduction(self, table: str, label: str, g: G.Group, ref: G.Group, cut: float, stat: str):
        """Records a reduction 1 - mean(stat of g) / mean(stat of ref) with both cell lists
        (tests/test_results_trace.py recomputes it); returns nothing (the caller formats)."""
        if not math.isnan(cut):
            reference = [rel(c) for c in ref.cells]
            self.record(
                table,
                label,
                "reduction",
                cut,
                pct(cut),
                g.cells,
                of=stat,
                reference_cells=reference,
            )


def complete_cells(g: G.Group) -> list[str]:
    """The cells of g whose run completed (those whose summaries build_table averaged)."""
    out = []
    for cell in g.cells:
        try:
            with open(os.path.join(cell, "summary.json")) as f:
                if json.load(f).get("status") == "complete":
                    out.append(cell)
        except (OSError, ValueError):
            continue
    return out


def compare(g: G.Group | None, ref: G.Group | None, stat: str = "") -> tuple[float, str]:
    """(1 - time / reference time, statistic): by default time to target when every seed of
    both reached it, else total time (equal steps: in BSP every split does the same updates)."""
    if g is None or ref is None:
        return math.nan, ""
    if not stat:
        stat = "time_to_target" if g.all_reached() and ref.all_reached() else "total_time"
    mine, theirs = g.get(f"{stat}_mean"), ref.get(f"{stat}_mean")
    return (1 - mine / theirs if theirs else math.nan), stat
