"""An ablation workdir as groups of cells: the runner's table rows plus the cells behind them.

`load(workdir)` takes the rows of `experiments.ablation.table.build_table` (the numbers the
runner printed) and attaches to each the cell directories and summaries it averaged, so a
document can say where every number came from and a test can recompute it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any

from experiments.ablation.table import SEED, build_table


@dataclasses.dataclass
class Group:
    values: dict[str, Any]  # grid keys (except seed) -> value, tuples for lists
    row: dict[str, Any]  # build_table's row
    cells: list[str]  # cell directories (complete or not)
    summaries: list[dict]  # complete cells' summary.json, in cell order

    def get(self, stat: str) -> float:
        """build_table's statistic, e.g. 'total_time_mean'; NaN when missing."""
        value = self.row.get(stat)
        return math.nan if value is None else float(value)

    def per_seed(self, stat: str) -> list[float]:
        return [float(s[stat]) for s in self.summaries if s.get(stat) is not None]

    def all_reached(self) -> bool:
        return bool(self.summaries) and all(
            s.get("time_to_target") is not None for s in self.summaries
        )


def _key(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def load(workdir: str) -> list[Group]:
    """Groups of an ablation workdir (written by experiments.ablate); [] when absent."""
    if not os.path.exists(os.path.join(workdir, "ablation.json")):
        return []
    with open(os.path.join(workdir, "ablation.json")) as f:
        manifest = json.load(f)
    keys = [k for k in manifest["grid"] if k != SEED]
    groups = []
    for row in build_table(workdir):
        values = {k: _key(row[k]) for k in keys}
        cells = [
            os.path.join(workdir, c["name"])
            for c in manifest["cells"]
            if all(_key(c["values"][k]) == v for k, v in values.items())
        ]
        summaries = []
        for cell in cells:
            try:
                with open(os.path.join(cell, "summary.json")) as f:
                    summary = json.load(f)
            except (OSError, ValueError):
                continue
            if summary.get("status") == "complete":
                summaries.append(summary)
        groups.append(Group(values, row, cells, summaries))
    return groups


def find(groups: list[Group], **values: Any) -> Group | None:
    """The group whose grid values include `values` (keys with '.' written as '__')."""
    want = {k.replace("__", "."): _key(v) for k, v in values.items()}
    for g in groups:
        if all(g.values.get(k) == v for k, v in want.items()):
            return g
    return None


def time_stat(g: Group | None) -> tuple[str, float, float]:
    """The training time we compare: time to target when every seed reached it, else the
    total time of the run (equal steps; in BSP every controller does the same updates)."""
    if g is None:
        return "total_time", math.nan, math.nan
    stat = "time_to_target" if g.all_reached() else "total_time"
    return stat, g.get(f"{stat}_mean"), g.get(f"{stat}_std")
