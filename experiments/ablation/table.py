"""The results table of an ablation, computed from the cells' run stores alone.

`build_table(workdir)` reads DIR/ablation.json (the grid, written by the runner) and each
cell's summary.json. Rows group the cells by every grid key except `seed`; per group:
- mean and sample standard deviation (ddof=1; empty with one seed) over seeds of
  final_eval_accuracy, total_time and time_to_target. time_to_target is averaged over the
  seeds that reached the target; `target_reached` says how many did ('k/n'), so a mean over
  fewer seeds is visible as such;
- speedup_vs_static = mean total_time of the `static` group with the same other keys /
  this group's mean total_time (> 1: faster than uniform batching);
- efficiency_vs_oracle = mean total_time of the `oracle` group / this one (1 = as fast
  as the oracle). Both are ratios of means, empty when that reference group is absent or
  `controller.name` is not a grid key.
Cells without a complete summary are left out and counted in `missing`.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from typing import Any

SEED = "seed"
CONTROLLER = "controller.name"
STATS = ("final_eval_accuracy", "total_time", "time_to_target")


def _mean_std(values: list[float]) -> tuple[float, float]:
    if not values:
        return math.nan, math.nan
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, math.nan
    var = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return mean, math.sqrt(var)


def write_manifest(workdir: str, grid: dict, cells: list) -> None:
    os.makedirs(workdir, exist_ok=True)
    manifest = {
        "grid": {k: list(v) for k, v in grid.items()},
        "cells": [{"name": c.name, "values": c.values} for c in cells],
    }
    with open(os.path.join(workdir, "ablation.json"), "w") as f:
        json.dump(manifest, f, indent=2, default=list)


def _summary(cell_dir: str) -> dict | None:
    try:
        with open(os.path.join(cell_dir, "summary.json")) as f:
            summary = json.load(f)
    except (OSError, ValueError):
        return None
    return summary if summary.get("status") == "complete" else None


def _key(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def build_table(workdir: str) -> list[dict[str, Any]]:
    """One dict a group (grid keys except seed), in grid order; see the module docstring."""
    with open(os.path.join(workdir, "ablation.json")) as f:
        manifest = json.load(f)
    group_keys = [k for k in manifest["grid"] if k != SEED]
    groups: dict[tuple, dict[str, Any]] = {}
    for cell in manifest["cells"]:
        gid = tuple(_key(cell["values"][k]) for k in group_keys)
        group = groups.setdefault(gid, {"cells": 0, "summaries": []})
        group["cells"] += 1
        summary = _summary(os.path.join(workdir, cell["name"]))
        if summary is not None:
            group["summaries"].append(summary)
    rows = []
    for gid, group in groups.items():
        row: dict[str, Any] = dict(zip(group_keys, gid, strict=True))
        summaries = group["summaries"]
        row["seeds"] = len(summaries)
        row["missing"] = group["cells"] - len(summaries)
        for stat in STATS:
            values = [s[stat] for s in summaries if s.get(stat) is not None]
            row[f"{stat}_mean"], row[f"{stat}_std"] = _mean_std(values)
        reached = sum(s.get("time_to_target") is not None for s in summaries)
        row["target_reached"] = f"{reached}/{len(summaries)}"
        rows.append(row)
    _add_ratios(rows, group_keys)
    return rows


def _add_ratios(rows: list[dict], group_keys: list[str]) -> None:
    others = [k for k in group_keys if k != CONTROLLER]
    by_key = {
        (row.get(CONTROLLER), tuple(row[k] for k in others)): row["total_time_mean"] for row in rows
    }
    for row in rows:
        rest = tuple(row[k] for k in others)
        mine = row["total_time_mean"]
        for column, reference in (
            ("speedup_vs_static", "static"),
            ("efficiency_vs_oracle", "oracle"),
        ):
            ref = by_key.get((reference, rest), math.nan) if CONTROLLER in group_keys else math.nan
            row[column] = ref / mine if mine and not math.isnan(mine) else math.nan


def _cell_text(value: Any, digits: int = 4) -> str:
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.{digits}g}"
    if isinstance(value, tuple | list):
        return "(" + ",".join(str(v) for v in value) + ")"
    return str(value)


def to_csv(rows: list[dict]) -> str:
    out = io.StringIO()
    if rows:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if v != v else v) for k, v in row.items()})  # NaN -> ''
    return out.getvalue()


def to_markdown(rows: list[dict]) -> str:
    if not rows:
        return "(no cells)\n"
    columns = list(rows[0])
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell_text(r[c]) for c in columns) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def write_results(workdir: str) -> list[dict]:
    """Builds the table and writes DIR/results.csv and DIR/results.md; returns the rows."""
    rows = build_table(workdir)
    with open(os.path.join(workdir, "results.csv"), "w") as f:
        f.write(to_csv(rows))
    with open(os.path.join(workdir, "results.md"), "w") as f:
        f.write(to_markdown(rows))
    return rows
