"""Per-worker mean staleness of async runs at the async HL8 core table (4/4/4/28).

    python -m experiments.async_staleness [--updates 400] [--settle 200] [--out MD] [--data JSON]
    python -m experiments.async_staleness --render JSON --out MD   # the document alone

Runs the MLP on digits (the test suite's smoke model, W = 4, B = 128, virtual clock; a
linear cost and free communication, as in tests/test_async.py, and the default cost model)
under uniform batches, the proportional controller (its defaults, and a 0.01 dead-band)
and the oracle, and reports each
worker's mean staleness over the whole run and over the steady state (updates after
`--settle`), with max/min across workers. The issue's goal: max/min <= 1.10.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile

import numpy as np

CASES = (  # (label, controller, its arguments, linear cost and free communication)
    ("uniform (static)", "static", {}, True),
    ("proportional (defaults)", "proportional", {}, True),
    ("oracle", "oracle", {}, True),
    ("uniform, default cost model", "static", {}, False),
    ("proportional, default cost model", "proportional", {}, False),
    (
        "proportional (dead-band 0.01), default cost model",
        "proportional",
        {"deadband": 0.01},
        False,
    ),
)


def run_case(controller: str, extra: dict, linear: bool, updates: int, workdir: str) -> list[dict]:
    from configs import smoke
    from omnilearn_jax.run.job import train_and_evaluate
    from omnilearn_jax.run.runstore import read_metrics

    c = smoke.get_config()
    c.num_workers = c.num_devices = 4
    c.global_batch_size = 128
    c.mode = "asp"
    if linear:  # else the default: a fixed cost per step and a ring all-reduce per push
        c.cost.linear, c.cost.latency, c.cost.bandwidth = True, 0.0, float("inf")
    c.train.num_steps, c.train.eval_every, c.train.log_every = updates, updates, updates
    c.hetero.name, c.hetero.level, c.hetero.variant = "hl", 8, "asp"
    c.controller.name = controller
    for key, value in extra.items():
        c.controller[key] = value
    train_and_evaluate(c, workdir)
    return [r for r in read_metrics(workdir) if "staleness" in r]


def per_worker(records: list[dict]) -> np.ndarray:
    return np.array(
        [np.mean([r["staleness"] for r in records if r["worker"] == k]) for k in range(4)]
    )


def in_rows(records: list[dict]) -> float:
    """Samples applied between pull and push, per sample (each update counts by its rows)."""
    from omnilearn_jax.analysis.staleness import rows_between, weighted_mean

    s = np.array([r["staleness"] for r in records])
    b = np.array([r["worker_batch"] for r in records])
    return weighted_mean(rows_between(s, b), b)


def markdown(data: dict) -> str:
    """The document from the study's JSON (`--data`): every number is in that file."""
    settle = data["settle"]
    lines = [
        "## Async staleness per worker at HL8",
        "",
        f"`{data['command']}` ({data['date']}, commit `{data['stamp']['commit']}`"
        + (" (dirty)" if data["stamp"].get("dirty") else "")
        + "): per-worker mean staleness at async HL8 (cores 4/4/4/28), MLP on digits, "
        "W = 4, B = 128; the numbers are in docs/results/async_staleness.json.",
        "",
        "Staleness here counts versions (updates applied between a worker's pull and its "
        "push). A version is one update of any size, so the last column also counts rows: the "
        "samples applied between pull and push, per sample, as a fraction of B "
        "(omnilearn_jax.analysis.staleness).",
        "",
        "| controller | all updates (w0..w3) | max/min | after update "
        f"{settle} (w0..w3) | max/min | rows per sample, all updates (x B) |",
        "|---|---|---|---|---|---|",
    ]
    for case in data["cases"]:
        whole, steady = np.asarray(case["whole"]), np.asarray(case["steady"])
        row = [
            case["label"],
            " / ".join(f"{s:.2f}" for s in whole),
            f"{whole.max() / whole.min():.2f}",
            " / ".join(f"{s:.2f}" for s in steady),
            f"{steady.max() / steady.min():.2f}",
            f"{case['rows_per_sample']:.2f}",
        ]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=400)
    parser.add_argument("--settle", type=int, default=200)
    parser.add_argument("--out", default="", help="the document (markdown)")
    parser.add_argument("--data", default="", help="the numbers behind it (JSON)")
    parser.add_argument("--render", default="", help="a saved --data JSON: --out from it alone")
    args = parser.parse_args(argv)
    if not args.render and not 0 <= args.settle < args.updates:  # else a table of NaN
        parser.error(f"--settle ({args.settle}) must be in [0, --updates) ({args.updates})")
    if args.render and not os.path.isfile(args.render):
        parser.error(f"--render: no such file {args.render!r}")
    if args.render:
        with open(args.render) as f:
            text = markdown(json.load(f))
    else:
        data = measure(args.updates, args.settle)
        text = markdown(data)
        if args.data:
            with open(args.data, "w") as f:
                json.dump(data, f, indent=1)
                f.write("\n")
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


def measure(updates: int, settle: int) -> dict:
    """Every case's per-worker mean staleness (whole run, after `settle`) and rows between."""
    import jax

    from experiments.paper import stamp

    jax.config.update("jax_num_cpu_devices", 8)  # one CPU device a worker, here too
    data = {
        "command": f"python -m experiments.async_staleness --updates {updates} --settle {settle}",
        "date": datetime.date.today().isoformat(),
        "stamp": stamp.stamp(),
        "updates": updates,
        "settle": settle,
        "cases": [],
    }
    for label, name, extra, linear in CASES:
        with tempfile.TemporaryDirectory(prefix="staleness_") as workdir:  # none left behind
            records = run_case(name, extra, linear, updates, workdir)
        data["cases"].append(
            {
                "label": label,
                "controller": name,
                "controller_args": extra,
                "linear_cost": linear,
                "whole": per_worker(records).tolist(),
                "steady": per_worker(records[settle:]).tolist(),
                "rows_per_sample": in_rows(records) / 128,
            }
        )
    return data


if __name__ == "__main__":
    sys.exit(main())
