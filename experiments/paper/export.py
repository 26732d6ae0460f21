"""Per-seed results of the paper ablations as JSON files committed under docs/results/paper/.

`runs/` is not in the repository, so a number of RESULTS.md that cited only a run directory
could not be checked from a checkout. `make report` therefore also writes, for each ablation,
DOCS/results/paper/<ablation>.json: every cell (one seed of one grid point) with its grid
values, the cost curve its virtual clock charged (`cost_curve`, '' for the formula), its
summary.json and its eval curve; and DOCS/results/paper/numbers.json: every
number of RESULTS.md's tables with the mean it shows and the cells (`<file>#<cell>`) it
averages. tests/test_results_trace.py recomputes each number from these files.
"""

from __future__ import annotations

import json
import os

from experiments.paper.fmt import curve_name, rel
from omnilearn_jax.run.runstore import read_metrics

LONG = 64  # summary lists longer than this (histograms) are left out of the export


def _cell(cell: str, values: dict) -> dict | None:
    try:
        with open(os.path.join(cell, "summary.json")) as f:
            summary = json.load(f)
    except (OSError, ValueError):
        return None
    summary = {k: v for k, v in summary.items() if not (isinstance(v, list) and len(v) > LONG)}
    try:
        records = read_metrics(cell)
    except (OSError, ValueError):
        records = []
    evals = [[r["step"], r["time"], r["eval_accuracy"]] for r in records if "eval_accuracy" in r]
    derived = {}
    if any("staleness" in r for r in records):  # async: staleness in rows (sections.py)
        from experiments.paper.sections import rows_staleness

        derived["staleness_rows_by_sample"] = rows_staleness(cell)
    try:  # what the virtual clock charged: a measured curve, or '' for the formula
        with open(os.path.join(cell, "config.json")) as f:
            curve = json.load(f)["cost"].get("curve", "")
    except (OSError, ValueError, KeyError):
        curve = None
    return {
        "cell": os.path.basename(cell),
        "values": values,
        "cost_curve": curve_name(curve) if curve else curve,
        "derived": derived,
        "summary": summary,
        "evals": evals,
    }


def export(workdir: str, name: str, out_dir: str, config: str = "") -> str | None:
    """Writes OUT_DIR/<name>.json from the ablation WORKDIR/<name>; its path, or None.
    `config`: the ablation config (default experiments/paper/<name>.py)."""
    path = os.path.join(workdir, name)
    try:
        with open(os.path.join(path, "ablation.json")) as f:
            manifest = json.load(f)
    except (OSError, ValueError):
        return None
    cells = [_cell(os.path.join(path, c["name"]), c["values"]) for c in manifest["cells"]]
    try:  # the commit `make report` ran this ablation at (reproduce.run_ablations)
        with open(os.path.join(path, "stamp.json")) as f:
            ran = json.load(f)
    except (OSError, ValueError):
        ran = {}
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, f"{name}.json")
    with open(out, "w") as f:
        json.dump(
            {
                "ablation": name,
                "config": config or f"experiments/paper/{name}.py",
                "run_directory": rel(path),
                "ran_at": ran,
                "cells": [c for c in cells if c is not None],
            },
            f,
            indent=1,
        )
    return out


def retarget(traced: list[dict], out_dir: str) -> list[dict]:
    """The traced numbers with each cell named `<exported file>#<cell>` instead of its run
    directory (which is not committed)."""

    def named(cell: str) -> str:
        ablation, name = os.path.split(os.path.normpath(cell))
        return f"{rel(os.path.join(out_dir, os.path.basename(ablation) + '.json'))}#{name}"

    out = []
    for entry in traced:
        entry = {**entry, "cells": [named(c) for c in entry["cells"]]}
        if "reference_cells" in entry:
            entry["reference_cells"] = [named(c) for c in entry["reference_cells"]]
        out.append(entry)
    return out
