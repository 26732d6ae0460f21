"""Per-worker mean staleness of async runs at the async HL8 core table (4/4/4/28).

    python -m experiments.async_staleness [--updates 400] [--settle 200] [--out PATH]

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=400)
    parser.add_argument("--settle", type=int, default=200)
    parser.add_argument("--out", default="")
    args = parser.parse_args(argv)
    import jax

    jax.config.update("jax_num_cpu_devices", 8)  # one CPU device a worker, here too
    lines = [
        "## Async staleness per worker at HL8",
        "",
        f"`python -m experiments.async_staleness --updates {args.updates} --settle "
        f"{args.settle}` ({datetime.date.today().isoformat()}): per-worker mean staleness at "
        f"async HL8 (cores 4/4/4/28), MLP on digits, W = 4, B = 128.",
        "",
        "Staleness here counts versions (updates applied between a worker's pull and its "
        "push). A version is one update of any size, so the last column also counts rows: the "
        "samples applied between pull and push, per sample, as a fraction of B "
        "(omnilearn_jax.analysis.staleness).",
        "",
        "| controller | all updates (w0..w3) | max/min | after update "
        f"{args.settle} (w0..w3) | max/min | rows per sample, all updates (x B) |",
        "|---|---|---|---|---|---|",
    ]
    for label, name, extra, linear in CASES:
        workdir = tempfile.mkdtemp(prefix="staleness_")
        records = run_case(name, extra, linear, args.updates, workdir)
        whole, steady = per_worker(records), per_worker(records[args.settle :])
        row = [
            label,
            " / ".join(f"{s:.2f}" for s in whole),
            f"{whole.max() / whole.min():.2f}",
            " / ".join(f"{s:.2f}" for s in steady),
            f"{steady.max() / steady.min():.2f}",
            f"{in_rows(records) / 128:.2f}",
        ]
        lines.append("| " + " | ".join(row) + " |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
