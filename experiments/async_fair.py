"""Async accuracy at equal time, fairly: each arm tuned, run to convergence, paired seeds.

    python -m experiments.async_fair --out /tmp/async_fair.jsonl [--budget 8] [--seeds 5]
    python -m experiments.async_fair_doc --data docs/results/async_fair.json  # the document

configs/paper_asp.py at async HL8 (cores 4/4/4/28), MLP on digits (`runlocal`), virtual clock
(cost (0.05 + 0.01 b) / cores), W = 4, B = 128, no bounds. Arms: uniform batches (static) and
the proportional controller. Settings: `weighting=share` with momentum 0 and 0.9, and
`weighting=mean` with linear learning-rate scaling (`asp.lr_scaling=linear`) and momentum 0.9
(with momentum 0 it is `share` at W times the learning rate, so it is not run twice).

1. Tuning: every (setting, arm, learning rate of the setting's grid) on the tuning seeds
   (100..); each arm keeps the rate with the best mean accuracy at the budget.
2. Evaluation: each arm at its own rate on seeds 0..N-1, the same seeds for both arms
   (paired: the same initial parameters and data order).
3. Control: the same runs with gradients at the server's current parameters (the same update
   order and sizes, no staleness; experiments/async_fresh.py).

Each run appends one JSON line (its eval curve, update count, staleness in versions and in
rows applied between pull and push, the commit it ran at) to `--out`; a rerun skips the runs
already there. `make report` runs it (experiments/paper/reproduce.py, part `async_fair`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time

import numpy as np

from benchmarks.args import writable

ARMS = ("static", "proportional")
# setting -> (weighting, lr_scaling, momentum, learning-rate grid). Under `share` a round of W
# updates is one BSP step; `mean` with linear scaling makes an update of B / W rows as large
# as `share`'s at W times the rate, hence its grid a quarter of share's.
SETTINGS = {
    "share_m0": ("share", "none", 0.0, (0.05, 0.15, 0.5, 1.5, 5.0)),
    "share_m0.9": ("share", "none", 0.9, (0.005, 0.015, 0.05, 0.15, 0.5)),
    "mean_linear_m0.9": ("mean", "linear", 0.9, (0.00125, 0.004, 0.0125, 0.04, 0.125)),
}
TUNE_SEEDS = (100, 101)


def config(arm: str, setting: str, lr: float, seed: int, budget: float, eval_every: int):
    from configs import paper_asp

    weighting, scaling, momentum, _ = SETTINGS[setting]
    c = paper_asp.get_config(f"hetero=hl8,controller={arm},runlocal,model=mlp")
    c.seed = seed
    c.asp.time_budget = budget
    c.asp.weighting, c.asp.lr_scaling = weighting, scaling
    c.optimizer.momentum, c.optimizer.learning_rate = momentum, lr
    c.train.num_steps = 100_000  # the budget ends the run
    c.train.eval_every, c.train.log_every = eval_every, 1
    c.train.checkpoint_every = 0
    c.wandb.mode = "disabled"
    return c


def run(key: dict, budget: float, eval_every: int, root: str) -> dict:
    """One run; returns its record (key, eval curve, staleness)."""
    from experiments.async_fresh import fresh_gradients
    from experiments.paper import stamp
    from omnilearn_jax.analysis.staleness import rows_between, weighted_mean
    from omnilearn_jax.run.job import train_and_evaluate
    from omnilearn_jax.run.runstore import read_metrics

    c = config(key["arm"], key["setting"], key["lr"], key["seed"], budget, eval_every)
    name = "_".join(str(v) for v in key.values())
    workdir = os.path.join(root, name)
    shutil.rmtree(workdir, ignore_errors=True)
    start = time.time()
    if key["fresh"]:
        with fresh_gradients():
            summary = train_and_evaluate(c, workdir)
    else:
        summary = train_and_evaluate(c, workdir)
    records = read_metrics(workdir)
    train = [r for r in records if "staleness" in r]
    evals = [r for r in records if "eval_accuracy" in r]
    s = np.array([r["staleness"] for r in train])
    b = np.array([r["worker_batch"] for r in train])
    workers = np.array([r["worker"] for r in train])
    rows = rows_between(s, b)
    shutil.rmtree(workdir, ignore_errors=True)
    return {
        **key,
        "budget": budget,
        "final_accuracy": float(summary["final_eval_accuracy"]),
        "updates": len(train),
        "curve": [[r["time"], r["eval_accuracy"]] for r in evals],
        "staleness_versions": float(s.mean()),
        "staleness_versions_by_sample": weighted_mean(s, b),
        "staleness_rows_by_sample": weighted_mean(rows, b),
        "rows_per_update": float(b.mean()),
        "staleness_rows_per_worker": [
            weighted_mean(rows[workers == k], b[workers == k]) for k in range(4)
        ],
        "updates_per_worker": np.bincount(workers, minlength=4).tolist(),
        "seconds": time.time() - start,
        "stamp": stamp.stamp(),  # the commit this run ran at (experiments/paper/stamp.py)
    }


def done_keys(path: str) -> dict:
    out = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                out[tuple(r[k] for k in ("setting", "arm", "lr", "seed", "fresh"))] = r
    return out


def best_lr(done: dict, setting: str, arm: str) -> float:
    """The grid rate with the best mean accuracy at the budget over the tuning seeds."""
    grid = SETTINGS[setting][3]
    score = {
        lr: np.mean([done[(setting, arm, lr, s, False)]["final_accuracy"] for s in TUNE_SEEDS])
        for lr in grid
    }
    return max(grid, key=lambda lr: score[lr])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="JSON lines, one a run (appended)")
    parser.add_argument("--budget", type=float, default=8.0, help="virtual seconds a run")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--eval_every", type=int, default=40, help="updates between evals")
    parser.add_argument("--workdir", default="/tmp/async_fair_runs")
    parser.add_argument("--settings", default=",".join(SETTINGS))
    parser.add_argument("--no_control", action="store_true")
    args = parser.parse_args(argv)
    settings = [s for s in args.settings.split(",") if s]
    bad = [s for s in settings if s not in SETTINGS]
    if bad or not settings:
        parser.error(f"--settings {bad or args.settings!r}: valid ones are {', '.join(SETTINGS)}")
    if not args.budget > 0 or args.seeds < 1 or args.eval_every < 1:
        parser.error("--budget must be > 0 s, --seeds and --eval_every >= 1")
    # Runs are resumed by (setting, arm, lr, seed, fresh): runs of another budget in --out
    # would be taken for this one's (a rerun at --budget 8 ran nothing and said nothing).
    if os.path.isdir(args.out):  # an IsADirectoryError traceback
        parser.error(f"--out {args.out} is a folder; it names the runs' JSON lines file")
    writable(parser, out=args.out)
    try:
        done = done_keys(args.out)
    except (ValueError, KeyError, TypeError):  # the study's document JSON: a KeyError
        parser.error(f"--out {args.out} holds no runs of this study (one JSON object a line)")
    budgets = {r.get("budget") for r in done.values()}
    if budgets - {args.budget}:
        parser.error(
            f"--out {args.out} holds runs of budget {sorted(budgets)}, not {args.budget}: give "
            f"another --out, or the same --budget to finish them"
        )
    import jax

    jax.config.update("jax_num_cpu_devices", 4)  # paper_asp: one CPU device a worker

    def ensure(setting, arm, lr, seed, fresh=False):
        key = {"setting": setting, "arm": arm, "lr": lr, "seed": seed, "fresh": fresh}
        if tuple(key.values()) in done_keys(args.out):
            return
        record = run(key, args.budget, args.eval_every, args.workdir)
        with open(args.out, "a") as f:
            f.write(json.dumps(record) + "\n")
        print(
            f"{setting} {arm} lr {lr} seed {seed} fresh {fresh}: "
            f"{record['final_accuracy']:.3f} ({record['seconds']:.0f} s)",
            flush=True,
        )

    for setting in settings:  # 1. tuning
        for arm in ARMS:
            for lr in SETTINGS[setting][3]:
                for seed in TUNE_SEEDS:
                    ensure(setting, arm, lr, seed)
    for setting in settings:  # 2. evaluation at each arm's own rate
        for seed in range(args.seeds):
            for arm in ARMS:
                ensure(setting, arm, best_lr(done_keys(args.out), setting, arm), seed)
    if not args.no_control:  # 3. the staleness-free control
        for setting in settings:
            for seed in range(args.seeds):
                for arm in ARMS:
                    ensure(setting, arm, best_lr(done_keys(args.out), setting, arm), seed, True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
