"""Per-seed trainer runs of configs/ablation_curves.py, collected into one committed JSON file.

    python -m experiments.predictive_trainer --runs DIR[,DIR] [--out FILE] [--note TEXT]

Each DIR is the workdir of `python -m experiments.ablate --config=configs/ablation_curves.py
[:limit=N,]seeds=S`. Every cell's config.json and summary.json are read; the file keeps, per
run, the controller, the seed, the total virtual time, the time to the target accuracy and the
final accuracy, with each DIR's base config (so the cost curve and its limit are named) and
its stamp.json (the commit its cells last ran at; `make report` writes it, part
predictive_trainer). experiments/predictive_study.py reads it.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys

OUT = pathlib.Path(__file__).resolve().parents[1] / "docs" / "results" / "predictive_trainer.json"


def collect(workdir: str) -> dict:
    """One ablation's runs: its base config and one record per complete cell."""
    with open(os.path.join(workdir, "ablation.json")) as f:
        ablation = json.load(f)
    runs = []
    for cell in ablation["cells"]:
        folder = os.path.join(workdir, cell["name"])
        try:
            with open(os.path.join(folder, "summary.json")) as f:
                summary = json.load(f)
            with open(os.path.join(folder, "config.json")) as f:
                config = json.load(f)
        except FileNotFoundError:
            continue
        if summary.get("status", "complete") != "complete":
            continue
        runs.append(
            {
                "controller": config["controller"]["name"],
                "seed": int(config["seed"]),
                "total_time": float(summary["total_time"]),
                "time_to_target": summary.get("time_to_target"),
                "final_eval_accuracy": float(summary["final_eval_accuracy"]),
            }
        )
    if not runs:
        raise ValueError(f"{workdir}: no complete cell")
    first = next(c for c in ablation["cells"] if os.path.exists(_summary(workdir, c)))
    with open(os.path.join(workdir, first["name"], "config.json")) as f:
        config = json.load(f)
    cost = {k: config["cost"].get(k) for k in ("curve", "noise", "memory_limits")}
    if "/data/curves/" in (cost["curve"] or ""):  # the checkout's own curve, named in the repo
        cost["curve"] = "data/curves/" + os.path.basename(cost["curve"])
    try:  # the commit the cells last ran at (experiments/paper/reproduce.py writes it)
        with open(os.path.join(workdir, "stamp.json")) as f:
            ran = json.load(f)
    except (OSError, ValueError):
        ran = None
    return {
        "workdir": os.path.basename(os.path.normpath(workdir)),
        "stamp": ran,
        "cost": cost,
        "hetero": {k: config["hetero"].get(k) for k in ("name", "levels", "segment", "unit")},
        "controller": {k: config["controller"].get(k) for k in ("b_min", "b_max", "jump")},
        "steps": config["train"]["num_steps"],
        "target_accuracy": config["train"].get("target_accuracy"),
        "runs": runs,
        "cells": len(ablation["cells"]),
    }


def _summary(workdir: str, cell: dict) -> str:
    return os.path.join(workdir, cell["name"], "summary.json")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", required=True, help="comma-separated ablation workdirs")
    p.add_argument("--out", default=str(OUT))
    p.add_argument("--note", default="", help="how and where the runs were made")
    p.add_argument("--allow_missing", action="store_true", help="write with cells unfinished")
    args = p.parse_args(argv)
    workdirs = [d for d in args.runs.split(",") if d]
    if not workdirs:  # "wrote ...: 0 runs" over the committed study, exit 0
        p.error(f"--runs {args.runs!r} names no ablation workdir")
    for d in workdirs:  # a missing folder was a traceback
        if not os.path.isfile(os.path.join(d, "ablation.json")):
            p.error(f"--runs {d}: no ablation.json there (an ablation workdir is expected)")
    try:
        studies = [collect(d) for d in workdirs]
    except ValueError as e:  # 0 complete cells had replaced the committed study with none
        p.error(str(e))
    unfinished = [
        f"{s['workdir']} ({len(s['runs'])} of {s['cells']})"
        for s in studies
        if len(s["runs"]) < s["cells"]
    ]
    if unfinished and not args.allow_missing:
        p.error(
            f"complete cells missing: {', '.join(unfinished)}; finish the ablation first, or "
            f"--allow_missing (the study then says how many are missing)"
        )
    report = {"note": args.note, "studies": studies}
    pathlib.Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}: {sum(len(s['runs']) for s in studies)} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
